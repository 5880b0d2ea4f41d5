#pragma once
// How image files become pixels, for every command and call that reads images: resize, pipeline,
// resample, decode, exif-transpose (option_spec.hpp; defaults: ResizeSpec's own).
#include "vitreg/option_spec.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg {

const OptionTable<ResizeSpec, 5>& pixel_option_table();

}  // namespace vitreg
