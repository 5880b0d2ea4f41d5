// The other families (docs/design.md, "Families"): timm ViTs and CLIP vision towers in their three
// layouts. Parity with the reference is in test_parity.cpp (the fixtures are cases there); here:
// how each layout is recognized and resolved, what extract writes, preprocessing from the configs
// beside the weights, and that interventions and retrofits run on them as on DINOv2.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/checkpoint/timm_architectures.hpp"
#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"
#include "vitreg/extract.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/analysis/sink_calibration.hpp"
#include "vitreg/analysis/stats.hpp"

using namespace vitreg;
using namespace vitreg::test;
using nlohmann::json;

namespace {

const char* kHfClip = "models/hf_clip";
const char* kOpenClip = "models/open_clip_quickgelu";
const char* kOpenClipGelu = "models/open_clip_gelu_f16";
const char* kDeit3 = "models/timm_deit3";
const char* kAvg = "models/timm_avg_fcnorm";
const char* kTimmClip = "models/timm_clip_f16.safetensors";
const char* kNoQkvBias = "models/timm_noqkvbias.safetensors";

// A copy of a fixture folder under `dir` with one of its JSON configs edited.
std::string folder_with(const TempDir& dir, const std::string& name, const char* source, const std::string& file,
                        const std::function<void(json&)>& edit) {
    const std::string d = dir / name;
    REQUIRE(std::system(("cp -r '" + fixture(source) + "' '" + d + "'").c_str()) == 0);
    json j = json::parse(read_bytes(d + "/" + file));
    edit(j);
    write_bytes(d + "/" + file, j.dump());
    return d;
}

}  // namespace

TEST_CASE("each layout is recognized and resolves its family's facts") {
    const Config hf = Checkpoint(fixture(kHfClip)).config();
    CHECK(hf.source == "hf-clip");
    CHECK(hf.family == Family::Clip);
    CHECK(hf.mlp == MlpKind::QuickGelu);
    CHECK(hf.pre_norm);
    CHECK_FALSE(hf.patch_bias);
    CHECK(hf.proj_dim == 24);
    CHECK(hf.eps == Approx(1e-5));
    CHECK(hf.pos_interp == PosInterp::Size);  // HF's interpolate_pos_encoding: no antialias
    // preprocessor_config.json: its mean / std, crop 32 of a 36 px short side.
    CHECK(hf.mean[0] == Approx(0.5));
    CHECK(hf.std[2] == Approx(0.35));
    CHECK(hf.input_size == 32);
    CHECK(hf.eval_resize() == 36);
    // The text tower is not counted: only vision_model.* and visual_projection.
    const SafetensorsFile hf_file(fixture(std::string(kHfClip) + "/model.safetensors"));
    CHECK(hf_file.has("text_model.embeddings.token_embedding.weight"));
    std::int64_t vision = 0;
    for (const auto& n : hf_file.names())
        if (n.rfind("vision_model.", 0) == 0 || n == "visual_projection.weight") vision += hf_file.get(n).numel();
    CHECK(hf.parameters == vision);

    // SigLIP (docs/design.md, "Families"): CLIP's names without a class token, tanh GELU, the MAP
    // head, a squash.
    for (const char* folder : {"models/hf_siglip", "models/hf_siglip_full"}) {
        INFO(folder);
        const Config sg = Checkpoint(fixture(folder)).config();
        CHECK(sg.source == "hf-siglip");
        CHECK(sg.family == Family::Siglip);
        CHECK(sg.mlp == MlpKind::GeluTanh);  // the full SiglipModel's vision_config names none: HF's default
        CHECK(sg.pool == Pool::Map);
        CHECK_FALSE(sg.class_token);
        CHECK_FALSE(sg.pos_embed_class);
        CHECK_FALSE(sg.pre_norm);
        CHECK_FALSE(sg.layer_scale);
        CHECK(sg.eps == Approx(1e-6));
        CHECK(sg.pos_interp == PosInterp::Size);
        CHECK(sg.pipeline == PixelPipeline::HF);
        CHECK(sg.eval_squash);
        CHECK(sg.input_size == 32);
        CHECK(sg.mean[1] == Approx(0.5));
        CHECK(sg.std[2] == Approx(0.5));
        const SafetensorsFile file(fixture(std::string(folder) + "/model.safetensors"));
        std::int64_t vision = 0;
        for (const auto& n : file.names())
            if (n.rfind("vision_model.", 0) == 0) vision += file.get(n).numel();
        CHECK(sg.parameters == vision);  // a SiglipModel's text tower is not counted
    }

    // timm's vit_*_siglip_*: timm names, the attention pool's q and kv apart, the activation from
    // model_args, timm's center crop.
    const Config ts = Checkpoint(fixture("models/timm_siglip")).config();
    CHECK(ts.family == Family::Siglip);
    CHECK(ts.pool == Pool::Map);
    CHECK(ts.mlp == MlpKind::GeluTanh);
    CHECK_FALSE(ts.class_token);
    CHECK(ts.pipeline == PixelPipeline::Timm);
    CHECK_FALSE(ts.eval_squash);
    CHECK(ts.pos_interp == PosInterp::Antialias);
    CHECK(ts.mean[0] == Approx(0.5));

    const Config oc = Checkpoint(fixture(kOpenClip)).config();
    CHECK(oc.source == "open-clip");
    CHECK(oc.family == Family::Clip);
    CHECK(oc.mlp == MlpKind::QuickGelu);
    CHECK(oc.heads == 2);  // width 32 / head_width 16
    CHECK(oc.pos_interp == PosInterp::Antialias);
    CHECK(oc.mean[0] == Approx(0.48145466));
    CHECK(oc.input_size == 32);
    CHECK(oc.crop_pct == 1.0);
    const Config ocg = Checkpoint(fixture(kOpenClipGelu)).config();
    CHECK(ocg.mlp == MlpKind::Gelu);
    CHECK(ocg.layer_scale);

    const Config deit = Checkpoint(fixture(kDeit3)).config();
    CHECK(deit.family == Family::Timm);
    CHECK(deit.class_token);
    CHECK_FALSE(deit.pos_embed_class);  // no_embed_class: 9 rows for a 3x3 grid
    CHECK(deit.grid == 3);
    CHECK(deit.heads == 3);  // model_args.num_heads
    CHECK(deit.layer_scale);
    CHECK(deit.proj_dim == 0);  // the classifier head is ignored
    CHECK(deit.eps == Approx(1e-6));
    CHECK(deit.input_size == 48);
    CHECK(deit.crop_pct == Approx(0.9));
    CHECK(deit.eval_resize() == 53);  // floor(48 / 0.9)

    const Config avg = Checkpoint(fixture(kAvg)).config();
    CHECK_FALSE(avg.class_token);
    CHECK(avg.pool == Pool::Avg);
    CHECK(avg.fc_norm);
    CHECK_FALSE(avg.final_norm);

    const Config tc = Checkpoint(fixture(kTimmClip)).config();
    CHECK(tc.family == Family::Clip);  // norm_pre and a patch embedding without bias
    CHECK(tc.proj_dim == 24);          // timm's head, zero bias: the projection
    CHECK(tc.eps == Approx(1e-5));
    CHECK(tc.pos_interp == PosInterp::Antialias);
    REQUIRE_FALSE(tc.notes.empty());
    CHECK_THAT(tc.notes.front(), Catch::Contains("CLIP projection"));

    const Config nb = Checkpoint(fixture(kNoQkvBias)).config();
    CHECK_FALSE(nb.qkv_bias);
    CHECK(nb.family == Family::Timm);
    CHECK(nb.patch == 14);
}

