// vitreg.Model: load a checkpoint, preprocess images, run forwards and traces; numpy in and out.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kwargs.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/image.hpp"
#include "vitreg/model_options.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/probe.hpp"

namespace vitreg::python {

namespace {

using namespace pybind11::literals;

// A layer selection as Python users write it: "all" | "last" | "i,j" | [i, j] | None (none).
using Layers = std::optional<std::variant<std::string, std::vector<int>>>;

std::vector<int> layers_of(const Layers& spec, int depth) {
    if (!spec) return {};
    if (const auto* text = std::get_if<std::string>(&*spec)) return resolve_layers(*text, depth);
    std::string joined;
    for (const int l : std::get<std::vector<int>>(*spec)) joined += (joined.empty() ? "" : ",") + std::to_string(l);
    if (joined.empty()) return {};
    return resolve_layers(joined, depth);
}

py::dict config_dict(const PyModel& self) {
    const Config& c = self.model.config();
    const std::string described = to_json(c).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    py::dict d = py::module_::import("json").attr("loads")(described);
    // The names this dict used before it came from to_json, kept beside to_json's.
    for (const auto& [earlier, key] : {std::pair<const char*, const char*>{"patch", "patch_size"},
                                       {"registers", "num_registers"},
                                       {"eps", "layer_norm_eps"},
                                       {"mean", "image_mean"},
                                       {"std", "image_std"},
                                       {"mlp", "act"}})
        d[earlier] = d[key];
    // The loaded model's, beyond its checkpoint's configuration.
    d["path"] = self.model.path();
    d["native_size"] = c.native_size();
    d["retrofit"] = c.retrofit();
    d["precision"] = self.model.precision().describe();
    d["intervention"] = self.model.intervention().to_string();
    d["test_time_registers"] = self.model.intervention().test_time_registers;
    return d;
}

// Features as arrays that own the library's buffers: cls [B, D], pooled [B, D],
// registers [B, R, D], patch [B, h, w, D], and embedding [B, E] for models with a projection.
py::dict features_dict(Features&& f) {
    const py::ssize_t B = f.batch, D = f.dim;
    std::vector<float> pooled;
    pooled.reserve(static_cast<std::size_t>(B * D));
    for (int b = 0; b < f.batch; ++b) {
        const auto p = f.pooled_of(b);
        pooled.insert(pooled.end(), p.begin(), p.end());
    }
    py::dict out;
    out["cls"] = owning_array(std::move(f.cls), {B, D});
    out["pooled"] = owning_array(std::move(pooled), {B, D});
    out["registers"] = owning_array(std::move(f.reg_tokens), {B, f.registers, D});
    out["patch"] = owning_array(std::move(f.patches), {B, f.grid_h, f.grid_w, D});
    if (f.embedding_dim > 0) out["embedding"] = owning_array(std::move(f.embedding), {B, f.embedding_dim});
    return out;
}

ForwardOptions forward_options(const PyModel& self, std::optional<int> threads) {
    const int t = threads.value_or(self.threads);
    if (t < 0) throw UsageError("threads must be 0 (all cores) or more, got " + std::to_string(t));
    return ForwardOptions{t, self.max_tokens};
}

py::dict forward(const PyModel& self, const py::object& x, std::optional<int> threads) {
    const Batch in = checked_batch(x);
    const ForwardOptions options = forward_options(self, threads);
    Features f;
    {
        py::gil_scoped_release release;  // the array stays alive: `in` holds a reference
        f = self.model.forward(in.data, in.batch, in.height, in.width, options);
    }
    return features_dict(std::move(f));
}

py::dict trace(const PyModel& self, const py::object& x, const Layers& attention_layers,
               const std::variant<std::string, std::vector<std::string>>& queries, bool norms, bool abstention,
               bool key_mass, const Layers& mlp_layers, const Layers& blocks, bool blocks_normed, const Layers& qkv_layers,
               bool profile, std::optional<int> threads) {
    const Batch in = checked_batch(x);
    const Config& c = self.model.config();
    const int gh = in.height / c.patch, gw = in.width / c.patch;
    Probe probe;
    probe.norms = norms;
    probe.abstention = abstention;
    probe.key_mass = key_mass;
    probe.attention_layers = layers_of(attention_layers, c.depth);
    probe.mlp_layers = layers_of(mlp_layers, c.depth);
    probe.block_layers = layers_of(blocks, c.depth);
    probe.blocks_normed = blocks_normed;
    probe.qkv_layers = layers_of(qkv_layers, c.depth);
    probe.profile = profile;
    if (const auto* all = std::get_if<std::string>(&queries)) {
        if (*all == "all") probe.all_queries = true;
        else probe.queries.push_back(TokenRef::parse(*all).token_index(self.model.registers(), gh, gw, c.class_token));
    } else {
        for (const auto& q : std::get<std::vector<std::string>>(queries))
            probe.queries.push_back(TokenRef::parse(q).token_index(self.model.registers(), gh, gw, c.class_token));
    }
    if (!probe.attention_layers.empty() && !probe.all_queries && probe.queries.empty())
        throw UsageError("trace: attention_layers asked for, but no queries (give queries=['cls', 'patch:R,C'] or 'all')");
    const ForwardOptions options = forward_options(self, threads);
    Trace t;
    Features f;
    {
        py::gil_scoped_release release;
        f = self.model.forward(in.data, in.batch, in.height, in.width, probe, t, options);
    }
    py::dict out = features_dict(std::move(f));
    const py::ssize_t L = t.layers, B = t.batch, H = t.heads, T = t.tokens;
    out["tokens"] = T;
    out["grid"] = py::make_tuple(t.grid_h, t.grid_w);
    if (norms) {
        out["norms"] = owning_array(std::move(t.norms), {L, B, T});
        out["max_abs"] = owning_array(std::move(t.max_abs), {L, B, T});
        out["kurtosis"] = owning_array(std::move(t.kurtosis), {L, B});
    }
    if (!t.attention_layers.empty()) {
        const auto Q = static_cast<py::ssize_t>(t.queries.size());
        out["attention_layers"] = t.attention_layers;
        out["queries"] = t.queries;
        out["attention"] = owning_array(std::move(t.attention), {static_cast<py::ssize_t>(t.attention_layers.size()), B, H, Q, T});
    }
    if (abstention) out["abstention"] = owning_array(std::move(t.abstention), {L, B, H, T});
    if (key_mass) out["key_mass"] = owning_array(std::move(t.key_mass), {L, B, H, T});
    if (!t.mlp_layers.empty()) {
        out["mlp_layers"] = t.mlp_layers;
        out["mlp"] = owning_array(std::move(t.mlp), {static_cast<py::ssize_t>(t.mlp_layers.size()), B, T, t.mlp_hidden});
    }
    if (!t.block_layers.empty()) {
        out["block_layers"] = t.block_layers;
        out["blocks"] = owning_array(std::move(t.blocks), {static_cast<py::ssize_t>(t.block_layers.size()), B, T, t.dim});
    }
    if (!t.qkv_layers.empty()) {
        out["qkv_layers"] = t.qkv_layers;
        out["qkv"] = owning_array(std::move(t.qkv), {static_cast<py::ssize_t>(t.qkv_layers.size()), B, T, 3 * t.dim});
    }
    if (profile) {
        py::dict seconds;
        for (int stage = 0; stage < ForwardProfile::kStages; ++stage) seconds[ForwardProfile::name(stage)] = t.profile.seconds[stage];
        seconds["total"] = t.profile.total;
        out["profile"] = seconds;
    }
    return out;
}

}  // namespace

py::array_t<float> preprocess_image(const PyModel& self, const py::object& image, const std::string& resize,
                                    const std::optional<std::string>& pipeline, const std::string& resample,
                                    const std::string& decode, bool exif_transpose) {
    const Config& c = self.model.config();
    py::kwargs given;  // through the pixel table's checks, as every call's pixel keywords
    given["resize"] = resize;
    given["pipeline"] = pipeline ? py::object(py::str(*pipeline)) : py::object(py::none());
    given["resample"] = resample;
    given["decode"] = decode;
    given["exif_transpose"] = exif_transpose;
    Options o("preprocess", given);
    const ResizeSpec spec = take_pixel_spec(o);
    o.finish();
    Pixels px;
    if (!py::isinstance<py::str>(image) && !py::hasattr(image, "__fspath__")) {
        const py::array a = shared_array(image);
        const auto dims = checked_dims<std::uint8_t>(a, {2, 3}, "image", "uint8 [height, width, 3] or [height, width]");
        if (dims.size() == 3 && dims[2] != 3)
            throw UsageError("image: expected 3 channels (RGB) in the last axis, got " + std::to_string(dims[2]));
        if (dims[0] < 1 || dims[1] < 1 || dims[0] * dims[1] > self.image_limits.max_pixels)
            throw UsageError("image: " + std::to_string(dims[1]) + "x" + std::to_string(dims[0]) +
                             " pixels, outside 1.." + std::to_string(self.image_limits.max_pixels));
        Image img;
        img.height = static_cast<int>(dims[0]);
        img.width = static_cast<int>(dims[1]);
        const auto* p = static_cast<const std::uint8_t*>(a.data());
        const std::size_t n = static_cast<std::size_t>(img.width) * img.height;
        if (dims.size() == 3) {
            img.rgb.assign(p, p + 3 * n);
        } else {
            img.rgb.resize(3 * n);
            for (std::size_t i = 0; i < n; ++i) img.rgb[3 * i] = img.rgb[3 * i + 1] = img.rgb[3 * i + 2] = p[i];
        }
        py::gil_scoped_release release;
        px = preprocess(img, spec, c, "image");
    } else {
        const std::string path = py::str(py::module_::import("os").attr("fspath")(image));
        py::gil_scoped_release release;
        px = load_pixels(path, spec, c, self.image_limits);
    }
    const py::ssize_t h = px.height, w = px.width;
    return owning_array(std::move(px.chw), {3, h, w});
}

namespace {

// An option's default as Python writes it: None when unset, else an int or a str.
py::object default_of(const ModelOption& o) {
    if (o.default_text.empty()) return py::none();
    if (o.kind == OptionKind::Integer) return py::int_(std::stoll(o.default_text));
    return py::str(o.default_text);
}

// vitreg.Model's docstring: its keywords, their defaults and help, from the table of options.
std::string model_docstring() {
    std::string signature = "Model(model", keywords;
    for (const ModelOption& o : model_options()) {
        signature += ", " + o.keyword() + "=" + std::string(py::repr(default_of(o)));
        keywords += o.keyword() + "\n    " + o.help;
        if (!o.choices.empty()) {
            keywords += " (";
            for (const auto& c : o.choices) keywords += (&c == &o.choices.front() ? "" : " | ") + c;
            keywords += ")";
        }
        keywords += "\n";
    }
    return "A loaded ViT checkpoint, ready to run.\n\n" + signature + ")\n\nmodel\n    " + model_name_help() +
           "; the name of a shipped checkpoint is one of vitreg.shipped_models(), and a hub id or torch hub name is "
           "looked up in the local caches only (nothing is downloaded).\n" + keywords +
           "\nThe keywords are the command line's options (vitreg.model_options()), '-' written '_'; None leaves one at "
           "its default. threads, max_tokens and max_image_pixels are the defaults of every call on the model (forward "
           "and trace take their own threads too).\n\nThe weights are packed once; a Model is immutable and may be "
           "used from several threads at once (each forward releases the GIL).";
}

// vitreg.model_options(): the table, for tools and for checking a front end against it.
py::list model_options_list() {
    py::list out;
    for (const ModelOption& o : model_options())
        out.append(py::dict("name"_a = o.name, "keyword"_a = o.keyword(), "flag"_a = "--" + o.name,
                            "kind"_a = o.kind == OptionKind::Integer ? "int" : "str", "help"_a = o.help,
                            "choices"_a = o.choices, "default"_a = default_of(o),
                            "group"_a = o.group == OptionGroup::Open ? "open" : "run"));
    return out;
}

// The docstrings of Model's methods, apart so that bind_model reads as the list of bindings.
const char* const kPreprocessDoc =
    R"(An image as the model's input: float32 [3, height, width], the same values as the
checkpoint's own PyTorch pipeline gives for the same file (PIL's decode and Image.resize, then
ToTensor and Normalize with the checkpoint's mean and std).

image     a path (str or os.PathLike) to an image file (JPEG, PNG, WebP, BMP, PNM, TGA, GIF), or
          a uint8 array-like [height, width, 3] (RGB) or [height, width] (grey): numpy, a torch
          tensor, a memoryview.
resize    'eval' (the checkpoint's eval transform: DINOv2's shortest edge to 256 and centre crop
          224; timm's from pretrained_cfg input_size / crop_pct; CLIP's shortest edge to its
          input size and crop; with the checkpoint's filter, bicubic unless its config names
          another) | 'none' (crop right/bottom to whole patches) | 'WxH' | 'short:N' | 'long:N'.
pipeline  None (the checkpoint's own) | 'torchvision' | 'timm' | 'hf' | 'open_clip': whose size,
          crop and conversion rules.
resample  'pil' (PIL's uint8 resize) | 'torch' (F.interpolate bicubic antialias on floats).
decode    'exact' | 'draft' (JPEGs at a reduced DCT scale, as PIL's Image.draft: faster, other
          pixels).
exif_transpose  apply the file's EXIF orientation first (HF's load_image does).
Raises vitreg.ImageError for a file that cannot be decoded, vitreg.UsageError for a bad array.)";
const char* const kDenseDoc =
    R"(One image's dense features: the array `vitreg dense` writes for it (row 0.npy), as float32
(float16 with dtype='f16').

dense(image, *, layers='last', norm=False, concat=False, window=0, stride=0, scales=[1.0], flip=False,
      grid=None, upsample='none', jbu_sigma_spatial=1.0, jbu_sigma_range=0.15, jbu_radius=2, dtype='f32',
      pca_dims=0, resize='eval', threads=model.threads)

image     a path or uint8 array (preprocessed with `resize` as preprocess does), or float32
          [3, H, W] already preprocessed.
window, stride  a sliding window of crops (pixels, multiples of the patch): each crop's grid added
          into the image's grid and averaged where crops overlap; the crops run as one batch.
scales, flip  the image at each scale (and mirrored), grids resized bilinearly to one (grid=(h, w),
          default the image's own) and averaged.
upsample  'none' | 'image' | 'xN' | 'bilinear' | 'jbu' | 'bilinear:SIZE' | 'jbu:SIZE' (SIZE image or xN);
          jbu: joint bilateral upsampling guided by the image.
pca_dims  K > 0: the layers side by side reduced to K principal components fitted on this image's
          grid (after the views, before upsampling); returns (features [h, w, K], basis) with basis
          a dict of float32 arrays as <row>.pca_basis.safetensors holds: mean [C], components [K, C],
          explained_variance [K], explained_variance_ratio [K] (features ≈ mean + reduced @ components).
Returns [h, w, C] for one layer or with concat, else [layers, h, w, D].)";
const char* const kForwardDoc =
    R"(Runs a batch and returns its final-normed features as a dict of float32 arrays:

