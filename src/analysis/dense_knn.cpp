#include "vitreg/analysis/dense_knn.hpp"

#include <numeric>
#include <string>

#include "vitreg/error.hpp"

namespace vitreg {

std::vector<std::size_t> memory_sample(std::size_t n, std::size_t take, std::uint64_t& state) {
    std::vector<std::size_t> index(n);
    std::iota(index.begin(), index.end(), std::size_t{0});
    if (take >= n) return index;
    for (std::size_t j = 0; j < take; ++j) {
        state += 0x9E3779B97F4A7C15ull;  // splitmix64
        std::uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        std::swap(index[j], index[j + static_cast<std::size_t>(z % (n - j))]);
    }
    index.resize(take);
    return index;
}

DenseKnnResult dense_knn_segmentation(const std::vector<LabelledPatches>& train, const std::vector<LabelledPatches>& test, int dim,
                                      int classes, const DenseKnnOptions& options) {
    std::size_t planned = 0;
    for (const auto& s : train) planned += std::min<std::size_t>(s.labels.size(), static_cast<std::size_t>(options.memory_per_image));
    if (planned > options.max_memory)
        throw UsageError("dense k-NN: the memory would hold " + std::to_string(planned) + " patches, over its bound of " +
                         std::to_string(options.max_memory) + " (fewer patches per image, or fewer training images)");
    std::vector<float> memory;
    std::vector<int> memory_labels;
    std::uint64_t state = options.seed;
    for (const auto& s : train) {
        if (s.features.size() != s.labels.size() * static_cast<std::size_t>(dim))
            throw UsageError("dense k-NN: features and labels disagree in size");
        std::vector<std::size_t> labelled;
        for (std::size_t p = 0; p < s.labels.size(); ++p)
            if (s.labels[p] >= 0 && s.labels[p] < classes) labelled.push_back(p);
        for (std::size_t pick : memory_sample(labelled.size(), static_cast<std::size_t>(options.memory_per_image), state)) {
            const std::size_t p = labelled[pick];
            memory.insert(memory.end(), s.features.begin() + static_cast<std::ptrdiff_t>(p * dim),
                          s.features.begin() + static_cast<std::ptrdiff_t>((p + 1) * dim));
            memory_labels.push_back(s.labels[p]);
        }
    }
    std::vector<float> queries;
    std::vector<int> truth;
    for (const auto& s : test)
        for (std::size_t p = 0; p < s.labels.size(); ++p)
            if (s.labels[p] >= 0 && s.labels[p] < classes) {
                queries.insert(queries.end(), s.features.begin() + static_cast<std::ptrdiff_t>(p * dim),
                               s.features.begin() + static_cast<std::ptrdiff_t>((p + 1) * dim));
                truth.push_back(s.labels[p]);
            }
    if (truth.empty()) throw UsageError("dense k-NN: no labelled test patch");
    DenseKnnResult r;
    r.memory = memory_labels.size();
    r.test_patches = static_cast<int>(truth.size());
    r.predicted = knn_predict(queries, memory, memory_labels, dim, classes, options.vote);
    r.scores = iou_scores(truth, r.predicted, classes);
    return r;
}

}  // namespace vitreg