TEST_CASE("timm's Eva: each layout of EVA-02's attention and MLP, its rotary positions and EVA-CLIP's tower") {
    // eva02_small: fused qkv with q_bias / v_bias, SwiGLU packed in fc1, fc_norm over the mean.
    const Config s = Checkpoint(fixture("models/timm_eva02_small")).config();
    CHECK(s.source == "timm-eva");
    CHECK(s.family == Family::Eva);
    CHECK(s.positions == Positions::RopeEva);
    CHECK(s.has_pos_embed());  // beside the rotation, a learned pos_embed with a class row
    CHECK(s.pos_embed_class);
    CHECK(s.rope_ref_grid == std::array<int, 2>{16, 16});  // every eva02_* definition's ref_feat_shape
    CHECK(s.rope_theta == 10000.0f);
    CHECK(s.mlp == MlpKind::SwiGlu);
    CHECK_FALSE(s.mlp_norm);
    CHECK_FALSE(s.attn_norm);
    CHECK(s.qkv_bias);  // q and v; k's is zero
    CHECK_FALSE(s.layer_scale);
    CHECK(s.pool == Pool::Avg);
    CHECK(s.fc_norm);
    CHECK_FALSE(s.final_norm);
    CHECK(s.pos_interp == PosInterp::Antialias);
    CHECK(s.pipeline == PixelPipeline::Timm);
    CHECK(s.eps == Approx(1e-6));
    CHECK(s.mean[0] == Approx(0.48145466));
    CHECK(s.crop_pct == Approx(0.9));
    // eva02_base: q/k/v projections, fc1_g / fc1_x with the sub-LayerNorm, gamma_1 / gamma_2, a
    // stated ref_feat_shape.
    const Config b = Checkpoint(fixture("models/timm_eva02_base")).config();
    CHECK(b.source == "timm-eva");
    CHECK(b.rope_ref_grid == std::array<int, 2>{6, 6});
    CHECK(b.mlp == MlpKind::SwiGlu);
    CHECK(b.mlp_norm);
    CHECK_FALSE(b.attn_norm);
    CHECK(b.layer_scale);
    CHECK(b.qkv_bias);
    // EVA-CLIP's tower: the attention's inner LayerNorm, the final norm, the class token, and the
    // zero-bias head as the CLIP projection.
    const Config c = Checkpoint(fixture("models/timm_eva02_clip")).config();
    CHECK(c.attn_norm);
    CHECK(c.mlp_norm);
    CHECK(c.final_norm);
    CHECK(c.pool == Pool::Token);
    CHECK(c.proj_dim == 24);
    CHECK(c.crop_pct == 1.0);
}

