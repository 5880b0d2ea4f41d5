#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

// stb_image_write lives privately in this translation unit.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#define STBI_WRITE_NO_STDIO
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace vitreg {

void write_png_rgb(const std::string& path, int width, int height, const std::uint8_t* rgb) {
    std::string bytes;
    const auto append = [](void* context, void* data, int size) {
        static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<std::size_t>(size));
    };
    if (!stbi_write_png_to_func(append, &bytes, width, height, 3, rgb, width * 3))
        throw IoError(path + ": cannot encode PNG");
    write_file_atomic(path, bytes);
}

}  // namespace vitreg
