#pragma once
// Dense features for segmentation: per image, the patch tokens of chosen layers as a grid
// aligned to the pixels they came from, streamed image by image.
#include <optional>
#include <string>
#include <vector>

#include "vitreg/analysis/artifact_rule.hpp"
#include "vitreg/batch_job.hpp"
#include "vitreg/dense_upsample.hpp"
#include "vitreg/dense_view.hpp"

namespace vitreg {

struct DenseOptions : BatchOptions {
    DenseOptions() { batch = 1; }  // dense arrays are large: one image per forward unless asked
    std::string layers = "last";  // "last" | "-4,-3,-2,-1" | "i,j,..." (see resolve_layers)
    bool norm = false;            // apply the final LayerNorm to the chosen layers
    bool concat = false;          // [h, w, layers·D] instead of [layers, h, w, D]
    DenseView view;               // sliding window, scales, flip, common grid (plain: one forward)
    enum class Upsample { None, Image, Factor } upsample = Upsample::None;
    int factor = 1;               // with Upsample::Factor
    UpsampleMethod method = UpsampleMethod::Bilinear;
    JbuOptions jbu;
    bool half = false;            // float16 storage
    bool pca = false;             // <row>.pca.png: input | PCA of the patch features
    bool pca_joint = false;       // fit the PCA over each --batch of images together (not with shards)
    // <row>.pca.png as DINOv3 draws it (pca_foreground in analysis/pca.hpp): whitened, sigmoid(2x),
    // background dimmed; per image; at the input's pixels through the chosen upsampler.
    bool pca_foreground = false;
    // <row>.artifacts.npy beside the features: float32 [layers, grid_h, grid_w], 1 where this rule
    // flags the patch at each chosen layer (its own forward's grid; not with a view).
    std::optional<ArtifactRule> artifact_rule;

    // "none", or [METHOD:]SIZE or METHOD: METHOD bilinear | jbu, SIZE image (the input's pixel
    // size, the default) | xN (N times the grid); "image" and "xN" alone are bilinear. Throws UsageError.
    void parse_upsample(const std::string& text);
    // What parse_upsample reads back: "none", "bilinear:image", "jbu:x4", ...
    std::string upsample_text() const;
    // Throws UsageError for options that contradict each other (the view's faults; JBU without upsampling).
    void check(int patch) const;
};

// One image's dense array, as dense_features writes it (float32 here; `half` rounds what it writes).
struct DenseArray {
    std::vector<std::int64_t> shape;
    std::vector<float> data;
};
// The array dense_features writes for one preprocessed image (no PCA picture, no files).
DenseArray dense_array(const Model& model, const Pixels& pixels, const DenseOptions& options);

// Writes OUT/<row>.npy (or .safetensors, tensor "features") per good image: [h, w, C] for one
// layer or with concat, else [layers, h, w, D]; registers and CLS excluded; h × w is the patch
// grid, or the upsampled size; with an artifact rule also OUT/<row>.artifacts.npy. manifest.jsonl as extract's plus each row's file, shape and
// geometry (source size, resize scale, crop offsets, patch, model input size). Durable,
// resumable and shardable exactly as extract_features (job.json, chunks/, shard folders);
// `vitreg merge` joins the shards. Throws UsageError when OUT_DIR holds something it must not
// replace, or for pca_joint with shards (a joint PCA depends on which images share a batch).
BatchSummary dense_features(const Model& model, const std::vector<std::string>& inputs, const DenseOptions& options,
                            const BatchProgress& progress = {});

}  // namespace vitreg
