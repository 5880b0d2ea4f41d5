#include "vitreg/model_options.hpp"

#include <algorithm>

#include "vitreg/error.hpp"
#include "vitreg/forward_memory.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/register_neuron_file.hpp"
#include "vitreg/repair.hpp"

namespace vitreg {

namespace {

std::vector<ModelOption> make_table() {
    const SafetensorsLimits limits;
    const PrecisionOptions precision;
    const ImageLimits image;
    using K = OptionKind;
    using G = OptionGroup;
    return {
        {"key", K::Text, G::Open,
         "PyTorch files: the key path of the state dict, dotted (model, model.state_dict); default: the top level, or "
         "the first of model, state_dict, teacher, module that holds tensors",
         {}, 0, 0, "", [](ModelRequest& r, const std::string& v) { r.overrides.state_dict_key = v; }},
        {"attention", K::Text, G::Open, "run with another normalizer than trained (a retrofit)",
         enum_names<AttentionKind>(), 0, 0, "",
         [](ModelRequest& r, const std::string& v) { r.overrides.attention = parse_attention_kind(v); }},
        {"pos-interp", K::Text, G::Open, "position-embedding resampling (default: per checkpoint origin)",
         enum_names<PosInterp>(), 0, 0, "",
         [](ModelRequest& r, const std::string& v) { r.overrides.pos_interp = parse_pos_interp(v); }},
        {"precision", K::Text, G::Open, "fp32, bf16 (bf16 GEMMs, fp32 accumulation), int8 (W8A8 linears, bf16 attention) or int4 (int4 weights per group of 128, int8 activations)",
         enum_names<Precision>(), 0, 0, to_string(precision.precision),
         [](ModelRequest& r, const std::string& v) { r.precision.precision = parse_precision(v); }},
        {"act-quant", K::Text, G::Open, "int8 activations: per-token (dynamic) or per-tensor (static, from --scales)",
         enum_names<ActQuant>(), 0, 0, to_string(precision.act_quant),
         [](ModelRequest& r, const std::string& v) { r.precision.act_quant = parse_act_quant(v); }},
        {"scales", K::Text, G::Open, "SCALES.json from vitreg calibrate-int8, for --act-quant per-tensor", {}, 0, 0, "",
         [](ModelRequest& r, const std::string& v) { r.precision.scales = v; }},
        {"int8-weights", K::Integer, G::Open,
         "int8 weight bits: 8, or 7 (ONNX Runtime's reduce_range: on a CPU without VNNI, int8 then runs vpmaddubsw "
         "exactly instead of an emulation)",
         {"7", "8"}, 7, 8, std::to_string(precision.int8_weight_bits),
         [](ModelRequest& r, const std::string& v) { r.precision.int8_weight_bits = std::stoi(v); }},
        {"file-weights", K::Text, G::Open,
         "weights the file stores in the precision that runs (bf16 ones at bf16 on AVX512-BF16 CPUs, an int8 or int4 "
         "file's on AVX512-VNNI CPUs; not where AMX runs them): mapped (run where they lie in the file's pages: a 13 GB model "
         "loads in a fraction of a second, and processes share one copy) or packed (copied into the kernels' layout at "
         "load: 3-10% faster per image at small token counts); the same features either way",
         {"mapped", "packed"}, 0, 0, precision.file_weights_packed ? "packed" : "mapped",
         [](ModelRequest& r, const std::string& v) { r.precision.file_weights_packed = v == "packed"; }},
        {"evict", K::Text, G::Open,
         "keys removed from every head's attention: sink, artifacts, registers, cls, reg:K, patch:R,C "
         "(comma-separated; sink and artifacts are found per image by a first forward)",
         {}, 0, 0, "", [](ModelRequest& r, const std::string& v) { r.intervention.evict = Eviction::parse(v); }},
        {"ttr", K::Integer, G::Open, "test-time registers: K zero tokens after the trained registers (needs --register-neurons)",
         {}, 0, 64, "", [](ModelRequest& r, const std::string& v) { r.intervention.test_time_registers = std::stoi(v); }},
        {"register-neurons", K::Text, G::Open,
         "the MLP neurons whose maxima move to the test-time registers: neurons.json[:TOP] (vitreg "
         "find-register-neurons) or LAYER:NEURON,...",
         {}, 0, 0, "",
         [](ModelRequest& r, const std::string& v) { r.intervention.register_neurons = parse_register_neurons(v); }},
        {"max-header-bytes", K::Integer, G::Open, "refuse checkpoints with a larger safetensors header", {}, 8,
         std::int64_t(100) << 20, std::to_string(limits.max_header_bytes),
         [](ModelRequest& r, const std::string& v) { r.overrides.limits.max_header_bytes = std::stoull(v); }},
        {"max-json-depth", K::Integer, G::Open, "refuse JSON (header, config.json) nested deeper", {}, 2, 1000,
         std::to_string(limits.max_json_depth),
         [](ModelRequest& r, const std::string& v) { r.overrides.limits.max_json_depth = std::stoi(v); }},
        {"threads", K::Integer, G::Run, "worker threads (0 = all cores)", {}, 0, 1024, "0",
         [](ModelRequest& r, const std::string& v) { r.threads = std::stoi(v); }},
        {"max-image-pixels", K::Integer, G::Run, "refuse images with more pixels (before decoding them)", {}, 1,
         std::int64_t(1) << 40, std::to_string(image.max_pixels),
         [](ModelRequest& r, const std::string& v) { r.image_limits.max_pixels = std::stoll(v); }},
        {"max-memory", K::Text, G::Open,
         "the memory the model and one image's forward may use: 4G, 512M, bytes, or a share like 50% (default: 75% of "
         "the physical memory or the cgroup's limit); a model whose weights and one native-size image need more is "
         "refused before loading, with the precision that would fit; inputs whose estimated forward needs more are "
         "refused (unless --max-tokens)",
         {}, 0, 0, "", [](ModelRequest& r, const std::string& v) { r.max_memory = parse_memory_size(v); }},
        {"max-tokens", K::Integer, G::Run,
         "refuse inputs that make more tokens than this (0 = no limit; default: what fits --max-memory)", {}, 0,
         std::int64_t(1) << 31, "", [](ModelRequest& r, const std::string& v) { r.max_tokens = std::stoll(v); }},
    };
}

}  // namespace

std::string ModelOption::keyword() const {
    std::string k = name;
    std::replace(k.begin(), k.end(), '-', '_');
    return k;
}

const std::vector<ModelOption>& model_options() {
    static const std::vector<ModelOption> table = make_table();
    return table;
}

const ModelOption& model_option(const std::string& name) {
    for (const ModelOption& o : model_options())
        if (o.name == name) return o;
    throw UsageError("unknown model option '" + name + "'");
}

const std::string& model_name_help() {
    static const std::string help =
        "a .safetensors or PyTorch (.pth/.pt/.bin) file, a folder with model.safetensors or pytorch_model.bin "
        "(+ config.json), a shipped name, a Hugging Face id in the local cache ([hf:]ORG/NAME[@REV]), a torch "
        "hub name (dinov2_vits14_reg4) or a timm name in that cache ([timm:]NAME[.TAG]: timm/NAME.TAG); suffixes add repairs, applied in the order written: " + repair_help();
    return help;
}

}  // namespace vitreg
