#pragma once
// Typed errors. Every message names the file (or input) and the fault, so the CLI can print
// `vitreg: <message>` and exit non-zero without a stack of noise.
#include <stdexcept>
#include <string>

namespace vitreg {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A checkpoint file that cannot be read, is malformed, or lacks a tensor.
class CheckpointError : public Error {
public:
    using Error::Error;
};

// A configuration that contradicts itself or the tensors it describes.
class ConfigError : public Error {
public:
    using Error::Error;
};

// An image that cannot be decoded or preprocessed.
class ImageError : public Error {
public:
    using Error::Error;
};

// A file that cannot be written, or an output folder in the wrong state.
class IoError : public Error {
public:
    using Error::Error;
};

// Arguments that make no sense together (bad resize spec, unknown kind name, ...).
class UsageError : public Error {
public:
    using Error::Error;
};

}  // namespace vitreg
