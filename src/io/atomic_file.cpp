#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
    // The temporary lives beside the target so rename() stays within one file system.
    tmp_ = path_ + ".tmp." + std::to_string(::getpid());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IoError(path_ + ": cannot create: " + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
    if (fd_ < 0) return;
    ::close(fd_);
    ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, std::size_t size) {
    if (fd_ < 0) throw IoError(path_ + ": write after commit");
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd_, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw IoError(path_ + ": write failed: " + std::strerror(n < 0 ? errno : ENOSPC));
        p += n;
        size -= static_cast<std::size_t>(n);
    }
}

void AtomicFile::commit() {
    const int fd = fd_;
    fd_ = -1;
    const bool synced = ::fsync(fd) == 0;
    const int sync_errno = errno;
    if (::close(fd) != 0 || !synced) {
        const std::string why = std::strerror(synced ? errno : sync_errno);
        ::unlink(tmp_.c_str());
        throw IoError(path_ + ": write failed: " + why);
    }
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::unlink(tmp_.c_str());
        throw IoError(path_ + ": cannot rename into place: " + why);
    }
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
    AtomicFile f(path);
    f.write(bytes);
    f.commit();
}

void make_dirs(const std::string& path) {
    std::string partial;
    std::size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        partial = path.substr(0, pos);
        if (partial.empty()) continue;
        if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
            throw IoError(partial + ": cannot create folder: " + std::strerror(errno));
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw IoError(path + ": not a folder");
}

}  // namespace vitreg
