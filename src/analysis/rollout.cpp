#include "vitreg/analysis/rollout.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <numeric>

#include "vitreg/error.hpp"

namespace vitreg {

HeadFusion parse_head_fusion(const std::string& s) {
    if (s == "mean") return HeadFusion::Mean;
    if (s == "max") return HeadFusion::Max;
    if (s == "min") return HeadFusion::Min;
    throw UsageError("unknown head fusion '" + s + "' (expected mean, max or min)");
}

std::string to_string(HeadFusion f) {
    switch (f) {
        case HeadFusion::Mean: return "mean";
        case HeadFusion::Max: return "max";
        case HeadFusion::Min: return "min";
    }
    return "?";
}

std::vector<float> fuse_heads(const float* rows, int heads, int n, HeadFusion fusion) {
    std::vector<float> out(rows, rows + n);
    for (int h = 1; h < heads; ++h) {
        const float* r = rows + static_cast<std::size_t>(h) * n;
        for (int i = 0; i < n; ++i) {
            switch (fusion) {
                case HeadFusion::Mean: out[i] += r[i]; break;
                case HeadFusion::Max: out[i] = std::max(out[i], r[i]); break;
                case HeadFusion::Min: out[i] = std::min(out[i], r[i]); break;
            }
        }
    }
    if (fusion == HeadFusion::Mean)
        for (auto& v : out) v /= static_cast<float>(heads);
    return out;
}

std::vector<double> rollout(const std::vector<std::vector<float>>& fused, int n, float discard) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    std::vector<double> result(nn, 0.0), next(nn), a(nn);
    for (int i = 0; i < n; ++i) result[static_cast<std::size_t>(i) * n + i] = 1.0;
    const std::size_t drop = static_cast<std::size_t>(discard * static_cast<double>(nn));
    std::vector<std::size_t> order(nn);
    for (const auto& f : fused) {
        for (std::size_t i = 0; i < nn; ++i) a[i] = f[i];
        if (drop > 0) {
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return f[x] < f[y]; });
            for (std::size_t k = 0; k < drop; ++k)
                if (order[k] != 0) a[order[k]] = 0.0;  // F[0,0] is kept
        }
        for (int i = 0; i < n; ++i) {
            double* row = a.data() + static_cast<std::size_t>(i) * n;
            row[i] += 1.0;
            const double sum = std::accumulate(row, row + n, 0.0);
            for (int j = 0; j < n; ++j) row[j] /= sum;
        }
        // next = a · result
        std::fill(next.begin(), next.end(), 0.0);
        for (int i = 0; i < n; ++i)
            for (int k = 0; k < n; ++k) {
                const double aik = a[static_cast<std::size_t>(i) * n + k];
                if (aik == 0.0) continue;
                const double* rk = result.data() + static_cast<std::size_t>(k) * n;
                double* ni = next.data() + static_cast<std::size_t>(i) * n;
                for (int j = 0; j < n; ++j) ni[j] += aik * rk[j];
            }
        result.swap(next);
    }
    return result;
}

std::vector<float> rollout_rows(const std::vector<std::vector<float>>& fused, int n, const std::vector<int>& queries) {
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    RowMajor rows = RowMajor::Zero(static_cast<Eigen::Index>(queries.size()), n), next, a;
    for (std::size_t i = 0; i < queries.size(); ++i) {
        if (queries[i] < 0 || queries[i] >= n) throw UsageError("rollout_rows: query out of range");
        rows(static_cast<Eigen::Index>(i), queries[i]) = 1.0f;
    }
    // The product's last factor is the first layer, so a row vector meets the layers from the top.
    for (auto f = fused.rbegin(); f != fused.rend(); ++f) {
        if (f->size() != static_cast<std::size_t>(n) * n) throw UsageError("rollout_rows: a fused matrix is not N×N");
        a = Eigen::Map<const RowMajor>(f->data(), n, n);
        a.diagonal().array() += 1.0f;
        a.array().colwise() /= a.rowwise().sum().array();
        next.noalias() = rows * a;
        rows.swap(next);
    }
    return std::vector<float>(rows.data(), rows.data() + rows.size());
}

std::vector<double> rollout(const Trace& t, int b, HeadFusion fusion, float discard) {
    const int n = t.tokens;
    if (static_cast<int>(t.queries.size()) != n || static_cast<int>(t.attention_layers.size()) != t.layers)
        throw UsageError("rollout needs every query row of every layer (Probe::all_queries over all layers)");
    std::vector<std::vector<float>> fused(t.layers);
    for (int l = 0; l < t.layers; ++l) {
        const int slot = t.attention_slot(l);
        fused[l].resize(static_cast<std::size_t>(n) * n);
        for (int q = 0; q < n; ++q) {
            const auto rows = t.query_rows(slot, b, q);
            const auto f = fuse_heads(rows.data(), t.heads, n, fusion);
            std::copy(f.begin(), f.end(), fused[l].begin() + static_cast<std::ptrdiff_t>(q) * n);
        }
    }
    return rollout(fused, n, discard);
}

}  // namespace vitreg
