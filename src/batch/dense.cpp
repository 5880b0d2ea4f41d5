#include "vitreg/dense.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "chunked_job.hpp"
#include "feature_table.hpp"
#include "feature_upsampler.hpp"
#include "core/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/analysis/pca.hpp"
#include "core/resample.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

void DenseOptions::parse_upsample(const std::string& text) {
    const auto bad = [&] {
        return UsageError("bad --upsample '" + text +
                          "' (expected none, image, xN (N in 1..64), bilinear, jbu, or bilinear:SIZE / jbu:SIZE with "
                          "SIZE image or xN)");
    };
    if (text == "none") {
        upsample = Upsample::None;
        return;
    }
    const auto colon = text.find(':');
    std::string size = text;
    method = UpsampleMethod::Bilinear;
    if (colon != std::string::npos || text == "bilinear" || text == "jbu") {
        try {
            method = parse_enum<UpsampleMethod>(text.substr(0, colon));
        } catch (const UsageError&) {
            throw bad();
        }
        size = colon == std::string::npos ? "image" : text.substr(colon + 1);
    }
    if (size == "image") {
        upsample = Upsample::Image;
    } else if (size.size() > 1 && size[0] == 'x' && parse_integer(size.substr(1), 1, 64)) {
        upsample = Upsample::Factor;
        factor = static_cast<int>(*parse_integer(size.substr(1), 1, 64));
    } else {
        throw bad();
    }
}

std::string DenseOptions::upsample_text() const {
    if (upsample == Upsample::None) return "none";
    const std::string size = upsample == Upsample::Image ? "image" : "x" + std::to_string(factor);
    // Bilinear keeps its old spelling, so that a resumed job from before methods existed still matches.
    return method == UpsampleMethod::Bilinear ? size : to_string(method) + ":" + size;
}

void DenseOptions::check(int patch) const {
    view.check(patch);
    if (pca_foreground && pca_joint) throw UsageError("--pca foreground is fitted per image: leave out --pca-joint");
    if (artifact_rule && !view.plain())
        throw UsageError("--artifact-rule: the mask is of one forward's patch grid; leave out --window, --image-scales, "
                         "--flip and --grid");
    if (method == UpsampleMethod::Jbu && upsample == Upsample::None)
        throw UsageError("--upsample jbu needs a size to upsample to (jbu:image or jbu:xN)");
    const JbuOptions plain;
    if (method != UpsampleMethod::Jbu &&
        (jbu.sigma_spatial != plain.sigma_spatial || jbu.sigma_range != plain.sigma_range || jbu.radius != plain.radius))
        throw UsageError("--jbu-sigma-spatial, --jbu-sigma-range and --jbu-radius apply only to --upsample jbu");
    if (!(jbu.sigma_spatial > 0) || !(jbu.sigma_range > 0) || jbu.radius < 0 || jbu.radius > 16)
        throw UsageError("--jbu-sigma-spatial and --jbu-sigma-range must be above 0 and --jbu-radius in 0..16");
}

