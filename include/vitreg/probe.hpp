#pragma once
// Looking inside one forward. A Probe says what to record; the forward fills a Trace.
// Recording nothing costs nothing, and attention rows are copied only for the queries asked
// for: no N×N matrix exists unless every query is requested.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vitreg {

// A token named the way users think of it.
struct TokenRef {
    enum class Kind { Cls, Register, Patch };
    Kind kind = Kind::Cls;
    int index = 0;     // register number
    int row = 0, col = 0;  // patch position in the grid

    // "cls" | "reg:K" | "patch:R,C"; throws UsageError.
    static TokenRef parse(const std::string& text);
    std::string to_string() const;
    // Index in token order [CLS, registers, patches] ([registers, patches] without a class
    // token); throws UsageError when out of range or naming a class token the model lacks.
    int token_index(int registers, int grid_h, int grid_w, bool class_token = true) const;
};

// "all" | "last" | "i,j,..." (negative counts from the end, -1 = last) → layer indices of a
// model with `depth` blocks; throws UsageError naming the bad entry.
std::vector<int> resolve_layers(const std::string& spec, int depth);

struct Probe {
    bool norms = false;                 // every token's L2 / max-abs norm after every block, layer kurtosis
    std::vector<int> attention_layers;  // layers whose attention rows are recorded (all heads)
    std::vector<int> queries;           // token indices of the rows to record
    bool all_queries = false;           // record every row instead (N×N per head and layer)
    bool abstention = false;            // abstention mass of every query, every layer and head
    bool key_mass = false;              // mean attention each key receives (α_k), every layer and head
    std::vector<int> mlp_layers;        // MLP hidden activations (after GELU / SwiGLU) of these layers
    std::vector<int> block_layers;      // the residual stream after these blocks (get_intermediate_layers)
    bool blocks_normed = false;         // ...with the final LayerNorm applied
    std::vector<int> qkv_layers;        // the q | k | v projections of these layers (any query's row can then be recomputed)
    bool linear_inputs = false;         // the input of every linear, as it enters the GEMM (int8 calibration)
    bool pool_attention = false;        // an attention-pool head's probe query: its rows over every final-normed token (SigLIP's MAP)
    // One unit direction per layer [depth, dim] (a layer's defect direction): every token's |cos|
    // with its layer's direction after every block (the artifact rule's direction test).
    std::vector<float> directions;
    bool profile = false;  // the wall time of each stage of the forward (Trace::profile)

    // The probe behind every statistic of stats.json: norms, CLS rows of all layers,
    // abstention and key mass.
    static Probe statistics(int depth);
};

// Where one forward's wall time went (Probe::profile): seconds per stage, summed over the layers
// and the chunks of images they run in. Each linear counts with its fused epilogue (bias, GELU,
// layer scale, residual); attention is the rotary embedding, the scores, the normalizer and the
// weighted sum; `other` is the rest (recording, repairs, the features' collection). Only the
// profiled forward counts: not a denoise's shifted forwards nor an eviction's first forward.
struct ForwardProfile {
    enum Stage { Embed, Norms, Qkv, Attention, Proj, Fc1, MlpActivation, Fc2, Other, kStages };
    std::array<double, kStages> seconds{};
    double total = 0;  // the whole forward; seconds[Other] is what the named stages leave of it
    // "embed", "norms", "qkv", "attention", "proj", "fc1", "mlp_activation", "fc2", "other"
    static const char* name(int stage);
};

// Arrays are layer-major: one layer's values for the whole batch are contiguous.
struct Trace {
    int batch = 0, layers = 0, heads = 0, tokens = 0, registers = 0, grid_h = 0, grid_w = 0, mlp_hidden = 0;
    int test_time_registers = 0;  // the last of `registers` (Intervention)
    bool class_token = true;      // token 0 is the class token (false: tokens start with the registers)

