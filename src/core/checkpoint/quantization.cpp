// A quantized checkpoint's metadata and weights (vitreg convert --dtype int8): what the file says
// it holds, checked once when it is opened, and each int8 weight with its scales, checked as the
// model packs it (docs/design.md, "Reduced precision").
#include <cctype>
#include <cmath>
#include <cstring>

#include "core/checkpoint/shape.hpp"
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

}  // namespace

WeightQuantization Checkpoint::read_quantization() const {
    const auto& meta = file_->metadata();
    const auto stated = meta.find("quantization");
    WeightQuantization q;
    if (stated == meta.end()) {
        // I8 tensors mean nothing without the metadata that says how they were quantized.
        for (const auto& name : file_->names())
            if (file_->get(name).dtype == DType::I8)
                throw CheckpointError(path() + ": tensor '" + name + "' is I8 but the metadata states no quantization "
                                      "(a quantized file says quantization=int8)");
        return q;
    }
    const auto fail = [&](const std::string& what) { throw CheckpointError(path() + ": metadata " + what); };
    if (stated->second != "int8") fail("quantization='" + stated->second + "' (vitreg reads int8-quantized files)");
    const auto bits = meta.find("weight_bits");
    if (bits == meta.end() || (bits->second != "8" && bits->second != "7"))
        fail("weight_bits='" + (bits == meta.end() ? std::string() : bits->second) + "' (an int8 file's weights are 8 or 7 bits)");
    const auto digest = meta.find("source_digest");
    if (digest == meta.end() || !is_digest(digest->second))
        fail("source_digest='" + (digest == meta.end() ? std::string() : digest->second) +
             "' (a quantized file names the checkpoint it was quantized from: fnv1a64:<16 hex digits>)");
    q.precision = Precision::Int8;
    q.bits = bits->second == "8" ? 8 : 7;
    return q;
}

Int8Tensor Checkpoint::load_int8(const std::string& canonical, const std::vector<std::int64_t>& shape) const {
    if (!quantization_.quantized()) throw CheckpointError(path() + ": not a quantized file (no int8 '" + canonical + "')");
    const auto views = parts(canonical);
    const TensorView& w = *views.front();
    const auto fail = [&](const std::string& name, const std::string& what) {
        throw CheckpointError(path() + ": tensor '" + name + "' " + what);
    };
    if (views.size() != 1 || w.dtype != DType::I8)
        fail(w.name, "is " + to_string(w.dtype) + ", expected I8 (an int8-quantized file's linear weight)");
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
    // Wider integers than the file's bits would overflow the kernels that 7-bit weights select.
    const int qmax = (1 << (quantization_.bits - 1)) - 1;
    for (std::size_t i = 0; i < w.nbytes; ++i)
        if (t.q[i] > qmax || t.q[i] < -qmax)
            fail(w.name, "holds " + std::to_string(t.q[i]) + " at " + std::to_string(i) + ", outside the " +
                             std::to_string(quantization_.bits) + "-bit weights' ±" + std::to_string(qmax));
    return t;
}

}  // namespace vitreg
