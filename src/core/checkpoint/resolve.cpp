// Checkpoint::resolve: a checkpoint's Config by one precedence (docs/design.md, "Checkpoint
// sources"). The tensors' shapes are facts; then what the model is (positions, family); over the
// source's defaults go the configs beside the weights, then the file's metadata, then what only the
// source can tell (unstated heads, a stored rotary base), then the user's overrides; last, whatever
// was stated must agree with the tensors. A timm hub config's architecture states what timm's
// definition builds (timm_architectures.inc), its model_args over that, its own global_pool over both.
#include <algorithm>

#include "core/affix.hpp"
#include "core/checkpoint/metadata.hpp"
#include "core/checkpoint/shape.hpp"
#include "core/checkpoint/source.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

using source::Metadata;
using source::Notes;
using source::NoteTopic;
using source::SideFiles;
using source::Source;

namespace {

// OpenAI's CLIP normalization (docs/design.md, "Families").
constexpr std::array<float, 3> kClipMean{0.48145466f, 0.4578275f, 0.40821073f};
constexpr std::array<float, 3> kClipStd{0.26862954f, 0.26130258f, 0.27577711f};

// side M when n == M*M (M > 0), else 0.
int square_side(std::int64_t n) {
    if (n <= 0) return 0;
    const auto m = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
    return m * m == n ? static_cast<int>(m) : 0;
}

CheckpointError bad_shape(const Checkpoint& ck, const TensorView& t, const std::string& expected) {
    return CheckpointError(ck.path() + ": tensor '" + t.name + "' has shape " + t.shape_string() + ", expected " + expected);
}

// pos_embed covers the patches, plus a class-token row unless the checkpoint is timm's
// no_embed_class (its row count says which; the class token and registers then get none).
void read_pos_embed(const Checkpoint& ck, const Source& src, Config& c) {
    if (!ck.has("pos_embed")) return;
    const auto& pos = *ck.parts("pos_embed").front();
    const auto pos_shape = source::squeezed(pos.shape);
    if (pos.shape.size() < 2 || pos.shape.size() > 3 || pos_shape.size() != 2 || pos_shape[1] != c.dim)
        throw bad_shape(ck, pos, "[1, " + src.pos_rows + ", " + std::to_string(c.dim) + "]");
    const std::int64_t rows = pos_shape[0];
    if (c.class_token && square_side(rows - 1)) {
        c.grid = square_side(rows - 1);
    } else if (square_side(rows)) {
        c.grid = square_side(rows);
        c.pos_embed_class = false;
    } else {
        throw CheckpointError(ck.path() + ": tensor '" + pos.name + "' holds " + std::to_string(rows) +
                              " positions, not a square grid of patches (M*M" +
                              (c.class_token ? std::string(", or 1+M*M with the class token's") : std::string()) + ")");
    }
}

// The MLP: SwiGLU's w12 [2H, D] (or its halves), else fc1 [H, D].
void read_mlp(const Checkpoint& ck, Config& c) {
    if (ck.has("blocks.0.mlp.w12.weight")) {
        c.mlp = MlpKind::SwiGlu;
        std::int64_t rows = 0;  // [2H, D], or its halves stored apart (DINOv3's gate and up)
        for (const auto* w : ck.parts("blocks.0.mlp.w12.weight")) {
            if (w->shape.size() != 2) throw bad_shape(ck, *w, "2 dimensions");
            rows += w->shape[0];
        }
        if (rows % 2 != 0)
            throw CheckpointError(ck.path() + ": tensor '" + ck.parts("blocks.0.mlp.w12.weight").front()->name + "' has " +
                                  std::to_string(rows) + " rows, expected an even 2H");
        c.mlp_hidden = static_cast<int>(rows / 2);
    } else {
        const auto& w = *ck.parts("blocks.0.mlp.fc1.weight").front();
        if (w.shape.size() != 2) throw bad_shape(ck, w, "[H, D]");
        c.mlp_hidden = static_cast<int>(w.shape[0]);
    }
}

// The tensors' shapes and which tensors there are: read once, here.
Config read_tensor_facts(const Checkpoint& ck, const Source& src) {
    const std::string& fpath = ck.path();
    Config c;
    c.source = src.name;
    c.heads = source::kHeadsUnstated;

    // Patch embedding: [D, 3, p, p] (an int4 file's codes [D, 3, p, p / 2], two a byte).
    const auto& pe = *ck.parts("patch_embed.proj.weight").front();
    auto shape = pe.shape;
    if (pe.dtype == DType::U8 && shape.size() == 4) shape[3] *= 2;
    if (shape.size() != 4 || shape[1] != 3 || shape[2] != shape[3] || shape[0] <= 0 || shape[2] <= 0)
        throw bad_shape(ck, pe, "[D, 3, p, p]");
    c.dim = static_cast<int>(shape[0]);
    c.patch = static_cast<int>(shape[2]);
    c.dtype = ck.file().dominant_dtype();
    c.patch_bias = ck.has("patch_embed.proj.bias");

    while (ck.has("blocks." + std::to_string(c.depth) + ".norm1.weight")) ++c.depth;
    if (c.depth == 0) throw CheckpointError(fpath + ": no transformer blocks found ('blocks.0.norm1.weight')");

    c.class_token = ck.has("cls_token");
    if (c.class_token) {
        const auto& t = *ck.parts("cls_token").front();
        if (source::squeezed(t.shape) != std::vector<std::int64_t>{c.dim})
            throw bad_shape(ck, t, "[1, 1, " + std::to_string(c.dim) + "]");
    }
    if (ck.has("register_tokens")) {
        const auto& r = *ck.parts("register_tokens").front();
        if (r.shape.size() != 3 || r.shape[0] != 1 || r.shape[2] != c.dim)
            throw bad_shape(ck, r, "[1, R, " + std::to_string(c.dim) + "]");
        c.registers = static_cast<int>(r.shape[1]);
    }

    read_pos_embed(ck, src, c);
    read_mlp(ck, c);
    c.layer_scale = ck.has("blocks.0.ls1.gamma");
    c.has_sinks = ck.has("blocks.0.attn.sinks");
    c.qkv_bias = ck.has("blocks.0.attn.qkv.bias");
    c.attn_norm = ck.has("blocks.0.attn.norm.weight");
    c.mlp_norm = ck.has("blocks.0.mlp.norm.weight");
    c.pre_norm = ck.has("norm_pre.weight");
    c.final_norm = ck.has("norm.weight");
    c.fc_norm = ck.has("fc_norm.weight");
    if (!c.final_norm && !c.fc_norm) ck.parts("norm.weight");  // throws: missing tensor 'norm.weight'
    c.trained_attention = c.has_sinks ? AttentionKind::Sink : AttentionKind::Softmax;  // sink logits mean `sink`

    // The model's pooled feature: CLS, or the mean of the patches; an attention-pool head (SigLIP's
    // MAP) when there is one.
    c.pool = (c.fc_norm || !c.class_token) ? Pool::Avg : Pool::Token;
    if (ck.has("attn_pool.latent")) {
        const auto& l = *ck.parts("attn_pool.latent").front();
        if (source::squeezed(l.shape) != std::vector<std::int64_t>{c.dim})
            throw bad_shape(ck, l, "[1, 1, " + std::to_string(c.dim) + "]");
        c.pool = Pool::Map;
    }
    return c;
}

// What the model is: its positions and family, stated or the source's. Every default depends on them.
void resolve_identity(const Checkpoint& ck, const Source& src, const SideFiles& side, const Metadata& meta, Config& c,
                      Notes& notes) {
    if (auto p = source::stated_positions(meta)) c.positions = *p;
    else if (src.positions) c.positions = src.positions(c, side, notes);
    if (c.positions == Positions::RopeAxial) {
        if (ck.has("pos_embed")) throw CheckpointError(ck.path() + ": rotary positions and a learned pos_embed: one or the other");
        c.pos_embed_class = false;
        // The native input's grid (nothing is resampled): HF's config.json image_size, else a converted file's input_size.
        const long image = side.cfg.is_object() ? side.cfg_int("image_size").value_or(224) : meta.count("input_size").value_or(224);
        c.grid = static_cast<int>(std::max<long>(1, image / c.patch));
    } else if (!ck.has("pos_embed")) {
        ck.parts("pos_embed");  // throws: missing tensor
    }
    if (auto f = source::stated_family(meta)) c.family = *f;
    else if (src.family) c.family = src.family(c, side);
}

// Whether timm's `head` [E, D] is the CLIP projection (a CLIP tower, no bias or a zero one); a
// timm classifier head is ignored.
bool head_is_projection(const Checkpoint& ck, const Source& src, const SideFiles& side, const std::string& prefix,
                        const Config& c, Notes& notes) {
    const TensorFile& f = ck.file();
    if (!src.head_is_projection || ck.has("proj") || !src.head_is_projection(c, side) || !f.has(prefix + "head.weight"))
        return false;
    const auto& head = f.get(prefix + "head.weight");
    bool zero_bias = true;
    if (f.has(prefix + "head.bias")) {
        const auto& b = f.get(prefix + "head.bias");
        for (float v : b.to_float()) zero_bias = zero_bias && v == 0.0f;
        f.release(b);
    }
    if (head.shape.size() == 2 && head.shape[1] == c.dim && zero_bias) {
        notes.add(NoteTopic::Projection, "timm head read as the CLIP projection (" + head.shape_string() + ", no bias)");
        return true;
    }
    notes.add(NoteTopic::Projection, "timm head " + head.shape_string() + " ignored: a classifier, not a projection");
    return false;
}

// The projection of CLIP: OpenCLIP's proj [D, E], HF's visual_projection and timm's head [E, D].
void read_projection(const Checkpoint& ck, bool transposed, Config& c) {
    if (!ck.has("proj")) return;
    const auto& p = *ck.parts("proj").front();
    if (p.shape.size() != 2 || p.shape[transposed ? 1 : 0] != c.dim || p.shape[transposed ? 0 : 1] <= 0)
        throw bad_shape(ck, p, transposed ? "[E, " + std::to_string(c.dim) + "]" : "[" + std::to_string(c.dim) + ", E]");
    c.proj_dim = static_cast<int>(p.shape[transposed ? 0 : 1]);
    if (!c.class_token) throw CheckpointError(ck.path() + ": a projection needs a class token to project");
}

// Where the files are silent: the source's and the family's defaults.
void apply_defaults(const Source& src, const SideFiles& side, Config& c) {
    if (c.positions == Positions::RopeEva) {
        // timm's RotaryEmbeddingCat: temperature 1e4; ref_feat_shape (16, 16) in every eva02_* definition.
        c.rope_theta = 10000.0f;
        c.rope_ref_grid = {16, 16};
    }
    // Position-embedding resampling follows the checkpoint's origin: OpenCLIP's resize_pos_embed and
    // timm's resample_abs_pos_embed antialias, HF CLIP's interpolate_pos_encoding does not.
    if (src.pos_interp) c.pos_interp = src.pos_interp(c, side);
    if (c.family == Family::Clip || c.family == Family::Dinov3) c.eps = 1e-5f;  // their LayerNorms' default in every layout

    // Whose eval transform: the source's, else timm's for its families. CLIP's resizes the short side
    // to the input and crops it.
    c.pipeline = src.pipeline ? *src.pipeline
                 : c.family == Family::Timm || c.family == Family::Eva ? PixelPipeline::Timm
                                                                        : PixelPipeline::Torchvision;
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
    if (src.pixel_defaults) src.pixel_defaults(c);
}

// What the source alone knows once the files have spoken, then the heads nobody stated.
void fill_unstated(const Checkpoint& ck, const Source& src, const std::string& prefix, Config& c, Notes& notes) {
    if (src.finish) src.finish(ck.file(), prefix, c, notes);
    if (c.heads == source::kHeadsUnstated) {
        c.heads = c.dim / 64;
        notes.add(NoteTopic::Heads, "heads not stated in metadata or config.json; assumed D/64 = " + std::to_string(c.heads));
    }
}

void apply_overrides(const ConfigOverrides& overrides, Config& c) {
    c.attention = overrides.attention.value_or(c.trained_attention);
    if (overrides.pos_interp) c.pos_interp = *overrides.pos_interp;
}

void agree(const std::string& file, const std::string& what, long stated, long from_tensors) {
    if (stated != from_tensors)
        throw ConfigError(file + ": " + what + " is stated as " + std::to_string(stated) + " but the tensors say " +
                          std::to_string(from_tensors));
}

void agree(const std::string& file, const std::string& what, bool stated, bool from_tensors) {
    const auto said = [](bool b) { return std::string(b ? "true" : "false"); };
    if (stated != from_tensors)
        throw ConfigError(file + ": " + what + " is stated as " + said(stated) + " but the tensors say " + said(from_tensors));
}

// HF config.json's switches: transformers builds each Linear with bias=<switch> (DINOv3 one per
// projection, its q, k and v stored apart), the gated MLP and SigLIP's head from them; and the
// MLP's width from intermediate_size, or Dinov2's mlp_ratio (modeling_dinov2.py's Dinov2MLP and
// Dinov2SwiGLUFFN). Each must say what the tensors hold.
void agree_hf_config(const Checkpoint& ck, const SideFiles& side, const Config& c) {
    struct Switch {
        const char* key;
        std::string canonical;
        int part;  // of q|k|v, or -1: any
    };
    const Switch switches[] = {
        {"qkv_bias", "blocks.0.attn.qkv.bias", -1},
        {"query_bias", "blocks.0.attn.qkv.bias", 0},
        {"key_bias", "blocks.0.attn.qkv.bias", 1},
        {"value_bias", "blocks.0.attn.qkv.bias", 2},
        {"proj_bias", "blocks.0.attn.proj.bias", -1},
        {"mlp_bias", c.mlp == MlpKind::SwiGlu ? "blocks.0.mlp.w3.bias" : "blocks.0.mlp.fc2.bias", -1},
        {"use_swiglu_ffn", "blocks.0.mlp.w12.weight", -1},
        {"use_gated_mlp", "blocks.0.mlp.w12.weight", -1},
        {"vision_use_head", "attn_pool.latent", -1},
    };
    for (const auto& s : switches) {
        const auto stated = side.cfg_bool(s.key);
        if (!stated) continue;
        bool held = ck.has(s.canonical);
        if (held && s.part >= 0) {
            const auto parts = ck.parts(s.canonical);
            held = static_cast<std::size_t>(s.part) < parts.size() && parts[s.part] != nullptr;
        }
        agree(side.cfg_file, s.key, *stated, held);
    }
    if (auto v = side.cfg_int("intermediate_size")) agree(side.cfg_file, "intermediate_size", *v, c.mlp_hidden);
    if (auto v = side.cfg_int("head_dim")) agree(side.cfg_file, "head_dim", *v, c.head_dim);  // ViT's q, k, v width per head
    if (auto r = side.cfg_float("mlp_ratio")) {
        auto hidden = static_cast<long>(c.dim * *r);
        if (c.mlp == MlpKind::SwiGlu) hidden = (static_cast<long>(hidden * 2.0 / 3) + 7) / 8 * 8;
        agree(side.cfg_file, "the MLP width of mlp_ratio " + side.cfg["mlp_ratio"].dump(), hidden, c.mlp_hidden);
    }
    // The learned positions' grid (rotary ones are built from image_size).
    if (auto v = side.cfg_int("image_size"); v && c.positions != Positions::RopeAxial && *v / c.patch != c.grid)
        agree(side.cfg_file, "image_size", *v, c.native_size());
}

// What a timm architecture builds (model_args over timm's definition) must be what the tensors hold.
void agree_timm(const SideFiles& side, const Config& c) {
    const auto& a = *side.timm_model;
    const auto check = [&](const std::string& key, long from_tensors) {
        const auto* v = side.timm_arg(key);
        if (v && (v->is_boolean() || v->is_number_integer()))
            agree(side.cfg_file, "timm architecture '" + a.name + "' " + key + " (" + a.origin(key) + ")",
                  v->is_boolean() ? v->get<bool>() : v->get<long>(), from_tensors);
    };
    check("class_token", c.class_token);
    check(a.model_class == "Eva" ? "num_reg_tokens" : "reg_tokens", c.registers);
}

// Whatever the metadata or the configs state must agree with the tensors and make a model.
void check_consistency(const Checkpoint& ck, const SideFiles& side, const Metadata& meta, Config& c) {
    using source::dig;
    using source::json_count;
    const std::string& fpath = ck.path();
    if (side.timm_model) agree_timm(side, c);
    if (c.heads <= 0 || c.dim % c.heads != 0)
        throw ConfigError(fpath + ": " + std::to_string(c.heads) + " heads do not divide the width " + std::to_string(c.dim));
    c.head_dim = c.dim / c.heads;
    if (c.rotary() && c.head_dim % 4)
        throw ConfigError(fpath + ": 2D RoPE needs a head width divisible by 4, not " + std::to_string(c.head_dim));
    if (c.rotary() && !(c.rope_theta > 1)) throw ConfigError(fpath + ": rope_theta must be above 1");

    if (auto v = meta.count("patch_size")) agree(fpath, "metadata patch_size", *v, c.patch);
    if (auto v = meta.count("num_registers")) agree(fpath, "metadata num_registers", *v, c.registers);
    if (auto v = side.cfg_int("hidden_size")) agree(side.cfg_file, "hidden_size", *v, c.dim);
    if (auto v = side.cfg_int("num_hidden_layers")) agree(side.cfg_file, "num_hidden_layers", *v, c.depth);
    if (auto v = side.cfg_int("patch_size")) agree(side.cfg_file, "patch_size", *v, c.patch);
    if (auto v = side.cfg_int("num_register_tokens")) agree(side.cfg_file, "num_register_tokens", *v, c.registers);
    if (side.cfg.is_object()) agree_hf_config(ck, side, c);
    // The projection's width: CLIPModel's visual_projection is the top level's projection_dim (its
    // vision_config's is unused), CLIPVisionModelWithProjection's its own flat config's.
    if (const auto* e = dig(side.top, {"projection_dim"}); e && c.proj_dim)
        agree(side.cfg_file, "projection_dim", json_count(*e, side.cfg_file, "projection_dim"), c.proj_dim);
    if (auto v = side.vision_count("width")) agree(side.open_clip_file, "vision_cfg.width", *v, c.dim);
    if (auto v = side.vision_count("layers")) agree(side.open_clip_file, "vision_cfg.layers", *v, c.depth);
    if (auto v = side.vision_count("patch_size")) agree(side.open_clip_file, "vision_cfg.patch_size", *v, c.patch);
    if (const auto* vision = side.vision_cfg()) {
        if (const auto* v = dig(*vision, {"image_size"}); v && v->is_number_integer())
            agree(side.open_clip_file, "vision_cfg.image_size", v->get<long>(), c.native_size());
        if (const auto* e = dig(side.open_clip, {"model_cfg", "embed_dim"}); e && c.proj_dim)
            agree(side.open_clip_file, "embed_dim", json_count(*e, side.open_clip_file, "model_cfg.embed_dim"), c.proj_dim);
    }

    if (c.trained_attention == AttentionKind::Sink && !c.has_sinks)
        throw ConfigError(fpath + ": metadata says attention=sink but there are no 'blocks.i.attn.sinks' tensors");
    if (c.trained_attention != AttentionKind::Sink && c.has_sinks)
        throw ConfigError(fpath + ": metadata says attention=" + to_string(c.trained_attention) +
                          " but the file holds sink logits");
    if (!(c.eps > 0)) throw ConfigError(fpath + ": layer_norm_eps must be positive");
    for (float s : c.std)
        if (!(s > 0)) throw ConfigError(fpath + ": image_std must be positive");
    if (!(c.crop_pct > 0 && c.crop_pct <= 1)) throw ConfigError(fpath + ": crop_pct must lie in (0, 1]");
    if (c.input_size <= 0) throw ConfigError(fpath + ": input_size must be positive");
}

// What the user should hear about the final configuration.
void describe(const Config& c, Notes& notes) {
    if (c.retrofit())
        notes.add(NoteTopic::Attention, "attention retrofitted: trained with " + to_string(c.trained_attention) + ", running " +
                                            to_string(c.attention) +
                                            (c.attention == AttentionKind::Sink && !c.has_sinks ? " with sink logit 0 in every head" : ""));
    if (c.evict_sink) notes.add(NoteTopic::Eviction, "the checkpoint evicts each head's sink key on every run (calibrated sink, evicted)");
}

// The tensors of the model (a two-tower file's vision tower and projection only).
std::vector<std::string> model_tensor_names(const TensorFile& f, const SideFiles& side, const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& name : f.names()) {
        const bool tower = side.top.is_object()
                               ? starts_with(name, prefix + "vision_model.") || name == prefix + "visual_projection.weight"
                               : starts_with(name, prefix);
        if (tower) out.push_back(name);
    }
    return out;
}

}  // namespace

