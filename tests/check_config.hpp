#pragma once
// Two Configs field by field, so that a failure names the field.
#include <catch2/catch.hpp>

#include "vitreg/config.hpp"

namespace vitreg::test {

// Every field of Config, the source included.
inline void check_same(const Config& a, const Config& b) {
    CHECK(a.source == b.source);
    CHECK(a.dim == b.dim);
    CHECK(a.depth == b.depth);
    CHECK(a.heads == b.heads);
    CHECK(a.head_dim == b.head_dim);
    CHECK(a.patch == b.patch);
    CHECK(a.registers == b.registers);
    CHECK(a.grid == b.grid);
    CHECK(a.mlp_hidden == b.mlp_hidden);
    CHECK(a.mlp == b.mlp);
    CHECK(a.attention == b.attention);
    CHECK(a.trained_attention == b.trained_attention);
    CHECK(a.has_sinks == b.has_sinks);
    CHECK(a.layer_scale == b.layer_scale);
    CHECK(a.pos_interp == b.pos_interp);
    CHECK(a.positions == b.positions);
    CHECK(a.rope_theta == b.rope_theta);
    CHECK(a.rope_ref_grid == b.rope_ref_grid);
    CHECK(a.eps == b.eps);
    CHECK(a.family == b.family);
    CHECK(a.class_token == b.class_token);
    CHECK(a.pos_embed_class == b.pos_embed_class);
    CHECK(a.pre_norm == b.pre_norm);
    CHECK(a.patch_bias == b.patch_bias);
    CHECK(a.qkv_bias == b.qkv_bias);
    CHECK(a.final_norm == b.final_norm);
    CHECK(a.attn_norm == b.attn_norm);
    CHECK(a.mlp_norm == b.mlp_norm);
    CHECK(a.pool == b.pool);
    CHECK(a.fc_norm == b.fc_norm);
    CHECK(a.proj_dim == b.proj_dim);
    CHECK(a.input_size == b.input_size);
    CHECK(a.crop_pct == b.crop_pct);
    CHECK(a.eval_squash == b.eval_squash);
    CHECK(a.pipeline == b.pipeline);
    CHECK(a.interpolation == b.interpolation);
    CHECK(a.mean == b.mean);
    CHECK(a.std == b.std);
    CHECK(a.dtype == b.dtype);
    CHECK(a.parameters == b.parameters);
    CHECK(a.evict_sink == b.evict_sink);
    CHECK(a.notes == b.notes);
}

}  // namespace vitreg::test
