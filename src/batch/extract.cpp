#include "vitreg/extract.hpp"

#include <tbb/task_arena.h>

#include <algorithm>
#include <numeric>

#include <nlohmann/json.hpp>

#include "batch_input.hpp"
#include "durable_job.hpp"
#include "feature_table.hpp"
#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

std::vector<std::size_t> shard_positions(const std::vector<std::string>& inputs, int index, int count) {
    if (count < 1 || index < 0 || index >= count)
        throw UsageError("bad shard " + std::to_string(index) + "/" + std::to_string(count) +
                         " (expected K/N with 0 <= K < N)");
    std::vector<std::size_t> order(inputs.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    if (count == 1) return order;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return inputs[a] < inputs[b]; });
    const std::size_t n = inputs.size(), k = static_cast<std::size_t>(index), c = static_cast<std::size_t>(count);
    return {order.begin() + static_cast<std::ptrdiff_t>(n * k / c), order.begin() + static_cast<std::ptrdiff_t>(n * (k + 1) / c)};
}

std::string shard_dir(const std::string& out_dir, int index, int count) {
    if (count == 1) return out_dir;
    return out_dir + "/shard-" + std::to_string(index) + "-of-" + std::to_string(count);
}

namespace {

// What must be equal for two runs to share an OUT_DIR: the model's bytes and every option
// that changes a written byte (not threads or batch: results do not depend on them).
nlohmann::ordered_json job_identity(const Model& model, const std::vector<std::string>& inputs, const ExtractOptions& o) {
    const Config& c = model.config();
    std::string listing;
    for (const auto& p : inputs) listing += p + '\n';
    return {
        {"job", "vitreg extract"},
        {"model", model.path()},
        {"model_digest", batch::file_digest(model.path())},
        {"attention", to_string(c.attention)},
        {"pos_interp", to_string(c.pos_interp)},
        {"resize", o.resize.to_string()},
        {"format", o.format == FeatureFormat::Npy ? "npy" : "safetensors"},
        {"patch_tokens", o.patch_tokens},
        {"max_pixels", o.image_limits.max_pixels},
        {"max_tokens", o.max_tokens},
        {"inputs", inputs.size()},
        {"inputs_digest", batch::text_digest(listing)},
        {"shard", std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count)},
    };
}

}  // namespace

ExtractSummary extract_features(const Model& model, const std::vector<std::string>& inputs, const ExtractOptions& options,
                                const ExtractProgress& progress) {
    const Config& c = model.config();
    const int D = c.dim, R = c.registers;
    const std::size_t batch = static_cast<std::size_t>(std::max(1, options.batch));
    const auto mine = shard_positions(inputs, options.shard_index, options.shard_count);
    const std::string out = shard_dir(options.out_dir, options.shard_index, options.shard_count);
    const batch::DurableJob job(out, job_identity(model, inputs, options), mine.size(), options.chunk_rows,
                                options.resume, options.overwrite);
    if (options.patch_tokens) make_dirs(out + "/patch");

    tbb::task_arena arena(options.threads > 0 ? options.threads : tbb::task_arena::automatic);
    const ForwardOptions fwd{options.threads, options.max_tokens};

    std::vector<batch::Chunk> chunks;
    std::size_t rows_before = 0;  // ok rows of the chunks before: patch files are numbered by them
    for (std::size_t k = 0; k < job.chunk_count(); ++k) {
        const std::size_t begin = job.chunk_begin(k), end = job.chunk_end(k);
        auto done = job.load(k);
        if (!done) {
            std::vector<std::string> paths;
            for (std::size_t i = begin; i < end; ++i) paths.push_back(inputs[mine[i]]);
            batch::ChunkData data;
            ExtractSummary counts;
            auto collect = [&](std::size_t start, const std::vector<batch::Prepared>& prepared,
                               const std::vector<batch::Ran>& ran) {
                const std::size_t count = prepared.size();
                for (std::size_t i = 0; i < count; ++i) {
                    nlohmann::ordered_json row;
                    data.input_index.push_back(mine[begin + start + i]);
                    if (batch::start_row(row, paths[start + i], prepared[i], counts)) {
                        const Features& f = *ran[i].features;
                        const int b = ran[i].index;
                        const std::size_t r = rows_before + data.ok++;
                        row["status"] = "ok";
                        row["row"] = r;
                        row["height"] = prepared[i].pixels->height;
                        row["width"] = prepared[i].pixels->width;
                        row["grid"] = {f.grid_h, f.grid_w};
                        data.cls.insert(data.cls.end(), f.cls_of(b), f.cls_of(b) + D);
                        const auto p = f.pooled_of(b);
                        data.pooled.insert(data.pooled.end(), p.begin(), p.end());
                        data.registers.insert(data.registers.end(), f.registers_of(b),
                                              f.registers_of(b) + static_cast<std::size_t>(R) * D);
                        if (options.patch_tokens)
                            batch::write_array(out + "/patch/" + std::to_string(r), "patch",
                                               ArrayRef{{f.grid_h, f.grid_w, D}, f.patches_of(b)}, options.format);
                    }
                    data.rows.push_back(std::move(row));
                }
                if (progress) progress(begin + start + count, mine.size());
            };
            batch::stream_batches(model, paths.data(), paths.size(), batch, options.resize, options.image_limits, Probe{},
                                  fwd, arena, collect);
            job.save(k, data, D, R);
            done = job.load(k);
            if (!done) throw IoError(out + ": chunk " + std::to_string(k) + " did not read back");
        } else if (progress) {
            progress(end, mine.size());
        }
        rows_before += done->ok;
        chunks.push_back(std::move(*done));
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
    return batch::write_feature_table(out, batch::rows_in_order(chunks), D, R, options.format, model.path(), run);
}

}  // namespace vitreg
