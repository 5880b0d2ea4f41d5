#include "vitreg/extract.hpp"

#include <nlohmann/json.hpp>

#include "chunked_job.hpp"
#include "feature_table.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"

namespace vitreg {

nlohmann::ordered_json ExtractOptions::to_json() const {
    nlohmann::ordered_json j;
    j["patch_tokens"] = patch_tokens;
    if (project) j["project"] = true;
    if (shard_layout) j["output_layout"] = "shards";
    return j;
}

BatchSummary extract_features(const Model& model, const std::vector<std::string>& inputs, const ExtractOptions& options,
                              const BatchProgress& progress) {
    const Config& c = model.config();
    const int D = c.dim, R = model.registers();
    const std::string out = shard_dir(options.out_dir, options.shard_index, options.shard_count);
    if (options.project && c.proj_dim <= 0)
        throw UsageError("--project: " + model.path() + " has no projection (only CLIP checkpoints: OpenCLIP 'proj', HF " +
                         "'visual_projection', timm's CLIP head); its features are cls, pooled and patch tokens");
    const int E = options.project ? c.proj_dim : 0;
    if (options.shard_layout) {
        for (const auto& input : inputs)
            if (!is_shard_path(input))
                throw UsageError("--layout shards: " + input + " is not a webdataset shard (.tar, .tar.gz, .tar.zst)");
    }
    const auto table = batch::extract_table(D, R, E);
    // --layout shards gathers the per-row patch files into one per shard: safetensors, read back mapped
    const FeatureFormat row_format = options.shard_layout ? FeatureFormat::Safetensors : options.format;

    auto identity = batch::job_identity("vitreg extract", model, inputs, options);
    identity.update(options.to_json());

    batch::ChunkWork work;
    work.tensors = table;
    if (options.patch_tokens) work.subdirs.push_back("patch");
    work.image = [&](batch::ChunkData& chunk, nlohmann::ordered_json&, std::size_t r, std::size_t,
                     const batch::Prepared&, const batch::Ran& ran) {
        const Features& f = *ran.features;
        const int b = ran.index;
        auto append = [&](const char* name, const float* p, std::size_t n) {
            auto& data = chunk.tensors[name].data;
            data.insert(data.end(), p, p + n);
        };
        append("cls", f.cls_of(b), static_cast<std::size_t>(D));
        const auto pooled = f.pooled_of(b);
        append("pooled", pooled.data(), pooled.size());
        if (R > 0) append("registers", f.registers_of(b), static_cast<std::size_t>(R) * D);
        if (E > 0) append("embedding", f.embedding_of(b), static_cast<std::size_t>(E));
        if (options.patch_tokens)
            batch::write_array(out + "/patch/" + std::to_string(r), "patch",
                               ArrayRef{{f.grid_h, f.grid_w, D}, f.patches_of(b)}, row_format);
    };
    const auto run = batch::run_chunked(model, inputs, options, std::move(identity), Probe{}, work, progress);

    nlohmann::json info = {
        {"model", model.path()},
        {"config", to_json(c)},  // the whole configuration, as config_from_json reads it back
        {"family", to_string(c.family)},
        {"layout", c.source},
        {"attention", to_string(c.attention)},
        {"precision", model.precision().describe()},
        {"intervention", model.intervention().to_string()},
        {"pos_interp", to_string(c.pos_interp)},
        {"resize", options.resize.to_string()},
        {"format", to_string(options.format)},
        {"dim", D},
        {"registers", R},
        // without a class token, cls holds the pooled feature (fc_norm of the mean patch token)
        {"class_token", c.class_token},
        {"embedding_dim", E},
        // registers.npy holds the trained registers, then the test-time ones
        {"trained_registers", c.registers},
        {"test_time_registers", model.intervention().test_time_registers},
        {"row_files", options.patch_tokens ? nlohmann::json{"patch/{row}" + file_extension(row_format)} : nlohmann::json::array()},
    };
    info.update(nlohmann::json(options.to_json()));
    const auto rows = batch::rows_in_order(run.chunks);
    if (options.shard_layout)
        batch::write_shard_tables(run.out_dir, rows, table, options.format, model.path(), options.patch_tokens ? D : 0);
    return batch::write_feature_table(run.out_dir, rows, options.shard_layout ? std::vector<batch::TableArray>{} : table,
                                      options.format, model.path(), std::move(info));
}

}  // namespace vitreg
