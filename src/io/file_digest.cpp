#include "io/file_digest.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

constexpr std::uint64_t kFnvOffset = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

std::uint64_t fnv1a(std::uint64_t h, const unsigned char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
    return h;
}

std::string hex_digest(std::uint64_t h) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
    return buf;
}

}  // namespace

std::string file_digest(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw IoError(path + ": cannot read: " + std::strerror(errno));
    std::vector<unsigned char> buf(1 << 20);
    std::uint64_t h = kFnvOffset;
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const std::string why = std::strerror(errno);
            ::close(fd);
            throw IoError(path + ": cannot read: " + why);
        }
        if (n == 0) break;
        h = fnv1a(h, buf.data(), static_cast<std::size_t>(n));
    }
    ::close(fd);
    return hex_digest(h);
}

std::string text_digest(const std::string& text) {
    return hex_digest(fnv1a(kFnvOffset, reinterpret_cast<const unsigned char*>(text.data()), text.size()));
}

}  // namespace vitreg
