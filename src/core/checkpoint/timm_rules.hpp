#pragma once
// What timm's model definitions imply for the sources timm writes or reads (its VisionTransformer,
// Eva, and DINOv3's hub files beside a timm config.json).
#include "core/checkpoint/source.hpp"

namespace vitreg::source {

// timm's act_layer: model_args', else the architecture's definition (its SigLIP 2 towers: gelu_tanh).
void timm_activation(Config& c, const SideFiles& side, Notes& notes);
// timm's resample_abs_pos_embed antialiases; a dinov2 hub file without registers resamples with an offset.
PosInterp timm_pos_interp(const Config& c, const SideFiles& side);
// timm's CLIP towers keep the projection as `head`.
bool clip_head(const Config& c, const SideFiles& side);

}  // namespace vitreg::source
