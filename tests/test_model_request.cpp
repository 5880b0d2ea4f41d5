// One way to open a model (ModelRequest -> open_model) from the table of options both front
// ends read: the same model as the loading the command line and Python did before, option by
// option, and the table's defaults are the library's.
#include <catch2/catch.hpp>

#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/model_options.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/preprocess.hpp"

using namespace vitreg;
using namespace vitreg::test;

namespace {

// Two models are the same when their configuration, precision and intervention read the same
// and their features on a fixture image are bit-identical.
void check_same_model(const Model& got, const Model& want) {
    const Config &g = got.config(), &w = want.config();
    CHECK(got.path() == want.path());
    CHECK(g.dim == w.dim);
    CHECK(g.depth == w.depth);
    CHECK(g.heads == w.heads);
    CHECK(g.registers == w.registers);
    CHECK(g.attention == w.attention);
    CHECK(g.trained_attention == w.trained_attention);
    CHECK(g.pos_interp == w.pos_interp);
    CHECK(g.notes == w.notes);
    CHECK(got.precision().describe() == want.precision().describe());
    CHECK(got.intervention().to_string() == want.intervention().to_string());
    const Pixels px = load_pixels(fixture("images/smooth_90x120.png"), ResizeSpec::parse("none"), w, ImageLimits{});
    const Features a = got.forward(px.chw.data(), 1, px.height, px.width, ForwardOptions{2});
    const Features b = want.forward(px.chw.data(), 1, px.height, px.width, ForwardOptions{2});
    CHECK(a.cls == b.cls);
    CHECK(a.reg_tokens == b.reg_tokens);
    CHECK(a.patches == b.patches);
}

}  // namespace

TEST_CASE("open_model from the table's options opens what Model::load with the same settings opened", "[model_request]") {
    SECTION("a retrofit, a resampling, bf16 and an eviction") {
        const std::string path = fixture("models/dinov2_reg2_f16.safetensors");
        const ModelRequest r = ModelRequest::from_options(
            path, {{"attention", "softmax1"}, {"pos-interp", "offset"}, {"precision", "bf16"}, {"evict", "cls"}});
        ConfigOverrides o;
        o.attention = AttentionKind::Softmax1;
        o.pos_interp = PosInterp::Offset;
        PrecisionOptions p;
        p.precision = Precision::Bf16;
        Intervention edit;
        edit.evict = Eviction::parse("cls");
        check_same_model(open_model(r), Model::load(resolve_model_path(path), o, p).with(edit));
    }
    SECTION("7-bit int8 and test-time registers") {
        const std::string path = fixture("models/planted_f32.safetensors");
        const ModelRequest r = ModelRequest::from_options(
            path, {{"precision", "int8"}, {"int8-weights", "7"}, {"ttr", "1"}, {"register-neurons", "1:21"}});
        PrecisionOptions p;
        p.precision = Precision::Int8;
        p.int8_weight_bits = 7;
        Intervention edit;
        edit.test_time_registers = 1;
        edit.register_neurons = {{1, 21}};
        check_same_model(open_model(r), Model::load(path, {}, p).with(edit));
    }
    SECTION("a configuration word, over the options of the checkpoints without suffixes") {
        const std::string path = fixture("models/softmax1_reg2_f32.safetensors");
        const ModelRequest fallback = ModelRequest::from_options("", {{"precision", "bf16"}, {"evict", "registers"}});
        const ModelRequest plain = ModelRequest::from_spec(ModelSpec::parse(path), fallback);
        Intervention registers;
        registers.evict = Eviction::parse("registers");
        PrecisionOptions bf16;
        bf16.precision = Precision::Bf16;
        check_same_model(open_model(plain), Model::load(path, {}, bf16).with(registers));

        const ModelRequest suffixed = ModelRequest::from_spec(ModelSpec::parse(path + "@softmax@int8@evict=cls"), fallback);
        ConfigOverrides softmax;
        softmax.attention = AttentionKind::Softmax;
        PrecisionOptions int8;
        int8.precision = Precision::Int8;
        Intervention cls;
        cls.evict = Eviction::parse("cls");
        check_same_model(open_model(suffixed), Model::load(path, softmax, int8).with(cls));
    }
}

