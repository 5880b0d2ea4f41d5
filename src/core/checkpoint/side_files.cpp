#include "core/checkpoint/side_files.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/checkpoint/source.hpp"
#include "core/file_kind.hpp"
#include "core/json_limits.hpp"
#include "vitreg/resize_filter.hpp"
#include "vitreg/error.hpp"

namespace vitreg::source {

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

const nlohmann::json* dig(const nlohmann::json& j, std::initializer_list<const char*> path) {
    const nlohmann::json* at = &j;
    for (const char* key : path) {
        if (!at->is_object() || !at->contains(key)) return nullptr;
        at = &(*at)[key];
    }
    return at->is_null() ? nullptr : at;
}

long json_count(const nlohmann::json& v, const std::string& file, const std::string& key) {
    if (!v.is_number_integer() || v.get<long>() <= 0 || v.get<long>() > (1 << 24))
        throw ConfigError(file + ": '" + key + "' is not a positive integer");
    return v.get<long>();
}

double json_number(const nlohmann::json& v, const std::string& file, const std::string& key) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) throw ConfigError(file + ": '" + key + "' is not a number");
    return v.get<double>();
}

std::array<float, 3> json_triple(const nlohmann::json& v, const std::string& file, const std::string& key) {
    if (!v.is_array() || v.size() != 3) throw ConfigError(file + ": '" + key + "' is not three numbers");
    std::array<float, 3> out{};
    for (int i = 0; i < 3; ++i) out[i] = static_cast<float>(json_number(v[i], file, key));
    return out;
}

const nlohmann::json* SideFiles::vision_cfg() const { return dig(open_clip, {"model_cfg", "vision_cfg"}); }
const nlohmann::json* SideFiles::pretrained() const { return dig(timm, {"pretrained_cfg"}); }

const nlohmann::json* SideFiles::timm_arg(const std::string& key) const {
    if (!timm_model) return nullptr;
    const auto& v = timm_model->arg(key);
    return v.is_null() ? nullptr : &v;
}

std::optional<long> SideFiles::cfg_int(const std::string& key) const {
    if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
    if (!cfg[key].is_number_integer() || cfg[key].get<long>() < 0)
        throw ConfigError(cfg_file + ": '" + key + "' is not a non-negative integer");
    return cfg[key].get<long>();
}

std::optional<double> SideFiles::cfg_float(const std::string& key) const {
    if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
    if (!cfg[key].is_number()) throw ConfigError(cfg_file + ": '" + key + "' is not a number");
    return cfg[key].get<double>();
}

std::optional<std::string> SideFiles::cfg_str(const std::string& key) const {
    if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
    if (!cfg[key].is_string()) throw ConfigError(cfg_file + ": '" + key + "' is not a string");
    return cfg[key].get<std::string>();
}

std::optional<bool> SideFiles::cfg_bool(const std::string& key) const {
    if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
    if (!cfg[key].is_boolean()) throw ConfigError(cfg_file + ": '" + key + "' is not true or false");
    return cfg[key].get<bool>();
}

std::optional<long> SideFiles::vision_count(const char* key) const {
    const auto* vision = vision_cfg();
    const auto* v = vision ? dig(*vision, {key}) : nullptr;
    if (!v) return std::nullopt;
    return json_count(*v, open_clip_file, std::string("model_cfg.vision_cfg.") + key);
}

MlpKind hf_activation(const SideFiles& side, const std::string& fallback) {
    const std::string act = side.cfg_str("hidden_act").value_or(fallback);
    if (act == "gelu") return MlpKind::Gelu;
    if (act == "quick_gelu") return MlpKind::QuickGelu;
    if (act == "gelu_pytorch_tanh" || act == "gelu_new") return MlpKind::GeluTanh;
    throw ConfigError(side.cfg_file + ": hidden_act = \"" + act +
                      "\" is not a setting vitreg runs (it runs gelu, quick_gelu, gelu_pytorch_tanh and gelu_new)");
}

