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

// DINOv3's PCA picture (its notebooks): three components fitted on the foreground patches only,
// every patch projected on them (centred on the foreground's mean) and whitened (divided by each
// component's standard deviation over the foreground, n - 1 as sklearn's PCA(whiten=True)).
struct PcaProjection {
    std::vector<float> whitened;           // [patches, 3]
    std::vector<std::uint8_t> foreground;  // [patches] 1 = foreground
};
// Foreground: `mask` when given ([patches], nonzero = foreground), else pca_preview's rule (the
// first component's positive side, oriented by the border). Throws UsageError for a mask of the
// wrong size or with fewer than 3 foreground patches.
PcaProjection pca_foreground(const PatchFeatures& image, int dim, const std::vector<std::uint8_t>& mask = {});
// A K-component PCA of patch features (dense --pca-dims; docs/design.md, "Dense features at
// resolution"): every patch of the given images centred on their mean, the K eigenvectors of the
// covariance with the largest eigenvalues (variance over n - 1 patches, as sklearn's PCA), each
// signed so that its largest-magnitude loading (the first on ties) is positive. Components past
// the patches' rank carry no variance (any orthonormal completion).
struct PcaBasis {
    int dim = 0, k = 0;
    long long patches = 0;                    // fitted on
    std::vector<double> mean;                 // [dim]
    std::vector<double> components;           // [k, dim], orthonormal rows
    std::vector<double> explained_variance;   // [k], descending
    double total_variance = 0;                // over all dim directions
};
// Throws UsageError for k outside 1..dim or fewer than 2 patches.
PcaBasis fit_pca_basis(const std::vector<PatchFeatures>& images, int dim, int k);
// `count` rows [count, dim] → [count, k]: (x − mean) · componentsᵀ.
std::vector<float> project_on(const PcaBasis& basis, const float* rows, std::size_t count);

// The picture's colour of one pixel: sigmoid(2·x) per component, times 1 on the foreground and
// `kBackgroundDim` on the background (`foreground` in [0, 1] blends where it was resampled).
constexpr float kBackgroundDim = 0.2f;
void foreground_colour(const float* whitened, float foreground, float* rgb);

}  // namespace vitreg
