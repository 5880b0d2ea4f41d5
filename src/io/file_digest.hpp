#pragma once
// Content digests that name what a job or a converted checkpoint was made from: the batch
// jobs' identity (job.json), the converter's and the sink calibration's source_digest.
#include <string>

namespace vitreg {

// A content digest of a file ("fnv1a64:<16 hex digits>"); throws IoError naming it.
std::string file_digest(const std::string& path);
// The same digest of a string.
std::string text_digest(const std::string& text);

}  // namespace vitreg
