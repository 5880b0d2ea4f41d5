#pragma once
// numpy arrays in and out of the library: outputs take over the library's buffers (no copy),
// inputs are any array-like over shared memory, checked for what the forward needs and refused
// with a message that says why.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "vitreg/error.hpp"

namespace vitreg::python {

namespace py = pybind11;

// An array of `shape` that owns `values`: the vector moves into a capsule the array points into.
template <class T>
py::array_t<T> owning_array(std::vector<T>&& values, const std::vector<py::ssize_t>& shape) {
    py::ssize_t n = 1;
    for (const auto d : shape) n *= d;
    if (static_cast<std::size_t>(n) != values.size())
        throw Error("internal: " + std::to_string(values.size()) + " values do not fill the array's shape");
    auto* owned = new std::vector<T>(std::move(values));
    py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>(shape, owned->data(), free_when_done);
}

// An array-like as a numpy array over the same memory, never a converted copy: numpy arrays as they
// are, DLPack producers (a torch tensor) through np.from_dlpack, the rest (the buffer protocol:
// memoryview, bytes; __array_interface__; __array__) through np.asarray. A float64 or strided
// input stays what it is, for checked_dims to refuse.
inline py::array shared_array(const py::object& x) {
    if (py::isinstance<py::array>(x)) return py::reinterpret_borrow<py::array>(x);
    const py::module_ np = py::module_::import("numpy");
    if (py::hasattr(x, "__dlpack__") && py::hasattr(np, "from_dlpack")) return np.attr("from_dlpack")(x);
    return np.attr("asarray")(x);
}

// The dims of a C-contiguous array of dtype T with one of `ranks`; throws UsageError naming
// `what`, the expected form and what came instead.
template <class T>
std::vector<py::ssize_t> checked_dims(const py::array& a, std::initializer_list<int> ranks, const std::string& what,
                                      const std::string& expected) {
    if (!py::isinstance<py::array_t<T>>(a))
        throw UsageError(what + ": expected " + expected + " of " + std::string(py::str(py::dtype::of<T>())) +
                         ", got " + std::string(py::str(a.dtype())) + " (convert with .astype(np." +
                         std::string(py::str(py::dtype::of<T>())) + "))");
    bool rank_ok = false;
    for (const int r : ranks) rank_ok |= a.ndim() == r;
    if (!rank_ok) {
        std::string shape;
        for (py::ssize_t i = 0; i < a.ndim(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape(i));
        throw UsageError(what + ": expected " + expected + ", got shape [" + shape + "]");
    }
    if (!(a.flags() & py::array::c_style))
        throw UsageError(what + ": the array is not C-contiguous (pass np.ascontiguousarray(x))");
    return {a.shape(), a.shape() + a.ndim()};
}

// The batch a forward takes: [B, 3, H, W] (or one image [3, H, W]) float32, C-contiguous, from
// any array-like (shared_array: a torch tensor's own memory). Batch and size against the patch are
// the forward's own checks. Holds the array, so that `data` outlives the caller's temporaries.
struct Batch {
    py::array array;
    const float* data;
    int batch, height, width;
};

inline Batch checked_batch(const py::object& pixels) {
    py::array x = shared_array(pixels);
    const auto dims = checked_dims<float>(x, {3, 4}, "input", "[batch, 3, height, width] or [3, height, width]");
    const bool one = dims.size() == 3;
    const py::ssize_t b = one ? 1 : dims[0], ch = dims[one ? 0 : 1], h = dims[one ? 1 : 2], w = dims[one ? 2 : 3];
    if (ch != 3) throw UsageError("input: expected 3 channels, got " + std::to_string(ch));
    if (b > (1 << 20) || h > (1 << 20) || w > (1 << 20)) throw UsageError("input: too large");
    const auto* data = static_cast<const float*>(x.data());
    return {std::move(x), data, static_cast<int>(b), static_cast<int>(h), static_cast<int>(w)};
}

}  // namespace vitreg::python
