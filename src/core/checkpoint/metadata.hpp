#pragma once
// The safetensors `__metadata__` strings of a checkpoint: vitreg's own files (vitreg convert, the
// shipped weights) state there everything a loader would otherwise infer (docs/design.md,
// "Reference semantics").
#include <map>
#include <optional>
#include <string>

#include "vitreg/config.hpp"

namespace vitreg::source {

class Metadata {
public:
    Metadata(std::string file, const std::map<std::string, std::string>& values) : file_(std::move(file)), values_(values) {}

    std::optional<std::string> str(const std::string& key) const;
    // A count; a value that does not parse throws a ConfigError naming the file and key.
    std::optional<long> count(const std::string& key) const;
    const std::string& file() const { return file_; }
    const std::map<std::string, std::string>& values() const { return values_; }

private:
    std::string file_;
    const std::map<std::string, std::string>& values_;
};

// What the model is, when the metadata states it: every default depends on these, so they are
// read before the defaults (apply_metadata leaves them be).
std::optional<Family> stated_family(const Metadata& meta);
std::optional<Positions> stated_positions(const Metadata& meta);

// Everything else the metadata states, over the defaults and the side files. Reads the tensor
// facts already in `c` (a stated activation does not replace SwiGLU; rope keys need rotary positions).
void apply_metadata(const Metadata& meta, Config& c);

}  // namespace vitreg::source
