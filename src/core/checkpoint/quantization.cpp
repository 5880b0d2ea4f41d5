// A quantized checkpoint's metadata and weights (vitreg convert --dtype int8|int4): what the file
// says it holds, checked once when it is opened, and each weight's scales (int8: and row sums),
// checked as the model packs it (docs/design.md, "Reduced precision").
#include <cctype>
#include <cmath>
#include <cstring>

#include "core/checkpoint/shape.hpp"
#include "core/gemm_lowp.hpp"
#include "core/parallel_each.hpp"
#include "core/quantize.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// file_digest's form, "fnv1a64:" and 16 hex digits: a quantized file names what it came from.
bool is_digest(const std::string& s) {
    const std::string prefix = "fnv1a64:";
    if (s.size() != prefix.size() + 16 || s.compare(0, prefix.size(), prefix) != 0) return false;
    for (std::size_t i = prefix.size(); i < s.size(); ++i)
        if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    return true;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    TensorView v;
    v.shape = shape;
    return v.shape_string();
}

[[noreturn]] void refuse(const std::string& file, const std::string& tensor, const std::string& what) {
    throw CheckpointError(file + ": tensor '" + tensor + "' " + what);
}

// A quantized file's weight `canonical`: one tensor of `dtype`, in a file quantized to `precision`.
const TensorView& stored_weight(const Checkpoint& ck, const std::string& canonical, Precision precision, DType dtype,
                                const std::string& what) {
    if (ck.quantization().precision != precision)
        throw CheckpointError(ck.path() + ": not an " + to_string(precision) + "-quantized file (no " + to_string(precision) +
                              " '" + canonical + "')");
    const auto views = ck.parts(canonical);
    const TensorView& w = *views.front();
    if (views.size() != 1 || w.dtype != dtype)
        refuse(ck.path(), w.name, "is " + to_string(w.dtype) + ", expected " + to_string(dtype) + " (" + what + ")");
    return w;
}

// An int8 weight's stored row sums: I32 [rows], each within ±bound (what a row of the file's
// integers can sum to).
std::vector<std::int32_t> stored_sums(const std::string& file, const TensorView& s, std::size_t rows, std::int64_t bound) {
    const auto fail = [&](const std::string& what) { refuse(file, s.name, what); };
    if (s.dtype != DType::I32 || s.shape != std::vector<std::int64_t>{static_cast<std::int64_t>(rows)})
        fail("is " + to_string(s.dtype) + " " + s.shape_string() + ", expected I32 [" + std::to_string(rows) + "]");
    if (!s.data && s.nbytes) fail("lies past the end of its file (truncated)");
    std::vector<std::int32_t> sums(rows);
    if (rows) std::memcpy(sums.data(), s.data, rows * sizeof(std::int32_t));
    for (std::size_t r = 0; r < rows; ++r)
        if (sums[r] > bound || sums[r] < -bound)
            fail("holds " + std::to_string(sums[r]) + " at " + std::to_string(r) + ", beyond the ±" + std::to_string(bound) +
                 " its row's weights can sum to");
    return sums;
}

}  // namespace

WeightQuantization Checkpoint::read_quantization() const {
    const auto& meta = file_->metadata();
    const auto stated = meta.find("quantization");
    WeightQuantization q;
    if (stated == meta.end()) {
        // I8 and U8 tensors mean nothing without the metadata that says how they were quantized.
        for (const auto& name : file_->names()) {
            const DType d = file_->get(name).dtype;
            if (is_integer(d))
                throw CheckpointError(path() + ": tensor '" + name + "' is " + to_string(d) +
                                      " but the metadata states no quantization (a quantized file says quantization=int8 "
                                      "or int4)");
        }
        return q;
    }
    const auto fail = [&](const std::string& what) { throw CheckpointError(path() + ": metadata " + what); };
    const auto value = [&](const char* key) {
        const auto it = meta.find(key);
        return it == meta.end() ? std::string() : it->second;
    };
    const bool int4 = stated->second == "int4";
    if (stated->second != "int8" && !int4) fail("quantization='" + stated->second + "' (vitreg reads int8- and int4-quantized files)");
    const std::string bits = value("weight_bits");
    if (int4 ? bits != "4" : bits != "8" && bits != "7")
        fail("weight_bits='" + bits + "' (an " + stated->second + " file's weights are " + (int4 ? "4 bits" : "8 or 7 bits") + ")");
    if (int4 && value("group_size") != std::to_string(quant::kInt4Group))
        fail("group_size='" + value("group_size") + "' (an int4 file's weights are quantized per group of " +
             std::to_string(quant::kInt4Group) + " inputs, as @int4 runs them)");
    if (!is_digest(value("source_digest")))
        fail("source_digest='" + value("source_digest") +
             "' (a quantized file names the checkpoint it was quantized from: fnv1a64:<16 hex digits>)");
    q.precision = int4 ? Precision::Int4 : Precision::Int8;
    q.bits = std::stoi(bits);
    return q;
}

