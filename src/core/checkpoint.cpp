#include "vitreg/checkpoint.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "json_limits.hpp"
#include "vitreg/parse_number.hpp"
#include "hub_cache.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

bool is_dir(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool is_file(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
std::string parent_dir(const std::string& p) {
    const auto slash = p.find_last_of('/');
    return slash == std::string::npos ? "." : p.substr(0, slash);
}
bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// The marker tensor of each layout and where its names start.
struct LayoutMatch {
    Layout layout;
    std::string prefix;
};

std::optional<LayoutMatch> detect_layout(const SafetensorsFile& f) {
    const std::string hf_marker = "embeddings.patch_embeddings.projection.weight";
    const std::string dino_marker = "patch_embed.proj.weight";
    for (const auto& name : f.names()) {
        if (ends_with(name, hf_marker)) return LayoutMatch{Layout::HF, name.substr(0, name.size() - hf_marker.size())};
    }
    for (const auto& name : f.names()) {
        if (ends_with(name, dino_marker)) {
            const std::string prefix = name.substr(0, name.size() - dino_marker.size());
            const bool timm_reg = f.has(prefix + "reg_token");
            return LayoutMatch{timm_reg ? Layout::TimmReg : Layout::Dinov2, prefix};
        }
    }
    return std::nullopt;
}

// HF names for the per-block tensors, keyed by the dinov2 suffix after "blocks.i.".
const std::pair<const char*, const char*> kHfBlockNames[] = {
    {"norm1.", "norm1."},
    {"norm2.", "norm2."},
    {"attn.proj.", "attention.output.dense."},
    {"attn.sinks", "attention.attention.sinks"},
    {"ls1.gamma", "layer_scale1.lambda1"},
    {"ls2.gamma", "layer_scale2.lambda1"},
    {"mlp.fc1.", "mlp.fc1."},
    {"mlp.fc2.", "mlp.fc2."},
    {"mlp.w12.", "mlp.weights_in."},
    {"mlp.w3.", "mlp.weights_out."},
};

const std::pair<const char*, const char*> kHfTopNames[] = {
    {"cls_token", "embeddings.cls_token"},
    {"register_tokens", "embeddings.register_tokens"},
    {"pos_embed", "embeddings.position_embeddings"},
    {"mask_token", "embeddings.mask_token"},
    {"patch_embed.proj.", "embeddings.patch_embeddings.projection."},
    {"norm.", "layernorm."},
};

std::vector<std::string> hf_names(const std::string& canonical) {
    if (starts_with(canonical, "blocks.")) {
        const auto dot = canonical.find('.', 7);
        const std::string index = canonical.substr(7, dot - 7);
        const std::string rest = canonical.substr(dot + 1);
        const std::string layer = "encoder.layer." + index + ".";
        if (starts_with(rest, "attn.qkv.")) {
            const std::string leaf = rest.substr(9);  // weight | bias
            return {layer + "attention.attention.query." + leaf, layer + "attention.attention.key." + leaf,
                    layer + "attention.attention.value." + leaf};
        }
        for (const auto& [from, to] : kHfBlockNames)
            if (starts_with(rest, from)) return {layer + to + rest.substr(std::string(from).size())};
        return {layer + rest};
    }
    for (const auto& [from, to] : kHfTopNames)
        if (starts_with(canonical, from)) return {to + canonical.substr(std::string(from).size())};
    return {canonical};
}

// Strings in __metadata__ / numbers in config.json, read with the file named on error.
struct Hints {
    std::string file;
    std::map<std::string, std::string> meta;
    nlohmann::json cfg;  // HF config.json, or null
    std::string cfg_file;

    std::optional<std::string> str(const std::string& key) const {
        auto it = meta.find(key);
        if (it == meta.end()) return std::nullopt;
        return it->second;
    }
    std::optional<long> meta_int(const std::string& key) const {
        auto s = str(key);
        if (!s) return std::nullopt;
        const auto v = parse_integer(*s, 0, 1 << 24);
        if (!v) throw ConfigError(file + ": metadata '" + key + "' = '" + *s + "' is not a valid count");
        return *v;
    }
    std::optional<double> meta_float(const std::string& key) const {
        auto s = str(key);
        if (!s) return std::nullopt;
        char* end = nullptr;
        const double v = std::strtod(s->c_str(), &end);
        if (s->empty() || *end != '\0' || !std::isfinite(v))
            throw ConfigError(file + ": metadata '" + key + "' = '" + *s + "' is not a number");
        return v;
    }
    std::optional<std::array<float, 3>> meta_triple(const std::string& key) const {
        auto s = str(key);
        if (!s) return std::nullopt;
        std::array<float, 3> out{};
        std::stringstream ss(*s);
        std::string item;
        int n = 0;
        while (std::getline(ss, item, ',')) {
            char* end = nullptr;
            const double v = std::strtod(item.c_str(), &end);
            if (n >= 3 || item.empty() || *end != '\0' || !std::isfinite(v))
                throw ConfigError(file + ": metadata '" + key + "' = '" + *s + "' is not three comma-separated numbers");
            out[n++] = static_cast<float>(v);
        }
        if (n != 3) throw ConfigError(file + ": metadata '" + key + "' = '" + *s + "' is not three numbers");
        return out;
    }
    std::optional<long> cfg_int(const std::string& key) const {
        if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
        if (!cfg[key].is_number_integer() || cfg[key].get<long>() < 0)
            throw ConfigError(cfg_file + ": '" + key + "' is not a non-negative integer");
        return cfg[key].get<long>();
    }
    std::optional<double> cfg_float(const std::string& key) const {
        if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
        if (!cfg[key].is_number()) throw ConfigError(cfg_file + ": '" + key + "' is not a number");
        return cfg[key].get<double>();
    }
};

nlohmann::json read_config_json(const std::string& path, int max_depth) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ConfigError(path + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    if (text.size() > (16u << 20)) throw ConfigError(path + ": larger than 16 MB, not a model config");
    try {
        auto j = parse_json_bounded(text, max_depth);
        if (!j.is_object()) throw ConfigError(path + ": not a JSON object");
        return j;
    } catch (const ConfigError&) {
        throw;
    } catch (const std::exception& e) {
        throw ConfigError(path + ": not valid JSON: " + e.what());
    }
}

void agree(const std::string& file, const std::string& what, long stated, long from_tensors) {
    if (stated != from_tensors)
        throw ConfigError(file + ": " + what + " is stated as " + std::to_string(stated) + " but the tensors say " +
                          std::to_string(from_tensors));
}

}  // namespace

Checkpoint::Checkpoint(const std::string& path, const ConfigOverrides& overrides) {
    std::string file = path;
    if (is_dir(path)) {
        file = path + "/model.safetensors";
        if (!is_file(file)) {
            std::string why = "folder holds no model.safetensors";
            if (is_file(path + "/model.safetensors.index.json"))
                why = "holds a sharded model.safetensors.index.json; vitreg reads one model.safetensors";
            else if (is_file(path + "/pytorch_model.bin"))
                why = "holds pytorch_model.bin but no model.safetensors; vitreg reads safetensors (convert with "
                      "safetensors.torch.save_file)";
            throw CheckpointError(path + ": " + why);
        }
    }
    file_ = std::make_unique<SafetensorsFile>(file, overrides.limits);
    config_ = resolve(parent_dir(file), overrides);
}

std::vector<std::string> Checkpoint::source_names(const std::string& canonical) const {
    std::vector<std::string> names;
    switch (config_.layout) {
        case Layout::Dinov2: names = {canonical}; break;
        case Layout::TimmReg: names = {canonical == "register_tokens" ? "reg_token" : canonical}; break;
        case Layout::HF: names = hf_names(canonical); break;
    }
    for (auto& n : names) n = prefix_ + n;
    return names;
}

bool Checkpoint::has(const std::string& canonical) const {
    for (const auto& n : source_names(canonical))
        if (!file_->has(n)) return false;
    return true;
}

std::vector<const TensorView*> Checkpoint::parts(const std::string& canonical) const {
    std::vector<const TensorView*> out;
    for (const auto& n : source_names(canonical)) out.push_back(&file_->get(n));
    return out;
}

std::vector<float> Checkpoint::load(const std::string& canonical, const std::vector<std::int64_t>& shape) const {
    const auto views = parts(canonical);
    // Parts (HF query/key/value) split dim 0 evenly.
    std::vector<std::int64_t> part_shape = shape;
    part_shape[0] /= static_cast<std::int64_t>(views.size());
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(std::max<std::int64_t>(part_shape[0], 0)) * views.size());
    for (const auto* v : views) {
        if (v->shape != part_shape) {
            TensorView expected;
            expected.shape = part_shape;
            throw CheckpointError(path() + ": tensor '" + v->name + "' has shape " + v->shape_string() +
                                  ", expected " + expected.shape_string());
        }
        auto f = v->to_float();
        file_->release(*v);
        out.insert(out.end(), f.begin(), f.end());
    }
    return out;
}

