// The batch options' table (batch_job.hpp): one entry per option of BatchOptions.
#include "vitreg/batch_options.hpp"

namespace vitreg {

const OptionTable<BatchOptions, 5>& batch_option_table() {
    using V = ValueType;
    static const OptionTable<BatchOptions, 5> table{{
        {{"format", V::Text, "npy or safetensors", {"npy", "safetensors"}},
         [](const BatchOptions& o) { return OptionValue(to_string(o.format)); },
         [](BatchOptions& o, const OptionValue& v) {
             o.format = std::get<std::string>(v) == "npy" ? FeatureFormat::Npy : FeatureFormat::Safetensors;
         }},
        {{"batch", V::Integer, "images per forward (same-size images share one)", {}, 1, 4096},
         field_get<&BatchOptions::batch>, field_set<&BatchOptions::batch>},
        {{"chunk", V::Integer, "inputs per durable chunk: a killed run loses at most one", {}, 1, 1 << 20},
         field_get<&BatchOptions::chunk_rows>, field_set<&BatchOptions::chunk_rows>},
        {{"resume", V::Flag, "continue the run that OUT holds (or finish it); starts one if there is none"},
         field_get<&BatchOptions::resume>, field_set<&BatchOptions::resume>},
        {{"overwrite", V::Flag, "replace what OUT holds when it is another run (vitreg's files only)"},
         field_get<&BatchOptions::overwrite>, field_set<&BatchOptions::overwrite>},
    }};
    return table;
}

}  // namespace vitreg
