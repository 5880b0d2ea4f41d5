// Quantized checkpoint files (vitreg convert --dtype int8|int4): they load without quantizing
// again, to the same features as the source at int8 (int4), bit for bit; they run at that
// precision only; and a file whose quantization is malformed is refused naming the file and the
// tensor.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "test_support.hpp"
#include "vitreg/canonical_checkpoint.hpp"
#include "vitreg/checkpoint_summary.hpp"
#include "vitreg/model.hpp"
#include "vitreg/writers.hpp"
#include "core/kernels.hpp"
#include "core/safetensors.hpp"
#include "io/file_digest.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

// Every output, compared as floats for equality (not within a tolerance: the same bits).
void require_same(const Features& a, const Features& b) {
    REQUIRE(a.patches.size() == b.patches.size());
    CHECK(a.cls == b.cls);
    CHECK(a.reg_tokens == b.reg_tokens);
    CHECK(a.patches == b.patches);
    CHECK(a.pooled == b.pooled);
    CHECK(a.embedding == b.embedding);
}

PrecisionOptions int8(int bits = 8) {
    PrecisionOptions p;
    p.precision = Precision::Int8;
    p.int8_weight_bits = bits;
    return p;
}

WeightQuantization quantized(int bits = 8) { return {Precision::Int8, bits}; }

// bits 4: int4 (W4A8); 8 or 7: int8 of that width.
PrecisionOptions running(int bits) {
    if (bits != 4) return int8(bits);
    PrecisionOptions p;
    p.precision = Precision::Int4;
    return p;
}
WeightQuantization stored(int bits) { return bits == 4 ? WeightQuantization{Precision::Int4, 4} : quantized(bits); }

// A safetensors file's tensors as floats (the integer ones widened), to be edited and written again.
struct Tensors {
    std::map<std::string, ArrayRef> refs;
    std::map<std::string, std::vector<float>> values;
    std::map<std::string, std::string> metadata;

    explicit Tensors(const std::string& path) {
        const SafetensorsFile f(path);
        metadata = f.metadata();
        for (const auto& name : f.names()) {
            const TensorView& v = f.get(name);
            std::vector<float> x(static_cast<std::size_t>(v.numel()));
            if (v.dtype == DType::I8)
                for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(reinterpret_cast<const std::int8_t*>(v.data)[i]);
            else if (v.dtype == DType::U8)
                for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(v.data[i]);
            else if (v.dtype == DType::I32)
                for (std::size_t i = 0; i < x.size(); ++i) {
                    std::int32_t s;
                    std::memcpy(&s, v.data + 4 * i, 4);
                    x[i] = static_cast<float>(s);
                }
            else x = v.to_float();
            values[name] = std::move(x);
            refs[name] = ArrayRef{v.shape, nullptr, v.dtype};
        }
    }
    void write(const std::string& path) {
        for (auto& [name, r] : refs) r.data = values.at(name).data();
        write_safetensors(path, refs, metadata);
    }
};

// A malformed file: `edit` breaks a good one, `message` is what the refusal says.
struct Case {
    const char* what;
    std::function<void(Tensors&)> edit;
    std::string message;
};

// Each case's edit of `good`, written to `bad`, is refused loading at `precision` with its message.
void refused(const std::string& good, const std::string& bad, const std::vector<Case>& cases, const PrecisionOptions& precision) {
    for (const Case& c : cases) {
        INFO(c.what);
        Tensors t(good);
        c.edit(t);
        t.write(bad);
        CHECK_THROWS_WITH(Model::load(bad, {}, precision), Catch::Contains(bad) && Catch::Contains(c.message));
    }
}

}  // namespace

