#include "vitreg/probe.hpp"

#include <algorithm>

#include "core/parse_number.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

int parse_int(const std::string& s, const std::string& whole) {
    const auto v = parse_integer(s, 0, 1000000);
    if (!v) throw UsageError("bad token '" + whole + "' (expected cls, reg:K or patch:R,C)");
    return static_cast<int>(*v);
}

}  // namespace

TokenRef TokenRef::parse(const std::string& text) {
    TokenRef t;
    if (text == "cls") return t;
    if (text.rfind("reg:", 0) == 0) {
        t.kind = Kind::Register;
        t.index = parse_int(text.substr(4), text);
        return t;
    }
    if (text.rfind("patch:", 0) == 0) {
        const std::string rc = text.substr(6);
        const auto comma = rc.find(',');
        if (comma == std::string::npos) throw UsageError("bad token '" + text + "' (expected patch:R,C)");
        t.kind = Kind::Patch;
        t.row = parse_int(rc.substr(0, comma), text);
        t.col = parse_int(rc.substr(comma + 1), text);
        return t;
    }
    throw UsageError("bad token '" + text + "' (expected cls, reg:K or patch:R,C)");
}

std::string TokenRef::to_string() const {
    switch (kind) {
        case Kind::Cls: return "cls";
        case Kind::Register: return "reg:" + std::to_string(index);
        case Kind::Patch: return "patch:" + std::to_string(row) + "," + std::to_string(col);
    }
    return "?";
}

int TokenRef::token_index(int registers, int grid_h, int grid_w, bool class_token) const {
    const int first = class_token ? 1 : 0;
    switch (kind) {
        case Kind::Cls:
            if (!class_token)
                throw UsageError("token cls: the model has no class token (its pooled feature is the mean of the "
                                 "patches); name a patch (patch:R,C) or a register (reg:K)");
            return 0;
        case Kind::Register:
            if (index >= registers)
                throw UsageError("token " + to_string() + ": the model has " + std::to_string(registers) + " registers");
            return first + index;
        case Kind::Patch:
            if (row >= grid_h || col >= grid_w)
                throw UsageError("token " + to_string() + " lies outside the " + std::to_string(grid_h) + "x" +
                                 std::to_string(grid_w) + " patch grid");
            return first + registers + row * grid_w + col;
    }
    return 0;
}

std::vector<int> resolve_layers(const std::string& spec, int depth) {
    std::vector<int> out;
    if (spec == "all") {
        for (int l = 0; l < depth; ++l) out.push_back(l);
        return out;
    }
    if (spec == "last") return {depth - 1};
    for (const auto& item : split(spec, ',')) {
        const auto v = parse_integer(item, -depth, depth - 1);
        if (!v)
            throw UsageError("layer '" + item + "' in '" + spec + "' is out of range or not a number (the model has " +
                             std::to_string(depth) + " layers: 0.." + std::to_string(depth - 1) + ", or -1 for the last)");
        out.push_back(*v < 0 ? static_cast<int>(*v + depth) : static_cast<int>(*v));
    }
    return out;
}

Probe Probe::statistics(int depth) {
    Probe p;
    p.norms = true;
    p.abstention = true;
    p.key_mass = true;
    p.queries = {0};
    for (int l = 0; l < depth; ++l) p.attention_layers.push_back(l);
    return p;
}

const char* ForwardProfile::name(int stage) {
    static constexpr const char* kNames[kStages] = {"embed", "norms", "qkv", "attention", "proj",
                                                    "fc1", "mlp_activation", "fc2", "other"};
    if (stage < 0 || stage >= kStages) throw UsageError("profile: no stage " + std::to_string(stage));
    return kNames[stage];
}

int Trace::attention_slot(int layer) const {
    const auto it = std::find(attention_layers.begin(), attention_layers.end(), layer);
    return it == attention_layers.end() ? -1 : static_cast<int>(it - attention_layers.begin());
}

int Trace::query_slot(int token) const {
    if (static_cast<int>(queries.size()) == tokens) return token;  // every row was recorded
    const auto it = std::find(queries.begin(), queries.end(), token);
    return it == queries.end() ? -1 : static_cast<int>(it - queries.begin());
}

}  // namespace vitreg

namespace vitreg {

std::vector<float> Trace::query_rows(int l, int b, int q) const {
    std::vector<float> rows(static_cast<std::size_t>(heads) * tokens);
    for (int h = 0; h < heads; ++h) {
        const float* r = attention_row(l, b, h, q);
        std::copy(r, r + tokens, rows.begin() + static_cast<std::ptrdiff_t>(h) * tokens);
    }
    return rows;
}

std::vector<float> Trace::patch_features(int b) const {
    const std::size_t L = block_layers.size(), n = static_cast<std::size_t>(patch_count()), d = static_cast<std::size_t>(dim);
    std::vector<float> f(n * L * d);
    for (std::size_t l = 0; l < L; ++l) {
        const float* grid = block_of(static_cast<int>(l), b) + static_cast<std::size_t>(patch_offset()) * d;
        for (std::size_t p = 0; p < n; ++p)
            std::copy(grid + p * d, grid + (p + 1) * d, f.begin() + static_cast<std::ptrdiff_t>((p * L + l) * d));
    }
    return f;
}

}  // namespace vitreg
