// vitreg.read_image: an image file as vitreg decodes it, for masks and for looking.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "vitreg/image.hpp"

namespace vitreg::python {

void bind_images(py::module_& m) {
    using namespace pybind11::literals;
    m.def(
        "read_image",
        [](const py::object& path, std::int64_t max_pixels, bool exif_transpose) {
            const std::string name = py::str(py::module_::import("os").attr("fspath")(path));
            DecodeOptions options;
            options.limits.max_pixels = max_pixels;
            options.exif_transpose = exif_transpose;
            Image img;
            {
                py::gil_scoped_release release;
                img = decode_image(name, options);
            }
            const py::ssize_t h = img.height, w = img.width;
            return owning_array(std::move(img.rgb), {h, w, 3});
        },
        "path"_a, "max_pixels"_a = ImageLimits{}.max_pixels, "exif_transpose"_a = false,
        R"(An image file decoded as vitreg decodes it: uint8 [height, width, 3] RGB, the bytes of
PIL's Image.open(path).convert("RGB") (JPEG through libjpeg-turbo as PIL runs it, WebP's first
frame, PNG, BMP, PNM, TGA, a GIF's first frame; grey, palette, CMYK, alpha and 16-bit files
converted as PIL converts them). exif_transpose applies the EXIF orientation first, as
ImageOps.exif_transpose. The pixel count is checked against max_pixels before decoding. Raises
vitreg.ImageError naming the file and the fault.)");
}

}  // namespace vitreg::python
