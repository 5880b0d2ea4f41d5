#pragma once
// Checks on the bytes of an image before Debian's stb_image 2.27 sees them, for faults that
// fuzz_image found in that version or that are public against it (fixed upstream later):
//  - a PNM header number with too many digits overflows stb's int parser (undefined behaviour);
//  - a 16-bit PNM (maximum value > 255) overruns the buffer stb sizes for 8 bits;
//  - a PNG chunk declaring more bytes than the file holds makes stb reserve that much (up to
//    2 GB) before it finds out; a 16-bit PNG over 357,913,941 pixels overflows the int that
//    sizes stb's conversion to 8 bits (only reachable with the pixel limit raised);
//  - an uncompressed TGA cut short leaves stb's pixels uninitialized (CVE-2023-45663).
// Files of other formats pass untouched.
//
// Then a bound on stb's memory: while an StbAllocCap lives, every single allocation stb asks
// for on this thread above the cap is refused (stb then fails cleanly with "Out of memory").
#include <cstddef>
#include <cstdint>
#include <string>

namespace vitreg {

// Throws ImageError naming `name` and the fault.
void check_before_stb(const std::uint8_t* data, std::size_t size, const std::string& name);

// Whether the bytes start with PNG's signature, and a big-endian 32-bit number (PNG's lengths
// and IHDR sizes).
bool is_png(const std::uint8_t* data, std::size_t size);
std::uint32_t be32(const std::uint8_t* p);

// stb_image's allocator (STBI_MALLOC, STBI_REALLOC, STBI_FREE).
void* stb_malloc(std::size_t size);
void* stb_realloc(void* p, std::size_t size);
void stb_free(void* p);

// Caps each allocation stb makes on this thread while it lives (decodes run on many threads at
// once); the previous cap comes back at the end. Starting one clears the statistics below.
class StbAllocCap {
public:
    explicit StbAllocCap(std::size_t cap);
    ~StbAllocCap();
    StbAllocCap(const StbAllocCap&) = delete;
    StbAllocCap& operator=(const StbAllocCap&) = delete;
    void set(std::size_t cap);
    bool refused() const;  // whether the cap has refused anything since this one started

private:
    std::size_t previous_;
};

// What stb asked for on this thread since the last StbAllocCap started (for tests).
struct StbAllocStats {
    std::size_t cap = 0;  // the last cap set; 0 when none was
    std::size_t largest_request = 0;
    std::size_t largest_granted = 0;
    bool refused = false;
};
StbAllocStats last_stb_allocations();

}  // namespace vitreg
