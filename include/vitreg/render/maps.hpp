#pragma once
// `vitreg maps` as a library call: one image through one model with the statistics probe, its
// attention maps, patch-norm heatmaps and histogram as PNGs, stats.json and the optional arrays.
// Here, not in the analysis layer, because the pictures are drawn with OpenCV.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vitreg/image.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/analysis/stats.hpp"

namespace vitreg::render {

// The command's options, with its defaults.
struct MapsOptions {
    std::string out;             // the folder to write (created); empty: compute and return only
    std::string layers = "all";  // the layers drawn and saved: all | last | i,j,... (resolve_layers)
    std::string heads = "all";   // all (each head + their mean) | mean | max | min
    std::string query = "cls";   // cls | reg:K | patch:R,C | probe (the attention-pool head's query)
    ResizeSpec resize;           // eval and the checkpoint's pipeline unless set
    bool rollout = false;        // also rollout.png (not with the probe query)
    float discard = 0.0f;        // rollout: the fraction of smallest fused weights zeroed, in [0, 0.99]
    bool save_attention = false, save_norms = false;  // also attention.npy, norms.npy
    ArtifactRules rules;         // as stated: write_maps reads or computes the rule's directions
    int threads = 0;             // 0 = all cores
    ImageLimits image_limits;
    std::int64_t max_tokens = kDefaultMaxTokens;
};

// A float32 array as attention.npy / norms.npy hold it.
struct MapsArray {
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};

struct MapsResult {
    ImageStats stats;          // every layer and head
    nlohmann::json stats_json; // stats.json's content: the statistics, the rules, the image and the model
    std::string query;         // "cls", "reg:K", "patch:R,C" or "probe"
    std::string description;   // what the attention picture shows: "cls attention, softmax (retrofit), ..."
    // [chosen layers, heads, 1, tokens] of the query's rows ([1, heads, 1, tokens] for the probe),
    // every token in token order: attention.npy's content, whether or not it is written.
    MapsArray attention;
    MapsArray norms;                   // [layers, tokens]: norms.npy's content
    std::vector<std::string> written;  // the files written, in order (none without `out`)
};

// Runs `image` through `model` and, with options.out, writes there attention.png, norms.png,
// histogram.png, abstention.png (softmax-1 and sink models), rollout.png (options.rollout),
// stats.json, and attention.npy / norms.npy when asked. Everything that can fail on the options
// or the input (UsageError, ImageError naming it) fails before anything is written.
MapsResult write_maps(const Model& model, const std::string& image, const MapsOptions& options);

}  // namespace vitreg::render
