#include "vitreg/extract.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "vitreg/error.hpp"
#include "vitreg/version.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

// One input after decode + preprocess: pixels, or the reason it failed.
struct Prepared {
    std::optional<Pixels> pixels;
    std::string error;
};

void write_array(const std::string& path_without_suffix, const std::string& tensor_name, const ArrayRef& a,
                 FeatureFormat format) {
    if (format == FeatureFormat::Npy) write_npy(path_without_suffix + ".npy", a);
    else write_safetensors(path_without_suffix + ".safetensors", {{tensor_name, a}});
}

}  // namespace

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
        std::vector<Prepared> prepared(count);
        arena.execute([&] {
            tbb::parallel_for(std::size_t(0), count, [&](std::size_t i) {
                const std::string& path = inputs[start + i];
                try {
                    prepared[i].pixels =
                        preprocess(decode_image(path, options.image_limits), options.resize, c.patch, c.mean, c.std, path);
                } catch (const Error& e) {
                    prepared[i].error = e.what();
                } catch (const std::bad_alloc&) {
                    prepared[i].error = path + ": out of memory while decoding";
                }
            });
        });

        // Same-size images run as one forward; rows keep input order.
        std::map<std::pair<int, int>, std::vector<std::size_t>> by_size;
        for (std::size_t i = 0; i < count; ++i)
            if (prepared[i].pixels) by_size[{prepared[i].pixels->height, prepared[i].pixels->width}].push_back(i);
        std::vector<std::shared_ptr<const Features>> out(count);  // the group forward holding row i
        std::vector<int> index_in_group(count, 0);
        for (const auto& [size, members] : by_size) {
            const auto [h, w] = size;
            const std::size_t plane = static_cast<std::size_t>(3) * h * w;
            std::vector<float> pixels(plane * members.size());
            for (std::size_t k = 0; k < members.size(); ++k) {
                std::copy(prepared[members[k]].pixels->chw.begin(), prepared[members[k]].pixels->chw.end(),
                          pixels.begin() + static_cast<std::ptrdiff_t>(k * plane));
                index_in_group[members[k]] = static_cast<int>(k);
            }
            auto f = std::make_shared<const Features>(model.forward(pixels.data(), static_cast<int>(members.size()), h, w, fwd));
            for (std::size_t m : members) out[m] = f;
        }

        for (std::size_t i = 0; i < count; ++i) {
            nlohmann::ordered_json& row = manifest[start + i];
            row["path"] = inputs[start + i];
            if (!prepared[i].pixels) {
                row["status"] = "error";
                row["error"] = prepared[i].error;
                ++summary.failed;
                continue;
            }
            const Features& f = *out[i];
            const int b = index_in_group[i];
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
                write_array(options.out_dir + "/patch/" + std::to_string(r), "patch",
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
    std::string lines;
    for (const auto& row : manifest) lines += row.dump() + "\n";
    write_file_atomic(dir + "manifest.jsonl", lines);
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
        {"inputs", summary.inputs},
        {"ok", summary.ok},
        {"failed", summary.failed},
        {"vitreg_version", VITREG_VERSION},
    };
    write_file_atomic(dir + "run.json", run.dump(2) + "\n");
    return summary;
}

}  // namespace vitreg
