#pragma once
// Dense features at a resolution one forward of the model's own grid does not give: a sliding
// window over the image, several scales and a horizontal flip, averaged on one common grid
// (docs/design.md, "Dense features at resolution").
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/probe.hpp"

namespace vitreg {

struct DenseView {
    int window = 0;                  // crop side in pixels; 0 = the whole image in one forward
    int stride = 0;                  // pixels between crops; 0 = the window (crops side by side)
    std::vector<double> scales{1.0};  // the image resized by each
    bool flip = false;               // also each scale mirrored left-right, its grid mirrored back
    int grid_h = 0, grid_w = 0;      // the common grid; 0 = the unscaled image's patch grid

    // One forward of the whole image at its own grid: what dense wrote before views existed.
    bool plain() const;
    // Throws UsageError naming the option and the fault: a window or stride that is not a multiple
    // of `patch` (with the nearest valid values), a stride larger than the window, a scale <= 0.
    void check(int patch) const;
    // "--image-scales 0.5,1,1.5" and "--grid HxW" texts; throw UsageError naming the option.
    void parse_scales(const std::string& text);
    void parse_grid(const std::string& text);
    // Every field, for the run's identity and the manifest.
    nlohmann::ordered_json to_json() const;
};

// Where the crops of one axis start: crops of `crop` pixels (or the whole extent when it is
// smaller) every `stride` pixels, the last one flush with the far edge (mmseg's slide
// inference, DINOv3's segmentation evaluation).
std::vector<int> window_starts(int extent, int crop, int stride);

// The input size of one scale: each side times `scale`, rounded to the nearest multiple of the
// patch (at least one patch).
std::pair<int, int> scaled_size(int height, int width, double scale, int patch);

// Patch features of the chosen layers on one grid: [layers, height, width, dim].
struct DenseGrid {
    int layers = 0, height = 0, width = 0, dim = 0;
    std::vector<float> data;
};

// The patch tokens `probe.block_layers` records (normed if it says so), for one preprocessed
// image seen through `view`: per scale (and flip) the image resized bilinearly, its crops run as
// one batch, each crop's patch grid added into the scale's grid and divided by how many crops
// covered each cell; each scale's grid resized bilinearly to the common grid; all averaged. The
// model's intervention and precision apply to every crop as in a plain forward. Throws
// UsageError when a crop is over `options.max_tokens`.
DenseGrid dense_grid(const Model& model, const Pixels& pixels, const Probe& probe, const DenseView& view,
                     const ForwardOptions& options = {});

// Throws UsageError naming `name` when a forward `view` runs on an image of this size exceeds
// `max_tokens` (the crops are checked, not the whole image, when there is a window).
void check_view_tokens(const Model& model, int height, int width, const DenseView& view, std::int64_t max_tokens,
                       const std::string& name);

}  // namespace vitreg
