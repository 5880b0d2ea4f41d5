#include "pca_mask.hpp"

#include <algorithm>
#include <filesystem>

#include "io/file_digest.hpp"
#include "vitreg/error.hpp"
#include "vitreg/image.hpp"

namespace vitreg {

std::string ForegroundMask::describe() const {
    if (!path.empty()) return path;
    return "array " + std::to_string(width) + "x" + std::to_string(height) + " " +
           text_digest(std::string(pixels.begin(), pixels.end()));
}

namespace batch {

namespace {

struct MaskImage {
    std::string name;  // for errors
    int width = 0, height = 0;
    std::vector<std::uint8_t> on;  // [height, width], 1 = foreground
};

MaskImage mask_image(const ForegroundMask& m, const std::string& input) {
    if (m.path.empty()) return {"pca_mask", m.width, m.height, m.pixels};
    std::string file = m.path;
    if (std::filesystem::is_directory(m.path)) {
        file = (std::filesystem::path(m.path) / std::filesystem::path(input).stem()).string() + ".png";
        if (!std::filesystem::exists(file))
            throw UsageError("--pca-mask: no mask " + file + " for " + input);
    } else if (!std::filesystem::exists(file)) {
        throw UsageError("--pca-mask: " + file + " does not exist");
    }
    const Image image = decode_image(file);
    MaskImage out{file, image.width, image.height, std::vector<std::uint8_t>(static_cast<std::size_t>(image.width) * image.height)};
    for (std::size_t p = 0; p < out.on.size(); ++p)
        out.on[p] = image.rgb[p * 3] || image.rgb[p * 3 + 1] || image.rgb[p * 3 + 2];
    return out;
}

}  // namespace

std::vector<std::uint8_t> foreground_cells(const ForegroundMask& m, const std::string& input, const Geometry& g,
                                           int grid_h, int grid_w) {
    MaskImage mask = mask_image(m, input);
    const auto sized = [&](int w, int h) { return mask.width == w && mask.height == h; };
    std::vector<std::uint8_t> cells(static_cast<std::size_t>(grid_h) * grid_w, 0);
    if (sized(grid_w, grid_h)) {
        for (std::size_t p = 0; p < cells.size(); ++p) cells[p] = mask.on[p] ? 1 : 0;
    } else if (sized(g.width, g.height) || sized(g.source_width, g.source_height)) {
        // Each model-input pixel's mask value (through the resize and crop for a source-sized
        // mask: the nearest source pixel), counted in the cell it falls in.
        const bool source = !sized(g.width, g.height);
        const auto axis = [&](int at, int crop, int resized, int extent) {
            if (!source) return at;
            const double s = (at + crop + 0.5) * extent / resized;
            return std::clamp(static_cast<int>(s), 0, extent - 1);
        };
        std::vector<int> foreground(cells.size(), 0), pixels(cells.size(), 0);
        for (int y = 0; y < g.height; ++y) {
            const int my = axis(y, g.crop_top, g.resized_height, g.source_height);
            const std::size_t row = static_cast<std::size_t>(static_cast<long long>(y) * grid_h / g.height) * grid_w;
            for (int x = 0; x < g.width; ++x) {
                const std::size_t cell = row + static_cast<std::size_t>(static_cast<long long>(x) * grid_w / g.width);
                ++pixels[cell];
                foreground[cell] += mask.on[static_cast<std::size_t>(my) * mask.width + axis(x, g.crop_left, g.resized_width, g.source_width)];
            }
        }
        for (std::size_t p = 0; p < cells.size(); ++p) cells[p] = 2 * foreground[p] >= pixels[p] ? 1 : 0;
    } else {
        throw UsageError("--pca-mask: " + mask.name + " is " + std::to_string(mask.width) + "x" + std::to_string(mask.height) +
                         ", not the size of " + input + " (" + std::to_string(g.source_width) + "x" +
                         std::to_string(g.source_height) + "), of its model input (" + std::to_string(g.width) + "x" +
                         std::to_string(g.height) + ") or of its grid (" + std::to_string(grid_w) + "x" +
                         std::to_string(grid_h) + ")");
    }
    if (std::count(cells.begin(), cells.end(), 1) < 3)
        throw UsageError("--pca-mask: " + mask.name + " leaves fewer than 3 foreground patches on the " +
                         std::to_string(grid_w) + "x" + std::to_string(grid_h) + " grid of " + input +
                         " (a patch is foreground when at least half its pixels are)");
    return cells;
}

}  // namespace batch
}  // namespace vitreg
