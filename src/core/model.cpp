#include "vitreg/model.hpp"

#include <tbb/info.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "attention_pool.hpp"
#include "kernels.hpp"
#include "rope.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/forward_memory.hpp"
#include "core/defect_direction_rows.hpp"
#include "core/pos_embed.hpp"
#include "core/repair_edits.hpp"

namespace vitreg {

using kernels::Epilogue;
using kernels::Linear;
using kernels::Norm;
using kernels::RowMatrix;

namespace {

struct Block {
    Norm norm1, norm2;
    Norm attn_norm, mlp_norm;  // config.attn_norm: over the attention output; config.mlp_norm: over the hidden
    Linear qkv, proj, fc1, fc2;  // SwiGLU: fc1 = w12 [D → 2H], fc2 = w3 [H → D]
    Eigen::VectorXf ls1, ls2;
    Eigen::VectorXf sinks;  // [heads], zeros unless the checkpoint has sink logits
};

// Activation buffers are 64-byte aligned: Eigen's vectorized reductions (LayerNorm's mean)
// peel unaligned heads, so a buffer's alignment would otherwise change the summation order
// from one run to the next.
using gemm::Buffer;

Eigen::VectorXf to_vector(const std::vector<float>& v) {
    return Eigen::Map<const Eigen::VectorXf>(v.data(), static_cast<Eigen::Index>(v.size()));
}

// `stored` is the weight's shape on disk when it is not [out, in] (the patch conv).
// int8 per tensor: each linear's input mapping comes from the calibration file.
struct LinearLoader {
    const Checkpoint& ck;
    Precision precision;
    int int8_weight_bits;
    const Int8Calibration* calibration;  // null: per token
    std::string calibration_path;
    // Each float weight widened into this one buffer before it is packed: its pages are faulted
    // in once for the largest tensor, not again for every tensor (27 GB of fresh pages on a 7B).
    mutable std::vector<float> weights;
    bool in_place;             // bf16 weights, or an int8 or int4 file's, read from the file where they lie
    mutable bool used = false;  // some linear does: the model keeps the file
    mutable kernels::QuantizeScratch codes;  // the same for @int8's and @int4's codes before packing

    // `bias` false: the checkpoint has none (CLIP's patch embedding, qkv_bias=False); zeros.
    Linear operator()(const std::string& name, int out, int in, std::vector<std::int64_t> stored = {},
                      bool bias = true) const {
        if (stored.empty()) stored = {out, in};
        std::optional<quant::AffineU8> fixed;
        if (calibration) {
            const auto it = calibration->ranges.find(name);
            if (it == calibration->ranges.end())
                throw IoError(calibration_path + ": has no range for " + name + " (calibrated for another model?)");
            fixed = quant::affine_u8(it->second.min, it->second.max);
        }
        Eigen::VectorXf b = bias ? to_vector(ck.load(name + ".bias", {out})) : Eigen::VectorXf::Zero(out);
        Linear l;
        if (ck.quantization().precision == Precision::Int4) {  // packed as stored, not quantized again
            const Int4Tensor w = ck.load_int4(name + ".weight", stored);
            if (in_place && in % quant::kInt4Group == 0 && reinterpret_cast<std::uintptr_t>(w.codes) % 4 == 0) {
                l = kernels::make_linear_int4_mapped(w.codes, w.scale, w.zero, out, in, std::move(b));
                used = true;
            } else {
                l = kernels::make_linear_int4(w.codes, w.scales().data(), w.zeros().data(), out, in, std::move(b));
                ck.file().release(*w.view);
            }
        } else if (ck.quantization().quantized()) {
            const Int8Tensor w = ck.load_int8(name + ".weight", stored);
            if (in_place && in % 4 == 0 && reinterpret_cast<std::uintptr_t>(w.q) % 4 == 0) {
                l = kernels::make_linear_int8_mapped(w.q, w.scale.data(), w.sums.data(), out, in, std::move(b), fixed);
                used = true;
            } else {
                l = kernels::make_linear_int8(w.q, w.scale.data(), out, in, std::move(b), fixed, int8_weight_bits,
                                              w.sums.data());
                ck.file().release(*w.view);
            }
        } else if (const auto rows = in_place ? ck.mapped_bf16(name + ".weight", stored) : std::vector<Bf16Rows>{};
                   !rows.empty()) {
            l = kernels::make_linear_mapped(rows, out, in, std::move(b));
            used = true;
        } else {
            ck.load_into(name + ".weight", stored, weights);
            l = kernels::make_linear(weights.data(), out, in, std::move(b), precision, fixed, int8_weight_bits, &codes);
        }
        l.name = name;
        return l;
    }
};

Norm load_norm(const Checkpoint& ck, const std::string& name, int dim) {
    return Norm{to_vector(ck.load(name + ".weight", {dim})), to_vector(ck.load(name + ".bias", {dim}))};
}

// One forward's activations. Kept in a pool and grown, never shrunk, so repeated forwards
// allocate, zero and page-fault nothing.
struct Workspace {
    Buffer x;       // the residual stream [rows, D]
    Buffer normed;  // LayerNorm output, then the attention output (the qkv GEMM has consumed it)
    Buffer qkv;     // [rows, 3D]
    Buffer wide;    // the gathered patches first, then the MLP hidden activations
    Buffer gated;   // SwiGLU's gated half [rows, H]
    kernels::AttentionScratch attention;
    kernels::LinearScratch lowp;  // a linear's input in bf16 or uint8
};

// One forward's shape and the buffers it runs in (views into its Workspace): what its stages
// share (the embedding, each block's attention and MLP, the collection of the features).
struct Pass {
    Pass(Workspace& ws, const Probe& probe, Trace& trace) : ws(ws), probe(probe), trace(trace) {}

