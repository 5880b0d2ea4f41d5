#include "core/checkpoint/timm_rules.hpp"


namespace vitreg::source {

void timm_activation(Config& c, const SideFiles& side, Notes&) {
    if (c.mlp == MlpKind::SwiGlu) return;
    // (timm_architecture refused any other name; Eva has no act_layer: its Mlp builds nn.GELU)
    if (const auto* act = side.timm_arg("act_layer")) c.mlp = parse_enum<MlpKind>(act->get<std::string>());
}

PosInterp timm_pos_interp(const Config& c, const SideFiles& side) {
    // (a timm hub config: timm's own DINOv2 resamples so too)
    if (c.family != Family::Dinov2 || !side.architecture.empty()) return PosInterp::Antialias;
    return c.registers > 0 ? PosInterp::Antialias : PosInterp::Offset;
}

bool clip_head(const Config& c, const SideFiles&) { return c.family == Family::Clip; }

}  // namespace vitreg::source