TEST_CASE("quantized file: the features of MODEL@int8 and @int4, bit for bit", "[quantized]") {
    const std::string model = GENERATE(as<std::string>{}, "models/dinov2_f32.safetensors", "models/hf_reg2", "models/hf_clip",
                                       "models/hf_siglip_full", "models/timm_eva02_small", "models/dinov2_reg2_f16.safetensors");
    const int bits = GENERATE(8, 7, 4);
    const bool int4 = bits == 4;
    INFO(model << " " << bits << "-bit");
    TempDir dir;
    const std::string out = dir / "quantized.safetensors";
    convert_checkpoint(fixture(model), {}, DType::F32, out, stored(bits));
    const Model source = Model::load(fixture(model), {}, running(bits)), file = Model::load(out, {}, running(bits));
    const int p = source.config().patch, native = source.config().grid * p;
    for (const auto& [h, w] : {std::pair<int, int>{native, native}, {2 * p, 3 * p}}) {
        const auto x = smooth_pixels(h, w);
        require_same(file.forward(x.data(), 1, h, w), source.forward(x.data(), 1, h, w));
    }
    // The metadata: what it is, how wide, and what it came from.
    const SafetensorsFile f(out);
    CHECK(f.metadata().at("quantization") == (int4 ? "int4" : "int8"));
    CHECK(f.metadata().at("weight_bits") == std::to_string(bits));
    CHECK(f.metadata().count("group_size") == (int4 ? 1u : 0u));
    CHECK(f.metadata().at("source_digest") == file_digest(Checkpoint(fixture(model)).path()));
    CHECK(f.get("blocks.0.attn.qkv.weight").dtype == (int4 ? DType::U8 : DType::I8));
    CHECK(f.get("blocks.0.attn.qkv.weight.scale").dtype == (int4 ? DType::BF16 : DType::F32));
    CHECK(f.has("blocks.0.attn.qkv.weight.zero") == int4);
    if (!int4) CHECK(f.get("blocks.0.attn.qkv.weight.sums").dtype == DType::I32);
    CHECK(f.get("patch_embed.proj.weight").dtype == (int4 ? DType::U8 : DType::I8));
    if (int4) CHECK(f.get("patch_embed.proj.weight").shape.back() == p / 2);  // two codes a byte along the last dim
    CHECK(f.get("blocks.0.norm1.weight").dtype == DType::F32);  // what @int8 holds in fp32 stays fp32
    CHECK(f.get("blocks.0.attn.qkv.bias").dtype == DType::F32);
    if (f.has("attn_pool.qkv.weight")) CHECK(f.get("attn_pool.qkv.weight").dtype == DType::F32);
}

TEST_CASE("quantized file: per-tensor activation scales apply as to the source", "[quantized]") {
    TempDir dir;
    const std::string model = fixture("models/dinov2_f32.safetensors"), out = dir / "int8.safetensors";
    convert_checkpoint(model, {}, DType::F32, out, quantized());
    const Config c = Checkpoint(model).config();
    Int8Calibration cal;
    cal.model = model;
    cal.ranges["patch_embed.proj"] = {-3.0f, 3.0f};
    for (int i = 0; i < c.depth; ++i)
        for (const char* l : {"attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2"})
            cal.ranges["blocks." + std::to_string(i) + "." + l] = {-2.5f + 0.1f * i, 4.0f};
    write_int8_calibration(dir / "scales.json", cal);
    PrecisionOptions p = int8();
    p.act_quant = ActQuant::PerTensor;
    p.scales = dir / "scales.json";
    const int n = c.grid * c.patch;
    const auto x = smooth_pixels(n, n);
    require_same(Model::load(out, {}, p).forward(x.data(), 1, n, n), Model::load(model, {}, p).forward(x.data(), 1, n, n));
}

TEST_CASE("quantized file: packed as stored, the packing of the source at int8", "[quantized]") {
    TempDir dir;
    const std::string model = fixture("models/dinov2_f32.safetensors"), out = dir / "int8.safetensors";
    convert_checkpoint(model, {}, DType::F32, out, quantized());
    const Checkpoint source(model), file(out);
    const int D = source.config().dim;
    const auto w = source.load("blocks.1.attn.qkv.weight", {3 * D, D});
    const auto want = kernels::make_linear(w.data(), 3 * D, D, Eigen::VectorXf::Zero(3 * D), Precision::Int8);
    const Int8Tensor q = file.load_int8("blocks.1.attn.qkv.weight", {3 * D, D});
    CHECK(reinterpret_cast<const unsigned char*>(q.q) == q.view->data);  // read in place from the mapped file
    CHECK(q.sums == want.wq.sums);  // each row's Σ q, as stored
    const auto got = kernels::make_linear_int8(q.q, q.scale.data(), 3 * D, D, Eigen::VectorXf::Zero(3 * D), std::nullopt, 8);
    CHECK(got.wq.scale == want.wq.scale);
    CHECK(got.wq.sums == want.wq.sums);
    CHECK(std::equal(got.wq.data.begin(), got.wq.data.end(), want.wq.data.begin(), want.wq.data.end()));
}

