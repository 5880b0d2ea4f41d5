#pragma once
// Dense correspondence between two views with known geometry (docs/design.md, "Repairs and dense
// evaluation"): mutual nearest neighbours by cosine between the patch features of the two views,
// each match scored by how far its patch lies from where the true geometry maps the first patch.
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "vitreg/features.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg {

// Where a point of the first view lies in the second, in pixel coordinates (pixel centres at
// integers, as OpenCV and Middlebury state them).
struct PairGeometry {
    enum class Kind { Homography, Disparity };
    Kind kind = Kind::Homography;
    std::array<double, 9> homography{};  // row-major; (x, y, 1) of view 1 to view 2
    int width = 0, height = 0;           // the disparity map's size (the first view's)
    std::vector<float> disparity;        // [height, width]: x2 = x1 - d, y2 = y1; 0 or not finite: unknown
    std::string source;                  // the file it came from

    // The true location in view 2 of (x, y) in view 1; false where the map does not know it.
    bool map(double x, double y, double& x2, double& y2) const;
};

// Reads OpenCV's FileStorage XML (the first matrix: rows 3, cols 3, data), a text file of 9
// numbers, a disparity PNG (grey levels are disparities in pixels, 0 unknown) or an .npz holding
// one float disparity array (skimage's motorcycle_disp.npz; inf unknown). Throws UsageError
// naming the file and the fault (a matrix that is not 3×3, a singular one, an unreadable map).
PairGeometry read_pair_geometry(const std::string& path);

// The pairs (i, j) where patch j of `b` is the nearest by cosine of patch i of `a` and i the
// nearest of j; features [n, dim] row-major.
std::vector<std::pair<int, int>> mutual_nearest_neighbours(const std::vector<float>& a, const std::vector<float>& b, int dim);

// The centre of patch `p` of a grid `grid_w` wide, in the source image's pixel coordinates.
std::pair<double, double> patch_centre(const Geometry& geometry, int patch, int grid_w, int p);

struct CorrespondenceMatch {
    double x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // the two patch centres (source pixels)
    double error = -1;                      // distance from the true location in view 2; -1: unknown or outside view 2
    double cosine = 0;
};

struct CorrespondenceScore {
    std::vector<double> alphas, pck;  // PCK@α: share of scored matches with error ≤ α·max(H2, W2)
    int matches = 0;                   // mutual nearest neighbours
    int scored = 0;                    // of which the truth is known and lies inside view 2
    double threshold_side = 0;         // max(H2, W2) in pixels
    std::vector<CorrespondenceMatch> list;
};

// Scores the mutual nearest neighbours of two views' final-normed patch features (`a`, `b` with
// the geometry of each input) against `truth`.
CorrespondenceScore score_correspondence(const Features& a, const Geometry& ga, const Features& b, const Geometry& gb,
                                         int patch, const PairGeometry& truth, const std::vector<double>& alphas);

}  // namespace vitreg
