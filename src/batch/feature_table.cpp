#include "feature_table.hpp"

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "batch_input.hpp"
#include "core/safetensors.hpp"
#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::batch {

namespace {

// Appends rows' bytes to an AtomicFile through a buffer, so a million small rows cost few syscalls.
class BufferedOut {
public:
    explicit BufferedOut(AtomicFile& f) : f_(f) { buf_.reserve(kSize); }
    void add(const void* p, std::size_t n) {
        if (buf_.size() + n > kSize) flush();
        buf_.append(static_cast<const char*>(p), n);
    }
    void flush() {
        f_.write(buf_);
        buf_.clear();
    }

private:
    static constexpr std::size_t kSize = 4u << 20;
    AtomicFile& f_;
    std::string buf_;
};

// The ok rows' slices of tensor `name`, `row_bytes` each, in order.
void copy_tensor(BufferedOut& out, const std::vector<TableRow>& rows, const std::vector<std::int64_t>& ok_at,
                 const std::string& name, std::size_t row_bytes) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (ok_at[i] < 0) continue;
        const TensorView& t = rows[i].chunk->file->get(name);
        out.add(t.data + static_cast<std::size_t>(ok_at[i]) * row_bytes, row_bytes);
    }
    out.flush();
}

// Each row's index among its chunk's ok rows (the chunk's tensors hold only those), -1 for failed rows.
std::vector<std::int64_t> ok_positions(const std::vector<TableRow>& rows) {
    std::vector<std::int64_t> ok_at(rows.size(), -1);
    std::map<const Chunk*, std::vector<std::int64_t>> chunk_ok;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Chunk& c = *rows[i].chunk;
        auto& index = chunk_ok[&c];
        if (index.empty()) {
            std::int64_t k = 0;
            for (const auto& r : c.rows) index.push_back(r.value("status", "") == "ok" ? k++ : -1);
        }
        ok_at[i] = index[rows[i].at];
    }
    return ok_at;
}

// PREFIX<name>.npy for each array, or PREFIXfeatures.safetensors (PREFIX.safetensors when the
// prefix ends in a dot), over the ok rows (`n` of them).
void write_arrays(const std::string& prefix, const std::vector<TableRow>& rows, const std::vector<std::int64_t>& ok_at,
                  std::int64_t n, const std::vector<TableArray>& arrays, FeatureFormat format,
                  const std::string& model_path) {
    std::map<std::string, std::size_t> row_bytes;
    std::vector<std::pair<std::string, ArrayRef>> shaped;
    for (const auto& a : arrays) {
        std::vector<std::int64_t> shape{n};
        shape.insert(shape.end(), a.row_shape.begin(), a.row_shape.end());
        std::size_t bytes = sizeof(float);
        for (const auto d : a.row_shape) bytes *= static_cast<std::size_t>(d);
        row_bytes[a.name] = bytes;
        shaped.push_back({a.name, ArrayRef{shape}});
    }
    if (format == FeatureFormat::Npy) {
        for (const auto& [name, shape] : shaped) {
            AtomicFile f(prefix + name + ".npy");
            f.write(npy_header(shape));
            BufferedOut out(f);
            copy_tensor(out, rows, ok_at, name, row_bytes[name]);
            f.commit();
        }
    } else if (!shaped.empty()) {
        const std::map<std::string, ArrayRef> tensors(shaped.begin(), shaped.end());  // data in name order
        AtomicFile f(prefix + (prefix.back() == '.' ? "safetensors" : "features.safetensors"));
        f.write(safetensors_header(tensors, {{"model", model_path}}));
        BufferedOut out(f);
        for (const auto& [name, shape] : tensors) copy_tensor(out, rows, ok_at, name, row_bytes[name]);
        f.commit();
    }
}

// OUT/NNNNN.patch.safetensors: the shard's per-row files `patch/<job row>.safetensors` gathered,
// tensor "<shard row>" each ([grid_h, grid_w, dim] as the manifest row says), the rows' keys in
// the metadata. `job_rows` are the rows' numbers among the job's ok rows (-1: failed).
void write_shard_patches(const std::string& out_dir, const std::string& stem, const std::vector<TableRow>& rows,
                         const std::vector<std::int64_t>& job_rows, int dim, const std::string& model_path) {
    std::map<std::string, ArrayRef> tensors;
    std::map<std::string, std::string> files;
    nlohmann::json keys = nlohmann::json::array();
    for (std::size_t i = 0, n = 0; i < rows.size(); ++i) {
        if (job_rows[i] < 0) continue;
        const auto& row = rows[i].chunk->rows[rows[i].at];
        const std::string name = std::to_string(n++);
        const auto grid = row.at("grid");
        tensors[name] = ArrayRef{{grid.at(0).get<std::int64_t>(), grid.at(1).get<std::int64_t>(), dim}};
        files[name] = out_dir + "/patch/" + std::to_string(job_rows[i]) + ".safetensors";
        keys.push_back(row.value("key", row.value("path", "")));
    }
    const std::string path = out_dir + "/" + stem + "patch.safetensors";
    AtomicFile f(path);
    f.write(safetensors_header(tensors, {{"model", model_path}, {"keys", keys.dump()}}));
    for (const auto& [name, shape] : tensors) {  // data in name order, as the header lays it out
        const SafetensorsFile file(files[name]);
        const TensorView& t = file.get("patch");
        if (t.dtype != DType::F32 || t.shape != shape.shape)
            throw IoError(files[name] + ": its patch tokens do not have the shape its manifest row gives; rerun "
                                        "with --overwrite");
        f.write(t.data, shape.numel() * sizeof(float));
    }
    f.commit();
}

}  // namespace

