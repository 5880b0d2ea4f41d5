#pragma once
// IVF indexes trained and filled by vitreg's own k-means and assignment (search/kmeans.hpp), the
// result an ordinary FAISS index: centroids in its quantizer, PQ codebooks in its pq, codes in its
// inverted lists. Other factories are trained and filled by FAISS.
#include <faiss/Index.h>

#include <cstdint>

namespace vitreg {

// Whether vitreg builds `index` itself: an IndexIVFFlat, or an IndexIVFPQ of 8-bit codes, over an
// inner-product IndexFlat quantizer, with no direct map (`IVF{c},Flat`, `IVF{c},PQ{m}`).
bool own_ivf_build(const faiss::Index& index);

// Coarse centroids by spherical k-means over the n normalized rows `x`; for IVF-PQ, each
// sub-quantizer's 256 centroids by L2 k-means over the residuals (FAISS's by_residual), on at most
// 65,536 of them (FAISS's 256 points per centroid). Leaves the index trained.
void train_ivf(faiss::Index& index, const float* x, std::int64_t n, std::uint64_t seed);

// Appends the n normalized rows `x` as ids ntotal.. ntotal + n − 1: each row's list by its nearest
// centroid, its code (the floats, or its PQ code) computed here, written with add_entries.
void add_ivf(faiss::Index& index, const float* x, std::int64_t n);

}  // namespace vitreg