    Workspace& ws;
    const Probe& probe;
    Trace& trace;
    int batch = 0, height = 0, width = 0;
    int D = 0;                                 // the model's width
    int P = 0, R = 0, K = 0;                   // prefix tokens (the class token), all registers, test-time ones
    int gh = 0, gw = 0, np = 0;                // the patch grid and its patches
    int N = 0, rows = 0;                       // tokens per image, rows of the stream (batch × N)
    int attention_images = 0, mlp_images = 0;  // images per chunk of the attention and of the MLP
    float* x = nullptr;                        // the residual stream [rows, D]
    float* normed = nullptr;  // a LayerNorm's output (the final norm's: every row), then the attention's
    float* qkv = nullptr;     // one attention chunk's q|k|v
    float* hidden = nullptr;  // the gathered patches, then one MLP chunk's hidden activations
    float* gated = nullptr;   // SwiGLU's gated half, or the normed hidden
    std::vector<int> query_slot;  // each token's slot among the Probe's queries, -1 for none
    std::shared_ptr<const RopeTables> rope;  // the rotary tables of this grid, where the model has them

    // Every linear goes through here: the Probe may record its input (int8 calibration).
    void record_input(const Linear& l, const float* in, int n) const {
        if (!probe.linear_inputs) return;
        trace.linear_names.push_back(l.name);
        trace.linear_inputs.emplace_back(in, in + static_cast<std::size_t>(n) * l.in());
    }
    void linear(ForwardProfile::Stage stage, const float* in, int n, const Linear& l, float* out, Epilogue e,
                const Eigen::VectorXf* scale = nullptr) const {
        record_input(l, in, n);
        timed(stage, [&] { kernels::linear(in, n, l, out, e, ws.lowp, scale); });
    }
    // Runs `step`, its wall time added to `stage` of the trace's profile where the Probe asks.
    template <class Step>
    void timed(ForwardProfile::Stage stage, const Step& step) const {
        if (!probe.profile) return step();
        const auto t0 = std::chrono::steady_clock::now();
        step();
        trace.profile.seconds[stage] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    void layer_norm(const float* in, int n, int width, const Norm& norm, float eps, float* out) const {
        timed(ForwardProfile::Norms, [&] { kernels::layer_norm(in, n, width, norm, eps, out); });
    }
};

// Each patch of the images [batch, 3, height, width] gathered as (channel, ky, kx) into
// patches [batch × patches, 3·p·p], the order of the patch embedding's weight.
void gather_patches(const float* pixels, int batch, int height, int width, int p, float* patches) {
    const int gh = height / p, gw = width / p, np = gh * gw, pp3 = 3 * p * p;
    for (int b = 0; b < batch; ++b)
        for (int py = 0; py < gh; ++py)
            for (int px = 0; px < gw; ++px) {
                float* dst = patches + (static_cast<std::size_t>(b) * np + py * gw + px) * pp3;
                for (int ch = 0; ch < 3; ++ch)
                    for (int ky = 0; ky < p; ++ky) {
                        const float* src = pixels + ((static_cast<std::size_t>(b) * 3 + ch) * height + py * p + ky) * width + px * p;
                        std::copy(src, src + p, dst + (ch * p + ky) * p);
                    }
            }
}

}  // namespace

struct Model::Impl {
    Config config;
    std::string path;
    PrecisionOptions precision;
    Linear patch_embed;          // [3*p*p → D], input ordered (channel, ky, kx) like the conv weight
    Eigen::VectorXf cls;         // CLS token with its position embedding added (when it has one)
    RowMatrix registers;         // [R, D], no position embedding
    std::vector<float> pos_grid;  // [M*M, D] patch position embeddings
    std::vector<Block> blocks;
    Norm norm_pre;               // config.pre_norm
    Norm norm;                   // config.final_norm
    Norm fc_norm;                // config.fc_norm
    RowMatrix proj;              // [D, E] when config.proj_dim
    AttentionPool attn_pool;     // config.pool == Pool::Map
    std::shared_ptr<const TensorFile> weights_file;  // held while linears read their weights in it

    // What a forward needs per grid (the resampled pos_embed, the rotary tables), made on first
    // use and kept: concurrent forwards share one copy.
    template <class T>
    struct PerGrid {
        std::mutex mutex;
        std::map<std::pair<int, int>, std::shared_ptr<const T>> made;

        template <class Make>
        std::shared_ptr<const T> get(int h, int w, const Make& make) {
            {
                std::lock_guard<std::mutex> lock(mutex);
                auto it = made.find({h, w});
                if (it != made.end()) return it->second;
            }
            auto value = std::make_shared<const T>(make());
            std::lock_guard<std::mutex> lock(mutex);
            return made.emplace(std::make_pair(h, w), value).first->second;
        }
    };
    mutable PerGrid<std::vector<float>> pos_cache;
    mutable PerGrid<RopeTables> rope_cache;

    std::shared_ptr<const RopeTables> rope_for(int h, int w) const {
        return rope_cache.get(h, w, [&] {
            const Config& c = config;
            return c.positions == Positions::RopeEva
                       ? rope_eva_tables(h, w, c.head_dim, c.rope_theta, c.rope_ref_grid[0], c.rope_ref_grid[1])
                       : rope_axial_tables(h, w, c.head_dim, c.rope_theta);
        });
    }
    std::shared_ptr<const std::vector<float>> pos_for(int h, int w) const {
        return pos_cache.get(h, w, [&] { return resample_pos_embed(pos_grid, config.grid, config.dim, h, w, config.pos_interp); });
    }

    // One arena per thread count, kept for the model's life, and the forward runs inside
    // execute(): a fresh arena per forward, or the implicit one, cost ~6 ms at 2 threads
    // (ViT-S/224, 67.7 ms instead of 61.5; measured, the cause inside oneTBB not pinned down).
    mutable std::mutex arena_mutex;
    mutable std::map<int, std::unique_ptr<tbb::task_arena>> arenas;

    tbb::task_arena& arena(int threads) const {
        std::lock_guard<std::mutex> lock(arena_mutex);
        auto& a = arenas[threads];
        if (!a) a = std::make_unique<tbb::task_arena>(threads);
        return *a;
    }

    // Workspaces for concurrent forwards; each forward borrows one for its duration.
    mutable std::mutex pool_mutex;
    mutable std::vector<std::unique_ptr<Workspace>> pool;

    std::unique_ptr<Workspace> borrow() const {
        std::lock_guard<std::mutex> lock(pool_mutex);
        if (pool.empty()) return std::make_unique<Workspace>();
        auto ws = std::move(pool.back());
        pool.pop_back();
        return ws;
    }
    void give_back(std::unique_ptr<Workspace> ws) const {
        std::lock_guard<std::mutex> lock(pool_mutex);
        pool.push_back(std::move(ws));
    }

