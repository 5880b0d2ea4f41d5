#include "io/torch_file.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "unpickler.hpp"
#include "vitreg/error.hpp"
#include "zip_reader.hpp"
#include "io/printable.hpp"

namespace vitreg {

namespace {

using pickle::Kind;
using pickle::Object;
using pickle::StorageType;

// The legacy format opens with a pickled magic number: LONG1 of 0x1950a86a20f9469cfc6c.
const unsigned char kLegacyMagic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr std::uint64_t kMaxElements = std::uint64_t(1) << 62;

bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
bool checked_add(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return !__builtin_add_overflow(a, b, &out); }

// The part of an entry name after its top folder ("archive/data.pkl" -> "data.pkl").
std::string in_archive(const std::string& name) {
    const auto slash = name.find('/');
    return slash == std::string::npos ? std::string() : name.substr(slash + 1);
}

// Throws the file's CheckpointError, "PATH: what".
struct Fault {
    const std::string& path;
    [[noreturn]] void operator()(const std::string& what) const { throw CheckpointError(path + ": " + what); }
};

// Refuses a file that is not a torch.save zip archive, saying what it is where that is known
// (the legacy format, a bare pickle) and how to get one vitreg reads.
void check_zip_signature(const unsigned char* bytes, std::size_t size, const Fault& fail) {
    if (size >= 2 && bytes[0] == 0x80 && bytes[1] <= 5) {
        if (size >= 2 + sizeof kLegacyMagic && std::memcmp(bytes + 2, kLegacyMagic, sizeof kLegacyMagic) == 0)
            fail("written in PyTorch's legacy serialization format (before PyTorch 1.6, or "
                 "_use_new_zipfile_serialization=False), which vitreg does not read; save it again in the zip format "
                 "from Python: torch.save(torch.load('" + fail.path + "', map_location='cpu'), 'model.pth')");
        fail("a bare pickle, not a torch.save zip archive; vitreg reads state dicts saved with torch.save (load it in "
             "PyTorch and torch.save(state_dict, 'model.pth'))");
    }
    if (size < 4 || (std::memcmp(bytes, "PK\x03\x04", 4) != 0 && std::memcmp(bytes, "PK\x05\x06", 4) != 0))
        fail("not a PyTorch checkpoint: torch.save writes a zip archive, and this file does not start like one");
}

// The archive's one pickle. torch.save: <name>/data.pkl, <name>/data/<key>, <name>/version;
// TorchScript adds code/ and constants.pkl, and is refused.
const ZipEntry& find_pickle(const ZipReader& zip, const Fault& fail) {
    const ZipEntry* pkl = nullptr;
    for (const auto& e : zip.entries()) {
        const std::string inner = in_archive(e.name);
        if (inner == "constants.pkl" || inner.compare(0, 5, "code/") == 0)
            fail("a TorchScript archive (torch.jit.save: it holds code/ and constants.pkl), not a state dict, and vitreg "
                 "runs no TorchScript; from Python: torch.save(torch.jit.load('" + fail.path +
                 "', map_location='cpu').state_dict(), 'model.pth'), or use the open_clip or Hugging Face release of "
                 "the same weights");
        if (inner == "data.pkl") {
            if (pkl) fail("two pickles in one archive ('" + printable(pkl->name) + "', '" + printable(e.name) + "')");
            pkl = &e;
        }
    }
    if (!pkl) fail("a zip archive without <name>/data.pkl: not written by torch.save");
    return *pkl;
}

// Storages are read as little-endian: an archive that records another byte order is refused.
void check_byte_order(const ZipReader& zip, const std::string& prefix, const Fault& fail) {
    if (const ZipEntry* order = zip.find(prefix + "byteorder")) {
        const std::string value(reinterpret_cast<const char*>(zip.data(*order)), static_cast<std::size_t>(std::min<std::uint64_t>(order->size, 16)));
        if (value != "little") fail("storages are stored " + printable(value) + "-endian; vitreg reads little-endian ones");
    }
}

// Dict lookups: the last value stored under a string key wins, as in Python.
const Object* lookup(const pickle::Unpickler& vm, const Object& d, const std::string& key) {
    const Object* found = nullptr;
    for (std::size_t i = 0; i + 1 < d.items.size(); i += 2) {
        const Object& k = vm.at(d.items[i]);
        if (k.kind == Kind::Str && k.s == key) found = &vm.at(d.items[i + 1]);
    }
    return found;
}

bool holds_tensors(const pickle::Unpickler& vm, const Object& d) {
    for (std::size_t i = 1; i < d.items.size(); i += 2)
        if (vm.at(d.items[i]).kind == Kind::Tensor) return true;
    return false;
}

// A dict's first string keys, for an error.
std::string keys_of(const pickle::Unpickler& vm, const Object& d) {
    std::string keys;
    std::size_t n = 0;
    for (std::size_t i = 0; i + 1 < d.items.size(); i += 2) {
        const Object& k = vm.at(d.items[i]);
        if (k.kind != Kind::Str) continue;
        if (++n > 12) return keys + ", ...";
        keys += (keys.empty() ? "'" : ", '") + printable(k.s) + "'";
    }
    return keys.empty() ? std::string("none") : keys;
}

std::string where(const std::string& key) { return key.empty() ? std::string("the top level") : "'" + key + "'"; }

// The dict of tensors at the dotted path `state_dict_key` (--key) under `root`; `found` gets the
// keys taken, which may themselves hold dots.
const Object& dict_at_key(const pickle::Unpickler& vm, const Object& root, const std::string& state_dict_key,
                          std::string& found, const Fault& fail) {
    const Object* dict = &root;
    std::string rest = state_dict_key;
    while (!rest.empty()) {
        if (dict->kind != Kind::Dict)
            fail("--key '" + state_dict_key + "': " + where(found) + " is " + (dict->kind == Kind::Tensor ? "a tensor" : "not a dict"));
        // A key may itself hold dots: the longest prefix of the path that is a key wins.
        std::string part = rest;
        const Object* next = lookup(vm, *dict, part);
        while (!next) {
            const auto dot = part.find_last_of('.');
            if (dot == std::string::npos) break;
            part.resize(dot);
            next = lookup(vm, *dict, part);
        }
        if (!next)
            fail("--key '" + state_dict_key + "': " + where(found) + " has no key '" + printable(rest.substr(0, rest.find('.'))) +
                 "' (its keys: " + keys_of(vm, *dict) + ")");
        found += (found.empty() ? "" : ".") + part;
        rest = rest.size() > part.size() ? rest.substr(part.size() + 1) : std::string();
        dict = next;
    }
    if (dict->kind != Kind::Dict || !holds_tensors(vm, *dict))
        fail("--key '" + state_dict_key + "' names " + (dict->kind == Kind::Dict ? "a dict without tensors (its keys: " + keys_of(vm, *dict) + ")" : std::string("no dict of tensors")));
    return *dict;
}

// The state dict without --key: `root` when it holds tensors, else the first of model,
// state_dict, teacher, module that does, a few levels down; `found` gets the keys taken.
const Object& find_state_dict(const pickle::Unpickler& vm, const Object& root, std::string& found, const Fault& fail) {
    const Object* dict = &root;
    if (dict->kind != Kind::Dict) fail("the pickled object is not a dict of tensors (a state dict)");
    for (int depth = 0; depth < 4 && !holds_tensors(vm, *dict); ++depth) {
        const Object* next = nullptr;
        for (const char* k : {"model", "state_dict", "teacher", "module"}) {
            next = lookup(vm, *dict, k);
            if (next && next->kind == Kind::Dict) {
                found += (found.empty() ? "" : ".") + std::string(k);
                break;
            }
            next = nullptr;
        }
        if (!next) break;
        dict = next;
    }
    if (!holds_tensors(vm, *dict))
        fail("no state dict: " + where(found) + " holds no tensors (its keys: " + keys_of(vm, *dict) +
             "), and none of 'model', 'state_dict', 'teacher', 'module' does; name the dict of tensors with --key");
    return *dict;
}

// The dtype a storage is read as; none for the integer and bool storages, which are skipped.
std::optional<DType> read_as(StorageType storage) {
    switch (storage) {
        case StorageType::Float:
        case StorageType::Double: return DType::F32;
        case StorageType::Half: return DType::F16;
        case StorageType::BFloat16: return DType::BF16;
        default: return std::nullopt;
    }
}

// Copies `numel` elements of a strided tensor `t` from its storage `base` (items of in_size
// bytes) into `out` in row-major order, F64 rounded to F32.
void gather(const unsigned char* base, const Object& t, StorageType storage, std::size_t in_size, std::size_t out_size,
            std::uint64_t numel, unsigned char* out) {
    const std::size_t rank = t.shape.size();
    std::vector<std::int64_t> idx(rank, 0);
    std::uint64_t src = static_cast<std::uint64_t>(t.i);
    for (std::uint64_t n = 0; n < numel; ++n) {
        const unsigned char* from = base + src * in_size;
        if (storage == StorageType::Double) {
            double x;
            std::memcpy(&x, from, 8);
            const float f = static_cast<float>(x);
            std::memcpy(out + n * 4, &f, 4);
        } else {
            std::memcpy(out + n * out_size, from, out_size);
        }
        for (std::size_t d = rank; d-- > 0;) {
            src += static_cast<std::uint64_t>(t.stride[d]);
            if (++idx[d] < t.shape[d]) break;
            src -= static_cast<std::uint64_t>(t.stride[d]) * static_cast<std::uint64_t>(t.shape[d]);
            idx[d] = 0;
        }
    }
}

// The tensors' data in the archive's storages: a view into the mapped file where a tensor is
// contiguous and stored as it is read, else gathered into a buffer the file owns, all such
// buffers together within the file's size plus the limit's extra bytes.
class StorageReader {
public:
    StorageReader(const ZipReader& zip, std::string prefix, const TorchFileLimits& limits, std::uint64_t file_size,
                  std::vector<std::unique_ptr<unsigned char[]>>& owned)
        : zip_(zip), prefix_(std::move(prefix)), limits_(limits),
          gather_limit_(file_size + limits.max_gathered_extra_bytes), owned_(owned) {}

