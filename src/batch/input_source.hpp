#pragma once
// Where a batch job's inputs come from, one abstraction for both kinds: image files (decoded
// from their paths, in parallel) or the samples of webdataset tar shards (their bytes read in
// order from a stream, then decoded in parallel the same way).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vitreg/image.hpp"

namespace vitreg::batch {

// One input as its source read it.
struct Encoded {
    bool in_memory = false;  // `bytes` hold the file; else the decoder reads it from its name
    std::string bytes;
    std::string error;  // set: the input failed before decoding (a shard's fault), this is why
};

class InputSource {
public:
    virtual ~InputSource() = default;

    // What errors call each input, in input order: the file's path, or SHARD:KEY.
    const std::vector<std::string>& names() const { return names_; }
    std::size_t size() const { return names_.size(); }
    virtual bool shards() const = 0;

    // Input i's manifest fields besides "path", "status" and the job's own (a shard's sample:
    // path = the shard, key, offset, caption, metadata = KEY.json); files add none.
    virtual void describe(std::size_t i, nlohmann::ordered_json& row) const = 0;

    // The inputs at positions[0..n) (ascending), in that order. Called by one thread at a time;
    // never throws for a bad input (its Encoded::error says why).
    virtual std::vector<Encoded> read(const std::size_t* positions, std::size_t n) = 0;

    // Input i's place in the order of the whole job, over every process's share (what `vitreg
    // merge` sorts by): a file's position in the list; a sample's shard position (high 32 bits)
    // and its place in that shard.
    virtual std::uint64_t order(std::size_t i) const = 0;

    // The positions of the inputs this process takes: block `index` of `count` of the files
    // sorted by path (shard_positions); for shards, the shard files were split (open_inputs) and
    // all their samples are this process's.
    virtual std::vector<std::size_t> mine(int index, int count) const = 0;

protected:
    std::vector<std::string> names_;
};

// The source of expand_inputs' list: webdataset shards when every input is one (is_shard_path),
// block `shard_index` of `shard_count` of them sorted by path (so a shard always lands in the
// same process) indexed here (a pass over their headers; member data is skipped), else image files. A shard
// that does not exist or breaks becomes an input of its own that fails, after the samples read
// before the break. Throws UsageError for a list that mixes shards and image files.
std::unique_ptr<InputSource> open_inputs(const std::vector<std::string>& inputs, const ImageLimits& limits,
                                         int shard_index = 0, int shard_count = 1);

}  // namespace vitreg::batch