TEST_CASE("an EVA file without its config: the tensors' SwiGLU says EVA-02, and a note says it was assumed") {
    TempDir dir;
    // The folder's weights alone, their header stating only the head count (D/64 is no count at D = 48).
    const std::string bytes = read_bytes(fixture("models/timm_eva02_small/model.safetensors"));
    std::uint64_t header_size = 0;
    std::memcpy(&header_size, bytes.data(), 8);
    json header = json::parse(bytes.substr(8, header_size));
    header["__metadata__"] = {{"heads", "3"}};
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string stored(8, '\0');
    const std::uint64_t size = text.size();
    std::memcpy(&stored[0], &size, 8);
    const std::string bare = dir / "eva02.safetensors";
    write_bytes(bare, stored + text + bytes.substr(8 + header_size));
    const Model folder = Model::load(fixture("models/timm_eva02_small")), alone = Model::load(bare);
    CHECK(alone.config().positions == Positions::RopeEva);
    CHECK(alone.config().rope_ref_grid == std::array<int, 2>{16, 16});
    bool noted = false;
    for (const auto& n : alone.config().notes) noted = noted || n.find("rotary positions assumed") != std::string::npos;
    CHECK(noted);
    const int p = folder.config().patch;
    const auto x = smooth_pixels(3 * p, 5 * p);
    CHECK(alone.forward(x.data(), 1, 3 * p, 5 * p).patches == folder.forward(x.data(), 1, 3 * p, 5 * p).patches);
    // EVA-01's name (eva_*): no rotation, so other features.
    const std::string d = dir / "eva01";
    REQUIRE(std::system(("cp -r '" + fixture("models/timm_eva02_small") + "' '" + d + "'").c_str()) == 0);
    json j = json::parse(read_bytes(d + "/config.json"));
    j["architecture"] = "eva_giant_patch14_224";
    write_bytes(d + "/config.json", j.dump());
    const Model eva01 = Model::load(d);
    CHECK(eva01.config().positions == Positions::Learned);
    CHECK(eva01.forward(x.data(), 1, 3 * p, 5 * p).patches != folder.forward(x.data(), 1, 3 * p, 5 * p).patches);
}

TEST_CASE("pos_embed rows tell no_embed_class apart; other counts are refused") {
    TempDir dir;
    const std::string bytes = read_bytes(fixture("models/dinov2_f32.safetensors"));
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
    const json header = json::parse(bytes.substr(8, n));
    const auto with_rows = [&](int rows) {
        json h = header;
        h["pos_embed"]["shape"] = {1, rows, 64};
        h["pos_embed"]["data_offsets"][1] = h["pos_embed"]["data_offsets"][0].get<std::uint64_t>() + rows * 64 * 4;
        const std::string text = h.dump();
        std::string out(8, '\0');
        for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xff);
        const std::string path = dir / ("rows" + std::to_string(rows) + ".safetensors");
        write_bytes(path, out + text + bytes.substr(8 + n));
        return path;
    };
    const Config patches_only = Checkpoint(with_rows(16)).config();  // 4x4, no class row
    CHECK_FALSE(patches_only.pos_embed_class);
    CHECK(patches_only.grid == 4);
    CHECK(patches_only.family == Family::Timm);
    CHECK(Checkpoint(with_rows(10)).config().grid == 3);  // 1 + 3x3
    for (int rows : {15, 12, 0}) {
        INFO(rows);
        CHECK_THROWS_WITH(Checkpoint(with_rows(rows)), Catch::Contains("not a square grid"));
    }
}

