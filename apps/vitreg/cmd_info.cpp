// vitreg info MODEL: the resolved configuration.
#include <iomanip>
#include <iostream>

#include "common.hpp"
#include "vitreg/safetensors.hpp"

namespace vitreg::cli {

void register_info(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("info", "print the resolved configuration of a checkpoint");
    auto args = std::make_shared<ModelArgs>();
    add_model_args(*cmd, *args);
    cmd->callback([&run, args] {
        run = [args] {
            const Model m = load_model(*args);
            const Config& c = m.config();
            auto row = [](const char* k, const std::string& v) { std::cout << std::left << std::setw(14) << k << v << "\n"; };
            row("file", m.path());
            row("layout", to_string(c.layout));
            row("dim", std::to_string(c.dim));
            row("depth", std::to_string(c.depth));
            row("heads", std::to_string(c.heads) + " (head dim " + std::to_string(c.head_dim) + ")");
            row("patch", std::to_string(c.patch));
            row("registers", std::to_string(c.registers));
            row("mlp", to_string(c.mlp) + " (hidden " + std::to_string(c.mlp_hidden) + ")");
            row("attention", to_string(c.attention) + (c.retrofit() ? " (retrofit; trained with " + to_string(c.trained_attention) + ")" : ""));
            row("pos_interp", to_string(c.pos_interp));
            row("layer_scale", c.layer_scale ? "yes" : "no");
            std::ostringstream eps;
            eps << c.eps;
            row("eps", eps.str());
            row("dtype", to_string(c.dtype));
            row("parameters", std::to_string(c.parameters));
            row("native grid", std::to_string(c.grid) + "x" + std::to_string(c.grid) + " (" + std::to_string(c.native_size()) + " px)");
            std::ostringstream ms;
            ms << c.mean[0] << "," << c.mean[1] << "," << c.mean[2] << " / " << c.std[0] << "," << c.std[1] << "," << c.std[2];
            row("mean / std", ms.str());
            // Everything else the file states about itself (provenance, training, metrics).
            const SafetensorsFile file(m.path());
            if (!file.metadata().empty()) std::cout << "metadata\n";
            for (const auto& [key, value] : file.metadata())
                std::cout << "  " << std::left << std::setw(22) << key << (value.size() > 100 ? value.substr(0, 97) + "..." : value)
                          << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