namespace {

// The image as RGB in [0, 1]: the normalization undone (JBU's guide).
GuideImage guide_of(const Pixels& px, const Config& c) {
    GuideImage g{px.width, px.height, std::vector<float>(static_cast<std::size_t>(px.width) * px.height * 3)};
    const std::size_t plane = static_cast<std::size_t>(px.width) * px.height;
    for (std::size_t p = 0; p < plane; ++p)
        for (int ch = 0; ch < 3; ++ch) g.rgb[p * 3 + ch] = px.chw[ch * plane + p] * c.std[ch] + c.mean[ch];
    return g;
}

// The rows of one image's dense array, made on demand: each layer's grid (or all layers' side
// by side with concat) upsampled one output row at a time, so the array is never held whole.
class DenseRows {
public:
    // `layer_grid(l)`: layer l's [grid_h, grid_w, dim] patch grid.
    template <class LayerGrid>
    DenseRows(LayerGrid layer_grid, int layers, int dim, int grid_h, int grid_w, const Pixels& px, const Config& c,
              const DenseOptions& o) {
        int out_h = grid_h, out_w = grid_w;
        if (o.upsample == DenseOptions::Upsample::Image) out_h = px.height, out_w = px.width;
        if (o.upsample == DenseOptions::Upsample::Factor) out_h *= o.factor, out_w *= o.factor;
        const bool side_by_side = o.concat || layers == 1;
        const std::size_t cells = static_cast<std::size_t>(grid_h) * grid_w;
        if (side_by_side && layers > 1) {  // one layer is read where it lies
            concatenated_.resize(cells * layers * dim);
            for (int l = 0; l < layers; ++l) {
                const float* g = layer_grid(l);
                for (std::size_t p = 0; p < cells; ++p)
                    std::copy(g + p * dim, g + (p + 1) * dim, concatenated_.begin() + static_cast<std::ptrdiff_t>((p * layers + l) * dim));
            }
        }
        if (o.method == UpsampleMethod::Jbu && o.upsample != DenseOptions::Upsample::None) guide_ = guide_of(px, c);
        const int planes = side_by_side ? 1 : layers, channels = side_by_side ? layers * dim : dim;
        for (int k = 0; k < planes; ++k)
            planes_.emplace_back(side_by_side && layers > 1 ? concatenated_.data() : layer_grid(k), grid_h, grid_w, channels, out_h,
                                 out_w, o.upsample == DenseOptions::Upsample::None ? UpsampleMethod::Bilinear : o.method,
                                 &guide_, o.jbu);
        shape = side_by_side ? std::vector<std::int64_t>{out_h, out_w, static_cast<std::int64_t>(layers) * dim}
                             : std::vector<std::int64_t>{layers, out_h, out_w, dim};
        row_floats = static_cast<std::size_t>(out_w) * channels;
    }

    DenseRows(const DenseRows&) = delete;  // the upsamplers point into it
    DenseRows& operator=(const DenseRows&) = delete;

    // Rows [first, first + count) of the array seen as [rows, row_floats], in parallel.
    void fill(std::size_t first, std::size_t count, float* out) const {
        const std::size_t per_plane = static_cast<std::size_t>(planes_[0].out_h());
        tbb::parallel_for(std::size_t(0), count, [&](std::size_t i) {
            const std::size_t r = first + i;
            planes_[r / per_plane].row(static_cast<int>(r % per_plane), out + i * row_floats);
        });
    }

    std::vector<std::int64_t> shape;
    std::size_t row_floats = 0;

private:
    std::vector<float> concatenated_;
    GuideImage guide_;
    std::vector<FeatureUpsampler> planes_;
};

// Image b's patch grid of recorded layer slot l in a trace.
const float* trace_grid(const Trace& t, int l, int b) {
    return t.block_of(l, b) + static_cast<std::size_t>(t.patch_offset()) * t.dim;
}

Probe dense_probe(const DenseOptions& o, int depth) {
    Probe probe;
    probe.block_layers = resolve_layers(o.layers, depth);
    probe.blocks_normed = o.norm;
    return probe;
}

// Image b's flagged patches at each of the trace's block layers: float32 [layers, grid_h, grid_w].
void write_artifact_mask(const std::string& path, const ArtifactRule& rule, const Trace& t, int b) {
    const std::size_t plane = static_cast<std::size_t>(t.grid_h) * t.grid_w;
    std::vector<float> mask(t.block_layers.size() * plane, 0.0f);
    for (std::size_t k = 0; k < t.block_layers.size(); ++k)
        for (int token : rule.flag(t, b, t.block_layers[k])) mask[k * plane + (token - t.patch_offset())] = 1.0f;
    write_npy(path, ArrayRef{{static_cast<std::int64_t>(t.block_layers.size()), t.grid_h, t.grid_w}, mask.data()});
}

// A view's grid as the trace of a one-image forward without prefix tokens, so that the job reads
// it as it reads a plain forward's.
batch::Ran as_ran(DenseGrid&& g, const std::vector<int>& layers) {
    auto trace = std::make_shared<Trace>();
    trace->batch = 1;
    trace->tokens = g.height * g.width;
    trace->class_token = false;
    trace->grid_h = g.height;
    trace->grid_w = g.width;
    trace->dim = g.dim;
    trace->block_layers = layers;
    trace->blocks = std::move(g.data);
    auto features = std::make_shared<Features>();
    features->batch = 1;
    features->dim = trace->dim;
    features->grid_h = trace->grid_h;
    features->grid_w = trace->grid_w;
    return batch::Ran{std::move(features), std::move(trace), 0};
}

// input | picture ([H, W, 3] in [0, 1]), both at model-input resolution.
void write_pca_png(const std::string& path, const Pixels& px, const Config& c, const std::vector<float>& picture) {
    const int W = px.width, H = px.height;
    std::vector<std::uint8_t> out(static_cast<std::size_t>(H) * 2 * W * 3);
    const std::size_t plane = static_cast<std::size_t>(W) * H;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            for (int ch = 0; ch < 3; ++ch) {
                const float v = (px.chw[ch * plane + static_cast<std::size_t>(y) * W + x] * c.std[ch] + c.mean[ch]) * 255.0f;
                const std::size_t row = static_cast<std::size_t>(y) * 2 * W;
                out[(row + x) * 3 + ch] = static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L));
                const float p = picture[(static_cast<std::size_t>(y) * W + x) * 3 + ch] * 255.0f;
                out[(row + W + x) * 3 + ch] = static_cast<std::uint8_t>(std::clamp(std::lround(p), 0L, 255L));
            }
    write_png_rgb(path, 2 * W, H, out.data());
}