    std::vector<float> norms;       // [layers, batch, tokens]  L2 over channels, residual stream after block l
    std::vector<float> max_abs;     // [layers, batch, tokens]  ∞-norm of the same
    std::vector<float> kurtosis;    // [layers, batch]          μ4/σ⁴ over tokens × channels (Pearson, not excess)
    std::vector<int> attention_layers, queries;  // what `attention` holds, in that order
    std::vector<float> attention;   // [attention_layers, batch, heads, queries, tokens]
    std::vector<float> abstention;  // [layers, batch, heads, tokens]  1 - Σp per query
    std::vector<float> key_mass;    // [layers, batch, heads, tokens]  (1/N) Σ_i A_ik
    std::vector<int> mlp_layers;
    std::vector<float> mlp;         // [mlp_layers, batch, tokens, mlp_hidden]
    int dim = 0;
    std::vector<int> block_layers;
    std::vector<float> blocks;      // [block_layers, batch, tokens, dim]
    std::vector<int> qkv_layers;
    std::vector<float> qkv;         // [qkv_layers, batch, tokens, 3 * dim]
    std::vector<std::uint8_t> evicted;  // [layers, batch, heads, tokens] keys an eviction removed (kept with q/k, so rows can be recomputed)
    std::vector<float> pool_attention;  // [batch, heads, tokens] the attention-pool head's probe rows (Probe::pool_attention)
    std::vector<float> direction_cos;   // [layers, batch, tokens]  |cos(x, u_l)| with Probe::directions' row l
    std::vector<std::string> linear_names;       // in forward order: "patch_embed.proj", "blocks.0.attn.qkv", ...
    std::vector<std::vector<float>> linear_inputs;  // per linear: [rows, in] (rows: the batch's patches or tokens)
    ForwardProfile profile;  // Probe::profile

    int register_offset() const { return class_token ? 1 : 0; }
    int patch_offset() const { return register_offset() + registers; }
    int patch_count() const { return grid_h * grid_w; }
    const float* norms_of(int layer, int b) const { return norms.data() + at(layer, b) * tokens; }
    const float* max_abs_of(int layer, int b) const { return max_abs.data() + at(layer, b) * tokens; }
    const float* direction_cos_of(int layer, int b) const { return direction_cos.data() + at(layer, b) * tokens; }
    // Row of query slot q (an index into `queries`) in attention layer slot l, head h.
    const float* attention_row(int l, int b, int h, int q) const {
        return attention.data() + ((at(l, b) * heads + h) * queries.size() + q) * tokens;
    }
    const float* abstention_of(int layer, int b, int h) const {
        return abstention.data() + (at(layer, b) * heads + h) * tokens;
    }
    const float* key_mass_of(int layer, int b, int h) const { return key_mass.data() + (at(layer, b) * heads + h) * tokens; }
    const float* mlp_of(int l, int b) const { return mlp.data() + at(l, b) * tokens * mlp_hidden; }
    const float* qkv_of(int l, int b) const { return qkv.data() + at(l, b) * tokens * 3 * dim; }
    const float* pool_attention_of(int b, int h) const { return pool_attention.data() + (static_cast<std::size_t>(b) * heads + h) * tokens; }
    // Block output slot l (an index into `block_layers`) of image b: [tokens, dim].
    const float* block_of(int l, int b) const { return blocks.data() + at(l, b) * tokens * dim; }
    // Every head's row of one query: [heads, tokens] (attention layer slot l, query slot q).
    std::vector<float> query_rows(int l, int b, int q) const;
    // Image b's patch tokens from every recorded block, channels side by side:
    // [patches, block_layers.size() * dim] (what dense export and the linear probe use).
    std::vector<float> patch_features(int b) const;
    // Slot of a recorded layer / query, or -1.
    int attention_slot(int layer) const;
    int query_slot(int token) const;

private:
    std::size_t at(int layer, int b) const { return static_cast<std::size_t>(layer) * batch + b; }
};

}  // namespace vitreg
