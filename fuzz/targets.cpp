#include "targets.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "vitreg/checkpoint_summary.hpp"
#include "vitreg/error.hpp"
#include "vitreg/image.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "core/safetensors.hpp"
#include "io/torch_file.hpp"
#include "io/webdataset.hpp"
#include "fuzz_files.hpp"

namespace vitreg::fuzz {

namespace {

// A loaded model runs once on the smallest image its patch allows, when that stays small.
void run_once(const Model& m) {
    const Config& c = m.config();
    if (static_cast<long>(c.patch) * c.patch * c.dim > (1 << 20) || c.depth > 8) return;
    const std::vector<float> pixels(static_cast<std::size_t>(3) * c.patch * c.patch, 0.25f);
    m.forward(pixels.data(), 1, c.patch, c.patch, ForwardOptions{1});
}

// What `vitreg info` reads first (the header and configs alone: a truncated file passes), then
// the whole load and a run: at the precision a quantized file states, so that its int8 (int4) weights
// are read (any other it refuses before reading a weight).
void describe_and_run(const std::string& path) {
    PrecisionOptions precision;
    try {
        const CheckpointSummary s = summarize_checkpoint(path);
        (void)weight_memory(s.tensors);
        if (s.quantization.quantized()) precision.precision = s.quantization.precision;
        if (s.quantization.precision == Precision::Int8) precision.int8_weight_bits = s.quantization.bits;
    } catch (const Error&) {
    }
    run_once(Model::load(path, {}, precision));
}

}  // namespace

void torch_file(const std::uint8_t* data, std::size_t size) {
    const std::string path = scratch() + "/model.pth";
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        put(path, data, size);
    } else {
        std::vector<std::pair<std::string, std::string>> entries{
            {"archive/data.pkl", std::string(reinterpret_cast<const char*>(data), size)}};
        for (int k = 0; k < 24; ++k) {
            std::string storage(2048, '\0');
            for (std::size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<char>((i * 37 + k * 11) & 0x3f);
            entries.emplace_back("archive/data/" + std::to_string(k), storage);
        }
        entries.emplace_back("archive/version", "3\n");
        const std::string archive = zip_archive(entries);
        put(path, reinterpret_cast<const std::uint8_t*>(archive.data()), archive.size());
    }
    try {
        {
            TorchFile f(path);
            for (const auto& name : f.names()) {
                const auto& t = f.get(name);
                if (t.nbytes <= (1u << 20)) (void)t.to_float();
            }
        }
        describe_and_run(path);
    } catch (const Error&) {
    }
}

void safetensors_file(const std::uint8_t* data, std::size_t size) {
    static const std::string dir = [] {
        const auto cfg = seed("config/hf_reg2.json");  // so HF-layout inputs get past the config
        put(scratch() + "/config.json", cfg.data(), cfg.size());
        return scratch();
    }();
    const std::string path = dir + "/model.safetensors";
    put(path, data, size);
    try {
        {
            SafetensorsFile f(path);
            for (const auto& name : f.names()) {
                const auto& t = f.get(name);
                if (t.nbytes <= (1u << 20)) (void)t.to_float();
            }
        }
        describe_and_run(path);
    } catch (const Error&) {
    }
}

void config_json(const std::uint8_t* data, std::size_t size) {
    static const std::string dir = [] {
        const std::string d = scratch() + "/hf";
        ::mkdir(d.c_str(), 0700);
        const auto model = seed("safetensors/hf_reg2");
        put(d + "/model.safetensors", model.data(), model.size());
        return d;
    }();
    put(dir + "/config.json", data, size);
    try {
        describe_and_run(dir);
    } catch (const Error&) {
    }
}

void image_file(const std::uint8_t* data, std::size_t size) {
    ImageLimits limits;
    limits.max_pixels = 1 << 22;  // keeps each input fast; the bound itself is tested elsewhere
    try {
        const Image image = decode_image_memory(data, size, "fuzz-input", limits);
        for (const char* spec : {"eval", "none", "short:28"}) {
            try {
                (void)preprocess(image, ResizeSpec::parse(spec), 14, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f},
                                 "fuzz-input");
            } catch (const ImageError&) {
            }
        }
    } catch (const ImageError&) {
    }
    // The other decode paths: EXIF orientation, PIL's own bands and open_clip's resize of them, a
    // JPEG at a reduced DCT scale.
    ResizeSpec clip = ResizeSpec::parse("short:28");
    clip.pipeline = PixelPipeline::OpenClip;
    clip.exif_transpose = true;
    clip.draft = true;
    try {
        const Image image = decode_image_memory(data, size, "fuzz-input", decode_options(clip, 14, limits, "fuzz-input"));
        (void)preprocess(image, clip, 14, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}, "fuzz-input");
    } catch (const ImageError&) {
    }
}

void input_list(const std::uint8_t* data, std::size_t size) {
    try {
        const auto paths = parse_input_list(std::string(reinterpret_cast<const char*>(data), size), "fuzz-list");
        for (const auto& p : paths)
            if (p.empty() || p.find('\n') != std::string::npos) std::abort();  // a line is never empty or split
    } catch (const UsageError&) {
    }
}

void webdataset_shard(const std::uint8_t* data, std::size_t size) {
    const webdataset::Limits limits{1 << 20, 1 << 16};
    std::vector<std::string> with, without;
    webdataset::Sample s;
    for (webdataset::ShardReader r(data, size, "fuzz.tar", limits); r.next(s, true);) {
        if (s.image.size() > limits.max_image_bytes || s.caption.size() > limits.max_text_bytes) std::abort();
        with.push_back(s.key);
    }
    for (webdataset::ShardReader r(data, size, "fuzz.tar", limits); r.next(s, false);) without.push_back(s.key);
    // Skipping an image may read past a break that reading it meets: never the other way round.
    if (with.size() > without.size() || !std::equal(with.begin(), with.end(), without.begin())) std::abort();
}

void shard_names(const std::uint8_t* data, std::size_t size) {
    try {
        for (const auto& line : parse_input_list(std::string(reinterpret_cast<const char*>(data), size), "fuzz-shards"))
            for (const auto& name : expand_braces(line))
                if (name.find_first_of("{}") != std::string::npos) std::abort();  // every brace expanded
    } catch (const UsageError&) {
    }
}

namespace {

using Target = void (*)(const std::uint8_t*, std::size_t);

// fuzz/targets.txt's order; the replay test checks the two agree.
const std::vector<std::pair<std::string, Target>>& targets() {
    static const std::vector<std::pair<std::string, Target>> table{
        {"safetensors", safetensors_file}, {"torch", torch_file},
        {"config", config_json},           {"image", image_file},
        {"list", input_list},              {"webdataset", webdataset_shard},
        {"shardnames", shard_names},       {"homography", homography_file},
        {"disparity", disparity_file},     {"segmentation", segmentation_folder},
        {"classes", class_folders},        {"calibration", calibration_file},
        {"defects", defect_directions_file}, {"neurons", neurons_file},
        {"modelname", model_name},         {"index", index_files}};
    return table;
}

}  // namespace

const std::vector<std::string>& target_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto& t : targets()) out.push_back(t.first);
        return out;
    }();
    return names;
}

bool run_target(const std::string& name, const std::uint8_t* data, std::size_t size) {
    for (const auto& t : targets())
        if (t.first == name) {
            t.second(data, size);
            return true;
        }
    return false;
}

}  // namespace vitreg::fuzz