TEST_CASE("the eval resize follows each checkpoint's transform, and stays 256 -> 224 for DINOv2") {
    Image img;
    img.width = 120;
    img.height = 90;
    img.rgb.assign(static_cast<std::size_t>(img.width) * img.height * 3, 128);
    const ResizeSpec eval = ResizeSpec::parse("eval");
    Geometry g;
    preprocess(img, eval, Checkpoint(fixture("models/dinov2_f32.safetensors")).config(), "x", &g);
    CHECK((g.resized_height == 256 && g.width == 224 && g.height == 224));
    const Pixels deit = preprocess(img, eval, Checkpoint(fixture(kDeit3)).config(), "x", &g);
    CHECK((g.resized_height == 53 && g.resized_width == 70 && deit.width == 48 && deit.height == 48));
    preprocess(img, eval, Checkpoint(fixture(kOpenClip)).config(), "x", &g);
    CHECK((g.resized_height == 32 && g.width == 32));  // CLIP: short side to the input, then crop
    // Its mean / std: a mid-grey pixel becomes (128/255 - mean) / std in each channel.
    const Config hf = Checkpoint(fixture(kHfClip)).config();
    const Pixels px = preprocess(img, eval, hf, "x", &g);
    CHECK(px.chw[0] == Approx((128.0 / 255 - 0.5) / 0.25).margin(1e-6));
    CHECK(px.chw[2 * 32 * 32] == Approx((128.0 / 255 - 0.4) / 0.35).margin(1e-6));
    // SigLIP's processor squashes the whole image to the input, nothing cropped.
    preprocess(img, eval, Checkpoint(fixture("models/hf_siglip")).config(), "x", &g);
    CHECK((g.resized_width == 32 && g.resized_height == 32 && g.crop_left == 0 && g.crop_top == 0 && g.width == 32));
    // A squash with a crop margin: DeiT's processor floors the offset, timm's crop_mode 'squash'
    // (torchvision's CenterCrop) rounds half to even.
    ResizeSpec squash = eval;
    squash.eval_squash = true;
    squash.eval_resize = 55;
    squash.eval_crop = 48;
    squash.pipeline = PixelPipeline::HF;
    const Geometry hf_squash = plan_geometry(120, 90, squash, 16, "x");
    CHECK((hf_squash.resized_width == 55 && hf_squash.resized_height == 55 && hf_squash.crop_left == 3 &&
           hf_squash.crop_top == 3 && hf_squash.width == 48));
    squash.pipeline = PixelPipeline::Timm;
    CHECK(plan_geometry(120, 90, squash, 16, "x").crop_left == 4);
}

TEST_CASE("without a class token, cls is the pooled feature: fc_norm of the mean patch") {
    const Model m = Model::load(fixture(kAvg));
    const auto x = smooth_pixels(64, 96);
    const Features f = m.forward(x.data(), 1, 64, 96);
    CHECK(f.cls == f.pooled);
    CHECK(f.embedding.empty());
    CHECK(m.tokens(64, 96) == 6);  // patches only
    CHECK_THROWS_WITH(TokenRef::parse("cls").token_index(0, 2, 3, false), Catch::Contains("no class token"));
    CHECK(TokenRef::parse("patch:1,2").token_index(0, 2, 3, false) == 5);
}

TEST_CASE("extract --project writes embedding.npy for CLIP and refuses models without a projection") {
    TempDir dir;
    const std::vector<std::string> inputs{fixture("images/smooth_90x120.png"), fixture("images/gray16_20x10.png")};
    const Model m = Model::load(fixture(kOpenClip));
    ExtractOptions o;
    o.out_dir = dir / "clip";
    o.project = true;
    const auto s = extract_features(m, inputs, o);
    CHECK(s.ok == 2);
    const auto embedding = npy_data(o.out_dir + "/embedding.npy");
    REQUIRE(embedding.size() == 2 * 16);
    const Pixels px = preprocess(decode_image(inputs[0]), o.resize, m.config(), inputs[0]);
    const Features f = m.forward(px.chw.data(), 1, px.height, px.width);
    CHECK(relative_error(embedding.data(), f.embedding) < 1e-6);
    const json run = json::parse(read_bytes(o.out_dir + "/run.json"));
    CHECK(run["embedding_dim"] == 16);
    CHECK(run["family"] == "clip");

    o.out_dir = dir / "deit";
    CHECK_THROWS_WITH(extract_features(Model::load(fixture(kDeit3)), inputs, o), Catch::Contains("has no projection"));
    o.project = false;
    o.out_dir = dir / "avg";
    extract_features(Model::load(fixture(kAvg)), inputs, o);
    CHECK(npy_data(o.out_dir + "/cls.npy") == npy_data(o.out_dir + "/pooled.npy"));
}

