#include "vitreg/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <type_traits>

#include "vitreg/error.hpp"
#include "core/parse_number.hpp"

namespace vitreg {

std::string to_string(AttentionKind k) { return name_of(k); }
std::string to_string(PosInterp p) { return name_of(p); }
std::string to_string(MlpKind m) { return name_of(m); }
std::string to_string(Family f) { return name_of(f); }
std::string to_string(Pool p) { return name_of(p); }
std::string to_string(PixelPipeline p) { return name_of(p); }
std::string to_string(Positions p) { return name_of(p); }

AttentionKind parse_attention_kind(const std::string& s) { return parse_enum<AttentionKind>(s); }
PosInterp parse_pos_interp(const std::string& s) { return parse_enum<PosInterp>(s); }
PixelPipeline parse_pixel_pipeline(const std::string& s) { return parse_enum<PixelPipeline>(s); }

int Config::eval_resize() const {
    return static_cast<int>(std::floor(static_cast<double>(input_size) / crop_pct));
}

nlohmann::json to_json(const Config& c) {
    return {
        {"layout", c.source},  // the checkpoint format read (`vitreg info`'s layout row)
        {"family", to_string(c.family)},
        {"dim", c.dim},
        {"depth", c.depth},
        {"heads", c.heads},
        {"head_dim", c.head_dim},
        {"patch_size", c.patch},
        {"num_registers", c.registers},
        {"grid", c.grid},
        {"mlp_hidden", c.mlp_hidden},
        {"act", to_string(c.mlp)},
        {"attention", to_string(c.attention)},
        {"trained_attention", to_string(c.trained_attention)},
        {"sinks", c.has_sinks},
        {"layer_scale", c.layer_scale},
        {"pos_interp", to_string(c.pos_interp)},
        {"positions", to_string(c.positions)},
        {"rope_theta", c.rope_theta},
        {"rope_ref_grid", c.rope_ref_grid},
        {"layer_norm_eps", c.eps},
        {"class_token", c.class_token},
        {"pos_embed_class", c.pos_embed_class},
        {"pre_norm", c.pre_norm},
        {"patch_bias", c.patch_bias},
        {"qkv_bias", c.qkv_bias},
        {"final_norm", c.final_norm},
        {"attn_norm", c.attn_norm},
        {"mlp_norm", c.mlp_norm},
        {"pool", to_string(c.pool)},
        {"fc_norm", c.fc_norm},
        {"proj_dim", c.proj_dim},
        {"input_size", c.input_size},
        {"crop_pct", c.crop_pct},
        {"eval_squash", c.eval_squash},
        {"image_pipeline", to_string(c.pipeline)},
        {"interpolation", to_string(c.interpolation)},
        {"image_mean", c.mean},
        {"image_std", c.std},
        {"dtype", to_string(c.dtype)},
        {"parameters", c.parameters},
        {"evict", c.evict_sink ? "sink" : "none"},  // the metadata's evict=sink
        {"notes", c.notes},
    };
}

namespace {

// Reads config_from_json's keys, naming the key on every fault.
class Reader {
public:
    explicit Reader(const nlohmann::json& j) : j_(j) {
        if (!j_.is_object()) throw ConfigError("config: expected a JSON object, got " + std::string(j_.type_name()));
    }

    template <class T>
    void read(const char* key, T& out) const {
        const auto& v = at(key);
        // (nlohmann converts between booleans and numbers, and truncates reals, without a word)
        if constexpr (std::is_same_v<T, bool>) {
            if (!v.is_boolean()) bad(key, v, "not true or false");
        } else if constexpr (std::is_integral_v<T>) {
            if (!v.is_number_integer()) bad(key, v, "not an integer");
        } else if constexpr (std::is_floating_point_v<T>) {
            if (!v.is_number()) bad(key, v, "not a number");
        }
        try {
            out = v.template get<T>();
        } catch (const nlohmann::json::exception&) {
            bad(key, v, "the wrong type");
        }
    }

    template <class Enum>
    void read_enum(const char* key, Enum& out) const {
        const auto& v = at(key);
        if (!v.is_string()) bad(key, v, "not a name");
        try {
            out = parse_enum<Enum>(v.template get<std::string>());
        } catch (const UsageError& e) {
            throw ConfigError(std::string("config key '") + key + "': " + e.what());
        }
    }

private:
    const nlohmann::json& at(const char* key) const {
        const auto it = j_.find(key);
        if (it == j_.end()) throw ConfigError(std::string("config key '") + key + "' is missing");
        return *it;
    }
    [[noreturn]] static void bad(const char* key, const nlohmann::json& v, const std::string& why) {
        throw ConfigError(std::string("config key '") + key + "' = " + v.dump() + " is " + why);
    }

