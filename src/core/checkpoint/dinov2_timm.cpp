// timm's VisionTransformer names, which DINOv2's hub files share: `blocks.i.attn.qkv`, `pos_embed`,
// `cls_token`, ... (docs/design.md, "Reference semantics" and "Families"). Two sources, one naming:
// timm's converted register models differ only in `reg_token` and a pos_embed without the class
// token's row (no_embed_class).
#include "core/affix.hpp"
#include "core/checkpoint/timm_rules.hpp"

namespace vitreg::source {

namespace {

const char* const kMarker = "patch_embed.proj.weight";

// Stated by a timm hub config, or told by the tensors (docs/design.md, "Families").
Family timm_family(const Config& c, const SideFiles& side, bool flags_tell_timm) {
    const std::string& a = side.architecture;
    if (!a.empty())
        return contains(a, "siglip") ? Family::Siglip : contains(a, "clip") ? Family::Clip : contains(a, "dinov2") ? Family::Dinov2 : Family::Timm;
    if (c.pre_norm && !c.patch_bias) return Family::Clip;  // timm's vit_*_clip_*: norm_pre, a patch embedding without bias
    if (flags_tell_timm && (c.pre_norm || c.fc_norm || !c.class_token || !c.pos_embed_class || !c.qkv_bias ||
                            !c.patch_bias || !c.final_norm))
        return Family::Timm;
    return Family::Dinov2;
}

// Both: the timm VisionTransformer facts.
Source timm_vision_transformer(const std::string& name) {
    Source s;
    s.name = name;
    s.side_files = SideFormat::TimmHubConfig;
    s.timm_class = "VisionTransformer";
    s.timm_names = "timm VisionTransformer names";
    s.activation = timm_activation;
    s.head_is_projection = clip_head;
    return s;
}

}  // namespace

Source dinov2_source() {
    Source s = timm_vision_transformer("dinov2");
    s.match = [](const TensorFile& f) { return prefix_before(f, kMarker); };
    s.names = [](const TensorFile& f, const std::string& prefix) {
        NameTable t;
        // timm's AttentionPoolLatent (vit_*_siglip_*) keeps q [D] and kv [2D] apart.
        for (const std::string leaf : {"weight", "bias"})
            if (!f.has(prefix + "attn_pool.qkv." + leaf) && f.has(prefix + "attn_pool.kv.weight"))
                t.top.push_back({"attn_pool.qkv." + leaf, "attn_pool.q." + leaf + "|attn_pool.kv." + leaf});
        return t;
    };
    s.family = [](const Config& c, const SideFiles& side) { return timm_family(c, side, true); };
    s.pos_interp = timm_pos_interp;
    return s;
}

Source timm_reg_source() {
    Source s = timm_vision_transformer("timm-reg");
    s.match = [](const TensorFile& f) -> std::optional<std::string> {
        auto prefix = prefix_before(f, kMarker);
        if (!prefix || !f.has(*prefix + "reg_token")) return std::nullopt;
        return prefix;
    };
    s.names = [](const TensorFile&, const std::string&) {
        NameTable t;
        t.top = {{"register_tokens", "reg_token"}};
        return t;
    };
    s.pos_rows = "M*M";
    s.family = [](const Config& c, const SideFiles& side) { return timm_family(c, side, false); };
    s.pos_interp = [](const Config&, const SideFiles&) { return PosInterp::Antialias; };
    s.pipeline = PixelPipeline::Timm;
    return s;
}

}  // namespace vitreg::source
