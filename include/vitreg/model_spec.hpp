#pragma once
// A configuration named on one command-line word, as `vitreg compare` and `vitreg-viewer` take
// them: "MODEL", then any of "@KIND" (softmax | softmax1 | sink: another normalizer than
// trained, a retrofit) and "@PRECISION" (fp32 | bf16 | int8 | int8=SCALES.json for per-tensor
// int8), e.g. "MODEL@softmax1@int8". Suffixes are peeled from the right while they name one of
// these, so a hub id's "@REVISION" stays with the model.
#include <optional>
#include <string>

#include "vitreg/config.hpp"
#include "vitreg/precision.hpp"

namespace vitreg {

struct ModelSpec {
    std::string model;                     // the checkpoint, as given (not yet resolved)
    std::optional<AttentionKind> attention;
    std::optional<PrecisionOptions> precision;
    std::string suffix;                    // the "@..." suffixes as written ("" when none)

    // Throws UsageError for two kinds or two precisions.
    static ModelSpec parse(const std::string& text);
    // The text that parses back to this spec.
    std::string to_string() const;
};

}  // namespace vitreg
