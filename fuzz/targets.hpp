#pragma once
// The fuzz targets: what vitreg does with bytes it did not write. Each returns normally for
// any input, rejecting bad ones with a vitreg::Error internally; anything else escaping (another
// exception type, a crash, a sanitizer report) is a finding. Shared by the libFuzzer binaries
// and by the regression test that replays the seeds and every past finding in the normal build.
// fuzz/targets.txt lists the targets by name, for CMake (one binary each), scripts/fuzz.sh and
// the replay test, which checks that target_names() is that list.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vitreg::fuzz {

// --- Checkpoints, images and lists (targets.cpp) ---
// safetensors: a .safetensors file: header JSON, dtypes, shapes, offsets, metadata; when the
// header passes, every tensor is widened, the checkpoint described header-only (as `vitreg info`
// does: summarize_checkpoint), then resolved, packed and run once on a tiny image.
void safetensors_file(const std::uint8_t* data, std::size_t size);
// config: an HF config.json beside a fixed, valid HF checkpoint: parsing and config resolution,
// header-only (summarize_checkpoint) and for a load.
void config_json(const std::uint8_t* data, std::size_t size);
// torch: a PyTorch checkpoint: the zip reader, the restricted unpickler and the tensor rebuild; a
// file that passes is described header-only (summarize_checkpoint), loaded, packed and run once. An input that does not start with "PK" is taken
// for a data.pkl and wrapped into a torch.save-style archive whose storages "0".."23" hold 2048
// bytes each, so that mutated pickles reach the tensors.
void torch_file(const std::uint8_t* data, std::size_t size);
// image: an image file: decode, then preprocess with the eval transform and with `none`.
void image_file(const std::uint8_t* data, std::size_t size);
// list: the text of an @list file.
void input_list(const std::uint8_t* data, std::size_t size);
// webdataset: a tar shard (plain, gzip or zstd) read sample by sample, with the image bytes and
// without; both passes must group the same keys.
void webdataset_shard(const std::uint8_t* data, std::size_t size);
// shardnames: an @list of shards, each line a brace pattern expanded as expand_inputs does.
void shard_names(const std::uint8_t* data, std::size_t size);

// --- What `vitreg eval` reads (eval_targets.cpp) ---
// homography: a pair's homography, the same bytes read as OpenCV's FileStorage XML (h.xml) and as
// a 3x3 text (h.txt); a matrix that passes maps a few points.
void homography_file(const std::uint8_t* data, std::size_t size);
// disparity: a disparity map: an input starting "PK" is an .npz, one starting with the .npy magic
// is stored into an .npz as its one array (so mutated headers reach the array reader), anything
// else is a PNG; a map that passes maps a few points.
void disparity_file(const std::uint8_t* data, std::size_t size);
// segmentation: a VOC folder pair made by make_tree (fuzz_files.hpp) from the input: the tree's
// images/ and masks/ go through read_segmentation_folder, then each sample's mask through
// read_label_mask and patch_majority_labels (a 2x2 grid of 14-pixel patches).
void segmentation_folder(const std::uint8_t* data, std::size_t size);
// classes: a labelled folder made by make_tree from the input, through read_class_folders.
void class_folders(const std::uint8_t* data, std::size_t size);

// --- What the repairs and interventions read (repair_targets.cpp) ---
// calibration: a `vitreg calibrate-bias` file through RepairCalibration::read.
void calibration_file(const std::uint8_t* data, std::size_t size);
// defects: a `vitreg defects` file (defects.safetensors) through read_defects and the rows reader.
void defect_directions_file(const std::uint8_t* data, std::size_t size);
// neurons: a neurons.json through read_register_neurons and as "neurons.json:TOP".
void neurons_file(const std::uint8_t* data, std::size_t size);
// modelname: the text of a model's name with its suffixes (ModelSpec::parse), in a folder that
// holds the seeds' neurons.json, bias.safetensors and defects.safetensors so that the suffixes
// naming them read real files; a name that parses must print as text that parses to the same.
void model_name(const std::uint8_t* data, std::size_t size);

// --- What the index reads (search_targets.cpp) ---
// index: an index folder's sidecars, the first line as index.json (check_index_info), the rest as
// ids.jsonl (IdTable, each of its first 256 entries); and the whole input as a .npy header and as
// a tar shard whose member at offset 0 is read (read_tar_member).
void index_files(const std::uint8_t* data, std::size_t size);

// Every target's name, in fuzz/targets.txt's order.
const std::vector<std::string>& target_names();
// Runs target `name` on one input; false for an unknown name.
bool run_target(const std::string& name, const std::uint8_t* data, std::size_t size);

}  // namespace vitreg::fuzz
