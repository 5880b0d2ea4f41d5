// IndexOptions' table (vitreg/search/index.hpp): `vitreg index`'s options and Python's
// vitreg.index keywords, described once.
#include <cmath>

#include "vitreg/error.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg {

std::uint64_t parse_memory(const std::string& text, const std::string& label) {
    std::size_t used = 0;
    double value = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    const std::string unit = text.substr(used);
    const double scale = unit.empty() ? 1 : unit == "K" ? 1 << 10 : unit == "M" ? 1 << 20 : unit == "G" ? 1ull << 30 : unit == "T" ? 1ull << 40 : 0;
    if (used == 0 || scale == 0 || !(value > 0) || value * scale > 1e18)
        throw UsageError(label + ": '" + text + "' is not a memory size (4G, 512M, 64K or bytes)");
    return static_cast<std::uint64_t>(std::llround(value * scale));
}

const OptionTable<IndexOptions, 7>& index_option_table() {
    using V = ValueType;
    static const OptionTable<IndexOptions, 7> table{{
        {{"factory", V::Text, "a FAISS index factory string (Flat, IVF4096,PQ32, HNSW32, ...); none: chosen to fit --memory"},
         field_get<&IndexOptions::factory>, field_set<&IndexOptions::factory>},
        {{"memory", V::Text, "the memory the index may take (4G, 512M, bytes): picks the factory when none is given"},
         [](const IndexOptions& o) {
             return OptionValue(o.memory_bytes % (1ull << 30) == 0 ? std::to_string(o.memory_bytes >> 30) + "G"
                                                                    : std::to_string(o.memory_bytes));
         },
         [](IndexOptions& o, const OptionValue& v) { o.memory_bytes = parse_memory(std::get<std::string>(v), "memory"); }},
        {{"feature", V::Text, "the extract output's array to index", {"cls", "pooled", "embedding"}},
         field_get<&IndexOptions::feature>, field_set<&IndexOptions::feature>},
        {{"train-sample", V::Integer, "rows drawn at random to train on (0: the rule's, docs/retrieval.md)", {}, 0, 1e8},
         field_get<&IndexOptions::train_sample>, field_set<&IndexOptions::train_sample>},
        {{"recall-queries", V::Integer, "held-out rows whose recall@10 against exact search is measured", {}, 0, 100000},
         field_get<&IndexOptions::recall_queries>, field_set<&IndexOptions::recall_queries>},
        {{"seed", V::Integer, "the random draw of the training and recall samples", {}, 0, 4294967295.0},
         field_get<&IndexOptions::seed>, field_set<&IndexOptions::seed>},
        {{"threads", V::Integer, "FAISS's threads (0: all cores)", {}, 0, 1024},
         field_get<&IndexOptions::threads>, field_set<&IndexOptions::threads>},
    }};
    return table;
}

}  // namespace vitreg
