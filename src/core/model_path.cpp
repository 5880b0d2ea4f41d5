// Where a model named on the command line lives: a path, a shipped name, a hub cache entry.
#include <dirent.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/affix.hpp"
#include "core/file_kind.hpp"
#include "core/hub_cache.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// The shipped checkpoints' folders, in search order.
std::vector<std::string> weight_dirs() {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("VITREG_WEIGHTS")) dirs.emplace_back(env);
#ifdef VITREG_SOURCE_WEIGHTS_DIR
    dirs.emplace_back(VITREG_SOURCE_WEIGHTS_DIR);
#endif
#ifdef VITREG_INSTALL_WEIGHTS_DIR
    dirs.emplace_back(VITREG_INSTALL_WEIGHTS_DIR);
#endif
    return dirs;
}

// The prefix `spec` carries, or "": hf: (vitreg's) and timm's hf-hub: (hf_hub: its older
// spelling) before a hub id, timm's timm: before a timm name.
std::string timm_prefix(const std::string& spec) {
    for (const char* p : {"hf:", "hf-hub:", "hf_hub:", "timm:"})
        if (starts_with(spec, p)) return p;
    return "";
}

std::string resolve_hub_id(const std::string& spec, const std::string& id) {
    if (!looks_like_hub_id(id)) throw CheckpointError(spec + ": not a Hugging Face hub id (hf:ORG/NAME[@REVISION])");
    std::string looked;
    if (auto snapshot = hf_cache_snapshot(id, &looked)) return *snapshot;
    throw CheckpointError(spec + ": " + looked + "; vitreg reads the local cache and downloads nothing: fetch it first, "
                          "e.g. huggingface-cli download " + id.substr(0, id.find('@')));
}

std::string resolve_timm_name(const std::string& spec, const std::string& name) {
    if (!looks_like_timm_name(name))
        throw CheckpointError(spec + ": not a timm model name (timm:NAME[.TAG], e.g. timm:vit_base_patch16_224.augreg_in21k)");
    std::string looked;
    if (auto snapshot = timm_cache_snapshot(name, &looked)) return *snapshot;
    throw CheckpointError(spec + ": " + looked + "; vitreg reads the local cache and downloads nothing: fetch it first, "
                          "e.g. python3 -c \"import timm; timm.create_model('" + name + "', pretrained=True)\"");
}

}  // namespace

std::string resolve_model_path(const std::string& spec) {
    if (is_file(spec) || is_dir(spec)) return spec;
    const std::string prefix = timm_prefix(spec), rest = spec.substr(prefix.size());
    if (prefix == "timm:") return resolve_timm_name(spec, rest);
    if (!prefix.empty() || looks_like_hub_id(spec)) return resolve_hub_id(spec, rest);
    std::string looked;
    if (spec.find('/') == std::string::npos) {
        for (const auto& d : weight_dirs()) {
            const std::string base = d + "/" + spec;
            if (is_file(base + ".safetensors")) return base + ".safetensors";
            if (is_file(base + "/model.safetensors") || is_file(base)) return base;
        }
        // Torch hub names, after the shipped ones.
        if (auto file = torch_hub_checkpoint(spec, &looked)) return *file;
        if (const std::string repo = torch_hub_repository(spec); !repo.empty())
            throw CheckpointError(spec + ": " + looked + "; vitreg reads the local cache and downloads nothing: "
                                  "fetch it first, e.g. python3 -c \"import torch; torch.hub.load('" + repo + "', '" +
                                  spec + "')\"");
        // timm names as timm.create_model finds them, last: timm/NAME[.TAG] in the HF cache.
        std::string timm_looked;
        if (looks_like_timm_name(spec)) {
            if (auto snapshot = timm_cache_snapshot(spec, &timm_looked)) return *snapshot;
            looked += "; as timm/" + spec + ", " + timm_looked;
        }
    }
    std::string known;
    for (const auto& n : shipped_models()) known += (known.empty() ? "" : ", ") + n;
    throw CheckpointError(spec + ": no such checkpoint file, folder or shipped name" +
                          (known.empty() ? std::string() : " (shipped: " + known + ")") +
                          (looked.empty() ? std::string() : "; " + looked));
}

std::vector<std::string> shipped_models() {
    std::set<std::string> names;
    for (const auto& d : weight_dirs()) {
        DIR* dir = ::opendir(d.c_str());
        if (!dir) continue;
        while (const dirent* e = ::readdir(dir)) {
            const std::string n = e->d_name;
            if (n[0] == '.') continue;
            if (ends_with(n, ".safetensors") && is_file(d + "/" + n)) names.insert(n.substr(0, n.size() - 12));
            else if (is_file(d + "/" + n + "/model.safetensors")) names.insert(n);
        }
        ::closedir(dir);
    }
    return {names.begin(), names.end()};
}

}  // namespace vitreg
