#include "vitreg/analysis/pca.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

using Matrix = Eigen::MatrixXd;

// Each axis signed so that its largest-magnitude loading (the first on ties) is positive, so
// that results do not flip between runs.
void fix_signs(Matrix& axes) {
    for (Eigen::Index c = 0; c < axes.cols(); ++c) {
        Eigen::Index at = 0;
        axes.col(c).cwiseAbs().maxCoeff(&at);
        if (axes(at, c) < 0) axes.col(c) = -axes.col(c);
    }
}

// The top-k eigenpairs of the scatter matrix CᵀC of centred rows C (eigenvalues: sums of squares).
struct Axes {
    Matrix vectors;          // [d, k], signs fixed
    Eigen::VectorXd values;  // [k], descending
};

Axes scatter_axes(const Matrix& scatter, int k) {
    const Eigen::SelfAdjointEigenSolver<Matrix> solver(scatter);  // ascending
    const Eigen::Index d = scatter.rows();
    Axes a{Matrix(d, k), Eigen::VectorXd(k)};
    for (int c = 0; c < k; ++c) {
        a.vectors.col(c) = solver.eigenvectors().col(d - 1 - c);
        a.values[c] = std::max(0.0, solver.eigenvalues()[d - 1 - c]);
    }
    fix_signs(a.vectors);
    return a;
}

// The same from the smaller Gram matrix C·Cᵀ when there are fewer rows than columns (a 224 px
// image: 256 patches of 384 or 768 channels): for its eigenpair (u, λ), Cᵀu / √λ is the
// scatter's, for the same λ. Axes past the rows' rank (λ ≈ 0) come out as zero vectors.
Axes gram_axes(const Matrix& centred, int k) {
    const Eigen::SelfAdjointEigenSolver<Matrix> solver(Matrix(centred * centred.transpose()));
    const Eigen::Index m = centred.rows(), d = centred.cols();
    const double largest = std::max(1.0, solver.eigenvalues()[m - 1]);
    Axes a{Matrix::Zero(d, k), Eigen::VectorXd::Zero(k)};
    for (int c = 0; c < k && c < m; ++c) {
        const double lambda = solver.eigenvalues()[m - 1 - c];
        if (lambda <= 1e-12 * largest) continue;
        a.vectors.col(c) = centred.transpose() * solver.eigenvectors().col(m - 1 - c) / std::sqrt(lambda);
        a.values[c] = lambda;
    }
    fix_signs(a.vectors);
    return a;
}

// The top-k eigenvectors (columns) of the covariance of `rows`, signs fixed.
Matrix principal_axes(const Matrix& rows, int k) {
    const Matrix centred = rows.rowwise() - rows.colwise().mean();
    return centred.rows() < centred.cols() ? gram_axes(centred, k).vectors
                                           : scatter_axes(centred.transpose() * centred, k).vectors;
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

namespace {

// Patch rows [first, first + count) of `images` taken one after another, in double, minus `mean`.
Matrix centred_rows(const std::vector<PatchFeatures>& images, int dim, Eigen::Index first, Eigen::Index count,
                    const Eigen::RowVectorXd& mean) {
    Matrix out(count, dim);
    Eigen::Index at = 0, row = 0;
    for (const auto& im : images) {
        const Eigen::Index n = static_cast<Eigen::Index>(im.grid_h) * im.grid_w;
        for (Eigen::Index p = std::max<Eigen::Index>(0, first - at); p < n && row < count; ++p, ++row)
            for (int d = 0; d < dim; ++d) out(row, d) = im.data[static_cast<std::size_t>(p) * dim + d] - mean[d];
        at += n;
    }
    return out;
}

constexpr Eigen::Index kRowBlock = 512;  // rows held in double at a time while fitting

}  // namespace

PcaBasis fit_pca_basis(const std::vector<PatchFeatures>& images, int dim, int k) {
    if (k < 1 || k > dim)
        throw UsageError("--pca-dims " + std::to_string(k) + " must be in 1.." + std::to_string(dim) + " (the features' channels)");
    Eigen::Index n = 0;
    Eigen::RowVectorXd sum = Eigen::RowVectorXd::Zero(dim);
    for (const auto& im : images)
        for (int p = 0; p < im.grid_h * im.grid_w; ++p, ++n)
            for (int d = 0; d < dim; ++d) sum[d] += im.data[static_cast<std::size_t>(p) * dim + d];
    if (n < 2) throw UsageError("--pca-dims: a PCA needs at least 2 patches, got " + std::to_string(n));
    const Eigen::RowVectorXd mean = sum / static_cast<double>(n);
    Axes axes;
    double total = 0;
    if (n < dim) {
        const Matrix centred = centred_rows(images, dim, 0, n, mean);
        total = centred.squaredNorm();
        axes = gram_axes(centred, k);
        // Past the patches' rank the Gram matrix has no axes to give: complete them from the
        // (rank-deficient) scatter matrix, whose eigenvectors span everything.
        if (axes.values[k - 1] <= 0) axes = scatter_axes(centred.transpose() * centred, k);
    } else {
        // The scatter matrix a block of rows at a time: memory d² + kRowBlock·d, not n·d.
        Matrix scatter = Matrix::Zero(dim, dim);
        for (Eigen::Index first = 0; first < n; first += kRowBlock) {
            const Matrix block = centred_rows(images, dim, first, std::min(kRowBlock, n - first), mean);
            scatter.selfadjointView<Eigen::Lower>().rankUpdate(block.transpose());
        }
        scatter.triangularView<Eigen::StrictlyUpper>() = scatter.transpose();
        total = scatter.trace();
        axes = scatter_axes(scatter, k);
    }
    PcaBasis b;
    b.dim = dim;
    b.k = k;
    b.patches = n;
    b.mean.assign(mean.data(), mean.data() + dim);
    b.components.resize(static_cast<std::size_t>(k) * dim);
    for (int c = 0; c < k; ++c)
        for (int d = 0; d < dim; ++d) b.components[static_cast<std::size_t>(c) * dim + d] = axes.vectors(d, c);
    const double dof = static_cast<double>(n - 1);
    for (int c = 0; c < k; ++c) b.explained_variance.push_back(axes.values[c] / dof);
    b.total_variance = total / dof;
    return b;
}

std::vector<float> project_on(const PcaBasis& basis, const float* rows, std::size_t count) {
    const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> components(
        basis.components.data(), basis.k, basis.dim);
    const Eigen::Map<const Eigen::RowVectorXd> mean(basis.mean.data(), basis.dim);
    const PatchFeatures all{rows, static_cast<int>(count), 1};
    std::vector<float> out(count * static_cast<std::size_t>(basis.k));
    const auto n = static_cast<Eigen::Index>(count);
    for (Eigen::Index first = 0; first < n; first += kRowBlock) {
        const Matrix proj = centred_rows({all}, basis.dim, first, std::min(kRowBlock, n - first), mean) * components.transpose();
        for (Eigen::Index r = 0; r < proj.rows(); ++r)
            for (int c = 0; c < basis.k; ++c)
                out[static_cast<std::size_t>(first + r) * basis.k + c] = static_cast<float>(proj(r, c));
    }
    return out;
}

void foreground_colour(const float* whitened, float foreground, float* rgb) {
    const float keep = kBackgroundDim + (1 - kBackgroundDim) * std::clamp(foreground, 0.0f, 1.0f);
    for (int c = 0; c < 3; ++c) rgb[c] = keep / (1 + std::exp(-2 * whitened[c]));
}

std::vector<PcaPreview> pca_preview(const std::vector<PatchFeatures>& images, int dim) {
    const Matrix all = rows_of(images, dim);

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
