#pragma once
// The folder layouts `vitreg eval` reads (docs/design.md, "Repairs and dense evaluation"): a
// segmentation folder in the VOC layout and a labelled folder of class subfolders. Each reader
// refuses a folder that does not fit, naming the file that broke it.
#include <cstdint>
#include <string>
#include <vector>

#include "vitreg/preprocess.hpp"

namespace vitreg {

// The label VOC marks pixels to ignore with (object borders, unlabelled).
constexpr int kIgnoreLabel = 255;

struct SegmentationSample {
    std::string image, mask;
};

// Every image of `images` (sorted by name) with its mask `masks/<stem>.png`; throws UsageError
// naming the image whose mask is missing, or when there are fewer than two images.
std::vector<SegmentationSample> read_segmentation_folder(const std::string& images, const std::string& masks);

// A label mask: palette PNGs give their palette indices (VOC's SegmentationClass), greyscale
// ones their grey levels. Throws UsageError naming the file for any other kind or for a colour
// its palette does not hold.
struct LabelMask {
    int width = 0, height = 0;
    std::vector<std::uint8_t> labels;  // [height, width]
};
LabelMask read_label_mask(const std::string& path);

// The majority label of each patch of the model's input, the mask sampled at the source pixel
// nearest each input pixel; kIgnoreLabel pixels do not vote, a patch with none left is -1.
std::vector<int> patch_majority_labels(const LabelMask& mask, const Geometry& geometry, int patch, int grid_h, int grid_w);

struct ClassFolders {
    std::vector<std::string> classes;  // subfolder names, sorted
    std::vector<std::string> images;   // sorted by class, then name
    std::vector<int> labels;           // index into classes, per image
};

// Every subfolder of `dir` is a class; its images are its samples. Throws UsageError naming the
// file or folder for a file beside the class folders, a class folder with fewer than two images
// (leave-one-out needs another) or fewer than two classes.
ClassFolders read_class_folders(const std::string& dir);

}  // namespace vitreg
