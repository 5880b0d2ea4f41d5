#pragma once
// A nearest-neighbour index over extracted features (FAISS): cosine similarity as the inner
// product of L2-normalized rows, every id mapped back to the image it came from (its key, its
// file or its tar shard and offset, and the manifest row's metadata).
//
// On disk an index is a folder, each file written atomically, index.json last (its presence
// means done):
//   index.faiss  FAISS's own write_index of the trained, filled index (ids 0..n-1 = the rows)
//   ids.jsonl    one line per id: {"key", "path" | "shard" + "offset", "metadata": {...}}
//   index.json   format, factory, metric, dim, count, feature, the source's folder and digest,
//                the training and recall samples, the recall@10 measured, index.faiss's size and digest
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vitreg/option_spec.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg {

// How `vitreg index` builds: a FAISS factory string, or one picked to fit a memory budget.
struct IndexOptions {
    std::string factory;                       // "Flat", "IVF1024,PQ32", "HNSW32", ...; "" = choose_factory
    std::uint64_t memory_bytes = 4ull << 30;   // the budget choose_factory fits (--memory)
    std::string feature = "cls";               // cls | pooled | embedding: the extract output's array
    std::int64_t train_sample = 0;             // rows trained on; 0 = the rule's (choose_factory)
    std::int64_t recall_queries = 200;         // held-out rows whose recall@10 against exact search is reported
    std::uint64_t seed = 0;                    // the samples' random draw
    int threads = 0;                           // FAISS's OpenMP threads (0 = its default)
};

// IndexOptions as the command line and Python take them (vitreg/option_spec.hpp): factory,
// memory ("4G", "512M", bytes), feature, train-sample, recall-queries, seed, threads.
const OptionTable<IndexOptions, 7>& index_option_table();
// "4G", "1.5G", "512M", "64K" or bytes; UsageError naming `label` for anything else.
std::uint64_t parse_memory(const std::string& text, const std::string& label);

// The autofaiss-style rule (docs/retrieval.md "Choosing an index"), for n rows of d floats within
// `memory_bytes`: Flat when n <= 100,000 and n·d·4 fits; else IVF{c},Flat when the vectors, ids and
// centroids (n·(d·4 + 8) + c·d·4) fit; else IVF{c},PQ{m}, with c the power of two nearest 4·√n
// (16..65536) and m the largest divisor of d in 1..min(64, d) whose codes, ids and centroids
// (n·(m + 8) + c·d·4) fit. Never HNSW (Debian's FAISS builds it too slowly; --factory still can).
// Throws UsageError when even IVF{c},PQ1 does not fit.
std::string choose_factory(std::int64_t n, int d, std::uint64_t memory_bytes);
// The rows trained on for `factory` over n rows of d floats: none for Flat and HNSW; for IVF{c}
// and PQ, min(n, max(64·c, 256·40), 10^6, the rows whose copy takes half of `memory_bytes`), at
// least 256 (FAISS asks 39..256 points per centroid; fewer train, with its warning).
std::int64_t default_train_sample(const std::string& factory, std::int64_t n, int d, std::uint64_t memory_bytes);

// One indexed image: what search results name.
struct IndexEntry {
    std::string key;     // the manifest row's "key", else its "path"
    std::string path;    // the image file ("" for a shard member)
    std::string shard;   // the tar shard it was read from ("" for a file)
    std::int64_t offset = -1;  // the member's header offset in the shard (-1: none)
    nlohmann::json metadata = nlohmann::json::object();  // the manifest row less status, error, row

    nlohmann::json to_json() const;
    static IndexEntry from_json(const nlohmann::json& row, const std::string& where);  // UsageError naming `where`
};

// Vectors to index: `rows` × `dim` floats (not yet normalized) and each row's entry, from
// memory (tests, Python) or mapped from an extract output folder (read_feature_source).
struct FeatureSource {
    const float* data = nullptr;
    std::int64_t rows = 0;
    int dim = 0;
    std::vector<IndexEntry> entries;  // rows of them
    std::string folder, feature, digest;  // where they came from (index.json); digest of manifest and array
    std::shared_ptr<const void> keep;     // what keeps `data` alive (a mapped file)
    nlohmann::json run = nlohmann::json::object();  // the extract's run.json (model, pixel options)
};
// The extract output OUT: OUT/manifest.jsonl and OUT/{feature}.npy or OUT/features.safetensors,
// the array mapped, not copied. UsageError naming the file: no manifest, no such feature, an
// array that is not float32 [rows, D], a manifest whose ok rows disagree with it.
// An extract --layout shards OUT (OUT/NNNNN.keys.jsonl with OUT/NNNNN.{feature}.npy or
// OUT/NNNNN.safetensors): the shards' ok rows and arrays in shard order, the arrays joined in a copy.
FeatureSource read_feature_source(const std::string& folder, const std::string& feature);

struct IndexReport {
    std::string factory;
    std::int64_t count = 0, train_sample = 0, recall_queries = 0;
    int dim = 0;
    double recall_at_10 = 1;  // of the built index against exact search on the held-out rows
    double build_seconds = 0;
};

// Builds the index of `source` into the folder `out` (created; its files replaced atomically).
IndexReport build_index(const FeatureSource& source, const std::string& out, const IndexOptions& options);

struct SearchHit {
    std::int64_t id = -1;  // -1: fewer than k vectors indexed
    float score = 0;       // cosine similarity
};

class Index {
public:
    // Reads INDEX/index.json, ids.jsonl and index.faiss. UsageError naming the file for a missing
    // or corrupt one, or one that disagrees with the others (count, dim, size).
    explicit Index(const std::string& folder);
    ~Index();
    Index(Index&&) noexcept;
    Index& operator=(Index&&) noexcept;

    int dim() const;
    std::int64_t size() const;
    const nlohmann::json& info() const;  // index.json
    IndexEntry entry(std::int64_t id) const;  // read from ids.jsonl on demand (UsageError for a bad id or line)
    const std::string& folder() const;
    // A hit as `vitreg search` prints it: id, key, score, path or shard and offset, metadata.
    nlohmann::json describe(const SearchHit& hit) const;
    // The k best of each of n query rows (normalized here, so any scale), best first.
    // UsageError for k outside 1..min(size, 1024).
    std::vector<std::vector<SearchHit>> search(const float* queries, std::int64_t n, int k) const;
    // The same into caller arrays [n, k] (Python's zero-copy outputs).
    void search(const float* queries, std::int64_t n, int k, float* scores, std::int64_t* ids) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The bytes of the member whose header is at `offset` in the uncompressed tar `shard` (extended
// headers before it stepped over). UsageError naming the shard: a compressed shard (gzip, bzip2,
// zstd, xz: no thumbnail), an offset that is no valid header, a member that is not a regular file,
// is truncated, or is larger than `max_bytes`.
std::string read_tar_member(const std::string& shard, std::int64_t offset, std::uint64_t max_bytes);
// An indexed image's bytes: its shard member, else its file; UsageError over `max_bytes`.
std::string read_entry_bytes(const IndexEntry& entry, std::uint64_t max_bytes);

class Model;
struct Pixels;
struct ResizeSpec;
// One image's vector to search with: its `feature` (cls | pooled | embedding) as `vitreg
// extract` writes it (UsageError for embedding on a model without a projection).
std::vector<float> query_vector(const Model& model, const Pixels& pixels, const std::string& feature, int threads = 0);
// What a search should be told when its model is not the extract's (index.json's source.run: its
// model path), a line; "" when they agree or it is not stated.
std::string query_mismatch(const nlohmann::json& info, const Model& model);
// The pixel options the index's features were extracted with (index.json's source.run.resize, as
// ResizeSpec::to_string writes it); nullopt when the index does not state them. UsageError naming
// index.json when it states them unreadably.
std::optional<ResizeSpec> extracted_pixels(const nlohmann::json& info);
// The pixel options a search runs its queries with: the extract's where the index states them,
// else `requested`. `given`: the pixel options the caller named (pixel_option_table() names, each
// with the label to refuse it by: "--resize", "resize="); one that, resolved for `model`,
// contradicts the extract's is refused (UsageError naming it).
ResizeSpec query_pixels(const nlohmann::json& info, const Model& model, const ResizeSpec& requested,
                        const std::vector<std::pair<std::string, std::string>>& given);

}  // namespace vitreg