// DINOv3's picture of one image's patch features at its pixels: the whitened components and
// the foreground, upsampled as the features are (bilinear when they are not), then coloured.
std::vector<float> foreground_picture(const Trace& t, int b, const Pixels& px, const Config& c, const DenseOptions& o) {
    const auto feats = t.patch_features(b);
    const int width = static_cast<int>(t.block_layers.size()) * t.dim, cells = t.grid_h * t.grid_w;
    const PcaProjection pca = pca_foreground({feats.data(), t.grid_h, t.grid_w}, width);
    std::vector<float> grid(static_cast<std::size_t>(cells) * 4);
    for (int p = 0; p < cells; ++p) {
        std::copy(pca.whitened.begin() + p * 3, pca.whitened.begin() + (p + 1) * 3, grid.begin() + p * 4);
        grid[static_cast<std::size_t>(p) * 4 + 3] = pca.foreground[static_cast<std::size_t>(p)];
    }
    const UpsampleMethod method = o.upsample == DenseOptions::Upsample::None ? UpsampleMethod::Bilinear : o.method;
    const GuideImage guide = method == UpsampleMethod::Jbu ? guide_of(px, c) : GuideImage{};
    const FeatureUpsampler up(grid.data(), t.grid_h, t.grid_w, 4, px.height, px.width, method, &guide, o.jbu);
    std::vector<float> picture(static_cast<std::size_t>(px.height) * px.width * 3);
    tbb::parallel_for(0, px.height, [&](int y) {
        std::vector<float> row(static_cast<std::size_t>(px.width) * 4);
        up.row(y, row.data());
        for (int x = 0; x < px.width; ++x)
            foreground_colour(row.data() + x * 4, row[static_cast<std::size_t>(x) * 4 + 3],
                              picture.data() + (static_cast<std::size_t>(y) * px.width + x) * 3);
    });
    return picture;
}

nlohmann::ordered_json geometry_json(const Geometry& g, int patch) {
    return {{"source_width", g.source_width},
            {"source_height", g.source_height},
            {"resized_width", g.resized_width},
            {"resized_height", g.resized_height},
            {"scale_x", static_cast<double>(g.resized_width) / g.source_width},
            {"scale_y", static_cast<double>(g.resized_height) / g.source_height},
            {"crop_left", g.crop_left},
            {"crop_top", g.crop_top},
            {"patch", patch},
            {"input_width", g.width},
            {"input_height", g.height}};
}

}  // namespace

