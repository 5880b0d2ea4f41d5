#include "vitreg/extract.hpp"

#include <tbb/task_arena.h>

#include <nlohmann/json.hpp>

#include "batch_input.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

ExtractSummary extract_features(const Model& model, const std::vector<std::string>& inputs, const ExtractOptions& options,
                                const ExtractProgress& progress) {
    const Config& c = model.config();
    const int D = c.dim, R = c.registers;
    const int batch = std::max(1, options.batch);
    make_dirs(options.out_dir);
    if (options.patch_tokens) make_dirs(options.out_dir + "/patch");

    std::vector<float> cls, pooled, regs;
    std::vector<nlohmann::ordered_json> manifest(inputs.size());  // keys in the documented order
    ExtractSummary summary;
    summary.inputs = inputs.size();
    tbb::task_arena arena(options.threads > 0 ? options.threads : tbb::task_arena::automatic);
    const ForwardOptions fwd{options.threads};

    for (std::size_t start = 0; start < inputs.size(); start += batch) {
        const std::size_t count = std::min<std::size_t>(batch, inputs.size() - start);
        const auto prepared = batch::prepare(model, &inputs[start], count, options.resize, options.image_limits, arena);
        const auto ran = batch::run_by_size(model, prepared, Probe{}, fwd);

        for (std::size_t i = 0; i < count; ++i) {
            nlohmann::ordered_json& row = manifest[start + i];
            if (!batch::start_row(row, inputs[start + i], prepared[i], summary)) continue;
            const Features& f = *ran[i].features;
            const int b = ran[i].index;
            const std::size_t r = summary.ok++;
            row["status"] = "ok";
            row["row"] = r;
            row["height"] = prepared[i].pixels->height;
            row["width"] = prepared[i].pixels->width;
            row["grid"] = {f.grid_h, f.grid_w};
            cls.insert(cls.end(), f.cls_of(b), f.cls_of(b) + D);
            const auto p = f.pooled_of(b);
            pooled.insert(pooled.end(), p.begin(), p.end());
            regs.insert(regs.end(), f.registers_of(b), f.registers_of(b) + static_cast<std::size_t>(R) * D);
            if (options.patch_tokens)
                batch::write_array(options.out_dir + "/patch/" + std::to_string(r), "patch",
                            ArrayRef{{f.grid_h, f.grid_w, D}, f.patches_of(b)}, options.format);
        }
        if (progress) progress(start + count, inputs.size());
    }

    const auto rows = static_cast<std::int64_t>(summary.ok);
    const ArrayRef cls_a{{rows, D}, cls.data()}, pooled_a{{rows, D}, pooled.data()}, regs_a{{rows, R, D}, regs.data()};
    const std::string dir = options.out_dir + "/";
    if (options.format == FeatureFormat::Npy) {
        write_npy(dir + "cls.npy", cls_a);
        write_npy(dir + "pooled.npy", pooled_a);
        if (R > 0) write_npy(dir + "registers.npy", regs_a);
    } else {
        std::map<std::string, ArrayRef> tensors{{"cls", cls_a}, {"pooled", pooled_a}};
        if (R > 0) tensors.emplace("registers", regs_a);
        write_safetensors(dir + "features.safetensors", tensors, {{"model", model.path()}});
    }
    const nlohmann::json run = {
        {"model", model.path()},
        {"layout", to_string(c.layout)},
        {"attention", to_string(c.attention)},
        {"pos_interp", to_string(c.pos_interp)},
        {"resize", options.resize.to_string()},
        {"format", options.format == FeatureFormat::Npy ? "npy" : "safetensors"},
        {"patch_tokens", options.patch_tokens},
        {"dim", D},
        {"registers", R},
    };
    batch::finish(options.out_dir, manifest, run, summary);
    return summary;
}

}  // namespace vitreg
