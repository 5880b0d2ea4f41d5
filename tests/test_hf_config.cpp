// HF config.json: every key of transformers' config classes is read, known to be inert, or run
// only at some values (src/core/checkpoint/hf_config_keys.cpp); any other key, a value not run, or
// a switch the tensors contradict is refused naming the file, the key and the value. The key
// lists are held to those recorded at one transformers commit (tests/upstream/hf_config_keys.py).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>
#include <tuple>

#include "core/checkpoint/hf_config_keys.hpp"
#include "check_config.hpp"
#include "test_support.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"

using namespace vitreg;
using namespace vitreg::test;
using json = nlohmann::json;

namespace {

// Each HF fixture folder (under tests/fixtures), and the transformers classes of its vision config
// and (two towers) its top level.
struct Folder {
    const char* name;
    const char* vision_class;
    const char* top_class;  // or null: a flat config
};
const Folder kFolders[] = {
    {"models/hf_dinov2", "Dinov2Config", nullptr},        {"models/hf_swiglu", "Dinov2Config", nullptr},
    {"models/hf_reg2", "Dinov2WithRegistersConfig", nullptr}, {"models/hf_clip", "CLIPVisionConfig", "CLIPConfig"},
    {"models/hf_siglip", "SiglipVisionConfig", nullptr},   {"models/hf_siglip_full", "SiglipVisionConfig", "SiglipConfig"},
    {"models/hf_dinov3", "DINOv3ViTConfig", nullptr},      {"models/hf_dinov3_gated", "DINOv3ViTConfig", nullptr},
    {"upstream/transformers/vit_model", "ViTConfig", nullptr},
    {"upstream/transformers/vit_classifier", "ViTConfig", nullptr},
};

// The vision config of a config.json: a two-tower file's vision_config, else the whole.
json& vision(json& j) { return j.contains("vision_config") ? j["vision_config"] : j; }

// A copy of a fixture folder with its config.json edited.
class Edits {
public:
    std::string with(const std::string& folder, const std::function<void(json&)>& edit) {
        const std::string d = dir_ / ("c" + std::to_string(++count_));
        REQUIRE(std::system(("cp -r '" + fixture(folder) + "' '" + d + "'").c_str()) == 0);
        json j = json::parse(read_bytes(d + "/config.json"));
        edit(j);
        write_bytes(d + "/config.json", j.dump());
        return d;
    }
    // The vision config's `key` set to `value`.
    std::string set(const std::string& folder, const std::string& key, const json& value) {
        return with(folder, [&](json& j) { vision(j)[key] = value; });
    }

private:
    TempDir dir_;
    int count_ = 0;
};

std::string where(const Folder& f) { return std::string("config.json: ") + (f.top_class ? "vision_config." : ""); }

}  // namespace

TEST_CASE("transformers' config keys at the fixture's commit are each known: read, inert or run only at some values") {
    const auto index = fixture_json("upstream/transformers_keys.json");
    const auto& classes = index["classes"];
    for (const auto* table : source::hf_key_tables()) {
        INFO(table->what << " (transformers " << index["commit"].get<std::string>() << ")");
        std::set<std::string> ours, theirs;
        for (const auto& k : table->keys) ours.insert(k.key);
        CHECK(ours.size() == table->keys.size());  // no key listed twice
        for (const auto& cls : table->upstream) {
            REQUIRE(classes.contains(cls));
            for (const auto& k : classes[cls]["keys"]) theirs.insert(k.get<std::string>());
            for (const auto& k : classes[cls].value("modeling", json::array())) theirs.insert(k.get<std::string>());
        }
        for (const auto& k : theirs) {
            INFO(k << " is new upstream: read it, or list it inert or refused");
            CHECK(ours.count(k) == 1);
        }
        for (const auto& k : ours) {
            INFO(k << " is listed but no transformers class of the fixture has it");
            CHECK(theirs.count(k) == 1);
        }
    }
}

TEST_CASE("HF config.json: a key transformers' class does not have is refused by file, key and value") {
    Edits e;
    const std::pair<const char*, const char*> vision_class[] = {
        {"models/hf_dinov2", "Dinov2Config or Dinov2WithRegistersConfig"}, {"models/hf_reg2", "Dinov2Config or Dinov2WithRegistersConfig"},
        {"models/hf_swiglu", "Dinov2Config or Dinov2WithRegistersConfig"}, {"models/hf_clip", "CLIPVisionConfig"},
        {"models/hf_siglip", "SiglipVisionConfig"}, {"models/hf_siglip_full", "SiglipVisionConfig"},
        {"models/hf_dinov3", "DINOv3ViTConfig"}, {"models/hf_dinov3_gated", "DINOv3ViTConfig"},
        {"upstream/transformers/vit_model", "ViTConfig"}, {"upstream/transformers/vit_classifier", "ViTConfig"},
    };
    for (const auto& f : kFolders) {
        INFO(f.name);
        const std::string what = std::find_if(std::begin(vision_class), std::end(vision_class),
                                              [&](const auto& p) { return std::string(p.first) == f.name; })->second;
        CHECK_THROWS_WITH(Checkpoint(e.set(f.name, "use_rope", true)),
                          Catch::Contains(where(f) + "use_rope = true: 'use_rope' is not a key transformers' " + what +
                                          " has; vitreg refuses a setting it cannot read"));
        if (f.top_class)
            CHECK_THROWS_WITH(Checkpoint(e.with(f.name, [](json& j) { j["logit_bias_init"] = -10; })),
                              Catch::Contains(std::string("config.json: logit_bias_init = -10: 'logit_bias_init' is not a key "
                                                          "transformers' ") +
                                              f.top_class + " has"));
    }
}

