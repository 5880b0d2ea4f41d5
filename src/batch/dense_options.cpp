// DenseOptions' own: its options' table (dense.hpp), how --upsample reads, the checks across
// options, and the record of what a run was asked for (job.json and run.json alike).
#include <filesystem>

#include "core/parse_number.hpp"
#include "vitreg/dense_options.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

std::string scales_text(const DenseView& v) {
    std::string text;
    for (const double s : v.scales) text += (text.empty() ? "" : ",") + option_text(OptionValue(s));
    return text;
}

}  // namespace

const OptionTable<DenseOptions, 14>& dense_option_table() {
    using V = ValueType;
    using O = DenseOptions;
    static const OptionTable<DenseOptions, 14> table{{
        {{"layers", V::Text, "last | -4,-3,-2,-1 | i,j,... (like get_intermediate_layers)"}, field_get<&O::layers>,
         field_set<&O::layers>},
        {{"norm", V::Flag, "apply the final LayerNorm to the chosen layers"}, field_get<&O::norm>, field_set<&O::norm>},
        {{"concat", V::Flag, "one [h, w, layers*D] array instead of [layers, h, w, D]"}, field_get<&O::concat>,
         field_set<&O::concat>},
        {{"upsample", V::Text,
          "none | image | xN (bilinear to the input's pixels or N times the grid) | bilinear | jbu | bilinear:SIZE | "
          "jbu:SIZE (jbu: joint bilateral upsampling guided by the image)"},
         [](const O& o) { return OptionValue(o.upsample_text()); },
         [](O& o, const OptionValue& v) { o.parse_upsample(std::get<std::string>(v)); }},
        {{"window", V::Integer,
          "sliding window: crops of this many pixels (a multiple of the patch), each crop's grid pasted into the "
          "image's and averaged where they overlap"},
         [](const O& o) { return option_value(o.view.window); },
         [](O& o, const OptionValue& v) { o.view.window = value_as<int>(v); }},
        {{"stride", V::Integer, "pixels between crops (a multiple of the patch, at most --window; default: --window)"},
         [](const O& o) { return option_value(o.view.stride); },
         [](O& o, const OptionValue& v) { o.view.stride = value_as<int>(v); }},
        {{"image-scales", V::Text, "run the image at each scale (e.g. 0.5,1,1.5), grids resized to one and averaged",
          {}, 0, 0, "scales", ","},
         [](const O& o) { return OptionValue(scales_text(o.view)); },
         [](O& o, const OptionValue& v) { o.view.parse_scales(std::get<std::string>(v)); }},
        {{"flip", V::Flag, "also run each scale mirrored left-right (its grid mirrored back) and average"},
         [](const O& o) { return option_value(o.view.flip); },
         [](O& o, const OptionValue& v) { o.view.flip = value_as<bool>(v); }},
        {{"grid", V::Text, "the common grid HxW in cells (default: the image's own patch grid)", {}, 0, 0, "", "x"},
         [](const O& o) {
             return OptionValue(o.view.grid_h > 0 ? std::to_string(o.view.grid_h) + "x" + std::to_string(o.view.grid_w)
                                                  : std::string());
         },
         [](O& o, const OptionValue& v) { o.view.parse_grid(std::get<std::string>(v)); }},
        {{"jbu-sigma-spatial", V::Real, "JBU's spatial sigma, in grid cells"},
         [](const O& o) { return option_value(o.jbu.sigma_spatial); },
         [](O& o, const OptionValue& v) { o.jbu.sigma_spatial = value_as<double>(v); }},
        {{"jbu-sigma-range", V::Real, "JBU's range sigma, in RGB intensity [0, 1]"},
         [](const O& o) { return option_value(o.jbu.sigma_range); },
         [](O& o, const OptionValue& v) { o.jbu.sigma_range = value_as<double>(v); }},
        {{"jbu-radius", V::Integer, "JBU's window: the (2r+1)^2 cells around each pixel's own", {}, 0, 16},
         [](const O& o) { return option_value(o.jbu.radius); },
         [](O& o, const OptionValue& v) { o.jbu.radius = value_as<int>(v); }},
        {{"dtype", V::Text, "f32 or f16", {"f32", "f16"}},
         [](const O& o) { return OptionValue(std::string(o.half ? "f16" : "f32")); },
         [](O& o, const OptionValue& v) { o.half = std::get<std::string>(v) == "f16"; }},
        {{"pca-dims", V::Integer,
          "write K principal components of the chosen layers side by side instead of every channel ([h, w, K]), "
          "reduced before upsampling, with the basis in <row>.pca_basis.safetensors"},
         field_get<&O::pca_dims>, field_set<&O::pca_dims>},
    }};
    return table;
}