    const nlohmann::json& j_;
};

std::string number(double v, int digits) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

std::string joined_numbers(const nlohmann::json& values, int digits) {
    std::string out;
    for (const auto& v : values) out += (out.empty() ? "" : ",") + number(v.get<double>(), digits);
    return out;
}

}  // namespace

Config config_from_json(const nlohmann::json& j) {
    const Reader r(j);
    Config c;
    r.read("layout", c.source);
    r.read_enum("family", c.family);
    r.read("dim", c.dim);
    r.read("depth", c.depth);
    r.read("heads", c.heads);
    r.read("head_dim", c.head_dim);
    r.read("patch_size", c.patch);
    r.read("num_registers", c.registers);
    r.read("grid", c.grid);
    r.read("mlp_hidden", c.mlp_hidden);
    r.read_enum("act", c.mlp);
    r.read_enum("attention", c.attention);
    r.read_enum("trained_attention", c.trained_attention);
    r.read("sinks", c.has_sinks);
    r.read("layer_scale", c.layer_scale);
    r.read_enum("pos_interp", c.pos_interp);
    r.read_enum("positions", c.positions);
    r.read("rope_theta", c.rope_theta);
    r.read("rope_ref_grid", c.rope_ref_grid);
    r.read("layer_norm_eps", c.eps);
    r.read("class_token", c.class_token);
    r.read("pos_embed_class", c.pos_embed_class);
    r.read("pre_norm", c.pre_norm);
    r.read("patch_bias", c.patch_bias);
    r.read("qkv_bias", c.qkv_bias);
    r.read("final_norm", c.final_norm);
    r.read("attn_norm", c.attn_norm);
    r.read("mlp_norm", c.mlp_norm);
    r.read_enum("pool", c.pool);
    r.read("fc_norm", c.fc_norm);
    r.read("proj_dim", c.proj_dim);
    r.read("input_size", c.input_size);
    r.read("crop_pct", c.crop_pct);
    r.read("eval_squash", c.eval_squash);
    r.read_enum("image_pipeline", c.pipeline);
    r.read_enum("interpolation", c.interpolation);
    r.read("image_mean", c.mean);
    r.read("image_std", c.std);
    r.read_enum("dtype", c.dtype);
    r.read("parameters", c.parameters);
    std::string evict;
    r.read("evict", evict);
    if (evict != "sink" && evict != "none")
        throw ConfigError("config key 'evict' = '" + evict + "' (expected none or sink)");
    c.evict_sink = evict == "sink";
    r.read("notes", c.notes);
    return c;
}

std::map<std::string, std::string> config_metadata(const nlohmann::json& config) {
    const Config defaults;
    const auto text = [&](const char* key) { return config.at(key).get<std::string>(); };
    const auto count = [&](const char* key) { return std::to_string(config.at(key).get<long long>()); };
    std::map<std::string, std::string> meta = {
        {"heads", count("heads")},
        {"patch_size", count("patch_size")},
        {"num_registers", count("num_registers")},
        {"attention", text("attention")},
        {"pos_interp", text("pos_interp")},
        {"layer_norm_eps", number(config.at("layer_norm_eps").get<double>(), 9)},
        {"image_mean", joined_numbers(config.at("image_mean"), 9)},
        {"image_std", joined_numbers(config.at("image_std"), 9)},
        // (a family's default may be either: SigLIP's HF and timm transforms differ)
        {"eval_squash", config.at("eval_squash").get<bool>() ? "1" : "0"},
    };
    if (text("evict") == "sink") meta["evict"] = "sink";
    // What the canonical names do not say about the other families (docs/design.md, "Families");
    // SwiGLU's tensors say so themselves.
    if (text("family") != to_string(defaults.family)) meta["family"] = text("family");
    if (text("act") == to_string(MlpKind::QuickGelu) || text("act") == to_string(MlpKind::GeluTanh)) meta["act"] = text("act");
    if (text("positions") != to_string(Positions::Learned)) {
        meta["positions"] = text("positions");
        meta["rope_theta"] = number(config.at("rope_theta").get<double>(), 9);
        if (text("positions") == to_string(Positions::RopeEva)) meta["rope_ref_grid"] = joined_numbers(config.at("rope_ref_grid"), 9);
    }
    if (config.at("input_size").get<int>() != defaults.input_size || config.at("crop_pct").get<double>() != defaults.crop_pct) {
        meta["input_size"] = count("input_size");
        meta["crop_pct"] = number(config.at("crop_pct").get<double>(), 17);
    }
    // The eval transform's rules, which the canonical names no longer tell.
    if (text("image_pipeline") != to_string(defaults.pipeline)) meta["image_pipeline"] = text("image_pipeline");
    if (text("interpolation") != to_string(defaults.interpolation)) meta["interpolation"] = text("interpolation");
    return meta;
}

namespace {

// The metadata's strings, read with the file named on error.
class MetadataReader {
public:
    MetadataReader(const std::map<std::string, std::string>& meta, const std::string& file) : meta_(meta), file_(file) {}