TEST_CASE("interventions and retrofits run on the other families") {
    for (const char* path : {kOpenClip, kDeit3, kAvg, kTimmClip, "models/timm_eva02_base", "models/timm_eva02_clip"}) {
        INFO(path);
        const Model m = Model::load(fixture(path));
        const int p = m.config().patch, h = 2 * p, w = 3 * p;
        const auto x = smooth_pixels(h, w);
        const Features plain = m.forward(x.data(), 1, h, w);

        Intervention evict;
        evict.evict = Eviction::parse("sink,patch:0,1");
        const Features evicted = m.with(evict).forward(x.data(), 1, h, w);
        CHECK(relative_error(evicted.patches, plain.patches) > 1e-6);

        Intervention ttr;
        ttr.test_time_registers = 1;
        ttr.register_neurons = {{0, 3}};
        const Model with_ttr = m.with(ttr);
        CHECK(with_ttr.tokens(h, w) == m.tokens(h, w) + 1);
        const Features t = with_ttr.forward(x.data(), 1, h, w);
        CHECK(t.registers == 1);
        CHECK(t.reg_tokens.size() == static_cast<std::size_t>(m.config().dim));
        Trace trace;
        Probe probe = Probe::statistics(m.config().depth);
        with_ttr.forward(x.data(), 1, h, w, probe, trace);
        CHECK(trace.class_token == m.config().class_token);
        CHECK(trace.patch_offset() == m.config().prefix_tokens() + 1);
        const ImageStats stats = image_stats(trace, 0, ArtifactRules{});
        CHECK(std::isfinite(stats.layers.back().norm_median));

        ConfigOverrides retrofit;
        retrofit.attention = AttentionKind::Softmax1;
        const Model s1 = Model::load(fixture(path), retrofit);
        CHECK(s1.config().retrofit());
        const Features r = s1.forward(x.data(), 1, h, w);
        CHECK(relative_error(r.patches, plain.patches) > 1e-6);
        for (float v : r.cls) CHECK(std::isfinite(v));
    }
}

TEST_CASE("a sink checkpoint written from another family keeps its architecture") {
    // All-zero sink logits: the written checkpoint must run exactly the source model with a
    // sink of logit 0 (= softmax-1) — norm_pre, QuickGELU, no biases, no_embed_class, fc_norm and
    // the projection included.
    for (const char* path : {kOpenClip, kDeit3, kAvg, kTimmClip, kNoQkvBias}) {
        INFO(path);
        const Model m = Model::load(fixture(path));
        const Config& c = m.config();
        SinkCalibration cal;
        cal.layers = c.depth;
        cal.heads = c.heads;
        cal.sinks.assign(static_cast<std::size_t>(c.depth) * c.heads, 0.0f);
        cal.target_mass = cal.sinks;
        cal.source = m.path();
        TempDir dir;
        write_sink_checkpoint(m, cal, false, dir / "sink.safetensors");
        const Model s = Model::load(dir / "sink.safetensors");
        CHECK(s.config().family == c.family);
        CHECK(s.config().mlp == c.mlp);
        CHECK(s.config().proj_dim == c.proj_dim);
        CHECK(s.config().eps == c.eps);
        CHECK(s.config().input_size == c.input_size);
        ConfigOverrides sink;
        sink.attention = AttentionKind::Sink;
        const Model want = Model::load(fixture(path), sink);
        const int h = 2 * c.patch, w = 3 * c.patch;
        const auto x = smooth_pixels(h, w);
        const Features a = s.forward(x.data(), 1, h, w), b = want.forward(x.data(), 1, h, w);
        CHECK(relative_error(a.cls, b.cls) < 1e-5);
        CHECK(relative_error(a.patches, b.patches) < 1e-5);
        CHECK(a.embedding == b.embedding);
    }
}

TEST_CASE("pooled and embedding of an image do not depend on its batch or the thread count") {
    // What makes sharded extract --project byte-identical to one process (vitreg merge).
    for (const char* path : {kOpenClip, kAvg, kHfClip}) {
        INFO(path);
        const Model m = Model::load(fixture(path));
        const int p = m.config().patch, h = 2 * p, w = 3 * p;
        auto x = smooth_pixels(h, w);
        const auto one = x;
        x.insert(x.end(), one.rbegin(), one.rend());  // a second, different image
        const Features both = m.forward(x.data(), 2, h, w, ForwardOptions{2});
        const Features alone = m.forward(one.data(), 1, h, w, ForwardOptions{1});
        CHECK(both.pooled_of(0) == alone.pooled_of(0));
        CHECK(std::vector<float>(both.cls.begin(), both.cls.begin() + m.config().dim) == alone.cls);
        if (m.config().proj_dim)
            CHECK(std::vector<float>(both.embedding_of(0), both.embedding_of(0) + m.config().proj_dim) == alone.embedding);
    }
}