    // Tensor `t` named `name` over `storage`, its shape and strides checked against the storage.
    TensorView view(const std::string& name, const Object& t, const Object& storage, DType dtype, const Fault& fail) {
        const auto bad = [&](const std::string& why) { fail("tensor '" + printable(name) + "': " + why); };
        const std::size_t in_size = pickle::item_size(storage.storage), out_size = dtype_size(dtype);
        const ZipEntry* entry = zip_.find(prefix_ + "data/" + storage.s);
        if (!entry) bad("its storage '" + printable(storage.s) + "' has no entry " + printable(prefix_) + "data/" + printable(storage.s) + " in the archive");
        const unsigned char* base = zip_.data(*entry);
        std::uint64_t storage_bytes = 0;
        if (!checked_mul(static_cast<std::uint64_t>(storage.i), in_size, storage_bytes) || storage_bytes > entry->size)
            bad("its storage holds " + std::to_string(storage.i) + " elements of " + std::to_string(in_size) + " bytes, but entry '" +
                printable(entry->name) + "' has only " + std::to_string(entry->size) + " bytes");
        if (t.shape.size() > limits_.max_rank) bad("rank " + std::to_string(t.shape.size()) + " is over the limit of " + std::to_string(limits_.max_rank));

        TensorView v;
        v.name = name;
        v.dtype = dtype;
        std::uint64_t numel = 1, last = static_cast<std::uint64_t>(t.i);  // the highest element index it reads
        for (std::size_t d = 0; d < t.shape.size(); ++d) {
            const auto size = static_cast<std::uint64_t>(t.shape[d]), stride = static_cast<std::uint64_t>(t.stride[d]);
            std::uint64_t span = 0;
            if (!checked_mul(numel, size, numel) || numel > kMaxElements) bad("its shape overflows");
            if (size > 0 && (!checked_mul(size - 1, stride, span) || !checked_add(last, span, last))) bad("its strides overflow");
            v.shape.push_back(t.shape[d]);
        }
        if (numel > 0 ? last >= static_cast<std::uint64_t>(storage.i) : static_cast<std::uint64_t>(t.i) > static_cast<std::uint64_t>(storage.i))
            bad("shape " + v.shape_string() + " at storage offset " + std::to_string(t.i) +
                " reads past the end of its storage of " + std::to_string(storage.i) + " elements");
        bool contiguous = true;
        std::uint64_t expected = 1;
        for (std::size_t d = t.shape.size(); d-- > 0;) {
            if (t.shape[d] != 1 && static_cast<std::uint64_t>(t.stride[d]) != expected) contiguous = false;
            expected *= static_cast<std::uint64_t>(t.shape[d]);
        }
        std::uint64_t nbytes = 0;
        if (!checked_mul(numel, out_size, nbytes) || nbytes > std::numeric_limits<std::size_t>::max()) bad("its shape overflows");
        v.nbytes = static_cast<std::size_t>(nbytes);
        if (numel == 0) {
            v.data = base;
        } else if (contiguous && in_size == out_size) {
            v.data = base + static_cast<std::uint64_t>(t.i) * in_size;  // zero copy
        } else {  // gathered: strided views, F64 rounded to F32
            if (!checked_add(gathered_, v.nbytes, gathered_) || gathered_ > gather_limit_)
                bad("gathering strided tensors would take more than " + std::to_string(gather_limit_) + " bytes");
            owned_.emplace_back(new unsigned char[v.nbytes]);
            gather(base, t, storage.storage, in_size, out_size, numel, owned_.back().get());
            v.data = owned_.back().get();
        }
        return v;
    }

private:
    const ZipReader& zip_;
    const std::string prefix_;  // the archive's top folder, "archive/"
    const TorchFileLimits& limits_;
    std::uint64_t gathered_ = 0;
    const std::uint64_t gather_limit_;
    std::vector<std::unique_ptr<unsigned char[]>>& owned_;
};

// DataParallel / DDP checkpoints name everything "module.<name>": the prefix is dropped.
void strip_module_prefix(std::map<std::string, TensorView>& tensors) {
    bool all_module = true;
    for (const auto& kv : tensors) all_module = all_module && kv.first.compare(0, 7, "module.") == 0;
    if (!all_module) return;
    std::map<std::string, TensorView> stripped;
    for (auto& kv : tensors) {
        kv.second.name = kv.first.substr(7);
        stripped.emplace(kv.second.name, std::move(kv.second));
    }
    tensors = std::move(stripped);
}

}  // namespace

TorchFile::TorchFile(const std::string& path, const std::string& state_dict_key, const TorchFileLimits& limits)
    : path_(path), map_(path, 1, [](std::size_t) { return std::string("empty file, not a PyTorch checkpoint"); }) {
    read(state_dict_key, limits);
}

void TorchFile::read(const std::string& state_dict_key, const TorchFileLimits& limits) {
    const Fault fail{path_};
    check_zip_signature(map_.data(), map_.size(), fail);
    ZipLimits zl;
    zl.max_entries = limits.max_entries;
    const ZipReader zip(map_.data(), map_.size(), path_, zl);
    const ZipEntry& pkl = find_pickle(zip, fail);
    const std::string prefix = pkl.name.substr(0, pkl.name.size() - 8);  // "archive/"
    check_byte_order(zip, prefix, fail);
    if (pkl.size > limits.max_pickle_bytes)
        fail("data.pkl is " + std::to_string(pkl.size) + " bytes, over the limit of " + std::to_string(limits.max_pickle_bytes) +
             " for a state dict");
    const unsigned char* pkl_data = zip.data(pkl);
    zip.check_crc(pkl);

    pickle::Limits pl;
    pl.max_objects = limits.max_objects;
    pl.max_memo = limits.max_memo;
    pl.max_stack = limits.max_stack;
    pickle::Unpickler vm(pkl_data, static_cast<std::size_t>(pkl.size), path_ + ": " + printable(pkl.name), pl);
    const Object& root = vm.at(vm.load());
    const Object& dict = state_dict_key.empty() ? find_state_dict(vm, root, found_key_, fail)
                                                : dict_at_key(vm, root, state_dict_key, found_key_, fail);

    StorageReader storages(zip, prefix, limits, map_.size(), owned_);
    for (std::size_t i = 0; i + 1 < dict.items.size(); i += 2) {
        const Object& k = vm.at(dict.items[i]);
        const Object& t = vm.at(dict.items[i + 1]);
        if (k.kind != Kind::Str || t.kind != Kind::Tensor) continue;  // ints, strings, nested dicts: not weights
        const std::string& name = k.s;
        const Object& storage = vm.at(t.items[0]);
        const std::optional<DType> dtype = read_as(storage.storage);
        if (!dtype) {
            skipped_.push_back(name + " (" + pickle::to_string(storage.storage) + ")");
            continue;
        }
        TensorView v = storages.view(name, t, storage, *dtype, fail);
        if (tensors_.size() >= limits.max_tensors && !tensors_.count(name))
            fail("more than " + std::to_string(limits.max_tensors) + " tensors");
        tensors_[name] = std::move(v);
    }
    if (tensors_.empty()) fail("the state dict at " + where(found_key_) + " holds no F32, F16, BF16 or F64 tensors");
    strip_module_prefix(tensors_);
}

bool TorchFile::has(const std::string& name) const { return tensors_.count(name) != 0; }

const TensorView& TorchFile::get(const std::string& name) const {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) throw CheckpointError(path_ + ": missing tensor '" + name + "'");
    return it->second;
}

std::vector<std::string> TorchFile::names() const {
    std::vector<std::string> out;
    for (const auto& kv : tensors_) out.push_back(kv.first);
    return out;
}

void TorchFile::release(const TensorView& tensor) const {
    const auto* begin = map_.data();
    if (tensor.data >= begin && tensor.data < begin + map_.size()) drop_pages(tensor.data, tensor.nbytes);
}

}  // namespace vitreg
