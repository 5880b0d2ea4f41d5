#include "vitreg/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "json_limits.hpp"
#include "vitreg/parse_number.hpp"
#include "file_kind.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

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

std::optional<LayoutMatch> detect_layout(const TensorFile& f) {
    const std::string hf_marker = "embeddings.patch_embeddings.projection.weight";
    const std::string hf_dinov3_marker = "embeddings.patch_embeddings.weight";  // DINOv3: a conv without `.projection`
    const std::string hf_clip_marker = "vision_model.embeddings.patch_embedding.weight";
    const std::string open_clip_marker = "visual.conv1.weight";
    const std::string dino_marker = "patch_embed.proj.weight";
    for (const auto& name : f.names()) {
        if (ends_with(name, hf_marker)) return LayoutMatch{Layout::HF, name.substr(0, name.size() - hf_marker.size())};
        if (ends_with(name, hf_dinov3_marker))
            return LayoutMatch{Layout::HFDinov3, name.substr(0, name.size() - hf_dinov3_marker.size())};
    }
    // CLIP: HF names start at `vision_model.` (the projection sits beside it); OpenCLIP's at `visual.`.
    for (const auto& name : f.names()) {
        if (ends_with(name, hf_clip_marker)) {
            // SigLIP's tower has CLIP's names but no class token (and a MAP head).
            const std::string prefix = name.substr(0, name.size() - hf_clip_marker.size());
            const bool cls = f.has(prefix + "vision_model.embeddings.class_embedding");
            return LayoutMatch{cls ? Layout::HFClip : Layout::HFSiglip, prefix};
        }
        if (ends_with(name, open_clip_marker))
            return LayoutMatch{Layout::OpenClip, name.substr(0, name.size() - std::string("conv1.weight").size())};
    }
    for (const auto& name : f.names()) {
        if (ends_with(name, dino_marker)) {
            const std::string prefix = name.substr(0, name.size() - dino_marker.size());
            const bool timm_reg = f.has(prefix + "reg_token");
            const bool dinov3 = f.has(prefix + "storage_tokens") || f.has(prefix + "rope_embed.periods");
            // timm's Eva: the q and v biases apart, q/k/v projections, SwiGLU's halves, gamma_1.
            bool eva = false;
            for (const char* t : {"blocks.0.attn.q_bias", "blocks.0.attn.q_proj.weight", "blocks.0.mlp.fc1_g.weight",
                                  "blocks.0.gamma_1"})
                eva = eva || f.has(prefix + t);
            return LayoutMatch{dinov3 ? Layout::Dinov3Hub : eva ? Layout::TimmEva : timm_reg ? Layout::TimmReg : Layout::Dinov2,
                               prefix};
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

// CLIP vision towers (DESIGN.md §7). Canonical names on the left; `proj` is [D, E] as OpenCLIP
// stores it (HF's visual_projection.weight is its transpose: Checkpoint::load transposes).
using NamePairs = std::vector<std::pair<std::string, std::string>>;

const NamePairs kOpenClipTop = {
    {"cls_token", "class_embedding"},   {"pos_embed", "positional_embedding"}, {"patch_embed.proj.", "conv1."},
    {"norm_pre.", "ln_pre."},           {"norm.", "ln_post."},                 {"proj", "proj"},
};
const NamePairs kOpenClipBlock = {
    {"norm1.", "ln_1."},
    {"norm2.", "ln_2."},
    {"attn.qkv.weight", "attn.in_proj_weight"},
    {"attn.qkv.bias", "attn.in_proj_bias"},
    {"attn.proj.", "attn.out_proj."},
    {"mlp.fc1.", "mlp.c_fc."},
    {"mlp.fc2.", "mlp.c_proj."},
    {"ls1.gamma", "ls_1.gamma"},
    {"ls2.gamma", "ls_2.gamma"},
};
const NamePairs kHfClipTop = {
    {"cls_token", "vision_model.embeddings.class_embedding"},
    {"pos_embed", "vision_model.embeddings.position_embedding.weight"},
    {"patch_embed.proj.", "vision_model.embeddings.patch_embedding."},
    {"norm_pre.", "vision_model.pre_layrnorm."},  // sic
    {"norm.", "vision_model.post_layernorm."},
    {"proj", "visual_projection.weight"},
};
// SigLIP's tower: CLIP's block names, no class token or pre-norm, and the attention-pool head
// (canonical names timm's AttentionPoolLatent's, with q, k and v as one in_proj).
const NamePairs kHfSiglipTop = {
    {"pos_embed", "vision_model.embeddings.position_embedding.weight"},
    {"patch_embed.proj.", "vision_model.embeddings.patch_embedding."},
    {"norm.", "vision_model.post_layernorm."},
    {"attn_pool.latent", "vision_model.head.probe"},
    {"attn_pool.qkv.weight", "vision_model.head.attention.in_proj_weight"},
    {"attn_pool.qkv.bias", "vision_model.head.attention.in_proj_bias"},
    {"attn_pool.proj.", "vision_model.head.attention.out_proj."},
    {"attn_pool.norm.", "vision_model.head.layernorm."},
    {"attn_pool.mlp.", "vision_model.head.mlp."},
};
const NamePairs kHfClipBlock = {
    {"norm1.", "layer_norm1."},         {"norm2.", "layer_norm2."}, {"attn.proj.", "self_attn.out_proj."},
    {"mlp.fc1.", "mlp.fc1."},           {"mlp.fc2.", "mlp.fc2."},
    {"attn.qkv.", "self_attn.q_proj.|self_attn.k_proj.|self_attn.v_proj."},
};
// DINOv3 (HF DINOv3ViTModel): no position embedding; the gated MLP's gate and up make SwiGLU's w12.
const NamePairs kHfDinov3Top = {
    {"cls_token", "embeddings.cls_token"},
    {"register_tokens", "embeddings.register_tokens"},
    {"mask_token", "embeddings.mask_token"},
    {"patch_embed.proj.", "embeddings.patch_embeddings."},
    {"norm.", "norm."},
};
// DINOv3's own (torch hub) names: dinov2's, but for the registers and the gated MLP's halves.
const NamePairs kDinov3HubTop = {{"register_tokens", "storage_tokens"}};
const NamePairs kDinov3HubBlock = {{"mlp.w12.", "mlp.w1.|mlp.w2."}};
const NamePairs kHfDinov3Block = {
    {"norm1.", "norm1."},
    {"norm2.", "norm2."},
    {"attn.qkv.", "attention.q_proj.|attention.k_proj.|attention.v_proj."},
    {"attn.proj.", "attention.o_proj."},
    {"ls1.gamma", "layer_scale1.lambda1"},
    {"ls2.gamma", "layer_scale2.lambda1"},
    {"mlp.fc1.", "mlp.up_proj."},
    {"mlp.fc2.", "mlp.down_proj."},
    {"mlp.w12.", "mlp.gate_proj.|mlp.up_proj."},
    {"mlp.w3.", "mlp.down_proj."},
};

// timm's Eva: the attention fused (qkv with q_bias and v_bias; the k bias a zero buffer it does
// not save) or as q/k/v projections (k without bias); the MLP plain, SwiGLU packed in fc1 (the
// gate first, timm's GluMlp) or SwiGLU as fc1_g and fc1_x (then mlp.norm before fc2).
NamePairs eva_block_names(const TensorFile& f, const std::string& prefix) {
    const std::string b = prefix + "blocks.0.";
    NamePairs names = {{"ls1.gamma", "gamma_1"}, {"ls2.gamma", "gamma_2"}};
    if (f.has(b + "attn.q_proj.weight")) names.push_back({"attn.qkv.", "attn.q_proj.|attn.k_proj.|attn.v_proj."});
    else names.push_back({"attn.qkv.bias", "attn.q_bias|attn.k_bias|attn.v_bias"});
    const auto width = [&](const std::string& name, std::size_t dim) -> std::int64_t {
        if (!f.has(b + name)) return -1;
        const auto& shape = f.get(b + name).shape;
        return shape.size() == 2 ? shape[dim] : -1;
    };
    if (f.has(b + "mlp.fc1_g.weight")) {
        names.push_back({"mlp.w12.", "mlp.fc1_g.|mlp.fc1_x."});
        names.push_back({"mlp.w3.", "mlp.fc2."});
    } else if (width("mlp.fc1.weight", 0) > 0 && width("mlp.fc1.weight", 0) == 2 * width("mlp.fc2.weight", 1)) {
        names.push_back({"mlp.w12.", "mlp.fc1."});
        names.push_back({"mlp.w3.", "mlp.fc2."});
    }
    return names;
}

// One translation table per level: `blocks.i.` maps to `block_prefix` + i + ".". A top-level
// entry matches its name exactly, or as a prefix when it ends in '.'. A target "a.|b.|c." names
// parts stored apart and joined along dim 0 (HF's q, k and v). Unknown names pass through
// unchanged (and then are missing).
std::vector<std::string> table_names(const std::string& canonical, const NamePairs& top, const std::string& block_prefix,
                                     const NamePairs& block) {
    const auto swap = [](const std::string& name, const NamePairs& pairs) -> std::optional<std::vector<std::string>> {
        for (const auto& [from, to] : pairs) {
            if (from.back() == '.' ? !starts_with(name, from) : name != from) continue;
            std::vector<std::string> out;
            for (const auto& part : split(to, '|')) out.push_back(part + name.substr(from.size()));
            return out;
        }
        return std::nullopt;
    };
    if (starts_with(canonical, "blocks.")) {
        const auto dot = canonical.find('.', 7);
        const std::string layer = block_prefix + canonical.substr(7, dot - 7) + ".";
        auto names = swap(canonical.substr(dot + 1), block).value_or(std::vector<std::string>{canonical.substr(dot + 1)});
        for (auto& n : names) n = layer + n;
        return names;
    }
    return swap(canonical, top).value_or(std::vector<std::string>{canonical});
}

// Shape without its leading 1s: OpenCLIP stores class_embedding [D] where dinov2 has [1, 1, D].
std::vector<std::int64_t> squeezed(const std::vector<std::int64_t>& shape) {
    std::size_t k = 0;
    while (k + 1 < shape.size() && shape[k] == 1) ++k;
    return std::vector<std::int64_t>(shape.begin() + static_cast<std::ptrdiff_t>(k), shape.end());
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    TensorView v;
    v.shape = shape;
    return v.shape_string();
}

// side M when n == M*M (M > 0), else 0.
int square_side(std::int64_t n) {
    if (n <= 0) return 0;
    const auto m = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
    return m * m == n ? static_cast<int>(m) : 0;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

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
    std::optional<std::string> cfg_str(const std::string& key) const {
        if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
        if (!cfg[key].is_string()) throw ConfigError(cfg_file + ": '" + key + "' is not a string");
        return cfg[key].get<std::string>();
    }
};

// A value at `path` in a JSON object, or null when any step is missing.
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

// OpenAI's CLIP normalization (DESIGN.md §7).
constexpr std::array<float, 3> kClipMean{0.48145466f, 0.4578275f, 0.40821073f};
constexpr std::array<float, 3> kClipStd{0.26862954f, 0.26130258f, 0.27577711f};

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
        // The weights a hub folder holds, safetensors first (HF, open_clip).
        file.clear();
        for (const char* name : {"model.safetensors", "open_clip_model.safetensors", "pytorch_model.bin",
                                 "open_clip_pytorch_model.bin"})
            if (is_file(path + "/" + name)) {
                file = path + "/" + name;
                break;
            }
        if (file.empty()) {
            std::string why = "folder holds no model.safetensors nor pytorch_model.bin";
            if (is_file(path + "/model.safetensors.index.json") || is_file(path + "/pytorch_model.bin.index.json"))
                why = "holds a sharded model (an .index.json); vitreg reads one model.safetensors or pytorch_model.bin";
            throw CheckpointError(path + ": " + why);
        }
    }
    file_ = open_tensor_file(file, overrides);
    config_ = resolve(parent_dir(file), overrides);
}

std::vector<std::string> Checkpoint::source_names(const std::string& canonical) const {
    std::vector<std::string> names;
    switch (config_.layout) {
        case Layout::Dinov2:
            names = {canonical};
            // timm's AttentionPoolLatent (vit_*_siglip_*) keeps q [D] and kv [2D] apart.
            if (starts_with(canonical, "attn_pool.qkv.") && !file_->has(prefix_ + canonical) &&
                file_->has(prefix_ + "attn_pool.kv.weight")) {
                const std::string leaf = canonical.substr(14);
                names = {"attn_pool.q." + leaf, "attn_pool.kv." + leaf};
            }
            break;
        case Layout::TimmReg: names = {canonical == "register_tokens" ? "reg_token" : canonical}; break;
        case Layout::HF: names = hf_names(canonical); break;
        case Layout::OpenClip:
            names = table_names(canonical, kOpenClipTop, "transformer.resblocks.", kOpenClipBlock);
            break;
        case Layout::HFClip:
            names = table_names(canonical, kHfClipTop, "vision_model.encoder.layers.", kHfClipBlock);
            break;
        case Layout::HFSiglip:
            names = table_names(canonical, kHfSiglipTop, "vision_model.encoder.layers.", kHfClipBlock);
            break;
        case Layout::HFDinov3: names = table_names(canonical, kHfDinov3Top, "layer.", kHfDinov3Block); break;
        case Layout::Dinov3Hub: names = table_names(canonical, kDinov3HubTop, "blocks.", kDinov3HubBlock); break;
        case Layout::TimmEva: names = table_names(canonical, {}, "blocks.", eva_block_); break;
    }
    if (canonical == "proj" && !proj_source_.empty()) names = {proj_source_};
    for (auto& n : names) n = prefix_ + n;
    return names;
}

// Stored [E, D] where the canonical `proj` is [D, E]: HF's visual_projection.weight, timm's head.
bool Checkpoint::proj_transposed() const { return config_.layout == Layout::HFClip || !proj_source_.empty(); }

// A bias stored in parts (HF's q, k and v) may leave a part out: that part is zero (DINOv3's k
// has no bias, nor has EVA-02's).
namespace {
bool part_may_be_absent(const std::string& canonical, std::size_t parts) {
    return parts > 1 && canonical.size() > 5 && canonical.compare(canonical.size() - 5, 5, ".bias") == 0;
}
}  // namespace

bool Checkpoint::has(const std::string& canonical) const {
    const auto names = source_names(canonical);
    std::size_t present = 0;
    for (const auto& n : names) present += file_->has(n) ? 1 : 0;
    return present == names.size() || (present > 0 && part_may_be_absent(canonical, names.size()));
}

std::vector<const TensorView*> Checkpoint::parts(const std::string& canonical) const {
    const auto names = source_names(canonical);
    const bool optional = part_may_be_absent(canonical, names.size()) && has(canonical);
    std::vector<const TensorView*> out;
    for (const auto& n : names) out.push_back(optional && !file_->has(n) ? nullptr : &file_->get(n));
    return out;
}

// DINOv3's qkv keeps a k bias it never uses: `bias_mask` beside it (1 kept, 0 masked; the forward
// computes bias · mask) says which. A masked entry is zero here, whatever the file holds.
void Checkpoint::apply_bias_mask(const TensorView& bias, std::vector<float>& values) const {
    const std::string mask_name = bias.name + "_mask";
    if (bias.name.size() < 5 || bias.name.compare(bias.name.size() - 5, 5, ".bias") != 0 || !file_->has(mask_name)) return;
    const auto& m = file_->get(mask_name);
    if (m.numel() != static_cast<std::int64_t>(values.size()))
        throw CheckpointError(path() + ": tensor '" + mask_name + "' has shape " + m.shape_string() + ", expected that of '" +
                              bias.name + "' " + bias.shape_string());
    const auto mask = m.to_float();
    file_->release(m);
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (mask[i] == 1.0f) continue;
        if (mask[i] != 0.0f && !std::isnan(mask[i]))
            throw CheckpointError(path() + ": tensor '" + mask_name + "' holds " + std::to_string(mask[i]) +
                                  " at " + std::to_string(i) + " (a bias mask holds 0 or 1)");
        values[i] = 0.0f;
    }
}