TEST_CASE("a config naming a model vitreg does not run is refused by that name, never read as a neighbour") {
    // Each family's neighbour: the same tensor names, a config that says something else.
    TempDir tmp;
    const auto folder_with = [&](const std::string& name, const char* source, const std::string& file,
                                 const std::function<void(json&)>& edit) { return ::folder_with(tmp, name, source, file, edit); };
    // SigLIP's names beside CLIP's tensors (a SiglipModel folder has HF CLIP's names, save the class
    // token): the config wins, and the tensors do not match it.
    const std::string siglip = folder_with("siglip", kHfClip, "config.json", [](json& j) {
        j["model_type"] = "siglip";
        j["architectures"] = {"SiglipModel"};
    });
    CHECK_THROWS_WITH(Checkpoint(siglip),
                      Catch::Contains("config.json: model_type 'siglip' does not match the tensors beside it (hf-clip names)"));
    const std::string siglip_arch = folder_with("siglip_arch", kHfClip, "config.json", [](json& j) {
        j["architectures"] = {"SiglipVisionModel"};
    });
    CHECK_THROWS_WITH(Checkpoint(siglip_arch), Catch::Contains("architectures names 'SiglipVisionModel' does not match"));
    const std::string eva_hf = folder_with("eva_hf", kHfClip, "config.json", [](json& j) { j["architectures"] = {"EvaModel"}; });
    CHECK_THROWS_WITH(Checkpoint(eva_hf), Catch::Contains("architectures names 'EvaModel' is not a model vitreg runs"));
    // DINOv3 as DINOv2.
    const std::string dinov3 = folder_with("dinov3", "models/hf_dinov2", "config.json", [](json& j) {
        j["model_type"] = "dinov3_vit";
        j["architectures"] = {"DINOv3ViTModel"};
    });
    CHECK_THROWS_WITH(Checkpoint(dinov3),
                      Catch::Contains("model_type 'dinov3_vit' does not match the tensors beside it (hf names)"));
    // DINOv2 as DINOv3: DINOv3's tensors with a DINOv2 config.
    const std::string dinov2 = folder_with("dinov2", "models/hf_dinov3", "config.json", [](json& j) {
        j["model_type"] = "dinov2";
        j["architectures"] = {"Dinov2Model"};
    });
    CHECK_THROWS_WITH(Checkpoint(dinov2),
                      Catch::Contains("model_type 'dinov2' does not match the tensors beside it (hf-dinov3 names)"));
    // A config naming the other family than its tensors.
    const std::string crossed = folder_with("crossed", "models/hf_dinov2", "config.json", [](json& j) { j["model_type"] = "clip"; });
    CHECK_THROWS_WITH(Checkpoint(crossed), Catch::Contains("model_type 'clip' does not match the tensors beside it (hf names)"));
    // EVA-02, a SigLIP tower and a distilled DeiT as timm ViTs.
    for (const std::string arch : {"eva02_small_patch14_224", "vit_base_patch16_siglip_224", "deit_small_distilled_patch16_224"}) {
        INFO(arch);
        const std::string d = folder_with(arch, kDeit3, "config.json", [&](json& j) { j["architecture"] = arch; });
        CHECK_THROWS_WITH(Checkpoint(d), Catch::Contains("timm architecture '" + arch + "'"));
    }
    // A timm ViT's name beside Eva's tensors; EVA-02's post-norm giant, whose tensors have the
    // pre-norm blocks' names.
    const std::string vit_eva =
        folder_with("vit_eva", "models/timm_eva02_small", "config.json", [](json& j) { j["architecture"] = "vit_small_patch16_224"; });
    CHECK_THROWS_WITH(Checkpoint(vit_eva), Catch::Contains("timm architecture 'vit_small_patch16_224' (timm's VisionTransformer) "
                                                           "does not match the tensors beside it (timm Eva names)"));
    const std::string enormous = folder_with("enormous", "models/timm_eva02_clip", "config.json",
                                             [](json& j) { j["architecture"] = "eva02_enormous_patch14_clip_224"; });
    CHECK_THROWS_WITH(Checkpoint(enormous), Catch::Contains("sets use_post_norm = true (timm's definition): post-norm blocks"));
    // An open_clip config whose tower is timm's.
    const std::string timm_tower = folder_with("timm_tower", kOpenClip, "open_clip_config.json", [](json& j) {
        j["model_cfg"]["vision_cfg"]["timm_model_name"] = "vit_so400m_patch14_siglip_384";
    });
    CHECK_THROWS_WITH(Checkpoint(timm_tower), Catch::Contains("the vision tower is timm's 'vit_so400m_patch14_siglip_384'"));
    // What vitreg runs still loads.
    for (const char* ok : {kHfClip, "models/hf_dinov2", "models/hf_reg2", kDeit3, kAvg, kOpenClip, "models/hf_siglip",
                           "models/hf_siglip_full", "models/hf_dinov3", "models/hf_dinov3_gated", "models/timm_eva02_small",
                           "models/timm_eva02_base", "models/timm_eva02_clip", "models/timm_siglip"})
        CHECK_NOTHROW(Checkpoint(fixture(ok)));
}

