#include "vitreg/dense.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "chunked_job.hpp"
#include "feature_table.hpp"
#include "feature_upsampler.hpp"
#include "core/half_rows.hpp"
#include "core/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/analysis/pca.hpp"
#include "core/resample.hpp"
#include "pca_mask.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

// The image as RGB in [0, 1]: the normalization undone (JBU's guide).
GuideImage guide_of(const Pixels& px, const Config& c) {
    GuideImage g{px.width, px.height, std::vector<float>(static_cast<std::size_t>(px.width) * px.height * 3)};
    const std::size_t plane = static_cast<std::size_t>(px.width) * px.height;
    for (std::size_t p = 0; p < plane; ++p)
        for (int ch = 0; ch < 3; ++ch) g.rgb[p * 3 + ch] = px.chw[ch * plane + p] * c.std[ch] + c.mean[ch];
    return g;
}

// Image b's patch grid of recorded layer slot l in a trace.
const float* trace_grid(const Trace& t, int l, int b) {
    return t.block_of(l, b) + static_cast<std::size_t>(t.patch_offset()) * t.dim;
}

// The rows of one image's dense array, made on demand: each layer's grid (or all layers' side
// by side with concat) upsampled one output row at a time, so the array is never held whole.
// With a PCA basis the layers side by side are first reduced to its K components, one plane
// (docs/design.md, "Dense features at resolution": reduce, then upsample).
class DenseRows {
public:
    // Image b of trace t (its grid: the views' average when it came from as_ran).
    DenseRows(const Trace& t, int b, const PcaBasis* basis, const Pixels& px, const Config& c, const DenseOptions& o) {
        const int grid_h = t.grid_h, grid_w = t.grid_w;
        const std::size_t cells = static_cast<std::size_t>(grid_h) * grid_w;
        if (basis) reduced_ = project_on(*basis, t.patch_features(b).data(), cells);
        const auto layer_grid = [&](int l) { return basis ? reduced_.data() : trace_grid(t, l, b); };
        const int layers = basis ? 1 : static_cast<int>(t.block_layers.size()), dim = basis ? basis->k : t.dim;
        int out_h = grid_h, out_w = grid_w;
        if (o.upsample == DenseOptions::Upsample::Image) out_h = px.height, out_w = px.width;
        if (o.upsample == DenseOptions::Upsample::Factor) out_h *= o.factor, out_w *= o.factor;
        const bool side_by_side = o.concat || layers == 1;
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
    std::vector<float> reduced_;  // [cells, K] with a basis
    std::vector<float> concatenated_;
    GuideImage guide_;
    std::vector<FeatureUpsampler> planes_;
};

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
// `mask`: the foreground cells (foreground_cells), or empty for the first component's threshold.
std::vector<float> foreground_picture(const Trace& t, int b, const Pixels& px, const Config& c, const DenseOptions& o,
                                      const std::vector<std::uint8_t>& mask) {
    const auto feats = t.patch_features(b);
    const int width = static_cast<int>(t.block_layers.size()) * t.dim, cells = t.grid_h * t.grid_w;
    const PcaProjection pca = pca_foreground({feats.data(), t.grid_h, t.grid_w}, width, mask);
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

// Image b's features reduced by a basis fitted on it alone (fit_pca_basis), for --pca-dims without --pca-joint.
PcaBasis image_basis(const Trace& t, int b, int k) {
    const auto feats = t.patch_features(b);
    return fit_pca_basis({{feats.data(), t.grid_h, t.grid_w}}, static_cast<int>(t.block_layers.size()) * t.dim, k);
}

void write_pca_basis(const std::string& path, const PcaBasis& b, const std::string& fit) {
    const auto tensors = pca_basis_tensors(b);
    std::map<std::string, ArrayRef> refs;
    for (const auto& [name, t] : tensors) refs.emplace(name, ArrayRef{t.shape, t.values.data(), DType::F32});
    write_safetensors(path, refs,
                      {{"fit", fit},
                       {"patches", std::to_string(b.patches)},
                       {"total_variance", std::to_string(b.total_variance)},
                       {"signs", "each component's largest-magnitude loading positive"}});
}

// The current batch's PCAs, where the options ask for them: each image's picture (--pca without
// foreground: joint over the batch with --pca-joint, else per image) and the reduction's basis
// fitted over the batch (--pca-dims with --pca-joint). `width`: the chosen layers' channels.
void fit_batch_pcas(const DenseOptions& o, int width, const std::vector<batch::Prepared>& prepared,
                    const std::vector<batch::Ran>& ran, std::vector<PcaPreview>& previews, PcaBasis& joint_basis) {
    const bool preview = o.pca && !o.pca_foreground, joint_reduction = o.pca_dims > 0 && o.pca_joint;
    if (!preview && !joint_reduction) return;
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
    if (joint_reduction && !all.empty()) joint_basis = fit_pca_basis(all, width, o.pca_dims);
    if (!preview) return;
    previews.assign(count, PcaPreview{});
    if (o.pca_joint && !all.empty()) {
        const auto joint = pca_preview(all, width);
        for (std::size_t k = 0; k < which.size(); ++k) previews[which[k]] = joint[k];
    } else {
        for (std::size_t k = 0; k < which.size(); ++k) previews[which[k]] = pca_preview({all[k]}, width)[0];
    }
}

// The image beside its PCA picture: DINOv3's foreground one (--pca foreground, within the mask
// of the image at `source` where --pca-mask gives one), else the batch's `preview` upsampled.
void write_pca_picture(const std::string& path, const DenseOptions& o, const Config& c, const batch::Prepared& prepared,
                       const batch::Ran& ran, const std::string& source, const PcaPreview* preview) {
    const Trace& t = *ran.trace;
    const Pixels& px = *prepared.pixels;
    if (!preview) {
        const auto mask = o.pca_mask.given() ? batch::foreground_cells(o.pca_mask, source, prepared.geometry, t.grid_h, t.grid_w)
                                             : std::vector<std::uint8_t>{};
        write_pca_png(path, px, c, foreground_picture(t, ran.index, px, c, o, mask));
        return;
    }
    write_pca_png(path, px, c,
                  resample_hwc(preview->rgb.data(), t.grid_h, t.grid_w, 3, linear_axis(t.grid_h, px.height),
                               linear_axis(t.grid_w, px.width)));
}

}  // namespace

std::map<std::string, BasisTensor> pca_basis_tensors(const PcaBasis& b) {
    const auto floats = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    std::vector<float> ratio;
    for (const double v : b.explained_variance) ratio.push_back(b.total_variance > 0 ? static_cast<float>(v / b.total_variance) : 0.0f);
    return {{"mean", {{b.dim}, floats(b.mean)}},
            {"components", {{b.k, b.dim}, floats(b.components)}},
            {"explained_variance", {{b.k}, floats(b.explained_variance)}},
            {"explained_variance_ratio", {{b.k}, ratio}}};
}

DenseArray dense_array(const Model& model, const Pixels& pixels, const DenseOptions& o) {
    const Config& c = model.config();
    o.check(c);
    const Probe probe = dense_probe(o, c.depth);
    const ForwardOptions fwd{o.threads, o.max_tokens};
    std::shared_ptr<const Trace> t;
    if (o.view.plain()) {
        auto plain = std::make_shared<Trace>();
        model.forward(pixels.chw.data(), 1, pixels.height, pixels.width, probe, *plain, fwd);
        t = std::move(plain);
    } else {
        check_view_tokens(model, pixels.height, pixels.width, o.view, o.max_tokens, "image");
        t = as_ran(dense_grid(model, pixels, probe, o.view, fwd), probe.block_layers).trace;
    }
    DenseArray a;
    if (o.pca_dims > 0) a.basis = image_basis(*t, 0, o.pca_dims);
    const DenseRows rows(*t, 0, o.pca_dims > 0 ? &a.basis : nullptr, pixels, c, o);
    a.shape = rows.shape;
    const std::size_t numel = ArrayRef{a.shape, nullptr, DType::F32}.numel(), row_count = numel / rows.row_floats;
    if (!o.half) {
        a.data.resize(numel);
        rows.fill(0, row_count, a.data.data());
        return a;
    }
    // f16: narrowed block by block as the writer does, so the float32 array is never held whole
    // (a 2048 x 2048 x 384 output is 3.2 GB in f16, 6.4 GB in f32).
    a.half.resize(numel);
    const std::size_t block = std::min(row_count, std::max<std::size_t>(1, (std::size_t{4} << 20) / rows.row_floats));
    std::vector<float> scratch(block * rows.row_floats);
    for (std::size_t first = 0; first < row_count; first += block) {
        const std::size_t count = std::min(block, row_count - first);
        rows.fill(first, count, scratch.data());
        floats_to_half(scratch.data(), count * rows.row_floats, a.half.data() + first * rows.row_floats);
    }
    return a;
}

BatchSummary dense_features(const Model& model, const std::vector<std::string>& inputs, const DenseOptions& o,
                            const BatchProgress& progress) {
    const Config& c = model.config();
    if (o.pca_joint && o.shard_count > 1)
        throw UsageError("--pca-joint fits one PCA over each batch, and shards split the batches differently from a "
                         "single run: use --pca (per image) with --shard");
    o.check(c);  // a bad layer list, view or option combination fails before any output
    Probe probe = dense_probe(o, c.depth);
    // The artifact mask (docs/design.md, "Artifact metrics"): the rule read off the same forward.
    std::optional<ArtifactRule> rule;
    if (o.artifact_rule) {
        rule = o.artifact_rule->for_model(model);
        rule->ask(probe);
    }
    const std::string out = shard_dir(o.out_dir, o.shard_index, o.shard_count);
    const std::string ext = file_extension(o.format);

    auto identity = batch::job_identity("vitreg dense", model, inputs, o);
    identity.update(o.to_json(probe.block_layers, rule ? &*rule : nullptr));
    const std::string pca_fit = o.pca_fit();

    batch::ChunkWork work;
    // Inputs refused before they run (each one a failed row): too many tokens, a grid too small
    // to fit a reduction on, a missing or unusable mask.
    work.runner.check = [&](int h, int w, const Geometry& g, const std::string& name) {
        if (o.view.plain()) model.check_tokens(h, w, o.max_tokens, name);
        else check_view_tokens(model, h, w, o.view, o.max_tokens, name);
        const int gh = o.view.grid_h > 0 ? o.view.grid_h : h / c.patch, gw = o.view.grid_w > 0 ? o.view.grid_w : w / c.patch;
        if (o.pca_dims > 0 && gh * gw < 2) throw UsageError(name + ": --pca-dims needs a grid of at least 2 patches");
        if (o.pca_mask.given()) batch::foreground_cells(o.pca_mask, name, g, gh, gw);
    };
    if (!o.view.plain()) {
        // Each image through the view: its crops (per scale and flip) run as one batch each.
        work.runner.run = [&](const std::vector<batch::Prepared>& prepared, const ForwardOptions& fwd) {
            std::vector<batch::Ran> ran(prepared.size());
            for (std::size_t i = 0; i < prepared.size(); ++i)
                if (prepared[i].pixels)
                    ran[i] = as_ran(dense_grid(model, *prepared[i].pixels, probe, o.view, fwd), probe.block_layers);
            return ran;
        };
    }
    std::vector<PcaPreview> previews;  // the current batch's, by position in it
    PcaBasis joint_basis;              // the current batch's, with pca_dims and pca_joint
    work.begin_batch = [&](const std::vector<batch::Prepared>& prepared, const std::vector<batch::Ran>& ran) {
        fit_batch_pcas(o, static_cast<int>(probe.block_layers.size()) * c.dim, prepared, ran, previews, joint_basis);
    };
    work.image = [&](batch::ChunkData&, nlohmann::ordered_json& row, std::size_t r, std::size_t in_batch,
                     const batch::Prepared& prepared, const batch::Ran& ran) {
        const Trace& t = *ran.trace;
        const Pixels& px = *prepared.pixels;
        PcaBasis own_basis;
        if (o.pca_dims > 0 && !o.pca_joint) own_basis = image_basis(t, ran.index, o.pca_dims);
        const PcaBasis* basis = o.pca_dims == 0 ? nullptr : o.pca_joint ? &joint_basis : &own_basis;
        const DenseRows rows(t, ran.index, basis, px, c, o);
        const std::string stem = out + "/" + std::to_string(r);
        batch::write_array_rows(stem, "features", rows.shape, o.half ? DType::F16 : DType::F32, o.format,
                                {{"source", row["path"].get<std::string>()}}, rows.row_floats,
                                [&](std::size_t first, std::size_t count, float* to) { rows.fill(first, count, to); });
        if (o.pca_foreground || o.pca)
            write_pca_picture(stem + ".pca.png", o, c, prepared, ran, row["path"].get<std::string>(),
                              o.pca_foreground ? nullptr : &previews[in_batch]);
        if (rule) write_artifact_mask(stem + ".artifacts.npy", *rule, t, ran.index);
        if (basis) {
            write_pca_basis(stem + ".pca_basis.safetensors", *basis, pca_fit);
            row["pca_basis"] = std::to_string(r) + ".pca_basis.safetensors";
        }
        row["file"] = std::to_string(r) + ext;
        row["shape"] = rows.shape;
        row["geometry"] = geometry_json(prepared.geometry, c.patch);
        if (!o.view.plain()) row["view"] = o.view.to_json();
    };
    const auto run = batch::run_chunked(model, inputs, o, std::move(identity), probe, work, progress);

    nlohmann::json row_files{"{row}" + ext};
    if (o.pca || o.pca_foreground) row_files.push_back("{row}.pca.png");
    if (rule) row_files.push_back("{row}.artifacts.npy");
    if (o.pca_dims > 0) row_files.push_back("{row}.pca_basis.safetensors");
    nlohmann::json info = {
        {"model", model.path()},
        {"config", to_json(c)},  // the whole configuration, as config_from_json reads it back
        {"attention", to_string(c.attention)},
        {"precision", model.precision().describe()},
        {"intervention", model.intervention().to_string()},
    };
    info.update(o.to_json(probe.block_layers, rule ? &*rule : nullptr));
    info["resize"] = o.resize.to_string();
    info["format"] = to_string(o.format);
    info["row_files"] = row_files;
    return batch::write_feature_table(run.out_dir, batch::rows_in_order(run.chunks), {}, o.format, model.path(),
                                      std::move(info));
}

}  // namespace vitreg
