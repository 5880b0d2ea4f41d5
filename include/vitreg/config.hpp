#pragma once
// The resolved, immutable description of a ViT: everything the forward needs to know,
// gathered once from checkpoint metadata, a sibling config.json and tensor shapes.
#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "vitreg/enum_names.hpp"
#include "vitreg/resize_filter.hpp"
#include "vitreg/tensor_file.hpp"

namespace vitreg {

// How attention scores become probabilities.
enum class AttentionKind {
    Softmax,   // e^z / Σ e^z
    Softmax1,  // e^z / (1 + Σ e^z): a head may abstain
    Sink,      // e^z / (e^s + Σ e^z), s a learned logit per head
};

// How the stored position-embedding grid is resampled to another grid (docs/design.md,
// "Reference semantics").
enum class PosInterp {
    Offset,     // dinov2 without registers: scale factor (h0+0.1)/M, bicubic A=-0.75
    Antialias,  // dinov2 registers / timm: size, antialiased bicubic A=-0.5
    Size,       // HF Dinov2Model: size, bicubic A=-0.75
    Corners,    // torchvision's interpolate_embeddings: size, bicubic A=-0.75, align_corners=True
};

// The MLP's activation: fc1 -> act -> fc2, or SwiGLU's gated pair (w12 -> silu(x1)*x2 -> w3).
enum class MlpKind {
    Gelu,       // exact (erf) GELU
    QuickGelu,  // x * sigmoid(1.702 x): OpenAI-trained CLIP
    SwiGlu,
    GeluTanh,   // GELU's tanh approximation (gelu_pytorch_tanh): SigLIP
};

// Where the architecture comes from: names what `vitreg info` and reports print. The forward
// never branches on it; it reads the flags below (docs/design.md, "Families").
enum class Family { Dinov2, Timm, Clip, Siglip, Dinov3, Eva, Torchvision, Vit };

// What the model's own head reads (timm's global_pool).
enum class Pool {
    Token,  // the class token
    Avg,    // the mean of the patch tokens (then fc_norm when the checkpoint has one)
    Map,    // an attention-pool head: a learned probe attends over the final-normed tokens (SigLIP)
};

// Whose eval transform prepares the pixels (docs/design.md, "Pixel pipelines"): all resize with
// PIL, they differ in where the numbers come from, how the center crop rounds, and when the image
// becomes RGB.
enum class PixelPipeline {
    Torchvision,  // Resize(short) + CenterCrop, offsets rounded half to even (DINOv2's hub transform)
    Timm,         // torchvision's, with the short side floor(input_size / crop_pct)
    HF,           // the slow (PIL) image processors: the crop offset floored
    OpenClip,     // torchvision's, resized in the file's own mode and converted to RGB after
};

// Where the tokens' positions come from.
enum class Positions {
    Learned,    // a learned embedding added before the blocks, resampled to the grid (pos_interp)
    RopeAxial,  // DINOv3: q and k of the patches rotated by their centre's y and x in [-1, 1]
                // (each axis over its own count: any grid, nothing resampled); prefix tokens unrotated
    RopeEva,    // EVA-02 (timm RotaryEmbeddingCat): interleaved pairs rotated by the patch index scaled to a
                // reference grid (t = i / n · ref) times θ^(−4j/head_dim); prefix tokens unrotated
};

// The enums' user-facing names (enum_names.hpp), in the order their choices are listed.
template <>
struct EnumTable<AttentionKind> {
    static constexpr const char* what = "attention kind";
    static constexpr EnumName<AttentionKind> names[] = {
        {AttentionKind::Softmax, "softmax"}, {AttentionKind::Softmax1, "softmax1"}, {AttentionKind::Sink, "sink"}};
};
template <>
struct EnumTable<PosInterp> {
    static constexpr const char* what = "position interpolation";
    static constexpr EnumName<PosInterp> names[] = {
        {PosInterp::Offset, "offset"},
        {PosInterp::Antialias, "antialias"},
        {PosInterp::Size, "size"},
        {PosInterp::Corners, "corners"}};
};
template <>
struct EnumTable<MlpKind> {
    static constexpr const char* what = "activation";
    static constexpr EnumName<MlpKind> names[] = {{MlpKind::Gelu, "gelu"},
                                                  {MlpKind::QuickGelu, "quick_gelu"},
                                                  {MlpKind::SwiGlu, "swiglu"},
                                                  {MlpKind::GeluTanh, "gelu_tanh"}};
};
template <>
struct EnumTable<Family> {
    static constexpr const char* what = "family";
    static constexpr EnumName<Family> names[] = {{Family::Dinov2, "dinov2"}, {Family::Dinov3, "dinov3"},
                                                 {Family::Timm, "timm"},     {Family::Clip, "clip"},
                                                 {Family::Siglip, "siglip"}, {Family::Eva, "eva"},
                                                 {Family::Torchvision, "torchvision"}, {Family::Vit, "vit"}};
};
template <>
struct EnumTable<Pool> {
    static constexpr const char* what = "pool";
    static constexpr EnumName<Pool> names[] = {{Pool::Token, "token"}, {Pool::Avg, "avg"}, {Pool::Map, "map"}};
};
template <>
struct EnumTable<PixelPipeline> {
    static constexpr const char* what = "pipeline";
    static constexpr EnumName<PixelPipeline> names[] = {{PixelPipeline::Torchvision, "torchvision"},
                                                        {PixelPipeline::Timm, "timm"},
                                                        {PixelPipeline::HF, "hf"},
                                                        {PixelPipeline::OpenClip, "open_clip"}};
};
template <>
struct EnumTable<Positions> {
    static constexpr const char* what = "positions";
    static constexpr EnumName<Positions> names[] = {
        {Positions::Learned, "learned"}, {Positions::RopeAxial, "rope-axial"}, {Positions::RopeEva, "rope-eva"}};
};

std::string to_string(AttentionKind k);
std::string to_string(PosInterp p);
std::string to_string(MlpKind m);
std::string to_string(Family f);
std::string to_string(Pool p);
std::string to_string(PixelPipeline p);
std::string to_string(Positions p);
// Parse user-facing names; throw UsageError listing the accepted ones (parse_enum<E> for the others).
AttentionKind parse_attention_kind(const std::string& s);
PosInterp parse_pos_interp(const std::string& s);
PixelPipeline parse_pixel_pipeline(const std::string& s);

struct Config {
    std::string source = "dinov2";  // the checkpoint's naming scheme (what `vitreg info` prints as its layout)
    int dim = 0;
    int depth = 0;
    int heads = 0;
    int head_dim = 0;
    int patch = 0;
    int registers = 0;
    int grid = 0;  // native position-embedding grid side M (pos_embed covers M×M patches; RoPE: the native input's)
    int mlp_hidden = 0;
    MlpKind mlp = MlpKind::Gelu;  // the activation: gelu | quick_gelu | swiglu
    AttentionKind attention = AttentionKind::Softmax;          // what the forward runs
    AttentionKind trained_attention = AttentionKind::Softmax;  // what the checkpoint was trained with
    bool has_sinks = false;
    bool layer_scale = true;
    PosInterp pos_interp = PosInterp::Offset;
    Positions positions = Positions::Learned;
    float rope_theta = 100.0f;  // RoPE: the frequencies' base θ (inv_freq = θ^(−4j/head_dim)); EVA's temperature 1e4
    std::array<int, 2> rope_ref_grid{0, 0};  // RopeEva: timm's ref_feat_shape (h, w), the grid the angles span
    float eps = 1e-6f;
    // The family-neutral facts of docs/design.md, "Families" (timm's VisionTransformer flags). The
    // defaults are DINOv2's, so a dinov2 checkpoint sets none of them.
    Family family = Family::Dinov2;
    bool class_token = true;      // token 0 is a learned class token (false: [registers, patches])
    bool pos_embed_class = true;  // pos_embed has a row for the class token (false: timm no_embed_class,
                                  // the class token and registers get no position)
    bool pre_norm = false;        // norm_pre / CLIP ln_pre: a LayerNorm after adding positions, before the blocks
    bool patch_bias = true;       // the patch convolution has a bias (CLIP's conv1 has none)
    bool qkv_bias = true;         // attn.qkv has a bias
    bool final_norm = true;       // `norm` over every token (false: identity, timm avg pool with fc_norm)
    bool attn_norm = false;       // a LayerNorm on the attention output before attn.proj (EVA-CLIP's scale_attn_inner)
    bool mlp_norm = false;        // a LayerNorm on the MLP's hidden activation before fc2 / w3 (EVA-02's scale_mlp)
    Pool pool = Pool::Token;      // the model's own pooled feature: CLS, or the mean of the patches
    bool fc_norm = false;         // pooled = fc_norm(mean of the patch tokens) (timm global_pool='avg')
    int proj_dim = 0;             // E > 0: a projection proj [D, E], embedding = the head's input·proj
                                  // (CLIP: norm(CLS), or the pooled feature when pool is not Token)
    // The eval transform (--resize eval): shortest side to floor(input_size / crop_pct) with
    // `interpolation`, then a center crop of input_size, by the rules of `pipeline`. DINOv2's
    // 256 -> 224 is crop_pct 0.875; CLIP's is 1.
    int input_size = 224;
    double crop_pct = 0.875;
    bool eval_squash = false;  // the eval transform squashes both sides to eval_resize(), then crops input_size (SigLIP: no crop)
    PixelPipeline pipeline = PixelPipeline::Torchvision;
    ResizeFilter interpolation = ResizeFilter::Bicubic;
    std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
    std::array<float, 3> std{0.229f, 0.224f, 0.225f};
    DType dtype = DType::F32;
    std::int64_t parameters = 0;
    // Metadata evict=sink (a calibrated sink with eviction, vitreg calibrate-sink --evict-sink):
    // every run evicts each head's sink key.
    bool evict_sink = false;
    // Things the loader inferred or changed that a user should hear about.
    std::vector<std::string> notes;

