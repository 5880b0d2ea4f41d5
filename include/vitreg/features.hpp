#pragma once
// What one forward returns: the final-normed CLS, register and patch tokens of each image,
// the pooled feature and, for models with a projection (CLIP), the image embedding.
#include <vector>

namespace vitreg {

struct Features {
    int batch = 0;
    int dim = 0;
    int registers = 0;            // trained, then test-time ones
    int test_time_registers = 0;  // the last of `registers` (Intervention)
    int grid_h = 0;
    int grid_w = 0;
    // Without a class token (timm class_token=False), `cls` holds the pooled feature.
    std::vector<float> cls;        // [batch, dim]            x_norm_clstoken
    std::vector<float> reg_tokens;  // [batch, registers, dim] x_norm_regtokens
    std::vector<float> patches;    // [batch, grid_h*grid_w, dim] x_norm_patchtokens, row-major grid
    // [batch, dim]: the mean of the patch tokens, then fc_norm where the model has one (timm
    // global_pool='avg'). Empty: pooled_of computes the plain mean.
    std::vector<float> pooled;
    int embedding_dim = 0;          // E: the model's projection (CLIP), else 0
    std::vector<float> embedding;  // [batch, E] cls · proj, unnormalized (CLIP's encode_image)

    int patch_count() const { return grid_h * grid_w; }
    const float* cls_of(int b) const { return cls.data() + static_cast<std::size_t>(b) * dim; }
    const float* registers_of(int b) const {
        return reg_tokens.data() + static_cast<std::size_t>(b) * registers * dim;
    }
    const float* patches_of(int b) const {
        return patches.data() + static_cast<std::size_t>(b) * patch_count() * dim;
    }
    // The "pooled" feature of image b, [dim]: `pooled` when the forward filled it, else the
    // mean of the patch tokens.
    std::vector<float> pooled_of(int b) const;
    // Mean of the output patch tokens of image b, [dim] (summed in double).
    std::vector<float> mean_patch_of(int b) const;
    const float* embedding_of(int b) const { return embedding.data() + static_cast<std::size_t>(b) * embedding_dim; }
};

// How close one forward's features are to another's of the same inputs (reduced precision
// against fp32): cosines per token, and the largest |got − want| over the largest |want|.
struct FeatureAgreement {
    double cls_cosine_min = 1, cls_cosine_mean = 1;      // over the batch's CLS tokens
    double patch_cosine_min = 1, patch_cosine_mean = 1;  // over every patch token of the batch
    double max_relative_error = 0;                       // over CLS, registers and patches
};
// Throws UsageError when the two have different shapes.
FeatureAgreement agreement(const Features& got, const Features& want);

}  // namespace vitreg
