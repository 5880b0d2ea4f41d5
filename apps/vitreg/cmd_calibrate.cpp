// vitreg calibrate-int8 MODEL --images IMAGE... -o SCALES.json: the static activation ranges
// that `--precision int8 --act-quant per-tensor --scales SCALES.json` runs with.
#include <iostream>

#include "common.hpp"
#include "vitreg/analysis/calibrate.hpp"

namespace vitreg::cli {

void register_calibrate(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("calibrate-int8",
                                   "per-tensor int8 activation ranges of every linear, from calibration images");
    struct Args : CalibrationArgs {
        double percentile = 100.0;
    };
    auto a = std::make_shared<Args>();
    add_calibration_args(*cmd, *a, "SCALES.json to write");
    cmd->add_option("--percentile", a->percentile,
                    "100 = min/max; below, clip each range to the P-th and (100-P)-th percentiles of its values")
        ->check(CLI::Range(50.0, 100.0))
        ->capture_default_str();
    cmd->callback([&run, a] {
        run = [a] {
            CalibrationRun job = start_calibration(*a);
            job.options.percentile = a->percentile;
            const Int8Calibration c = calibrate_int8(job.model, job.images, job.options, job.progress);
            write_int8_calibration(a->out, c);
            status_out() << "vitreg: calibrated " << c.ranges.size() << " linears on " << job.images.size() << " images ("
                      << c.method << ") -> " << a->out << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
