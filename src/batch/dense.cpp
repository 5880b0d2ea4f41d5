#include "vitreg/dense.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "chunked_job.hpp"
#include "feature_table.hpp"
#include "core/parse_number.hpp"
#include "vitreg/error.hpp"
#include "vitreg/analysis/pca.hpp"
#include "core/resample.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

void DenseOptions::parse_upsample(const std::string& text) {
    if (text == "none") {
        upsample = Upsample::None;
    } else if (text == "image") {
        upsample = Upsample::Image;
    } else if (text.size() > 1 && text[0] == 'x' && parse_integer(text.substr(1), 1, 64)) {
        upsample = Upsample::Factor;
        factor = static_cast<int>(*parse_integer(text.substr(1), 1, 64));
    } else {
        throw UsageError("bad --upsample '" + text + "' (expected none, image or xN with N in 1..64)");
    }
}

namespace {

// One image's dense array: `layers` grids of [h, w, D] side by side in channels or stacked.
struct DenseArray {
    std::vector<std::int64_t> shape;
    std::vector<float> data;
};

DenseArray assemble(const Trace& t, int b, const DenseOptions& o, int out_h, int out_w) {
    const int L = static_cast<int>(t.block_layers.size()), D = t.dim, gh = t.grid_h, gw = t.grid_w;
    const std::size_t plane = static_cast<std::size_t>(out_h) * out_w;
    DenseArray a;
    a.data.resize(plane * L * D);
    const bool resize = out_h != gh || out_w != gw;
    const ResampleAxis ys = resize ? linear_axis(gh, out_h) : ResampleAxis{}, xs = resize ? linear_axis(gw, out_w) : ResampleAxis{};
    for (int l = 0; l < L; ++l) {
        const float* grid = t.block_of(l, b) + static_cast<std::size_t>(t.patch_offset()) * D;  // [gh*gw, D]
        std::vector<float> up = resize ? resample_hwc(grid, gh, gw, D, ys, xs)
                                       : std::vector<float>(grid, grid + static_cast<std::size_t>(gh) * gw * D);
        if (o.concat || L == 1) {
            for (std::size_t p = 0; p < plane; ++p)
                std::copy(up.begin() + static_cast<std::ptrdiff_t>(p * D), up.begin() + static_cast<std::ptrdiff_t>((p + 1) * D),
                          a.data.begin() + static_cast<std::ptrdiff_t>((p * L + l) * D));
        } else {
            std::copy(up.begin(), up.end(), a.data.begin() + static_cast<std::ptrdiff_t>(l * plane * D));
        }
    }
    if (o.concat || L == 1) a.shape = {out_h, out_w, static_cast<std::int64_t>(L) * D};
    else a.shape = {L, out_h, out_w, D};
    return a;
}

// input | PCA colours (bilinear from the patch grid), both at model-input resolution.
void write_pca_png(const std::string& path, const Pixels& px, const Config& c, const PcaPreview& pca, int gh, int gw) {
    const int W = px.width, H = px.height;
    const auto rgb = resample_hwc(pca.rgb.data(), gh, gw, 3, linear_axis(gh, H), linear_axis(gw, W));
    std::vector<std::uint8_t> out(static_cast<std::size_t>(H) * 2 * W * 3);
    const std::size_t plane = static_cast<std::size_t>(W) * H;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            for (int ch = 0; ch < 3; ++ch) {
                const float v = (px.chw[ch * plane + static_cast<std::size_t>(y) * W + x] * c.std[ch] + c.mean[ch]) * 255.0f;
                const std::size_t row = static_cast<std::size_t>(y) * 2 * W;
                out[(row + x) * 3 + ch] = static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L));
                const float p = rgb[(static_cast<std::size_t>(y) * W + x) * 3 + ch] * 255.0f;
                out[(row + W + x) * 3 + ch] = static_cast<std::uint8_t>(std::clamp(std::lround(p), 0L, 255L));
            }
    write_png_rgb(path, 2 * W, H, out.data());
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

BatchSummary dense_features(const Model& model, const std::vector<std::string>& inputs, const DenseOptions& o,
                            const BatchProgress& progress) {
    const Config& c = model.config();
    if (o.pca_joint && o.shard_count > 1)
        throw UsageError("--pca-joint fits one PCA over each batch, and shards split the batches differently from a "
                         "single run: use --pca (per image) with --shard");
    Probe probe;
    probe.block_layers = resolve_layers(o.layers, c.depth);
    probe.blocks_normed = o.norm;
    const std::string out = shard_dir(o.out_dir, o.shard_index, o.shard_count);
    const std::string ext = file_extension(o.format);
    const std::string dtype = o.half ? "f16" : "f32";
    const std::string upsample = o.upsample == DenseOptions::Upsample::None    ? "none"
                                 : o.upsample == DenseOptions::Upsample::Image ? "image"
                                                                               : "x" + std::to_string(o.factor);

    auto identity = batch::job_identity("vitreg dense", model, inputs, o);
    identity["layers"] = probe.block_layers;
    identity["norm"] = o.norm;
    identity["concat"] = o.concat;
    identity["upsample"] = upsample;
    identity["dtype"] = dtype;
    identity["pca"] = o.pca ? (o.pca_joint ? "joint over batches of " + std::to_string(std::max(1, o.batch)) : "per image")
                            : "none";

    batch::ChunkWork work;
    std::vector<PcaPreview> previews;  // the current batch's, by position in it
    work.begin_batch = [&](const std::vector<batch::Prepared>& prepared, const std::vector<batch::Ran>& ran) {
        if (!o.pca) return;
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
        int out_h = t.grid_h, out_w = t.grid_w;
        if (o.upsample == DenseOptions::Upsample::Image) out_h = px.height, out_w = px.width;
        if (o.upsample == DenseOptions::Upsample::Factor) out_h *= o.factor, out_w *= o.factor;
        const DenseArray a = assemble(t, ran.index, o, out_h, out_w);
        const std::string stem = out + "/" + std::to_string(r);
        batch::write_array(stem, "features", ArrayRef{a.shape, a.data.data(), o.half ? DType::F16 : DType::F32}, o.format,
                           {{"source", row["path"].get<std::string>()}});
        if (o.pca) write_pca_png(stem + ".pca.png", px, c, previews[in_batch], t.grid_h, t.grid_w);
        row["file"] = std::to_string(r) + ext;
        row["shape"] = a.shape;
        row["geometry"] = geometry_json(prepared.geometry, c.patch);
    };
    const auto run = batch::run_chunked(model, inputs, o, std::move(identity), probe, work, progress);

    nlohmann::json row_files{"{row}" + ext};
    if (o.pca) row_files.push_back("{row}.pca.png");
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
    return batch::write_feature_table(run.out_dir, batch::rows_in_order(run.chunks), {}, o.format, model.path(),
                                      std::move(info));
}

}  // namespace vitreg
