#pragma once
// One statistic summarized over images, per configuration: what `vitreg compare` ranks and its
// report, stats.json and the terminal show.
#include <string>
#include <vector>

namespace vitreg {

// Its mean and standard deviation per configuration, and where a lower value is better, which
// configurations hold the lowest mean.
struct ColumnSummary {
    std::string column;
    std::vector<double> mean, sd;  // one per configuration
    bool lower_is_better = false;
    std::vector<bool> best{};      // per configuration; none when the column is not ranked or all tie
};

}  // namespace vitreg