namespace {

// A v4 CLIPConfig's vision_config_dict wins over vision_config (configuration_clip.py): what it
// states is read, and a value unlike vision_config's is refused with both.
void merge_vision_config_dict(SideFiles& s) {
    const auto* d = dig(s.top, {"vision_config_dict"});
    if (!d) return;
    if (!d->is_object() || !s.cfg.is_object()) throw ConfigError(s.cfg_file + ": 'vision_config_dict' is not an object");
    for (const auto& [key, value] : d->items()) {
        if (s.cfg.contains(key) && s.cfg[key] != value)
            throw ConfigError(s.cfg_file + ": vision_config_dict." + key + " = " + value.dump() + " but vision_config." + key +
                              " = " + s.cfg[key].dump() + "; transformers reads the first, vitreg refuses the contradiction");
        s.cfg[key] = value;
    }
}

}  // namespace

SideFiles read_side_files(const Source& source, const std::string& dir, const std::string& weights_file, int depth_limit) {
    SideFiles s;
    s.cfg_file = dir + "/config.json";
    s.open_clip_file = dir + "/open_clip_config.json";
    s.preprocessor_file = dir + "/preprocessor_config.json";
    switch (source.side_files) {
        case SideFormat::HfConfig:
        case SideFormat::HfTowerConfig:
            if (!is_file(s.cfg_file))
                throw ConfigError(weights_file + ": HF layout needs a sibling config.json (looked for " + s.cfg_file + ")");
            s.cfg = read_config_json(s.cfg_file, depth_limit);
            if (source.side_files == SideFormat::HfTowerConfig) {
                s.top = s.cfg;
                if (s.top.contains("vision_config")) {
                    if (!s.top["vision_config"].is_object()) throw ConfigError(s.cfg_file + ": 'vision_config' is not an object");
                    s.cfg = s.top["vision_config"];
                }
                merge_vision_config_dict(s);
            }
            if (source.reads_preprocessor && is_file(s.preprocessor_file))
                s.preprocessor = read_config_json(s.preprocessor_file, depth_limit);
            break;
        case SideFormat::OpenClipConfig:
            if (is_file(s.open_clip_file)) s.open_clip = read_config_json(s.open_clip_file, depth_limit);
            break;
        case SideFormat::TimmHubConfig:
            if (is_file(s.cfg_file)) {
                auto j = read_config_json(s.cfg_file, depth_limit);
                if (j.contains("architecture") || j.contains("pretrained_cfg")) s.timm = std::move(j);
            }
            break;
    }
    if (s.timm.contains("architecture")) {
        s.timm_model = timm_architecture(s.timm, s.cfg_file);
        s.architecture = s.timm_model->name;
    }
    return s;
}

namespace {

// timm's num_heads: model_args', or the definition's where its embed_dim is the tensors' width (a
// definition of another width describes other tensors: its heads would be a guess).
const nlohmann::json* timm_heads(const SideFiles& side, const Config& c) {
    const auto* n = side.timm_arg("num_heads");
    if (!n || side.timm_model->stated("num_heads")) return n;
    const auto* width = side.timm_arg("embed_dim");
    return width && width->is_number_integer() && width->get<long>() == c.dim ? n : nullptr;
}

// A named filter (open_clip's and timm's "interpolation"); "random" is a training transform.
void apply_interpolation(const nlohmann::json* v, const std::string& where, Config& c, Notes& notes) {
    if (!v || !v->is_string()) return;
    try {
        c.interpolation = parse_resize_filter(v->get<std::string>());
    } catch (const UsageError&) {
        notes.add(NoteTopic::Pixels, where + " asks for '" + v->get<std::string>() + "' resizing; vitreg resizes " +
                                         to_string(c.interpolation));
    }
}

// open_clip's preprocess_cfg.
void apply_open_clip_preprocess(const SideFiles& side, Config& c, Notes& notes) {
    if (const auto* pc = dig(side.open_clip, {"preprocess_cfg"})) {
        if (const auto* m = dig(*pc, {"mean"})) c.mean = json_triple(*m, side.open_clip_file, "preprocess_cfg.mean");
        if (const auto* s = dig(*pc, {"std"})) c.std = json_triple(*s, side.open_clip_file, "preprocess_cfg.std");
        apply_interpolation(dig(*pc, {"interpolation"}), side.open_clip_file, c, notes);
    }
}

}  // namespace

void hf_bilinear_squash(Config& c) {
    c.input_size = c.native_size();
    c.crop_pct = 1.0;
    c.eval_squash = true;
    c.interpolation = ResizeFilter::Bilinear;
}

