#pragma once
// The DINOv2 PCA view of patch features: the first principal component separates foreground
// from background; three components fitted on the foreground become RGB.
#include <cstdint>
#include <vector>

namespace vitreg {

// One image's patch features: [grid_h * grid_w, dim] row-major.
struct PatchFeatures {
    const float* data = nullptr;
    int grid_h = 0, grid_w = 0;
};

struct PcaPreview {
    std::vector<float> rgb;              // [patches, 3] in [0, 1]; background black
    std::vector<std::uint8_t> foreground;  // [patches] 1 = foreground
};

// Fits on all the given images together (one image: per-image PCA). The first component's
// sign is chosen so that patches on the image border lean negative (backgrounds touch the
// border), and foreground = first component > 0. Each component's sign is fixed by its
// largest loading being positive, so results do not flip between runs.
std::vector<PcaPreview> pca_preview(const std::vector<PatchFeatures>& images, int dim);

}  // namespace vitreg
