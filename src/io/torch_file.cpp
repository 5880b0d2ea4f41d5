#include "io/torch_file.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "unpickler.hpp"
#include "vitreg/error.hpp"
#include "zip_reader.hpp"

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

std::string printable(const std::string& s) {
    std::string out;
    for (const char c : s.substr(0, 120)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    return out + (s.size() > 120 ? "..." : "");
}

// The part of an entry name after its top folder ("archive/data.pkl" -> "data.pkl").
std::string in_archive(const std::string& name) {
    const auto slash = name.find('/');
    return slash == std::string::npos ? std::string() : name.substr(slash + 1);
}

}  // namespace

TorchFile::TorchFile(const std::string& path, const std::string& state_dict_key, const TorchFileLimits& limits)
    : path_(path), map_(path, 1, [](std::size_t) { return std::string("empty file, not a PyTorch checkpoint"); }) {
    read(state_dict_key, limits);
}

void TorchFile::read(const std::string& state_dict_key, const TorchFileLimits& limits) {
    const auto fail = [&](const std::string& what) { throw CheckpointError(path_ + ": " + what); };
    const auto* bytes = map_.data();
    const std::string resave = "torch.save(torch.load('" + path_ + "', map_location='cpu'), 'model.pth')";

    if (map_.size() >= 2 && bytes[0] == 0x80 && bytes[1] <= 5) {
        if (map_.size() >= 2 + sizeof kLegacyMagic && std::memcmp(bytes + 2, kLegacyMagic, sizeof kLegacyMagic) == 0)
            fail("written in PyTorch's legacy serialization format (before PyTorch 1.6, or "
                 "_use_new_zipfile_serialization=False), which vitreg does not read; save it again in the zip format "
                 "from Python: " + resave);
        fail("a bare pickle, not a torch.save zip archive; vitreg reads state dicts saved with torch.save (load it in "
             "PyTorch and torch.save(state_dict, 'model.pth'))");
    }
    if (map_.size() < 4 || (std::memcmp(bytes, "PK\x03\x04", 4) != 0 && std::memcmp(bytes, "PK\x05\x06", 4) != 0))
        fail("not a PyTorch checkpoint: torch.save writes a zip archive, and this file does not start like one");

    ZipLimits zl;
    zl.max_entries = limits.max_entries;
    const ZipReader zip(bytes, map_.size(), path_, zl);

    // torch.save: <name>/data.pkl, <name>/data/<key>, <name>/version. TorchScript adds code/ and constants.pkl.
    const ZipEntry* pkl = nullptr;
    for (const auto& e : zip.entries()) {
        const std::string inner = in_archive(e.name);
        if (inner == "constants.pkl" || inner.compare(0, 5, "code/") == 0)
            fail("a TorchScript archive (torch.jit.save: it holds code/ and constants.pkl), not a state dict, and vitreg "
                 "runs no TorchScript; from Python: torch.save(torch.jit.load('" + path_ +
                 "', map_location='cpu').state_dict(), 'model.pth'), or use the open_clip or Hugging Face release of "
                 "the same weights");
        if (inner == "data.pkl") {
            if (pkl) fail("two pickles in one archive ('" + printable(pkl->name) + "', '" + printable(e.name) + "')");
            pkl = &e;
        }
    }
    if (!pkl) fail("a zip archive without <name>/data.pkl: not written by torch.save");
    const std::string prefix = pkl->name.substr(0, pkl->name.size() - 8);  // "archive/"
    if (const ZipEntry* order = zip.find(prefix + "byteorder")) {
        const std::string value(reinterpret_cast<const char*>(zip.data(*order)), static_cast<std::size_t>(std::min<std::uint64_t>(order->size, 16)));
        if (value != "little") fail("storages are stored " + printable(value) + "-endian; vitreg reads little-endian ones");
    }
    if (pkl->size > limits.max_pickle_bytes)
        fail("data.pkl is " + std::to_string(pkl->size) + " bytes, over the limit of " + std::to_string(limits.max_pickle_bytes) +
             " for a state dict");
    const unsigned char* pkl_data = zip.data(*pkl);
    zip.check_crc(*pkl);

    pickle::Limits pl;
    pl.max_objects = limits.max_objects;
    pl.max_memo = limits.max_memo;
    pl.max_stack = limits.max_stack;
    pickle::Unpickler vm(pkl_data, static_cast<std::size_t>(pkl->size), path_ + ": " + printable(pkl->name), pl);
    const std::uint32_t root = vm.load();

    // Dict lookups: the last value stored under a string key wins, as in Python.
    const auto lookup = [&](const Object& d, const std::string& key) -> const Object* {
        const Object* found = nullptr;
        for (std::size_t i = 0; i + 1 < d.items.size(); i += 2) {
            const Object& k = vm.at(d.items[i]);
            if (k.kind == Kind::Str && k.s == key) found = &vm.at(d.items[i + 1]);
        }
        return found;
    };
    const auto holds_tensors = [&](const Object& d) {
        for (std::size_t i = 1; i < d.items.size(); i += 2)
            if (vm.at(d.items[i]).kind == Kind::Tensor) return true;
        return false;
    };
    const auto keys_of = [&](const Object& d) {
        std::string keys;
        std::size_t n = 0;
        for (std::size_t i = 0; i + 1 < d.items.size(); i += 2) {
            const Object& k = vm.at(d.items[i]);
            if (k.kind != Kind::Str) continue;
            if (++n > 12) return keys + ", ...";
            keys += (keys.empty() ? "'" : ", '") + printable(k.s) + "'";
        }
        return keys.empty() ? std::string("none") : keys;
    };
    const auto where = [&](const std::string& key) { return key.empty() ? std::string("the top level") : "'" + key + "'"; };

    const Object* dict = &vm.at(root);
    if (!state_dict_key.empty()) {
        std::string rest = state_dict_key;
        while (!rest.empty()) {
            if (dict->kind != Kind::Dict)
                fail("--key '" + state_dict_key + "': " + where(found_key_) + " is " + (dict->kind == Kind::Tensor ? "a tensor" : "not a dict"));
            // A key may itself hold dots: the longest prefix of the path that is a key wins.
            std::string part = rest;
            const Object* next = lookup(*dict, part);
            while (!next) {
                const auto dot = part.find_last_of('.');
                if (dot == std::string::npos) break;
                part.resize(dot);
                next = lookup(*dict, part);
            }
            if (!next)
                fail("--key '" + state_dict_key + "': " + where(found_key_) + " has no key '" + printable(rest.substr(0, rest.find('.'))) +
                     "' (its keys: " + keys_of(*dict) + ")");
            found_key_ += (found_key_.empty() ? "" : ".") + part;
            rest = rest.size() > part.size() ? rest.substr(part.size() + 1) : std::string();
            dict = next;
        }
        if (dict->kind != Kind::Dict || !holds_tensors(*dict))
            fail("--key '" + state_dict_key + "' names " + (dict->kind == Kind::Dict ? "a dict without tensors (its keys: " + keys_of(*dict) + ")" : std::string("no dict of tensors")));
    } else {
        if (dict->kind != Kind::Dict) fail("the pickled object is not a dict of tensors (a state dict)");
        for (int depth = 0; depth < 4 && !holds_tensors(*dict); ++depth) {
            const Object* next = nullptr;
            for (const char* k : {"model", "state_dict", "teacher", "module"}) {
                next = lookup(*dict, k);
                if (next && next->kind == Kind::Dict) {
                    found_key_ += (found_key_.empty() ? "" : ".") + std::string(k);
                    break;
                }
                next = nullptr;
            }
            if (!next) break;
            dict = next;
        }
        if (!holds_tensors(*dict))
            fail("no state dict: " + where(found_key_) + " holds no tensors (its keys: " + keys_of(*dict) +
                 "), and none of 'model', 'state_dict', 'teacher', 'module' does; name the dict of tensors with --key");
    }

    std::uint64_t gathered = 0;
    const std::uint64_t gather_limit = map_.size() + limits.max_gathered_extra_bytes;
    for (std::size_t i = 0; i + 1 < dict->items.size(); i += 2) {
        const Object& k = vm.at(dict->items[i]);
        const Object& t = vm.at(dict->items[i + 1]);
        if (k.kind != Kind::Str || t.kind != Kind::Tensor) continue;  // ints, strings, nested dicts: not weights
        const std::string& name = k.s;
        const auto bad = [&](const std::string& why) { fail("tensor '" + printable(name) + "': " + why); };
        const Object& storage = vm.at(t.items[0]);
        DType dtype;
        switch (storage.storage) {
            case StorageType::Float:
            case StorageType::Double: dtype = DType::F32; break;
            case StorageType::Half: dtype = DType::F16; break;
            case StorageType::BFloat16: dtype = DType::BF16; break;
            default:
                skipped_.push_back(name + " (" + pickle::to_string(storage.storage) + ")");
                continue;
        }
        const std::size_t in_size = pickle::item_size(storage.storage), out_size = dtype_size(dtype);
        const ZipEntry* entry = zip.find(prefix + "data/" + storage.s);
        if (!entry) bad("its storage '" + printable(storage.s) + "' has no entry " + printable(prefix) + "data/" + printable(storage.s) + " in the archive");
        const unsigned char* base = zip.data(*entry);
        std::uint64_t storage_bytes = 0;
        if (!checked_mul(static_cast<std::uint64_t>(storage.i), in_size, storage_bytes) || storage_bytes > entry->size)
            bad("its storage holds " + std::to_string(storage.i) + " elements of " + std::to_string(in_size) + " bytes, but entry '" +
                printable(entry->name) + "' has only " + std::to_string(entry->size) + " bytes");
        if (t.shape.size() > limits.max_rank) bad("rank " + std::to_string(t.shape.size()) + " is over the limit of " + std::to_string(limits.max_rank));

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
            if (!checked_add(gathered, v.nbytes, gathered) || gathered > gather_limit)
                bad("gathering strided tensors would take more than " + std::to_string(gather_limit) + " bytes");
            owned_.emplace_back(new unsigned char[v.nbytes]);
            unsigned char* out = owned_.back().get();
            const std::size_t rank = t.shape.size();
            std::vector<std::int64_t> idx(rank, 0);
            std::uint64_t src = static_cast<std::uint64_t>(t.i);
            for (std::uint64_t n = 0; n < numel; ++n) {
                const unsigned char* from = base + src * in_size;
                if (storage.storage == StorageType::Double) {
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
            v.data = out;
        }
        if (tensors_.size() >= limits.max_tensors && !tensors_.count(name))
            fail("more than " + std::to_string(limits.max_tensors) + " tensors");
        tensors_[name] = std::move(v);
    }
    if (tensors_.empty()) fail("the state dict at " + where(found_key_) + " holds no F32, F16, BF16 or F64 tensors");

    // DataParallel / DDP checkpoints name everything "module.<name>".
    bool all_module = true;
    for (const auto& kv : tensors_) all_module = all_module && kv.first.compare(0, 7, "module.") == 0;
    if (all_module) {
        std::map<std::string, TensorView> stripped;
        for (auto& kv : tensors_) {
            kv.second.name = kv.first.substr(7);
            stripped.emplace(kv.second.name, std::move(kv.second));
        }
        tensors_ = std::move(stripped);
    }
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
