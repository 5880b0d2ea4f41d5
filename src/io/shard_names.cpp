// The names of webdataset shards: which inputs are shards, and brace patterns.
#include <algorithm>
#include <cctype>

#include "core/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"

namespace vitreg {

namespace {

constexpr std::size_t kMaxNames = 1000000;

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The alternatives one brace's inside stands for.
std::vector<std::string> alternatives(const std::string& inside, const std::string& pattern) {
    const std::size_t dots = inside.find("..");
    if (dots == std::string::npos) {
        std::vector<std::string> out;
        std::size_t begin = 0;
        for (;;) {
            const std::size_t comma = inside.find(',', begin);
            out.push_back(inside.substr(begin, comma - begin));
            if (comma == std::string::npos) return out;
            begin = comma + 1;
        }
    }
    const std::string a = inside.substr(0, dots), b = inside.substr(dots + 2);
    const auto first = parse_integer(a, 0, 999999999999LL), last = parse_integer(b, 0, 999999999999LL);
    if (!first || !last || a.empty() || b.empty())
        throw UsageError(pattern + ": {" + inside + "} is not a range of numbers ({A..B})");
    if (*last < *first) throw UsageError(pattern + ": {" + inside + "} counts down");
    if (static_cast<std::size_t>(*last - *first) >= kMaxNames)
        throw UsageError(pattern + ": {" + inside + "} stands for more than 10^6 names");
    const bool padded = (a.size() > 1 && a[0] == '0') || a.size() == b.size();
    std::vector<std::string> out;
    for (long long n = *first; n <= *last; ++n) {
        std::string s = std::to_string(n);
        if (padded && s.size() < a.size()) s.insert(0, a.size() - s.size(), '0');
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace

bool is_shard_path(const std::string& path) {
    std::string p = path;
    std::transform(p.begin(), p.end(), p.begin(), [](unsigned char c) { return std::tolower(c); });
    return ends_with(p, ".tar") || ends_with(p, ".tar.gz") || ends_with(p, ".tgz") || ends_with(p, ".tar.zst");
}

std::vector<std::string> expand_braces(const std::string& pattern) {
    std::vector<std::string> out{""};
    std::size_t at = 0;
    while (at < pattern.size()) {
        const std::size_t open = pattern.find_first_of("{}", at);
        const std::string text = pattern.substr(at, open == std::string::npos ? std::string::npos : open - at);
        for (auto& s : out) s += text;
        if (open == std::string::npos) break;
        const std::size_t close = pattern.find_first_of("{}", open + 1);
        if (pattern[open] == '}' || close == std::string::npos || pattern[close] == '{')
            throw UsageError(pattern + ": unbalanced brace at character " + std::to_string(open + 1));
        const auto alt = alternatives(pattern.substr(open + 1, close - open - 1), pattern);
        if (out.size() * alt.size() > kMaxNames) throw UsageError(pattern + ": stands for more than 10^6 names");
        std::vector<std::string> next;
        next.reserve(out.size() * alt.size());
        for (const auto& s : out)
            for (const auto& x : alt) next.push_back(s + x);
        out = std::move(next);
        at = close + 1;
    }
    return out;
}

}  // namespace vitreg
