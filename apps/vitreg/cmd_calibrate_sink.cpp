// vitreg calibrate-sink MODEL --images IMAGE... -o OUT.safetensors [--evict-sink]: retrofit a
// per-head sink logit fitted to the mass each head puts on its sink key (docs/design.md,
// "Interventions and the study").
#include <iomanip>
#include <iostream>

#include "common.hpp"
#include "vitreg/analysis/sink_calibration.hpp"

namespace vitreg::cli {

void register_calibrate_sink(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("calibrate-sink",
                                   "a checkpoint with a per-head sink logit fitted to the model's observed sink mass");
    struct Args : CalibrationArgs {
        bool evict_sink = false;
    };
    auto a = std::make_shared<Args>();
    add_calibration_args(*cmd, *a, "the calibrated checkpoint (.safetensors) to write");
    cmd->add_flag("--evict-sink", a->evict_sink,
                  "every run of the written file also evicts each head's sink key, so the logit stands in for it");
    cmd->callback([&run, a] {
        run = [a] {
            const CalibrationRun job = start_calibration(*a);
            const SinkCalibration cal = calibrate_sink(job.model, job.images, job.options, job.progress);
            write_sink_checkpoint(job.model, cal, a->evict_sink, a->out);
            std::ostream& status = status_out();
            status << std::fixed << std::setprecision(2);
            for (int l = 0; l < cal.layers; ++l) {
                status << "vitreg: layer " << l << " sink logits";
                for (int h = 0; h < cal.heads; ++h) status << " " << cal.sink(l, h);
                status << "\n";
            }
            status << "vitreg: calibrated " << cal.layers * cal.heads << " sink logits on " << job.images.size()
                      << " images" << (a->evict_sink ? ", sink keys evicted on every run," : "") << " -> " << a->out << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
