#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

// O_DIRECT's transfers: whole blocks of the device's size (4 KB covers the usual ones) from
// memory aligned alike.
constexpr std::size_t kAlign = 4096, kStage = std::size_t(8) << 20;

}  // namespace

AtomicFile::AtomicFile(std::string path, bool direct) : path_(std::move(path)) {
    // The temporary lives beside the target so rename() stays within one file system.
    tmp_ = path_ + ".tmp." + std::to_string(::getpid());
    const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
#ifdef O_DIRECT
    if (direct) {
        stage_ = static_cast<char*>(std::aligned_alloc(kAlign, kStage));
        fd_ = stage_ ? ::open(tmp_.c_str(), flags | O_DIRECT, 0644) : -1;
        direct_ = fd_ >= 0;
        if (!direct_) {
            std::free(stage_);
            stage_ = nullptr;
        }
    }
#else
    (void)direct;
#endif
    if (fd_ < 0) fd_ = ::open(tmp_.c_str(), flags, 0644);  // a file system without O_DIRECT (tmpfs)
    if (fd_ < 0) {
        std::free(stage_);
        throw IoError(path_ + ": cannot create: " + std::strerror(errno));
    }
}

AtomicFile::~AtomicFile() {
    std::free(stage_);
    if (fd_ < 0) return;
    ::close(fd_);
    ::unlink(tmp_.c_str());
}

void AtomicFile::stop_direct() {
#ifdef O_DIRECT
    if (direct_) ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_DIRECT);
#endif
    direct_ = false;
}

void AtomicFile::write_out(const char* p, std::size_t size) {
    while (size > 0) {
        const ssize_t n = ::write(fd_, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && direct_) {  // the device wants larger blocks: buffered from here on
            stop_direct();
            continue;
        }
        if (n <= 0) throw IoError(path_ + ": write failed: " + std::strerror(n < 0 ? errno : ENOSPC));
        p += n;
        size -= static_cast<std::size_t>(n);
        if (size % kAlign) stop_direct();  // a short write left the rest unaligned
    }
}

void AtomicFile::write(const void* data, std::size_t size) {
    if (fd_ < 0) throw IoError(path_ + ": write after commit");
    const char* p = static_cast<const char*>(data);
    if (!stage_) return write_out(p, size);
    while (size > 0) {
        const std::size_t take = std::min(size, kStage - staged_);
        std::memcpy(stage_ + staged_, p, take);
        staged_ += take;
        p += take;
        size -= take;
        if (staged_ == kStage) {
            write_out(stage_, kStage);
            staged_ = 0;
        }
    }
}

void AtomicFile::commit() {
    if (fd_ < 0) throw IoError(path_ + ": commit after commit");
    if (staged_) {  // the whole blocks staged, then the tail without O_DIRECT
        const std::size_t whole = staged_ / kAlign * kAlign;
        write_out(stage_, whole);
        stop_direct();
        write_out(stage_ + whole, staged_ - whole);
        staged_ = 0;
    }
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

std::vector<std::string> list_dir(const std::string& dir) {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n != "." && n != "..") names.push_back(n);
        }
        ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
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
