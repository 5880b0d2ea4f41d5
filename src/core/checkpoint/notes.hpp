#pragma once
// What the loader inferred or changed, gathered while resolving and handed to the user in the
// order a reader follows a configuration (positions, projection, heads, rotary base, activation,
// attention, eviction, pixels), whichever step found it.
#include <string>
#include <utility>
#include <vector>

namespace vitreg::source {

enum class NoteTopic { Positions, Projection, Heads, Rope, Activation, Attention, Eviction, Pixels };

class Notes {
public:
    void add(NoteTopic topic, std::string text) { notes_.emplace_back(topic, std::move(text)); }
    std::vector<std::string> in_order() const;

private:
    std::vector<std::pair<NoteTopic, std::string>> notes_;
};

}  // namespace vitreg::source
