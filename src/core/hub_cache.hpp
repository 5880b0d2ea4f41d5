#pragma once
// Models already in a local hub cache, found by the names users know ("facebook/dinov2-small",
// "dinov2_vits14_reg4").
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

// True for what can be a timm model name, NAME or NAME.TAG in timm's spelling
// ("vit_so400m_patch14_siglip_224", "vit_base_patch16_224.augreg2_in21k_ft_in1k"): lower case,
// digits and '_', one optional '.' before the pretrained tag.
bool looks_like_timm_name(const std::string& spec);

// The snapshot timm.create_model(name, pretrained=True) would load from the Hugging Face cache:
// the repository timm/NAME.TAG as named, or for a bare NAME timm/NAME itself if cached, else the
// one timm/NAME.* that is (a CheckpointError naming them where several are). nullopt when none
// is cached; `looked` then says where the search went.
std::optional<std::string> timm_cache_snapshot(const std::string& name, std::string* looked);

// The torch hub checkpoint folder: $TORCH_HOME/hub/checkpoints, TORCH_HOME defaulting to
// $XDG_CACHE_HOME/torch, else ~/.cache/torch (as torch.hub.get_dir()).
std::string torch_hub_checkpoints_dir();

// The file torch.hub.load keeps for entry point `name` ("dinov2_vits14_reg4", "dinov3_vits16",
// "dino_vits16", "vit_b_16"): NAME_pretrain.pth (DINOv2's naming), NAME.pth, DINO's release names
// (dino_deitsmall16_pretrain.pth for dino_vits16, ...), NAME_pretrain_DATASET-HASH.pth (DINOv3's)
// or NAME-HASH.pth (torchvision's), the first in name order when several are kept, in
// torch_hub_checkpoints_dir(). nullopt when
// `name` is not a plain name or no such file is there; `looked` then says where the search went.
std::optional<std::string> torch_hub_checkpoint(const std::string& name, std::string* looked);

// The repository of a known torch hub entry point (facebookresearch/dinov2 for dinov2_vit{s,b,l,g}14
// with an optional _reg4, facebookresearch/dinov3 for dinov3_vit{s,s+,b,l,h+,7b}16,
// facebookresearch/dino:main for dino_vit{s,b}{16,8}, pytorch/vision for vit_{b,l}_{16,32} and
// vit_h_14), or "": the names
// whose missing file gets a fetch command in the error.
std::string torch_hub_repository(const std::string& name);

}  // namespace vitreg
