#pragma once
// An attention-pool head (SigLIP's MAP: HF SiglipMultiheadAttentionPoolingHead, timm's
// AttentionPoolLatent): a learned probe attends over the final-normed tokens with its own
// multi-head attention, then h = h + mlp(norm(h)). Its output is the model's pooled feature.
#include <string>

#include "kernels.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/config.hpp"

namespace vitreg {

using kernels::RowMatrix;

struct AttentionPool {
    int dim = 0, heads = 0, hidden = 0;
    Eigen::VectorXf latent;                   // the probe [D]
    RowMatrix qkv;                            // [3D, D]: q, k, v (HF's in_proj)
    Eigen::VectorXf qkv_bias;                 // [3D]
    RowMatrix proj;                           // [D, D] (out_proj)
    Eigen::VectorXf proj_bias;
    kernels::Norm norm;
    RowMatrix fc1, fc2;                       // [H, D], [D, H]
    Eigen::VectorXf fc1_bias, fc2_bias;

    // From `attn_pool.*` (Checkpoint's canonical names); the heads are the model's.
    static AttentionPool load(const Checkpoint& ck, const Config& c);

    // The pooled feature [D] of one image's tokens [n, D]: softmax attention of the probe (in
    // double, a few thousand numbers), the MLP's activation the model's own. `attention`, when
    // given, receives the probe's rows [heads, n].
    void pool(const float* tokens, int n, float eps, MlpKind activation, float* out, float* attention = nullptr) const;
};

}  // namespace vitreg