TEST_CASE("quantized file: info says so, with the source's parameters", "[quantized]") {
    TempDir dir;
    const std::string model = fixture("models/hf_reg2"), out = dir / "int8.safetensors", f32 = dir / "f32.safetensors";
    convert_checkpoint(model, {}, DType::F32, out, quantized(7));
    convert_checkpoint(model, {}, DType::F32, f32);
    const CheckpointSummary s = summarize_checkpoint(out), whole = summarize_checkpoint(f32);
    CHECK(s.quantization.quantized());
    CHECK(s.quantization.precision == Precision::Int8);
    CHECK(s.quantization.bits == 7);
    CHECK(s.config.dtype == DType::I8);
    CHECK(s.config.parameters == whole.config.parameters);  // the scales are not counted
    CHECK(weight_memory(s.tensors).at(3).bytes == weight_memory(whole.tensors).at(3).bytes);  // int8's
    CHECK(!whole.quantization.quantized());
    CHECK(read_bytes(out).size() < read_bytes(f32).size() / 2);
}

TEST_CASE("quantized file: runs at its own precision and width only", "[quantized]") {
    TempDir dir;
    const std::string out = dir / "int8.safetensors";
    convert_checkpoint(fixture("models/dinov2_f32.safetensors"), {}, DType::F32, out, quantized());
    CHECK_THROWS_WITH(Model::load(out), Catch::Contains(out) && Catch::Contains("int8-quantized") &&
                                            Catch::Contains("not fp32"));
    PrecisionOptions bf16;
    bf16.precision = Precision::Bf16;
    CHECK_THROWS_AS(Model::load(out, {}, bf16), UsageError);
    CHECK_THROWS_WITH(Model::load(out, {}, int8(7)), Catch::Contains("8-bit") && Catch::Contains("--int8-weights 8"));
    CHECK_THROWS_WITH(convert_checkpoint(out, {}, DType::F32, dir / "again.safetensors"),
                      Catch::Contains("quantized already"));
    const Checkpoint ck(out);
    const std::int64_t D = ck.config().dim;
    CHECK_THROWS_WITH(ck.load("blocks.0.attn.qkv.weight", {3 * D, D}), Catch::Contains(out) && Catch::Contains("is I8"));
}

