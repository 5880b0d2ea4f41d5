// Each row's nearest centroid: a block of rows times the centroids' transpose (one Eigen GEMM per
// block, the blocks spread over oneTBB's threads), then the best column of each row.
#include <Eigen/Core>
#include <algorithm>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "search/kmeans.hpp"

namespace vitreg {

void nearest_centroids(const RowsView& x, const float* centroids, std::int64_t k, KMeansMetric metric, std::int64_t* out) {
    using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using Rows = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
    const Eigen::Map<const RowMatrix> c(centroids, k, x.dim);
    // argmin ‖x − c‖² = argmax x·c − ‖c‖²/2: both metrics are one product plus a per-centroid bias.
    Eigen::RowVectorXf bias = Eigen::RowVectorXf::Zero(k);
    if (metric == KMeansMetric::L2) bias = -0.5f * c.rowwise().squaredNorm().transpose();
    // Blocks of up to 1024 rows whose scores stay within 16 MB.
    const std::int64_t block = std::clamp<std::int64_t>((4 << 20) / std::max<std::int64_t>(k, 1), 16, 1024);
    const std::int64_t blocks = (x.rows + block - 1) / block;
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, blocks), [&](const tbb::blocked_range<std::int64_t>& range) {
        RowMatrix scores;
        for (std::int64_t b = range.begin(); b < range.end(); ++b) {
            const std::int64_t start = b * block, count = std::min(block, x.rows - start);
            const Rows rows(x.data + start * x.stride, count, x.dim, Eigen::OuterStride<>(x.stride));
            scores.noalias() = rows * c.transpose();
            scores.rowwise() += bias;
            for (std::int64_t i = 0; i < count; ++i) {
                Eigen::Index best = 0;
                scores.row(i).maxCoeff(&best);
                out[start + i] = static_cast<std::int64_t>(best);
            }
        }
    });
}

}  // namespace vitreg
