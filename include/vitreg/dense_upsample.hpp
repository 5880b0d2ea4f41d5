#pragma once
// How dense features are upsampled to pixels (docs/design.md, "Dense features at resolution").
#include <string>
#include <vector>

#include "vitreg/enum_names.hpp"

namespace vitreg {

enum class UpsampleMethod {
    Bilinear,  // F.interpolate(mode="bilinear", align_corners=False, antialias=False)
    Jbu,       // joint bilateral upsampling guided by the image (Kopf et al. 2007)
};

struct JbuOptions {
    double sigma_spatial = 1.0;  // in grid cells
    double sigma_range = 0.15;   // in RGB intensity, [0, 1]
    int radius = 2;              // the (2r+1)² cells around each output pixel's own
};

// A guidance image: RGB in [0, 1], [height, width, 3].
struct GuideImage {
    int width = 0, height = 0;
    std::vector<float> rgb;
};

template <>
struct EnumTable<UpsampleMethod> {
    static constexpr const char* what = "upsampling method";
    static constexpr EnumName<UpsampleMethod> names[] = {{UpsampleMethod::Bilinear, "bilinear"}, {UpsampleMethod::Jbu, "jbu"}};
};
inline std::string to_string(UpsampleMethod method) { return name_of(method); }

}  // namespace vitreg
