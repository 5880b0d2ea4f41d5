// vitreg info MODEL: the resolved configuration.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/checkpoint_summary.hpp"
#include "vitreg/forward_memory.hpp"

namespace vitreg::cli {

namespace {

// The checkpoint as named, read header-only (its weights are never loaded); the loader's notes on stderr.
CheckpointSummary summarize(const ModelArgs& args) {
    const ModelRequest request = args.request();
    CheckpointSummary s = summarize_checkpoint(resolve_model_path(request.model), request.overrides);
    for (const auto& note : s.config.notes) status_out() << "vitreg: note: " << note << "\n";
    return s;
}

}  // namespace

void register_info(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("info", "print the resolved configuration of a checkpoint and its weights' memory at each "
                                           "precision (from the file's header: no weight is read)");
    auto args = std::make_shared<ModelArgs>();
    add_model_args(*cmd, *args);
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json,
                  "print one JSON object: file, config (every field, as Python's Model.config and run.json give it) and "
                  "the file's own metadata");
    cmd->callback([&run, args, json] {
        run = [args, json] {
            const CheckpointSummary s = summarize(*args);
            const Config& c = s.config;
            auto memory = weight_memory(s.tensors);
            const WeightQuantization& q = s.quantization;
            if (*json) {
                nlohmann::ordered_json out = {{"file", s.path}, {"config", to_json(c)}, {"metadata", nlohmann::json::object()},
                                              {"weight_bytes", nlohmann::json::object()}, {"missing_bytes", s.missing_bytes}};
                for (const auto& [key, value] : s.metadata) out["metadata"][key] = value;
                for (const auto& m : memory) out["weight_bytes"][m.format] = m.bytes;
                out["quantization"] = q.quantized() ? nlohmann::ordered_json{{"precision", to_string(q.precision)}, {"weight_bits", q.bits}}
                                                    : nlohmann::ordered_json(nullptr);
                // (a file's metadata is its author's text: bytes that are not UTF-8 print as U+FFFD)
                std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
                return 0;
            }
            auto row = [](const char* k, const std::string& v) { std::cout << std::left << std::setw(14) << k << v << "\n"; };
            row("file", s.path);
            if (s.missing_bytes > 0)
                row("truncated", format_bytes(s.missing_bytes) + " of tensor data lie past the end of the file (it cannot be loaded)");
            row("family", to_string(c.family));
            row("layout", c.source);
            row("dim", std::to_string(c.dim));
            row("depth", std::to_string(c.depth));
            row("heads", std::to_string(c.heads) + " (head dim " + std::to_string(c.head_dim) + ")");
            row("patch", std::to_string(c.patch));
            row("registers", std::to_string(c.registers));
            row("mlp", to_string(c.mlp) + " (hidden " + std::to_string(c.mlp_hidden) + ")" +
                           (c.mlp_norm ? ", a LayerNorm on the hidden activation" : ""));
            row("class token", !c.class_token                         ? "no (cls.npy holds the pooled feature)"
                               : !c.has_pos_embed()                ? "yes, without a position (rotary positions)"
                               : c.pos_embed_class                 ? "yes, with a position"
                                                                   : "yes, without a position (no_embed_class)");
            row("pre_norm", c.pre_norm ? "yes" : "no");
            row("biases", std::string("patch ") + (c.patch_bias ? "yes" : "no") + ", qkv " + (c.qkv_bias ? "yes" : "no"));
            row("final norm", c.final_norm ? "yes" : "no (identity)");
            row("pool", to_string(c.pool) + (c.fc_norm ? " + fc_norm" : "") +
                            (c.pool == Pool::Avg   ? " (pooled = mean of the patch tokens" + std::string(c.fc_norm ? ", fc_norm'd)" : ")")
                             : c.pool == Pool::Map ? " (pooled = the attention-pool head's probe over every token)"
                                                   : " (pooled.npy: the mean of the patch tokens)"));
            row("projection", c.proj_dim > 0 ? std::to_string(c.dim) + " -> " + std::to_string(c.proj_dim) + " (extract --project)"
                                             : std::string("none"));
            row("attention", to_string(c.attention) + (c.retrofit() ? " (retrofit; trained with " + to_string(c.trained_attention) + ")" : "") +
                                 (c.attn_norm ? ", a LayerNorm on its output" : ""));
            if (c.has_pos_embed()) row("pos_interp", to_string(c.pos_interp));
            if (c.rotary()) {
                std::ostringstream theta;
                theta << c.rope_theta;
                if (c.positions == Positions::RopeEva)
                    theta << ", reference grid " << c.rope_ref_grid[0] << "x" << c.rope_ref_grid[1];
                row("positions", to_string(c.positions) + " (theta " + theta.str() + ", q and k of the patches" +
                                     (c.has_pos_embed() ? "; beside the learned pos_embed)" : "; any grid, nothing resampled)"));
            }
            row("layer_scale", c.layer_scale ? "yes" : "no");
            std::ostringstream eps;
            eps << c.eps;
            row("eps", eps.str());
            row("dtype", to_string(c.dtype));
            if (q.quantized())
                row("quantized", to_string(q.precision) + ", " + std::to_string(q.bits) + "-bit weights with " +
                                     (q.precision == Precision::Int4 ? "a bf16 scale and zero point per group of 128 inputs"
                                                                     : "an fp32 scale per output channel") +
                                     "; runs only at " + to_string(q.precision) +
                                     " (MODEL@" + to_string(q.precision) + "), loaded without quantizing");
            row("parameters", std::to_string(c.parameters));
            if (q.quantized())  // the one format it runs in: the others would need the weights it came from
                memory.erase(std::remove_if(memory.begin(), memory.end(),
                                            [&](const WeightMemory& m) {  // (int4's is named for its group: int4-g128)
                                                return m.format.rfind(to_string(q.precision), 0) != 0;
                                            }),
                             memory.end());
            std::cout << "weights\n";
            for (const auto& m : memory)
                std::cout << "  " << std::left << std::setw(12) << m.format << std::setw(10) << format_bytes(m.bytes) << m.how << "\n";
            row("native grid", std::to_string(c.grid) + "x" + std::to_string(c.grid) + " (" + std::to_string(c.native_size()) + " px)");
            std::ostringstream ms;
            ms << c.mean[0] << "," << c.mean[1] << "," << c.mean[2] << " / " << c.std[0] << "," << c.std[1] << "," << c.std[2];
            row("mean / std", ms.str());
            std::ostringstream ev;
            if (c.eval_squash && c.eval_resize() == c.input_size)
                ev << to_string(c.pipeline) << ": " << c.input_size << "x" << c.input_size << " " << to_string(c.interpolation)
                   << ", no crop";
            else if (c.eval_squash)  // DeiT's processor, timm's crop_mode 'squash'
                ev << to_string(c.pipeline) << ": " << c.eval_resize() << "x" << c.eval_resize() << " "
                   << to_string(c.interpolation) << ", center crop " << c.input_size;
            else
                ev << to_string(c.pipeline) << ": short side " << c.eval_resize() << " " << to_string(c.interpolation)
                   << ", center crop " << c.input_size << " (crop_pct " << c.crop_pct << ")";
            row("resize eval", ev.str());
            // Everything else the file states about itself (provenance, training, metrics).
            // (a state dict states nothing about itself)
            if (!s.metadata.empty()) std::cout << "metadata\n";
            for (const auto& [key, value] : s.metadata)
                std::cout << "  " << std::left << std::setw(22) << key << (value.size() > 100 ? value.substr(0, 97) + "..." : value)
                          << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