Config Checkpoint::resolve(const std::string& dir, const ConfigOverrides& overrides) {
    const std::string& fpath = file_->path();
    auto match = detect_layout(*file_);
    if (!match)
        throw CheckpointError(fpath + ": not a ViT checkpoint vitreg knows (no 'patch_embed.proj.weight' nor "
                                      "'embeddings.patch_embeddings.projection.weight')");
    Config c;
    c.layout = match->layout;
    prefix_ = match->prefix;
    config_.layout = c.layout;  // source_names() needs the layout from here on

    Hints h{fpath, file_->metadata(), nullptr, dir + "/config.json"};
    if (c.layout == Layout::HF) {
        if (!is_file(h.cfg_file))
            throw ConfigError(fpath + ": HF layout needs a sibling config.json (looked for " + h.cfg_file + ")");
        h.cfg = read_config_json(h.cfg_file, overrides.limits.max_json_depth);
    }

    // Patch embedding: [D, 3, p, p].
    const auto& pe = *parts("patch_embed.proj.weight").front();
    if (pe.shape.size() != 4 || pe.shape[1] != 3 || pe.shape[2] != pe.shape[3] || pe.shape[0] <= 0 || pe.shape[2] <= 0)
        throw CheckpointError(fpath + ": tensor '" + pe.name + "' has shape " + pe.shape_string() +
                              ", expected [D, 3, p, p]");
    c.dim = static_cast<int>(pe.shape[0]);
    c.patch = static_cast<int>(pe.shape[2]);
    c.dtype = file_->dominant_dtype();

    while (has("blocks." + std::to_string(c.depth) + ".norm1.weight")) ++c.depth;
    if (c.depth == 0) throw CheckpointError(fpath + ": no transformer blocks found ('blocks.0.norm1.weight')");

    if (has("register_tokens")) {
        const auto& r = *parts("register_tokens").front();
        if (r.shape.size() != 3 || r.shape[0] != 1 || r.shape[2] != c.dim)
            throw CheckpointError(fpath + ": tensor '" + r.name + "' has shape " + r.shape_string() +
                                  ", expected [1, R, " + std::to_string(c.dim) + "]");
        c.registers = static_cast<int>(r.shape[1]);
    }

    const auto& pos = *parts("pos_embed").front();
    if (pos.shape.size() != 3 || pos.shape[0] != 1 || pos.shape[2] != c.dim)
        throw CheckpointError(fpath + ": tensor '" + pos.name + "' has shape " + pos.shape_string() + ", expected [1, " +
                              (c.layout == Layout::TimmReg ? "M*M" : "1+M*M") + ", " + std::to_string(c.dim) + "]");
    const std::int64_t npos = pos.shape[1] - (c.layout == Layout::TimmReg ? 0 : 1);
    c.grid = static_cast<int>(std::lround(std::sqrt(static_cast<double>(std::max<std::int64_t>(npos, 0)))));
    if (npos <= 0 || std::int64_t(c.grid) * c.grid != npos)
        throw CheckpointError(fpath + ": tensor '" + pos.name + "' holds " + std::to_string(npos) +
                              " patch positions, not a square grid");

    if (has("blocks.0.mlp.w12.weight")) {
        c.mlp = MlpKind::SwiGlu;
        const auto& w = *parts("blocks.0.mlp.w12.weight").front();
        if (w.shape.size() != 2 || w.shape[0] % 2 != 0)
            throw CheckpointError(fpath + ": tensor '" + w.name + "' has shape " + w.shape_string() + ", expected [2H, D]");
        c.mlp_hidden = static_cast<int>(w.shape[0] / 2);
    } else {
        const auto& w = *parts("blocks.0.mlp.fc1.weight").front();
        if (w.shape.size() != 2)
            throw CheckpointError(fpath + ": tensor '" + w.name + "' has shape " + w.shape_string() + ", expected [H, D]");
        c.mlp_hidden = static_cast<int>(w.shape[0]);
    }
    c.layer_scale = has("blocks.0.ls1.gamma");
    c.has_sinks = has("blocks.0.attn.sinks");

    // Heads cannot be read off shapes.
    if (auto v = h.meta_int("heads")) {
        c.heads = static_cast<int>(*v);
    } else if (auto v2 = h.cfg_int("num_attention_heads")) {
        c.heads = static_cast<int>(*v2);
    } else {
        c.heads = c.dim / 64;
        c.notes.push_back("heads not stated in metadata or config.json; assumed D/64 = " + std::to_string(c.heads));
    }
    if (c.heads <= 0 || c.dim % c.heads != 0)
        throw ConfigError(fpath + ": " + std::to_string(c.heads) + " heads do not divide the width " + std::to_string(c.dim));
    c.head_dim = c.dim / c.heads;

    // Whatever metadata or config.json states must agree with the tensors.
    if (auto v = h.meta_int("patch_size")) agree(fpath, "metadata patch_size", *v, c.patch);
    if (auto v = h.meta_int("num_registers")) agree(fpath, "metadata num_registers", *v, c.registers);
    if (auto v = h.cfg_int("hidden_size")) agree(h.cfg_file, "hidden_size", *v, c.dim);
    if (auto v = h.cfg_int("num_hidden_layers")) agree(h.cfg_file, "num_hidden_layers", *v, c.depth);
    if (auto v = h.cfg_int("patch_size")) agree(h.cfg_file, "patch_size", *v, c.patch);
    if (auto v = h.cfg_int("num_register_tokens")) agree(h.cfg_file, "num_register_tokens", *v, c.registers);
    if (h.cfg.is_object() && h.cfg.contains("use_swiglu_ffn") && h.cfg["use_swiglu_ffn"].is_boolean())
        agree(h.cfg_file, "use_swiglu_ffn", h.cfg["use_swiglu_ffn"].get<bool>(), c.mlp == MlpKind::SwiGlu);

    // Attention kind: sink logits in the file mean `sink`.
    const auto stated = h.str("attention");
    c.trained_attention = c.has_sinks ? AttentionKind::Sink : AttentionKind::Softmax;
    if (stated) {
        AttentionKind k;
        try {
            k = parse_attention_kind(*stated);
        } catch (const UsageError& e) {
            throw ConfigError(fpath + ": metadata " + e.what());
        }
        if (k == AttentionKind::Sink && !c.has_sinks)
            throw ConfigError(fpath + ": metadata says attention=sink but there are no 'blocks.i.attn.sinks' tensors");
        if (k != AttentionKind::Sink && c.has_sinks)
            throw ConfigError(fpath + ": metadata says attention=" + *stated + " but the file holds sink logits");
        c.trained_attention = k;
    }
    c.attention = overrides.attention.value_or(c.trained_attention);
    if (c.retrofit())
        c.notes.push_back("attention retrofitted: trained with " + to_string(c.trained_attention) + ", running " +
                          to_string(c.attention) +
                          (c.attention == AttentionKind::Sink && !c.has_sinks ? " with sink logit 0 in every head" : ""));

    // Position-embedding resampling follows the checkpoint's origin unless stated.
    if (auto s = h.str("pos_interp")) {
        try {
            c.pos_interp = parse_pos_interp(*s);
        } catch (const UsageError& e) {
            throw ConfigError(fpath + ": metadata " + e.what());
        }
    } else if (c.layout == Layout::HF) {
        c.pos_interp = c.registers > 0 ? PosInterp::Antialias : PosInterp::Size;
    } else {
        c.pos_interp = (c.registers > 0 || c.layout == Layout::TimmReg) ? PosInterp::Antialias : PosInterp::Offset;
    }
    if (overrides.pos_interp) c.pos_interp = *overrides.pos_interp;

    if (auto s = h.str("evict")) {
        if (*s != "sink") throw ConfigError(fpath + ": metadata evict='" + *s + "' (the only stored eviction is 'sink')");
        c.evict_sink = true;
        c.notes.push_back("the checkpoint evicts each head's sink key on every run (calibrated sink, evicted)");
    }
    if (auto v = h.meta_float("layer_norm_eps")) c.eps = static_cast<float>(*v);
    else if (auto v2 = h.cfg_float("layer_norm_eps")) c.eps = static_cast<float>(*v2);
    if (!(c.eps > 0)) throw ConfigError(fpath + ": layer_norm_eps must be positive");
    if (auto v = h.meta_triple("image_mean")) c.mean = *v;
    if (auto v = h.meta_triple("image_std")) c.std = *v;
    for (float s : c.std)
        if (!(s > 0)) throw ConfigError(fpath + ": image_std must be positive");

    for (const auto& name : file_->names())
        if (starts_with(name, prefix_)) c.parameters += file_->get(name).numel();
    return c;
}