std::vector<float> Checkpoint::load(const std::string& canonical, const std::vector<std::int64_t>& shape) const {
    const auto views = parts(canonical);
    const bool transpose = canonical == "proj" && proj_transposed() && shape.size() == 2;
    // Parts (HF query/key/value) split dim 0 evenly, unless stored otherwise (below).
    std::vector<std::int64_t> part_shape = transpose ? std::vector<std::int64_t>{shape[1], shape[0]} : shape;
    part_shape[0] /= static_cast<std::int64_t>(views.size());
    // Parts of unequal rows (timm's attention pool: q [D], kv [2D]) when every part is stored,
    // each a whole multiple of the smallest and all of them the whole.
    std::vector<std::int64_t> rows(views.size(), part_shape[0]);
    if (views.size() > 1 && std::none_of(views.begin(), views.end(), [](const TensorView* v) { return v == nullptr; })) {
        std::int64_t total = 0, least = INT64_MAX;
        for (const auto* v : views) least = std::min(least, v->shape.empty() ? 0 : v->shape[0]);
        bool whole = least > 0;
        for (std::size_t i = 0; i < views.size() && whole; ++i) {
            rows[i] = views[i]->shape[0];
            whole = rows[i] % least == 0;
            total += rows[i];
        }
        if (!whole || total != (transpose ? shape[1] : shape[0])) rows.assign(views.size(), part_shape[0]);
    }
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(std::max<std::int64_t>(part_shape[0], 0)) * views.size());
    for (std::size_t i = 0; i < views.size(); ++i) {
        const TensorView* v = views[i];
        part_shape[0] = rows[i];
        if (!v) {  // a bias part the checkpoint leaves out
            out.insert(out.end(), static_cast<std::size_t>(std::max<std::int64_t>(part_shape[0], 0)), 0.0f);
            continue;
        }
        if (v->shape != part_shape && squeezed(v->shape) != squeezed(part_shape))
            throw CheckpointError(path() + ": tensor '" + v->name + "' has shape " + v->shape_string() +
                                  ", expected " + shape_text(part_shape));
        auto f = v->to_float();
        file_->release(*v);
        apply_bias_mask(*v, f);
        out.insert(out.end(), f.begin(), f.end());
    }
    if (transpose) {
        const std::size_t rows = static_cast<std::size_t>(shape[0]), cols = static_cast<std::size_t>(shape[1]);
        std::vector<float> t(out.size());
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j) t[i * cols + j] = out[j * rows + i];
        out.swap(t);
    }
    return out;
}

