#pragma once
// Dense k-NN segmentation as Hummingbird evaluates it (open-hummingbird-eval; docs/design.md,
// "Repairs and dense evaluation"): a memory of labelled training patches, each test patch
// labelled by the similarity-weighted vote of its k nearest memory patches by cosine.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vitreg/analysis/iou.hpp"
#include "vitreg/analysis/knn_accuracy.hpp"
#include "vitreg/analysis/linear_probe.hpp"

namespace vitreg {

struct DenseKnnOptions {
    KnnVote vote{30, 0.02};            // k = 30; votes exp(cos / 0.02), Hummingbird's softmax temperature
    int memory_per_image = 100;        // labelled patches drawn from each training image (all when it has fewer)
    std::size_t max_memory = 1u << 20;  // the memory's bound: more is refused before anything runs
    std::uint64_t seed = 0;            // the draw (splitmix64, see memory_sample)
};

// The indices of `take` of `n` items drawn without replacement: a partial Fisher-Yates shuffle of
// 0..n-1 whose j-th swap partner is j + splitmix64() mod (n - j), from the generator's `state`
// (advanced). All n, in order, when take >= n.
std::vector<std::size_t> memory_sample(std::size_t n, std::size_t take, std::uint64_t& state);

struct DenseKnnResult {
    IouScores scores;              // over the test patches
    std::vector<int> predicted;    // per test patch with a label, in order
    std::size_t memory = 0;        // patches in the memory
    int test_patches = 0;
};

// Builds the memory from `train` (the seeded draw runs through the images in order, over each
// one's labelled patches) and labels every labelled patch of `test`.
DenseKnnResult dense_knn_segmentation(const std::vector<LabelledPatches>& train, const std::vector<LabelledPatches>& test, int dim,
                                      int classes, const DenseKnnOptions& options);

}  // namespace vitreg
