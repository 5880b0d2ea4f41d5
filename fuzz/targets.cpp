#include "targets.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "vitreg/error.hpp"
#include "vitreg/image.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "core/safetensors.hpp"
#include "io/torch_file.hpp"
#include "../src/io/zip_reader.hpp"  // crc32, for the archives wrapped around bare pickles

namespace vitreg::fuzz {

namespace {

// A private scratch folder, made once per process (RAM-backed when /dev/shm exists).
const std::string& scratch() {
    static const std::string dir = [] {
        std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        std::string templ = base + "/vitreg-fuzz-XXXXXX";
        if (!::mkdtemp(templ.data())) throw std::runtime_error("cannot make a scratch folder in " + base);
        return templ;
    }();
    return dir;
}

void put(const std::string& path, const std::uint8_t* data, std::size_t size) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<std::uint8_t> seed(const std::string& relative) {
    std::ifstream in(std::string(VITREG_FUZZ_SEEDS_DIR) + "/" + relative, std::ios::binary);
    if (!in) throw std::runtime_error("missing seed " + relative);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A loaded model runs once on the smallest image its patch allows, when that stays small.
void run_once(const Model& m) {
    const Config& c = m.config();
    if (static_cast<long>(c.patch) * c.patch * c.dim > (1 << 20) || c.depth > 8) return;
    const std::vector<float> pixels(static_cast<std::size_t>(3) * c.patch * c.patch, 0.25f);
    m.forward(pixels.data(), 1, c.patch, c.patch, ForwardOptions{1});
}

// A stored zip of `entries` (name, bytes), as torch.save lays one out (without its alignment padding).
std::string zip_archive(const std::vector<std::pair<std::string, std::string>>& entries) {
    std::string out, central;
    const auto le = [](std::string& s, std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
    };
    for (const auto& [name, data] : entries) {
        const auto crc = vitreg::crc32(reinterpret_cast<const unsigned char*>(data.data()), data.size());
        const std::size_t offset = out.size();
        le(out, 0x04034b50, 4), le(out, 20, 2), le(out, 0, 2), le(out, 0, 2), le(out, 0, 4);
        le(out, crc, 4), le(out, data.size(), 4), le(out, data.size(), 4), le(out, name.size(), 2), le(out, 0, 2);
        out += name + data;
        le(central, 0x02014b50, 4), le(central, 20, 2), le(central, 20, 2), le(central, 0, 2), le(central, 0, 2);
        le(central, 0, 4), le(central, crc, 4), le(central, data.size(), 4), le(central, data.size(), 4);
        le(central, name.size(), 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2), le(central, 0, 2);
        le(central, 0, 4), le(central, offset, 4);
        central += name;
    }
    const std::size_t cd_offset = out.size();
    out += central;
    le(out, 0x06054b50, 4), le(out, 0, 2), le(out, 0, 2), le(out, entries.size(), 2), le(out, entries.size(), 2);
    le(out, central.size(), 4), le(out, cd_offset, 4), le(out, 0, 2);
    return out;
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
        run_once(Model::load(path));
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
        run_once(Model::load(path));
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
        run_once(Model::load(dir));
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

bool run_target(const std::string& name, const std::uint8_t* data, std::size_t size) {
    if (name == "safetensors") safetensors_file(data, size);
    else if (name == "torch") torch_file(data, size);
    else if (name == "config") config_json(data, size);
    else if (name == "image") image_file(data, size);
    else if (name == "list") input_list(data, size);
    else return false;
    return true;
}

}  // namespace vitreg::fuzz