namespace {

// A square side of HF's image processors: an int (v4's files) or {"height", "width"}.
std::optional<long> hf_square_side(const nlohmann::json& pp, const char* key, const std::string& file) {
    const auto* v = dig(pp, {key});
    if (!v || v->is_number_integer()) return v ? std::optional<long>(json_count(*v, file, key)) : std::nullopt;
    const auto* h = dig(*v, {"height"});
    const auto* w = dig(*v, {"width"});
    if (!h || !w || *h != *w)
        throw ConfigError(file + ": " + key + " = " + v->dump() + " is not a setting vitreg runs (it runs a square {\"height\", \"width\"} or one number)");
    return json_count(*h, file, std::string(key) + ".height");
}

// The squashing processors (SigLIP's, DINOv3's, ViT's): both sides to `size`; then a center crop
// of crop_size where do_center_crop is set (DeiT's, whose class sets it when the file is silent).
void apply_hf_squash(const SideFiles& side, Config& c) {
    const auto& pp = side.preprocessor;
    const std::string& file = side.preprocessor_file;
    const auto size = hf_square_side(pp, "size", file);
    if (size) {
        c.input_size = static_cast<int>(*size);
        c.crop_pct = 1.0;
    }
    bool center_crop = false;
    for (const char* key : {"image_processor_type", "feature_extractor_type"})
        if (const auto* t = dig(pp, {key}); t && t->is_string()) center_crop = t->get<std::string>().rfind("DeiT", 0) == 0;
    if (const auto* d = dig(pp, {"do_center_crop"})) {
        if (!d->is_boolean()) throw ConfigError(file + ": 'do_center_crop' is not true or false");
        center_crop = d->get<bool>();
    }
    const auto crop = center_crop ? hf_square_side(pp, "crop_size", file) : std::nullopt;
    if (!crop) return;
    if (*crop > c.input_size)
        throw ConfigError(file + ": crop_size " + std::to_string(*crop) + " is larger than size " + std::to_string(c.input_size));
    c.crop_pct = static_cast<double>(*crop) / static_cast<double>(c.input_size);
    c.input_size = static_cast<int>(*crop);
}

// HF's preprocessor_config.json.
void apply_hf_preprocessor(const SideFiles& side, Config& c) {
    if (!side.preprocessor.is_null()) {
        const auto& pp = side.preprocessor;
        const std::string& file = side.preprocessor_file;
        if (const auto* m = dig(pp, {"image_mean"})) c.mean = json_triple(*m, file, "image_mean");
        if (const auto* s = dig(pp, {"image_std"})) c.std = json_triple(*s, file, "image_std");
        const auto side_of = [&](const char* key, const char* inner) -> std::optional<long> {
            const auto* v = dig(pp, {key});
            if (!v) return std::nullopt;
            if (v->is_object()) v = dig(*v, {inner});
            if (!v) return std::nullopt;
            return json_count(*v, file, key);
        };
        // PIL's filter numbers, as HF's processors store them in "resample".
        if (const auto* r = dig(pp, {"resample"})) {
            static const ResizeFilter kPil[] = {ResizeFilter::Nearest, ResizeFilter::Lanczos, ResizeFilter::Bilinear,
                                                ResizeFilter::Bicubic, ResizeFilter::Box, ResizeFilter::Hamming};
            const long k = json_count(*r, file, "resample");
            if (k > 5) throw ConfigError(file + ": 'resample' " + std::to_string(k) + " is not a PIL filter (0-5)");
            c.interpolation = kPil[k];
        }
        if (c.eval_squash) {
            apply_hf_squash(side, c);
            return;
        }
        const auto crop = side_of("crop_size", "height");
        const auto shortest = side_of("size", "shortest_edge");
        if (crop) c.input_size = static_cast<int>(*crop);
        if (crop && shortest) c.crop_pct = static_cast<double>(*crop) / static_cast<double>(*shortest);
    }
}

// timm's pretrained_cfg.
void apply_timm_pretrained(const SideFiles& side, Config& c, Notes& notes) {
    if (const auto* pretrained = side.pretrained()) {
        const std::string pf = side.cfg_file + " pretrained_cfg";
        c.pipeline = PixelPipeline::Timm;  // a timm config beside any source makes the transform timm's
        if (const auto* m = dig(*pretrained, {"mean"})) c.mean = json_triple(*m, pf, "mean");
        if (const auto* s = dig(*pretrained, {"std"})) c.std = json_triple(*s, pf, "std");
        if (const auto* cp = dig(*pretrained, {"crop_pct"})) c.crop_pct = json_number(*cp, pf, "crop_pct");
        if (const auto* in = dig(*pretrained, {"input_size"})) {
            if (!in->is_array() || in->size() != 3) throw ConfigError(pf + ": 'input_size' is not [3, H, W]");
            const long ih = json_count((*in)[1], pf, "input_size"), iw = json_count((*in)[2], pf, "input_size");
            if (ih != iw)
                notes.add(NoteTopic::Pixels, "pretrained_cfg input_size is " + std::to_string(iw) + "x" + std::to_string(ih) +
                                                 "; --resize eval crops a square of the height");
            c.input_size = static_cast<int>(ih);
        }
        apply_interpolation(dig(*pretrained, {"interpolation"}), pf, c, notes);
        // timm's crop_mode: center (the default), squash (both sides to floor(input / crop_pct), then
        // the center crop), border.
        c.eval_squash = false;
        if (const auto* m = dig(*pretrained, {"crop_mode"}); m && m->is_string()) {
            if (m->get<std::string>() == "squash") c.eval_squash = true;
            else if (m->get<std::string>() != "center")
                notes.add(NoteTopic::Pixels, pf + " asks for crop_mode '" + m->get<std::string>() + "'; --resize eval crops the center");
        }
    }
}

}  // namespace

