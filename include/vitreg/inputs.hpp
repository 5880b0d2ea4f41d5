#pragma once
// Turning command-line inputs into the ordered list of files to process.
#include <string>
#include <vector>

namespace vitreg {

// Each argument is an image file (kept even if its extension is unusual), a directory
// (walked recursively; entries with an image extension, sorted by path) or `@list.txt`
// (one path per line; blank lines and lines starting with '#' skipped). Paths that do not
// exist are kept, so the batch records them as failed rows. Throws UsageError when a list
// file cannot be read.
std::vector<std::string> expand_inputs(const std::vector<std::string>& args);

// True for the extensions a directory walk picks up (.jpg .jpeg .png .bmp .ppm .pgm .pnm
// .tga .gif .psd, any case).
bool has_image_extension(const std::string& path);

}  // namespace vitreg
