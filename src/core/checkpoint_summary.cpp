#include "vitreg/checkpoint_summary.hpp"

#include "affix.hpp"
#include "gemm_lowp.hpp"
#include "vitreg/checkpoint.hpp"

namespace vitreg {

namespace {

bool is_matrix(const std::string& name, const std::vector<std::int64_t>& shape) {
    // HF CLIP's position_embedding.weight is an nn.Embedding: a table added, never multiplied.
    return shape.size() >= 2 && ends_with(name, "weight") && name.find("position") == std::string::npos;
}

// Bytes of one matrix [n, k...] (n output columns) stored with `bits` per weight and, per output
// column, `column_bytes` beside it.
std::int64_t matrix_bytes(const TensorShape& t, double bits, std::int64_t column_bytes) {
    const std::int64_t n = t.shape.front();
    return static_cast<std::int64_t>(static_cast<double>(t.numel) * bits / 8) + n * column_bytes;
}

}  // namespace

std::int64_t CheckpointSummary::parameters() const {
    std::int64_t n = 0;
    for (const auto& t : tensors) n += t.numel;
    return n;
}

CheckpointSummary summarize_checkpoint(const std::string& path, const ConfigOverrides& overrides) {
    const Checkpoint ck(path, overrides, CheckpointRead::HeaderOnly);
    CheckpointSummary s;
    s.path = ck.path();
    s.config = ck.config();
    s.metadata = ck.file().metadata();
    s.quantization = ck.quantization();
    for (const auto& name : ck.model_tensors()) {
        const TensorView& v = ck.file().get(name);
        std::vector<std::int64_t> shape = v.shape;  // an int4 file's codes: the weights they stand for
        if (v.dtype == DType::U8 && !shape.empty()) shape.back() *= 2;
        s.tensors.push_back({name, v.dtype, shape, v.weights(), is_matrix(name, shape)});
        if (!v.data) s.missing_bytes += static_cast<std::int64_t>(v.nbytes);
    }
    return s;
}

std::vector<WeightMemory> weight_memory(const std::vector<TensorShape>& tensors) {
    struct Format {
        const char* name;
        double bits;
        std::int64_t column_bytes;  // per output column
        std::int64_t group_bytes;   // per 128 inputs of an output column
        const char* how;
        bool estimate;
    };
    const bool native_bf16 = gemm::native_bf16();
    const Format formats[] = {
        {"f32", 32, 0, 0, "every tensor in fp32", false},
        {"bf16", 16, 0, 0,
         native_bf16 ? "matrices bf16, the rest fp32" : "matrices bf16, the rest fp32 (this CPU lacks vdpbf16ps: @bf16 holds them as rounded fp32, f32's size)",
         false},
        {"f16", 16, 0, 0, "matrices f16, the rest fp32 (a file's dtype, vitreg convert --dtype f16; it runs in fp32)", false},
        {"int8", 8, 8, 0, "matrices int8 + an fp32 scale and an int32 sum per output column, the rest fp32", false},
        {"int4-g128", 4, 0, 6, "matrices 4-bit + a bf16 scale and zero point and a 16-bit sum per 128 inputs, the rest fp32", false},
    };
    std::vector<WeightMemory> out;
    for (const Format& f : formats) {
        WeightMemory m{f.name, 0, f.how, f.estimate};
        for (const auto& t : tensors) {
            if (!t.matrix) {
                m.bytes += 4 * t.numel;
                continue;
            }
            const std::int64_t n = t.shape.front(), k = n > 0 ? t.numel / n : 0;
            m.bytes += matrix_bytes(t, f.bits, f.column_bytes + f.group_bytes * ((k + 127) / 128));
        }
        out.push_back(m);
    }
    return out;
}

}  // namespace vitreg
