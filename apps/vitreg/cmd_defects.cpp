// vitreg defects MODEL -o DIR: each layer's defect direction u_i and the top singular values of
// the linearized block product, from the weights alone (docs/design.md, "Artifact metrics").
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "common.hpp"
#include "vitreg/analysis/defects.hpp"

namespace vitreg::cli {

void register_defects(CLI::App& app, Command& run) {
    DefectOptions defaults;
    auto* cmd = app.add_subcommand(
        "defects",
        "per layer, the defect direction u_i (leading left singular vector of the linearized blocks' product, SINDER) "
        "and its top singular values, from the weights: DIR/defects.safetensors and DIR/defects.json. The MLP is "
        "linearized by least squares on a seeded Gaussian sample (" + std::to_string(defaults.samples) +
            " rows by default, --samples)");
    struct Args {
        ModelArgs model;
        std::string out;
        DefectOptions options;
    };
    auto a = std::make_shared<Args>();
    add_model_args(*cmd, a->model);
    cmd->add_option("-o,--out", a->out, "output folder")->required();
    add_defect_fit_args(*cmd, a->options, "");
    cmd->add_option("--top", a->options.top, "singular values kept per layer")->check(CLI::Range(1, 1 << 16))->capture_default_str();
    cmd->callback([&run, a] {
        run = [a] {
            const Model m = load_model(a->model);
            std::cerr << "vitreg: defect directions of " << m.path() << ": " << a->options.samples
                      << "-sample least-squares fit of each MLP, seed " << a->options.seed << "\n";
            const DefectDirections d = defect_directions(m, a->options);
            write_defects(d, a->out);
            std::cout << std::setprecision(5);
            for (int l = 0; l < d.layers; ++l) {
                std::cout << "layer " << l << ": singular values";
                for (int k = 0; k < std::min(d.top, 3); ++k) std::cout << " " << d.singular_value(l, k);
                std::cout << "\n";
            }
            std::cerr << "vitreg: " << d.layers << " defect directions (" << d.fit_description() << ") written to " << a->out
                      << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
