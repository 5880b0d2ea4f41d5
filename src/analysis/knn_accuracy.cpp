#include "vitreg/analysis/knn_accuracy.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Matrix unit_rows(const std::vector<float>& x, int dim) {
    Matrix m = Eigen::Map<const Matrix>(x.data(), static_cast<Eigen::Index>(x.size() / dim), dim);
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
        const float n = m.row(i).norm();
        if (n > 0) m.row(i) /= n;
    }
    return m;
}

}  // namespace

std::vector<int> knn_predict(const std::vector<float>& queries, const std::vector<float>& memory, const std::vector<int>& memory_labels,
                             int dim, int classes, const KnnVote& vote, bool leave_one_out) {
    if (dim <= 0 || queries.size() % dim || memory.size() != memory_labels.size() * dim)
        throw UsageError("k-NN: features and labels disagree in size");
    if (memory_labels.size() < (leave_one_out ? 2u : 1u)) throw UsageError("k-NN: the memory holds no labelled sample");
    const Matrix q = unit_rows(queries, dim), m = unit_rows(memory, dim);
    const int k = std::min<int>(vote.k, static_cast<int>(m.rows()) - (leave_one_out ? 1 : 0));
    std::vector<int> out(static_cast<std::size_t>(q.rows()));
    std::vector<int> order(static_cast<std::size_t>(m.rows()));
    std::vector<double> votes(classes);
    constexpr Eigen::Index block = 256;  // query rows per similarity block: bounded memory
    for (Eigen::Index start = 0; start < q.rows(); start += block) {
        const Eigen::Index rows = std::min(block, q.rows() - start);
        const Matrix sim = q.middleRows(start, rows) * m.transpose();
        for (Eigen::Index r = 0; r < rows; ++r) {
            const Eigen::Index i = start + r;
            order.resize(static_cast<std::size_t>(m.rows()));
            std::iota(order.begin(), order.end(), 0);
            if (leave_one_out) order.erase(order.begin() + i);
            std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int x, int y) {
                return sim(r, x) != sim(r, y) ? sim(r, x) > sim(r, y) : x < y;
            });
            std::fill(votes.begin(), votes.end(), 0.0);
            const double top = sim(r, order[0]);
            for (int n = 0; n < k; ++n) {
                const int label = memory_labels[static_cast<std::size_t>(order[n])];
                if (label >= 0 && label < classes) votes[label] += std::exp((sim(r, order[n]) - top) / vote.temperature);
            }
            out[static_cast<std::size_t>(i)] = static_cast<int>(std::max_element(votes.begin(), votes.end()) - votes.begin());
        }
    }
    return out;
}

KnnAccuracy knn_accuracy(const std::vector<float>& features, const std::vector<int>& labels, int dim, int classes, const KnnVote& vote) {
    KnnAccuracy r;
    r.predicted = knn_predict(features, features, labels, dim, classes, vote, true);
    std::vector<double> right(classes, 0), count(classes, 0);
    for (std::size_t i = 0; i < labels.size(); ++i) {
        count[labels[i]] += 1;
        right[labels[i]] += r.predicted[i] == labels[i];
    }
    r.accuracy = std::accumulate(right.begin(), right.end(), 0.0) / static_cast<double>(labels.size());
    for (int c = 0; c < classes; ++c) r.class_accuracy.push_back(count[c] > 0 ? right[c] / count[c] : std::nan(""));
    return r;
}

}  // namespace vitreg
