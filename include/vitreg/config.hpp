#pragma once
// The resolved, immutable description of a ViT: everything the forward needs to know,
// gathered once from checkpoint metadata, a sibling config.json and tensor shapes.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vitreg/safetensors.hpp"

namespace vitreg {

// How attention scores become probabilities.
enum class AttentionKind {
    Softmax,   // e^z / Σ e^z
    Softmax1,  // e^z / (1 + Σ e^z): a head may abstain
    Sink,      // e^z / (e^s + Σ e^z), s a learned logit per head
};

// How the stored position-embedding grid is resampled to another grid (DESIGN.md §2).
enum class PosInterp {
    Offset,     // dinov2 without registers: scale factor (h0+0.1)/M, bicubic A=-0.75
    Antialias,  // dinov2 registers / timm: size, antialiased bicubic A=-0.5
    Size,       // HF Dinov2Model: size, bicubic A=-0.75
};

enum class MlpKind { Gelu, SwiGlu };

// Which naming scheme the checkpoint uses.
enum class Layout {
    Dinov2,   // dinov2 hub / timm names
    TimmReg,  // timm's converted register models (reg_token, cls_token holds its position)
    HF,       // HF transformers Dinov2Model / Dinov2WithRegistersModel
};

std::string to_string(AttentionKind k);
std::string to_string(PosInterp p);
std::string to_string(MlpKind m);
std::string to_string(Layout l);
// Parse user-facing names; throw UsageError listing the accepted ones.
AttentionKind parse_attention_kind(const std::string& s);
PosInterp parse_pos_interp(const std::string& s);

struct Config {
    Layout layout = Layout::Dinov2;
    int dim = 0;
    int depth = 0;
    int heads = 0;
    int head_dim = 0;
    int patch = 0;
    int registers = 0;
    int grid = 0;  // native position-embedding grid side M (pos_embed covers M×M patches)
    int mlp_hidden = 0;
    MlpKind mlp = MlpKind::Gelu;
    AttentionKind attention = AttentionKind::Softmax;          // what the forward runs
    AttentionKind trained_attention = AttentionKind::Softmax;  // what the checkpoint was trained with
    bool has_sinks = false;
    bool layer_scale = true;
    PosInterp pos_interp = PosInterp::Offset;
    float eps = 1e-6f;
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
};

// What the caller may change at load time.
struct ConfigOverrides {
    std::optional<AttentionKind> attention;
    std::optional<PosInterp> pos_interp;
    SafetensorsLimits limits;  // bounds on the checkpoint's header and config.json
};

}  // namespace vitreg
