#include "aligned_memory.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace vitreg::gemm {

namespace {
constexpr std::size_t kLine = 64;
constexpr std::size_t kHugePage = std::size_t{2} << 20;
}  // namespace

// A block of a megabyte or more (packed weights, a forward's activations) starts on a 2 MB
// boundary and asks for transparent huge pages over its whole 2 MB pages. A ViT's weights span
// thousands of 4 KB pages, read again by every forward: under a hypervisor each TLB miss is a
// two-level page walk. The last, partial page is rounded up when at least half of it is used (at
// most 1 MB more); a shorter tail stays in small pages. Where Linux declines, the hint costs
// nothing and the block is an ordinary one.
//
// posix_memalign, not aligned_alloc: C11's aligned_alloc wants the size a multiple of the
// alignment (ASan enforces it), which a 2 MB alignment would turn into rounding every block up.
void* allocate_aligned(std::size_t bytes) {
    bytes = std::max(kLine, (bytes + kLine - 1) / kLine * kLine);
    const std::size_t whole =
        bytes < kHugePage / 2 ? 0 : (bytes + kHugePage / 2) / kHugePage * kHugePage;  // the pages worth a huge one
    void* p = nullptr;
    if (posix_memalign(&p, whole ? kHugePage : kLine, std::max(bytes, whole)) != 0) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (whole) madvise(p, whole, MADV_HUGEPAGE);
#endif
    return p;
}

void free_aligned(void* p) noexcept { std::free(p); }

}  // namespace vitreg::gemm
