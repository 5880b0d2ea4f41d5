// Shards (which share of the inputs a process takes, and where it writes) and the names of the
// feature formats: what every batch job and its front ends (the command, Python) agree on.
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "vitreg/batch_job.hpp"
#include "vitreg/error.hpp"
#include "core/parse_number.hpp"

namespace vitreg {

namespace {

long env_number(const char* name, bool required) {
    const char* v = std::getenv(name);
    if (!v) {
        if (required) throw UsageError(std::string("--shard auto: ") + name + " is not set");
        return -1;
    }
    const auto n = parse_integer(v, 0, 1 << 30);
    if (!n) throw UsageError(std::string("--shard auto: ") + name + "='" + v + "' is not a number");
    return *n;
}

Shard checked(long index, long count, const std::string& what) {
    if (count < 1 || index < 0 || index >= count)
        throw UsageError(what + ": shard " + std::to_string(index) + " of " + std::to_string(count) +
                         " is out of range (0 <= K < N)");
    return {static_cast<int>(index), static_cast<int>(count)};
}

}  // namespace

Shard parse_shard(const std::string& text, int count) {
    if (text == "auto") {
        if (std::getenv("SLURM_ARRAY_TASK_ID")) {
            const long id = env_number("SLURM_ARRAY_TASK_ID", true);
            // A resubmitted shard (`sbatch --array=2`) is an array of one: N must come from the user.
            if (count > 0) return checked(id, count, "--shard auto (Slurm, --shard-count)");
            const long n = env_number("SLURM_ARRAY_TASK_COUNT", true);
            const long min = env_number("SLURM_ARRAY_TASK_MIN", false);
            return checked(id - std::max(0L, min), n, "--shard auto (Slurm)");
        }
        if (std::getenv("JOB_COMPLETION_INDEX")) {
            if (count < 1) throw UsageError("--shard auto with JOB_COMPLETION_INDEX needs --shard-count N");
            return checked(env_number("JOB_COMPLETION_INDEX", true), count, "--shard auto (JOB_COMPLETION_INDEX)");
        }
        throw UsageError("--shard auto: neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set");
    }
    const auto slash = text.find('/');
    const auto k = slash == std::string::npos ? std::nullopt : parse_integer(text.substr(0, slash), 0, 1 << 30);
    const auto n = slash == std::string::npos ? std::nullopt : parse_integer(text.substr(slash + 1), 1, 1 << 30);
    if (!k || !n) throw UsageError("bad --shard '" + text + "' (expected K/N, e.g. 0/4, or auto)");
    return checked(*k, *n, "--shard " + text);
}

std::vector<std::size_t> shard_positions(const std::vector<std::string>& inputs, int index, int count) {
    if (count < 1 || index < 0 || index >= count)
        throw UsageError("bad shard " + std::to_string(index) + "/" + std::to_string(count) +
                         " (expected K/N with 0 <= K < N)");
    std::vector<std::size_t> order(inputs.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    if (count == 1) return order;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return inputs[a] < inputs[b]; });
    const std::size_t n = inputs.size(), k = static_cast<std::size_t>(index), c = static_cast<std::size_t>(count);
    return {order.begin() + static_cast<std::ptrdiff_t>(n * k / c), order.begin() + static_cast<std::ptrdiff_t>(n * (k + 1) / c)};
}

std::string shard_dir(const std::string& out_dir, int index, int count) {
    if (count == 1) return out_dir;
    return out_dir + "/shard-" + std::to_string(index) + "-of-" + std::to_string(count);
}

std::string to_string(FeatureFormat format) { return format == FeatureFormat::Npy ? "npy" : "safetensors"; }

std::string file_extension(FeatureFormat format) { return "." + to_string(format); }

}  // namespace vitreg
