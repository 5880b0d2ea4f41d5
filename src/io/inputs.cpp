#include "vitreg/inputs.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "vitreg/error.hpp"

namespace vitreg {

namespace fs = std::filesystem;

bool has_image_extension(const std::string& path) {
    static const char* const kExtensions[] = {".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm",
                                              ".pnm", ".tga", ".gif", ".psd"};
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

std::vector<std::string> expand_inputs(const std::vector<std::string>& args) {
    std::vector<std::string> out;
    for (const auto& a : args) {
        if (!a.empty() && a[0] == '@') {
            const std::string list = a.substr(1);
            std::ifstream in(list);
            if (!in) throw UsageError(list + ": cannot read input list");
            std::string line;
            while (std::getline(in, line)) {
                while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
                std::size_t start = line.find_first_not_of(" \t");
                if (start == std::string::npos || line[start] == '#') continue;
                out.push_back(line.substr(start));
            }
            continue;
        }
        std::error_code ec;
        if (fs::is_directory(a, ec)) walk(a, out);
        else out.push_back(a);
    }
    return out;
}

}  // namespace vitreg
