#include "io/webdataset.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "io/printable.hpp"

namespace vitreg::webdataset {

bool is_image_extension(const std::string& ext) {
    std::string e = ext;
    std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
    return e == "jpg" || e == "jpeg" || e == "png" || e == "webp";
}

namespace {

// webdataset's split: the key is the name up to the first dot of its basename, the extension
// the rest (lower case; "" without a dot).
std::pair<std::string, std::string> split_name(const std::string& name) {
    const std::size_t slash = name.rfind('/');
    const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
    const std::size_t dot = name.find('.', base);
    if (dot == std::string::npos) return {name, ""};
    std::string ext = name.substr(dot + 1);
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return {name.substr(0, dot), ext};
}

// A name that would leave a folder it were unpacked into: absolute, or with a ".." component.
bool unsafe_name(const std::string& name) {
    if (!name.empty() && name[0] == '/') return true;
    std::size_t begin = 0;
    while (begin <= name.size()) {
        std::size_t end = name.find('/', begin);
        if (end == std::string::npos) end = name.size();
        if (name.compare(begin, end - begin, "..") == 0 && end - begin == 2) return true;
        begin = end + 1;
    }
    return false;
}

}  // namespace

struct ShardReader::Impl {
    // A member's header: where it starts and what it says.
    struct Member {
        std::string name;
        std::uint64_t offset = 0;
        std::uint64_t size = 0;
        bool regular = true;
    };

    archive* a = nullptr;
    std::string name;
    Limits limits;
    bool have_pending = false, ended = false;
    Member pending;
    std::string error;
    std::uint64_t error_offset = 0, end_of_last = 0;
    std::unordered_map<std::string, std::uint64_t> seen;  // key -> its first sample's offset

    Impl(const std::string& n, const Limits& l) : a(archive_read_new()), name(n), limits(l) {
        archive_read_support_filter_gzip(a);
        archive_read_support_filter_zstd(a);
        archive_read_support_format_tar(a);
    }
    ~Impl() { archive_read_free(a); }

    void fail(const std::string& what, std::uint64_t offset) {
        if (ended) return;
        ended = true;
        error = what;
        error_offset = offset;
    }
    std::string archive_message() const {
        const char* m = archive_error_string(a);
        return m ? m : "unreadable";
    }

    // The next member's header; false at the end or a break.
    bool header(Member& m) {
        if (ended) return false;
        archive_entry* e = nullptr;
        const int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF) {
            ended = true;
            return false;
        }
        if (r < ARCHIVE_WARN) {
            fail(archive_message(), end_of_last);
            return false;
        }
        const char* n = archive_entry_pathname(e);
        m.name = n ? n : "";
        m.offset = static_cast<std::uint64_t>(std::max<la_int64_t>(0, archive_read_header_position(a)));
        m.size = static_cast<std::uint64_t>(std::max<la_int64_t>(0, archive_entry_size(e)));
        m.regular = archive_entry_filetype(e) == AE_IFREG;
        return true;
    }

    // The current member's data, grown as it arrives (a forged size allocates nothing ahead).
    bool data(const Member& m, std::string& out) {
        out.clear();
        char buffer[1 << 16];
        for (;;) {
            const la_ssize_t got = archive_read_data(a, buffer, sizeof buffer);
            if (got < 0) {
                fail(archive_message() + " in member '" + printable(m.name) + "'", m.offset);
                return false;
            }
            if (got == 0) break;
            out.append(buffer, static_cast<std::size_t>(got));
        }
        end_of_last = m.offset + 512 + (m.size + 511) / 512 * 512;
        return true;
    }

    bool skip(const Member& m) {
        if (archive_read_data_skip(a) < ARCHIVE_WARN) {
            fail(archive_message() + " in member '" + printable(m.name) + "'", m.offset);
            return false;
        }
        end_of_last = m.offset + 512 + (m.size + 511) / 512 * 512;
        return true;
    }

    bool add(Sample& s, const Member& m, const std::string& ext, bool with_image);
    bool next(Sample& out, bool with_image);
};

// Adds member `m` (of the sample's key) to `s`; false where the shard broke inside it.
bool ShardReader::Impl::add(Sample& s, const Member& m, const std::string& ext, bool with_image) {
    auto note = [&](const std::string& fault) {
        if (s.error.empty()) s.error = fault;
    };
    if (unsafe_name(m.name)) note("member '" + printable(m.name) + "' is named outside the shard ('..' or '/')");
    if (!m.regular) return skip(m);
    if (is_image_extension(ext)) {
        if (!s.image_ext.empty()) {
            note("two image members (" + s.image_ext + ", " + ext + ")");
            return skip(m);
        }
        s.image_ext = ext;
        if (m.size > limits.max_image_bytes) {
            note("image member of " + std::to_string(m.size) + " bytes is over the limit of " +
                 std::to_string(limits.max_image_bytes));
            return skip(m);
        }
        return with_image ? data(m, s.image) : skip(m);
    }
    if (ext == "json" || ext == "txt") {
        if (m.size > limits.max_text_bytes) {
            note(ext + " member of " + std::to_string(m.size) + " bytes is over the limit of " +
                 std::to_string(limits.max_text_bytes));
            return skip(m);
        }
        return data(m, ext == "json" ? s.json : s.caption);
    }
    return skip(m);  // other members (.cls, .npy, ...) are not vitreg's
}

bool ShardReader::Impl::next(Sample& out, bool with_image) {
    out = Sample{};
    Member m;
    if (have_pending) {
        m = pending;
        have_pending = false;
    } else if (!header(m)) {
        return false;
    }
    auto [key, ext] = split_name(m.name);
    out.key = key;
    out.offset = m.offset;
    if (const auto [at, fresh] = seen.emplace(key, m.offset); !fresh)
        out.error = "key seen before in this shard (at byte " + std::to_string(at->second) + ")";
    for (;;) {
        if (!add(out, m, ext, with_image)) return false;  // the break cut this sample
        if (!header(m)) break;
        auto split = split_name(m.name);
        if (split.first != key) {
            pending = m;
            have_pending = true;
            break;
        }
        ext = split.second;
    }
    if (out.image_ext.empty() && out.error.empty()) out.error = "no image member (jpg, jpeg, png, webp)";
    return true;
}

ShardReader::ShardReader(const std::string& path, const Limits& limits) : impl_(std::make_unique<Impl>(path, limits)) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) impl_->fail("does not exist", 0);
    else if (S_ISDIR(st.st_mode)) impl_->fail("is a folder, not a tar shard", 0);
    else if (archive_read_open_filename(impl_->a, path.c_str(), 1 << 16) != ARCHIVE_OK)
        impl_->fail(impl_->archive_message(), 0);
}

ShardReader::ShardReader(const void* data, std::size_t size, const std::string& name, const Limits& limits)
    : impl_(std::make_unique<Impl>(name, limits)) {
    if (archive_read_open_memory(impl_->a, data, size) != ARCHIVE_OK) impl_->fail(impl_->archive_message(), 0);
}

ShardReader::~ShardReader() = default;

bool ShardReader::next(Sample& out, bool with_image) { return impl_->next(out, with_image); }
const std::string& ShardReader::error() const { return impl_->error; }
std::uint64_t ShardReader::error_offset() const { return impl_->error_offset; }

}  // namespace vitreg::webdataset