TEST_CASE("timm's definitions: what an architecture sets applies under model_args, unknown names are refused") {
    TempDir dir;
    const char* kSiglip = "models/timm_siglip";  // SigLIP's shape; its config states act_layer='gelu_tanh'
    const auto siglip_as = [&](const std::string& arch, const json& act) {
        return folder_with(dir, arch + act.dump(), kSiglip, "config.json", [&](json& j) {
            j["architecture"] = arch;
            j["model_args"].erase("act_layer");
            if (!act.is_null()) j["model_args"]["act_layer"] = act;
        });
    };
    // timm's SigLIP 2 towers set act_layer='gelu_tanh' in their definition, which hub configs do
    // not repeat; its SigLIP 1 towers build nn.GELU.
    const std::string siglip2 = siglip_as("vit_base_patch32_siglip_256", nullptr);
    const std::string siglip1 = siglip_as("vit_base_patch16_siglip_256", nullptr);
    CHECK(Checkpoint(siglip2).config().mlp == MlpKind::GeluTanh);
    CHECK(Checkpoint(siglip1).config().mlp == MlpKind::Gelu);
    // model_args over the definition, as timm's dict(model_args, **kwargs).
    const std::string stated_gelu = siglip_as("vit_base_patch32_siglip_256", "gelu");
    CHECK(Checkpoint(stated_gelu).config().mlp == MlpKind::Gelu);
    // The forward follows: the fixture's own features (gelu_tanh stated; the reference's in
    // test_parity), not exact GELU's.
    const Model tanh = Model::load(siglip2), exact = Model::load(siglip1), fixture_model = Model::load(fixture(kSiglip));
    const int p = tanh.config().patch;
    const auto x = smooth_pixels(2 * p, 2 * p);
    const auto patches = [&](const Model& m) { return m.forward(x.data(), 1, 2 * p, 2 * p).patches; };
    CHECK(patches(tanh) == patches(fixture_model));
    CHECK(relative_error(patches(tanh), patches(exact)) > 1e-5);

    // A name timm does not define: refused by the file, the key and the value.
    const std::string xyz =
        folder_with(dir, "xyz", kDeit3, "config.json", [](json& j) { j["architecture"] = "vit_base_patch16_xyz_224"; });
    CHECK_THROWS_WITH(Checkpoint(xyz), Catch::StartsWith(xyz + "/config.json: architecture 'vit_base_patch16_xyz_224' is not a ViT "
                                                               "that timm's vision_transformer.py, deit.py or eva.py defines"));
    // An argument vitreg does not run, set by the definition or by model_args: refused by key and value.
    const std::string pe = folder_with(dir, "pe", "models/timm_eva02_small", "config.json",
                                       [](json& j) { j["architecture"] = "vit_pe_core_base_patch16_224"; });
    CHECK_THROWS_WITH(Checkpoint(pe), Catch::StartsWith(pe + "/config.json: timm architecture 'vit_pe_core_base_patch16_224' sets "
                                                             "attn_type = \"rope\" (timm's definition)"));
    const std::string aimv2 =
        folder_with(dir, "aimv2", kDeit3, "config.json", [](json& j) { j["architecture"] = "aimv2_large_patch14_224"; });
    CHECK_THROWS_WITH(Checkpoint(aimv2), Catch::Contains("sets act_layer = \"silu\" (timm's definition)"));
    const std::string qk_norm = folder_with(dir, "qk_norm", kDeit3, "config.json", [](json& j) { j["model_args"]["qk_norm"] = true; });
    CHECK_THROWS_WITH(Checkpoint(qk_norm), Catch::Contains("timm architecture 'deit3_small_patch16_224' sets qk_norm = true (model_args)"));
    // A key timm's constructor does not take (timm: TypeError), named with its file and value.
    const std::string typo = folder_with(dir, "typo", kDeit3, "config.json", [](json& j) { j["model_args"]["num_head"] = 3; });
    CHECK_THROWS_WITH(Checkpoint(typo), Catch::StartsWith(typo + "/config.json: model_args.num_head = 3: 'num_head' is not a key "
                                                                 "timm's VisionTransformer.__init__ has"));
    // What the definition builds must be what the tensors hold; model_args may say otherwise.
    const std::string reg4 =
        folder_with(dir, "reg4", kDeit3, "config.json", [](json& j) { j["architecture"] = "vit_small_patch14_reg4_dinov2"; });
    CHECK_THROWS_WITH(Checkpoint(reg4), Catch::Contains("config.json: timm architecture 'vit_small_patch14_reg4_dinov2' reg_tokens "
                                                        "(timm's definition) is stated as 4 but the tensors say 0"));
    const std::string reg0 = folder_with(dir, "reg0", kDeit3, "config.json", [](json& j) {
        j["architecture"] = "vit_small_patch14_reg4_dinov2";
        j["model_args"]["reg_tokens"] = 0;
    });
    CHECK_NOTHROW(Checkpoint(reg0));
}

