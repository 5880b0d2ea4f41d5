#include "search/ivf_build.hpp"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <tbb/parallel_for.h>
#include <typeinfo>

#include "search/kmeans.hpp"

namespace vitreg {

namespace {

constexpr std::int64_t kPqTrainRows = 256 * 256;  // FAISS's cap: 256 points for each of 256 centroids

const float* coarse_centroids(const faiss::IndexIVF& ivf) { return dynamic_cast<const faiss::IndexFlat&>(*ivf.quantizer).get_xb(); }

// x − its list's centroid, row by row (FAISS's residual), or x itself when not by residual.
std::vector<float> residuals(const faiss::IndexIVFPQ& ivf, const float* x, std::int64_t n, const std::int64_t* list) {
    const auto d = static_cast<std::size_t>(ivf.d);
    std::vector<float> r(x, x + static_cast<std::size_t>(n) * d);
    if (!ivf.by_residual) return r;
    const float* c = coarse_centroids(ivf);
    tbb::parallel_for(std::int64_t(0), n, [&](std::int64_t i) {
        const float* ci = c + static_cast<std::size_t>(list[i]) * d;
        for (std::size_t j = 0; j < d; ++j) r[static_cast<std::size_t>(i) * d + j] -= ci[j];
    });
    return r;
}

// Each sub-quantizer's 256 centroids: L2 k-means over that slice of up to kPqTrainRows residuals.
void train_pq(faiss::IndexIVFPQ& ivf, const float* x, std::int64_t n, std::uint64_t seed) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
    std::iota(rows.begin(), rows.end(), 0);
    const std::int64_t count = std::min(n, kPqTrainRows);
    std::mt19937_64 rng(seed + 1);
    for (std::int64_t i = 0; i < count; ++i) std::swap(rows[static_cast<std::size_t>(i)], rows[static_cast<std::size_t>(std::uniform_int_distribution<std::int64_t>(i, n - 1)(rng))]);
    const auto d = static_cast<std::size_t>(ivf.d);
    std::vector<float> sample(static_cast<std::size_t>(count) * d);
    for (std::int64_t i = 0; i < count; ++i) std::memcpy(&sample[static_cast<std::size_t>(i) * d], x + rows[static_cast<std::size_t>(i)] * ivf.d, sizeof(float) * d);
    std::vector<std::int64_t> list(static_cast<std::size_t>(count));
    nearest_centroids({sample.data(), count, ivf.d, ivf.d}, coarse_centroids(ivf), static_cast<std::int64_t>(ivf.nlist), KMeansMetric::InnerProduct, list.data());
    const auto r = residuals(ivf, sample.data(), count, list.data());
    auto& pq = ivf.pq;
    for (std::size_t m = 0; m < pq.M; ++m) {
        const RowsView slice{r.data() + m * pq.dsub, count, static_cast<int>(pq.dsub), ivf.d};
        const auto c = kmeans(slice, static_cast<std::int64_t>(pq.ksub), KMeansMetric::L2, seed + 2 + m);
        std::copy(c.begin(), c.end(), pq.get_centroids(m, 0));
    }
    if (!pq.transposed_centroids.empty()) pq.sync_transposed_centroids();
    if (ivf.by_residual) ivf.precompute_table();
}

// Each row's PQ code: one byte per sub-quantizer, its nearest (L2) of the 256 centroids.
std::vector<std::uint8_t> pq_codes(const faiss::IndexIVFPQ& ivf, const float* x, std::int64_t n, const std::int64_t* list) {
    const auto r = residuals(ivf, x, n, list);
    const auto& pq = ivf.pq;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(n) * pq.M);
    std::vector<std::int64_t> nearest(static_cast<std::size_t>(n));
    for (std::size_t m = 0; m < pq.M; ++m) {
        const RowsView slice{r.data() + m * pq.dsub, n, static_cast<int>(pq.dsub), ivf.d};
        nearest_centroids(slice, pq.get_centroids(m, 0), static_cast<std::int64_t>(pq.ksub), KMeansMetric::L2, nearest.data());
        for (std::int64_t i = 0; i < n; ++i) codes[static_cast<std::size_t>(i) * pq.M + m] = static_cast<std::uint8_t>(nearest[static_cast<std::size_t>(i)]);
    }
    return codes;
}

