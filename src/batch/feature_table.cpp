#include "feature_table.hpp"

#include <cstring>
#include <map>
#include <memory>

#include "batch_input.hpp"
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

}  // namespace

std::vector<TableRow> rows_in_order(const std::vector<Chunk>& chunks) {
    std::vector<TableRow> rows;
    for (const auto& c : chunks)
        for (std::size_t i = 0; i < c.rows.size(); ++i) rows.push_back({&c, i});
    return rows;
}

ExtractSummary write_feature_table(const std::string& out_dir, const std::vector<TableRow>& rows, int dim, int registers,
                                   FeatureFormat format, const std::string& model_path, nlohmann::json run) {
    // Each row's index among its chunk's ok rows (the chunk's tensors hold only those).
    std::vector<std::int64_t> ok_at(rows.size(), -1);
    std::map<const Chunk*, std::vector<std::int64_t>> chunk_ok;
    ExtractSummary summary;
    summary.inputs = rows.size();
    std::vector<nlohmann::ordered_json> manifest;
    manifest.reserve(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Chunk& c = *rows[i].chunk;
        auto& index = chunk_ok[&c];
        if (index.empty()) {
            std::int64_t k = 0;
            for (const auto& r : c.rows) index.push_back(r.value("status", "") == "ok" ? k++ : -1);
        }
        ok_at[i] = index[rows[i].at];
        nlohmann::ordered_json row = c.rows[rows[i].at];
        if (ok_at[i] >= 0) row["row"] = summary.ok++;
        else ++summary.failed;
        manifest.push_back(std::move(row));
    }

    const auto n = static_cast<std::int64_t>(summary.ok);
    const std::size_t vec = static_cast<std::size_t>(dim) * sizeof(float);
    const std::vector<std::pair<std::string, ArrayRef>> arrays = [&] {
        std::vector<std::pair<std::string, ArrayRef>> a{{"cls", {{n, dim}}}, {"pooled", {{n, dim}}}};
        if (registers > 0) a.push_back({"registers", {{n, registers, dim}}});
        return a;
    }();
    auto row_bytes = [&](const std::string& name) { return name == "registers" ? vec * registers : vec; };
    const std::string dir = out_dir + "/";
    if (format == FeatureFormat::Npy) {
        for (const auto& [name, shape] : arrays) {
            AtomicFile f(dir + name + ".npy");
            f.write(npy_header(shape));
            BufferedOut out(f);
            copy_tensor(out, rows, ok_at, name, row_bytes(name));
            f.commit();
        }
    } else {
        const std::map<std::string, ArrayRef> tensors(arrays.begin(), arrays.end());  // data in name order
        AtomicFile f(dir + "features.safetensors");
        f.write(safetensors_header(tensors, {{"model", model_path}}));
        BufferedOut out(f);
        for (const auto& [name, shape] : tensors) copy_tensor(out, rows, ok_at, name, row_bytes(name));
        f.commit();
    }
    finish(out_dir, manifest, std::move(run), summary);
    return summary;
}

}  // namespace vitreg::batch
