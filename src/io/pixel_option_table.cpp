// The pixel options' table (preprocess.hpp): one entry per option of ResizeSpec.
#include "vitreg/enum_names.hpp"
#include "vitreg/pixel_options.hpp"

namespace vitreg {

namespace {

// The geometry alone ("eval", "224x224", "long:448"): the other fields are options of their own.
std::string geometry_text(const ResizeSpec& r) {
    ResizeSpec geometry;
    geometry.mode = r.mode;
    geometry.size = r.size;
    geometry.width = r.width;
    geometry.height = r.height;
    return geometry.to_string();
}

void set_geometry(ResizeSpec& r, const OptionValue& v) {
    const ResizeSpec parsed = ResizeSpec::parse(std::get<std::string>(v));
    r.mode = parsed.mode;
    r.size = parsed.size;
    r.width = parsed.width;
    r.height = parsed.height;
}

}  // namespace

const OptionTable<ResizeSpec, 5>& pixel_option_table() {
    using V = ValueType;
    static const OptionTable<ResizeSpec, 5> table{{
        {{"resize", V::Text, "eval | none | WxH | short:N | long:N"},
         [](const ResizeSpec& r) { return OptionValue(geometry_text(r)); }, set_geometry},
        {{"pipeline", V::Text,
          "whose eval transform: " + enum_choices<PixelPipeline>(" | ", " | ") + " (default: the checkpoint's own)",
          enum_names<PixelPipeline>()},
         [](const ResizeSpec& r) { return OptionValue(r.pipeline ? to_string(*r.pipeline) : std::string()); },
         [](ResizeSpec& r, const OptionValue& v) { r.pipeline = parse_pixel_pipeline(std::get<std::string>(v)); }},
        {{"resample", V::Text,
          "pil: PIL's uint8 Image.resize, as PIL-image pipelines do; torch: F.interpolate's float bicubic antialias, "
          "as pipelines that resize tensors do",
          {"pil", "torch"}},
         [](const ResizeSpec& r) { return OptionValue(to_string(r.resampler)); },
         [](ResizeSpec& r, const OptionValue& v) { r.resampler = parse_resampler(std::get<std::string>(v)); }},
        {{"decode", V::Text,
          "exact: PIL's pixels; draft: JPEGs at a reduced DCT scale when much larger than the resize (PIL's "
          "Image.draft: faster on camera photos, different pixels)",
          {"exact", "draft"}},
         [](const ResizeSpec& r) { return OptionValue(std::string(r.draft ? "draft" : "exact")); },
         [](ResizeSpec& r, const OptionValue& v) { r.draft = std::get<std::string>(v) == "draft"; }},
        {{"exif-transpose", V::Flag,
          "apply the EXIF orientation first, as HF's load_image does (PIL's Image.open, torchvision and timm do not)"},
         field_get<&ResizeSpec::exif_transpose>, field_set<&ResizeSpec::exif_transpose>},
    }};
    return table;
}

}  // namespace vitreg
