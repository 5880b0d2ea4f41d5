// timm's Eva (EVA-02, EVA-CLIP towers; docs/design.md, "Families"): timm's names, but `gamma_1/2`
// for LayerScale, the attention fused (qkv with q_bias and v_bias; the k bias a zero buffer it does
// not save) or as q/k/v projections (k without bias), and the MLP plain, SwiGLU packed in fc1 (the
// gate first, timm's GluMlp) or SwiGLU as fc1_g and fc1_x (then mlp.norm before fc2).
#include "core/affix.hpp"
#include "core/checkpoint/timm_rules.hpp"

namespace vitreg::source {

namespace {

// The block names, picked from block 0's tensors.
NameTable eva_names(const TensorFile& f, const std::string& prefix) {
    const std::string b = prefix + "blocks.0.";
    NameTable t;
    t.block = {{"ls1.gamma", "gamma_1"}, {"ls2.gamma", "gamma_2"}};
    if (f.has(b + "attn.q_proj.weight")) t.block.push_back({"attn.qkv.", "attn.q_proj.|attn.k_proj.|attn.v_proj."});
    else t.block.push_back({"attn.qkv.bias", "attn.q_bias|attn.k_bias|attn.v_bias"});
    const auto width = [&](const std::string& name, std::size_t dim) -> std::int64_t {
        if (!f.has(b + name)) return -1;
        const auto& shape = f.get(b + name).shape;
        return shape.size() == 2 ? shape[dim] : -1;
    };
    if (f.has(b + "mlp.fc1_g.weight")) {
        t.block.push_back({"mlp.w12.", "mlp.fc1_g.|mlp.fc1_x."});
        t.block.push_back({"mlp.w3.", "mlp.fc2."});
    } else if (width("mlp.fc1.weight", 0) > 0 && width("mlp.fc1.weight", 0) == 2 * width("mlp.fc2.weight", 1)) {
        t.block.push_back({"mlp.w12.", "mlp.fc1."});
        t.block.push_back({"mlp.w3.", "mlp.fc2."});
    }
    return t;
}

// The tensors cannot say: timm's model definitions do (use_rot_pos_emb). Without them: EVA-02
// rotates (and has SwiGLU), EVA-01 does not (nor has SwiGLU).
Positions eva_positions(const Config& c, const SideFiles& side, Notes& notes) {
    if (side.timm_model) {
        const auto* rope = side.timm_arg("use_rot_pos_emb");
        return rope && rope->is_boolean() && rope->get<bool>() ? Positions::RopeEva : Positions::Learned;
    }
    const bool swiglu = c.mlp == MlpKind::SwiGlu;
    notes.add(NoteTopic::Positions, std::string("no timm config.json names the architecture: ") +
                                        (swiglu ? "EVA-02's rotary positions assumed (its SwiGLU MLP)"
                                                : "EVA-01's learned positions only assumed (no SwiGLU)"));
    return swiglu ? Positions::RopeEva : Positions::Learned;
}

}  // namespace

Source timm_eva_source() {
    Source s;
    s.name = "timm-eva";
    // timm's names with any of Eva's own: the q and v biases apart, q/k/v projections, SwiGLU's halves, gamma_1.
    s.match = [](const TensorFile& f) -> std::optional<std::string> {
        auto prefix = prefix_before(f, "patch_embed.proj.weight");
        if (!prefix) return std::nullopt;
        for (const char* t : {"blocks.0.attn.q_bias", "blocks.0.attn.q_proj.weight", "blocks.0.mlp.fc1_g.weight", "blocks.0.gamma_1"})
            if (f.has(*prefix + t)) return prefix;
        return std::nullopt;
    };
    s.names = eva_names;
    s.side_files = SideFormat::TimmHubConfig;
    s.timm_class = "Eva";
    s.timm_names = "timm Eva names";
    s.family = [](const Config&, const SideFiles&) { return Family::Eva; };
    s.positions = eva_positions;
    s.pos_interp = timm_pos_interp;
    s.activation = timm_activation;
    // (EVA-CLIP's tower keeps its projection as `head`)
    s.head_is_projection = [](const Config& c, const SideFiles& side) {
        return c.family == Family::Clip || contains(side.architecture, "_clip_");
    };
    return s;
}

}  // namespace vitreg::source
