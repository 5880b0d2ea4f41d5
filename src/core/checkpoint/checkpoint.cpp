#include "vitreg/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/checkpoint/name_table.hpp"
#include "core/checkpoint/shape.hpp"
#include "core/file_kind.hpp"
#include "core/safetensors.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

std::string parent_dir(const std::string& p) {
    const auto slash = p.find_last_of('/');
    return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    TensorView v;
    v.shape = shape;
    return v.shape_string();
}

}  // namespace

Checkpoint::Checkpoint(const std::string& path, const ConfigOverrides& overrides, CheckpointRead read) {
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
    file_ = read == CheckpointRead::HeaderOnly ? open_tensor_file_header(file, overrides) : open_tensor_file(file, overrides);
    quantization_ = read_quantization();
    config_ = resolve(parent_dir(file), overrides);
}

std::vector<std::string> Checkpoint::source_names(const std::string& canonical) const {
    auto names = source::stored_names(canonical, *names_);
    for (auto& n : names) n = prefix_ + n;
    return names;
}

// Stored [E, D] where the canonical `proj` is [D, E]: HF's visual_projection.weight, timm's head.
bool Checkpoint::proj_transposed() const { return names_->proj_transposed; }

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
void Checkpoint::apply_bias_mask(const TensorView& bias, float* values, std::size_t n) const {
    const std::string mask_name = bias.name + "_mask";
    if (bias.name.size() < 5 || bias.name.compare(bias.name.size() - 5, 5, ".bias") != 0 || !file_->has(mask_name)) return;
    const auto& m = file_->get(mask_name);
    if (m.numel() != static_cast<std::int64_t>(n))
        throw CheckpointError(path() + ": tensor '" + mask_name + "' has shape " + m.shape_string() + ", expected that of '" +
                              bias.name + "' " + bias.shape_string());
    const auto mask = m.to_float();
    file_->release(m);
    for (std::size_t i = 0; i < n; ++i) {
        if (mask[i] == 1.0f) continue;
        if (mask[i] != 0.0f && !std::isnan(mask[i]))
            throw CheckpointError(path() + ": tensor '" + mask_name + "' holds " + std::to_string(mask[i]) +
                                  " at " + std::to_string(i) + " (a bias mask holds 0 or 1)");
        values[i] = 0.0f;
    }
}

std::vector<float> Checkpoint::load(const std::string& canonical, const std::vector<std::int64_t>& shape) const {
    std::vector<float> out;
    load_into(canonical, shape, out);
    return out;
}

void Checkpoint::load_into(const std::string& canonical, const std::vector<std::int64_t>& shape,
                           std::vector<float>& out) const {
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
    // Every part checked before anything is allocated; then each widened in place into `out`,
    // whose pages a caller loading tensor after tensor has already touched.
    std::size_t total = 0;
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < views.size(); ++i) {
        part_shape[0] = rows[i];
        sizes.push_back(views[i] ? checked_part(*views[i], part_shape) : static_cast<std::size_t>(std::max<std::int64_t>(rows[i], 0)));
        total += sizes.back();
    }
    out.resize(total);
    std::size_t at = 0;
    for (std::size_t i = 0; i < views.size(); ++i) {
        const TensorView* v = views[i];
        if (!v) {  // a bias part the checkpoint leaves out
            std::fill(out.begin() + at, out.begin() + at + sizes[i], 0.0f);
        } else {
            v->to_float(out.data() + at);
            file_->release(*v);
            apply_bias_mask(*v, out.data() + at, sizes[i]);
        }
        at += sizes[i];
    }
    if (transpose) {
        const std::size_t rows = static_cast<std::size_t>(shape[0]), cols = static_cast<std::size_t>(shape[1]);
        std::vector<float> t(out.size());
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j) t[i * cols + j] = out[j * rows + i];
        out.swap(t);
    }
}

std::vector<Bf16Rows> Checkpoint::mapped_bf16(const std::string& canonical, const std::vector<std::int64_t>& shape) const {
    const auto views = parts(canonical);
    if (shape.empty() || (canonical == "proj" && proj_transposed())) return {};
    std::int64_t in = 1;
    for (std::size_t i = 1; i < shape.size(); ++i) in *= shape[i];
    std::vector<Bf16Rows> rows;
    std::int64_t total = 0;
    for (const TensorView* v : views) {
        if (!v || v->dtype != DType::BF16 || !v->data || v->shape.empty() || in % 2 ||
            reinterpret_cast<std::uintptr_t>(v->data) % alignof(std::uint32_t) != 0)
            return {};
        // One part: the weight's shape (leading 1s may be missing); several: whole rows each.
        const bool fits = views.size() == 1 ? v->shape == shape || source::squeezed(v->shape) == source::squeezed(shape)
                                            : v->numel() == v->shape[0] * in;
        if (!fits) return {};
        rows.push_back({reinterpret_cast<const std::uint32_t*>(v->data), views.size() == 1 ? shape[0] : v->shape[0]});
        total += rows.back().rows;
    }
    return total == shape[0] ? rows : std::vector<Bf16Rows>{};
}

// A stored part's element count, after refusing a quantized dtype or a shape other than `want`.
std::size_t Checkpoint::checked_part(const TensorView& v, const std::vector<std::int64_t>& want) const {
    if (!v.data && v.nbytes) v.check_floats();  // past the end of a header-only read
    if (is_integer(v.dtype)) {
        const std::string q = v.dtype == DType::U8 ? "int4" : "int8";
        throw CheckpointError(path() + ": tensor '" + v.name + "' is " + to_string(v.dtype) + " (" + q +
                              "-quantized), where floats are read: only the " + q + " forward reads a quantized " +
                              "file's linear weights, nothing else is " + to_string(v.dtype));
    }
    if (v.shape != want && source::squeezed(v.shape) != source::squeezed(want))
        throw CheckpointError(path() + ": tensor '" + v.name + "' has shape " + v.shape_string() + ", expected " +
                              shape_text(want));
    return static_cast<std::size_t>(v.numel());
}

}  // namespace vitreg
