#include "core/shift_decomposition.hpp"

#include <algorithm>
#include <cmath>

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

struct Observation {
    int view, position, content;
};

double median_in_place(std::vector<double>& v) {
    const std::size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    const double hi = v[mid];
    if (v.size() % 2) return hi;
    return 0.5 * (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + hi);
}

double view_value(const std::vector<const float*>& views, const Observation& ob, int dim, int d) {
    return views[ob.view][static_cast<std::size_t>(ob.position) * dim + d];
}

// Each observation's weight, by its grid position: 1 / (1 + (|noise(g)| / typical)²), typical
// the median of |noise| over the grid, and at least kShiftMinWeight (all 1 while the noise is 0).
std::vector<double> position_weights(const std::vector<double>& noise, int cells, int dim) {
    std::vector<double> size(cells);
    for (int g = 0; g < cells; ++g) {
        double sq = 0;
        for (int d = 0; d < dim; ++d) sq += noise[static_cast<std::size_t>(g) * dim + d] * noise[static_cast<std::size_t>(g) * dim + d];
        size[g] = std::sqrt(sq);
    }
    std::vector<double> scratch = size;
    const double typical = median_in_place(scratch);
    std::vector<double> weight(cells, 1.0);
    if (typical > 0)
        for (int g = 0; g < cells; ++g) weight[g] = std::max(kShiftMinWeight, 1.0 / (1.0 + (size[g] / typical) * (size[g] / typical)));
    return weight;
}

// content(c) = the weighted mean over c's observations of view_k(g) - noise(g).
void update_content(const std::vector<std::vector<Observation>>& by_content, const std::vector<const float*>& views,
                    const std::vector<double>& noise, int dim, std::vector<double>& content) {
    const std::vector<double> weight = position_weights(noise, static_cast<int>(by_content.size()), dim);
    for (std::size_t c = 0; c < by_content.size(); ++c) {
        double total = 0;
        for (const Observation& ob : by_content[c]) total += weight[ob.position];
        for (int d = 0; d < dim; ++d) {
            double sum = 0;
            for (const Observation& ob : by_content[c])
                sum += weight[ob.position] * (view_value(views, ob, dim, d) - noise[static_cast<std::size_t>(ob.position) * dim + d]);
            content[c * dim + d] = sum / total;
        }
    }
}

// noise(g) = the mean (median) over g's observations of view_k(g) - content(g - s_k), then moved
// per channel so that its median over the grid is 0.
void update_noise(const std::vector<std::vector<Observation>>& by_position, const std::vector<const float*>& views,
                  const std::vector<double>& content, int dim, bool median, std::vector<double>& noise) {
    const int cells = static_cast<int>(by_position.size());
    std::vector<double> values;
    for (int g = 0; g < cells; ++g)
        for (int d = 0; d < dim; ++d) {
            values.clear();
            for (const Observation& ob : by_position[g])
                values.push_back(view_value(views, ob, dim, d) - content[static_cast<std::size_t>(ob.content) * dim + d]);
            double sum = 0;
            for (double v : values) sum += v;
            noise[static_cast<std::size_t>(g) * dim + d] = median ? median_in_place(values) : sum / static_cast<double>(values.size());
        }
    std::vector<double> column(cells);
    for (int d = 0; d < dim; ++d) {
        for (int g = 0; g < cells; ++g) column[g] = noise[static_cast<std::size_t>(g) * dim + d];
        const double centre = median_in_place(column);
        for (int g = 0; g < cells; ++g) noise[static_cast<std::size_t>(g) * dim + d] -= centre;
    }
}

}  // namespace

ShiftDecomposition decompose_shifted(const std::vector<const float*>& views, const std::vector<std::array<int, 2>>& shifts,
                                     int gh, int gw, int dim, bool median) {
    if (views.size() != shifts.size() || views.empty()) throw Error("decompose_shifted: one view per shift");
    const int cells = gh * gw;
    std::vector<std::vector<Observation>> by_content(cells), by_position(cells);
    double scale = 0;
    for (int k = 0; k < static_cast<int>(views.size()); ++k)
        for (int y = 0; y < gh; ++y)
            for (int x = 0; x < gw; ++x) {
                for (int d = 0; d < dim; ++d)
                    scale = std::max(scale, std::fabs(static_cast<double>(views[k][(static_cast<std::size_t>(y) * gw + x) * dim + d])));
                const int cy = y - shifts[k][0], cx = x - shifts[k][1];
                if (cy < 0 || cy >= gh || cx < 0 || cx >= gw) continue;
                const Observation ob{k, y * gw + x, cy * gw + cx};
                by_content[ob.content].push_back(ob);
                by_position[ob.position].push_back(ob);
            }
    for (int cell = 0; cell < cells; ++cell)
        if (by_content[cell].empty() || by_position[cell].empty())
            throw Error("decompose_shifted: the shifts leave a cell unobserved (the first must be (0, 0))");

    const std::size_t size = static_cast<std::size_t>(cells) * dim;
    std::vector<double> content(size), noise(size, 0.0), next(size);
    ShiftDecomposition out;
    while (out.iterations < kShiftMaxIterations) {
        ++out.iterations;
        update_content(by_content, views, noise, dim, content);
        update_noise(by_position, views, content, dim, median, next);
        double moved = 0;
        for (std::size_t i = 0; i < size; ++i) moved = std::max(moved, std::fabs(next[i] - noise[i]));
        noise.swap(next);
        if (moved <= kShiftTolerance * scale) {
            out.converged = true;
            break;
        }
    }
    update_content(by_content, views, noise, dim, content);
    out.content.assign(content.begin(), content.end());
    out.noise.assign(noise.begin(), noise.end());
    return out;
}

}  // namespace vitreg
