#include "kernels.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

#include "vitreg/attention.hpp"

namespace vitreg::kernels {

namespace {

using ConstMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using MutMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

// Tile sizes: near-equal chunks of about `target`, fixed by the size alone.
constexpr int kRowTile = 96;
constexpr int kColTile = 192;
constexpr int kQueryBlock = 64;

struct Chunks {
    int count, size, total;
    Chunks(int n, int target) : count(std::max(1, (n + target - 1) / target)), size((n + count - 1) / count), total(n) {}
    int begin(int i) const { return std::min(total, i * size); }
    int length(int i) const { return std::min(total, (i + 1) * size) - begin(i); }
};

// Runs fn(i) for i in [0, n) as independent tasks; simple_partitioner keeps the split fixed.
template <class Fn>
void for_each_task(int n, const Fn& fn) {
    tbb::parallel_for(
        tbb::blocked_range<int>(0, n, 1),
        [&](const tbb::blocked_range<int>& r) {
            for (int i = r.begin(); i != r.end(); ++i) fn(i);
        },
        tbb::simple_partitioner());
}

}  // namespace

void linear(const float* x, int rows, const Linear& layer, float* out, Epilogue epilogue, const Eigen::VectorXf* scale) {
    const int in = layer.in(), width = layer.out();
    const Chunks rc(rows, kRowTile), cc(width, kColTile);
    for_each_task(rc.count * cc.count, [&](int t) {
        const int r0 = rc.begin(t / cc.count), rn = rc.length(t / cc.count);
        const int c0 = cc.begin(t % cc.count), cn = cc.length(t % cc.count);
        if (rn <= 0 || cn <= 0) return;
        const ConstMap X(x + static_cast<std::size_t>(r0) * in, rn, in, Eigen::OuterStride<>(in));
        MutMap O(out + static_cast<std::size_t>(r0) * width + c0, rn, cn, Eigen::OuterStride<>(width));
        const auto bias = layer.bias.segment(c0, cn).transpose();
        if (epilogue == Epilogue::ScaledResidual) {
            RowMatrix y(rn, cn);
            y.noalias() = X * layer.wt.middleCols(c0, cn);
            y.rowwise() += bias;
            y.array().rowwise() *= scale->segment(c0, cn).transpose().array();
            O += y;
            return;
        }
        O.noalias() = X * layer.wt.middleCols(c0, cn);
        O.rowwise() += bias;
        if (epilogue == Epilogue::BiasGelu) {
            auto a = O.array();
            a = 0.5f * a * (1.0f + (a * static_cast<float>(M_SQRT1_2)).erf());
        }
    });
}

void layer_norm(const float* x, int rows, int width, const Norm& norm, float eps, float* out) {
    const Chunks rc(rows, 64);
    for_each_task(rc.count, [&](int t) {
        for (int r = rc.begin(t), end = r + rc.length(t); r < end; ++r) {
            Eigen::Map<const Eigen::ArrayXf> v(x + static_cast<std::size_t>(r) * width, width);
            Eigen::Map<Eigen::ArrayXf> o(out + static_cast<std::size_t>(r) * width, width);
            const float mean = v.mean();
            const float var = (v - mean).square().mean();
            const float rstd = 1.0f / std::sqrt(var + eps);
            o = (v - mean) * rstd * norm.weight.array() + norm.bias.array();
        }
    });
}

void swiglu(const float* u, int rows, int hidden, float* h) {
    const Chunks rc(rows, 64);
    for_each_task(rc.count, [&](int t) {
        for (int r = rc.begin(t), end = r + rc.length(t); r < end; ++r) {
            Eigen::Map<const Eigen::ArrayXf> a(u + static_cast<std::size_t>(r) * 2 * hidden, hidden);
            Eigen::Map<const Eigen::ArrayXf> b(u + static_cast<std::size_t>(r) * 2 * hidden + hidden, hidden);
            Eigen::Map<Eigen::ArrayXf> o(h + static_cast<std::size_t>(r) * hidden, hidden);
            o = a / (1.0f + (-a).exp()) * b;
        }
    });
}

void attention(const float* qkv, int batch, int tokens, int heads, int head_dim, AttentionKind kind,
               const Eigen::VectorXf& sinks, float* out) {
    const int dim = heads * head_dim, stride = 3 * dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    const Chunks qc(tokens, kQueryBlock);
    for_each_task(batch * heads * qc.count, [&](int t) {
        const int qb = t % qc.count, h = (t / qc.count) % heads, b = t / (qc.count * heads);
        const int q0 = qc.begin(qb), qn = qc.length(qb);
        if (qn <= 0) return;
        const float* seq = qkv + static_cast<std::size_t>(b) * tokens * stride;
        const ConstMap Q(seq + static_cast<std::size_t>(q0) * stride + h * head_dim, qn, head_dim,
                         Eigen::OuterStride<>(stride));
        const ConstMap K(seq + dim + h * head_dim, tokens, head_dim, Eigen::OuterStride<>(stride));
        const ConstMap V(seq + 2 * dim + h * head_dim, tokens, head_dim, Eigen::OuterStride<>(stride));
        RowMatrix s(qn, tokens);
        s.noalias() = (Q * scale) * K.transpose();
        const float sink = kind == AttentionKind::Sink ? sinks[h] : 0.0f;
        for (int i = 0; i < qn; ++i) normalize_attention(s.row(i).data(), static_cast<std::size_t>(tokens), kind, sink);
        MutMap O(out + (static_cast<std::size_t>(b) * tokens + q0) * dim + h * head_dim, qn, head_dim,
                 Eigen::OuterStride<>(dim));
        O.noalias() = s * V;
    });
}

}  // namespace vitreg::kernels
