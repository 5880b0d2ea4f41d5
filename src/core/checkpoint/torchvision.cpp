// torchvision's VisionTransformer (torchvision/models/vision_transformer.py: vit_b_16, vit_b_32,
// vit_l_16, vit_l_32, vit_h_14): `conv_proj`, `class_token`, `encoder.pos_embedding` (the class
// row first), `encoder.layers.encoder_layer_i.{ln_1, self_attention.in_proj_*, out_proj, ln_2,
// mlp.0, mlp.3}` and `encoder.ln`; `heads.*` is its classifier and is not read. A state dict
// carries no configuration: heads come from the builders' widths, the eval transform from the
// weights' own (their `transforms`), told apart by the native size.
#include "core/checkpoint/source.hpp"

namespace vitreg::source {

namespace {

// The builders' (width, heads); another width is heads = D/64 with a note (fill_unstated).
constexpr std::pair<int, int> kBuilderHeads[] = {{768, 12}, {1024, 16}, {1280, 16}};

NameTable torchvision_names(const TensorFile& f, const std::string& prefix) {
    NameTable t;
    t.top = {
        {"cls_token", "class_token"},
        {"pos_embed", "encoder.pos_embedding"},
        {"patch_embed.proj.", "conv_proj."},
        {"norm.", "encoder.ln."},
    };
    t.block_prefix = "encoder.layers.encoder_layer_";
    // torchvision before 0.12 named the MLP's linears linear_1 / linear_2 (its loader renames them).
    const bool old_mlp = f.has(prefix + "encoder.layers.encoder_layer_0.mlp.linear_1.weight");
    t.block = {
        {"norm1.", "ln_1."},
        {"norm2.", "ln_2."},
        {"attn.qkv.weight", "self_attention.in_proj_weight"},
        {"attn.qkv.bias", "self_attention.in_proj_bias"},
        {"attn.proj.", "self_attention.out_proj."},
        {"mlp.fc1.", old_mlp ? "mlp.linear_1." : "mlp.0."},
        {"mlp.fc2.", old_mlp ? "mlp.linear_2." : "mlp.3."},
    };
    return t;
}

// The weights' own transforms: IMAGENET1K_V1 at 224 px (bilinear, short side 256, vit_l_16's
// 242), the SWAG end-to-end weights at 384, 512 and 518 px (bicubic, no crop margin).
void torchvision_transform(Config& c) {
    const int native = c.native_size();
    c.input_size = native;
    if (native > 224) {
        c.interpolation = ResizeFilter::Bicubic;
        c.crop_pct = 1.0;
    } else {
        c.interpolation = ResizeFilter::Bilinear;
        c.crop_pct = (c.dim == 1024 && c.patch == 16) ? 224.0 / 242.0 : 224.0 / 256.0;
    }
}

void torchvision_finish(const TensorFile&, const std::string&, Config& c, Notes& notes) {
    for (const auto& [width, heads] : kBuilderHeads)
        if (c.heads == kHeadsUnstated && c.dim == width) c.heads = heads;
    notes.add(NoteTopic::Pixels, c.native_size() > 224
                                     ? "torchvision weights at " + std::to_string(c.native_size()) +
                                           " px: the SWAG end-to-end transform (bicubic, resize to the input, no crop margin)"
                                     : "torchvision weights at 224 px: IMAGENET1K_V1's transform (bilinear, short side " +
                                           std::to_string(c.eval_resize()) +
                                           "); the SWAG linear weights resize to 224 bicubic (--resize)");
}

}  // namespace

Source torchvision_source() {
    Source s;
    s.name = "torchvision";
    s.match = [](const TensorFile& f) -> std::optional<std::string> {
        auto prefix = prefix_before(f, "conv_proj.weight");
        if (!prefix || !f.has(*prefix + "encoder.pos_embedding")) return std::nullopt;
        return prefix;
    };
    s.names = torchvision_names;
    s.family = [](const Config&, const SideFiles&) { return Family::Torchvision; };
    s.pos_interp = [](const Config&, const SideFiles&) { return PosInterp::Corners; };  // interpolate_embeddings
    s.pipeline = PixelPipeline::Torchvision;
    s.pixel_defaults = torchvision_transform;
    s.finish = torchvision_finish;
    return s;
}

}  // namespace vitreg::source