// What the configs beside the weights state over the defaults.
void apply_side_files(const Source& src, const SideFiles& side, Config& c, Notes& notes, bool activation_stated) {
    // Heads cannot be read off shapes.
    if (auto v = side.cfg_int("num_attention_heads")) {
        c.heads = static_cast<int>(*v);
    } else if (side.vision_cfg()) {
        const long head_width = side.vision_count("head_width").value_or(64);
        c.heads = static_cast<int>(c.dim / head_width);
        if (c.dim % head_width)
            throw ConfigError(side.open_clip_file + ": head_width " + std::to_string(head_width) + " does not divide the width " +
                              std::to_string(c.dim));
    } else if (const auto* n = timm_heads(side, c)) {
        c.heads = static_cast<int>(json_count(*n, side.cfg_file, "num_heads"));
    }
    if (c.positions == Positions::RopeEva) {
        if (const auto* r = side.timm_arg("ref_feat_shape")) {
            const std::string key = "ref_feat_shape";
            if (r->is_array() && r->size() == 2)
                c.rope_ref_grid = {static_cast<int>(json_count((*r)[0], side.cfg_file, key)),
                                   static_cast<int>(json_count((*r)[1], side.cfg_file, key))};
            else
                c.rope_ref_grid[0] = c.rope_ref_grid[1] = static_cast<int>(json_count(*r, side.cfg_file, key));
        }
    }
    if (c.positions == Positions::RopeAxial)
        if (auto t = side.cfg_float("rope_theta")) c.rope_theta = static_cast<float>(*t);
    // timm's global_pool: the architecture's, then the hub config's own (an attention-pool head
    // stays the model's own pooled feature).
    for (const auto* g : {side.timm_arg("global_pool"), dig(side.timm, {"global_pool"})})
        if (g && g->is_string() && c.pool != Pool::Map) {
            if (g->get<std::string>() == "avg") c.pool = Pool::Avg;
            else if (g->get<std::string>() == "token" && c.class_token) c.pool = Pool::Token;
        }
    if (src.activation && !(activation_stated && c.mlp != MlpKind::SwiGlu)) src.activation(c, side, notes);
    if (src.read_config) src.read_config(c, side, notes);
    if (auto v = side.cfg_float("layer_norm_eps")) c.eps = static_cast<float>(*v);
    if (const auto* e = side.timm_arg("norm_eps")) c.eps = static_cast<float>(json_number(*e, side.cfg_file, "norm_layer eps"));
    // The eval transform.
    apply_open_clip_preprocess(side, c, notes);
    apply_hf_preprocessor(side, c);
    apply_timm_pretrained(side, c, notes);
}

}  // namespace vitreg::source