Config Checkpoint::resolve(const std::string& dir, const ConfigOverrides& overrides) {
    const int depth_limit = overrides.limits.max_json_depth;
    const Source* src = source::match_source(*file_, prefix_);
    source::refuse_unknown_model(dir, src, depth_limit);
    if (!src)
        throw CheckpointError(path() + ": not a ViT checkpoint vitreg knows (no 'patch_embed.proj.weight', "
                                       "'embeddings.patch_embeddings.projection.weight', 'embeddings.patch_embeddings.weight', "
                                       "'vision_model.embeddings.patch_embedding.weight', 'visual.conv1.weight' nor 'conv_proj.weight')");
    const SideFiles side = source::read_side_files(*src, dir, path(), depth_limit);
    if (src->check_keys) src->check_keys(side);
    names_ = std::make_shared<source::NameTable>(src->names(*file_, prefix_));
    if (src->side_names) src->side_names(side, *names_);
    const Metadata meta(path(), file_->metadata());
    Notes notes;

    Config c = read_tensor_facts(*this, *src);
    resolve_identity(*this, *src, side, meta, c, notes);
    if (head_is_projection(*this, *src, side, prefix_, c, notes)) {
        names_->top.insert(names_->top.begin(), {"proj", "head.weight"});
        names_->proj_transposed = true;
    }
    read_projection(*this, names_->proj_transposed, c);

    apply_defaults(*src, side, c);
    source::apply_side_files(*src, side, c, notes, meta.str("act").has_value());
    source::apply_metadata(meta, c);
    fill_unstated(*this, *src, prefix_, c, notes);
    apply_overrides(overrides, c);
    check_consistency(*this, side, meta, c);

    describe(c, notes);
    c.notes = notes.in_order();
    model_tensors_ = model_tensor_names(*file_, side, prefix_);
    if (quantization_.quantized())  // the scales, zeros and sums beside a quantized file's weights are no parameters
        model_tensors_.erase(std::remove_if(model_tensors_.begin(), model_tensors_.end(),
                                            [](const std::string& n) {
                                                return ends_with(n, ".weight.scale") || ends_with(n, ".weight.zero") ||
                                                       ends_with(n, ".weight.sums");
                                            }),
                             model_tensors_.end());
    c.parameters = 0;
    for (const auto& name : model_tensors_) c.parameters += file_->get(name).weights();
    return c;
}

}  // namespace vitreg