TEST_CASE("HF config.json: a setting transformers runs and vitreg does not is refused with its value") {
    Edits e;
    for (const auto& f : kFolders) {
        INFO(f.name);
        const std::pair<const char*, json> refused[] = {
            {"num_channels", 4},
            {"pruned_heads", {{"0", {1}}}},
            {"quantization_config", {{"quant_method", "bitsandbytes"}}},
            {"per_layer_config", {{"0", {{"hidden_act", "relu"}}}}},
            {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}},
        };
        for (const auto& [key, value] : refused) {
            INFO(key);
            CHECK_THROWS_WITH(Checkpoint(e.set(f.name, key, value)),
                              Catch::Contains(where(f) + key + " = " + value.dump() + " is not a setting vitreg runs"));
        }
    }
    // Dinov2WithRegistersConfig's first version: another interpolation than the one vitreg runs.
    CHECK_THROWS_WITH(Checkpoint(e.set("models/hf_reg2", "interpolate_antialias", false)),
                      Catch::Contains("config.json: interpolate_antialias = false is not a setting vitreg runs (it runs true)"));
    CHECK_THROWS_WITH(Checkpoint(e.set("models/hf_reg2", "interpolate_offset", 0.1)),
                      Catch::Contains("config.json: interpolate_offset = 0.1 is not a setting vitreg runs (it runs 0)"));
    CHECK_THROWS_WITH(Checkpoint(e.set("models/hf_clip", "_pre_quantization_dtype", "float16")),
                      Catch::Contains("vision_config._pre_quantization_dtype = \"float16\" is not a setting vitreg runs"));
}

TEST_CASE("HF config.json: a switch or a width the tensors contradict is refused with both values") {
    Edits e;
    const auto refused = [&](const char* folder, const char* key, const json& value, const std::string& message) {
        INFO(folder << " " << key);
        CHECK_THROWS_WITH(Checkpoint(e.set(folder, key, value)), Catch::Contains("config.json: " + message));
    };
    // The switch or width stated, and what the tensors hold.
    const std::tuple<const char*, const char*, json, std::string> contradictions[] = {
        {"models/hf_dinov2", "qkv_bias", false, "qkv_bias is stated as false but the tensors say true"},
        {"models/hf_dinov2", "use_swiglu_ffn", true, "use_swiglu_ffn is stated as true but the tensors say false"},
        {"models/hf_swiglu", "use_swiglu_ffn", false, "use_swiglu_ffn is stated as false but the tensors say true"},
        {"models/hf_dinov2", "mlp_ratio", 4, "the MLP width of mlp_ratio 4 is stated as 256 but the tensors say 128"},
        {"models/hf_swiglu", "mlp_ratio", 4, "the MLP width of mlp_ratio 4 is stated as 176 but the tensors say 64"},
        {"models/hf_dinov2", "image_size", 32, "image_size is stated as 32 but the tensors say 16"},
        {"models/hf_reg2", "num_register_tokens", 4, "num_register_tokens is stated as 4 but the tensors say 2"},
        {"models/hf_dinov3", "query_bias", false, "query_bias is stated as false but the tensors say true"},
        {"models/hf_dinov3", "key_bias", true, "key_bias is stated as true but the tensors say false"},
        {"models/hf_dinov3", "value_bias", false, "value_bias is stated as false but the tensors say true"},
        {"models/hf_dinov3", "proj_bias", false, "proj_bias is stated as false but the tensors say true"},
        {"models/hf_dinov3", "mlp_bias", false, "mlp_bias is stated as false but the tensors say true"},
        {"models/hf_dinov3_gated", "mlp_bias", false, "mlp_bias is stated as false but the tensors say true"},
        {"models/hf_dinov3_gated", "use_gated_mlp", false, "use_gated_mlp is stated as false but the tensors say true"},
        {"models/hf_dinov3", "intermediate_size", 96, "intermediate_size is stated as 96 but the tensors say 192"},
        {"models/hf_clip", "intermediate_size", 192, "intermediate_size is stated as 192 but the tensors say 96"},
        {"models/hf_clip", "image_size", 64, "image_size is stated as 64 but the tensors say 32"},
        {"models/hf_siglip", "vision_use_head", false, "vision_use_head is stated as false but the tensors say true"},
        {"models/hf_siglip_full", "image_size", 48, "image_size is stated as 48 but the tensors say 32"},
        {"upstream/transformers/vit_model", "qkv_bias", false, "qkv_bias is stated as false but the tensors say true"},
        {"upstream/transformers/vit_classifier", "qkv_bias", true, "qkv_bias is stated as true but the tensors say false"},
        {"upstream/transformers/vit_model", "head_dim", 4, "head_dim is stated as 4 but the tensors say 8"},
        {"upstream/transformers/vit_model", "intermediate_size", 64, "intermediate_size is stated as 64 but the tensors say 24"},
    };
    for (const auto& [folder, key, value, message] : contradictions) refused(folder, key, value, message);
    refused("models/hf_dinov2", "qkv_bias", "yes", "'qkv_bias' is not true or false");
    // CLIPModel projects to its top level's projection_dim; its vision_config's is unused there.
    CHECK_THROWS_WITH(Checkpoint(e.with("models/hf_clip", [](json& j) { j["projection_dim"] = 9; })),
                      Catch::Contains("config.json: projection_dim is stated as 9 but the tensors say"));
    CHECK(Checkpoint(e.set("models/hf_clip", "projection_dim", 9)).config().proj_dim > 0);
    // A v4 CLIPConfig's vision_config_dict wins over vision_config in transformers: read, and held to it.
    CHECK_THROWS_WITH(Checkpoint(e.with("models/hf_clip", [](json& j) { j["vision_config_dict"] = {{"patch_size", 16}}; })),
                      Catch::Contains("config.json: vision_config_dict.patch_size = 16 but vision_config.patch_size = 8"));
    CHECK_THROWS_WITH(Checkpoint(e.with("models/hf_clip", [](json& j) { j["vision_config_dict"] = {{"use_rope", true}}; })),
                      Catch::Contains("config.json: vision_config_dict.use_rope = true: 'use_rope' is not a key transformers' "
                                      "CLIPVisionConfig has"));
    CHECK_THROWS_WITH(Checkpoint(e.with("models/hf_clip", [](json& j) {
                          j["vision_config"].erase("hidden_act");
                          j["vision_config_dict"] = {{"hidden_act", "relu"}};
                      })),
                      Catch::Contains("config.json: hidden_act = \"relu\" is not a setting vitreg runs"));
}

