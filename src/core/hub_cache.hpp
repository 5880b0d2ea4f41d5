#pragma once
// Models already in a local hub cache, found by the names users know ("facebook/dinov2-small").
// vitreg reads these caches and never downloads: a model that is not there is an error that
// says where it looked and how to fetch it.
#include <optional>
#include <string>

namespace vitreg {

// True for what can only be a hub id: "ORG/NAME" or "ORG/NAME@REVISION", one slash, no path
// syntax (leading '/', '.', '~', or "..").
bool looks_like_hub_id(const std::string& spec);

// The snapshot folder of `spec` ("ORG/NAME[@REVISION]", the revision a branch or tag under
// refs/, or a commit hash; main by default) in the Hugging Face cache: $HF_HUB_CACHE, else
// $HF_HOME/hub, else ~/.cache/huggingface/hub, as huggingface_hub lays it out
// (models--ORG--NAME/refs/main holding the commit, snapshots/<commit>/ its files).
// nullopt when it is not cached; `looked` then says where the search went.
std::optional<std::string> hf_cache_snapshot(const std::string& spec, std::string* looked);

}  // namespace vitreg
