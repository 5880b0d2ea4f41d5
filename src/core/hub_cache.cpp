#include "core/hub_cache.hpp"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <vector>

#include "core/file_kind.hpp"
#include "vitreg/error.hpp"

namespace vitreg {

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

// Where huggingface_hub keeps models, in its own order of precedence.
std::string hf_cache_dir() {
    if (const auto d = env("HF_HUB_CACHE"); !d.empty()) return d;
    if (const auto d = env("HF_HOME"); !d.empty()) return d + "/hub";
    if (const auto d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/huggingface/hub";
    return env("HOME") + "/.cache/huggingface/hub";
}

bool is_name_part(const std::string& s) {
    if (s.empty() || s == "." || s == ".." || s.size() > 96) return false;
    for (const char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
    return true;
}

// DINO's hub entry points save their weights under the names of the original release.
const std::pair<const char*, const char*> kDinoFiles[] = {{"dino_vits16", "dino_deitsmall16_pretrain.pth"},
                                                          {"dino_vits8", "dino_deitsmall8_pretrain.pth"},
                                                          {"dino_vitb16", "dino_vitbase16_pretrain.pth"},
                                                          {"dino_vitb8", "dino_vitbase8_pretrain.pth"}};

// The first (in name order) NAME + `infix` + *.pth in dir: the weights' dataset and hash, which
// DINOv3 (NAME_pretrain_lvd1689m-08c60483.pth) and torchvision (vit_b_16-c867db91.pth) keep.
std::optional<std::string> hashed_file(const std::string& dir, const std::string& stem) {
    std::vector<std::string> hashed;
    if (DIR* d = opendir(dir.c_str())) {
        while (const dirent* e = readdir(d)) {
            const std::string f = e->d_name;
            if (f.size() > stem.size() + 4 && f.compare(0, stem.size(), stem) == 0 && f.compare(f.size() - 4, 4, ".pth") == 0 &&
                is_file(dir + "/" + f))
                hashed.push_back(dir + "/" + f);
        }
        closedir(d);
    }
    if (hashed.empty()) return std::nullopt;
    return *std::min_element(hashed.begin(), hashed.end());
}

}  // namespace

bool looks_like_hub_id(const std::string& spec) {
    const std::string id = spec.substr(0, spec.find('@'));
    const auto slash = id.find('/');
    if (slash == std::string::npos || id.find('/', slash + 1) != std::string::npos) return false;
    if (id[0] == '.' || id[0] == '~') return false;
    return is_name_part(id.substr(0, slash)) && is_name_part(id.substr(slash + 1));
}

std::optional<std::string> hf_cache_snapshot(const std::string& spec, std::string* looked) {
    const auto at = spec.find('@');
    const std::string id = spec.substr(0, at), revision = at == std::string::npos ? "main" : spec.substr(at + 1);
    const std::string cache = hf_cache_dir();
    std::string repo = cache + "/models--" + id.substr(0, id.find('/')) + "--" + id.substr(id.find('/') + 1);
    auto say = [&](const std::string& what) {
        if (looked) *looked = what;
        return std::nullopt;
    };
    if (!is_dir(repo)) return say("not in the Hugging Face cache " + cache + " (no " + repo + ")");
    if (!is_name_part(revision)) return say("bad revision '" + revision + "'");
    // A branch or tag names its commit in refs/; a commit names itself.
    std::string commit = revision;
    if (std::ifstream ref(repo + "/refs/" + revision); ref) std::getline(ref, commit);
    while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r' || commit.back() == ' ')) commit.pop_back();
    if (!is_name_part(commit)) return say(repo + "/refs/" + revision + " does not name a commit");
    const std::string snapshot = repo + "/snapshots/" + commit;
    if (!is_dir(snapshot)) return say("revision '" + revision + "' is not cached (no " + snapshot + ")");
    return snapshot;
}

bool looks_like_timm_name(const std::string& spec) {
    static const std::regex name("[a-z0-9][a-z0-9_]*(\\.[a-z0-9_]+)?");
    return spec.size() <= 96 && std::regex_match(spec, name);
}

std::optional<std::string> timm_cache_snapshot(const std::string& name, std::string* looked) {
    const std::string cache = hf_cache_dir(), repo = "models--timm--" + name;
    if (name.find('.') != std::string::npos || is_dir(cache + "/" + repo)) return hf_cache_snapshot("timm/" + name, looked);
    // No tag: timm's default is the architecture's first pretrained tag, which only timm's table
    // knows; one cached tag can only be that, several must be chosen between.
    std::vector<std::string> tagged;
    if (DIR* d = opendir(cache.c_str())) {
        while (const dirent* e = readdir(d)) {
            const std::string f = e->d_name;
            if (f.size() > repo.size() + 1 && f.compare(0, repo.size() + 1, repo + ".") == 0 && is_dir(cache + "/" + f))
                tagged.push_back("timm/" + f.substr(std::string("models--timm--").size()));
        }
        closedir(d);
    }
    std::sort(tagged.begin(), tagged.end());
    if (tagged.size() == 1) return hf_cache_snapshot(tagged[0], looked);
    if (tagged.empty()) {
        if (looked) *looked = "not in the Hugging Face cache " + cache + " (no " + repo + " nor " + repo + ".* in it)";
        return std::nullopt;
    }
    std::string list;
    for (const auto& t : tagged) list += (list.empty() ? "" : ", ") + t;
    throw CheckpointError(name + ": several pretrained tags of it are in the Hugging Face cache " + cache + " (" + list +
                          "); name one, e.g. " + tagged[0].substr(5));
}

std::string torch_hub_checkpoints_dir() {
    std::string home = env("TORCH_HOME");
    if (home.empty()) home = (env("XDG_CACHE_HOME").empty() ? env("HOME") + "/.cache" : env("XDG_CACHE_HOME")) + "/torch";
    return home + "/hub/checkpoints";
}

std::optional<std::string> torch_hub_checkpoint(const std::string& name, std::string* looked) {
    if (!is_name_part(name) || name[0] == '.') {
        if (looked) *looked = "'" + name + "' is not a torch hub name";
        return std::nullopt;
    }
    const std::string dir = torch_hub_checkpoints_dir();
    std::vector<std::string> candidates = {dir + "/" + name + "_pretrain.pth", dir + "/" + name + ".pth"};
    for (const auto& [hub, file] : kDinoFiles)
        if (name == hub) candidates.push_back(dir + "/" + file);
    for (const auto& candidate : candidates)
        if (is_file(candidate)) return candidate;
    for (const std::string& stem : {name + "_pretrain_", name + "-"})
        if (auto file = hashed_file(dir, stem)) return file;
    if (looked)
        *looked = "not in the torch hub cache (no " + name + "_pretrain.pth, " + name + "_pretrain_*.pth, " + name + "-*.pth nor " +
                  name + ".pth in " + dir + ")";
    return std::nullopt;
}

std::string torch_hub_repository(const std::string& name) {
    static const std::regex dinov2("dinov2_vit[sblg]14(_reg4)?"), dinov3("dinov3_vit(s|splus|b|l|hplus|7b)16"),
        dino("dino_vit[sb](16|8)"), torchvision("vit_[bl]_(16|32)|vit_h_14");
    if (std::regex_match(name, dinov2)) return "facebookresearch/dinov2";
    if (std::regex_match(name, dinov3)) return "facebookresearch/dinov3";
    if (std::regex_match(name, dino)) return "facebookresearch/dino:main";
    if (std::regex_match(name, torchvision)) return "pytorch/vision";
    return "";
}

}  // namespace vitreg
