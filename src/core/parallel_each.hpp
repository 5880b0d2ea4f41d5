#pragma once
// fn(i) for every i in [0, n) on oneTBB, for loops whose iterations are independent (each writes
// only its own outputs), so the result does not depend on how the range is split: loading's
// per-channel quantization and per-panel packing.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace vitreg {

template <class Fn>
void parallel_each(int n, const Fn& fn) {
    tbb::parallel_for(tbb::blocked_range<int>(0, n), [&](const tbb::blocked_range<int>& r) {
        for (int i = r.begin(); i < r.end(); ++i) fn(i);
    });
}

}  // namespace vitreg
