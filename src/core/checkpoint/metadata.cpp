#include "checkpoint/metadata.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "vitreg/error.hpp"
#include "vitreg/parse_number.hpp"

namespace vitreg::source {

std::optional<std::string> Metadata::str(const std::string& key) const {
    auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

std::optional<long> Metadata::count(const std::string& key) const {
    auto s = str(key);
    if (!s) return std::nullopt;
    const auto v = parse_integer(*s, 0, 1 << 24);
    if (!v) throw ConfigError(file_ + ": metadata '" + key + "' = '" + *s + "' is not a valid count");
    return *v;
}

std::optional<double> Metadata::number(const std::string& key) const {
    auto s = str(key);
    if (!s) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(s->c_str(), &end);
    if (s->empty() || *end != '\0' || !std::isfinite(v))
        throw ConfigError(file_ + ": metadata '" + key + "' = '" + *s + "' is not a number");
    return v;
}

std::optional<std::array<float, 3>> Metadata::triple(const std::string& key) const {
    auto s = str(key);
    if (!s) return std::nullopt;
    std::array<float, 3> out{};
    std::stringstream ss(*s);
    std::string item;
    int n = 0;
    while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        const double v = std::strtod(item.c_str(), &end);
        if (n >= 3 || item.empty() || *end != '\0' || !std::isfinite(v))
            throw ConfigError(file_ + ": metadata '" + key + "' = '" + *s + "' is not three comma-separated numbers");
        out[n++] = static_cast<float>(v);
    }
    if (n != 3) throw ConfigError(file_ + ": metadata '" + key + "' = '" + *s + "' is not three numbers");
    return out;
}

std::optional<Family> stated_family(const Metadata& meta) {
    const auto f = meta.str("family");
    if (!f) return std::nullopt;
    if (*f == "dinov2") return Family::Dinov2;
    if (*f == "timm") return Family::Timm;
    if (*f == "clip") return Family::Clip;
    if (*f == "siglip") return Family::Siglip;
    if (*f == "dinov3") return Family::Dinov3;
    if (*f == "eva") return Family::Eva;
    throw ConfigError(meta.file() + ": metadata family='" + *f + "' (expected dinov2, dinov3, timm, clip, siglip or eva)");
}

std::optional<Positions> stated_positions(const Metadata& meta) {
    const auto v = meta.str("positions");
    if (!v) return std::nullopt;
    if (*v != "learned" && *v != "rope-axial" && *v != "rope-eva")
        throw ConfigError(meta.file() + ": metadata positions='" + *v + "' (expected learned, rope-axial or rope-eva)");
    return *v == "rope-axial" ? Positions::RopeAxial : *v == "rope-eva" ? Positions::RopeEva : Positions::Learned;
}

void apply_metadata(const Metadata& meta, Config& c) {
    const std::string& file = meta.file();
    if (auto v = meta.count("heads")) c.heads = static_cast<int>(*v);

    if (c.positions == Positions::RopeEva) {
        if (auto g = meta.str("rope_ref_grid")) {
            const auto parts = split(*g, ',');
            std::optional<long> rh, rw;
            if (parts.size() == 2) rh = parse_integer(parts[0], 1, 1 << 16), rw = parse_integer(parts[1], 1, 1 << 16);
            if (!rh || !rw) throw ConfigError(file + ": metadata rope_ref_grid='" + *g + "' is not two counts H,W");
            c.rope_ref_grid = {static_cast<int>(*rh), static_cast<int>(*rw)};
        }
    }
    if (c.rotary())
        if (auto t = meta.number("rope_theta")) c.rope_theta = static_cast<float>(*t);

    // The activation (SwiGLU comes from the tensors).
    if (auto a = meta.str("act"); a && c.mlp != MlpKind::SwiGlu) {
        if (*a != "gelu" && *a != "quick_gelu" && *a != "gelu_tanh")
            throw ConfigError(file + ": metadata act='" + *a + "' (expected gelu, quick_gelu or gelu_tanh)");
        c.mlp = *a == "quick_gelu" ? MlpKind::QuickGelu : *a == "gelu_tanh" ? MlpKind::GeluTanh : MlpKind::Gelu;
    }

    if (auto stated = meta.str("attention")) {
        try {
            c.trained_attention = parse_attention_kind(*stated);
        } catch (const UsageError& e) {
            throw ConfigError(file + ": metadata " + e.what());
        }
    }
    if (auto s = meta.str("pos_interp")) {
        try {
            c.pos_interp = parse_pos_interp(*s);
        } catch (const UsageError& e) {
            throw ConfigError(file + ": metadata " + e.what());
        }
    }
    if (auto s = meta.str("evict")) {
        if (*s != "sink") throw ConfigError(file + ": metadata evict='" + *s + "' (the only stored eviction is 'sink')");
        c.evict_sink = true;
    }
    if (auto v = meta.number("layer_norm_eps")) c.eps = static_cast<float>(*v);

    // The eval transform.
    if (auto v = meta.triple("image_mean")) c.mean = *v;
    if (auto v = meta.triple("image_std")) c.std = *v;
    if (auto v = meta.number("crop_pct")) c.crop_pct = *v;
    if (auto v = meta.count("input_size")) c.input_size = static_cast<int>(*v);
    if (auto v = meta.str("eval_squash")) c.eval_squash = *v == "1";
    try {
        if (auto v = meta.str("image_pipeline")) c.pipeline = parse_pixel_pipeline(*v);
        if (auto v = meta.str("interpolation")) c.interpolation = parse_resize_filter(*v);
    } catch (const UsageError& e) {
        throw ConfigError(file + ": metadata: " + e.what());
    }
}

}  // namespace vitreg::source