Int8Tensor Checkpoint::load_int8(const std::string& canonical, const std::vector<std::int64_t>& shape) const {
    const TensorView& w = stored_weight(*this, canonical, Precision::Int8, DType::I8, "an int8-quantized file's linear weight");
    const auto fail = [&](const std::string& name, const std::string& what) { refuse(path(), name, what); };
    if (w.shape != shape && source::squeezed(w.shape) != source::squeezed(shape))
        fail(w.name, "has shape " + w.shape_string() + ", expected " + shape_text(shape));
    if (!w.data && w.nbytes) fail(w.name, "lies past the end of its file (truncated)");
    const std::string scale_name = w.name + ".scale";
    if (!file_->has(scale_name)) fail(scale_name, "is missing (the per-output-channel scales of '" + w.name + "')");
    const TensorView& s = file_->get(scale_name);
    if (s.dtype != DType::F32 || s.shape != std::vector<std::int64_t>{shape.front()})
        fail(scale_name, "is " + to_string(s.dtype) + " " + s.shape_string() + ", expected F32 [" + std::to_string(shape.front()) + "]");
    Int8Tensor t;
    t.view = &w;
    t.q = reinterpret_cast<const std::int8_t*>(w.data);
    t.scale.resize(static_cast<std::size_t>(shape.front()));
    if (!t.scale.empty()) std::memcpy(t.scale.data(), s.data, t.scale.size() * sizeof(float));
    for (std::size_t i = 0; i < t.scale.size(); ++i)
        if (!(t.scale[i] > 0.0f) || !std::isfinite(t.scale[i]))
            fail(scale_name, "holds " + std::to_string(t.scale[i]) + " at " + std::to_string(i) + " (a scale is finite and positive)");
    const std::size_t row = t.scale.empty() ? 0 : w.nbytes / t.scale.size();
    const int qmax = (1 << (quantization_.bits - 1)) - 1;
    const std::string sums_name = w.name + ".sums";
    const bool stored = file_->has(sums_name);  // (files converted before the sums were stored have none)
    if (stored)  // (bytes of −128 count: the 8-bit kernels take them)
        t.sums = stored_sums(path(), file_->get(sums_name), t.scale.size(), static_cast<std::int64_t>(qmax + 1) * row);
    // 8-bit weights with their sums are not read here: the 8-bit kernels are exact for every byte,
    // and a model of 7 GB loads in the time its scales take. 7-bit weights are checked, since
    // vpmaddubsw, which they select without VNNI, saturates past ±63.
    if (stored && quantization_.bits == 8) return t;
    std::vector<std::int32_t> sums(t.scale.size());
    std::vector<char> in_range(t.scale.size());
    parallel_each(static_cast<int>(t.scale.size()), [&](int r) {
        bool ok;
        sums[r] = gemm::sum_s8(t.q + r * row, row, qmax, &ok);
        in_range[r] = ok;
    });
    for (std::size_t r = 0; r < in_range.size(); ++r)  // a row out of range: where
        for (std::size_t i = r * row; !in_range[r] && i < (r + 1) * row; ++i)
            if (t.q[i] > qmax || t.q[i] < -qmax)
                fail(w.name, "holds " + std::to_string(t.q[i]) + " at " + std::to_string(i) + ", outside the " +
                                 std::to_string(quantization_.bits) + "-bit weights' ±" + std::to_string(qmax));
    for (std::size_t r = 0; stored && r < sums.size(); ++r)
        if (sums[r] != t.sums[r])
            fail(sums_name, "holds " + std::to_string(t.sums[r]) + " at " + std::to_string(r) + ", but row " +
                                std::to_string(r) + " of '" + w.name + "' sums to " + std::to_string(sums[r]));
    t.sums = std::move(sums);
    return t;
}

namespace {
std::vector<std::uint16_t> bf16_copy(const unsigned char* bytes, std::size_t n) {
    std::vector<std::uint16_t> v(n);
    if (n) std::memcpy(v.data(), bytes, n * 2);
    return v;
}

// 1 where bf16 value i of `bytes` (2 bytes each, any alignment) is not finite or, for scales, not
// positive; from its bits, without a branch.
unsigned bf16_param_bad(const unsigned char* bytes, std::size_t i, bool scales) {
    std::uint16_t v;
    std::memcpy(&v, bytes + 2 * i, 2);
    const unsigned not_finite = (v & 0x7f80u) == 0x7f80u;
    const unsigned not_positive = (v >> 15) | ((v & 0x7fffu) == 0);
    return not_finite | (scales ? not_positive : 0u);
}

// Whether all n are good: one pass that vectorizes (a 7B's 100 million took a scalar loop a
// quarter of its load).
bool bf16_params_valid(const unsigned char* bytes, std::size_t n, bool scales) {
    unsigned bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad |= bf16_param_bad(bytes, i, scales);
    return bad == 0;
}
}  // namespace

