#include "chunked_job.hpp"

#include <tbb/task_arena.h>

#include <algorithm>

#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace batch {

nlohmann::ordered_json job_identity(const std::string& job, const Model& model, const std::vector<std::string>& inputs,
                                    const BatchOptions& o) {
    const Config& c = model.config();
    std::string listing;
    for (const auto& p : inputs) listing += p + '\n';
    return {
        {"job", job},
        {"model", model.path()},
        {"model_digest", file_digest(model.path())},
        {"attention", to_string(c.attention)},
        {"pos_interp", to_string(c.pos_interp)},
        {"precision", model.precision().describe()},
        {"intervention", model.intervention().to_string()},
        {"scales_digest", model.precision().scales.empty() ? "" : file_digest(model.precision().scales)},
        {"resize", o.resize.to_string()},
        {"format", to_string(o.format)},
        {"max_pixels", o.image_limits.max_pixels},
        {"max_tokens", o.max_tokens},
        {"inputs", inputs.size()},
        {"inputs_digest", text_digest(listing)},
        {"shard", std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count)},
    };
}

ChunkedRun run_chunked(const Model& model, const std::vector<std::string>& inputs, const BatchOptions& options,
                       nlohmann::ordered_json identity, const Probe& probe, const ChunkWork& work,
                       const BatchProgress& progress) {
    const std::size_t batch = static_cast<std::size_t>(std::max(1, options.batch));
    const auto source = open_inputs(inputs, options.image_limits, options.shard_index, options.shard_count);
    if (source->shards()) {
        // The samples the index found (this process's shards'): a shard rewritten since the last
        // run makes another job.
        std::string listing;
        for (const auto& n : source->names()) listing += n + '\n';
        identity["samples"] = source->size();
        identity["samples_digest"] = text_digest(listing);
    }
    const auto mine = source->mine(options.shard_index, options.shard_count);
    ChunkedRun run;
    run.out_dir = shard_dir(options.out_dir, options.shard_index, options.shard_count);
    const DurableJob job(run.out_dir, std::move(identity), mine.size(), options.chunk_rows, options.resume,
                         options.overwrite);
    for (const auto& d : work.subdirs) make_dirs(run.out_dir + "/" + d);
    tbb::task_arena arena(options.threads > 0 ? options.threads : tbb::task_arena::automatic);
    const ForwardOptions fwd{options.threads, options.max_tokens};

    StageSeconds stages;
    std::size_t rows_before = 0;  // ok rows of the chunks before: per-image files are numbered by them
    for (std::size_t k = 0; k < job.chunk_count(); ++k) {
        const std::size_t begin = job.chunk_begin(k), end = job.chunk_end(k);
        auto done = job.load(k);
        if (!done) {
            std::vector<std::string> names;
            for (std::size_t i = begin; i < end; ++i) names.push_back(source->names()[mine[i]]);
            auto read = [&](std::size_t start, std::size_t count) { return source->read(&mine[begin + start], count); };
            ChunkData data;
            for (const auto& t : work.tensors) data.tensors[t.name].row_shape = t.row_shape;
            BatchSummary counts;
            auto collect = [&](std::size_t start, const std::vector<Prepared>& prepared, const std::vector<Ran>& ran) {
                if (work.begin_batch) work.begin_batch(prepared, ran);
                for (std::size_t i = 0; i < prepared.size(); ++i) {
                    nlohmann::ordered_json row;
                    const std::size_t input = mine[begin + start + i];
                    data.input_index.push_back(source->order(input));
                    const bool ok = start_row(row, names[start + i], prepared[i], counts);
                    source->describe(input, row);
                    if (ok) {
                        const Features& f = *ran[i].features;
                        const std::size_t r = rows_before + data.ok++;
                        row["status"] = "ok";
                        row["row"] = r;
                        row["height"] = prepared[i].pixels->height;
                        row["width"] = prepared[i].pixels->width;
                        row["grid"] = {f.grid_h, f.grid_w};
                        row["precision"] = model.precision().describe();
                        work.image(data, row, r, i, prepared[i], ran[i]);
                    }
                    data.rows.push_back(std::move(row));
                }
                if (options.stage_progress) options.stage_progress(stages);
                if (progress) progress(begin + start + prepared.size(), mine.size());
            };
            stream_batches(model, names.data(), names.size(), read, batch, options.resize, options.image_limits, probe,
                           fwd, arena, collect, work.runner, &stages);
            job.save(k, data);
            done = job.load(k);
            if (!done) throw IoError(run.out_dir + ": chunk " + std::to_string(k) + " did not read back");
        } else if (progress) {
            progress(end, mine.size());
        }
        rows_before += done->ok;
        run.chunks.push_back(std::move(*done));
    }
    return run;
}

}  // namespace batch
}  // namespace vitreg
