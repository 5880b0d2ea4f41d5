#include "vitreg/analysis/pca.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

using Matrix = Eigen::MatrixXd;

// The top-k eigenvectors (columns) of the covariance of `rows`, signs fixed. With fewer rows
// than columns (a 224 px image: 256 patches of 384 or 768 channels) they come from the smaller
// Gram matrix X·Xᵀ: for its eigenpair (u, λ), Xᵀu / √λ is the covariance's, for the same λ.
Matrix principal_axes(const Matrix& rows, int k) {
    const Matrix centred = rows.rowwise() - rows.colwise().mean();
    const Eigen::Index n = centred.rows(), d = centred.cols();
    const bool gram = n < d;
    Eigen::SelfAdjointEigenSolver<Matrix> solver(gram ? Matrix(centred * centred.transpose())
                                                      : Matrix(centred.transpose() * centred));
    const Eigen::Index m = gram ? n : d;  // eigenpairs, ascending
    Matrix axes(d, k);
    for (int c = 0; c < k; ++c) {
        Eigen::VectorXd v = Eigen::VectorXd::Zero(d);
        if (c < m) {
            const Eigen::Index e = m - 1 - c;
            if (!gram) {
                v = solver.eigenvectors().col(e);
            } else if (const double lambda = solver.eigenvalues()[e]; lambda > 1e-12 * std::max(1.0, solver.eigenvalues()[m - 1])) {
                v = centred.transpose() * solver.eigenvectors().col(e) / std::sqrt(lambda);
            }
        }
        Eigen::Index at = 0;
        v.cwiseAbs().maxCoeff(&at);
        if (v[at] < 0) v = -v;
        axes.col(c) = v;
    }
    return axes;
}

bool on_border(int p, int gh, int gw) {
    const int r = p / gw, c = p % gw;
    return r == 0 || c == 0 || r == gh - 1 || c == gw - 1;
}

Matrix rows_of(const std::vector<PatchFeatures>& images, int dim) {
    Eigen::Index total = 0;
    for (const auto& im : images) total += im.grid_h * im.grid_w;
    Matrix all(total, dim);
    Eigen::Index at = 0;
    for (const auto& im : images)
        for (int p = 0; p < im.grid_h * im.grid_w; ++p, ++at)
            for (int d = 0; d < dim; ++d) all(at, d) = im.data[static_cast<std::size_t>(p) * dim + d];
    return all;
}

// Rows on the first component's positive side, oriented so the border leans negative (every row
// when fewer than 3 stand out).
std::vector<Eigen::Index> first_component_foreground(const Matrix& all, const std::vector<PatchFeatures>& images) {
    const Eigen::Index total = all.rows();
    const Eigen::RowVectorXd mean = all.colwise().mean();
    Eigen::VectorXd first = (all.rowwise() - mean) * principal_axes(all, 1).col(0);
    double border = 0;
    Eigen::Index at = 0;
    for (const auto& im : images)
        for (int p = 0; p < im.grid_h * im.grid_w; ++p, ++at)
            if (on_border(p, im.grid_h, im.grid_w)) border += first[at];
    if (border > 0) first = -first;
    std::vector<Eigen::Index> fg;
    for (Eigen::Index i = 0; i < total; ++i)
        if (first[i] > 0) fg.push_back(i);
    if (fg.size() < 3) {  // nothing stands out: colour every patch
        fg.resize(static_cast<std::size_t>(total));
        for (Eigen::Index i = 0; i < total; ++i) fg[static_cast<std::size_t>(i)] = i;
    }
    return fg;
}

}  // namespace

