// HF transformers' ViTModel and ViTForImageClassification (`model_type: vit`: google/vit-*,
// facebook/dino-vit*, the non-distilled facebook/deit-*). The hub's files carry v4's names,
// `encoder.layer.i.{attention.attention.{query,key,value}, attention.output.dense,
// intermediate.dense, output.dense, layernorm_before, layernorm_after}`, which transformers 5's
// save_pretrained still writes; its modules are named `layers.i.{attention.{q,k,v,o}_proj,
// mlp.fc1, mlp.fc2, layernorm_*}` (conversion_mapping.py's "ViTModel" rules), which a state_dict()
// saved as it is holds. The pooler (tanh(dense(CLS))) and the classifier are heads on the class
// token: not read, and said so.
#include <cmath>

#include "core/checkpoint/hf_config_keys.hpp"
#include "core/checkpoint/source.hpp"
#include "vitreg/error.hpp"

namespace vitreg::source {

namespace {

const char* const kLegacyBlock = "encoder.layer.0.layernorm_before.weight";
const char* const kV5Block = "layers.0.layernorm_before.weight";

NameTable vit_names(const TensorFile& f, const std::string& prefix) {
    NameTable t;
    t.top = {
        {"cls_token", "embeddings.cls_token"},
        {"pos_embed", "embeddings.position_embeddings"},
        {"mask_token", "embeddings.mask_token"},
        {"patch_embed.proj.", "embeddings.patch_embeddings.projection."},
        {"norm.", "layernorm."},
    };
    const bool v5 = f.has(prefix + kV5Block);
    t.block_prefix = v5 ? "layers." : "encoder.layer.";
    t.block = {{"norm1.", "layernorm_before."}, {"norm2.", "layernorm_after."}};
    const NamePairs own = v5 ? NamePairs{{"attn.qkv.", "attention.q_proj.|attention.k_proj.|attention.v_proj."},
                                         {"attn.proj.", "attention.o_proj."},
                                         {"mlp.fc1.", "mlp.fc1."},
                                         {"mlp.fc2.", "mlp.fc2."}}
                             : NamePairs{{"attn.qkv.", "attention.attention.query.|attention.attention.key.|attention.attention.value."},
                                         {"attn.proj.", "attention.output.dense."},
                                         {"mlp.fc1.", "intermediate.dense."},
                                         {"mlp.fc2.", "output.dense."}};
    t.block.insert(t.block.end(), own.begin(), own.end());
    return t;
}

// The image processors a ViT folder names (preprocessor_config.json's image_processor_type, or
// v4's feature_extractor_type): ViT's squashes to `size`, DeiT's then crops the center
// (side_files.cpp reads both). Another processor's transform, or one with a step switched off or
// another rescale, is refused, not guessed.
void check_processor(const SideFiles& side) {
    const auto refuse = [&](const char* key, const nlohmann::json& v, const std::string& runs) {
        throw ConfigError(side.preprocessor_file + ": " + key + " = " + v.dump() + " is not " + runs);
    };
    for (const char* key : {"image_processor_type", "feature_extractor_type"}) {
        const auto* v = dig(side.preprocessor, {key});
        const std::string name = v && v->is_string() ? v->get<std::string>() : "";
        if (v && name.rfind("ViT", 0) != 0 && name.rfind("DeiT", 0) != 0)
            refuse(key, *v, "an image processor vitreg runs for model_type vit (it runs ViT's and DeiT's)");
    }
    for (const char* key : {"do_resize", "do_rescale", "do_normalize"})
        if (const auto* v = dig(side.preprocessor, {key}); v && *v != true)
            refuse(key, *v, "a setting vitreg runs (its eval transform resizes, rescales by 1/255 and normalizes)");
    if (const auto* v = dig(side.preprocessor, {"rescale_factor"}); v && !(v->is_number() && std::abs(v->get<double>() * 255 - 1.0) < 1e-9))
        refuse("rescale_factor", *v, "a setting vitreg runs (it runs 1/255)");
}

void vit_finish(const TensorFile& f, const std::string& prefix, Config&, Notes& notes) {
    if (f.has(prefix + "pooler.dense.weight"))
        notes.add(NoteTopic::Projection,
                  "ViTModel's pooler (tanh(pooler.dense(CLS))) not run: the class token is the final-normed CLS");
    if (f.has("classifier.weight")) notes.add(NoteTopic::Projection, "ViTForImageClassification's classifier ignored");
}

}  // namespace

Source hf_vit_source() {
    Source s;
    s.name = "hf-vit";
    s.match = [](const TensorFile& f) -> std::optional<std::string> {
        auto prefix = prefix_before(f, "embeddings.patch_embeddings.projection.weight");
        if (!prefix || !(f.has(*prefix + kLegacyBlock) || f.has(*prefix + kV5Block))) return std::nullopt;
        return prefix;
    };
    s.names = vit_names;
    s.side_files = SideFormat::HfConfig;
    s.reads_preprocessor = true;
    s.check_keys = [](const SideFiles& side) {
        check_hf_keys(side, hf_vit_keys(), nullptr);
        check_processor(side);
    };
    s.hf_model_types = {"vit"};
    s.hf_architectures = {"ViTModel", "ViTForImageClassification"};
    s.family = [](const Config&, const SideFiles&) { return Family::Vit; };
    s.pos_interp = [](const Config&, const SideFiles&) { return PosInterp::Size; };  // ViTEmbeddings.interpolate_pos_encoding
    s.pipeline = PixelPipeline::HF;
    // ViTImageProcessor's defaults: squash to the input, bilinear, mean = std = 0.5.
    s.pixel_defaults = [](Config& c) {
        hf_bilinear_squash(c);
        c.mean = c.std = {0.5f, 0.5f, 0.5f};
    };
    s.activation = [](Config& c, const SideFiles& side, Notes&) { c.mlp = hf_activation(side, "gelu"); };
    // ViTConfig's layer_norm_eps default (config.json's own is read after this).
    s.read_config = [](Config& c, const SideFiles&, Notes&) { c.eps = 1e-12f; };
    s.finish = vit_finish;
    return s;
}

}  // namespace vitreg::source
