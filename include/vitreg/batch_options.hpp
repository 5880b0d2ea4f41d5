#pragma once
// How every batch job writes and runs: format, batch, chunk, resume, overwrite (option_spec.hpp;
// defaults: the job's options struct's own). The shard options stay with the front ends: "auto"
// reads the environment, with --shard-count.
#include "vitreg/batch_job.hpp"
#include "vitreg/option_spec.hpp"

namespace vitreg {

const OptionTable<BatchOptions, 5>& batch_option_table();

}  // namespace vitreg
