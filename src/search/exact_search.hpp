#pragma once
// Exact cosine top-k, the reference that an approximate index's recall is measured against.
#include <cstdint>
#include <vector>

#include "vitreg/search/index.hpp"

namespace vitreg {

// Scales each of `rows` rows of `dim` floats to unit length in place (a zero row stays zero).
void normalize_rows(float* data, std::int64_t rows, int dim);

// The k best rows of `data` [n, d] (each normalized here, a block at a time) for each of the
// normalized `queries` [nq, d], by inner product, best first; memory O((nq + block)·d).
std::vector<std::vector<SearchHit>> exact_search(const float* data, std::int64_t n, int d, const float* queries, std::int64_t nq,
                                                 int k);

}  // namespace vitreg