namespace {

std::vector<std::string> weight_dirs() {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("VITREG_WEIGHTS")) dirs.emplace_back(env);
#ifdef VITREG_SOURCE_WEIGHTS_DIR
    dirs.emplace_back(VITREG_SOURCE_WEIGHTS_DIR);
#endif
#ifdef VITREG_INSTALL_WEIGHTS_DIR
    dirs.emplace_back(VITREG_INSTALL_WEIGHTS_DIR);
#endif
    return dirs;
}

}  // namespace

std::string resolve_model_path(const std::string& spec) {
    if (is_file(spec) || is_dir(spec)) return spec;
    if (looks_like_hub_id(spec)) {
        std::string looked;
        if (auto snapshot = hf_cache_snapshot(spec, &looked)) return *snapshot;
        throw CheckpointError(spec + ": " + looked + "; vitreg reads the local cache and downloads nothing: fetch it first, "
                              "e.g. huggingface-cli download " + spec.substr(0, spec.find('@')));
    }
    if (spec.find('/') == std::string::npos) {
        for (const auto& d : weight_dirs()) {
            const std::string base = d + "/" + spec;
            if (is_file(base + ".safetensors")) return base + ".safetensors";
            if (is_file(base + "/model.safetensors") || is_file(base)) return base;
        }
    }
    std::string known;
    for (const auto& n : shipped_models()) known += (known.empty() ? "" : ", ") + n;
    throw CheckpointError(spec + ": no such checkpoint file, folder or shipped name" +
                          (known.empty() ? std::string() : " (shipped: " + known + ")"));
}

}  // namespace vitreg


namespace vitreg {

std::vector<std::string> shipped_models() {
    std::set<std::string> names;
    for (const auto& d : weight_dirs()) {
        DIR* dir = ::opendir(d.c_str());
        if (!dir) continue;
        while (const dirent* e = ::readdir(dir)) {
            const std::string n = e->d_name;
            if (n[0] == '.') continue;
            if (ends_with(n, ".safetensors") && is_file(d + "/" + n)) names.insert(n.substr(0, n.size() - 12));
            else if (is_file(d + "/" + n + "/model.safetensors")) names.insert(n);
        }
        ::closedir(dir);
    }
    return {names.begin(), names.end()};
}

}  // namespace vitreg