PcaProjection pca_foreground(const PatchFeatures& image, int dim, const std::vector<std::uint8_t>& mask) {
    const Matrix all = rows_of({image}, dim);
    const Eigen::Index n = all.rows();
    std::vector<Eigen::Index> fg;
    if (mask.empty()) {
        fg = first_component_foreground(all, {image});
    } else {
        if (static_cast<Eigen::Index>(mask.size()) != n)
            throw UsageError("foreground mask: " + std::to_string(mask.size()) + " cells for a grid of " + std::to_string(n));
        for (Eigen::Index i = 0; i < n; ++i)
            if (mask[static_cast<std::size_t>(i)]) fg.push_back(i);
        if (fg.size() < 3) throw UsageError("foreground mask: fewer than 3 foreground cells to fit 3 components on");
    }
    Matrix fg_rows(static_cast<Eigen::Index>(fg.size()), dim);
    for (std::size_t i = 0; i < fg.size(); ++i) fg_rows.row(static_cast<Eigen::Index>(i)) = all.row(fg[i]);
    const Eigen::RowVectorXd mean = fg_rows.colwise().mean();
    const Matrix axes = principal_axes(fg_rows, 3);
    const Matrix fg_proj = (fg_rows.rowwise() - mean) * axes;
    const Matrix proj = (all.rowwise() - mean) * axes;
    PcaProjection out;
    out.whitened.resize(static_cast<std::size_t>(n) * 3);
    out.foreground.assign(static_cast<std::size_t>(n), 0);
    for (const auto i : fg) out.foreground[static_cast<std::size_t>(i)] = 1;
    for (int c = 0; c < 3; ++c) {
        const double var = fg_proj.col(c).squaredNorm() / std::max<double>(1, static_cast<double>(fg.size()) - 1);
        const double scale = var > 0 ? 1 / std::sqrt(var) : 0;
        for (Eigen::Index i = 0; i < n; ++i) out.whitened[static_cast<std::size_t>(i) * 3 + c] = static_cast<float>(proj(i, c) * scale);
    }
    return out;
}

void foreground_colour(const float* whitened, float foreground, float* rgb) {
    const float keep = kBackgroundDim + (1 - kBackgroundDim) * std::clamp(foreground, 0.0f, 1.0f);
    for (int c = 0; c < 3; ++c) rgb[c] = keep / (1 + std::exp(-2 * whitened[c]));
}

std::vector<PcaPreview> pca_preview(const std::vector<PatchFeatures>& images, int dim) {
    const Matrix all = rows_of(images, dim);
    const Eigen::Index total = all.rows();

    std::vector<Eigen::Index> fg = first_component_foreground(all, images);

    Matrix fg_rows(static_cast<Eigen::Index>(fg.size()), dim);
    for (std::size_t i = 0; i < fg.size(); ++i) fg_rows.row(static_cast<Eigen::Index>(i)) = all.row(fg[i]);
    const Matrix proj = (fg_rows.rowwise() - fg_rows.colwise().mean()) * principal_axes(fg_rows, 3);
    const Eigen::RowVectorXd lo = proj.colwise().minCoeff(), hi = proj.colwise().maxCoeff();

    std::vector<PcaPreview> out(images.size());
    std::vector<std::pair<std::size_t, int>> owner;  // global patch → (image, patch)
    for (std::size_t i = 0; i < images.size(); ++i) {
        const int n = images[i].grid_h * images[i].grid_w;
        out[i].rgb.assign(static_cast<std::size_t>(n) * 3, 0.0f);
        out[i].foreground.assign(static_cast<std::size_t>(n), 0);
        for (int p = 0; p < n; ++p) owner.emplace_back(i, p);
    }
    for (std::size_t k = 0; k < fg.size(); ++k) {
        const auto [img, p] = owner[static_cast<std::size_t>(fg[k])];
        out[img].foreground[p] = 1;
        for (int c = 0; c < 3; ++c) {
            const double span = hi[c] - lo[c];
            out[img].rgb[static_cast<std::size_t>(p) * 3 + c] =
                span > 0 ? static_cast<float>((proj(static_cast<Eigen::Index>(k), c) - lo[c]) / span) : 0.5f;
        }
    }
    return out;
}

}  // namespace vitreg