  cls        [B, D]        x_norm_clstoken (CLIP: ln_post(CLS); no class token: = pooled)
  pooled     [B, D]        mean of the patch tokens (then fc_norm where the model has one)
  registers  [B, R, D]     x_norm_regtokens (R may be 0)
  patch      [B, h, w, D]  x_norm_patchtokens on the patch grid, row-major
  embedding  [B, E]        cls @ proj, unnormalized (only models with a projection: CLIP)

x is float32 [B, 3, H, W] or one image [3, H, W] (C-contiguous), H and W multiples of the patch;
images of one call share their size (stack the outputs of preprocess). x may be any array-like
whose memory can be shared: a numpy array, a torch tensor (DLPack), a memoryview; it is read in
place, never copied; float64 or strided input is refused, not converted. The GIL is released
while it runs. The arrays own their memory (torch.from_numpy takes them without a copy).)";
const char* const kTraceDoc =
    R"(A forward that also records what it is asked for (vitreg's Probe): the features of forward, plus

  attention   [La, B, heads, Q, T]  rows of `queries` in attention_layers (attention_layers, queries:
                                    the layer and token indices, in that order)
  norms       [L, B, T]             L2 norm of every token after every block (norms=True), with
  max_abs     [L, B, T]             its infinity norm and
  kurtosis    [L, B]                the Pearson kurtosis of each block's output
  abstention  [L, B, heads, T]      1 - sum(p) of every query row (softmax1 / sink)
  key_mass    [L, B, heads, T]      mean attention each key receives
  mlp         [Lm, B, T, hidden]    MLP activations after GELU / SwiGLU of mlp_layers
  blocks      [Lb, B, T, D]         the residual stream after `blocks` (final-normed with blocks_normed),
                                    as DINOv2's get_intermediate_layers
  qkv         [Lq, B, T, 3D]        the q | k | v projections of qkv_layers
  tokens, grid                      T and the patch grid (h, w)
  profile     {stage: seconds}      where the forward's wall time went (profile=True): embed, norms,
                                    qkv, attention, proj, fc1 (with its GELU), mlp_activation (SwiGLU),
                                    fc2, other, and the total

Token order is [CLS, registers, patches]. Layers are 'all' | 'last' | 'i,j' | [i, j] (negative
counts from the end) or None; queries are a list of 'cls' | 'reg:K' | 'patch:R,C', or 'all'.)";

}  // namespace

