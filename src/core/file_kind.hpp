#pragma once
// What a path names on disk: the checks the loaders make before opening anything.
#include <string>

namespace vitreg {

bool is_dir(const std::string& path);
bool is_file(const std::string& path);  // a regular file (following links)

}  // namespace vitreg