    // `evicted`: [layers, batch, heads, tokens] keys to evict, or null. `shifted`: a denoise's
    // other forwards (null without one).
    Features run(const float* pixels, int batch, int height, int width, const Intervention& edit,
                 const std::uint8_t* evicted, const Probe* probe, Trace* trace,
                 const ShiftedStreams* shifted = nullptr) const;
    Features run(Workspace& ws, const float* pixels, int batch, int height, int width, const Intervention& edit,
                 const std::uint8_t* evicted, const Probe* probe, Trace* trace, const ShiftedStreams* shifted) const;
    // The stages of one forward (run): its shape and buffers, the tokens, each block's attention
    // and MLP, and the features read off the stream.
    Pass plan(Workspace& ws, int batch, int height, int width, int test_time_registers, const Probe& probe,
              Trace& trace) const;
    void embed(const Pass& s, const float* pixels) const;
    void attention_block(const Pass& s, int layer, const std::uint8_t* evicted) const;
    void mlp_block(const Pass& s, int layer, const Intervention& edit) const;
    Features collect(const Pass& s) const;
    void pool_features(const Pass& s, Features& f) const;
    // f.embedding: the head's input (the model's own pooled feature) times proj.
    void project(Features& f) const;
};

namespace {

// Whether the linears run on the file's pages where they lie (--file-weights mapped): bf16 weights
// where vdpbf16ps runs them, an int8 or int4 file's where the in-place int8 tiles do.
bool weights_in_place(const PrecisionOptions& precision, bool quantized_file) {
    if (precision.file_weights_packed) return false;
    if (precision.precision == Precision::Bf16) return gemm::bf16_in_place();
    return precision.precision != Precision::Fp32 && quantized_file && gemm::int8_in_place();
}

}  // namespace

Model Model::load(const std::string& path, const ConfigOverrides& overrides, const PrecisionOptions& precision) {
    precision.validate();
    const Checkpoint ck(path, overrides);
    refuse_other_precision(ck, precision);
    auto impl = std::make_shared<Impl>();
    const Config& c = ck.config();
    impl->config = c;
    impl->path = ck.path();
    impl->precision = precision;
    const int D = c.dim, p = c.patch, M = c.grid;
    Int8Calibration calibration;
    const bool per_tensor = precision.precision == Precision::Int8 && precision.act_quant == ActQuant::PerTensor;
    if (per_tensor) calibration = read_int8_calibration(precision.scales);
    const LinearLoader load_linear{ck, precision.precision, precision.int8_weight_bits,
                                   per_tensor ? &calibration : nullptr, precision.scales, {},
                                   weights_in_place(precision, ck.quantization().quantized()), false, {}};

    impl->patch_embed = load_linear("patch_embed.proj", D, 3 * p * p, {D, 3, p, p}, c.patch_bias);
    if (c.class_token) impl->cls = to_vector(ck.load("cls_token", {1, 1, D}));
    if (c.registers > 0) {
        const auto r = ck.load("register_tokens", {1, c.registers, D});
        impl->registers = Eigen::Map<const RowMatrix>(r.data(), c.registers, D);
    }
    if (!c.has_pos_embed()) {
        // DINOv3's rotary positions only: nothing is added to the tokens
    } else if (!c.pos_embed_class) {
        // timm no_embed_class: pos_embed covers the patches only (timm's converted DINOv2-reg
        // folded pos_embed[0] into cls_token).
        impl->pos_grid = ck.load("pos_embed", {1, M * M, D});
    } else {
        auto pos = ck.load("pos_embed", {1, 1 + M * M, D});
        impl->cls += Eigen::Map<const Eigen::VectorXf>(pos.data(), D);
        impl->pos_grid.assign(pos.begin() + D, pos.end());
    }
    if (c.pre_norm) impl->norm_pre = load_norm(ck, "norm_pre", D);

    const bool swiglu = c.mlp == MlpKind::SwiGlu;
    for (int i = 0; i < c.depth; ++i) {
        const std::string b = "blocks." + std::to_string(i) + ".";
        Block blk;
        blk.norm1 = load_norm(ck, b + "norm1", D);
        blk.norm2 = load_norm(ck, b + "norm2", D);
        blk.qkv = load_linear(b + "attn.qkv", 3 * D, D, {}, c.qkv_bias);
        if (c.attn_norm) blk.attn_norm = load_norm(ck, b + "attn.norm", D);
        if (c.mlp_norm) blk.mlp_norm = load_norm(ck, b + "mlp.norm", c.mlp_hidden);
        blk.proj = load_linear(b + "attn.proj", D, D);
        if (swiglu) {
            blk.fc1 = load_linear(b + "mlp.w12", 2 * c.mlp_hidden, D);
            blk.fc2 = load_linear(b + "mlp.w3", D, c.mlp_hidden);
        } else {
            blk.fc1 = load_linear(b + "mlp.fc1", c.mlp_hidden, D);
            blk.fc2 = load_linear(b + "mlp.fc2", D, c.mlp_hidden);
        }
        blk.ls1 = c.layer_scale ? to_vector(ck.load(b + "ls1.gamma", {D})) : Eigen::VectorXf::Ones(D);
        blk.ls2 = c.layer_scale ? to_vector(ck.load(b + "ls2.gamma", {D})) : Eigen::VectorXf::Ones(D);
        blk.sinks = c.has_sinks ? to_vector(ck.load(b + "attn.sinks", {c.heads})) : Eigen::VectorXf::Zero(c.heads);
        impl->blocks.push_back(std::move(blk));
    }
    if (c.final_norm) impl->norm = load_norm(ck, "norm", D);
    if (c.fc_norm) impl->fc_norm = load_norm(ck, "fc_norm", D);
    if (c.pool == Pool::Map) impl->attn_pool = AttentionPool::load(ck, c);
    if (c.proj_dim > 0) {
        const auto w = ck.load("proj", {D, c.proj_dim});
        impl->proj = Eigen::Map<const RowMatrix>(w.data(), D, c.proj_dim);
    }

    if (load_linear.used) impl->weights_file = ck.shared_file();
    Model m;
    m.impl_ = std::move(impl);
    m.intervention_.evict.sink = c.evict_sink;
    return m;
}

Model Model::with(const Intervention& intervention) const {
    intervention.validate(impl_->config);
    Model m = *this;
    m.intervention_ = intervention;
    m.intervention_.evict.sink = m.intervention_.evict.sink || impl_->config.evict_sink;
    return m;
}

Model::WeightBytes Model::weight_bytes() const {
    WeightBytes b;
    const auto add = [&](const Linear& l) {
        b.held += l.held_bytes();
        b.mapped += l.mapped_bytes();
    };
    add(impl_->patch_embed);
    for (const Block& blk : impl_->blocks)
        for (const Linear* l : {&blk.qkv, &blk.proj, &blk.fc1, &blk.fc2}) add(*l);
    return b;
}

int Model::registers() const { return impl_->config.registers + intervention_.test_time_registers; }

const Config& Model::config() const { return impl_->config; }
const PrecisionOptions& Model::precision() const { return impl_->precision; }
const std::string& Model::path() const { return impl_->path; }

std::vector<float> Model::sink_logits(int layer) const {
    const auto& s = impl_->blocks.at(static_cast<std::size_t>(layer)).sinks;
    return std::vector<float>(s.data(), s.data() + s.size());
}

double Model::flops_per_image(int height, int width) const {
    const Config& c = impl_->config;
    const double D = c.dim, H = c.mlp_hidden, p = c.patch;
    const double patches = double(height / c.patch) * double(width / c.patch);
    const double N = c.prefix_tokens() + registers() + patches;
    const double mlp = c.mlp == MlpKind::SwiGlu ? 2 * N * D * 2 * H + 2 * N * H * D : 2 * N * D * H * 2;
    const double block = 2 * N * D * 3 * D + 2 * 2 * N * N * D + 2 * N * D * D + mlp;
    // A denoise runs its K forwards for every image.
    return intervention_.forwards_per_image() * (2 * patches * 3 * p * p * D + c.depth * block);
}

std::int64_t Model::tokens(int height, int width) const {
    const Config& c = impl_->config;
    return c.prefix_tokens() + registers() + std::int64_t(height / c.patch) * (width / c.patch);
}

Model Model::with_memory_cap(std::int64_t bytes) const {
    Model m = *this;
    m.memory_cap_ = bytes;
    return m;
}

std::int64_t Model::memory_cap() const { return memory_cap_ > 0 ? memory_cap_ : default_memory_cap(); }

void Model::check_tokens(int height, int width, std::int64_t max_tokens, const std::string& name) const {
    const std::int64_t n = tokens(height, width);
    const std::string input = name + ": a " + std::to_string(width) + "x" + std::to_string(height) + " input makes " +
                              std::to_string(n) + " tokens";
    if (max_tokens > 0 && n > max_tokens)
        throw UsageError(input + ", over the limit of " + std::to_string(max_tokens) + " (--max-tokens)");
    if (max_tokens != kMaxTokensFromMemory) return;
    const ForwardMemory need = forward_memory(*this, height, width);
    const std::int64_t cap = memory_cap();
    if (need.total() > cap)
        throw UsageError(input + ", whose forward needs about " + format_bytes(need.total()) + " (weights " +
                         format_bytes(need.weights) + ", activations " + format_bytes(need.activations) + ", attention " +
                         format_bytes(need.attention) + ", margin " + format_bytes(need.margin) + "), over the memory cap of " +
                         format_bytes(cap) +
                         " (--max-memory; --max-tokens N sets a bound in tokens instead)");
}

namespace {

void check_layers(const std::vector<int>& layers, int depth, const char* what) {
    for (int l : layers)
        if (l < 0 || l >= depth)
            throw UsageError(std::string(what) + " layer " + std::to_string(l) + " is out of range (the model has " +
                             std::to_string(depth) + " layers: 0.." + std::to_string(depth - 1) + ")");
}

// Sizes the trace's arrays for what the probe asks; returns each token's query slot.
std::vector<int> prepare_trace(const Probe& probe, const Config& c, int registers, int test_time_registers, int batch,
                               int gh, int gw, Trace& t) {
    const int N = c.prefix_tokens() + registers + gh * gw;
    t = Trace{};
    t.class_token = c.class_token;
    t.batch = batch;
    t.layers = c.depth;
    t.heads = c.heads;
    t.tokens = N;
    t.registers = registers;
    t.test_time_registers = test_time_registers;
    t.grid_h = gh;
    t.grid_w = gw;
    t.mlp_hidden = c.mlp_hidden;
    t.dim = c.dim;
    const std::size_t per_layer = static_cast<std::size_t>(batch) * N;
    if (probe.norms) {
        t.norms.resize(c.depth * per_layer);
        t.max_abs.resize(c.depth * per_layer);
        t.kurtosis.resize(static_cast<std::size_t>(c.depth) * batch);
    }
    if (!probe.directions.empty()) {
        if (probe.directions.size() != static_cast<std::size_t>(c.depth) * c.dim)
            throw UsageError("probe: " + std::to_string(probe.directions.size()) + " direction values for a model of " +
                             std::to_string(c.depth) + " layers of width " + std::to_string(c.dim) + " (expected one direction per layer)");
        t.direction_cos.resize(c.depth * per_layer);
    }
    check_layers(probe.attention_layers, c.depth, "attention");
    check_layers(probe.mlp_layers, c.depth, "MLP");
    check_layers(probe.block_layers, c.depth, "block");
    std::vector<int> slot(N, -1);
    if (!probe.attention_layers.empty()) {
        t.attention_layers = probe.attention_layers;
        if (probe.all_queries) {
            for (int q = 0; q < N; ++q) t.queries.push_back(q);
        } else {
            t.queries = probe.queries;
        }
        for (std::size_t s = 0; s < t.queries.size(); ++s) {
            if (t.queries[s] < 0 || t.queries[s] >= N)
                throw UsageError("query token " + std::to_string(t.queries[s]) + " is out of range (" + std::to_string(N) +
                                 " tokens)");
            slot[t.queries[s]] = static_cast<int>(s);
        }
        t.attention.resize(t.attention_layers.size() * per_layer * c.heads * t.queries.size());
    }
    if (probe.abstention) t.abstention.resize(c.depth * per_layer * c.heads);
    if (probe.key_mass) t.key_mass.resize(c.depth * per_layer * c.heads);
    if (!probe.mlp_layers.empty()) {
        t.mlp_layers = probe.mlp_layers;
        t.mlp.resize(t.mlp_layers.size() * per_layer * c.mlp_hidden);
    }
    t.block_layers = probe.block_layers;
    t.blocks.resize(t.block_layers.size() * per_layer * c.dim);
    check_layers(probe.qkv_layers, c.depth, "qkv");
    t.qkv_layers = probe.qkv_layers;
    t.qkv.resize(t.qkv_layers.size() * per_layer * 3 * c.dim);
    if (probe.pool_attention) {
        if (c.pool != Pool::Map)
            throw UsageError("the probe query is an attention-pool head's (SigLIP's MAP), and this model pools with " +
                             to_string(c.pool) + ": query cls, reg:K or patch:R,C instead");
        t.pool_attention.resize(per_layer * c.heads);
    }
    return slot;
}

// The MLP's hidden activation of `rows` rows from row `first` on, where the Probe asked for it.
void record_hidden(int layer, const float* hidden, std::size_t first, int rows, Trace& t) {
    const auto slot = std::find(t.mlp_layers.begin(), t.mlp_layers.end(), layer);
    if (slot == t.mlp_layers.end()) return;
    const std::size_t layer_size = static_cast<std::size_t>(t.batch) * t.tokens * t.mlp_hidden;
    std::copy(hidden, hidden + static_cast<std::size_t>(rows) * t.mlp_hidden,
              t.mlp.begin() + static_cast<std::ptrdiff_t>((slot - t.mlp_layers.begin()) * layer_size + first * t.mlp_hidden));
}

// After block `layer`: token norms and kurtosis of the residual stream x [batch*tokens, dim], and
// the block outputs the Probe asked for.
void record_layer(const Probe& probe, int layer, const float* x, int dim, Trace& t) {
    const int rows = t.batch * t.tokens;
    const std::size_t at = static_cast<std::size_t>(layer) * rows;
    if (probe.norms) {
        const auto m = kernels::token_moments(x, rows, dim);
        std::copy(m.l2.begin(), m.l2.end(), t.norms.begin() + at);
        std::copy(m.max_abs.begin(), m.max_abs.end(), t.max_abs.begin() + at);
        for (int b = 0; b < t.batch; ++b) {
            double s[4] = {0, 0, 0, 0};
            for (int i = b * t.tokens; i < (b + 1) * t.tokens; ++i)
                for (int k = 0; k < 4; ++k) s[k] += m.sums[static_cast<std::size_t>(i) * 4 + k];
            const double n = static_cast<double>(t.tokens) * dim, mean = s[0] / n;
            const double m2 = s[1] / n - mean * mean;
            const double m4 = s[3] / n - 4 * mean * s[2] / n + 6 * mean * mean * s[1] / n - 3 * mean * mean * mean * mean;
            t.kurtosis[static_cast<std::size_t>(layer) * t.batch + b] = m2 > 0 ? static_cast<float>(m4 / (m2 * m2)) : 0.0f;
        }
    }
    if (!probe.directions.empty()) {
        const float* u = probe.directions.data() + static_cast<std::size_t>(layer) * dim;
        for (int r = 0; r < rows; ++r) t.direction_cos[at + r] = abs_cosine(x + static_cast<std::size_t>(r) * dim, u, dim);
    }
    // A layer may be asked for twice (e.g. "-1,-1"); every slot gets its copy.
    for (std::size_t k = 0; k < t.block_layers.size(); ++k)
        if (t.block_layers[k] == layer) {
            const std::size_t n = static_cast<std::size_t>(rows) * dim;
            std::copy(x, x + n, t.blocks.begin() + k * n);
        }
}

// Test-time registers (Jiang et al. 2025): in each image, neuron n's activation on the
// test-time registers (rows first..first+count) becomes its maximum over all the image's
// tokens, and on the patches (the rows after them) 0. act is [batch*tokens, hidden].
void shift_register_neuron(float* act, int batch, int tokens, int hidden, int n, int first, int count) {
    for (int b = 0; b < batch; ++b) {
        float* col = act + static_cast<std::size_t>(b) * tokens * hidden + n;
        float top = col[0];
        for (int t = 1; t < tokens; ++t) top = std::max(top, col[static_cast<std::size_t>(t) * hidden]);
        for (int t = first; t < first + count; ++t) col[static_cast<std::size_t>(t) * hidden] = top;
        for (int t = first + count; t < tokens; ++t) col[static_cast<std::size_t>(t) * hidden] = 0.0f;
    }
}

}  // namespace

Features Model::forward(const float* pixels, int batch, int height, int width, const ForwardOptions& options) const {
    Trace unused;
    return forward(pixels, batch, height, width, Probe{}, unused, options);
}

Features Model::forward(const float* pixels, int batch, int height, int width, const Probe& probe, Trace& trace,
                        const ForwardOptions& options) const {
    const Config& c = impl_->config;
    if (batch <= 0) throw UsageError("forward: batch must be positive");
    if (height <= 0 || width <= 0 || height % c.patch || width % c.patch)
        throw UsageError("forward: input " + std::to_string(width) + "x" + std::to_string(height) +
                         " is not a positive multiple of the patch size " + std::to_string(c.patch));
    check_tokens(height, width, options.max_tokens, "forward");
    Features f;
    const auto run = [&] {
        // A denoise's shifted forwards first: the repairs written before it apply to them too.
        ShiftedStreams shifted;
        const auto denoise = std::find_if(intervention_.repairs.begin(), intervention_.repairs.end(),
                                          [](const Repair& r) { return r.shifts > 0; });
        if (denoise != intervention_.repairs.end()) {
            shifted.shifts = denoise_shifts(denoise->shifts);
            const auto others = shifted_pixels(pixels, batch, height, width, c.patch, shifted.shifts);
            Model before = *this;
            before.intervention_.repairs.assign(intervention_.repairs.begin(), denoise);
            Probe last;
            last.block_layers = {c.depth - 1};
            Trace streams;
            ForwardOptions inner = options;
            inner.in_current_arena = true;
            before.forward(others.data(), batch * (denoise->shifts - 1), height, width, last, streams, inner);
            shifted.rows = std::move(streams.blocks);
        }
        std::vector<std::uint8_t> evicted;
        if (intervention_.evict.any()) {
            // The keys to evict come from a first forward without the eviction (docs/design.md,
            // "Interventions and the study"), and without the repairs (they edit the stream, not which keys
            // are there).
            Intervention first_edit = intervention_;
            first_edit.evict = {};
            first_edit.repairs.clear();
            Probe first_probe;
            first_probe.key_mass = intervention_.evict.sink;
            first_probe.norms = intervention_.evict.artifacts;
            Trace first;  // static keys need only its shape
            if (intervention_.evict.per_image())
                impl_->run(pixels, batch, height, width, first_edit, nullptr, &first_probe, &first);
            else
                prepare_trace(first_probe, c, registers(), intervention_.test_time_registers, batch, height / c.patch,
                              width / c.patch, first);
            evicted = eviction_mask(intervention_.evict, first, c.attention);
        }
        f = impl_->run(pixels, batch, height, width, intervention_, evicted.empty() ? nullptr : evicted.data(), &probe,
                       &trace, shifted.shifts.empty() ? nullptr : &shifted);
        if (!trace.qkv_layers.empty()) trace.evicted = std::move(evicted);
    };
    if (options.in_current_arena) run();
    else impl_->arena(options.threads > 0 ? options.threads : tbb::info::default_concurrency()).execute(run);
    return f;
}

Features Model::Impl::run(const float* pixels, int batch, int height, int width, const Intervention& edit,
                          const std::uint8_t* evicted, const Probe* probe, Trace* trace,
                          const ShiftedStreams* shifted) const {
    auto ws = borrow();
    Features f = run(*ws, pixels, batch, height, width, edit, evicted, probe, trace, shifted);
    give_back(std::move(ws));  // a forward that threw drops its workspace instead
    return f;
}

Features Model::Impl::run(Workspace& ws, const float* pixels, int batch, int height, int width, const Intervention& edit,
                          const std::uint8_t* evicted, const Probe* probe, Trace* trace,
                          const ShiftedStreams* shifted) const {
    const Config& c = config;
    const auto t0 = std::chrono::steady_clock::now();
    const Pass s = plan(ws, batch, height, width, edit.test_time_registers, *probe, *trace);
    s.timed(ForwardProfile::Embed, [&] { embed(s, pixels); });
    for (int layer = 0; layer < c.depth; ++layer) {
        attention_block(s, layer, evicted);
        mlp_block(s, layer, edit);
        if (!edit.repairs.empty())
            apply_repairs(edit.repairs, layer, s.x, StreamShape{batch, s.N, s.D, s.P, c.registers, s.P + s.R, s.gh, s.gw}, c,
                          shifted);
        record_layer(*probe, layer, s.x, s.D, *trace);
    }
    Features f = collect(s);
    if (probe->profile) {
        ForwardProfile& p = trace->profile;
        p.total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        double named = 0;
        for (int stage = 0; stage < ForwardProfile::Other; ++stage) named += p.seconds[stage];
        p.seconds[ForwardProfile::Other] = std::max(0.0, p.total - named);
    }
    return f;
}

Pass Model::Impl::plan(Workspace& ws, int batch, int height, int width, int test_time_registers, const Probe& probe,
                       Trace& trace) const {
    const Config& c = config;
    Pass s(ws, probe, trace);
    s.batch = batch, s.height = height, s.width = width;
    s.D = c.dim, s.P = c.prefix_tokens(), s.K = test_time_registers, s.R = c.registers + s.K;
    s.gh = height / c.patch, s.gw = width / c.patch, s.np = s.gh * s.gw;
    s.N = s.P + s.R + s.np, s.rows = batch * s.N;
    const int pp3 = 3 * c.patch * c.patch;
    const int hidden_width = blocks.empty() ? 0 : blocks.front().fc1.out();
    // Images per chunk of the attention and of the MLP: as many as keep q|k|v, or fc1's output,
    // within ~1.5 MB per thread (each core's L2; one image at least); all of them where the Probe
    // records each linear's input. q|k|v and the MLP's hidden buffers hold one chunk.
    const auto images_within = [&](int row_floats) {
        const std::size_t budget = (std::size_t{3} << 19) * static_cast<std::size_t>(tbb::this_task_arena::max_concurrency()),
                          per_image = static_cast<std::size_t>(s.N) * row_floats * 4;
        return probe.linear_inputs ? batch : std::clamp(static_cast<int>(budget / per_image), 1, batch);
    };
    s.attention_images = images_within(3 * s.D), s.mlp_images = images_within(hidden_width);
    const std::size_t attention_rows = static_cast<std::size_t>(s.attention_images) * s.N,
                      mlp_rows = static_cast<std::size_t>(s.mlp_images) * s.N;
    s.x = gemm::at_least(ws.x, static_cast<std::size_t>(s.rows) * s.D);
    s.normed = gemm::at_least(ws.normed, static_cast<std::size_t>(s.rows) * s.D);
    s.qkv = gemm::at_least(ws.qkv, attention_rows * 3 * s.D);
    s.hidden = gemm::at_least(ws.wide, std::max(mlp_rows * hidden_width, static_cast<std::size_t>(batch) * s.np * pp3));
    const bool second_hidden = c.mlp == MlpKind::SwiGlu || c.mlp_norm;  // SwiGLU's gated half, or the normed hidden
    s.gated = gemm::at_least(ws.gated, second_hidden ? mlp_rows * c.mlp_hidden : 0);
    s.query_slot = prepare_trace(probe, c, s.R, s.K, batch, s.gh, s.gw, trace);
    if (c.rotary()) s.rope = rope_for(s.gh, s.gw);
    return s;
}

// Tokens [CLS, registers, test-time registers, patches] (no CLS without a class token);
// position embeddings on CLS (unless no_embed_class) and patches only; then norm_pre over
// every token; test-time registers enter the blocks as zeros.
void Model::Impl::embed(const Pass& s, const float* pixels) const {
    const Config& c = config;
    const int D = s.D, P = s.P, R = s.R, K = s.K, N = s.N, np = s.np, pp3 = 3 * c.patch * c.patch;
    // Each image's patches go through one GEMM that writes its tokens straight into their rows of x.
    float* patches = s.hidden;
    gather_patches(pixels, s.batch, s.height, s.width, c.patch, patches);
    const auto pos = c.has_pos_embed() ? pos_for(s.gh, s.gw) : nullptr;
    s.record_input(patch_embed, patches, s.batch * np);  // one GEMM per image below, one input
    for (int b = 0; b < s.batch; ++b) {
        float* seq = s.x + static_cast<std::size_t>(b) * N * D;
        float* patch_rows = seq + static_cast<std::size_t>(P + R) * D;
        kernels::linear(patches + static_cast<std::size_t>(b) * np * pp3, np, patch_embed, patch_rows, Epilogue::Bias,
                        s.ws.lowp);
        if (P) Eigen::Map<Eigen::VectorXf>(seq, D) = cls;
        if (c.registers) Eigen::Map<RowMatrix>(seq + static_cast<std::size_t>(P) * D, c.registers, D) = registers;
        if (K) Eigen::Map<RowMatrix>(seq + static_cast<std::size_t>(P + c.registers) * D, K, D).setZero();
        if (pos) Eigen::Map<RowMatrix>(patch_rows, np, D) += Eigen::Map<const RowMatrix>(pos->data(), np, D);
    }
    if (c.pre_norm) {
        kernels::layer_norm(s.x, s.rows, D, norm_pre, c.eps, s.x);
        for (int b = 0; b < s.batch && K; ++b)
            Eigen::Map<RowMatrix>(s.x + (static_cast<std::size_t>(b) * N + P + c.registers) * D, K, D).setZero();
    }
}

// Block `layer`'s attention, added to the stream, with what the Probe records of it.
void Model::Impl::attention_block(const Pass& s, int layer, const std::uint8_t* evicted) const {
    const Config& c = config;
    const Block& blk = blocks[layer];
    const int D = s.D, N = s.N;
    Trace& trace = s.trace;
    const std::size_t per_layer = static_cast<std::size_t>(s.rows);  // one layer's values per head: batch × tokens
    kernels::AttentionRecord rec;
    const int aslot = trace.attention_slot(layer);
    if (aslot >= 0) {
        rec.query_slot = s.query_slot.data();
        rec.slots = static_cast<int>(trace.queries.size());
        rec.rows = trace.attention.data() + aslot * per_layer * c.heads * trace.queries.size();
    }
    if (s.probe.abstention) rec.abstention = trace.abstention.data() + layer * per_layer * c.heads;
    if (s.probe.key_mass) rec.key_mass = trace.key_mass.data() + layer * per_layer * c.heads;
    const bool recording = rec.rows || rec.abstention || rec.key_mass;
    float* mixed = s.normed;
    // A few whole images at a time, q|k|v in the same rows of `qkv` for each chunk (so they stay
    // in L2 for the rotation, the packing and the scores); every record and mask at its images'
    // offset.
    for (int b0 = 0; b0 < s.batch; b0 += s.attention_images) {
        const int images = std::min(s.attention_images, s.batch - b0), n_rows = images * N;
        const std::size_t heads_before = static_cast<std::size_t>(b0) * c.heads;  // (sequence, head) pairs
        float* xc = s.x + static_cast<std::size_t>(b0) * N * D;
        s.layer_norm(xc, n_rows, D, blk.norm1, c.eps, s.normed);
        s.linear(ForwardProfile::Qkv, s.normed, n_rows, blk.qkv, s.qkv, Epilogue::Bias);
        if (s.rope)  // the patches' q and k; the prefix has no position
            s.timed(ForwardProfile::Attention, [&] { apply_rope(s.qkv, images, N, s.P + s.R, c.heads, c.head_dim, *s.rope); });
        const std::size_t chunk_qkv = static_cast<std::size_t>(n_rows) * 3 * D;
        for (std::size_t k = 0; k < trace.qkv_layers.size(); ++k)
            if (trace.qkv_layers[k] == layer)
                std::copy(s.qkv, s.qkv + chunk_qkv,
                          trace.qkv.begin() + static_cast<std::ptrdiff_t>((k * s.rows + static_cast<std::size_t>(b0) * N) * 3 * D));
        kernels::AttentionRecord mine = rec;
        if (mine.rows) mine.rows += heads_before * mine.slots * N;
        if (mine.abstention) mine.abstention += heads_before * N;
        if (mine.key_mass) mine.key_mass += heads_before * N;
        s.timed(ForwardProfile::Attention, [&] {
            kernels::attention(s.qkv, images, N, c.heads, c.head_dim, c.attention, blk.sinks, mixed, s.ws.attention,
                               precision.precision != Precision::Fp32, recording ? &mine : nullptr,
                               evicted ? evicted + (static_cast<std::size_t>(layer) * s.batch * c.heads + heads_before) * N
                                       : nullptr);
        });
        if (c.attn_norm) s.layer_norm(mixed, n_rows, D, blk.attn_norm, c.eps, mixed);
        s.linear(ForwardProfile::Proj, mixed, n_rows, blk.proj, xc, Epilogue::ScaledResidual, &blk.ls1);
    }
}

// Block `layer`'s MLP, added to the stream: a few whole images at a time, its hidden activations
// kept in the same rows of `hidden` / `gated` for every chunk so that they stay in L2 between fc1
// and fc2 (rows are independent: the same bits as one pass). One pass where the Probe records
// each linear's whole input (int8 calibration). The edit's register neurons are shifted here.
void Model::Impl::mlp_block(const Pass& s, int layer, const Intervention& edit) const {
    const Config& c = config;
    const Block& blk = blocks[layer];
    const int D = s.D, N = s.N;
    for (int b0 = 0; b0 < s.batch; b0 += s.mlp_images) {
        const int images = std::min(s.mlp_images, s.batch - b0), n_rows = images * N;
        float* xc = s.x + static_cast<std::size_t>(b0) * N * D;
        s.layer_norm(xc, n_rows, D, blk.norm2, c.eps, s.normed);
        float* activation = c.mlp == MlpKind::SwiGlu ? s.gated : s.hidden;
        if (c.mlp == MlpKind::SwiGlu) {
            s.linear(ForwardProfile::Fc1, s.normed, n_rows, blk.fc1, s.hidden, Epilogue::Bias);
            s.timed(ForwardProfile::MlpActivation, [&] { kernels::swiglu(s.hidden, n_rows, c.mlp_hidden, s.gated); });
        } else {
            s.linear(ForwardProfile::Fc1, s.normed, n_rows, blk.fc1, s.hidden,
                     c.mlp == MlpKind::QuickGelu  ? Epilogue::BiasQuickGelu
                     : c.mlp == MlpKind::GeluTanh ? Epilogue::BiasGeluTanh
                                                  : Epilogue::BiasGelu);
        }
        for (const auto& n : edit.register_neurons)
            if (n.layer == layer) shift_register_neuron(activation, images, N, c.mlp_hidden, n.neuron, s.P + c.registers, s.K);
        record_hidden(layer, activation, static_cast<std::size_t>(b0) * N, n_rows, s.trace);
        // The sub-LayerNorm reads the (edited) activation into the buffer it no longer needs;
        // the Probe records the activation before it.
        float* fc2_input = activation;
        if (c.mlp_norm) {
            fc2_input = activation == s.hidden ? s.gated : s.hidden;
            s.layer_norm(activation, n_rows, c.mlp_hidden, blk.mlp_norm, c.eps, fc2_input);
        }
        s.linear(ForwardProfile::Fc2, fc2_input, n_rows, blk.fc2, xc, Epilogue::ScaledResidual, &blk.ls2);
    }
}

// The features after the last block: the final norm over every token (identity for timm's avg
// pool with fc_norm), each image's CLS, register and patch tokens, the pooled feature, and the
// head's projection.
Features Model::Impl::collect(const Pass& s) const {
    const Config& c = config;
    const int batch = s.batch, D = s.D, P = s.P, R = s.R, N = s.N, np = s.np;
    if (c.final_norm) s.layer_norm(s.x, s.rows, D, norm, c.eps, s.normed);
    else std::copy(s.x, s.x + static_cast<std::size_t>(s.rows) * D, s.normed);
    Trace& trace = s.trace;
    if (s.probe.blocks_normed && !trace.blocks.empty() && c.final_norm)
        kernels::layer_norm(trace.blocks.data(), static_cast<int>(trace.block_layers.size()) * s.rows, D, norm, c.eps,
                            trace.blocks.data());

    Features f;
    f.batch = batch;
    f.dim = D;
    f.registers = R;
    f.test_time_registers = s.K;
    f.grid_h = s.gh;
    f.grid_w = s.gw;
    f.cls.resize(static_cast<std::size_t>(batch) * D);
    f.reg_tokens.resize(static_cast<std::size_t>(batch) * R * D);
    f.patches.resize(static_cast<std::size_t>(batch) * np * D);
    for (int b = 0; b < batch; ++b) {
        const float* seq = s.normed + static_cast<std::size_t>(b) * N * D;
        if (P) std::copy(seq, seq + D, f.cls.begin() + static_cast<std::size_t>(b) * D);
        std::copy(seq + static_cast<std::size_t>(P) * D, seq + static_cast<std::size_t>(P + R) * D,
                  f.reg_tokens.begin() + static_cast<std::size_t>(b) * R * D);
        std::copy(seq + static_cast<std::size_t>(P + R) * D, seq + static_cast<std::size_t>(N) * D,
                  f.patches.begin() + static_cast<std::size_t>(b) * np * D);
    }
    pool_features(s, f);
    if (!P) f.cls = f.pooled;
    if (c.proj_dim > 0) project(f);
    return f;
}

// pooled: the mean of the output patch tokens, then fc_norm where the model has one; or the
// attention pool's output. Without a class token, `cls` is the pooled feature (what the model's
// own head reads).
void Model::Impl::pool_features(const Pass& s, Features& f) const {
    const Config& c = config;
    const int batch = s.batch, D = s.D, N = s.N;
    f.pooled.resize(static_cast<std::size_t>(batch) * D);
    for (int b = 0; b < batch; ++b) {
        const auto mean = f.mean_patch_of(b);
        std::copy(mean.begin(), mean.end(), f.pooled.begin() + static_cast<std::size_t>(b) * D);
    }
    if (c.fc_norm) kernels::layer_norm(f.pooled.data(), batch, D, fc_norm, c.eps, f.pooled.data());
    // An attention-pool head reads every final-normed token (test-time registers included).
    if (c.pool == Pool::Map)
        for (int b = 0; b < batch; ++b)
            attn_pool.pool(s.normed + static_cast<std::size_t>(b) * N * D, N, c.eps, c.mlp,
                           f.pooled.data() + static_cast<std::size_t>(b) * D,
                           s.trace.pool_attention.empty() ? nullptr
                                                          : s.trace.pool_attention.data() + static_cast<std::size_t>(b) * c.heads * N);
}

// What the head projects: the class token when the model pools it (through fc_norm where the norm
// comes after the pool: open_clip's final_ln_after_pool, timm's fc_norm with token pooling), else
// the pooled feature (the patch mean, or the attention pool's output).
void Model::Impl::project(Features& f) const {
    const Config& c = config;
    const int D = c.dim;
    const bool token = c.pool == Pool::Token && c.class_token;
    std::vector<float> head_input = token ? f.cls : f.pooled;
    if (token && c.fc_norm) kernels::layer_norm(head_input.data(), f.batch, D, fc_norm, c.eps, head_input.data());
    f.embedding_dim = c.proj_dim;
    f.embedding.resize(static_cast<std::size_t>(f.batch) * c.proj_dim);
    // Row by row in one fixed order: an image's embedding does not depend on its batch.
    for (int b = 0; b < f.batch; ++b)
        for (int e = 0; e < c.proj_dim; ++e) {
            double acc = 0;
            for (int d = 0; d < D; ++d) acc += static_cast<double>(head_input[static_cast<std::size_t>(b) * D + d]) * proj(d, e);
            f.embedding[static_cast<std::size_t>(b) * c.proj_dim + e] = static_cast<float>(acc);
        }
}

}  // namespace vitreg