    const std::string* text(const std::string& key) const {
        const auto it = meta_.find(key);
        return it == meta_.end() ? nullptr : &it->second;
    }
    template <class Int>
    void count(const std::string& key, Int& out) const {
        const auto* s = text(key);
        if (!s) return;
        const auto v = parse_integer(*s, 0, 1 << 24);
        if (!v) throw ConfigError(file_ + ": metadata '" + key + "' = '" + *s + "' is not a valid count");
        out = static_cast<Int>(*v);
    }
    template <class Real>
    void real(const std::string& key, Real& out) const {
        const auto* s = text(key);
        if (!s) return;
        char* end = nullptr;
        const double v = std::strtod(s->c_str(), &end);
        if (s->empty() || *end != '\0' || !std::isfinite(v))
            throw ConfigError(file_ + ": metadata '" + key + "' = '" + *s + "' is not a number");
        out = static_cast<Real>(v);
    }
    void triple(const std::string& key, std::array<float, 3>& out) const {
        const auto* s = text(key);
        if (!s) return;
        std::array<float, 3> values{};
        std::stringstream ss(*s);
        std::string item;
        int n = 0;
        while (std::getline(ss, item, ',')) {
            char* end = nullptr;
            const double v = std::strtod(item.c_str(), &end);
            if (n >= 3 || item.empty() || *end != '\0' || !std::isfinite(v))
                throw ConfigError(file_ + ": metadata '" + key + "' = '" + *s + "' is not three comma-separated numbers");
            values[n++] = static_cast<float>(v);
        }
        if (n != 3) throw ConfigError(file_ + ": metadata '" + key + "' = '" + *s + "' is not three numbers");
        out = values;
    }
    // A name among `allowed` (every name of the table when empty), refused as "metadata key='value' (expected ...)".
    template <class Enum>
    void named(const std::string& key, Enum& out, std::vector<Enum> allowed = {}) const {
        const auto* s = text(key);
        if (!s) return;
        if (allowed.empty())
            for (const auto& e : EnumTable<Enum>::names) allowed.push_back(e.value);
        const auto v = find_enum<Enum>(*s);
        if (!v || std::find(allowed.begin(), allowed.end(), *v) == allowed.end()) {
            std::vector<std::string> names;
            for (const Enum a : allowed) names.push_back(name_of(a));
            throw ConfigError(file_ + ": metadata " + key + "='" + *s + "' (expected " + choices_text(names) + ")");
        }
        out = *v;
    }
    // A name read by `parse` (a parse_* function), its UsageError prefixed by "metadata" + `joint`, as the
    // loader words each key.
    template <class Enum>
    void parsed(const std::string& key, Enum& out, const char* joint, Enum (*parse)(const std::string&)) const {
        const auto* s = text(key);
        if (!s) return;
        try {
            out = parse(*s);
        } catch (const UsageError& e) {
            throw ConfigError(file_ + ": metadata" + joint + e.what());
        }
    }
    [[noreturn]] void refuse(const std::string& what) const { throw ConfigError(file_ + ": metadata " + what); }

private:
    const std::map<std::string, std::string>& meta_;
    const std::string& file_;
};

}  // namespace

void apply_config_metadata(const std::map<std::string, std::string>& meta, Config& c, const std::string& file) {
    const MetadataReader m(meta, file);
    m.count("heads", c.heads);
    m.count("patch_size", c.patch);
    m.count("num_registers", c.registers);
    m.parsed("attention", c.trained_attention, " ", parse_attention_kind);
    if (m.text("attention")) c.attention = c.trained_attention;
    m.parsed("pos_interp", c.pos_interp, " ", parse_pos_interp);
    m.real("layer_norm_eps", c.eps);
    m.triple("image_mean", c.mean);
    m.triple("image_std", c.std);
    if (const auto* e = m.text("evict")) {
        if (*e != "sink") m.refuse("evict='" + *e + "' (the only stored eviction is 'sink')");
        c.evict_sink = true;
    }
    m.named("family", c.family);
    if (c.mlp != MlpKind::SwiGlu) m.named("act", c.mlp, {MlpKind::Gelu, MlpKind::QuickGelu, MlpKind::GeluTanh});
    if (const auto* s = m.text("eval_squash")) c.eval_squash = *s == "1";
    m.named("positions", c.positions);
    m.real("rope_theta", c.rope_theta);
    if (const auto* g = m.text("rope_ref_grid")) {
        const auto parts = split(*g, ',');
        std::optional<long> rh, rw;
        if (parts.size() == 2) rh = parse_integer(parts[0], 1, 1 << 16), rw = parse_integer(parts[1], 1, 1 << 16);
        if (!rh || !rw) m.refuse("rope_ref_grid='" + *g + "' is not two counts H,W");
        c.rope_ref_grid = {static_cast<int>(*rh), static_cast<int>(*rw)};
    }
    m.count("input_size", c.input_size);
    m.real("crop_pct", c.crop_pct);
    m.parsed("image_pipeline", c.pipeline, ": ", parse_pixel_pipeline);
    m.parsed("interpolation", c.interpolation, ": ", parse_resize_filter);
}

}  // namespace vitreg
