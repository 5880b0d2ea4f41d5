#include "vitreg/inputs.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "vitreg/error.hpp"

namespace vitreg {

namespace fs = std::filesystem;

bool has_image_extension(const std::string& path) {
    static const char* const kExtensions[] = {".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm",
                                              ".pnm", ".tga", ".gif"};
    std::string ext = fs::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return std::find(std::begin(kExtensions), std::end(kExtensions), ext) != std::end(kExtensions);
}

namespace {

void walk(const std::string& dir, std::vector<std::string>& out) {
    std::vector<std::string> found;
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
    if (ec) throw UsageError(dir + ": cannot list folder: " + ec.message());
    for (; it != end; it.increment(ec)) {
        if (ec) throw UsageError(dir + ": cannot list folder: " + ec.message());
        // Whatever is named like an image is taken, folders too (not entered): each bad one
        // becomes a failed row with its reason instead of vanishing silently.
        if (!has_image_extension(it->path().string())) continue;
        if (it->is_directory(ec)) it.disable_recursion_pending();
        found.push_back(it->path().string());
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
}

}  // namespace

std::vector<std::string> parse_input_list(const std::string& text, const std::string& name) {
    std::vector<std::string> out;
    std::size_t number = 0, begin = 0;
    while (begin < text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        ++number;
        std::string_view line(text.data() + begin, end - begin);
        begin = end + 1;
        if (line.find('\0') != std::string_view::npos)
            throw UsageError(name + ": line " + std::to_string(number) + " holds a NUL byte");
        const std::size_t first = line.find_first_not_of(" \t\r");
        if (first == std::string_view::npos || line[first] == '#') continue;
        const std::size_t last = line.find_last_not_of(" \t\r");
        out.emplace_back(line.substr(first, last - first + 1));
    }
    return out;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& args) {
    std::vector<std::string> out;
    for (const auto& a : args) {
        if (!a.empty() && a[0] == '@') {
            const std::string list = a.substr(1);
            std::ifstream in(list, std::ios::binary);
            if (!in) throw UsageError(list + ": cannot read input list");
            std::ostringstream text;
            text << in.rdbuf();
            if (in.bad()) throw UsageError(list + ": cannot read input list");
            const auto listed = parse_input_list(text.str(), list);
            out.insert(out.end(), listed.begin(), listed.end());
            continue;
        }
        std::error_code ec;
        if (is_shard_path(a) && a.find_first_of("{}") != std::string::npos) {
            const auto names = expand_braces(a);
            out.insert(out.end(), names.begin(), names.end());
        } else if (fs::is_directory(a, ec)) walk(a, out);
        else out.push_back(a);
    }
    return out;
}

}  // namespace vitreg
