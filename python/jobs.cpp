// vitreg.extract, vitreg.dense, vitreg.merge and vitreg.study: the CLI's jobs over folders of
// images, writing (or returning) what the commands do.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kwargs.hpp"
#include "dense_options.hpp"
#include "vitreg/batch_options.hpp"
#include "vitreg/dense.hpp"
#include "vitreg/error.hpp"
#include "vitreg/extract.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/merge.hpp"
#include "vitreg/analysis/study.hpp"

namespace vitreg::python {

namespace {

using namespace pybind11::literals;

// What every batch job takes: the pixel and batch tables with the job's own defaults (dense: one
// image per forward), threads (None: the model's), the shard and the progress.
auto batch_keywords(const BatchOptions& defaults) {
    return pixel_keywords() + table_keywords(batch_option_table(), defaults) +
           keywords(Keyword{"threads"}, Keyword{"shard"}, Keyword{"shard_count", py::int_(0)}, Keyword{"progress"});
}

void take_batch_options(const PyModel& model, Options& o, BatchOptions& b, const std::string& out) {
    b.out_dir = out;
    b.resize = take_pixel_spec(o);
    take_table(o, batch_option_table(), b);
    b.threads = o.take<int>("threads", model.threads);
    b.image_limits = model.image_limits;
    b.max_tokens = model.max_tokens;
    if (b.threads < 0) throw UsageError("threads: " + std::to_string(b.threads) + " is outside 0..1024");
    // "K/N", "auto" (Slurm array or Kubernetes indexed job, with shard_count) or (K, N).
    const auto shard = o.take<py::object>("shard", py::none());
    const int shard_count = o.take<int>("shard_count", 0);
    if (shard.is_none()) return;
    std::string text;
    if (py::isinstance<py::str>(shard)) {
        text = shard.cast<std::string>();
    } else {
        const auto kn = shard.cast<std::pair<int, int>>();
        text = std::to_string(kn.first) + "/" + std::to_string(kn.second);
    }
    const Shard s = parse_shard(text, shard_count);
    b.shard_index = s.index;
    b.shard_count = s.count;
}

py::dict summary_dict(const BatchSummary& s, const std::string& out) {
    return py::dict("inputs"_a = s.inputs, "ok"_a = s.ok, "failed"_a = s.failed, "out"_a = out);
}

// The job's progress: a callable progress(done, total), called with the GIL held; True for a
// tqdm bar (vitreg/progress.py; nothing where tqdm is not installed); None or False for none.
BatchProgress progress_of(py::object callback) {
    if (callback.is_none() || (py::isinstance<py::bool_>(callback) && !callback.cast<bool>())) return {};
    if (py::isinstance<py::bool_>(callback)) {
        callback = py::module_::import("vitreg.progress").attr("bar")();
        if (callback.is_none()) return {};
    }
    // Shared, so that copies of the std::function (made without the GIL) never touch its refcount.
    auto shared = std::make_shared<py::object>(callback);
    return [shared](std::size_t done, std::size_t total) {
        py::gil_scoped_acquire hold;
        (*shared)(done, total);
    };
}

py::dict extract(const PyModel& model, const py::object& inputs, const py::object& out, Options& o) {
    ExtractOptions e;
    take_batch_options(model, o, e, path_of(out));
    e.patch_tokens = o.take<bool>("patch_tokens", false);
    e.project = o.take<bool>("project", false);
    const auto layout = o.take<std::string>("layout", "files");
    if (layout != "files" && layout != "shards")
        throw UsageError("extract: layout='" + layout + "' (expected 'files' or 'shards')");
    e.shard_layout = layout == "shards";
    const auto progress = progress_of(o.take<py::object>("progress", py::none()));
    o.finish();
    const auto paths = input_list(inputs);
    BatchSummary s;
    {
        py::gil_scoped_release release;
        s = extract_features(model.model, paths, e, progress);
    }
    return summary_dict(s, shard_dir(e.out_dir, e.shard_index, e.shard_count));
}

py::dict dense(const PyModel& model, const py::object& inputs, const py::object& out, Options& o) {
    DenseOptions d;
    take_batch_options(model, o, d, path_of(out));
    take_dense_options(o, d);
    d.pca_joint = o.take<bool>("pca_joint", false);
    // pca: True (the preview) | 'preview' | 'foreground' (DINOv3's picture), as --pca [foreground].
    const py::object pca = o.take<py::object>("pca", py::bool_(false));
    const std::string pca_kind = py::isinstance<py::str>(pca) ? pca.cast<std::string>() : (py::bool_(pca) ? "preview" : "");
    if (!pca_kind.empty() && pca_kind != "preview" && pca_kind != "foreground")
        throw UsageError("dense: pca='" + pca_kind + "' (expected True, 'preview' or 'foreground')");
    d.pca = !pca_kind.empty() || (d.pca_joint && d.pca_dims == 0);  // pca_joint alone: the joint preview
    d.pca_foreground = pca_kind == "foreground";
    // pca_mask: a path (a PNG or a folder of <stem>.png) or one uint8 / bool array [H, W] for every input.
    const py::object mask = o.take<py::object>("pca_mask", py::none());
    if (py::isinstance<py::str>(mask) || py::hasattr(mask, "__fspath__")) {
        d.pca_mask.path = path_of(mask);
    } else if (!mask.is_none()) {
        py::array a = shared_array(mask);
        if (a.dtype().kind() == 'b') a = a.attr("astype")("uint8");
        const auto dims = checked_dims<std::uint8_t>(a, {2}, "pca_mask", "a path or an [H, W] array");
        d.pca_mask.height = static_cast<int>(dims[0]);
        d.pca_mask.width = static_cast<int>(dims[1]);
        const auto* p = static_cast<const std::uint8_t*>(a.data());
        d.pca_mask.pixels.assign(p, p + a.size());
        if (d.pca_mask.pixels.empty()) throw UsageError("pca_mask: an empty array");
    }
    bool rule_given = false;
    const ArtifactRule rule = take_artifact_rule(o, &rule_given);
    if (rule_given) d.artifact_rule = rule;
    const auto progress = progress_of(o.take<py::object>("progress", py::none()));
    o.finish();
    const auto paths = input_list(inputs);
    BatchSummary s;
    {
        py::gil_scoped_release release;
        s = dense_features(model.model, paths, d, progress);
    }
    return summary_dict(s, shard_dir(d.out_dir, d.shard_index, d.shard_count));
}

// The study of `vitreg study`, as the parsed study.json (docs/study.md).
py::object study(const py::object& configs, const py::object& images, Options& o) {
    StudyOptions so;
    so.resize = take_pixel_spec(o);
    so.sizes = o.take<std::vector<int>>("sizes", {});
    const auto labels = o.take<py::object>("labels", py::none());
    if (!labels.is_none()) so.labels = path_of(labels);
    so.rules.rule = take_artifact_rule(o);
    so.rules.sink_alpha = o.take<float>("sink_alpha", so.rules.sink_alpha);
    so.timing_images = o.take<int>("timing_images", so.timing_images);
    so.threads = o.take<int>("threads", 0);
    o.finish();
    std::vector<std::string> specs;
    if (py::isinstance<py::str>(configs)) specs.push_back(configs.cast<std::string>());
    else specs = configs.cast<std::vector<std::string>>();
    std::vector<StudyConfig> parsed;
    for (const auto& spec : specs) parsed.push_back(StudyConfig::parse(spec));
    const auto paths = input_list(images);
    std::string text;
    {
        py::gil_scoped_release release;
        text = run_study(parsed, StudyImages::files(paths), so).dump();
    }
    return py::module_::import("json").attr("loads")(text);
}

}  // namespace

void bind_jobs(py::module_& m) {
    def_with_keywords(m, "extract", &extract, {"model", "inputs", "out"},
                      keywords(Keyword{"patch_tokens", py::bool_(false)}, Keyword{"project", py::bool_(false)},
                               Keyword{"layout", py::str("files")}) +
                          batch_keywords(ExtractOptions()),
                      R"(The batch job of `vitreg extract`: the same files, the same durability.

inputs  image files, folders (walked recursively, sorted) or '@list.txt', or a list of them; or
        webdataset tar shards ('.tar', '.tar.gz', '.tar.zst', 'shards/{00000..00099}.tar'): each
        sample a row with key, offset, caption (KEY.txt) and metadata (KEY.json).
layout  'files' (default) or 'shards' (tar inputs): per input shard NNNNN.cls.npy, ... (or
        NNNNN.safetensors) and NNNNN.keys.jsonl instead of the whole-job arrays; with
        patch_tokens also NNNNN.patch.safetensors (a tensor per row, named by its row).
out     the output folder: manifest.jsonl, cls.npy [N, D], pooled.npy, registers.npy,
        patch/<row>.npy with patch_tokens, embedding.npy [N, E] with project (cls @ proj, models
        with a projection: CLIP), run.json (or features.safetensors with
        format='safetensors'); job.json and chunks/ hold the durable progress.
batch   images per forward; threads: None for the model's.
chunk   inputs per durable chunk; resume continues a killed run, overwrite replaces another.
shard   'K/N' or (K, N): block K of N of the sorted inputs, into out/shard-K-of-N (vitreg.merge joins);
        'auto' takes K (and N) from a Slurm array task or a Kubernetes indexed job (with shard_count=N).
progress  a callable progress(done, total), called after each batch, or True for a tqdm bar (nothing
          where tqdm is not installed).
A bad image is a failed row of the manifest, not an exception. Returns a dict: inputs, ok, failed, out.)");
    def_with_keywords(m, "dense", &dense, {"model", "inputs", "out"},
                      dense_keywords() +
                          keywords(Keyword{"pca", py::bool_(false)}, Keyword{"pca_joint", py::bool_(false)}, Keyword{"pca_mask"}) +
                          artifact_rule_keywords(true) + batch_keywords(DenseOptions()),
                      R"(The batch job of `vitreg dense`: per-image patch-feature grids aligned to pixels.

Writes out/<row>.npy ([layers, h, w, D], or [h, w, C] for one layer or with concat),
<row>.pca.png with pca (pca='foreground': DINOv3's picture, its foreground from pca_mask when given:
a mask PNG, a folder of <stem>.png or an [H, W] uint8/bool array), <row>.pca_basis.safetensors with
pca_dims=K (the features reduced to K components before upsampling; pca_joint fits it over each
batch), and manifest.jsonl with each row's geometry (how a grid cell maps back
to source pixels). layers: 'last' | '-4,-3,-2,-1' | 'i,j'; norm applies the final LayerNorm;
upsample: 'none' | 'image' | 'xN' | 'bilinear' | 'jbu' | 'bilinear:SIZE' | 'jbu:SIZE'; dtype: 'f32' |
'f16'; window, stride, scales, flip, grid: the dense view (see Model.dense).
artifact_rule 'norm' | 'direction' | 'both' (None: no mask) writes <row>.artifacts.npy, float32
[layers, h, w], 1 where the rule flags the patch at each chosen layer (not with a view); mad_k,
defects (a file of vitreg.defects), defect_samples, defect_seed as in vitreg.compare.
Durable and shardable as extract.
Returns a dict: inputs, ok, failed, out.)");
    const StudyOptions defaults;
    def_with_keywords(m, "study", &study, {"configs", "images"},
                      pixel_keywords() + keywords(Keyword{"sizes", py::list()}, Keyword{"labels"}) +
                          artifact_rule_keywords() +
                          keywords(Keyword{"sink_alpha", decimal(defaults.rules.sink_alpha)},
                                   Keyword{"timing_images", py::int_(defaults.timing_images)},
                                   Keyword{"threads", py::int_(0)}),
                      R"(The study of `vitreg study` (docs/study.md): the property table measured per configuration.
Its rows compare softmax, registers, softmax-1 and sinks; what each rests on: docs/design.md,
"The study's property table".

configs  'MODEL[@softmax|@softmax1|@sink][@fp32|@bf16|@int8][@evict=LIST][@ttr=K:NEURONS]', or a list.
images   files, folders or '@list.txt' (even-numbered images calibrate, odd-numbered evaluate).
sizes    square sides for the mass against the number of keys, e.g. [112, 224, 448].
labels   a JSON file from image file name to label, to score the checkpoint's own head.
Returns study.json as a dict: "configs" holds one dict per configuration, in order.)");
    m.def(
        "merge",
        [](const py::object& out_path) {
            const std::string out = path_of(out_path);
            MergeSummary s;
            {
                py::gil_scoped_release release;
                s = merge_shards(out);
            }
            py::dict d = summary_dict(s.rows, out);
            d["shards"] = s.shards;
            return d;
        },
        "out"_a,
        R"(Joins out/shard-K-of-N/ of a sharded extract or dense into the files one process writes, as
`vitreg merge`. Raises vitreg.UsageError listing every missing, unfinished or mismatched shard.)");
}

}  // namespace vitreg::python