namespace {

// What the configs beside the weights may name (DESIGN.md §7, §10): anything else is refused by
// its name, never guessed at from the tensor names (a SigLIP folder has CLIP's names).
const char* const kRuns =
    "vitreg runs HF model_type dinov2, dinov2_with_registers, dinov3_vit, clip, clip_vision_model, siglip and "
    "siglip_vision_model; timm's vit_*, "
    "deit_*, deit3_*, eva02_* and eva_* architectures; open_clip's own ViT towers";

// The HF model types vitreg runs, and the layout of their tensors.
std::optional<Layout> hf_model_type_layout(const std::string& t) {
    if (t == "dinov2" || t == "dinov2_with_registers") return Layout::HF;
    if (t == "clip" || t == "clip_vision_model") return Layout::HFClip;
    if (t == "siglip" || t == "siglip_vision_model") return Layout::HFSiglip;
    if (t == "dinov3_vit") return Layout::HFDinov3;
    return std::nullopt;
}

// The HF model classes vitreg runs, and the layout of their tensors.
std::optional<Layout> hf_architecture_layout(const std::string& a) {
    for (const char* k : {"Dinov2Model", "Dinov2WithRegistersModel", "Dinov2ForImageClassification",
                          "Dinov2WithRegistersForImageClassification"})
        if (a == k) return Layout::HF;
    for (const char* k : {"CLIPModel", "CLIPVisionModel", "CLIPVisionModelWithProjection"})
        if (a == k) return Layout::HFClip;
    for (const char* k : {"SiglipModel", "SiglipVisionModel"})
        if (a == k) return Layout::HFSiglip;
    if (a == "DINOv3ViTModel") return Layout::HFDinov3;
    return std::nullopt;
}

// timm names the family first; these variants change what the tensors mean (an attention-pool
// head, a distillation token, rotary positions).
std::string unknown_timm_architecture(const std::string& a) {
    if (starts_with(a, "eva02_") || starts_with(a, "eva_")) {
        // eva02_enormous: post-norm blocks (use_post_norm), the same tensor names in another order
        if (contains(a, "enormous")) return "has post-norm blocks (use_post_norm), which vitreg does not run";
        return {};
    }
    const bool family = starts_with(a, "vit_") || starts_with(a, "deit_") || starts_with(a, "deit3_");
    if (!family) return "is not a ViT vitreg runs";
    for (const char* v : {"distilled", "rope"})
        if (a.find(v) != std::string::npos) return "is a " + std::string(v) + " variant, which vitreg does not run";
    return {};
}

// Refuses a checkpoint whose config.json or open_clip_config.json names a model vitreg does not
// run, or one its tensors' layout contradicts. `layout` is what the tensor names say (none: no
// layout vitreg knows).
void refuse_unknown_model(const std::string& dir, const std::optional<Layout>& layout, int depth_limit) {
    const std::string cfg_file = dir + "/config.json";
    if (is_file(cfg_file)) {
        const nlohmann::json j = read_config_json(cfg_file, depth_limit);
        // HF-named tensors must be the family the config names (a vitreg-converted file beside
        // its HF config.json carries its own metadata and is not held to it).
        const bool hf_names =
            layout && (*layout == Layout::HF || *layout == Layout::HFClip || *layout == Layout::HFSiglip ||
                       *layout == Layout::HFDinov3);
        const auto check = [&](const std::string& what, const std::string& name, const std::optional<Layout>& want) {
            if (!want) throw ConfigError(cfg_file + ": " + what + " '" + name + "' is not a model vitreg runs (" + kRuns + ")");
            if (hf_names && *layout != *want)
                throw ConfigError(cfg_file + ": " + what + " '" + name + "' does not match the tensors beside it (" +
                                  to_string(*layout) + " names)");
        };
        if (const auto* type = dig(j, {"model_type"}); type && type->is_string())
            check("model_type", type->get<std::string>(), hf_model_type_layout(type->get<std::string>()));
        if (const auto* arch = dig(j, {"architectures"}); arch && arch->is_array())
            for (const auto& a : *arch)
                if (a.is_string()) check("architectures names", a.get<std::string>(), hf_architecture_layout(a.get<std::string>()));
        if (const auto* a = dig(j, {"architecture"}); a && a->is_string()) {
            const std::string name = a->get<std::string>();
            const std::string why = unknown_timm_architecture(name);
            if (!why.empty()) throw ConfigError(cfg_file + ": timm architecture '" + name + "' " + why + " (" + kRuns + ")");
            // timm's Eva and VisionTransformer name their tensors apart: the config and the
            // tensors must tell the same family.
            const bool eva_name = starts_with(name, "eva");
            if (layout && (*layout == Layout::TimmEva) != eva_name &&
                (*layout == Layout::TimmEva || *layout == Layout::Dinov2 || *layout == Layout::TimmReg))
                throw ConfigError(cfg_file + ": timm architecture '" + name + "' does not match the tensors beside it (" +
                                  (*layout == Layout::TimmEva ? "timm Eva names" : "timm VisionTransformer names") + ")");
        }
    }
    const std::string clip_file = dir + "/open_clip_config.json";
    if (is_file(clip_file)) {
        const nlohmann::json j = read_config_json(clip_file, depth_limit);
        if (const auto* t = dig(j, {"model_cfg", "vision_cfg", "timm_model_name"}); t && t->is_string() && !t->get<std::string>().empty())
            throw ConfigError(clip_file + ": the vision tower is timm's '" + t->get<std::string>() +
                              "', not open_clip's own ViT (" + kRuns + ")");
    }
}

}  // namespace

