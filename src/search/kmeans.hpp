#pragma once
// k-means and nearest-centroid assignment as Eigen matrix products over row blocks run on
// oneTBB: the heavy arithmetic of an IVF build, done here rather than in Debian's FAISS (built
// for generic x86-64, calling the reference BLAS). docs/retrieval.md "Memory and time at scale".
#include <cstdint>
#include <vector>

namespace vitreg {

// Inner product: the nearest centroid has the largest x·c and centroids are kept unit-length
// (spherical k-means: cosine on normalized vectors). L2: the smallest ‖x − c‖², means unscaled.
enum class KMeansMetric { InnerProduct, L2 };

// `rows` rows of `dim` floats, row i at data + i·stride (stride ≥ dim: a column slice of a wider
// matrix, as a PQ sub-quantizer's sub-vectors are).
struct RowsView {
    const float* data;
    std::int64_t rows;
    int dim;
    std::int64_t stride;
};

// out[i]: the index of row i's nearest of the k centroids (k × dim, contiguous).
void nearest_centroids(const RowsView& x, const float* centroids, std::int64_t k, KMeansMetric metric, std::int64_t* out);

// Lloyd's k-means with FAISS's Clustering conventions: k distinct rows drawn with `seed` as the
// start, `iterations` rounds of assignment and update, an empty cluster refilled by splitting the
// largest. Returns k × dim centroids. UsageError when rows < k.
std::vector<float> kmeans(const RowsView& x, std::int64_t k, KMeansMetric metric, std::uint64_t seed, int iterations = 25);

}  // namespace vitreg