DenseArray dense_array(const Model& model, const Pixels& pixels, const DenseOptions& o) {
    const Config& c = model.config();
    o.check(c.patch);
    const Probe probe = dense_probe(o, c.depth);
    const int L = static_cast<int>(probe.block_layers.size());
    Trace t;
    DenseGrid g;
    if (o.view.plain()) {
        model.forward(pixels.chw.data(), 1, pixels.height, pixels.width, probe, t, ForwardOptions{o.threads, o.max_tokens});
    } else {
        check_view_tokens(model, pixels.height, pixels.width, o.view, o.max_tokens, "image");
        g = dense_grid(model, pixels, probe, o.view, ForwardOptions{o.threads, o.max_tokens});
    }
    const int gh = o.view.plain() ? t.grid_h : g.height, gw = o.view.plain() ? t.grid_w : g.width;
    const std::size_t plane = static_cast<std::size_t>(gh) * gw * c.dim;
    const DenseRows rows([&](int l) { return o.view.plain() ? trace_grid(t, l, 0) : g.data.data() + l * plane; }, L, c.dim,
                         gh, gw, pixels, c, o);
    DenseArray a;
    a.shape = rows.shape;
    a.data.resize(ArrayRef{a.shape, nullptr, DType::F32}.numel());
    rows.fill(0, a.data.size() / rows.row_floats, a.data.data());
    return a;
}

