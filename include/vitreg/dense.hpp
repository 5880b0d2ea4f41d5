#pragma once
// Dense features for segmentation: per image, the patch tokens of chosen layers as a grid
// aligned to the pixels they came from, streamed image by image.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vitreg/analysis/artifact_rule.hpp"
#include "vitreg/analysis/pca.hpp"
#include "vitreg/batch_job.hpp"
#include "vitreg/dense_upsample.hpp"
#include "vitreg/dense_view.hpp"

namespace vitreg {

// The foreground of --pca foreground given by a mask (nonzero = foreground) instead of the first
// component's threshold: a PNG for every input, a folder with one <stem>.png per input, or one
// in-memory mask for every input. Its size is the source image's (it goes through the image's
// resize and crop), the model input's, or the grid's; docs/design.md, "Dense features at resolution".
struct ForegroundMask {
    std::string path;                  // file or folder; empty: `pixels` when given
    int width = 0, height = 0;         // of `pixels`
    std::vector<std::uint8_t> pixels;  // [height, width]
    bool given() const { return !path.empty() || !pixels.empty(); }
    // "PATH" or "array WxH <digest>", for the run's identity.
    std::string describe() const;
};

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
    ForegroundMask pca_mask;      // with pca_foreground: the foreground from a mask
    // Reduce the written features to this many principal components (0: keep every channel),
    // fitted per image, or over each batch with pca_joint, after the views are averaged and before
    // upsampling: [h, w, K] whatever the layers, and <row>.pca_basis.safetensors beside.
    int pca_dims = 0;
    // <row>.artifacts.npy beside the features: float32 [layers, grid_h, grid_w], 1 where this rule
    // flags the patch at each chosen layer (its own forward's grid; not with a view).
    std::optional<ArtifactRule> artifact_rule;

    // "none", or [METHOD:]SIZE or METHOD: METHOD bilinear | jbu, SIZE image (the input's pixel
    // size, the default) | xN (N times the grid); "image" and "xN" alone are bilinear. Throws UsageError.
    void parse_upsample(const std::string& text);
    // What parse_upsample reads back: "none", "bilinear:image", "jbu:x4", ...
    std::string upsample_text() const;
    // Throws UsageError for options that contradict each other (the view's faults; JBU without
    // upsampling; a mask without --pca foreground).
    void check(int patch) const;
    // check(c.patch), and the layers and pca_dims against the model: pca_dims in 1..(layers × dim).
    void check(const Config& c) const;
    // What the run was asked for, each option once: the job's identity (job.json) and the table's
    // record (run.json) both hold it. `block_layers`: the layers resolved against the model;
    // `rule`: the artifact rule bound to it (null: none).
    nlohmann::ordered_json to_json(const std::vector<int>& block_layers, const ArtifactRule* rule) const;
    // How the PCAs (the picture's, the reduction's) are fitted: "per image" or "joint over batches of N".
    std::string pca_fit() const;
};

// One image's dense array, as dense_features writes it: float32 in `data`, or with the options'
// `half` IEEE half bits in `half` (rounded as the writer rounds), `data` then empty.
struct DenseArray {
    std::vector<std::int64_t> shape;
    std::vector<float> data;
    std::vector<std::uint16_t> half;
    PcaBasis basis;  // with pca_dims: the reduction's (k 0 otherwise)
};
// A reduction's basis as <row>.pca_basis.safetensors holds it, float32: "mean" [C], "components"
// [K, C] (orthonormal rows), "explained_variance" [K] (over n − 1) and "explained_variance_ratio" [K]
// (of the total variance); features ≈ mean + reduced · components.
struct BasisTensor {
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};
std::map<std::string, BasisTensor> pca_basis_tensors(const PcaBasis& basis);

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