TEST_CASE("quantized file: a malformed one is refused, naming the file and the tensor", "[quantized]") {
    TempDir dir;
    const std::string good = dir / "int8.safetensors", bad = dir / "bad.safetensors";
    convert_checkpoint(fixture("models/dinov2_f32.safetensors"), {}, DType::F32, good, quantized(7));
    const std::string qkv = "blocks.0.attn.qkv.weight", scale = qkv + ".scale", sums = qkv + ".sums";
    const std::vector<Case> cases = {
        {"scale of the wrong shape", [&](Tensors& t) { t.refs[scale].shape = {7}, t.values[scale].resize(7); },
         "tensor '" + scale + "' is F32 [7], expected F32 ["},
        {"weight stored as floats", [&](Tensors& t) { t.refs[qkv].dtype = DType::F32; }, "tensor '" + qkv + "' is F32, expected I8"},
        {"scale missing", [&](Tensors& t) { t.refs.erase(scale); }, "tensor '" + scale + "' is missing"},
        {"scale zero", [&](Tensors& t) { t.values[scale][3] = 0.0f; }, "tensor '" + scale + "' holds 0.0"},
        {"scale NaN", [&](Tensors& t) { t.values[scale][0] = NAN; }, "a scale is finite and positive"},
        {"integer past 7 bits", [&](Tensors& t) { t.values[qkv][5] = 100.0f; }, "tensor '" + qkv + "' holds 100 at 5"},
        {"sums of the wrong dtype", [&](Tensors& t) { t.refs[sums].dtype = DType::F32; }, "tensor '" + sums + "' is F32 ["},
        {"sums of the wrong shape", [&](Tensors& t) { t.refs[sums].shape = {2}, t.values[sums].resize(2); },
         "tensor '" + sums + "' is I32 [2], expected I32 ["},
        {"a sum no row can reach", [&](Tensors& t) { t.values[sums][1] = 1e6f; }, "tensor '" + sums + "' holds 1000000 at 1, beyond"},
        {"a sum not its row's", [&](Tensors& t) { t.values[sums][2] += 1.0f; }, "but row 2 of '" + qkv + "' sums to"},
        {"I8 norm", [&](Tensors& t) { t.refs["norm.weight"].dtype = DType::I8, t.values["norm.weight"].assign(t.values["norm.weight"].size(), 1.0f); },
         "tensor 'norm.weight' is I8"},
        {"unknown format", [&](Tensors& t) { t.metadata["quantization"] = "int3"; }, "metadata quantization='int3'"},
        {"bits wrong", [&](Tensors& t) { t.metadata["weight_bits"] = "9"; }, "metadata weight_bits='9'"},
        {"digest missing", [&](Tensors& t) { t.metadata.erase("source_digest"); }, "metadata source_digest=''"},
        {"digest malformed", [&](Tensors& t) { t.metadata["source_digest"] = "fnv1a64:xyz"; }, "source_digest='fnv1a64:xyz'"},
        {"I8 without the metadata", [&](Tensors& t) { t.metadata.erase("quantization"); },
         "is I8 but the metadata states no quantization"},
    };
    refused(good, bad, cases, int8(7));
}

TEST_CASE("quantized file: 8-bit weights with their sums load unread; files without sums still load", "[quantized]") {
    TempDir dir;
    const std::string good = dir / "int8.safetensors", edited = dir / "edited.safetensors";
    convert_checkpoint(fixture("models/dinov2_f32.safetensors"), {}, DType::F32, good, quantized());
    const Model want = Model::load(good, {}, int8());
    const Checkpoint ck(good);
    const std::string qkv = "blocks.0.attn.qkv.weight";
    const int D = ck.config().dim;
    const auto x = smooth_pixels(2 * ck.config().patch, 2 * ck.config().patch);
    SECTION("without the sums: found from the weights, the same features") {
        Tensors t(good);
        for (auto& [name, r] : std::map<std::string, ArrayRef>(t.refs))
            if (name.size() > 5 && name.compare(name.size() - 5, 5, ".sums") == 0) t.refs.erase(name), t.values.erase(name);
        t.write(edited);
        CHECK(Checkpoint(edited).load_int8(qkv, {3 * D, D}).sums == ck.load_int8(qkv, {3 * D, D}).sums);
        require_same(Model::load(edited, {}, int8()).forward(x.data(), 1, 2 * ck.config().patch, 2 * ck.config().patch),
                     want.forward(x.data(), 1, 2 * ck.config().patch, 2 * ck.config().patch));
    }
    SECTION("an 8-bit file's -128 is not read at load (every 8-bit kernel is exact for it)") {
        Tensors t(good);
        t.values[qkv][0] = -128.0f;
        t.write(edited);
        CHECK_NOTHROW(Checkpoint(edited).load_int8(qkv, {3 * D, D}));
    }
}

TEST_CASE("quantized file: the fuzz seeds are real quantized files the int8 (int4) forward loads", "[quantized]") {
    for (const auto& [seed, bits] : {std::pair<const char*, int>{"dinov2_int8", 8}, {"swiglu_int8_7bit", 7}, {"dinov2_int4", 4}}) {
        const std::string path = std::string(VITREG_FUZZ_DIR) + "/seeds/safetensors/" + seed;
        INFO(path);
        REQUIRE(Checkpoint(path).quantization().bits == bits);
        const Model m = Model::load(path, {}, running(bits));
        const int p = m.config().patch;
        const auto x = smooth_pixels(2 * p, 2 * p);
        const Features f = m.forward(x.data(), 1, 2 * p, 2 * p);
        CHECK(std::all_of(f.patches.begin(), f.patches.end(), [](float v) { return std::isfinite(v); }));
    }
}

