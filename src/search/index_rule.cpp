// Which FAISS index a row count, a dimension and a memory budget call for, after autofaiss's
// rule of thumb (criteo/autofaiss, get_optimal_index_keys_v2): exact search while it is cheap,
// IVF-Flat while the raw vectors fit, IVF-PQ with the largest codes that fit beyond. Not HNSW, as
// autofaiss picks: Debian's FAISS builds it with scalar distance loops, too slow at these sizes.
#include <cmath>
#include <regex>

#include "vitreg/error.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg {

namespace {

constexpr std::int64_t kFlatRows = 100000;
constexpr double kIdBytes = 8;  // an IVF list's id per vector

std::string gib(std::uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
    return text;
}

// The IVF centroids: the power of two nearest 4·√n, within 16..65536.
std::int64_t ivf_lists(std::int64_t n) {
    const double want = 4 * std::sqrt(static_cast<double>(n));
    std::int64_t c = 16;
    while (c < 65536 && std::fabs(std::log2(want) - std::log2(static_cast<double>(c) * 2)) <
                            std::fabs(std::log2(want) - std::log2(static_cast<double>(c))))
        c *= 2;
    return c;
}

}  // namespace

std::string choose_factory(std::int64_t n, int d, std::uint64_t memory_bytes) {
    if (n < 1 || d < 1) throw UsageError("index: nothing to index (" + std::to_string(n) + " rows of " + std::to_string(d) + ")");
    const double rows = static_cast<double>(n), budget = static_cast<double>(memory_bytes);
    if (n <= kFlatRows && rows * d * 4 <= budget) return "Flat";
    const std::int64_t c = ivf_lists(n);
    const double centroids = static_cast<double>(c) * d * 4;
    if (rows * (d * 4.0 + kIdBytes) + centroids <= budget) return "IVF" + std::to_string(c) + ",Flat";
    for (int m = std::min(64, d); m >= 1; --m)
        if (d % m == 0 && rows * (m + kIdBytes) + centroids <= budget) return "IVF" + std::to_string(c) + ",PQ" + std::to_string(m);
    throw UsageError("index: " + std::to_string(n) + " rows of " + std::to_string(d) + " floats do not fit --memory " +
                     gib(memory_bytes) + " even as IVF" + std::to_string(c) + ",PQ1 (needs " +
                     gib(static_cast<std::uint64_t>(rows * 9 + centroids)) + ")");
}

std::int64_t default_train_sample(const std::string& factory, std::int64_t n, int d, std::uint64_t memory_bytes) {
    static const std::regex ivf("(^|,)IVF([0-9]+)"), pq("(^|,)(PQ|SQ|OPQ)[0-9]");
    std::smatch m;
    std::int64_t want = 0;
    if (std::regex_search(factory, m, ivf)) want = std::max<std::int64_t>(64 * std::stoll(m[2].str().substr(0, 9)), 256 * 40);
    else if (std::regex_search(factory, m, pq)) want = 256 * 40;
    // The sample's copy is at most half the budget: the index built after it needs the rest.
    const auto fits = static_cast<std::int64_t>(memory_bytes / 2 / (4 * static_cast<std::uint64_t>(std::max(d, 1))));
    return std::max<std::int64_t>(std::min<std::int64_t>({n, want, 1000000, fits}), std::min<std::int64_t>(n, want ? 256 : 0));
}

}  // namespace vitreg
