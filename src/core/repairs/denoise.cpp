// @denoise=shift:K[:median]: K forwards of the image shifted by whole patches, split into content
// and grid-locked noise, the content kept (vitreg/repair.hpp).
#include <tbb/parallel_for.h>

#include <algorithm>

#include "core/parse_number.hpp"
#include "core/repairs/repair_type.hpp"
#include "core/shift_decomposition.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

void parse(Repair& r, const std::string& value, const std::string& word) {
    const auto parts = split(value, ':');
    const auto k = parts.size() >= 2 ? parse_integer(parts[1], 2, kMaxDenoiseShifts) : std::nullopt;
    if (parts[0] != "shift" || !k || parts.size() > 3 || (parts.size() == 3 && parts[2] != "median"))
        throw UsageError("@" + word + ": expected @denoise=shift:K or shift:K:median (K in 2.." +
                         std::to_string(kMaxDenoiseShifts) + ")");
    r.shifts = static_cast<int>(*k);
    r.median = parts.size() == 3;
}

std::string value_text(const Repair& r) { return "shift:" + std::to_string(r.shifts) + (r.median ? ":median" : ""); }

std::vector<int> layers_of(const Repair&, int depth) { return {depth - 1}; }

// Each image's content part of its K shifted forwards (docs/design.md, "Repairs and dense
// evaluation"); x holds the unshifted forward, `shifted` the others.
void edit(const Repair& r, int, float* x, const StreamShape& s, const Config&, const ShiftedStreams* shifted) {
    if (!shifted) throw Error("denoise: the forward was not given its shifted forwards");
    const std::size_t copy_size = static_cast<std::size_t>(s.batch) * s.tokens * s.dim;
    if (shifted->shifts.size() != static_cast<std::size_t>(r.shifts) ||
        shifted->rows.size() != (shifted->shifts.size() - 1) * copy_size)
        throw Error("denoise: the shifted forwards do not match the repair");
    tbb::parallel_for(0, s.batch, [&](int b) {
        float* own = patch_rows(x, s, b);
        std::vector<const float*> views{own};
        for (std::size_t k = 1; k < shifted->shifts.size(); ++k)
            views.push_back(shifted->rows.data() + (k - 1) * copy_size + (static_cast<std::size_t>(b) * s.tokens + s.first_patch) * s.dim);
        const ShiftDecomposition split = decompose_shifted(views, shifted->shifts, s.grid_h, s.grid_w, s.dim, r.median);
        std::copy(split.content.begin(), split.content.end(), own);
    });
}

}  // namespace

const RepairType& denoise_repair() {
    static const RepairType type{
        "denoise", "denoise=shift:K",
        "@denoise=shift:K[:median] (K forwards of the image shifted by whole patches, split into content and "
        "grid-locked noise by reweighted least squares or medians, the content kept; shifts (0,0), (0,1), (1,0), "
        "(-1,-1), (0,-1), (-1,0), (1,1), (1,-1), (-1,1), then radius 2 and 3; K forwards)",
        parse, value_text, layers_of, edit, nullptr};
    return type;
}

}  // namespace vitreg