TEST_CASE("int4 file: packed as stored, the packing of the source at int4", "[quantized]") {
    TempDir dir;
    const std::string model = fixture("models/dinov2_f32.safetensors"), out = dir / "int4.safetensors";
    convert_checkpoint(model, {}, DType::F32, out, stored(4));
    const Checkpoint source(model), file(out);
    const int D = source.config().dim, H = source.config().mlp_hidden;
    const auto w = source.load("blocks.1.mlp.fc2.weight", {D, H});
    const auto want = kernels::make_linear(w.data(), D, H, Eigen::VectorXf::Zero(D), Precision::Int4);
    const Int4Tensor q = file.load_int4("blocks.1.mlp.fc2.weight", {D, H});
    CHECK(q.codes == q.view->data);  // read in place from the mapped file
    CHECK(q.view->shape == std::vector<std::int64_t>{D, (H + 1) / 2});
    const auto got = kernels::make_linear_int4(q.codes, q.scales().data(), q.zeros().data(), D, H, Eigen::VectorXf::Zero(D));
    CHECK(got.w4.scale == want.w4.scale);
    CHECK(got.w4.zero == want.w4.zero);
    CHECK(got.w4.sums == want.w4.sums);
    CHECK(std::equal(got.w4.data.begin(), got.w4.data.end(), want.w4.data.begin(), want.w4.data.end()));
    // Nibble order: element 0 in the low nibble of byte 0, as quantize_u4 codes it in its group.
    const quant::AffineU4 a{quant::from_bf16(q.scales()[0]), quant::from_bf16(q.zeros()[0])};
    CHECK((q.codes[0] & 0xf) == quant::quantize_u4(w[0], a));
    CHECK((q.codes[0] >> 4) == quant::quantize_u4(w[1], a));
}

TEST_CASE("int4 file: info says so, with the source's parameters", "[quantized]") {
    TempDir dir;
    const std::string model = fixture("models/hf_reg2"), out = dir / "int4.safetensors", f32 = dir / "f32.safetensors";
    convert_checkpoint(model, {}, DType::F32, out, stored(4));
    convert_checkpoint(model, {}, DType::F32, f32);
    const CheckpointSummary s = summarize_checkpoint(out), whole = summarize_checkpoint(f32);
    CHECK(s.quantization.precision == Precision::Int4);
    CHECK(s.quantization.bits == 4);
    CHECK(s.config.parameters == whole.config.parameters);  // two codes a byte; scales and zeros not counted
    CHECK(weight_memory(s.tensors).at(4).format.rfind("int4", 0) == 0);  // int4, or int4-g128
    CHECK(weight_memory(s.tensors).at(4).bytes == weight_memory(whole.tensors).at(4).bytes);
}

TEST_CASE("int4 file: runs at int4 only", "[quantized]") {
    TempDir dir;
    const std::string out = dir / "int4.safetensors";
    convert_checkpoint(fixture("models/dinov2_f32.safetensors"), {}, DType::F32, out, stored(4));
    CHECK_THROWS_WITH(Model::load(out), Catch::Contains(out) && Catch::Contains("int4-quantized") && Catch::Contains("not fp32"));
    CHECK_THROWS_WITH(Model::load(out, {}, int8()), Catch::Contains("runs only at int4") && Catch::Contains("not int8"));
    CHECK_THROWS_WITH(convert_checkpoint(out, {}, DType::F32, dir / "again.safetensors", stored(8)),
                      Catch::Contains("quantized already"));
    CHECK_THROWS_AS(convert_checkpoint(fixture("models/dinov2_f32.safetensors"), {}, DType::BF16, dir / "x.safetensors", stored(4)),
                    UsageError);
    const Checkpoint ck(out);
    const std::int64_t D = ck.config().dim;
    CHECK_THROWS_WITH(ck.load("blocks.0.attn.qkv.weight", {3 * D, D}), Catch::Contains(out) && Catch::Contains("is U8"));
    CHECK_THROWS_WITH(ck.load_int8("blocks.0.attn.qkv.weight", {3 * D, D}), Catch::Contains("not an int8-quantized file"));
}

