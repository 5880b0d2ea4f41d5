// vitreg.Model: load a checkpoint, preprocess images, run forwards and traces; numpy in and out.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/image.hpp"
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

std::vector<float> vec3(const std::array<float, 3>& a) { return {a[0], a[1], a[2]}; }

py::dict config_dict(const PyModel& self) {
    const Config& c = self.model.config();
    return py::dict("family"_a = to_string(c.family), "layout"_a = c.source, "path"_a = self.model.path(),
                    "dim"_a = c.dim, "depth"_a = c.depth, "heads"_a = c.heads, "head_dim"_a = c.head_dim,
                    "patch"_a = c.patch, "registers"_a = c.registers, "grid"_a = c.grid,
                    "native_size"_a = c.native_size(), "mlp"_a = to_string(c.mlp), "mlp_hidden"_a = c.mlp_hidden,
                    "attention"_a = to_string(c.attention), "precision"_a = self.model.precision().describe(),
                    "intervention"_a = self.model.intervention().to_string(),
                    "test_time_registers"_a = self.model.intervention().test_time_registers,
                    "trained_attention"_a = to_string(c.trained_attention),
                    "retrofit"_a = c.retrofit(), "sinks"_a = c.has_sinks, "layer_scale"_a = c.layer_scale,
                    "pos_interp"_a = to_string(c.pos_interp), "positions"_a = to_string(c.positions),
                    "rope_theta"_a = c.rope_theta,
                    "rope_ref_grid"_a = std::vector<int>{c.rope_ref_grid[0], c.rope_ref_grid[1]},
                    "attn_norm"_a = c.attn_norm, "mlp_norm"_a = c.mlp_norm, "eps"_a = c.eps, "mean"_a = vec3(c.mean),
                    "std"_a = vec3(c.std), "dtype"_a = to_string(c.dtype), "parameters"_a = c.parameters,
                    "class_token"_a = c.class_token, "pos_embed_class"_a = c.pos_embed_class, "pre_norm"_a = c.pre_norm,
                    "patch_bias"_a = c.patch_bias, "qkv_bias"_a = c.qkv_bias, "final_norm"_a = c.final_norm,
                    "pool"_a = to_string(c.pool), "fc_norm"_a = c.fc_norm, "proj_dim"_a = c.proj_dim,
                    "input_size"_a = c.input_size, "crop_pct"_a = c.crop_pct, "notes"_a = c.notes);
}

// The batch a forward takes: [B, 3, H, W] (or one image [3, H, W]) float32, C-contiguous.
// Batch and size against the patch are the forward's own checks. Returns (pointer, B, H, W).
struct Batch {
    const float* data;
    int batch, height, width;
};

