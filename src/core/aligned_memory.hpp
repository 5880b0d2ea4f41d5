#pragma once
// Storage for the kernels' operands: 64-byte (cache line, one AVX-512 register) aligned, and
// large blocks offered to Linux as transparent huge pages (see aligned_memory.cpp for why).
#include <cstddef>
#include <vector>

namespace vitreg::gemm {

// `bytes` of storage aligned to 64 bytes (throws std::bad_alloc); release with free_aligned.
void* allocate_aligned(std::size_t bytes);
void free_aligned(void* p) noexcept;

// Not Eigen's aligned_allocator: its alignment follows each translation unit's -march, and
// mixing those corrupts the heap.
template <class T>
struct AlignedAllocator {
    using value_type = T;
    AlignedAllocator() = default;
    template <class U>
    AlignedAllocator(const AlignedAllocator<U>&) {}
    T* allocate(std::size_t n) { return static_cast<T*>(allocate_aligned(n * sizeof(T))); }
    void deallocate(T* p, std::size_t) { free_aligned(p); }
    template <class U>
    bool operator==(const AlignedAllocator<U>&) const { return true; }
    template <class U>
    bool operator!=(const AlignedAllocator<U>&) const { return false; }
};

using Buffer = std::vector<float, AlignedAllocator<float>>;

// b's storage, grown (never shrunk) to hold at least n elements: for scratch reused across calls.
// Growing drops the old contents, releasing them first: a copy would hold both blocks at once,
// and at 2044 px the fp32 kernels' packed input grows from [N, D] to [N, 4D] (+33 MB at the peak).
template <class Vector>
auto* at_least(Vector& b, std::size_t n) {
    if (b.size() < n) {
        Vector().swap(b);
        b.resize(n);
    }
    return b.data();
}

}  // namespace vitreg::gemm
