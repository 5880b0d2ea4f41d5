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
        [](const py::object& path, std::int64_t max_pixels) {
            const std::string name = py::str(py::module_::import("os").attr("fspath")(path));
            ImageLimits limits;
            limits.max_pixels = max_pixels;
            Image img;
            {
                py::gil_scoped_release release;
                img = decode_image(name, limits);
            }
            const py::ssize_t h = img.height, w = img.width;
            return owning_array(std::move(img.rgb), {h, w, 3});
        },
        "path"_a, "max_pixels"_a = ImageLimits{}.max_pixels,
        R"(An image file decoded as vitreg decodes it: uint8 [height, width, 3] RGB (grey, RGBA and
16-bit files converted; PNG, JPEG, BMP, PNM, TGA, a GIF's first frame). The pixel count is checked
against max_pixels before decoding. Raises vitreg.ImageError naming the file and the fault.)");
}

}  // namespace vitreg::python
