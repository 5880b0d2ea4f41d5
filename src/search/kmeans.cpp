// Lloyd's k-means after FAISS's Clustering (facebookresearch/faiss, Clustering.cpp): start from k
// distinct rows drawn at random, alternate assignment (search/nearest_centroid.cpp) and means,
// split the largest cluster into an empty one, and keep centroids unit-length for the inner product.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tbb/parallel_for.h>

#include "search/kmeans.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

constexpr float kSplitEps = 1.0f / 1024;  // FAISS's perturbation of a split centroid

void normalize(float* v, int dim) {
    double sum = 0;
    for (int j = 0; j < dim; ++j) sum += static_cast<double>(v[j]) * v[j];
    if (sum <= 0 || !std::isfinite(sum)) return;
    const auto scale = static_cast<float>(1 / std::sqrt(sum));
    for (int j = 0; j < dim; ++j) v[j] *= scale;
}

// Each cluster's mean (members found through a counting sort, clusters summed in parallel);
// returns the member counts. An empty cluster keeps its centroid, for the split to replace.
std::vector<std::int64_t> update_means(const RowsView& x, const std::vector<std::int64_t>& label, std::int64_t k, float* c) {
    std::vector<std::int64_t> count(static_cast<std::size_t>(k), 0), offset(static_cast<std::size_t>(k) + 1, 0);
    for (const auto l : label) ++count[static_cast<std::size_t>(l)];
    std::partial_sum(count.begin(), count.end(), offset.begin() + 1);
    std::vector<std::int64_t> member(label.size()), next(offset.begin(), offset.end() - 1);
    for (std::size_t i = 0; i < label.size(); ++i) member[static_cast<std::size_t>(next[static_cast<std::size_t>(label[i])]++)] = static_cast<std::int64_t>(i);
    tbb::parallel_for(std::int64_t(0), k, [&](std::int64_t j) {
        const auto u = static_cast<std::size_t>(j);
        if (!count[u]) return;
        std::vector<double> sum(static_cast<std::size_t>(x.dim), 0.0);
        for (auto m = offset[u]; m < offset[u + 1]; ++m) {
            const float* row = x.data + member[static_cast<std::size_t>(m)] * x.stride;
            for (int i = 0; i < x.dim; ++i) sum[static_cast<std::size_t>(i)] += row[i];
        }
        for (int i = 0; i < x.dim; ++i) c[j * x.dim + i] = static_cast<float>(sum[static_cast<std::size_t>(i)] / static_cast<double>(count[u]));
    });
    return count;
}

// FAISS's split_clusters, with the largest cluster (not a random large one) as the donor: the empty
// cluster takes a copy of its centroid, the two are pushed apart by ±kSplitEps, and share its count.
void split_empty(std::vector<std::int64_t>& count, int dim, float* c) {
    const auto k = static_cast<std::int64_t>(count.size());
    for (std::int64_t e = 0; e < k; ++e) {
        if (count[static_cast<std::size_t>(e)]) continue;
        const auto donor = std::max_element(count.begin(), count.end()) - count.begin();
        std::memcpy(c + e * dim, c + donor * dim, sizeof(float) * static_cast<std::size_t>(dim));
        for (int j = 0; j < dim; ++j) {
            const float up = j % 2 == 0 ? 1 + kSplitEps : 1 - kSplitEps;
            c[e * dim + j] *= up;
            c[donor * dim + j] *= 2 - up;
        }
        count[static_cast<std::size_t>(e)] = count[static_cast<std::size_t>(donor)] / 2;
        count[static_cast<std::size_t>(donor)] -= count[static_cast<std::size_t>(e)];
    }
}

}  // namespace

std::vector<float> kmeans(const RowsView& x, std::int64_t k, KMeansMetric metric, std::uint64_t seed, int iterations) {
    if (k < 1 || x.rows < k)
        throw UsageError("k-means: " + std::to_string(x.rows) + " training rows for " + std::to_string(k) +
                         " centroids (at least as many rows as centroids are needed)");
    const int d = x.dim;
    // The start: k distinct rows (a partial Fisher-Yates shuffle, as FAISS takes a random permutation's first k).
    std::mt19937_64 rng(seed);
    std::vector<std::int64_t> order(static_cast<std::size_t>(x.rows));
    std::iota(order.begin(), order.end(), 0);
    std::vector<float> c(static_cast<std::size_t>(k * d));
    for (std::int64_t i = 0; i < k; ++i) {
        const auto j = std::uniform_int_distribution<std::int64_t>(i, x.rows - 1)(rng);
        std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
        std::memcpy(c.data() + i * d, x.data + order[static_cast<std::size_t>(i)] * x.stride, sizeof(float) * static_cast<std::size_t>(d));
    }
    std::vector<std::int64_t> label(static_cast<std::size_t>(x.rows));
    for (int it = 0; it < iterations; ++it) {
        nearest_centroids(x, c.data(), k, metric, label.data());
        auto count = update_means(x, label, k, c.data());
        split_empty(count, d, c.data());
        if (metric == KMeansMetric::InnerProduct)
            for (std::int64_t j = 0; j < k; ++j) normalize(c.data() + j * d, d);
    }
    return c;
}

}  // namespace vitreg