TEST_CASE("timm's table: every architecture runs or is refused by an argument's name") {
    int refused = 0;
    std::vector<std::string> names = source::timm_architecture_names();
    CHECK(std::is_sorted(names.begin(), names.end()));
    for (const auto& name : names) {
        try {
            source::timm_architecture(json{{"architecture", name}}, "config.json");
        } catch (const ConfigError& e) {
            ++refused;
            INFO(e.what());
            CHECK(std::string(e.what()).find("which vitreg does not run") != std::string::npos);
        }
    }
    CHECK(refused > 0);
    CHECK(refused < static_cast<int>(names.size()));
    for (const char* runs : {"vit_base_patch16_224", "vit_so400m_patch16_siglip_256", "eva02_large_patch14_448",
                             "vit_base_patch16_clip_quickgelu_224", "deit3_base_patch16_224", "vit_large_patch14_reg4_dinov2"})
        CHECK_NOTHROW(source::timm_architecture(json{{"architecture", runs}}, "config.json"));
}

TEST_CASE("SigLIP's probe query: the attention-pool head's rows, recomputed here from its weights") {
    const std::string folder = fixture("models/hf_siglip");
    const Model m = Model::load(folder);
    const Checkpoint ck(folder);
    const Config& c = m.config();
    const int D = c.dim, H = c.heads, hd = D / H, h = 3 * c.patch, w = 5 * c.patch;
    std::vector<float> x(static_cast<std::size_t>(3) * h * w);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.21f * static_cast<float>(i)) * 1.2f;
    Probe probe;
    probe.pool_attention = true;
    Trace t;
    const Features f = m.forward(x.data(), 1, h, w, probe, t);
    REQUIRE(t.pool_attention.size() == static_cast<std::size_t>(H) * t.tokens);
    // softmax over the final-normed tokens of (W_q latent + b_q)_h · (W_k x_t + b_k)_h / sqrt(hd)
    const auto latent = ck.load("attn_pool.latent", {1, 1, D});
    const auto wqkv = ck.load("attn_pool.qkv.weight", {3 * D, D});
    const auto bqkv = ck.load("attn_pool.qkv.bias", {3 * D});
    std::vector<double> q(D);
    for (int i = 0; i < D; ++i) {
        q[i] = bqkv[i];
        for (int j = 0; j < D; ++j) q[i] += static_cast<double>(wqkv[static_cast<std::size_t>(i) * D + j]) * latent[j];
    }
    const int n = t.tokens;  // no class token, no registers: every token is a patch
    REQUIRE(f.patches.size() == static_cast<std::size_t>(n) * D);
    for (int head = 0; head < H; ++head) {
        std::vector<double> s(n);
        double top = -1e300, sum = 0;
        for (int tok = 0; tok < n; ++tok) {
            double z = 0;
            for (int i = head * hd; i < (head + 1) * hd; ++i) {
                double k = bqkv[D + i];
                for (int j = 0; j < D; ++j)
                    k += static_cast<double>(wqkv[static_cast<std::size_t>(D + i) * D + j]) * f.patches[static_cast<std::size_t>(tok) * D + j];
                z += q[i] * k;
            }
            s[tok] = z / std::sqrt(static_cast<double>(hd));
            top = std::max(top, s[tok]);
        }
        for (auto& v : s) sum += (v = std::exp(v - top));
        for (int tok = 0; tok < n; ++tok) {
            INFO("head " << head << " token " << tok);
            CHECK(t.pool_attention_of(0, head)[tok] == Approx(s[tok] / sum).margin(1e-6));
        }
    }
    // A model without an attention-pool head has no probe query.
    const Model dinov3 = Model::load(fixture("models/hf_dinov3"));
    Trace none;
    CHECK_THROWS_WITH(dinov3.forward(x.data(), 1, h, w, probe, none),
                      Catch::Contains("attention-pool head") && Catch::Contains("pools with token"));
}
