// `vitreg index`: the chosen FAISS index trained on a random sample, filled a block at a time
// (normalized copies: the source stays mapped), its recall@10 measured on held-out rows
// against exact search, and the folder written (index.json last). IVF-Flat and IVF-PQ are
// trained and filled by vitreg's own k-means and assignment (search/ivf_build.hpp), others by FAISS.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <tbb/global_control.h>
#include <unordered_set>

#include "search/exact_search.hpp"
#include "search/faiss_util.hpp"
#include "search/ivf_build.hpp"
#include "search/index_files.hpp"
#include "vitreg/error.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg {

namespace {

constexpr std::int64_t kAddBlock = 65536;

// `count` distinct rows of 0..n-1 not in `excluded` (Floyd's sampling: memory O(count)), sorted.
std::vector<std::int64_t> sample_rows(std::int64_t n, std::int64_t count, const std::set<std::int64_t>& excluded,
                                      std::mt19937_64& rng) {
    const std::int64_t pool = n - static_cast<std::int64_t>(excluded.size());
    count = std::min(count, pool);
    std::unordered_set<std::int64_t> picked;
    for (std::int64_t j = pool - count; j < pool; ++j) {
        const std::int64_t t = std::uniform_int_distribution<std::int64_t>(0, j)(rng);
        picked.insert(picked.count(t) ? j : t);
    }
    // Ranks among the rows not excluded, mapped to rows.
    std::vector<std::int64_t> ranks(picked.begin(), picked.end()), rows;
    std::sort(ranks.begin(), ranks.end());
    auto ex = excluded.begin();
    std::int64_t skipped = 0;
    for (const auto r : ranks) {
        while (ex != excluded.end() && *ex <= r + skipped) {
            ++ex;
            ++skipped;
        }
        rows.push_back(r + skipped);
    }
    return rows;
}

std::vector<float> normalized_rows(const FeatureSource& s, const std::vector<std::int64_t>& rows) {
    std::vector<float> out(rows.size() * static_cast<std::size_t>(s.dim));
    for (std::size_t i = 0; i < rows.size(); ++i)
        std::memcpy(out.data() + i * s.dim, s.data + rows[i] * s.dim, sizeof(float) * s.dim);
    normalize_rows(out.data(), static_cast<std::int64_t>(rows.size()), s.dim);
    return out;
}

void fill(faiss::Index& index, const FeatureSource& s) {
    std::vector<float> block;
    for (std::int64_t start = 0; start < s.rows; start += kAddBlock) {
        const std::int64_t count = std::min(kAddBlock, s.rows - start);
        block.assign(s.data + start * s.dim, s.data + (start + count) * s.dim);
        normalize_rows(block.data(), count, s.dim);
        if (own_ivf_build(index)) add_ivf(index, block.data(), count);
        else faiss_call("index: adding rows", [&] { index.add(count, block.data()); });
    }
}

// recall@10: the share of the exact top 10 of each held-out row that the index returns in its top 10.
double recall_at_10(const faiss::Index& index, const FeatureSource& s, const std::vector<float>& queries, std::int64_t nq) {
    const int k = static_cast<int>(std::min<std::int64_t>(10, s.rows));
    const auto exact = exact_search(s.data, s.rows, s.dim, queries.data(), nq, k);
    std::vector<float> scores(static_cast<std::size_t>(nq * k));
    std::vector<faiss::Index::idx_t> ids(scores.size());
    faiss_call("index: measuring recall", [&] { index.search(nq, queries.data(), k, scores.data(), ids.data()); });
    std::int64_t found = 0;
    for (std::int64_t i = 0; i < nq; ++i)
        for (const auto& hit : exact[static_cast<std::size_t>(i)])
            found += std::count(ids.begin() + i * k, ids.begin() + (i + 1) * k, hit.id);
    return nq ? static_cast<double>(found) / static_cast<double>(nq * k) : 1.0;
}

}  // namespace

IndexReport build_index(const FeatureSource& s, const std::string& out, const IndexOptions& o) {
    const auto start = std::chrono::steady_clock::now();
    if (s.rows < 1 || s.dim < 1 || static_cast<std::int64_t>(s.entries.size()) != s.rows)
        throw UsageError("index: " + s.folder + ": no rows to index, or entries and rows disagree");
    if (o.recall_queries < 0 || o.train_sample < 0) throw UsageError("index: a sample size is negative");
    set_faiss_threads(o.threads);
    // vitreg's own k-means and assignment run on oneTBB, FAISS's loops on OpenMP: both get --threads.
    std::optional<tbb::global_control> threads;
    if (o.threads > 0) threads.emplace(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(o.threads));
    IndexReport r;
    r.factory = o.factory.empty() ? choose_factory(s.rows, s.dim, o.memory_bytes) : o.factory;
    r.count = s.rows;
    r.dim = s.dim;
    auto index = make_index(r.factory, s.dim);
    std::mt19937_64 rng(o.seed);
    const auto held_out = sample_rows(s.rows, std::min(o.recall_queries, s.rows), {}, rng);
    if (!index->is_trained) {
        r.train_sample = o.train_sample ? std::min(o.train_sample, s.rows) : default_train_sample(r.factory, s.rows, s.dim, o.memory_bytes);
        // Held-out rows are left out of training while enough others remain.
        const std::set<std::int64_t> excluded =
            s.rows - static_cast<std::int64_t>(held_out.size()) >= r.train_sample ? std::set<std::int64_t>(held_out.begin(), held_out.end())
                                                                                   : std::set<std::int64_t>();
        const auto train = normalized_rows(s, sample_rows(s.rows, r.train_sample, excluded, rng));
        const std::string what = "index: training " + r.factory + " on " + std::to_string(r.train_sample) + " rows";
        if (own_ivf_build(*index)) faiss_call(what, [&] { train_ivf(*index, train.data(), r.train_sample, o.seed); });
        else faiss_call(what, [&] { index->train(r.train_sample, train.data()); });
    }
    const std::string parameters = search_parameters(*index);
    apply_search_parameters(*index, parameters, "index");
    fill(*index, s);
    r.recall_queries = static_cast<std::int64_t>(held_out.size());
    if (r.factory != "Flat") r.recall_at_10 = recall_at_10(*index, s, normalized_rows(s, held_out), r.recall_queries);
    r.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    write_index_folder(out, *index, s, r, parameters, o.seed);
    return r;
}

}  // namespace vitreg