Batch checked_batch(const py::array& x) {
    const auto dims = checked_dims<float>(x, {3, 4}, "input", "[batch, 3, height, width] or [3, height, width]");
    const bool one = dims.size() == 3;
    const py::ssize_t b = one ? 1 : dims[0], ch = dims[one ? 0 : 1], h = dims[one ? 1 : 2], w = dims[one ? 2 : 3];
    if (ch != 3) throw UsageError("input: expected 3 channels, got " + std::to_string(ch));
    if (b > (1 << 20) || h > (1 << 20) || w > (1 << 20)) throw UsageError("input: too large");
    return {static_cast<const float*>(x.data()), static_cast<int>(b), static_cast<int>(h), static_cast<int>(w)};
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

py::dict forward(const PyModel& self, const py::array& x, std::optional<int> threads) {
    const Batch in = checked_batch(x);
    const ForwardOptions options = forward_options(self, threads);
    Features f;
    {
        py::gil_scoped_release release;  // the array stays alive: `x` holds a reference
        f = self.model.forward(in.data, in.batch, in.height, in.width, options);
    }
    return features_dict(std::move(f));
}

py::dict trace(const PyModel& self, const py::array& x, const Layers& attention_layers,
               const std::variant<std::string, std::vector<std::string>>& queries, bool norms, bool abstention,
               bool key_mass, const Layers& mlp_layers, const Layers& blocks, bool blocks_normed, const Layers& qkv_layers,
               std::optional<int> threads) {
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
    return out;
}

py::array_t<float> preprocess_image(const PyModel& self, const py::object& image, const std::string& resize,
                                    const std::optional<std::string>& pipeline, const std::string& resample,
                                    const std::string& decode, bool exif_transpose) {
    const Config& c = self.model.config();
    ResizeSpec spec = ResizeSpec::parse(resize);
    if (pipeline) spec.pipeline = parse_pixel_pipeline(*pipeline);
    spec.resampler = parse_resampler(resample);
    if (decode != "exact" && decode != "draft") throw UsageError("decode must be 'exact' or 'draft', not '" + decode + "'");
    spec.draft = decode == "draft";
    spec.exif_transpose = exif_transpose;
    Pixels px;
    if (py::isinstance<py::array>(image)) {
        const py::array a = image;
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

}  // namespace

void bind_model(py::module_& m) {
    py::class_<PyModel>(m, "Model", R"(A loaded ViT checkpoint, ready to run.

Model(model, attention=None, pos_interp=None, threads=0, max_tokens=16384, max_image_pixels=178956970,
      precision='fp32', act_quant='per-token', scales=None, int8_weights=8, evict=None, ttr=0,
      register_neurons=None, key=None)

model       a .safetensors or PyTorch (.pth/.pt/.bin) file, a folder with model.safetensors or
            pytorch_model.bin (+ config.json for the HF layout), the name of a shipped checkpoint
            (vitreg.shipped_models()), a hub id such as "facebook/dinov2-small" already in the local
            Hugging Face cache, or a torch hub name such as "dinov2_vits14_reg4" already in
            $TORCH_HOME/hub/checkpoints (nothing is downloaded), as on the command line.
attention   None (as trained) or 'softmax' | 'softmax1' | 'sink': run another normalizer (a retrofit;
            config['retrofit'] says so).
pos_interp  None (per checkpoint origin) or 'offset' | 'antialias' | 'size'.
threads     worker threads of every call (0 = all cores); forward and trace take their own too.
max_tokens  refuse inputs that make more tokens per image (0 = no limit).
max_image_pixels  refuse image files with more pixels, before decoding them.
precision   'fp32' | 'bf16' (bf16 GEMMs, fp32 accumulation) | 'int8' (W8A8 linears, bf16 attention).
act_quant   int8 activations: 'per-token' (dynamic) or 'per-tensor' (static, needs scales).
scales      the SCALES.json of `vitreg calibrate-int8`, for act_quant='per-tensor'.
int8_weights  int8 weight bits, 8 or 7 (ONNX Runtime's reduce_range; exact vpmaddubsw without VNNI).
evict       keys removed from every head's attention, as --evict: 'sink', 'artifacts', 'registers',
            'cls', 'reg:K', 'patch:R,C', comma-separated (sink and artifacts: found per image by a
            first forward).
ttr         test-time registers: K zero tokens after the trained registers (outputs' 'registers'
            holds the trained ones, then these); needs register_neurons.
register_neurons  'neurons.json[:TOP]' (vitreg find-register-neurons) or 'LAYER:NEURON,...'.
key         PyTorch files: the state dict's key path, dotted ('model', 'model.state_dict'), as --key;
            None: the top level, or the first of model / state_dict / teacher / module with tensors.

The weights are packed once; a Model is immutable and may be used from several threads at
once (each forward releases the GIL).)")
        .def(py::init([](const std::string& model, std::optional<std::string> attention,
                         std::optional<std::string> pos_interp, int threads, std::int64_t max_tokens,
                         std::int64_t max_image_pixels, const std::string& precision, const std::string& act_quant,
                         std::optional<std::string> scales, int int8_weights, std::optional<std::string> evict, int ttr,
                         std::optional<std::string> register_neurons, std::optional<std::string> key) {
                 if (threads < 0) throw UsageError("threads must be 0 (all cores) or more");
                 if (max_tokens < 0) throw UsageError("max_tokens must be 0 (no limit) or more");
                 if (max_image_pixels < 1) throw UsageError("max_image_pixels must be positive");
                 ConfigOverrides o;
                 if (attention) o.attention = parse_attention_kind(*attention);
                 if (pos_interp) o.pos_interp = parse_pos_interp(*pos_interp);
                 o.state_dict_key = key.value_or("");
                 PrecisionOptions p;
                 p.precision = parse_precision(precision);
                 p.act_quant = parse_act_quant(act_quant);
                 p.scales = scales.value_or("");
                 p.int8_weight_bits = int8_weights;
                 Intervention edit;
                 if (evict) edit.evict = Eviction::parse(*evict);
                 edit.test_time_registers = ttr;
                 if (register_neurons) edit.register_neurons = parse_register_neurons(*register_neurons);
                 const std::string path = resolve_model_path(model);
                 PyModel* self = nullptr;
                 {
                     py::gil_scoped_release release;
                     Model loaded = Model::load(path, o, p);
                     if (!edit.empty()) loaded = loaded.with(edit);
                     self = new PyModel{std::move(loaded), threads, max_tokens, ImageLimits{}};
                 }
                 self->image_limits.max_pixels = max_image_pixels;
                 return self;
             }),
             "model"_a, "attention"_a = py::none(), "pos_interp"_a = py::none(), "threads"_a = 0,
             "max_tokens"_a = kDefaultMaxTokens, "max_image_pixels"_a = ImageLimits{}.max_pixels, "precision"_a = "fp32",
             "act_quant"_a = "per-token", "scales"_a = py::none(), "int8_weights"_a = 8, "evict"_a = py::none(), "ttr"_a = 0,
             "register_neurons"_a = py::none(), "key"_a = py::none())
        .def_property_readonly("config", &config_dict,
                               "The resolved configuration as a dict: family, layout, path, dim, depth, heads, "
                               "head_dim, patch, registers (trained), test_time_registers, grid, native_size, mlp, "
                               "mlp_hidden, attention, precision, intervention, "
                               "trained_attention, retrofit, sinks, layer_scale, pos_interp, positions (learned | "
                               "rope-axial | rope-eva), rope_theta, rope_ref_grid, attn_norm, mlp_norm, eps, mean, "
                               "std, dtype, "
                               "parameters, notes (what the loader inferred or changed).")
        .def_property_readonly("path", [](const PyModel& self) { return self.model.path(); },
                               "The checkpoint file or folder this model was loaded from.")
        .def_readwrite("threads", &PyModel::threads, "Worker threads of every call (0 = all cores).")
        .def("tokens", [](const PyModel& self, int height, int width) { return self.model.tokens(height, width); },
             "height"_a, "width"_a, "Tokens of one image's forward at this input size: CLS, registers and patches.")
        .def("flops", [](const PyModel& self, int height, int width) { return self.model.flops_per_image(height, width); },
             "height"_a, "width"_a, "Multiply-adds x 2 of one image's forward at this input size.")
        .def("preprocess", &preprocess_image, "image"_a, "resize"_a = "eval", "pipeline"_a = py::none(),
             "resample"_a = "pil", "decode"_a = "exact", "exif_transpose"_a = false,
             R"(An image as the model's input: float32 [3, height, width], the same values as the
checkpoint's own PyTorch pipeline gives for the same file (PIL's decode and Image.resize, then
ToTensor and Normalize with the checkpoint's mean and std).

image     a path (str or os.PathLike) to an image file (JPEG, PNG, WebP, BMP, PNM, TGA, GIF), or
          a uint8 array [height, width, 3] (RGB) or [height, width] (grey).
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
Raises vitreg.ImageError for a file that cannot be decoded, vitreg.UsageError for a bad array.)")
        .def("forward", &forward, "x"_a, "threads"_a = py::none(),
             R"(Runs a batch and returns its final-normed features as a dict of float32 arrays:

  cls        [B, D]        x_norm_clstoken (CLIP: ln_post(CLS); no class token: = pooled)
  pooled     [B, D]        mean of the patch tokens (then fc_norm where the model has one)
  registers  [B, R, D]     x_norm_regtokens (R may be 0)
  patch      [B, h, w, D]  x_norm_patchtokens on the patch grid, row-major
  embedding  [B, E]        cls @ proj, unnormalized (only models with a projection: CLIP)

x is float32 [B, 3, H, W] or one image [3, H, W] (C-contiguous), H and W multiples of the patch;
images of one call share their size (stack the outputs of preprocess). The GIL is released
while it runs. The arrays own their memory (torch.from_numpy takes them without a copy).)")
        .def("trace", &trace, "x"_a, "attention_layers"_a = py::none(), "queries"_a = std::vector<std::string>{"cls"},
             "norms"_a = false, "abstention"_a = false, "key_mass"_a = false, "mlp_layers"_a = py::none(),
             "blocks"_a = py::none(), "blocks_normed"_a = false, "qkv_layers"_a = py::none(), "threads"_a = py::none(),
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

Token order is [CLS, registers, patches]. Layers are 'all' | 'last' | 'i,j' | [i, j] (negative
counts from the end) or None; queries are a list of 'cls' | 'reg:K' | 'patch:R,C', or 'all'.)")
        .def("__repr__", [](const PyModel& self) {
            const Config& c = self.model.config();
            return "vitreg.Model('" + self.model.path() + "', dim=" + std::to_string(c.dim) + ", depth=" +
                   std::to_string(c.depth) + ", heads=" + std::to_string(c.heads) + ", patch=" + std::to_string(c.patch) +
                   ", registers=" + std::to_string(c.registers) + ", attention='" + to_string(c.attention) + "')";
        });

    m.def("shipped_models", &shipped_models, "The names of the checkpoints shipped with vitreg (usable as Model(name)).");
}

}  // namespace vitreg::python
