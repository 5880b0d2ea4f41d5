#include "vitreg/analysis/iou.hpp"

#include <algorithm>
#include <limits>

#include "vitreg/error.hpp"

namespace vitreg {

IouScores iou_scores(const std::vector<int>& truth, const std::vector<int>& predicted, int classes) {
    if (truth.size() != predicted.size()) throw UsageError("IoU: as many predictions as labels expected");
    std::vector<double> inter(classes, 0), uni(classes, 0);
    std::size_t scored = 0, right = 0;
    for (std::size_t i = 0; i < truth.size(); ++i) {
        const int t = truth[i], p = predicted[i];
        if (t < 0 || t >= classes) continue;
        ++scored;
        uni[t] += 1;
        if (p == t) {
            ++right;
            inter[t] += 1;
        } else if (p >= 0 && p < classes) {
            uni[p] += 1;
        }
    }
    IouScores s;
    s.accuracy = scored ? static_cast<double>(right) / scored : 0.0;
    int present = 0;
    for (int k = 0; k < classes; ++k) {
        s.iou.push_back(uni[k] > 0 ? inter[k] / uni[k] : std::numeric_limits<double>::quiet_NaN());
        if (uni[k] > 0) {
            s.miou += s.iou.back();
            ++present;
        }
    }
    s.miou /= std::max(1, present);
    return s;
}

}  // namespace vitreg
