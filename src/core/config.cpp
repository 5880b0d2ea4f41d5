#include "vitreg/config.hpp"

#include <cmath>

#include "vitreg/error.hpp"

namespace vitreg {

std::string to_string(AttentionKind k) {
    switch (k) {
        case AttentionKind::Softmax: return "softmax";
        case AttentionKind::Softmax1: return "softmax1";
        case AttentionKind::Sink: return "sink";
    }
    return "?";
}

std::string to_string(PosInterp p) {
    switch (p) {
        case PosInterp::Offset: return "offset";
        case PosInterp::Antialias: return "antialias";
        case PosInterp::Size: return "size";
    }
    return "?";
}

std::string to_string(MlpKind m) {
    switch (m) {
        case MlpKind::Gelu: return "gelu";
        case MlpKind::QuickGelu: return "quick_gelu";
        case MlpKind::SwiGlu: return "swiglu";
        case MlpKind::GeluTanh: return "gelu_tanh";
    }
    return "?";
}

std::string to_string(Family f) {
    switch (f) {
        case Family::Dinov2: return "dinov2";
        case Family::Timm: return "timm";
        case Family::Clip: return "clip";
        case Family::Siglip: return "siglip";
        case Family::Dinov3: return "dinov3";
        case Family::Eva: return "eva";
    }
    return "?";
}

std::string to_string(Pool p) { return p == Pool::Token ? "token" : p == Pool::Avg ? "avg" : "map"; }

std::string to_string(PixelPipeline p) {
    switch (p) {
        case PixelPipeline::Torchvision: return "torchvision";
        case PixelPipeline::Timm: return "timm";
        case PixelPipeline::HF: return "hf";
        case PixelPipeline::OpenClip: return "open_clip";
    }
    return "?";
}

PixelPipeline parse_pixel_pipeline(const std::string& s) {
    for (auto p : {PixelPipeline::Torchvision, PixelPipeline::Timm, PixelPipeline::HF, PixelPipeline::OpenClip})
        if (s == to_string(p)) return p;
    throw UsageError("unknown pipeline '" + s + "' (expected torchvision, timm, hf or open_clip)");
}

int Config::eval_resize() const {
    return static_cast<int>(std::floor(static_cast<double>(input_size) / crop_pct));
}

std::string to_string(Positions p) {
    switch (p) {
        case Positions::Learned: return "learned";
        case Positions::RopeAxial: return "rope-axial";
        case Positions::RopeEva: return "rope-eva";
    }
    return "?";
}

AttentionKind parse_attention_kind(const std::string& s) {
    if (s == "softmax") return AttentionKind::Softmax;
    if (s == "softmax1") return AttentionKind::Softmax1;
    if (s == "sink") return AttentionKind::Sink;
    throw UsageError("unknown attention kind '" + s + "' (expected softmax, softmax1 or sink)");
}

PosInterp parse_pos_interp(const std::string& s) {
    if (s == "offset") return PosInterp::Offset;
    if (s == "antialias") return PosInterp::Antialias;
    if (s == "size") return PosInterp::Size;
    throw UsageError("unknown position interpolation '" + s + "' (expected offset, antialias or size)");
}

}  // namespace vitreg
