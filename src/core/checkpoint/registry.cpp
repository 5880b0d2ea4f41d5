// The sources vitreg reads, in match order: the first whose match holds names the file. Adding a
// source is one file defining its NAME_source(), plus its declaration and its entry here.
#include "core/affix.hpp"
#include "core/checkpoint/source.hpp"

namespace vitreg::source {

Source hf_vit_source();      // hf_vit.cpp: before hf_dinov2, whose patch embedding it shares
Source hf_dinov2_source();   // hf_dinov2.cpp
Source hf_dinov3_source();   // dinov3.cpp
Source hf_clip_source();     // clip.cpp
Source hf_siglip_source();   // clip.cpp
Source open_clip_source();   // clip.cpp
Source dinov3_hub_source();  // dinov3.cpp
Source torchvision_source();  // torchvision.cpp
Source timm_eva_source();    // timm_eva.cpp
Source timm_reg_source();    // dinov2_timm.cpp
Source dinov2_source();      // dinov2_timm.cpp: timm's names, the last resort

const std::vector<Source>& sources() {
    static const std::vector<Source> all = {
        hf_vit_source(),
        hf_dinov2_source(),
        hf_dinov3_source(),
        hf_clip_source(),
        hf_siglip_source(),
        open_clip_source(),
        dinov3_hub_source(),
        torchvision_source(),
        timm_eva_source(),
        timm_reg_source(),
        dinov2_source(),
    };
    return all;
}

const Source* match_source(const TensorFile& f, std::string& prefix) {
    for (const auto& s : sources())
        if (auto p = s.match(f)) {
            prefix = *p;
            return &s;
        }
    return nullptr;
}

std::optional<std::string> prefix_before(const TensorFile& f, const std::string& marker) {
    for (const auto& name : f.names())
        if (ends_with(name, marker)) return name.substr(0, name.size() - marker.size());
    return std::nullopt;
}

}  // namespace vitreg::source