Config Checkpoint::resolve(const std::string& dir, const ConfigOverrides& overrides) {
    const std::string& fpath = file_->path();
    auto match = detect_layout(*file_);
    refuse_unknown_model(dir, match ? std::optional<Layout>(match->layout) : std::nullopt,
                         overrides.limits.max_json_depth);
    if (!match)
        throw CheckpointError(fpath + ": not a ViT checkpoint vitreg knows (no 'patch_embed.proj.weight', "
                                      "'embeddings.patch_embeddings.projection.weight', 'embeddings.patch_embeddings.weight', "
                                      "'vision_model.embeddings.patch_embedding.weight' nor 'visual.conv1.weight')");
    Config c;
    c.layout = match->layout;
    prefix_ = match->prefix;
    config_.layout = c.layout;  // source_names() needs the layout from here on
    if (c.layout == Layout::TimmEva) eva_block_ = eva_block_names(*file_, prefix_);
    const bool clip_layout = c.layout == Layout::OpenClip || c.layout == Layout::HFClip;
    const bool hf_tower = c.layout == Layout::HFClip || c.layout == Layout::HFSiglip;  // `vision_model.` of a two-tower model
    const bool timm_names = c.layout == Layout::Dinov2 || c.layout == Layout::TimmReg;
    const bool dinov3_hf = c.layout == Layout::HFDinov3;
    const bool dinov3 = dinov3_hf || c.layout == Layout::Dinov3Hub;
    const bool eva = c.layout == Layout::TimmEva;

    // Hyper-parameters beside the weights: HF's config.json (for HF CLIP its vision_config),
    // OpenCLIP's open_clip_config.json, an HF-hub timm repo's config.json (architecture,
    // pretrained_cfg), HF CLIP's preprocessor_config.json.
    Hints h{fpath, file_->metadata(), nullptr, dir + "/config.json"};
    nlohmann::json top, open_clip, timm, preprocessor;
    const std::string open_clip_file = dir + "/open_clip_config.json", preprocessor_file = dir + "/preprocessor_config.json";
    const int depth_limit = overrides.limits.max_json_depth;
    if (c.layout == Layout::HF || hf_tower || dinov3_hf) {
        if (!is_file(h.cfg_file))
            throw ConfigError(fpath + ": HF layout needs a sibling config.json (looked for " + h.cfg_file + ")");
        h.cfg = read_config_json(h.cfg_file, depth_limit);
        if (hf_tower) {
            top = h.cfg;
            if (top.contains("vision_config")) {
                if (!top["vision_config"].is_object()) throw ConfigError(h.cfg_file + ": 'vision_config' is not an object");
                h.cfg = top["vision_config"];
            }
        }
        if ((hf_tower || dinov3_hf) && is_file(preprocessor_file)) preprocessor = read_config_json(preprocessor_file, depth_limit);
    } else if (c.layout == Layout::OpenClip) {
        if (is_file(open_clip_file)) open_clip = read_config_json(open_clip_file, depth_limit);
    } else if (is_file(h.cfg_file)) {
        auto j = read_config_json(h.cfg_file, depth_limit);
        if (j.contains("architecture") || j.contains("pretrained_cfg")) timm = std::move(j);
    }
    const nlohmann::json* vision_cfg = dig(open_clip, {"model_cfg", "vision_cfg"});
    const nlohmann::json* pretrained = dig(timm, {"pretrained_cfg"});
    std::string architecture;
    if (const auto* a = dig(timm, {"architecture"})) {
        if (!a->is_string()) throw ConfigError(h.cfg_file + ": 'architecture' is not a string");
        architecture = a->get<std::string>();
    }

    // Patch embedding: [D, 3, p, p].
    const auto& pe = *parts("patch_embed.proj.weight").front();
    if (pe.shape.size() != 4 || pe.shape[1] != 3 || pe.shape[2] != pe.shape[3] || pe.shape[0] <= 0 || pe.shape[2] <= 0)
        throw CheckpointError(fpath + ": tensor '" + pe.name + "' has shape " + pe.shape_string() +
                              ", expected [D, 3, p, p]");
    c.dim = static_cast<int>(pe.shape[0]);
    c.patch = static_cast<int>(pe.shape[2]);
    c.dtype = file_->dominant_dtype();
    c.patch_bias = has("patch_embed.proj.bias");

    while (has("blocks." + std::to_string(c.depth) + ".norm1.weight")) ++c.depth;
    if (c.depth == 0) throw CheckpointError(fpath + ": no transformer blocks found ('blocks.0.norm1.weight')");

    c.class_token = has("cls_token");
    if (c.class_token) {
        const auto& t = *parts("cls_token").front();
        if (squeezed(t.shape) != std::vector<std::int64_t>{c.dim})
            throw CheckpointError(fpath + ": tensor '" + t.name + "' has shape " + t.shape_string() + ", expected [1, 1, " +
                                  std::to_string(c.dim) + "]");
    }
    if (has("register_tokens")) {
        const auto& r = *parts("register_tokens").front();
        if (r.shape.size() != 3 || r.shape[0] != 1 || r.shape[2] != c.dim)
            throw CheckpointError(fpath + ": tensor '" + r.name + "' has shape " + r.shape_string() +
                                  ", expected [1, R, " + std::to_string(c.dim) + "]");
        c.registers = static_cast<int>(r.shape[1]);
    }

    // Positions: rotary for DINOv3, rotary beside pos_embed for EVA-02 (or a converted file's
    // metadata), else a learned pos_embed.
    if (dinov3) {
        c.positions = Positions::RopeAxial;
    } else if (auto v = h.str("positions")) {
        if (*v != "learned" && *v != "rope-axial" && *v != "rope-eva")
            throw ConfigError(fpath + ": metadata positions='" + *v + "' (expected learned, rope-axial or rope-eva)");
        c.positions = *v == "rope-axial" ? Positions::RopeAxial : *v == "rope-eva" ? Positions::RopeEva : Positions::Learned;
    } else if (eva) {
        // The tensors cannot say: timm's model definitions do. Every eva02_* rotates (and has
        // SwiGLU); EVA-01's eva_* does not (nor has SwiGLU).
        const bool swiglu = has("blocks.0.mlp.w12.weight");
        if (starts_with(architecture, "eva02_")) c.positions = Positions::RopeEva;
        else if (!architecture.empty()) c.positions = Positions::Learned;
        else {
            c.positions = swiglu ? Positions::RopeEva : Positions::Learned;
            c.notes.push_back(std::string("no timm config.json names the architecture: ") +
                              (swiglu ? "EVA-02's rotary positions assumed (its SwiGLU MLP)"
                                      : "EVA-01's learned positions only assumed (no SwiGLU)"));
        }
    }
    if (c.positions == Positions::RopeEva) {
        // timm's RotaryEmbeddingCat: temperature 1e4; ref_feat_shape (16, 16) in every eva02_* definition.
        c.rope_theta = 10000.0f;
        c.rope_ref_grid = {16, 16};
        if (const auto* r = dig(timm, {"model_args", "ref_feat_shape"})) {
            const std::string key = "model_args.ref_feat_shape";
            if (r->is_array() && r->size() == 2)
                c.rope_ref_grid = {static_cast<int>(json_count((*r)[0], h.cfg_file, key)),
                                   static_cast<int>(json_count((*r)[1], h.cfg_file, key))};
            else
                c.rope_ref_grid[0] = c.rope_ref_grid[1] = static_cast<int>(json_count(*r, h.cfg_file, key));
        }
        if (auto g = h.str("rope_ref_grid")) {
            const auto parts = split(*g, ',');
            std::optional<long> rh, rw;
            if (parts.size() == 2) rh = parse_integer(parts[0], 1, 1 << 16), rw = parse_integer(parts[1], 1, 1 << 16);
            if (!rh || !rw) throw ConfigError(fpath + ": metadata rope_ref_grid='" + *g + "' is not two counts H,W");
            c.rope_ref_grid = {static_cast<int>(*rh), static_cast<int>(*rw)};
        }
    }
    if (c.positions == Positions::RopeAxial) {
        if (has("pos_embed")) throw CheckpointError(fpath + ": rotary positions and a learned pos_embed: one or the other");
        c.pos_embed_class = false;
        const long image = dinov3_hf ? h.cfg_int("image_size").value_or(224) : h.meta_int("input_size").value_or(224);
        c.grid = static_cast<int>(std::max<long>(1, image / c.patch));  // the native input's grid (nothing is resampled)
        if (auto t = h.cfg_float("rope_theta")) c.rope_theta = static_cast<float>(*t);
    } else {
        // pos_embed covers the patches, plus a class-token row unless the checkpoint is timm's
        // no_embed_class (its row count says which; the class token and registers then get none).
        const auto& pos = *parts("pos_embed").front();
        const auto pos_shape = squeezed(pos.shape);
        if (pos.shape.size() < 2 || pos.shape.size() > 3 || pos_shape.size() != 2 || pos_shape[1] != c.dim)
            throw CheckpointError(fpath + ": tensor '" + pos.name + "' has shape " + pos.shape_string() + ", expected [1, " +
                                  (c.layout == Layout::TimmReg ? "M*M" : "1+M*M") + ", " + std::to_string(c.dim) + "]");
        const std::int64_t rows = pos_shape[0];
        if (c.class_token && square_side(rows - 1)) {
            c.grid = square_side(rows - 1);
        } else if (square_side(rows)) {
            c.grid = square_side(rows);
            c.pos_embed_class = false;
        } else {
            throw CheckpointError(fpath + ": tensor '" + pos.name + "' holds " + std::to_string(rows) +
                                  " positions, not a square grid of patches (M*M" +
                                  (c.class_token ? std::string(", or 1+M*M with the class token's") : std::string()) + ")");
        }
    }

    if (c.rotary()) {  // a converted file's metadata states θ over any default
        if (auto t = h.meta_float("rope_theta")) c.rope_theta = static_cast<float>(*t);
        if (!(c.rope_theta > 1)) throw ConfigError(fpath + ": rope_theta must be above 1");
    }

    if (has("blocks.0.mlp.w12.weight")) {
        c.mlp = MlpKind::SwiGlu;
        std::int64_t rows = 0;  // [2H, D], or its halves stored apart (DINOv3's gate and up)
        for (const auto* w : parts("blocks.0.mlp.w12.weight")) {
            if (w->shape.size() != 2)
                throw CheckpointError(fpath + ": tensor '" + w->name + "' has shape " + w->shape_string() + ", expected 2 dimensions");
            rows += w->shape[0];
        }
        if (rows % 2 != 0)
            throw CheckpointError(fpath + ": tensor '" + parts("blocks.0.mlp.w12.weight").front()->name + "' has " +
                                  std::to_string(rows) + " rows, expected an even 2H");
        c.mlp_hidden = static_cast<int>(rows / 2);
    } else {
        const auto& w = *parts("blocks.0.mlp.fc1.weight").front();
        if (w.shape.size() != 2)
            throw CheckpointError(fpath + ": tensor '" + w.name + "' has shape " + w.shape_string() + ", expected [H, D]");
        c.mlp_hidden = static_cast<int>(w.shape[0]);
    }
    c.layer_scale = has("blocks.0.ls1.gamma");
    c.has_sinks = has("blocks.0.attn.sinks");
    c.qkv_bias = has("blocks.0.attn.qkv.bias");
    c.attn_norm = has("blocks.0.attn.norm.weight");
    c.mlp_norm = has("blocks.0.mlp.norm.weight");
    c.pre_norm = has("norm_pre.weight");
    c.final_norm = has("norm.weight");
    c.fc_norm = has("fc_norm.weight");
    if (!c.final_norm && !c.fc_norm) parts("norm.weight");  // throws: missing tensor 'norm.weight'

    // Family: stated, named by a timm hub config, or told by the tensors (DESIGN.md §7).
    if (auto f = h.str("family")) {
        if (*f == "dinov2") c.family = Family::Dinov2;
        else if (*f == "timm") c.family = Family::Timm;
        else if (*f == "clip") c.family = Family::Clip;
        else if (*f == "siglip") c.family = Family::Siglip;
        else if (*f == "dinov3") c.family = Family::Dinov3;
        else if (*f == "eva") c.family = Family::Eva;
        else throw ConfigError(fpath + ": metadata family='" + *f + "' (expected dinov2, dinov3, timm, clip, siglip or eva)");
    } else if (dinov3) {
        c.family = Family::Dinov3;
    } else if (eva) {
        c.family = Family::Eva;
    } else if (c.layout == Layout::HFSiglip) {
        c.family = Family::Siglip;
    } else if (clip_layout) {
        c.family = Family::Clip;
    } else if (c.layout == Layout::HF) {
        c.family = Family::Dinov2;
    } else if (!architecture.empty()) {
        c.family = contains(architecture, "siglip") ? Family::Siglip
                   : contains(architecture, "clip")   ? Family::Clip
                   : contains(architecture, "dinov2") ? Family::Dinov2
                                                      : Family::Timm;
    } else if (c.pre_norm && !c.patch_bias) {
        c.family = Family::Clip;  // timm's vit_*_clip_*: norm_pre, a patch embedding without bias
    } else if (c.layout == Layout::Dinov2 &&
               (c.pre_norm || c.fc_norm || !c.class_token || !c.pos_embed_class || !c.qkv_bias || !c.patch_bias ||
                !c.final_norm)) {
        c.family = Family::Timm;
    }

    // The model's pooled feature: timm's global_pool when a hub config states it.
    c.pool = (c.fc_norm || !c.class_token) ? Pool::Avg : Pool::Token;
    if (const auto* g = dig(timm, {"global_pool"}); g && g->is_string()) {
        if (g->get<std::string>() == "avg") c.pool = Pool::Avg;
        else if (g->get<std::string>() == "token" && c.class_token) c.pool = Pool::Token;
    }
    // An attention-pool head (SigLIP's MAP) is the model's own pooled feature.
    if (has("attn_pool.latent")) {
        const auto& l = *parts("attn_pool.latent").front();
        if (squeezed(l.shape) != std::vector<std::int64_t>{c.dim})
            throw CheckpointError(fpath + ": tensor '" + l.name + "' has shape " + l.shape_string() + ", expected [1, 1, " +
                                  std::to_string(c.dim) + "]");
        c.pool = Pool::Map;
    }
    if (!architecture.empty() && c.family == Family::Siglip && c.class_token)
        throw ConfigError(h.cfg_file + ": timm architecture '" + architecture +
                          "' is a SigLIP tower, which has no class token, but the tensors beside it have one");

    // The projection of CLIP: OpenCLIP's proj [D, E], HF's visual_projection [E, D], timm's head
    // [E, D] when it is the converted projection (CLIP family, no bias or a zero one); a timm
    // classifier head is ignored.
    const bool clip_tower = c.family == Family::Clip || (eva && contains(architecture, "_clip_"));  // (EVA-CLIP's)
    if ((timm_names || eva) && !has("proj") && clip_tower && file_->has(prefix_ + "head.weight")) {
        const auto& head = file_->get(prefix_ + "head.weight");
        bool zero_bias = true;
        if (file_->has(prefix_ + "head.bias")) {
            const auto& b = file_->get(prefix_ + "head.bias");
            for (float v : b.to_float()) zero_bias = zero_bias && v == 0.0f;
            file_->release(b);
        }
        if (head.shape.size() == 2 && head.shape[1] == c.dim && zero_bias) {
            proj_source_ = "head.weight";
            c.notes.push_back("timm head read as the CLIP projection (" + head.shape_string() + ", no bias)");
        } else {
            c.notes.push_back("timm head " + head.shape_string() + " ignored: a classifier, not a projection");
        }
    }
    if (has("proj")) {
        const auto& p = *parts("proj").front();
        if (p.shape.size() != 2 || p.shape[proj_transposed() ? 1 : 0] != c.dim || p.shape[proj_transposed() ? 0 : 1] <= 0)
            throw CheckpointError(fpath + ": tensor '" + p.name + "' has shape " + p.shape_string() + ", expected " +
                                  (proj_transposed() ? "[E, " + std::to_string(c.dim) + "]" : "[" + std::to_string(c.dim) + ", E]"));
        c.proj_dim = static_cast<int>(p.shape[proj_transposed() ? 0 : 1]);
        if (!c.class_token) throw CheckpointError(fpath + ": a projection needs a class token to project");
    }

    // Heads cannot be read off shapes.
    const auto open_clip_int = [&](const char* key) -> std::optional<long> {
        if (!vision_cfg) return std::nullopt;
        const auto* v = dig(*vision_cfg, {key});
        if (!v) return std::nullopt;
        return json_count(*v, open_clip_file, std::string("model_cfg.vision_cfg.") + key);
    };
    if (auto v = h.meta_int("heads")) {
        c.heads = static_cast<int>(*v);
    } else if (auto v2 = h.cfg_int("num_attention_heads")) {
        c.heads = static_cast<int>(*v2);
    } else if (vision_cfg) {
        const long head_width = open_clip_int("head_width").value_or(64);
        c.heads = static_cast<int>(c.dim / head_width);
        if (c.dim % head_width) throw ConfigError(open_clip_file + ": head_width " + std::to_string(head_width) +
                                                  " does not divide the width " + std::to_string(c.dim));
    } else if (c.layout == Layout::Dinov3Hub && file_->has(prefix_ + "rope_embed.periods")) {
        // The rotary periods, one per band: head_dim / 4 of them.
        const auto& periods = file_->get(prefix_ + "rope_embed.periods");
        if (periods.shape.size() != 1 || periods.shape[0] <= 0 || c.dim % (4 * periods.shape[0]))
            throw CheckpointError(fpath + ": tensor '" + periods.name + "' has shape " + periods.shape_string() +
                                  ", expected [head_dim / 4] with head_dim dividing " + std::to_string(c.dim));
        c.heads = static_cast<int>(c.dim / (4 * periods.shape[0]));
    } else if (hf_tower) {
        c.heads = 12;  // transformers' CLIPVisionConfig and SiglipVisionConfig default, which config.json leaves out
        c.notes.push_back("num_attention_heads not in config.json; HF's default 12");
    } else if (const auto* n = dig(timm, {"model_args", "num_heads"})) {
        c.heads = static_cast<int>(json_count(*n, h.cfg_file, "model_args.num_heads"));
    } else {
        c.heads = c.dim / 64;
        c.notes.push_back("heads not stated in metadata or config.json; assumed D/64 = " + std::to_string(c.heads));
    }
    if (c.heads <= 0 || c.dim % c.heads != 0)
        throw ConfigError(fpath + ": " + std::to_string(c.heads) + " heads do not divide the width " + std::to_string(c.dim));
    c.head_dim = c.dim / c.heads;
    if (c.rotary() && c.head_dim % 4)
        throw ConfigError(fpath + ": 2D RoPE needs a head width divisible by 4, not " + std::to_string(c.head_dim));
    if (c.layout == Layout::Dinov3Hub && file_->has(prefix_ + "rope_embed.periods")) {
        // periods[j] = θ^(4j/head_dim): θ is the second period to the power head_dim / 4.
        const auto& t = file_->get(prefix_ + "rope_embed.periods");
        const auto periods = t.to_float();
        file_->release(t);
        const int bands = static_cast<int>(periods.size());
        if (bands > 1) {
            // float32 periods hold θ to ~7 digits: keep 6 (100.0000076 is DINOv3's 100).
            const double theta = std::pow(static_cast<double>(periods[1]), bands);
            const double unit = std::pow(10.0, std::floor(std::log10(theta)) - 5);
            c.rope_theta = static_cast<float>(std::round(theta / unit) * unit);
        }
        for (int j = 0; j < bands; ++j) {
            const double want = std::pow(static_cast<double>(c.rope_theta), static_cast<double>(j) / bands);
            if (!(std::abs(periods[j] - want) <= 1e-4 * want))
                throw CheckpointError(fpath + ": tensor '" + t.name + "' is not theta^(4j/head_dim) for any theta (entry " +
                                      std::to_string(j) + " is " + std::to_string(periods[j]) + ")");
        }
        if (!(c.rope_theta > 1)) throw CheckpointError(fpath + ": tensor '" + t.name + "' gives rope_theta " +
                                                       std::to_string(c.rope_theta) + " (expected above 1)");
    } else if (c.layout == Layout::Dinov3Hub) {
        c.notes.push_back("no rope_embed.periods in the file: DINOv3's rope_theta 100 assumed");
    }

    // Whatever metadata or config.json states must agree with the tensors.
    if (auto v = h.meta_int("patch_size")) agree(fpath, "metadata patch_size", *v, c.patch);
    if (auto v = h.meta_int("num_registers")) agree(fpath, "metadata num_registers", *v, c.registers);
    if (auto v = h.cfg_int("hidden_size")) agree(h.cfg_file, "hidden_size", *v, c.dim);
    if (auto v = h.cfg_int("num_hidden_layers")) agree(h.cfg_file, "num_hidden_layers", *v, c.depth);
    if (auto v = h.cfg_int("patch_size")) agree(h.cfg_file, "patch_size", *v, c.patch);
    if (auto v = h.cfg_int("num_register_tokens")) agree(h.cfg_file, "num_register_tokens", *v, c.registers);
    for (const char* gated : {"use_swiglu_ffn", "use_gated_mlp"})
        if (h.cfg.is_object() && h.cfg.contains(gated) && h.cfg[gated].is_boolean())
            agree(h.cfg_file, gated, h.cfg[gated].get<bool>(), c.mlp == MlpKind::SwiGlu);
    if (hf_tower) {
        if (auto v = h.cfg_int("image_size")) agree(h.cfg_file, "image_size", *v, c.native_size());
        const auto* e = dig(h.cfg, {"projection_dim"}) ? dig(h.cfg, {"projection_dim"}) : dig(top, {"projection_dim"});
        if (e && c.proj_dim) agree(h.cfg_file, "projection_dim", json_count(*e, h.cfg_file, "projection_dim"), c.proj_dim);
    }
    if (auto v = open_clip_int("width")) agree(open_clip_file, "vision_cfg.width", *v, c.dim);
    if (auto v = open_clip_int("layers")) agree(open_clip_file, "vision_cfg.layers", *v, c.depth);
    if (auto v = open_clip_int("patch_size")) agree(open_clip_file, "vision_cfg.patch_size", *v, c.patch);
    if (vision_cfg) {
        if (const auto* v = dig(*vision_cfg, {"image_size"}); v && v->is_number_integer())
            agree(open_clip_file, "vision_cfg.image_size", v->get<long>(), c.native_size());
        if (const auto* e = dig(open_clip, {"model_cfg", "embed_dim"}); e && c.proj_dim)
            agree(open_clip_file, "embed_dim", json_count(*e, open_clip_file, "model_cfg.embed_dim"), c.proj_dim);
    }

    // The activation: SwiGLU from the tensors; QuickGELU where the checkpoint says so (OpenAI's
    // CLIP weights; HF's CLIPVisionConfig and OpenCLIP without a config default to it).
    if (c.mlp == MlpKind::SwiGlu && dinov3_hf) {
        const std::string act = h.cfg_str("hidden_act").value_or("silu");
        if (act != "silu") throw ConfigError(h.cfg_file + ": hidden_act '" + act + "' (DINOv3's gated MLP runs silu)");
    }
    if (c.mlp != MlpKind::SwiGlu) {
        bool quick = false, tanh = false;
        std::string why;
        if (auto a = h.str("act")) {
            if (*a != "gelu" && *a != "quick_gelu" && *a != "gelu_tanh")
                throw ConfigError(fpath + ": metadata act='" + *a + "' (expected gelu, quick_gelu or gelu_tanh)");
            quick = *a == "quick_gelu";
            tanh = *a == "gelu_tanh";
        } else if (c.layout == Layout::HFSiglip) {
            // SiglipVisionConfig's default, which a SiglipModel's vision_config may leave out.
            const std::string act = h.cfg_str("hidden_act").value_or("gelu_pytorch_tanh");
            tanh = act == "gelu_pytorch_tanh" || act == "gelu_new";
            quick = act == "quick_gelu";
            if (!tanh && !quick && act != "gelu")
                throw ConfigError(h.cfg_file + ": hidden_act '" + act + "' (vitreg runs gelu, gelu_pytorch_tanh or quick_gelu)");
        } else if (dinov3_hf) {
            const std::string act = h.cfg_str("hidden_act").value_or("gelu");
            if (act != "gelu") throw ConfigError(h.cfg_file + ": hidden_act '" + act + "' (vitreg runs DINOv3's gelu, or silu gated)");
        } else if (c.layout == Layout::HFClip) {
            const std::string act = h.cfg_str("hidden_act").value_or("quick_gelu");
            if (act != "gelu" && act != "quick_gelu")
                throw ConfigError(h.cfg_file + ": hidden_act '" + act + "' (vitreg runs gelu or quick_gelu)");
            quick = act == "quick_gelu";
        } else if (c.layout == Layout::OpenClip) {
            if (const auto* q = dig(open_clip, {"model_cfg", "quick_gelu"})) {
                if (!q->is_boolean()) throw ConfigError(open_clip_file + ": 'model_cfg.quick_gelu' is not true or false");
                quick = q->get<bool>();
            } else if (open_clip.is_null()) {
                quick = true;
                why = "no open_clip_config.json beside the weights: assumed OpenAI's QuickGELU";
            }
        } else if (!architecture.empty()) {
            // timm builds nn.GELU unless model_args names another (its SigLIP towers included).
            const auto* act = dig(timm, {"model_args", "act_layer"});
            const std::string named = act && act->is_string() ? act->get<std::string>() : "";
            quick = contains(architecture, "quickgelu") || named == "quick_gelu";
            tanh = named == "gelu_tanh";
        }
        if (quick) c.mlp = MlpKind::QuickGelu;
        if (tanh) c.mlp = MlpKind::GeluTanh;
        if (!why.empty()) c.notes.push_back(why);
    }

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

    // Position-embedding resampling follows the checkpoint's origin unless stated: OpenCLIP's
    // resize_pos_embed and timm's resample_abs_pos_embed antialias, HF CLIP's
    // interpolate_pos_encoding does not.
    if (auto s = h.str("pos_interp")) {
        try {
            c.pos_interp = parse_pos_interp(*s);
        } catch (const UsageError& e) {
            throw ConfigError(fpath + ": metadata " + e.what());
        }
    } else if (dinov3) {
        c.pos_interp = PosInterp::Size;  // nothing to resample (rotary positions): HF's interpolation, for the record
    } else if (c.layout == Layout::HF) {
        c.pos_interp = c.registers > 0 ? PosInterp::Antialias : PosInterp::Size;
    } else if (hf_tower) {
        c.pos_interp = PosInterp::Size;
    } else if (c.layout == Layout::OpenClip || c.family != Family::Dinov2 || !architecture.empty()) {
        c.pos_interp = PosInterp::Antialias;  // (a timm hub config: timm's own DINOv2 resamples so too)
    } else {
        c.pos_interp = (c.registers > 0 || c.layout == Layout::TimmReg) ? PosInterp::Antialias : PosInterp::Offset;
    }
    if (overrides.pos_interp) c.pos_interp = *overrides.pos_interp;

    if (auto s = h.str("evict")) {
        if (*s != "sink") throw ConfigError(fpath + ": metadata evict='" + *s + "' (the only stored eviction is 'sink')");
        c.evict_sink = true;
        c.notes.push_back("the checkpoint evicts each head's sink key on every run (calibrated sink, evicted)");
    }
    if (c.family == Family::Clip || c.family == Family::Dinov3) c.eps = 1e-5f;  // their LayerNorms' default in every layout
    if (auto v = h.meta_float("layer_norm_eps")) c.eps = static_cast<float>(*v);
    else if (auto v2 = h.cfg_float("layer_norm_eps")) c.eps = static_cast<float>(*v2);
    if (!(c.eps > 0)) throw ConfigError(fpath + ": layer_norm_eps must be positive");

    // Preprocessing: the family's defaults, then what the configs beside the weights say, then
    // the metadata. CLIP's eval transform resizes the short side to the input and crops it.
    // Whose transform: the layout's (a timm config beside any layout makes it timm's).
    c.pipeline = c.layout == Layout::OpenClip                               ? PixelPipeline::OpenClip
                 : c.layout == Layout::HF || hf_tower || dinov3_hf             ? PixelPipeline::HF
                 : c.family == Family::Timm || c.family == Family::Eva || c.layout == Layout::TimmReg ? PixelPipeline::Timm
                                                                            : PixelPipeline::Torchvision;
    if (pretrained) c.pipeline = PixelPipeline::Timm;
    if (c.family == Family::Clip) {
        c.mean = kClipMean;
        c.std = kClipStd;
        c.input_size = c.native_size();
        c.crop_pct = 1.0;
    }
    if (c.family == Family::Eva) {  // timm's Eva _cfg: OpenAI CLIP's mean and std, crop_pct 0.9
        c.mean = kClipMean;
        c.std = kClipStd;
        c.input_size = c.native_size();
        c.crop_pct = 0.9;
    }
    if (c.family == Family::Siglip) {  // SiglipImageProcessor: squash to the input, no crop, mean = std = 0.5
        c.mean = c.std = {0.5f, 0.5f, 0.5f};
        c.input_size = c.native_size();
        c.crop_pct = 1.0;
        c.eval_squash = true;
    }
    if (dinov3_hf) {  // DINOv3ViTImageProcessorFast: squash to 224x224, bilinear, ImageNet's mean and std (the hub's eval
                      // transform is DINOv2's: short side 256 bicubic, crop 224)
        c.input_size = c.native_size();
        c.crop_pct = 1.0;
        c.eval_squash = true;
        c.interpolation = ResizeFilter::Bilinear;
    }
    // A named filter (open_clip's and timm's "interpolation"); "random" is a training transform.
    const auto interpolation = [&](const nlohmann::json* v, const std::string& where) {
        if (!v || !v->is_string()) return;
        try {
            c.interpolation = parse_resize_filter(v->get<std::string>());
        } catch (const UsageError&) {
            c.notes.push_back(where + " asks for '" + v->get<std::string>() + "' resizing; vitreg resizes " +
                              to_string(c.interpolation));
        }
    };
    if (const auto* pc = dig(open_clip, {"preprocess_cfg"})) {
        if (const auto* m = dig(*pc, {"mean"})) c.mean = json_triple(*m, open_clip_file, "preprocess_cfg.mean");
        if (const auto* s = dig(*pc, {"std"})) c.std = json_triple(*s, open_clip_file, "preprocess_cfg.std");
        interpolation(dig(*pc, {"interpolation"}), open_clip_file);
    }
    if (!preprocessor.is_null()) {
        if (const auto* m = dig(preprocessor, {"image_mean"})) c.mean = json_triple(*m, preprocessor_file, "image_mean");
        if (const auto* s = dig(preprocessor, {"image_std"})) c.std = json_triple(*s, preprocessor_file, "image_std");
        const auto side = [&](const char* key, const char* inner) -> std::optional<long> {
            const auto* v = dig(preprocessor, {key});
            if (!v) return std::nullopt;
            if (v->is_object()) v = dig(*v, {inner});
            if (!v) return std::nullopt;
            return json_count(*v, preprocessor_file, key);
        };
        // PIL's filter numbers, as HF's processors store them in "resample".
        if (const auto* r = dig(preprocessor, {"resample"})) {
            static const ResizeFilter kPil[] = {ResizeFilter::Nearest, ResizeFilter::Lanczos, ResizeFilter::Bilinear,
                                                ResizeFilter::Bicubic, ResizeFilter::Box, ResizeFilter::Hamming};
            const long k = json_count(*r, preprocessor_file, "resample");
            if (k > 5) throw ConfigError(preprocessor_file + ": 'resample' " + std::to_string(k) + " is not a PIL filter (0-5)");
            c.interpolation = kPil[k];
        }
        // SigLIP's and DINOv3's {"height", "width"}: the squash's side.
        if (const auto* sz = dig(preprocessor, {"size", "height"}); sz && c.eval_squash)
            c.input_size = static_cast<int>(json_count(*sz, preprocessor_file, "size.height"));
        const auto crop = side("crop_size", "height");
        const auto shortest = side("size", "shortest_edge");
        if (crop) c.input_size = static_cast<int>(*crop);
        if (crop && shortest) c.crop_pct = static_cast<double>(*crop) / static_cast<double>(*shortest);
    }
    if (pretrained) {
        const std::string pf = h.cfg_file + " pretrained_cfg";
        if (const auto* m = dig(*pretrained, {"mean"})) c.mean = json_triple(*m, pf, "mean");
        if (const auto* s = dig(*pretrained, {"std"})) c.std = json_triple(*s, pf, "std");
        if (const auto* cp = dig(*pretrained, {"crop_pct"})) c.crop_pct = json_number(*cp, pf, "crop_pct");
        if (const auto* in = dig(*pretrained, {"input_size"})) {
            if (!in->is_array() || in->size() != 3) throw ConfigError(pf + ": 'input_size' is not [3, H, W]");
            const long ih = json_count((*in)[1], pf, "input_size"), iw = json_count((*in)[2], pf, "input_size");
            if (ih != iw) c.notes.push_back("pretrained_cfg input_size is " + std::to_string(iw) + "x" + std::to_string(ih) +
                                            "; --resize eval crops a square of the height");
            c.input_size = static_cast<int>(ih);
        }
        interpolation(dig(*pretrained, {"interpolation"}), pf);
        // timm's crop_mode: center (the default), squash (resize to the input, no crop), border.
        c.eval_squash = false;
        if (const auto* m = dig(*pretrained, {"crop_mode"}); m && m->is_string()) {
            if (m->get<std::string>() == "squash") c.eval_squash = true;
            else if (m->get<std::string>() != "center")
                c.notes.push_back(pf + " asks for crop_mode '" + m->get<std::string>() + "'; --resize eval crops the center");
        }
    }
    if (auto v = h.meta_triple("image_mean")) c.mean = *v;
    if (auto v = h.meta_triple("image_std")) c.std = *v;
    if (auto v = h.meta_float("crop_pct")) c.crop_pct = *v;
    if (auto v = h.meta_int("input_size")) c.input_size = static_cast<int>(*v);
    if (auto v = h.str("eval_squash")) c.eval_squash = *v == "1";
    try {
        if (auto v = h.str("image_pipeline")) c.pipeline = parse_pixel_pipeline(*v);
        if (auto v = h.str("interpolation")) c.interpolation = parse_resize_filter(*v);
    } catch (const UsageError& e) {
        throw ConfigError(fpath + ": metadata: " + e.what());
    }
    for (float s : c.std)
        if (!(s > 0)) throw ConfigError(fpath + ": image_std must be positive");
    if (!(c.crop_pct > 0 && c.crop_pct <= 1)) throw ConfigError(fpath + ": crop_pct must lie in (0, 1]");
    if (c.input_size <= 0) throw ConfigError(fpath + ": input_size must be positive");

    for (const auto& name : file_->names()) {
        const bool tower = hf_tower ? starts_with(name, prefix_ + "vision_model.") || name == prefix_ + "visual_projection.weight"
                                    : starts_with(name, prefix_);
        if (tower) c.parameters += file_->get(name).numel();
    }
    return c;
}

}  // namespace vitreg