void bind_model(py::module_& m) {
    static const std::string model_doc = model_docstring();
    py::class_<PyModel>(m, "Model", model_doc.c_str())
        .def(py::init([](const std::string& model, const py::kwargs& kwargs) {
                 Options o("Model", kwargs);
                 const OptionValues values = take_model_options(o);
                 o.finish();
                 const ModelRequest request = ModelRequest::from_options(model, values);
                 py::gil_scoped_release release;
                 return new PyModel{open_model(request), request.threads, request.max_tokens, request.image_limits};
             }),
             "model"_a)
        .def_property_readonly("config", &config_dict,
                               "The resolved configuration as a dict. The checkpoint's, under the keys of a converted "
                               "checkpoint's metadata (C++ to_json(Config)): layout (the checkpoint format it was read as), family, dim, depth, heads, head_dim, "
                               "patch_size, num_registers (trained), grid, mlp_hidden, act (gelu | quick_gelu | swiglu | "
                               "gelu_tanh), attention (what runs), trained_attention, sinks, layer_scale, pos_interp, "
                               "positions (learned | rope-axial | rope-eva), rope_theta, rope_ref_grid, layer_norm_eps, "
                               "class_token, pos_embed_class, pre_norm, patch_bias, qkv_bias, final_norm, attn_norm, "
                               "mlp_norm, pool (token | avg | map), fc_norm, proj_dim, input_size, crop_pct, "
                               "eval_squash, image_pipeline, interpolation, image_mean, image_std, dtype, parameters, "
                               "evict (none | sink: stored in the checkpoint), notes (what the loader inferred or "
                               "changed). The same values under earlier names: patch, registers, eps, mean, std, mlp. "
                               "The loaded model's: path, native_size, retrofit, precision, intervention, "
                               "test_time_registers.")
        .def_property_readonly("path", [](const PyModel& self) { return self.model.path(); },
                               "The checkpoint file or folder this model was loaded from.")
        .def_readwrite("threads", &PyModel::threads, "Worker threads of every call (0 = all cores).")
        .def("tokens", [](const PyModel& self, int height, int width) { return self.model.tokens(height, width); },
             "height"_a, "width"_a, "Tokens of one image's forward at this input size: CLS, registers and patches.")
        .def("flops", [](const PyModel& self, int height, int width) { return self.model.flops_per_image(height, width); },
             "height"_a, "width"_a, "Multiply-adds x 2 of one image's forward at this input size.")
        .def("preprocess", &preprocess_image, "image"_a, "resize"_a = "eval", "pipeline"_a = py::none(),
             "resample"_a = "pil", "decode"_a = "exact", "exif_transpose"_a = false,
             kPreprocessDoc)
        .def("dense", &model_dense, "image"_a,
             kDenseDoc)
        .def("forward", &forward, "x"_a, "threads"_a = py::none(),
             kForwardDoc)
        .def("_pixels_address", [](const PyModel&, const py::object& x) {
                 return reinterpret_cast<std::uintptr_t>(checked_batch(x).data);
             }, "x"_a, "The address forward and trace read x from (the zero-copy test compares it with the caller's).")
        .def("trace", &trace, "x"_a, "attention_layers"_a = py::none(), "queries"_a = std::vector<std::string>{"cls"},
             "norms"_a = false, "abstention"_a = false, "key_mass"_a = false, "mlp_layers"_a = py::none(),
             "blocks"_a = py::none(), "blocks_normed"_a = false, "qkv_layers"_a = py::none(), "profile"_a = false,
             "threads"_a = py::none(),
             kTraceDoc)
        .def("__repr__", [](const PyModel& self) {
            const Config& c = self.model.config();
            return "vitreg.Model('" + self.model.path() + "', dim=" + std::to_string(c.dim) + ", depth=" +
                   std::to_string(c.depth) + ", heads=" + std::to_string(c.heads) + ", patch=" + std::to_string(c.patch) +
                   ", registers=" + std::to_string(c.registers) + ", attention='" + to_string(c.attention) + "')";
        });

    m.def("model_options", &model_options_list,
          "The options vitreg.Model takes, as a list of dicts: name (the command line's --name), keyword (Python's), "
          "flag, kind ('int' | 'str'), help, choices, default (None: unset), group ('open': how the model is opened; "
          "'run': the defaults of its calls).");
    m.def("shipped_models", &shipped_models, "The names of the checkpoints shipped with vitreg (usable as Model(name)).");
}

}  // namespace vitreg::python
