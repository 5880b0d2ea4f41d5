#include "rope.hpp"

#include <cmath>
#include <cstddef>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace vitreg {

RopeTables rope_axial_tables(int grid_h, int grid_w, int head_dim,
                             float theta) {
  RopeTables t;
  t.patches = grid_h * grid_w;
  t.half = head_dim / 2;
  const int quarter = head_dim / 4;
  t.cos.resize(static_cast<std::size_t>(t.patches) * t.half);
  t.sin.resize(t.cos.size());
  const double two_pi = 2.0 * 3.14159265358979323846;
  for (int r = 0; r < grid_h; ++r)
    for (int c = 0; c < grid_w; ++c) {
      const double y = ((r + 0.5) / grid_h) * 2.0 - 1.0,
                   x = ((c + 0.5) / grid_w) * 2.0 - 1.0;
      const std::size_t row =
          (static_cast<std::size_t>(r) * grid_w + c) * t.half;
      for (int j = 0; j < t.half; ++j) {
        const int band =
            j % quarter; // [y angles, x angles], the bands 0..head_dim/4 each
        const double inv_freq =
            std::pow(static_cast<double>(theta), -4.0 * band / head_dim);
        const double angle = two_pi * (j < quarter ? y : x) * inv_freq;
        t.cos[row + j] = static_cast<float>(std::cos(angle));
        t.sin[row + j] = static_cast<float>(std::sin(angle));
      }
    }
  return t;
}

void apply_rope(float *qkv, int batch, int tokens, int first, int heads,
                int head_dim, const RopeTables &t) {
  const int dim = heads * head_dim, half = t.half;
  tbb::parallel_for(
      tbb::blocked_range<int>(0, batch * t.patches, 64),
      [&](const tbb::blocked_range<int> &range) {
        for (int task = range.begin(); task != range.end(); ++task) {
          const int b = task / t.patches, p = task % t.patches;
          float *token =
              qkv +
              (static_cast<std::size_t>(b) * tokens + first + p) * 3 * dim;
          const float *cs = t.cos.data() + static_cast<std::size_t>(p) * half;
          const float *sn = t.sin.data() + static_cast<std::size_t>(p) * half;
          for (int part = 0; part < 2; ++part) // q, then k
            for (int h = 0; h < heads; ++h) {
              float *a = token + part * dim + h * head_dim;
              float *bpart = a + half;
              for (int j = 0; j < half; ++j) {
                const float x = a[j], y = bpart[j];
                a[j] = x * cs[j] - y * sn[j];
                bpart[j] = y * cs[j] + x * sn[j];
              }
            }
        }
      });
}

} // namespace vitreg
