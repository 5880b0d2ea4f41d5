#include "core/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "vitreg/error.hpp"

namespace vitreg {

MappedFile::MappedFile(const std::string& path, std::size_t min_size,
                       const std::function<std::string(std::size_t)>& too_short) {
    const auto fail = [&](const std::string& what) { throw CheckpointError(path + ": " + what); };
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail("not a regular file");
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size < min_size) {
        ::close(fd);
        fail(too_short(size));
    }
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) fail(std::string("cannot map: ") + std::strerror(errno));
    map_ = map;
    size_ = size;
}

MappedFile::~MappedFile() {
    if (map_) ::munmap(map_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : map_(std::exchange(other.map_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (map_) ::munmap(map_, size_);
        map_ = std::exchange(other.map_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

}  // namespace vitreg
