// The evaluations' option tables (evaluation.hpp).
#include "vitreg/analysis/eval_options.hpp"

namespace vitreg {

namespace {

// Where each evaluation keeps its k-NN vote, so that --k and --temperature are described once.
const KnnVote& vote_of(const SegmentationOptions& o) { return o.knn.vote; }
KnnVote& vote_of(SegmentationOptions& o) { return o.knn.vote; }
const KnnVote& vote_of(const KnnOptions& o) { return o.vote; }
KnnVote& vote_of(KnnOptions& o) { return o.vote; }

template <class S>
OptionSpec<S> vote_k(const std::string& help) {
    return {{"k", ValueType::Integer, help, {}, 1, 1000},
            [](const S& o) { return option_value(vote_of(o).k); },
            [](S& o, const OptionValue& v) { vote_of(o).k = value_as<int>(v); }};
}

template <class S>
OptionSpec<S> vote_temperature() {
    return {{"temperature", ValueType::Real, "each neighbour votes exp(cos / temperature)", {}, 1e-4, 10.0},
            [](const S& o) { return option_value(vote_of(o).temperature); },
            [](S& o, const OptionValue& v) { vote_of(o).temperature = value_as<double>(v); }};
}

}  // namespace

const OptionTable<SegmentationOptions, 7>& segmentation_option_table() {
    using V = ValueType;
    using O = SegmentationOptions;
    static const OptionTable<SegmentationOptions, 7> table{{
        {{"train-fraction", V::Real, "the first part of the images sorted by name learns, the rest is scored", {}, 0.05, 0.95},
         field_get<&O::train_fraction>, field_set<&O::train_fraction>},
        vote_k<O>("neighbours of the dense k-NN"),
        vote_temperature<O>(),
        {{"memory-per-image", V::Integer, "labelled patches drawn from each training image into the memory", {}, 1, 1 << 20},
         [](const O& o) { return option_value(o.knn.memory_per_image); },
         [](O& o, const OptionValue& v) { o.knn.memory_per_image = value_as<int>(v); }},
        {{"max-memory", V::Integer, "the memory's bound in patches (refused beyond)", {}, 1, double(std::int64_t(1) << 40)},
         [](const O& o) { return option_value(o.knn.max_memory); },
         [](O& o, const OptionValue& v) { o.knn.max_memory = value_as<std::size_t>(v); }},
        {{"seed", V::Integer, "the memory's draw", {}, 0, double(std::int64_t(1) << 53)},
         [](const O& o) { return option_value(o.knn.seed); },
         [](O& o, const OptionValue& v) { o.knn.seed = value_as<std::uint64_t>(v); }},
        {{"ridge", V::Real, "the linear probe's ridge strength", {}, 0.0, 1e6}, field_get<&O::ridge>, field_set<&O::ridge>},
    }};
    return table;
}

const OptionTable<KnnOptions, 3>& knn_option_table() {
    static const OptionTable<KnnOptions, 3> table{{
        {{"feature", ValueType::Text, "cls | pooled", {"cls", "pooled"}}, field_get<&KnnOptions::feature>,
         field_set<&KnnOptions::feature>},
        vote_k<KnnOptions>("neighbours"),
        vote_temperature<KnnOptions>(),
    }};
    return table;
}

}  // namespace vitreg