TEST_CASE("the table's defaults are the library's, and every option reaches the request", "[model_request]") {
    OptionValues defaults;
    for (const ModelOption& o : model_options()) defaults[o.name] = o.default_text;
    const ModelRequest got = ModelRequest::from_options("m", defaults), want;
    CHECK(got.precision.describe() == want.precision.describe());
    CHECK(got.overrides.limits.max_header_bytes == want.overrides.limits.max_header_bytes);
    CHECK(got.overrides.limits.max_json_depth == want.overrides.limits.max_json_depth);
    CHECK(got.precision.file_weights_packed == want.precision.file_weights_packed);
    CHECK(got.threads == want.threads);
    CHECK(got.max_tokens == want.max_tokens);
    CHECK(got.max_tokens == kMaxTokensFromMemory);
    CHECK(got.max_memory == want.max_memory);
    CHECK(got.image_limits.max_pixels == want.image_limits.max_pixels);
    CHECK(got.intervention.empty());

    const ModelRequest all = ModelRequest::from_options(
        "m", {{"key", "model"}, {"attention", "sink"}, {"pos-interp", "size"}, {"precision", "int8"},
              {"act-quant", "per-tensor"}, {"scales", "s.json"}, {"int8-weights", "7"}, {"evict", "cls"}, {"ttr", "2"},
              {"register-neurons", "1:3"}, {"max-header-bytes", "4096"}, {"max-json-depth", "9"}, {"max-memory", "1.5G"},
              {"threads", "3"},
              {"max-image-pixels", "1000"}, {"max-tokens", "77"}});
    CHECK(all.model == "m");
    CHECK(all.overrides.state_dict_key == "model");
    CHECK(all.overrides.attention == AttentionKind::Sink);
    CHECK(all.overrides.pos_interp == PosInterp::Size);
    CHECK(all.precision.describe() == "int8 per-tensor (s.json), 7-bit weights");
    CHECK(all.intervention.to_string() == "evict=cls ttr=2 neurons=1:3");
    CHECK(all.overrides.limits.max_header_bytes == 4096);
    CHECK(all.overrides.limits.max_json_depth == 9);
    CHECK(all.threads == 3);
    CHECK(all.image_limits.max_pixels == 1000);
    CHECK(all.max_tokens == 77);
    CHECK(all.max_memory == (std::int64_t(3) << 29));
    CHECK(!all.precision.file_weights_packed);
    CHECK(ModelRequest::from_options("m", {{"precision", "bf16"}, {"file-weights", "packed"}}).precision.file_weights_packed);
    CHECK(model_options().size() == 17);  // a new option: add it above, and to the front ends' tests
}

TEST_CASE("from_options refuses what is not an option or not one of its values", "[model_request]") {
    CHECK_THROWS_WITH(ModelRequest::from_options("m", {{"colour", "red"}}), Catch::Contains("unknown model option 'colour'"));
    CHECK_THROWS_WITH(ModelRequest::from_options("m", {{"ttr", "65"}}), Catch::Contains("ttr=65: expected an integer in 0..64 (--ttr on the command line)"));
    CHECK_THROWS_WITH(ModelRequest::from_options("m", {{"threads", "two"}}), Catch::Contains("threads=two: expected an integer"));
    CHECK_THROWS_WITH(ModelRequest::from_options("m", {{"attention", "relu"}}), Catch::Contains("unknown attention kind 'relu'"));
    CHECK_THROWS_WITH(ModelRequest::from_options("m", {{"max-memory", "4X"}}), Catch::Contains("--max-memory 4X: unknown unit 'X'"));
    CHECK_THROWS_AS(ModelRequest::from_options("m", {{"evict", "sinks"}}), UsageError);
    CHECK(model_option("pos-interp").keyword() == "pos_interp");
}

TEST_CASE("a name's suffix sets the precision and attention; an option that contradicts it is refused", "[model_request]") {
    // Only given options arrive (the CLI leaves the others empty): the suffix is not overridden by a default.
    CHECK(ModelRequest::from_options("m@int8", {}).precision.precision == Precision::Int8);
    CHECK(ModelRequest::from_options("m@bf16", {{"precision", ""}}).precision.precision == Precision::Bf16);
    CHECK(ModelRequest::from_options("m@int8", {{"precision", "int8"}, {"act-quant", "per-token"}}).precision.precision ==
          Precision::Int8);
    CHECK(ModelRequest::from_options("m@int4", {}).precision.precision == Precision::Int4);
    CHECK(ModelRequest::from_options("m@int4", {{"precision", "int4"}}).precision.precision == Precision::Int4);
    CHECK_THROWS_WITH(ModelRequest::from_options("m@int4", {{"precision", "int8"}}),
                      Catch::Contains("m@int4: the name asks for int4 and --precision for int8"));
    CHECK_THROWS_WITH(ModelSpec::parse("m@int4@int8"), Catch::Contains("two precisions"));
    CHECK(ModelRequest::from_options("m@softmax1", {}).overrides.attention == AttentionKind::Softmax1);
    CHECK_THROWS_WITH(ModelRequest::from_options("m@bf16", {{"precision", "int8"}}),
                      Catch::Contains("m@bf16: the name asks for bf16 and --precision for int8"));
    CHECK_THROWS_WITH(ModelRequest::from_options("m@softmax1", {{"attention", "softmax"}}),
                      Catch::Contains("the name asks for softmax1 attention and --attention for softmax"));
}