std::vector<TableRow> rows_in_order(const std::vector<Chunk>& chunks) {
    std::vector<TableRow> rows;
    for (const auto& c : chunks)
        for (std::size_t i = 0; i < c.rows.size(); ++i) rows.push_back({&c, i});
    return rows;
}

std::vector<TableArray> extract_table(int dim, int registers, int embedding_dim) {
    std::vector<TableArray> a{{"cls", {dim}}, {"pooled", {dim}}};
    if (registers > 0) a.push_back({"registers", {registers, dim}});
    if (embedding_dim > 0) a.push_back({"embedding", {embedding_dim}});
    return a;
}

BatchSummary write_feature_table(const std::string& out_dir, const std::vector<TableRow>& rows,
                                 const std::vector<TableArray>& arrays, FeatureFormat format,
                                 const std::string& model_path, nlohmann::json run) {
    const std::vector<std::int64_t> ok_at = ok_positions(rows);
    BatchSummary summary;
    summary.inputs = rows.size();
    std::vector<nlohmann::ordered_json> manifest;
    manifest.reserve(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        nlohmann::ordered_json row = rows[i].chunk->rows[rows[i].at];
        if (ok_at[i] >= 0) {
            row["row"] = summary.ok;
            if (row.contains("file")) {
                const std::string file = row["file"].get<std::string>();
                row["file"] = std::to_string(summary.ok) + file.substr(std::min(file.find('.'), file.size()));
            }
            ++summary.ok;
        } else {
            ++summary.failed;
        }
        manifest.push_back(std::move(row));
    }

    write_arrays(out_dir + "/", rows, ok_at, static_cast<std::int64_t>(summary.ok), arrays, format, model_path);
    finish(out_dir, manifest, std::move(run), summary);
    return summary;
}

}  // namespace vitreg::batch

namespace vitreg::batch {

void write_shard_tables(const std::string& out_dir, const std::vector<TableRow>& rows,
                        const std::vector<TableArray>& arrays, FeatureFormat format, const std::string& model_path,
                        int patch_dim) {
    const std::vector<std::int64_t> ok_at = ok_positions(rows);
    std::vector<std::int64_t> job_rows(rows.size(), -1);  // numbers of the per-row files
    for (std::size_t i = 0, n = 0; i < rows.size(); ++i)
        if (ok_at[i] >= 0) job_rows[i] = static_cast<std::int64_t>(n++);
    for (std::size_t begin = 0, end = 0; begin < rows.size(); begin = end) {
        auto shard_of = [&](std::size_t i) { return rows[i].chunk->input_index[rows[i].at] >> 32; };
        for (end = begin; end < rows.size() && shard_of(end) == shard_of(begin); ++end) {
        }
        const std::vector<TableRow> mine(rows.begin() + static_cast<std::ptrdiff_t>(begin),
                                         rows.begin() + static_cast<std::ptrdiff_t>(end));
        const std::vector<std::int64_t> at(ok_at.begin() + static_cast<std::ptrdiff_t>(begin),
                                           ok_at.begin() + static_cast<std::ptrdiff_t>(end));
        char stem[32];
        std::snprintf(stem, sizeof stem, "%05llu.", static_cast<unsigned long long>(shard_of(begin)));
        std::string keys;
        std::int64_t n = 0;
        for (std::size_t i = 0; i < mine.size(); ++i) {
            nlohmann::ordered_json row = mine[i].chunk->rows[mine[i].at];
            row.erase("row");
            if (at[i] >= 0) row["row"] = n++;
            keys += row.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
        }
        write_arrays(out_dir + "/" + stem, mine, at, n, arrays, format, model_path);
        if (patch_dim > 0)
            write_shard_patches(out_dir, stem, mine,
                                std::vector<std::int64_t>(job_rows.begin() + static_cast<std::ptrdiff_t>(begin),
                                                          job_rows.begin() + static_cast<std::ptrdiff_t>(end)),
                                patch_dim, model_path);
        write_file_atomic(out_dir + "/" + stem + "keys.jsonl", keys);
    }
}

}  // namespace vitreg::batch
