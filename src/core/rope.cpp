#include "rope.hpp"

#include <cmath>
#include <cstddef>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace vitreg {

namespace {

// Tables whose angle for patch (r, c), band j of an axis, is angle(axis, r or c, j).
template <class Angle>
RopeTables tables(int grid_h, int grid_w, int head_dim, const Angle &angle) {
  RopeTables t;
  t.patches = grid_h * grid_w;
  t.half = head_dim / 2;
  const int quarter = head_dim / 4;
  t.cos.resize(static_cast<std::size_t>(t.patches) * t.half);
  t.sin.resize(t.cos.size());
  for (int r = 0; r < grid_h; ++r)
    for (int c = 0; c < grid_w; ++c) {
      const std::size_t row =
          (static_cast<std::size_t>(r) * grid_w + c) * t.half;
      for (int j = 0; j < t.half; ++j) {
        // [y angles, x angles], the bands 0..head_dim/4 each
        const double a =
            j < quarter ? angle(0, r, j) : angle(1, c, j - quarter);
        t.cos[row + j] = static_cast<float>(std::cos(a));
        t.sin[row + j] = static_cast<float>(std::sin(a));
      }
    }
  return t;
}

double inverse_frequency(float theta, int band, int head_dim) {
  return std::pow(static_cast<double>(theta), -4.0 * band / head_dim);
}

} // namespace

RopeTables rope_axial_tables(int grid_h, int grid_w, int head_dim,
                             float theta) {
  const double two_pi = 2.0 * 3.14159265358979323846;
  const int count[2] = {grid_h, grid_w};
  return tables(grid_h, grid_w, head_dim, [&](int axis, int i, int band) {
    const double centre = ((i + 0.5) / count[axis]) * 2.0 - 1.0;
    return two_pi * centre * inverse_frequency(theta, band, head_dim);
  });
}

RopeTables rope_eva_tables(int grid_h, int grid_w, int head_dim, float theta,
                           int ref_h, int ref_w) {
  const int count[2] = {grid_h, grid_w}, ref[2] = {ref_h, ref_w};
  RopeTables t =
      tables(grid_h, grid_w, head_dim, [&](int axis, int i, int band) {
        const double position = static_cast<double>(i) / count[axis] * ref[axis];
        return position * inverse_frequency(theta, band, head_dim);
      });
  t.interleaved = true;
  return t;
}

void apply_rope(float *qkv, int batch, int tokens, int first, int heads,
                int head_dim, const RopeTables &t) {
  const int dim = heads * head_dim, half = t.half;
  // the pair an angle turns: (j, j + half) or (2j, 2j + 1)
  const int step = t.interleaved ? 2 : 1, other = t.interleaved ? 1 : half;
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
              float *head = token + part * dim + h * head_dim;
              for (int j = 0; j < half; ++j) {
                float *a = head + j * step, *b = a + other;
                const float x = *a, y = *b;
                *a = x * cs[j] - y * sn[j];
                *b = y * cs[j] + x * sn[j];
              }
            }
        }
      });
}

} // namespace vitreg
