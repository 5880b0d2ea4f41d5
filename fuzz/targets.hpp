#pragma once
// The fuzz targets: what vitreg does with bytes it did not write. Each returns normally for
// any input, rejecting bad ones with a vitreg::Error internally; anything else escaping (another
// exception type, a crash, a sanitizer report) is a finding. Shared by the libFuzzer binaries
// and by the regression test that replays the seeds and every past finding in the normal build.
#include <cstddef>
#include <cstdint>
#include <string>

namespace vitreg::fuzz {

// A .safetensors file: header JSON, dtypes, shapes, offsets, metadata; when the header passes,
// every tensor is widened and the checkpoint resolved, packed and run once on a tiny image.
void safetensors_file(const std::uint8_t* data, std::size_t size);
// An HF config.json beside a fixed, valid HF checkpoint: parsing and config resolution.
void config_json(const std::uint8_t* data, std::size_t size);
// A PyTorch checkpoint: the zip reader, the restricted unpickler and the tensor rebuild; a file
// that passes is loaded, packed and run once. An input that does not start with "PK" is taken
// for a data.pkl and wrapped into a torch.save-style archive whose storages "0".."23" hold 2048
// bytes each, so that mutated pickles reach the tensors.
void torch_file(const std::uint8_t* data, std::size_t size);
// An image file: decode, then preprocess with the eval transform and with `none`.
void image_file(const std::uint8_t* data, std::size_t size);
// The text of an @list file.
void input_list(const std::uint8_t* data, std::size_t size);

// Runs target `name` (safetensors, torch, config, image, list) on one input; false for an unknown name.
bool run_target(const std::string& name, const std::uint8_t* data, std::size_t size);

}  // namespace vitreg::fuzz
