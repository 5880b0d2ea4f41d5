#include "core/shift_decomposition.hpp"

#include <algorithm>
#include <cmath>

#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include "core/robust_outliers.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

struct Observation {
    int view, position, content;
};

// Each observation's weight, by its grid position: 1 / (1 + (|noise(g)| / typical)²), typical
// the median of |noise| over the grid, and at least kShiftMinWeight (all 1 while the noise is 0).
// noise is channel-major [dim][cells].
std::vector<double> position_weights(const std::vector<double>& noise, int cells, int dim) {
    std::vector<double> size(cells, 0.0);
    for (int d = 0; d < dim; ++d)
        for (int g = 0; g < cells; ++g) size[g] += noise[static_cast<std::size_t>(d) * cells + g] * noise[static_cast<std::size_t>(d) * cells + g];
    for (double& v : size) v = std::sqrt(v);
    std::vector<double> scratch = size;
    const double typical = median_in_place(scratch);
    std::vector<double> weight(cells, 1.0);
    if (typical > 0)
        for (int g = 0; g < cells; ++g)
            weight[g] = std::max(kShiftMinWeight, 1.0 / (1.0 + (size[g] / typical) * (size[g] / typical)));
    return weight;
}

// One channel's views [K][cells] and its content and noise [cells].
struct Channel {
    const double* views;
    double* content;
    double* noise;
};

// content(c) = the weighted mean over c's observations of view_k(g) - noise(g).
void update_content(const std::vector<std::vector<Observation>>& by_content, const std::vector<double>& weight, int cells,
                    const Channel& ch) {
    for (std::size_t c = 0; c < by_content.size(); ++c) {
        double sum = 0, total = 0;
        for (const Observation& ob : by_content[c]) {
            sum += weight[ob.position] * (ch.views[static_cast<std::size_t>(ob.view) * cells + ob.position] - ch.noise[ob.position]);
            total += weight[ob.position];
        }
        ch.content[c] = sum / total;
    }
}

// noise(g) = the mean (median) over g's observations of view_k(g) - content(g - s_k), then moved
// so that its median over the grid is 0; returns how far the largest value moved.
double update_noise(const std::vector<std::vector<Observation>>& by_position, int cells, bool median, const Channel& ch,
                    std::vector<double>& next, std::vector<double>& values) {
    for (int g = 0; g < cells; ++g) {
        values.clear();
        double sum = 0;
        for (const Observation& ob : by_position[g]) {
            values.push_back(ch.views[static_cast<std::size_t>(ob.view) * cells + g] - ch.content[ob.content]);
            sum += values.back();
        }
        next[g] = median ? median_in_place(values) : sum / static_cast<double>(values.size());
    }
    values.assign(next.begin(), next.end());
    const double centre = median_in_place(values);
    double moved = 0;
    for (int g = 0; g < cells; ++g) {
        moved = std::max(moved, std::fabs(next[g] - centre - ch.noise[g]));
        ch.noise[g] = next[g] - centre;
    }
    return moved;
}

}  // namespace

ShiftDecomposition decompose_shifted(const std::vector<const float*>& views, const std::vector<std::array<int, 2>>& shifts,
                                     int gh, int gw, int dim, bool median) {
    if (views.size() != shifts.size() || views.empty()) throw Error("decompose_shifted: one view per shift");
    const int cells = gh * gw, K = static_cast<int>(views.size());
    std::vector<std::vector<Observation>> by_content(cells), by_position(cells);
    for (int k = 0; k < K; ++k)
        for (int y = 0; y < gh; ++y)
            for (int x = 0; x < gw; ++x) {
                const int cy = y - shifts[k][0], cx = x - shifts[k][1];
                if (cy < 0 || cy >= gh || cx < 0 || cx >= gw) continue;
                const Observation ob{k, y * gw + x, cy * gw + cx};
                by_content[ob.content].push_back(ob);
                by_position[ob.position].push_back(ob);
            }
    for (int cell = 0; cell < cells; ++cell)
        if (by_content[cell].empty() || by_position[cell].empty())
            throw Error("decompose_shifted: the shifts leave a cell unobserved (the first must be (0, 0))");

    // Channel-major copies: every update is per channel but for the weights.
    const std::size_t plane = static_cast<std::size_t>(K) * cells;
    std::vector<double> channel_views(plane * dim);
    double scale = 0;
    for (int k = 0; k < K; ++k)
        for (int g = 0; g < cells; ++g)
            for (int d = 0; d < dim; ++d) {
                const double v = views[k][static_cast<std::size_t>(g) * dim + d];
                channel_views[d * plane + static_cast<std::size_t>(k) * cells + g] = v;
                scale = std::max(scale, std::fabs(v));
            }
    std::vector<double> content(static_cast<std::size_t>(dim) * cells), noise(static_cast<std::size_t>(dim) * cells, 0.0);
    const auto channel = [&](int d) {
        return Channel{channel_views.data() + d * plane, content.data() + static_cast<std::size_t>(d) * cells,
                       noise.data() + static_cast<std::size_t>(d) * cells};
    };
    ShiftDecomposition out;
    while (out.iterations < kShiftMaxIterations) {
        ++out.iterations;
        const std::vector<double> weight = position_weights(noise, cells, dim);
        const double moved = tbb::parallel_reduce(
            tbb::blocked_range<int>(0, dim), 0.0,
            [&](const tbb::blocked_range<int>& range, double most) {
                std::vector<double> next(cells), values;
                for (int d = range.begin(); d < range.end(); ++d) {
                    update_content(by_content, weight, cells, channel(d));
                    most = std::max(most, update_noise(by_position, cells, median, channel(d), next, values));
                }
                return most;
            },
            [](double a, double b) { return std::max(a, b); });
        if (moved <= kShiftTolerance * scale) {
            out.converged = true;
            break;
        }
    }
    const std::vector<double> weight = position_weights(noise, cells, dim);
    for (int d = 0; d < dim; ++d) update_content(by_content, weight, cells, channel(d));
    out.content.resize(static_cast<std::size_t>(cells) * dim);
    out.noise.resize(out.content.size());
    for (int d = 0; d < dim; ++d)
        for (int g = 0; g < cells; ++g) {
            out.content[static_cast<std::size_t>(g) * dim + d] = static_cast<float>(content[static_cast<std::size_t>(d) * cells + g]);
            out.noise[static_cast<std::size_t>(g) * dim + d] = static_cast<float>(noise[static_cast<std::size_t>(d) * cells + g]);
        }
    return out;
}

}  // namespace vitreg
