#include "search/exact_search.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>

namespace vitreg {

namespace {
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
struct Worse {  // a min-heap on score: the worst of the k kept is on top
    bool operator()(const SearchHit& a, const SearchHit& b) const { return a.score > b.score || (a.score == b.score && a.id < b.id); }
};
}  // namespace

void normalize_rows(float* data, std::int64_t rows, int dim) {
    for (std::int64_t r = 0; r < rows; ++r) {
        float* v = data + r * dim;
        double sum = 0;
        for (int i = 0; i < dim; ++i) sum += static_cast<double>(v[i]) * v[i];
        if (sum <= 0 || !std::isfinite(sum)) continue;
        const float scale = static_cast<float>(1 / std::sqrt(sum));
        for (int i = 0; i < dim; ++i) v[i] *= scale;
    }
}

std::vector<std::vector<SearchHit>> exact_search(const float* data, std::int64_t n, int d, const float* queries, std::int64_t nq,
                                                 int k) {
    const Eigen::Map<const RowMatrix> q(queries, nq, d);
    std::vector<std::priority_queue<SearchHit, std::vector<SearchHit>, Worse>> best(static_cast<std::size_t>(nq));
    const std::int64_t block = std::max<std::int64_t>(1, std::min<std::int64_t>(4096, (64 << 20) / (4 * d)));
    RowMatrix rows, scores;
    for (std::int64_t start = 0; start < n; start += block) {
        const std::int64_t count = std::min(block, n - start);
        rows.resize(count, d);
        std::memcpy(rows.data(), data + start * d, sizeof(float) * count * d);
        normalize_rows(rows.data(), count, d);
        scores.noalias() = q * rows.transpose();  // [nq, count]
        for (std::int64_t i = 0; i < nq; ++i)
            for (std::int64_t j = 0; j < count; ++j) {
                auto& heap = best[static_cast<std::size_t>(i)];
                const SearchHit hit{start + j, scores(i, j)};
                if (static_cast<int>(heap.size()) < k) heap.push(hit);
                else if (Worse()(hit, heap.top())) {
                    heap.pop();
                    heap.push(hit);
                }
            }
    }
    std::vector<std::vector<SearchHit>> out(static_cast<std::size_t>(nq));
    for (std::size_t i = 0; i < out.size(); ++i) {
        for (; !best[i].empty(); best[i].pop()) out[i].push_back(best[i].top());
        std::reverse(out[i].begin(), out[i].end());
    }
    return out;
}

}  // namespace vitreg
