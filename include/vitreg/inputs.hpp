#pragma once
// Turning command-line inputs into the ordered list of files to process.
#include <string>
#include <vector>

namespace vitreg {

// Each argument is an image file (kept even if its extension is unusual), a webdataset tar
// shard (is_shard_path; a shard's brace pattern, shards/{00000..00099}.tar, by expand_braces),
// a directory (walked recursively; entries with an image extension, sorted by path) or `@list.txt`
// (one path per line; blank lines and lines starting with '#' skipped). Paths that do not
// exist are kept, so the batch records them as failed rows. Throws UsageError when a list
// file cannot be read.
std::vector<std::string> expand_inputs(const std::vector<std::string>& args);

// The paths listed in the text of an `@list.txt` file: one per line, surrounding blanks and a
// trailing '\r' trimmed, blank lines and lines starting with '#' skipped. Throws UsageError
// naming `name` for a line holding a NUL byte (no file can be named that way).
std::vector<std::string> parse_input_list(const std::string& text, const std::string& name);

// True for the extensions a directory walk picks up (.jpg .jpeg .png .bmp .ppm .pgm .pnm
// .tga .gif, any case).
bool has_image_extension(const std::string& path);

// True for a webdataset shard's name: .tar, .tar.gz, .tgz or .tar.zst (any case).
bool is_shard_path(const std::string& path);

// The names a brace pattern stands for, in order, as webdataset and the shell expand them:
// {A..B} counts from A to B (zero-padded to A's width when A has a leading zero or A and B have
// the same width), {x,y,z} lists alternatives; several braces multiply. A text without braces
// is itself. Throws UsageError naming `pattern` for an unbalanced brace, a range that counts
// down or holds no number, or more than 10^6 names.
std::vector<std::string> expand_braces(const std::string& pattern);

}  // namespace vitreg
