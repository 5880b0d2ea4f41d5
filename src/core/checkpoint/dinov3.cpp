// DINOv3's files: HF transformers' DINOv3ViTModel (q/k/v/o projections, a gated MLP's gate/up/down)
// and the facebookresearch/dinov3 torch hub's (dinov2's names but `storage_tokens`, the gated MLP's
// halves w1/w2, a masked k bias). Both rotate q and k by the patches' positions (no pos_embed).
#include <cmath>

#include "core/checkpoint/hf_config_keys.hpp"
#include "core/checkpoint/timm_rules.hpp"
#include "vitreg/error.hpp"

namespace vitreg::source {

namespace {

// What both share.
Source dinov3(const std::string& name) {
    Source s;
    s.name = name;
    s.family = [](const Config&, const SideFiles&) { return Family::Dinov3; };
    s.positions = [](const Config&, const SideFiles&, Notes&) { return Positions::RopeAxial; };
    // nothing to resample (rotary positions): HF's interpolation, for the record
    s.pos_interp = [](const Config&, const SideFiles&) { return PosInterp::Size; };
    return s;
}

// The hub file's rope_embed.periods, one per band (head_dim / 4 of them), periods[j] = θ^(4j/head_dim):
// the heads when nothing stated them, and θ.
void read_periods(const TensorFile& f, const std::string& prefix, Config& c, Notes& notes) {
    const std::string name = prefix + "rope_embed.periods";
    if (!f.has(name)) {
        notes.add(NoteTopic::Rope, "no rope_embed.periods in the file: DINOv3's rope_theta 100 assumed");
        return;
    }
    const auto& t = f.get(name);
    if (c.heads == kHeadsUnstated) {
        if (t.shape.size() != 1 || t.shape[0] <= 0 || c.dim % (4 * t.shape[0]))
            throw CheckpointError(f.path() + ": tensor '" + t.name + "' has shape " + t.shape_string() +
                                  ", expected [head_dim / 4] with head_dim dividing " + std::to_string(c.dim));
        c.heads = static_cast<int>(c.dim / (4 * t.shape[0]));
    }
    const auto periods = t.to_float();
    f.release(t);
    const int bands = static_cast<int>(periods.size());
    if (bands > 1) {
        // θ is the second period to the power head_dim / 4; float32 periods hold θ to ~7 digits:
        // keep 6 (100.0000076 is DINOv3's 100).
        const double theta = std::pow(static_cast<double>(periods[1]), bands);
        const double unit = std::pow(10.0, std::floor(std::log10(theta)) - 5);
        c.rope_theta = static_cast<float>(std::round(theta / unit) * unit);
    }
    for (int j = 0; j < bands; ++j) {
        const double want = std::pow(static_cast<double>(c.rope_theta), static_cast<double>(j) / bands);
        if (!(std::abs(periods[j] - want) <= 1e-4 * want))
            throw CheckpointError(f.path() + ": tensor '" + t.name + "' is not theta^(4j/head_dim) for any theta (entry " +
                                  std::to_string(j) + " is " + std::to_string(periods[j]) + ")");
    }
    if (!(c.rope_theta > 1))
        throw CheckpointError(f.path() + ": tensor '" + t.name + "' gives rope_theta " + std::to_string(c.rope_theta) +
                              " (expected above 1)");
}

}  // namespace

Source hf_dinov3_source() {
    Source s = dinov3("hf-dinov3");
    s.match = [](const TensorFile& f) { return prefix_before(f, "embeddings.patch_embeddings.weight"); };  // a conv without `.projection`
    s.names = [](const TensorFile&, const std::string&) {
        NameTable t;
        t.top = {
            {"cls_token", "embeddings.cls_token"},
            {"register_tokens", "embeddings.register_tokens"},
            {"mask_token", "embeddings.mask_token"},
            {"patch_embed.proj.", "embeddings.patch_embeddings."},
            {"norm.", "norm."},
        };
        t.block_prefix = "layer.";
        // The gated MLP's gate and up make SwiGLU's w12.
        t.block = {
            {"norm1.", "norm1."},
            {"norm2.", "norm2."},
            {"attn.qkv.", "attention.q_proj.|attention.k_proj.|attention.v_proj."},
            {"attn.proj.", "attention.o_proj."},
            {"ls1.gamma", "layer_scale1.lambda1"},
            {"ls2.gamma", "layer_scale2.lambda1"},
            {"mlp.fc1.", "mlp.up_proj."},
            {"mlp.fc2.", "mlp.down_proj."},
            {"mlp.w12.", "mlp.gate_proj.|mlp.up_proj."},
            {"mlp.w3.", "mlp.down_proj."},
        };
        return t;
    };
    s.side_files = SideFormat::HfConfig;
    s.reads_preprocessor = true;
    s.hf_model_types = {"dinov3_vit"};
    s.hf_architectures = {"DINOv3ViTModel"};
    s.check_keys = [](const SideFiles& side) { check_hf_keys(side, hf_dinov3_keys(), nullptr); };
    s.pipeline = PixelPipeline::HF;
    // DINOv3ViTImageProcessorFast: squash to 224x224, bilinear, ImageNet's mean and std (the hub's
    // eval transform is DINOv2's: short side 256 bicubic, crop 224).
    s.pixel_defaults = hf_bilinear_squash;
    s.activation = [](Config& c, const SideFiles& side, Notes&) {
        if (c.mlp == MlpKind::SwiGlu) {
            const std::string act = side.cfg_str("hidden_act").value_or("silu");
            if (act != "silu") throw ConfigError(side.cfg_file + ": hidden_act '" + act + "' (DINOv3's gated MLP runs silu)");
            return;
        }
        const std::string act = side.cfg_str("hidden_act").value_or("gelu");
        if (act != "gelu") throw ConfigError(side.cfg_file + ": hidden_act '" + act + "' (vitreg runs DINOv3's gelu, or silu gated)");
    };
    return s;
}

Source dinov3_hub_source() {
    Source s = dinov3("dinov3-hub");
    s.match = [](const TensorFile& f) -> std::optional<std::string> {
        auto prefix = prefix_before(f, "patch_embed.proj.weight");
        if (!prefix || !(f.has(*prefix + "storage_tokens") || f.has(*prefix + "rope_embed.periods"))) return std::nullopt;
        return prefix;
    };
    s.names = [](const TensorFile&, const std::string&) {
        NameTable t;
        t.top = {{"register_tokens", "storage_tokens"}};
        t.block = {{"mlp.w12.", "mlp.w1.|mlp.w2."}};
        return t;
    };
    s.activation = timm_activation;  // (a timm config.json beside it)
    s.finish = read_periods;
    return s;
}

}  // namespace vitreg::source
