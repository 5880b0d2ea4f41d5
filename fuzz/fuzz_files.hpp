#pragma once
// What the fuzz targets share: a private scratch folder to write each input into (the readers
// under test take paths), the seed files the targets build on, the zip archives that wrap bare
// payloads, and the folder trees the folder readers take, each made from one input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vitreg::fuzz {

// A folder of this process's own, made once (RAM-backed when /dev/shm exists), removed at exit.
const std::string& scratch();
// Writes `size` bytes to `path`, replacing what is there.
void put(const std::string& path, const std::uint8_t* data, std::size_t size);
// A file of fuzz/seeds/, by its path under that folder.
std::vector<std::uint8_t> seed(const std::string& relative);
// A stored (uncompressed) zip of `entries` (name, bytes), as torch.save and numpy.savez lay one
// out, without torch's alignment padding.
std::string zip_archive(const std::vector<std::pair<std::string, std::string>>& entries);

// Makes the folder tree one input describes under `root` (emptied first), for the folder readers:
// - the text up to the first blank line ("\n\n", or all of it without one) lists the tree, one
//   path a line relative to `root`, '/' between folders; a path ending in '/' is an empty folder,
//   any other a file (its folders made as needed);
// - the bytes after that blank line are the files' contents, cut at each "\n--\n": the k-th file
//   made gets the k-th piece; files past the last piece are empty.
// A line with more than 3 parts, an empty, "." or ".." part, or a part the file system refuses is
// skipped, as is any line past the 32nd, so a tree stays small and inside `root`.
void make_tree(const std::string& root, const std::uint8_t* data, std::size_t size);

// Runs a call with the working folder set to `dir`, then restores it: relative file names in a
// target's text (a model name's "@debias=bias.safetensors") reach the files put there.
class InFolder {
public:
    explicit InFolder(const std::string& dir);
    ~InFolder();
    InFolder(const InFolder&) = delete;
    InFolder& operator=(const InFolder&) = delete;

private:
    std::string previous_;
};

}  // namespace vitreg::fuzz
