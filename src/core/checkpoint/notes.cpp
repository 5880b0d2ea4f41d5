#include "core/checkpoint/notes.hpp"

#include <algorithm>

namespace vitreg::source {

std::vector<std::string> Notes::in_order() const {
    auto sorted = notes_;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> out;
    for (auto& [topic, text] : sorted) out.push_back(std::move(text));
    return out;
}

}  // namespace vitreg::source
