// The fuzz targets of what `vitreg eval` reads: pair geometry (homographies, disparity maps) and
// the dataset folders (targets.hpp).
#include <cstdlib>
#include <string>

#include "fuzz_files.hpp"
#include "targets.hpp"
#include "vitreg/analysis/correspondence.hpp"
#include "vitreg/analysis/eval_data.hpp"
#include "vitreg/error.hpp"

namespace vitreg::fuzz {

namespace {

// A geometry that was read maps points without faults: its own corners, centre and outside.
void map_points(const PairGeometry& g) {
    if (g.kind == PairGeometry::Kind::Disparity && (g.width <= 0 || g.height <= 0 ||
                                                    g.disparity.size() != static_cast<std::size_t>(g.width) * g.height))
        std::abort();  // the map's size and its values disagree
    for (const double x : {-1.0, 0.0, 0.5 * g.width, g.width - 1.0, 1e9})
        for (const double y : {-1.0, 0.0, 0.5 * g.height, g.height - 1.0, 1e9}) {
            double x2 = 0, y2 = 0;
            (void)g.map(x, y, x2, y2);
        }
}

void read_geometry(const std::string& path, const std::uint8_t* data, std::size_t size) {
    put(path, data, size);
    try {
        map_points(read_pair_geometry(path));
    } catch (const Error&) {
    }
}

}  // namespace

void homography_file(const std::uint8_t* data, std::size_t size) {
    read_geometry(scratch() + "/h.xml", data, size);
    read_geometry(scratch() + "/h.txt", data, size);
}

void disparity_file(const std::uint8_t* data, std::size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    if (bytes.compare(0, 2, "PK") == 0) {
        read_geometry(scratch() + "/disp.npz", data, size);
    } else if (bytes.compare(0, 6, "\x93NUMPY") == 0) {
        const std::string archive = zip_archive({{"disp.npy", bytes}});
        read_geometry(scratch() + "/disp.npz", reinterpret_cast<const std::uint8_t*>(archive.data()), archive.size());
    } else {
        read_geometry(scratch() + "/disp.png", data, size);
    }
}

void segmentation_folder(const std::uint8_t* data, std::size_t size) {
    const std::string root = scratch() + "/voc";
    make_tree(root, data, size);
    try {
        for (const SegmentationSample& s : read_segmentation_folder(root + "/images", root + "/masks")) {
            try {
                const LabelMask mask = read_label_mask(s.mask);
                if (mask.labels.size() != static_cast<std::size_t>(mask.width) * mask.height) std::abort();
                Geometry g;
                g.source_width = mask.width;
                g.source_height = mask.height;
                g.resized_width = g.resized_height = g.width = g.height = 28;
                for (const int label : patch_majority_labels(mask, g, 14, 2, 2))
                    if (label < -1 || label > 255 || label == kIgnoreLabel) std::abort();
            } catch (const Error&) {
            }
        }
    } catch (const Error&) {
    }
}

void class_folders(const std::uint8_t* data, std::size_t size) {
    const std::string root = scratch() + "/classes";
    make_tree(root, data, size);
    try {
        const ClassFolders c = read_class_folders(root);
        if (c.images.size() != c.labels.size() || c.classes.size() < 2) std::abort();
        for (const int label : c.labels)
            if (label < 0 || static_cast<std::size_t>(label) >= c.classes.size()) std::abort();
    } catch (const Error&) {
    }
}

}  // namespace vitreg::fuzz
