#include "vitreg/analysis/eval_data.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "vitreg/error.hpp"
#include "vitreg/image.hpp"
#include "vitreg/inputs.hpp"

namespace vitreg {

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> sorted_entries(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw UsageError(dir + ": not a folder");
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
    if (ec) throw UsageError(dir + ": " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
}

std::uint32_t big_endian(const unsigned char* p) {
    return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 | static_cast<std::uint32_t>(p[2]) << 8 | p[3];
}

// A PNG's palette (PLTE, RGB triples), empty when the file is no palette PNG.
std::vector<std::uint8_t> png_palette(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
    if (bytes.size() < 33 || bytes.compare(1, 3, "PNG") != 0 || b[25] != 3) return {};
    for (std::size_t at = 8; at + 12 <= bytes.size();) {
        const std::uint32_t length = big_endian(b + at);
        if (length > bytes.size() - at - 12) break;
        if (bytes.compare(at + 4, 4, "PLTE") == 0) return std::vector<std::uint8_t>(b + at + 8, b + at + 8 + length);
        at += 12 + length;
    }
    throw UsageError(path + ": a palette PNG without a readable palette");
}

}  // namespace

std::vector<SegmentationSample> read_segmentation_folder(const std::string& images, const std::string& masks) {
    std::vector<SegmentationSample> out;
    std::error_code ec;
    if (!fs::is_directory(masks, ec)) throw UsageError(masks + ": not a folder");
    for (const fs::path& p : sorted_entries(images)) {
        if (!fs::is_regular_file(p) || !has_image_extension(p.string())) continue;
        const fs::path mask = fs::path(masks) / (p.stem().string() + ".png");
        if (!fs::is_regular_file(mask)) throw UsageError(mask.string() + ": missing, the mask of " + p.string());
        out.push_back({p.string(), mask.string()});
    }
    if (out.size() < 2) throw UsageError(images + ": needs at least two images with masks (one to learn from, one to score)");
    return out;
}

LabelMask read_label_mask(const std::string& path) {
    const Image im = decode_image(path);
    LabelMask m;
    m.width = im.width;
    m.height = im.height;
    m.labels.resize(static_cast<std::size_t>(im.width) * im.height);
    if (im.mode == "L" || im.mode == "1") {  // a 1-bit mask decodes to 0 / 255: its labels are 0 / 1
        for (std::size_t p = 0; p < m.labels.size(); ++p) m.labels[p] = im.mode == "1" ? im.rgb[3 * p] > 0 : im.rgb[3 * p];
        return m;
    }
    if (im.mode != "P") throw UsageError(path + ": a label mask must be a palette or greyscale PNG, this one is " + im.mode);
    const std::vector<std::uint8_t> palette = png_palette(path);
    std::map<std::uint32_t, std::uint8_t> index;  // the first entry of each colour
    for (std::size_t k = palette.size() / 3; k-- > 0;)
        index[static_cast<std::uint32_t>(palette[3 * k]) << 16 | palette[3 * k + 1] << 8 | palette[3 * k + 2]] = static_cast<std::uint8_t>(k);
    for (std::size_t p = 0; p < m.labels.size(); ++p) {
        const auto it = index.find(static_cast<std::uint32_t>(im.rgb[3 * p]) << 16 | im.rgb[3 * p + 1] << 8 | im.rgb[3 * p + 2]);
        if (it == index.end()) throw UsageError(path + ": a pixel's colour is not in the palette");
        m.labels[p] = it->second;
    }
    return m;
}

std::vector<int> patch_majority_labels(const LabelMask& mask, const Geometry& g, int patch, int grid_h, int grid_w) {
    if (mask.width != g.source_width || mask.height != g.source_height)
        throw UsageError("the mask is " + std::to_string(mask.width) + "x" + std::to_string(mask.height) + ", its image " +
                         std::to_string(g.source_width) + "x" + std::to_string(g.source_height));
    auto source = [](int input, int crop, int resized, int side) {
        return std::min(side - 1, static_cast<int>((input + crop + 0.5) * side / resized));
    };
    std::vector<int> out(static_cast<std::size_t>(grid_h) * grid_w, -1);
    for (int r = 0; r < grid_h; ++r)
        for (int c = 0; c < grid_w; ++c) {
            int count[256] = {};
            for (int y = r * patch; y < (r + 1) * patch; ++y) {
                const int sy = source(y, g.crop_top, g.resized_height, g.source_height);
                for (int x = c * patch; x < (c + 1) * patch; ++x)
                    ++count[mask.labels[static_cast<std::size_t>(sy) * mask.width + source(x, g.crop_left, g.resized_width, g.source_width)]];
            }
            count[kIgnoreLabel] = 0;
            const int best = static_cast<int>(std::max_element(count, count + 256) - count);
            if (count[best] > 0) out[static_cast<std::size_t>(r) * grid_w + c] = best;
        }
    return out;
}

ClassFolders read_class_folders(const std::string& dir) {
    ClassFolders out;
    for (const fs::path& p : sorted_entries(dir)) {
        if (!fs::is_directory(p)) throw UsageError(p.string() + ": a file beside the class folders (each class is a subfolder of " + dir + ")");
        std::vector<std::string> images;
        for (const fs::path& f : sorted_entries(p.string()))
            if (fs::is_regular_file(f) && has_image_extension(f.string())) images.push_back(f.string());
        if (images.size() < 2)
            throw UsageError(p.string() + ": a class folder needs at least two images (leave-one-out), it has " + std::to_string(images.size()));
        for (const auto& f : images) {
            out.images.push_back(f);
            out.labels.push_back(static_cast<int>(out.classes.size()));
        }
        out.classes.push_back(p.filename().string());
    }
    if (out.classes.size() < 2) throw UsageError(dir + ": needs at least two class folders");
    return out;
}

}  // namespace vitreg
