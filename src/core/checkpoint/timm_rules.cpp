#include "core/checkpoint/timm_rules.hpp"

#include "core/affix.hpp"

namespace vitreg::source {

void timm_activation(Config& c, const SideFiles& side, Notes&) {
    if (c.mlp == MlpKind::SwiGlu || side.architecture.empty()) return;
    const auto* act = dig(side.timm, {"model_args", "act_layer"});
    const std::string named = act && act->is_string() ? act->get<std::string>() : "";
    if (contains(side.architecture, "quickgelu") || named == "quick_gelu") c.mlp = MlpKind::QuickGelu;
    if (named == "gelu_tanh") c.mlp = MlpKind::GeluTanh;
}

PosInterp timm_pos_interp(const Config& c, const SideFiles& side) {
    // (a timm hub config: timm's own DINOv2 resamples so too)
    if (c.family != Family::Dinov2 || !side.architecture.empty()) return PosInterp::Antialias;
    return c.registers > 0 ? PosInterp::Antialias : PosInterp::Offset;
}

bool clip_head(const Config& c, const SideFiles&) { return c.family == Family::Clip; }

}  // namespace vitreg::source
