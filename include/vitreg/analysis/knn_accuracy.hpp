#pragma once
// k-nearest-neighbour classification by cosine (docs/design.md, "Repairs and dense evaluation"):
// the vote both dense k-NN segmentation and image k-NN accuracy use, and leave-one-out accuracy
// over a labelled set of image features.
#include <cstddef>
#include <vector>

namespace vitreg {

struct KnnVote {
    int k = 20;               // neighbours (fewer when the memory holds fewer)
    double temperature = 0.07;  // each neighbour votes exp(cos / temperature) for its label
};

// For each query row [queries, dim], the label with the largest summed vote of its k nearest
// memory rows [memory, dim] by cosine (ties: the nearer first, then the lower index; the labels'
// tie: the lower label). leave_one_out: query i never sees memory row i (the same set).
std::vector<int> knn_predict(const std::vector<float>& queries, const std::vector<float>& memory, const std::vector<int>& memory_labels,
                             int dim, int classes, const KnnVote& vote, bool leave_one_out = false);

struct KnnAccuracy {
    double accuracy = 0;
    std::vector<int> predicted;  // per sample
    std::vector<double> class_accuracy;  // per class: the share of its samples predicted right
};

// Leave-one-out accuracy of `features` [samples, dim] with labels in [0, classes).
KnnAccuracy knn_accuracy(const std::vector<float>& features, const std::vector<int>& labels, int dim, int classes, const KnnVote& vote);

}  // namespace vitreg