void DenseOptions::parse_upsample(const std::string& text) {
    const auto bad = [&] {
        return UsageError("bad --upsample '" + text +
                          "' (expected none, image, xN (N in 1..64), bilinear, jbu, or bilinear:SIZE / jbu:SIZE with "
                          "SIZE image or xN)");
    };
    if (text == "none") {
        upsample = Upsample::None;
        return;
    }
    const auto colon = text.find(':');
    std::string size = text;
    method = UpsampleMethod::Bilinear;
    if (colon != std::string::npos || text == "bilinear" || text == "jbu") {
        try {
            method = parse_enum<UpsampleMethod>(text.substr(0, colon));
        } catch (const UsageError&) {
            throw bad();
        }
        size = colon == std::string::npos ? "image" : text.substr(colon + 1);
    }
    if (size == "image") {
        upsample = Upsample::Image;
    } else if (size.size() > 1 && size[0] == 'x' && parse_integer(size.substr(1), 1, 64)) {
        upsample = Upsample::Factor;
        factor = static_cast<int>(*parse_integer(size.substr(1), 1, 64));
    } else {
        throw bad();
    }
}

std::string DenseOptions::upsample_text() const {
    if (upsample == Upsample::None) return "none";
    const std::string size = upsample == Upsample::Image ? "image" : "x" + std::to_string(factor);
    // Bilinear keeps its old spelling, so that a resumed job from before methods existed still matches.
    return method == UpsampleMethod::Bilinear ? size : to_string(method) + ":" + size;
}

void DenseOptions::check(int patch) const {
    view.check(patch);
    if (pca_foreground && pca_joint && pca_dims == 0)
        throw UsageError("--pca foreground is fitted per image: leave out --pca-joint");
    if (pca_mask.given() && !pca_foreground)
        throw UsageError("--pca-mask is the foreground of --pca foreground: add --pca foreground");
    if (!pca_mask.path.empty() && !std::filesystem::exists(pca_mask.path))
        throw UsageError("--pca-mask " + pca_mask.path + ": no such file or folder");
    if (artifact_rule && !view.plain())
        throw UsageError("--artifact-rule: the mask is of one forward's patch grid; leave out --window, --image-scales, "
                         "--flip and --grid");
    if (method == UpsampleMethod::Jbu && upsample == Upsample::None)
        throw UsageError("--upsample jbu needs a size to upsample to (jbu:image or jbu:xN)");
    const JbuOptions plain;
    if (method != UpsampleMethod::Jbu &&
        (jbu.sigma_spatial != plain.sigma_spatial || jbu.sigma_range != plain.sigma_range || jbu.radius != plain.radius))
        throw UsageError("--jbu-sigma-spatial, --jbu-sigma-range and --jbu-radius apply only to --upsample jbu");
    if (!(jbu.sigma_spatial > 0) || !(jbu.sigma_range > 0) || jbu.radius < 0 || jbu.radius > 16)
        throw UsageError("--jbu-sigma-spatial and --jbu-sigma-range must be above 0 and --jbu-radius in 0..16");
}

void DenseOptions::check(const Config& c) const {
    check(c.patch);
    const int channels = static_cast<int>(resolve_layers(layers, c.depth).size()) * c.dim;
    if (pca_dims != 0 && (pca_dims < 1 || pca_dims > channels))
        throw UsageError("--pca-dims " + std::to_string(pca_dims) + " must be in 1.." + std::to_string(channels) +
                         " (the chosen layers' channels, side by side)");
}

nlohmann::ordered_json DenseOptions::to_json(const std::vector<int>& block_layers, const ArtifactRule* rule) const {
    nlohmann::ordered_json j;
    j["layers"] = block_layers;
    j["norm"] = norm;
    j["concat"] = concat;
    j["upsample"] = upsample_text();
    if (method == UpsampleMethod::Jbu)
        j["jbu"] = {{"sigma_spatial", jbu.sigma_spatial}, {"sigma_range", jbu.sigma_range}, {"radius", jbu.radius}};
    if (!view.plain()) j["view"] = view.to_json();
    j["dtype"] = half ? "f16" : "f32";
    j["pca"] = pca_foreground ? "foreground per image" : pca ? pca_fit() : "none";
    if (rule) j["artifact_rule"] = rule->to_json();
    if (pca_mask.given()) j["pca_mask"] = pca_mask.describe();
    if (pca_dims > 0) j["pca_dims"] = {{"k", pca_dims}, {"fit", pca_fit()}};
    return j;
}

std::string DenseOptions::pca_fit() const {
    return pca_joint ? "joint over batches of " + std::to_string(std::max(1, batch)) : "per image";
}

}  // namespace vitreg
