// An index folder loaded for search: index.json checked against ids.jsonl and index.faiss
// before FAISS reads the latter (its reader trusts its input), queries normalized here.
#include <faiss/index_io.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "io/file_digest.hpp"
#include "search/exact_search.hpp"
#include "search/faiss_util.hpp"
#include "search/index_files.hpp"
#include "vitreg/error.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg {

namespace {

constexpr int kMaxK = 1024;

std::string read_info(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(path + ": cannot read it (is this a `vitreg index` folder, and did the build finish?)");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

struct Index::Impl {
    std::string folder;
    nlohmann::json info;
    std::unique_ptr<IdTable> ids;
    std::unique_ptr<faiss::Index> index;
};

Index::Index(const std::string& folder) : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    m.folder = folder;
    const std::string dir = folder + "/", info_path = dir + "index.json", faiss_path = dir + "index.faiss";
    m.info = check_index_info(read_info(info_path), info_path);
    m.ids = std::make_unique<IdTable>(dir + "ids.jsonl");
    if (m.ids->size() != m.info["count"].get<std::int64_t>())
        throw UsageError(dir + "ids.jsonl: holds " + std::to_string(m.ids->size()) + " ids, but " + info_path + " states " +
                         m.info["count"].dump());
    struct stat st {};
    if (::stat(faiss_path.c_str(), &st) != 0) throw UsageError(faiss_path + ": missing");
    if (static_cast<std::uint64_t>(st.st_size) != m.info["faiss_bytes"].get<std::uint64_t>())
        throw UsageError(faiss_path + ": " + std::to_string(st.st_size) + " bytes, not the " + m.info["faiss_bytes"].dump() +
                         " index.json states (truncated or replaced)");
    // FAISS's reader trusts its file: a changed byte is caught here, before it reads one.
    if (file_digest(faiss_path) != m.info["faiss_digest"].get<std::string>())
        throw UsageError(faiss_path + ": corrupt (its digest is not the one " + info_path + " states)");
    faiss_call(faiss_path + ": corrupt", [&] { m.index.reset(faiss::read_index(faiss_path.c_str())); });
    if (m.index->d != m.info["dim"].get<int>() || m.index->ntotal != m.ids->size())
        throw UsageError(faiss_path + ": holds " + std::to_string(m.index->ntotal) + " vectors of " + std::to_string(m.index->d) +
                         ", not what " + info_path + " states");
    apply_search_parameters(*m.index, m.info["search_parameters"].get<std::string>(), info_path);
}

Index::~Index() = default;
Index::Index(Index&&) noexcept = default;
Index& Index::operator=(Index&&) noexcept = default;

int Index::dim() const { return static_cast<int>(impl_->index->d); }
std::int64_t Index::size() const { return impl_->index->ntotal; }
const nlohmann::json& Index::info() const { return impl_->info; }
IndexEntry Index::entry(std::int64_t id) const { return impl_->ids->entry(id); }
const std::string& Index::folder() const { return impl_->folder; }

nlohmann::json Index::describe(const SearchHit& hit) const {
    nlohmann::json j = entry(hit.id).to_json();
    j["id"] = hit.id;
    j["score"] = hit.score;
    return j;
}

void Index::search(const float* queries, std::int64_t n, int k, float* scores, std::int64_t* ids) const {
    if (k < 1 || k > std::min<std::int64_t>(kMaxK, size()))
        throw UsageError(impl_->folder + ": k = " + std::to_string(k) + " is outside 1.." +
                         std::to_string(std::min<std::int64_t>(kMaxK, size())) + " (the index holds " + std::to_string(size()) + ")");
    if (n < 0) throw UsageError("search: a negative number of queries");
    std::vector<float> q(queries, queries + n * dim());
    normalize_rows(q.data(), n, dim());
    static_assert(sizeof(faiss::Index::idx_t) == sizeof(std::int64_t), "FAISS ids are 64-bit");
    faiss_call(impl_->folder + ": search", [&] {
        impl_->index->search(n, q.data(), k, scores, reinterpret_cast<faiss::Index::idx_t*>(ids));
    });
}

std::vector<std::vector<SearchHit>> Index::search(const float* queries, std::int64_t n, int k) const {
    std::vector<float> scores(static_cast<std::size_t>(std::max<std::int64_t>(n, 0) * std::max(k, 0)));
    std::vector<std::int64_t> ids(scores.size());
    search(queries, n, k, scores.data(), ids.data());
    std::vector<std::vector<SearchHit>> out(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        for (int j = 0; j < k; ++j) {
            const auto at = static_cast<std::size_t>(i * k + j);
            if (ids[at] >= 0) out[static_cast<std::size_t>(i)].push_back({ids[at], scores[at]});
        }
    return out;
}

}  // namespace vitreg
