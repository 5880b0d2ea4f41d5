// vitreg find-register-neurons MODEL --images IMAGE... -o neurons.json: the MLP neurons that
// write the model's high-norm outliers (docs/design.md, "Interventions and the study"), for --ttr K
// --register-neurons.
#include <iostream>

#include "common.hpp"
#include "vitreg/analysis/register_neurons.hpp"

namespace vitreg::cli {

void register_find_register_neurons(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("find-register-neurons",
                                   "rank the MLP neurons that fire at the outlier patches (for test-time registers)");
    auto a = std::make_shared<CalibrationArgs>();
    add_calibration_args(*cmd, *a, "neurons.json to write");
    cmd->callback([&run, a] {
        run = [a] {
            const CalibrationRun job = start_calibration(*a);
            const RegisterNeuronRanking r = find_register_neurons(job.model, job.images, job.options, job.progress);
            write_register_neurons(a->out, r);
            std::ostream& status = status_out();
            status << "vitreg: " << r.with_outliers.size() << " of " << job.images.size()
                      << " images have outlier patches; best neurons (layer:neuron score):";
            for (std::size_t i = 0; i < std::min<std::size_t>(5, r.ranked.size()); ++i)
                status << " " << r.ranked[i].layer << ":" << r.ranked[i].neuron << " " << r.ranked[i].score;
            status << "\nvitreg: selected " << to_string(r.selected) << " -> " << a->out << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
