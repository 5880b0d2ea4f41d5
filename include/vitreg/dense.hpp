#pragma once
// Dense features for segmentation: per image, the patch tokens of chosen layers as a grid
// aligned to the pixels they came from, streamed image by image.
#include <string>
#include <vector>

#include "vitreg/extract.hpp"

namespace vitreg {

struct DenseOptions {
    std::string out_dir;
    ResizeSpec resize;
    std::string layers = "last";  // "last" | "-4,-3,-2,-1" | "i,j,..." (see resolve_layers)
    bool norm = false;            // apply the final LayerNorm to the chosen layers
    bool concat = false;          // [h, w, layers·D] instead of [layers, h, w, D]
    enum class Upsample { None, Image, Factor } upsample = Upsample::None;
    int factor = 1;               // with Upsample::Factor
    FeatureFormat format = FeatureFormat::Npy;
    bool half = false;            // float16 storage
    bool pca = false;             // <row>.pca.png: input | PCA of the patch features
    bool pca_joint = false;       // fit the PCA over each --batch of images together
    int batch = 1;
    int threads = 0;
    ImageLimits image_limits;
    std::int64_t max_tokens = kDefaultMaxTokens;  // per image; 0 = no limit

    // "none" | "image" | "xN"; throws UsageError.
    void parse_upsample(const std::string& text);
};

// Writes OUT/<row>.npy (or .safetensors, tensor "features") per good image: [h, w, C] for one
// layer or with concat, else [layers, h, w, D]; registers and CLS excluded; h × w is the patch
// grid, or the upsampled size. manifest.jsonl as extract's plus each row's geometry (source
// size, resize scale, crop offsets, patch, model input size, output shape).
ExtractSummary dense_features(const Model& model, const std::vector<std::string>& inputs, const DenseOptions& options,
                              const ExtractProgress& progress = {});

}  // namespace vitreg