TEST_CASE("int4 file: a malformed one is refused, naming the file and the tensor", "[quantized]") {
    TempDir dir;
    const std::string good = dir / "int4.safetensors", bad = dir / "bad.safetensors";
    convert_checkpoint(fixture("models/dinov2_f32.safetensors"), {}, DType::F32, good, stored(4));
    const std::string qkv = "blocks.0.attn.qkv.weight", scale = qkv + ".scale", zero = qkv + ".zero";
    const std::vector<Case> cases = {
        {"codes unpacked", [&](Tensors& t) { t.refs[qkv].shape.back() *= 2, t.values[qkv].resize(2 * t.values[qkv].size()); },
         "tensor '" + qkv + "' has shape"},
        {"codes stored as I8", [&](Tensors& t) { t.refs[qkv].dtype = DType::I8, t.values[qkv].assign(t.values[qkv].size(), 0.0f); },
         "tensor '" + qkv + "' is I8, expected U8"},
        {"scale missing", [&](Tensors& t) { t.refs.erase(scale); }, "tensor '" + scale + "' is missing"},
        {"zero missing", [&](Tensors& t) { t.refs.erase(zero); }, "tensor '" + zero + "' is missing"},
        {"scale as F32", [&](Tensors& t) { t.refs[scale].dtype = DType::F32; }, "tensor '" + scale + "' is F32"},
        {"zero of the wrong shape", [&](Tensors& t) { t.refs[zero].shape = {3}, t.values[zero].resize(3); },
         "tensor '" + zero + "' is BF16 [3], expected BF16 ["},
        {"scale NaN", [&](Tensors& t) { t.values[scale][1] = NAN; }, "tensor '" + scale + "' holds"},
        {"scale zero", [&](Tensors& t) { t.values[scale][0] = 0.0f; }, "finite and positive"},
        {"zero infinite", [&](Tensors& t) { t.values[zero][2] = INFINITY; }, "tensor '" + zero + "' holds inf at 2"},
        {"group size", [&](Tensors& t) { t.metadata["group_size"] = "64"; }, "metadata group_size='64'"},
        {"bits wrong", [&](Tensors& t) { t.metadata["weight_bits"] = "8"; }, "metadata weight_bits='8'"},
        {"U8 norm", [&](Tensors& t) { t.refs["norm.weight"].dtype = DType::U8; t.values["norm.weight"].assign(t.values["norm.weight"].size(), 1.0f); },
         "tensor 'norm.weight' is U8"},
        {"U8 without the metadata", [&](Tensors& t) { t.metadata.erase("quantization"); },
         "is U8 but the metadata states no quantization"},
    };
    refused(good, bad, cases, running(4));
}

TEST_CASE("int4 file: a row of an odd count's padding nibble is 0", "[quantized]") {
    // W [2, 3]: codes a byte and a half a row; the packer and the file agree on them.
    const std::vector<float> w = {0.1f, -0.4f, 0.3f, 2.0f, 1.0f, -1.0f};
    const quant::Int4Weights q = quant::quantize_groups(w.data(), 2, 3, 3, 1);
    REQUIRE(q.codes.size() == 4u);
    CHECK((q.codes[1] >> 4) == 0);
    CHECK((q.codes[3] >> 4) == 0);
    const auto packed = kernels::make_linear_int4(q.codes.data(), q.scale.data(), q.zero.data(), 2, 3, Eigen::VectorXf::Zero(2));
    const auto direct = kernels::make_linear(w.data(), 2, 3, Eigen::VectorXf::Zero(2), Precision::Int4);
    CHECK(gemm::dequantize(packed.w4) == gemm::dequantize(direct.w4));
}
