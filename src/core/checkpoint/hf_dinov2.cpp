// HF transformers' Dinov2Model / Dinov2WithRegistersModel (and their image classifiers): `embeddings.*`,
// `encoder.layer.i.*` with query, key and value apart; hyper-parameters in the sibling config.json.
#include "core/checkpoint/hf_config_keys.hpp"
#include "core/checkpoint/source.hpp"

namespace vitreg::source {

Source hf_dinov2_source() {
    Source s;
    s.name = "hf";
    s.match = [](const TensorFile& f) { return prefix_before(f, "embeddings.patch_embeddings.projection.weight"); };
    s.names = [](const TensorFile&, const std::string&) {
        NameTable t;
        t.top = {
            {"cls_token", "embeddings.cls_token"},
            {"register_tokens", "embeddings.register_tokens"},
            {"pos_embed", "embeddings.position_embeddings"},
            {"mask_token", "embeddings.mask_token"},
            {"patch_embed.proj.", "embeddings.patch_embeddings.projection."},
            {"norm.", "layernorm."},
        };
        t.block_prefix = "encoder.layer.";
        t.block = {
            {"attn.qkv.", "attention.attention.query.|attention.attention.key.|attention.attention.value."},
            {"norm1.", "norm1."},
            {"norm2.", "norm2."},
            {"attn.proj.", "attention.output.dense."},
            {"attn.sinks", "attention.attention.sinks"},
            {"ls1.gamma", "layer_scale1.lambda1"},
            {"ls2.gamma", "layer_scale2.lambda1"},
            {"mlp.fc1.", "mlp.fc1."},
            {"mlp.fc2.", "mlp.fc2."},
            {"mlp.w12.", "mlp.weights_in."},
            {"mlp.w3.", "mlp.weights_out."},
        };
        return t;
    };
    s.side_files = SideFormat::HfConfig;
    s.check_keys = [](const SideFiles& side) { check_hf_keys(side, hf_dinov2_keys(), nullptr); };
    s.hf_model_types = {"dinov2", "dinov2_with_registers"};
    s.hf_architectures = {"Dinov2Model", "Dinov2WithRegistersModel", "Dinov2ForImageClassification",
                          "Dinov2WithRegistersForImageClassification"};
    s.family = [](const Config&, const SideFiles&) { return Family::Dinov2; };
    // Dinov2Model interpolates by size; Dinov2WithRegistersModel antialiases (docs/design.md,
    // "Reference semantics").
    s.pos_interp = [](const Config& c, const SideFiles&) { return c.registers > 0 ? PosInterp::Antialias : PosInterp::Size; };
    s.pipeline = PixelPipeline::HF;
    // Dinov2Config's hidden_act (default gelu); its SwiGLU FFN gates with SiLU whatever it says.
    s.activation = [](Config& c, const SideFiles& side, Notes&) {
        if (c.mlp != MlpKind::SwiGlu) c.mlp = hf_activation(side, "gelu");
    };
    return s;
}

}  // namespace vitreg::source
