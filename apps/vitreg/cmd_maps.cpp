// vitreg maps MODEL IMAGE -o OUT_DIR: attention maps, patch-norm heatmaps and statistics of one
// image; the command line over render::write_maps.
#include "common.hpp"
#include "vitreg/render/maps.hpp"

namespace vitreg::cli {

namespace {

// The command's arguments: the model, the image and limits as every command takes them, the
// rest straight into the library's options (defaults and all).
struct MapsArgs {
    ModelArgs model;
    std::string image;
    PixelArgs pixels;
    InputLimits limits;
    render::MapsOptions options;
};

void add_maps_options(CLI::App& cmd, MapsArgs& a) {
    render::MapsOptions& o = a.options;
    add_model_args(cmd, a.model);
    cmd.add_option("IMAGE", a.image, "the image")->required();
    cmd.add_option("-o,--out", o.out, "output folder")->required();
    cmd.add_option("--layers", o.layers, "all | last | i,j,... (negative counts from the end)")->capture_default_str();
    cmd.add_option("--heads", o.heads, "all (each head + their mean) | mean | max | min")
        ->check(CLI::IsMember({"all", "mean", "max", "min"}))
        ->capture_default_str();
    cmd.add_option("--query", o.query,
                   "cls | reg:K | patch:R,C | probe (the attention-pool head's query over the final tokens: SigLIP's MAP)")
        ->capture_default_str();
    cmd.add_flag("--rollout", o.rollout, "also write rollout.png (Abnar & Zuidema)");
    cmd.add_option("--discard", o.discard, "rollout: zero this fraction of the smallest fused weights per layer")
        ->check(CLI::Range(0.0f, 0.99f));
    add_pixel_args(cmd, a.pixels, "eval | none | WxH | short:N | long:N");
    cmd.add_flag("--save-attention", o.save_attention,
                 "write attention.npy [layers, heads, 1, tokens] ([1, heads, 1, tokens] for --query probe)");
    cmd.add_flag("--save-norms", o.save_norms, "write norms.npy [layers, tokens]");
    cmd.add_option("--norm-threshold", o.rules.norm_threshold, "absolute artifact threshold on token norms")->capture_default_str();
    cmd.add_option("--mad-k", o.rules.rule.mad_k, "model-free rule: norm (or |cos|) > median + k*MAD")->capture_default_str();
    add_artifact_rule_args(cmd, o.rules.rule);
    add_table_option(cmd, "threads", o.threads);
    add_input_limit_args(cmd, a.limits);
}

}  // namespace

void register_maps(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("maps", "attention maps, patch-norm heatmaps and artifact statistics of one image");
    auto a = std::make_shared<MapsArgs>();
    add_maps_options(*cmd, *a);
    cmd->callback([&run, a] {
        run = [a] {
            render::MapsOptions o = a->options;
            o.resize = pixel_spec(a->pixels);
            o.image_limits = a->limits.image;
            o.max_tokens = a->limits.max_tokens;
            const render::MapsResult r = render::write_maps(load_model(a->model), a->image, o);
            status_out() << "vitreg: maps of " << a->image << " (" << r.description << ") written to " << o.out << "\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
