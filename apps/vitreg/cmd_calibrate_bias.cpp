// vitreg calibrate-bias MODEL (--images IMAGE... | --blank N) -o OUT.safetensors [--layer L]: the
// per-position mean map that @debias=OUT subtracts and the register means that
// @registers=mean:OUT substitutes (vitreg/repair.hpp).
#include <iostream>

#include "common.hpp"
#include "vitreg/analysis/repair_calibration.hpp"
#include "vitreg/error.hpp"
#include "vitreg/probe.hpp"

namespace vitreg::cli {

void register_calibrate_bias(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand(
        "calibrate-bias",
        "the per-position mean of the residual stream over images (for MODEL@debias=OUT) and every block's mean "
        "register tokens (for MODEL@registers=mean:OUT); 1 forward per image");
    struct Args : CalibrationArgs {
        int blank = 0;
        std::string layer = "last";
    };
    auto a = std::make_shared<Args>();
    add_calibration_args(*cmd, *a, "the calibration (.safetensors) to write");
    cmd->get_option("--images")->required(false);
    cmd->add_option("--blank", a->blank, "instead of --images: N blank images (grey levels evenly spaced in [0, 1]) at the model's native size")
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--layer", a->layer, "the block whose output the map averages (last, or i; -1 = last)")->capture_default_str();
    cmd->callback([&run, a] {
        run = [a] {
            if (a->images.empty() == (a->blank == 0))
                throw UsageError("calibrate-bias: give either --images or --blank N");
            const CalibrationRun job = start_calibration(*a);
            const auto layers = resolve_layers(a->layer, job.model.config().depth);
            if (layers.size() != 1) throw UsageError("--layer " + a->layer + ": expected one block");
            const RepairCalibration cal =
                a->blank ? calibrate_repair_blank(job.model, a->blank, layers[0], job.options, job.progress)
                         : calibrate_repair(job.model, job.images, layers[0], job.options, job.progress);
            cal.write(a->out);
            std::cerr << "vitreg: per-position mean after block " << cal.layer << " on a " << cal.grid << "x" << cal.grid
                      << " grid and " << cal.registers << " register means per block, over " << cal.images.size()
                      << " images -> " << a->out << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
