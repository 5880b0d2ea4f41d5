#pragma once
// A configuration named on one command-line word, as `vitreg compare` and `vitreg-viewer` take
// them: "MODEL", then any of "@KIND" (softmax | softmax1 | sink: another normalizer than
// trained, a retrofit), "@PRECISION" (fp32 | bf16 | int8 | int8=SCALES.json for per-tensor
// int8) and the interventions "@evict=LIST" (as --evict) and "@ttr=K:NEURONS" (K test-time
// registers, NEURONS as --register-neurons), e.g. "MODEL@softmax1@int8" or
// "MODEL@ttr=1:neurons.json", and the repairs (vitreg/repair.hpp) "@inpaint=artifacts[:LAYERS]",
// "@denoise=shift:K[:median]", "@debias=FILE", "@registers=mean:FILE[:LAYERS]|zero[:LAYERS]",
// applied in the order written. Suffixes are peeled from the right while they name one of these,
// so a hub id's "@REVISION" stays with the model.
#include <optional>
#include <string>

#include "vitreg/config.hpp"
#include "vitreg/intervention.hpp"
#include "vitreg/precision.hpp"

namespace vitreg {

struct ModelSpec {
    std::string model;                     // the checkpoint, as given (not yet resolved)
    std::optional<AttentionKind> attention;
    std::optional<PrecisionOptions> precision;
    std::optional<Intervention> intervention;  // set when an @evict=, @ttr= or repair suffix is given
    std::string suffix;                    // the "@..." suffixes as written ("" when none)

    // Throws UsageError for two kinds, precisions, evictions or test-time register sets, and for a
    // repair's bad text or unreadable calibration file.
    static ModelSpec parse(const std::string& text);
    // The text that parses back to this spec.
    std::string to_string() const;
    // How reports label it: the checkpoint's file stem (no folders, no .safetensors), then the
    // suffixes as written.
    std::string label() const;
};

}  // namespace vitreg