// Rows grouped by list (counting sort), each list's ids and codes appended at once, lists in parallel
// (FAISS's inverted lists allow concurrent appends to different lists).
void append(faiss::IndexIVF& ivf, std::int64_t n, const std::int64_t* list, const std::uint8_t* codes) {
    const auto nlist = static_cast<std::size_t>(ivf.nlist);
    std::vector<std::int64_t> offset(nlist + 1, 0);
    for (std::int64_t i = 0; i < n; ++i) ++offset[static_cast<std::size_t>(list[i]) + 1];
    std::partial_sum(offset.begin(), offset.end(), offset.begin());
    std::vector<std::int64_t> member(static_cast<std::size_t>(n)), next(offset.begin(), offset.end() - 1);
    for (std::int64_t i = 0; i < n; ++i) member[static_cast<std::size_t>(next[static_cast<std::size_t>(list[i])]++)] = i;
    const std::size_t size = ivf.code_size;
    const auto first = static_cast<faiss::Index::idx_t>(ivf.ntotal);
    tbb::parallel_for(std::size_t(0), nlist, [&](std::size_t l) {
        const auto begin = offset[l], count = offset[l + 1] - begin;
        if (!count) return;
        std::vector<faiss::Index::idx_t> ids(static_cast<std::size_t>(count));
        std::vector<std::uint8_t> block(static_cast<std::size_t>(count) * size);
        for (std::int64_t j = 0; j < count; ++j) {
            const auto row = member[static_cast<std::size_t>(begin + j)];
            ids[static_cast<std::size_t>(j)] = first + row;
            std::memcpy(&block[static_cast<std::size_t>(j) * size], codes + static_cast<std::size_t>(row) * size, size);
        }
        ivf.invlists->add_entries(l, static_cast<std::size_t>(count), ids.data(), block.data());
    });
    ivf.ntotal += n;
}

}  // namespace

bool own_ivf_build(const faiss::Index& index) {
    const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(&index);
    if (!ivf || ivf->metric_type != faiss::METRIC_INNER_PRODUCT || !ivf->direct_map.no() || !ivf->invlists) return false;
    const auto* quantizer = ivf->quantizer;
    // FAISS's factory makes the quantizer an IndexFlat of the index's metric.
    if (!quantizer || quantizer->metric_type != faiss::METRIC_INNER_PRODUCT ||
        (typeid(*quantizer) != typeid(faiss::IndexFlat) && typeid(*quantizer) != typeid(faiss::IndexFlatIP)))
        return false;
    if (typeid(index) == typeid(faiss::IndexIVFFlat)) return true;
    const auto* pq = dynamic_cast<const faiss::IndexIVFPQ*>(&index);
    return typeid(index) == typeid(faiss::IndexIVFPQ) && pq->pq.nbits == 8 && pq->code_size == pq->pq.M;
}

void train_ivf(faiss::Index& index, const float* x, std::int64_t n, std::uint64_t seed) {
    auto& ivf = dynamic_cast<faiss::IndexIVF&>(index);
    const auto centroids = kmeans({x, n, ivf.d, ivf.d}, static_cast<std::int64_t>(ivf.nlist), KMeansMetric::InnerProduct, seed);
    ivf.quantizer->reset();
    ivf.quantizer->add(static_cast<faiss::Index::idx_t>(ivf.nlist), centroids.data());
    if (auto* ivfpq = dynamic_cast<faiss::IndexIVFPQ*>(&index)) train_pq(*ivfpq, x, n, seed);
    ivf.is_trained = true;
}

void add_ivf(faiss::Index& index, const float* x, std::int64_t n) {
    auto& ivf = dynamic_cast<faiss::IndexIVF&>(index);
    std::vector<std::int64_t> list(static_cast<std::size_t>(n));
    nearest_centroids({x, n, ivf.d, ivf.d}, coarse_centroids(ivf), static_cast<std::int64_t>(ivf.nlist), KMeansMetric::InnerProduct, list.data());
    if (const auto* ivfpq = dynamic_cast<const faiss::IndexIVFPQ*>(&index)) {
        append(ivf, n, list.data(), pq_codes(*ivfpq, x, n, list.data()).data());
    } else {
        append(ivf, n, list.data(), reinterpret_cast<const std::uint8_t*>(x));  // IVF-Flat's code is the row's floats
    }
}

}  // namespace vitreg