TEST_CASE("HF config.json: inert keys load and change nothing") {
    Edits e;
    for (const auto& f : kFolders) {
        INFO(f.name);
        const Config before = Checkpoint(fixture(f.name)).config();
        const std::string d = e.with(f.name, [&](json& j) {
            json& v = vision(j);
            for (const char* k : {"attention_dropout", "drop_path_rate", "initializer_range"})
                if (v.contains(k)) v[k] = 0.25;
            v["output_hidden_states"] = true;
            v["torch_dtype"] = "float16";
            v["_attn_implementation_autoset"] = true;
            v["id2label"] = {{"0", "cat"}, {"1", "dog"}};
            v["temperature"] = 0.7;
            v["pruned_heads"] = json::object();
            v["num_channels"] = 3;
            if (std::string(f.vision_class).rfind("Dinov2", 0) == 0 || std::string(f.vision_class) == "DINOv3ViTConfig") {
                v["layerscale_value"] = 1e-5;
                v["out_features"] = {"stage1"};
                v["apply_layernorm"] = false;
            }
            if (std::string(f.vision_class) == "ViTConfig") {  // the pooler vitreg does not run, the MIM decoder
                v["pooler_act"] = "relu";
                v["pooler_output_size"] = 7;
                v["encoder_stride"] = 8;
            }
            if (std::string(f.vision_class) == "DINOv3ViTConfig") {
                v["pos_embed_jitter"] = 1.1;  // training-time augmentations
                v["pos_embed_shift"] = 0.1;
                v["return_class_token"] = true;
            }
            if (f.top_class) {
                j["text_config"]["vocab_size"] = 99;
                j["initializer_factor"] = 2.0;
            }
        });
        check_same(Checkpoint(d).config(), before);
    }
}

TEST_CASE("HF config.json: every key transformers writes, at its class's default, loads") {
    const auto index = fixture_json("upstream/transformers_keys.json");
    const auto& classes = index["classes"];
    Edits e;
    // The class's keys and PreTrainedConfig's, with the generation defaults (what v4 wrote).
    const auto add_defaults = [&](json& j, const std::string& cls, bool backbone) {
        for (const char* c : {"PreTrainedConfig", "generation", "BackboneConfigMixin"}) {
            if (std::string(c) == "BackboneConfigMixin" && !backbone) continue;
            for (const auto& [k, v] : classes[c]["defaults"].items())
                if (!j.contains(k)) j[k] = v;
        }
        for (const auto& [k, v] : classes[cls]["defaults"].items())
            if (!j.contains(k)) j[k] = v;
    };
    for (const auto& f : kFolders) {
        INFO(f.name);
        const Config before = Checkpoint(fixture(f.name)).config();
        const bool backbone = classes[f.vision_class]["keys"].dump().find("stage_names") != std::string::npos;
        const std::string d = e.with(f.name, [&](json& j) {
            add_defaults(vision(j), f.vision_class, backbone);
            if (f.top_class) add_defaults(j, f.top_class, false);
        });
        check_same(Checkpoint(d).config(), before);
    }
}