    bool retrofit() const { return attention != trained_attention; }
    int native_size() const { return grid * patch; }
    // A learned pos_embed is added before the blocks (EVA-02 has one beside its rotary positions).
    bool has_pos_embed() const { return positions != Positions::RopeAxial; }
    // q and k of the patches are rotated in every block.
    bool rotary() const { return positions != Positions::Learned; }
    // Tokens before the registers: 1 with a class token, else 0.
    int prefix_tokens() const { return class_token ? 1 : 0; }
    // Shortest side of the eval transform before its center crop: floor(input_size / crop_pct).
    int eval_resize() const;
};

// Every field of a Config as JSON (enums by name, mean / std / rope_ref_grid as arrays); the keys
// are those of a converted checkpoint's metadata where it has one (config_metadata).
nlohmann::json to_json(const Config& c);
// The Config that to_json wrote; throws ConfigError naming the key that is missing or holds a bad value.
Config config_from_json(const nlohmann::json& j);
// A converted checkpoint's __metadata__ for its configuration: to_json's values as strings, under
// the same keys, for what the canonical tensor names do not tell (the checkpoint loader reads them).
std::map<std::string, std::string> config_metadata(const nlohmann::json& config);
// Sets the fields that metadata as config_metadata writes states, over what `c` holds (an act is
// read only when the tensors did not make c.mlp SwiGLU; evict=sink adds no note). Throws
// ConfigError naming `file`, the key and the value.
void apply_config_metadata(const std::map<std::string, std::string>& meta, Config& c, const std::string& file);

// What the caller may change at load time.
struct ConfigOverrides {
    std::optional<AttentionKind> attention;
    std::optional<PosInterp> pos_interp;
    SafetensorsLimits limits;  // bounds on the checkpoint's header and config.json
    // PyTorch files: the dotted key path of the state dict ("model", "model.state_dict");
    // empty: found by itself (the top level, or under model / state_dict / teacher / module).
    std::string state_dict_key;
};

}  // namespace vitreg