BatchSummary dense_features(const Model& model, const std::vector<std::string>& inputs, const DenseOptions& o,
                            const BatchProgress& progress) {
    const Config& c = model.config();
    if (o.pca_joint && o.shard_count > 1)
        throw UsageError("--pca-joint fits one PCA over each batch, and shards split the batches differently from a "
                         "single run: use --pca (per image) with --shard");
    o.check(c.patch);
    Probe probe = dense_probe(o, c.depth);
    // The artifact mask (docs/design.md, "Artifact metrics"): the rule read off the same forward.
    std::optional<ArtifactRule> rule;
    if (o.artifact_rule) {
        rule = o.artifact_rule->for_model(model);
        rule->ask(probe);
    }
    const std::string out = shard_dir(o.out_dir, o.shard_index, o.shard_count);
    const std::string ext = file_extension(o.format);
    const std::string dtype = o.half ? "f16" : "f32";
    const std::string upsample = o.upsample_text();

    auto identity = batch::job_identity("vitreg dense", model, inputs, o);
    identity["layers"] = probe.block_layers;
    identity["norm"] = o.norm;
    identity["concat"] = o.concat;
    identity["upsample"] = upsample;
    const nlohmann::ordered_json jbu = {
        {"sigma_spatial", o.jbu.sigma_spatial}, {"sigma_range", o.jbu.sigma_range}, {"radius", o.jbu.radius}};
    if (o.method == UpsampleMethod::Jbu) identity["jbu"] = jbu;
    if (!o.view.plain()) identity["view"] = o.view.to_json();
    identity["dtype"] = dtype;
    identity["pca"] = o.pca_foreground ? "foreground per image"
                      : o.pca          ? (o.pca_joint ? "joint over batches of " + std::to_string(std::max(1, o.batch)) : "per image")
                                       : "none";
    if (rule) identity["artifact_rule"] = rule->to_json();

    batch::ChunkWork work;
    if (!o.view.plain()) {
        // Each image through the view: its crops (per scale and flip) run as one batch each.
        work.runner.check = [&](int h, int w, const std::string& name) {
            check_view_tokens(model, h, w, o.view, o.max_tokens, name);
        };
        work.runner.run = [&](const std::vector<batch::Prepared>& prepared, const ForwardOptions& fwd) {
            std::vector<batch::Ran> ran(prepared.size());
            for (std::size_t i = 0; i < prepared.size(); ++i)
                if (prepared[i].pixels)
                    ran[i] = as_ran(dense_grid(model, *prepared[i].pixels, probe, o.view, fwd), probe.block_layers);
            return ran;
        };
    }
    std::vector<PcaPreview> previews;  // the current batch's, by position in it
    work.begin_batch = [&](const std::vector<batch::Prepared>& prepared, const std::vector<batch::Ran>& ran) {
        if (!o.pca || o.pca_foreground) return;
        const std::size_t count = prepared.size();
        std::vector<std::vector<float>> feats(count);
        std::vector<PatchFeatures> all;
        std::vector<std::size_t> which;
        for (std::size_t i = 0; i < count; ++i) {
            if (!prepared[i].pixels) continue;
            feats[i] = ran[i].trace->patch_features(ran[i].index);
            all.push_back({feats[i].data(), ran[i].trace->grid_h, ran[i].trace->grid_w});
            which.push_back(i);
        }
        previews.assign(count, PcaPreview{});
        const int width = static_cast<int>(probe.block_layers.size()) * c.dim;
        if (o.pca_joint && !all.empty()) {
            const auto joint = pca_preview(all, width);
            for (std::size_t k = 0; k < which.size(); ++k) previews[which[k]] = joint[k];
        } else {
            for (std::size_t k = 0; k < which.size(); ++k) previews[which[k]] = pca_preview({all[k]}, width)[0];
        }
    };
    work.image = [&](batch::ChunkData&, nlohmann::ordered_json& row, std::size_t r, std::size_t in_batch,
                     const batch::Prepared& prepared, const batch::Ran& ran) {
        const Trace& t = *ran.trace;
        const Pixels& px = *prepared.pixels;
        const DenseRows rows([&](int l) { return trace_grid(t, l, ran.index); }, static_cast<int>(t.block_layers.size()),
                             t.dim, t.grid_h, t.grid_w, px, c, o);
        const std::string stem = out + "/" + std::to_string(r);
        batch::write_array_rows(stem, "features", rows.shape, o.half ? DType::F16 : DType::F32, o.format,
                                {{"source", row["path"].get<std::string>()}}, rows.row_floats,
                                [&](std::size_t first, std::size_t count, float* to) { rows.fill(first, count, to); });
        if (o.pca_foreground) {
            write_pca_png(stem + ".pca.png", px, c, foreground_picture(t, ran.index, px, c, o));
        } else if (o.pca) {
            const auto& rgb = previews[in_batch].rgb;
            write_pca_png(stem + ".pca.png", px, c,
                          resample_hwc(rgb.data(), t.grid_h, t.grid_w, 3, linear_axis(t.grid_h, px.height), linear_axis(t.grid_w, px.width)));
        }
        if (rule) write_artifact_mask(stem + ".artifacts.npy", *rule, t, ran.index);
        row["file"] = std::to_string(r) + ext;
        row["shape"] = rows.shape;
        row["geometry"] = geometry_json(prepared.geometry, c.patch);
        if (!o.view.plain()) row["view"] = o.view.to_json();
    };
    const auto run = batch::run_chunked(model, inputs, o, std::move(identity), probe, work, progress);

    nlohmann::json row_files{"{row}" + ext};
    if (o.pca || o.pca_foreground) row_files.push_back("{row}.pca.png");
    if (rule) row_files.push_back("{row}.artifacts.npy");
    nlohmann::json info = {
        {"model", model.path()},
        {"config", to_json(c)},  // the whole configuration, as config_from_json reads it back
        {"attention", to_string(c.attention)},
        {"precision", model.precision().describe()},
        {"intervention", model.intervention().to_string()},
        {"layers", probe.block_layers},
        {"norm", o.norm},
        {"concat", o.concat},
        {"upsample", upsample},
        {"resize", o.resize.to_string()},
        {"dtype", dtype},
        {"format", to_string(o.format)},
        {"row_files", row_files},
    };
    if (o.method == UpsampleMethod::Jbu) info["jbu"] = jbu;
    if (!o.view.plain()) info["view"] = o.view.to_json();
    if (rule) info["artifact_rule"] = rule->to_json();
    return batch::write_feature_table(run.out_dir, batch::rows_in_order(run.chunks), {}, o.format, model.path(),
                                      std::move(info));
}

}  // namespace vitreg
