#include "vitreg/analysis/linear_probe.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "vitreg/analysis/iou.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

std::vector<int> patch_labels(const std::uint8_t* mask, int width, int height, int patch) {
    const int gh = height / patch, gw = width / patch;
    std::vector<int> out(static_cast<std::size_t>(gh) * gw, -1);
    for (int r = 0; r < gh; ++r)
        for (int c = 0; c < gw; ++c) {
            int count[256] = {};
            for (int y = r * patch; y < (r + 1) * patch; ++y)
                for (int x = c * patch; x < (c + 1) * patch; ++x) ++count[mask[static_cast<std::size_t>(y) * width + x]];
            out[static_cast<std::size_t>(r) * gw + c] = static_cast<int>(std::max_element(count, count + 256) - count);
        }
    return out;
}

namespace {

// Rows of all samples with a label, as one matrix (plus labels).
std::pair<Eigen::MatrixXd, std::vector<int>> stack(const std::vector<LabelledPatches>& set, int dim, int classes) {
    std::vector<int> labels;
    for (const auto& s : set)
        for (int l : s.labels)
            if (l >= 0 && l < classes) labels.push_back(l);
    Eigen::MatrixXd x(static_cast<Eigen::Index>(labels.size()), dim);
    Eigen::Index at = 0;
    for (const auto& s : set) {
        if (s.features.size() != s.labels.size() * static_cast<std::size_t>(dim))
            throw UsageError("linear probe: features and labels disagree in size");
        for (std::size_t p = 0; p < s.labels.size(); ++p) {
            if (s.labels[p] < 0 || s.labels[p] >= classes) continue;
            for (int d = 0; d < dim; ++d) x(at, d) = s.features[p * dim + d];
            ++at;
        }
    }
    return {x, labels};
}

}  // namespace

LinearProbeResult linear_probe(const std::vector<LabelledPatches>& train, const std::vector<LabelledPatches>& test, int dim,
                               int classes, double ridge) {
    auto [xtr, ytr] = stack(train, dim, classes);
    auto [xte, yte] = stack(test, dim, classes);
    if (xtr.rows() == 0 || xte.rows() == 0) throw UsageError("linear probe: no labelled patches to fit or score");
    const Eigen::RowVectorXd mean = xtr.colwise().mean();
    const Eigen::RowVectorXd sd = ((xtr.rowwise() - mean).array().square().colwise().mean().sqrt() + 1e-6).matrix();
    auto design = [&](const Eigen::MatrixXd& x) {
        Eigen::MatrixXd d(x.rows(), dim + 1);
        d.leftCols(dim) = ((x.rowwise() - mean).array().rowwise() / sd.array()).matrix();
        d.col(dim).setOnes();
        return d;
    };
    Eigen::MatrixXd a = design(xtr);
    const Eigen::MatrixXd b = design(xte);
    Eigen::MatrixXd y = Eigen::MatrixXd::Zero(a.rows(), classes);
    for (Eigen::Index i = 0; i < a.rows(); ++i) y(i, ytr[static_cast<std::size_t>(i)]) = 1.0;
    // Classes weigh alike, however few their patches (objects are a few percent of an image):
    // rows are scaled by sqrt(n / (classes_present · count of their class)).
    std::vector<double> count(classes, 0.0);
    for (int l : ytr) count[l] += 1;
    const double classes_seen = static_cast<double>(std::count_if(count.begin(), count.end(), [](double c) { return c > 0; }));
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
        const double w = std::sqrt(static_cast<double>(a.rows()) / (classes_seen * count[ytr[static_cast<std::size_t>(i)]]));
        a.row(i) *= w;
        y.row(i) *= w;
    }
    Eigen::MatrixXd gram = a.transpose() * a;
    gram.diagonal().head(dim).array() += ridge * static_cast<double>(a.rows()) / dim;
    const Eigen::MatrixXd w = gram.ldlt().solve(a.transpose() * y);
    const Eigen::MatrixXd scores = b * w;

    std::vector<int> predicted(static_cast<std::size_t>(b.rows()));
    for (Eigen::Index i = 0; i < b.rows(); ++i) {
        Eigen::Index pred = 0;
        scores.row(i).maxCoeff(&pred);
        predicted[static_cast<std::size_t>(i)] = static_cast<int>(pred);
    }
    const IouScores s = iou_scores(yte, predicted, classes);
    LinearProbeResult r;
    r.iou = s.iou;
    r.miou = s.miou;
    r.accuracy = s.accuracy;
    r.train_patches = static_cast<int>(a.rows());
    r.test_patches = static_cast<int>(b.rows());
    return r;
}

}  // namespace vitreg