std::vector<std::uint16_t> Int4Tensor::scales() const { return bf16_copy(scale, params); }
std::vector<std::uint16_t> Int4Tensor::zeros() const { return bf16_copy(zero, params); }

Int4Tensor Checkpoint::load_int4(const std::string& canonical, const std::vector<std::int64_t>& shape) const {
    const TensorView& w =
        stored_weight(*this, canonical, Precision::Int4, DType::U8, "an int4-quantized file's linear weight, two codes a byte");
    const auto fail = [&](const std::string& name, const std::string& what) { refuse(path(), name, what); };
    const int out = static_cast<int>(shape.front());
    int in = 1;
    for (std::size_t i = 1; i < shape.size(); ++i) in *= static_cast<int>(shape[i]);
    const int row_bytes = quant::int4_row_bytes(in), groups = quant::int4_groups(in);
    std::vector<std::int64_t> codes_shape = shape, params_shape{out, groups};
    codes_shape.back() = (codes_shape.back() + 1) / 2;
    if (w.shape != codes_shape || (shape.size() > 2 && shape.back() % 2))  // (an odd last dim packs along the flattened row only in 2-D)
        fail(w.name, "has shape " + w.shape_string() + ", expected " + shape_text(codes_shape) + " (the weight's " +
                         shape_text(shape) + ", two 4-bit codes a byte along its last dim, an even one where it has more than 2)");
    if (!w.data && w.nbytes) fail(w.name, "lies past the end of its file (truncated)");
    Int4Tensor t;
    t.view = &w;
    t.codes = w.data;
    // A row's padding nibble (in odd) is 0: one file for one set of weights.
    if (in % 2)
        for (int r = 0; r < out; ++r)
            if (t.codes[static_cast<std::size_t>(r) * row_bytes + row_bytes - 1] >> 4)
                fail(w.name, "has a nonzero padding nibble in row " + std::to_string(r) + " (its rows hold " + std::to_string(in) +
                                 " codes)");
    for (const char* part : {"scale", "zero"}) {
        const std::string name = w.name + "." + part;
        if (!file_->has(name)) fail(name, std::string("is missing (the per-group ") + part + "s of '" + w.name + "')");
        const TensorView& s = file_->get(name);
        if (s.dtype != DType::BF16 || s.shape != params_shape)
            fail(name, "is " + to_string(s.dtype) + " " + s.shape_string() + ", expected BF16 " + shape_text(params_shape));
        if (!s.data && s.nbytes) fail(name, "lies past the end of its file (truncated)");
        const std::size_t n = static_cast<std::size_t>(out) * groups;
        const bool scales = part[0] == 's';
        (scales ? t.scale : t.zero) = s.data;
        t.params = n;
        if (!bf16_params_valid(s.data, n, scales))
            for (std::size_t i = 0; i < n; ++i)  // the first bad value, for the message
                if (bf16_param_bad(s.data, i, scales)) {
                    std::uint16_t v;
                    std::memcpy(&v, s.data + 2 * i, 2);
                    fail(name, "holds " + std::to_string(quant::from_bf16(v)) + " at " + std::to_string(i) + " (a " + part +
                                   " is finite" + (scales ? " and positive)" : ")"));
                }
    }
    return t;
}

void refuse_other_precision(const Checkpoint& ck, const PrecisionOptions& precision) {
    const WeightQuantization& q = ck.quantization();
    if (!q.quantized()) return;
    const std::string file = ck.path();
    if (precision.precision != q.precision)
        throw UsageError(file + ": its weights are " + to_string(q.precision) + "-quantized (vitreg convert --dtype " +
                         to_string(q.precision) + "), so it runs only at " + to_string(q.precision) + " (MODEL@" +
                         to_string(q.precision) + " or --precision " + to_string(q.precision) + "), not " +
                         to_string(precision.precision) + "; for " + to_string(precision.precision) +
                         " load the checkpoint it was converted from");
    if (q.precision == Precision::Int8 && precision.int8_weight_bits != q.bits)
        throw UsageError(file + ": its int8 weights are " + std::to_string(q.bits) + "-bit, but " +
                         std::to_string(precision.int8_weight_bits) + "-bit weights were asked for: give --int8-weights " +
                         std::to_string(q.bits) + " (int8_weights=" + std::to_string(q.bits) + " in Python)");
}

}  // namespace vitreg
