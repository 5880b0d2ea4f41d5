#include "unpickler.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "io/printable.hpp"
#include "vitreg/error.hpp"

namespace vitreg::pickle {

std::size_t item_size(StorageType t) {
    switch (t) {
        case StorageType::Double:
        case StorageType::Long: return 8;
        case StorageType::Float:
        case StorageType::Int: return 4;
        case StorageType::Half:
        case StorageType::BFloat16:
        case StorageType::Short: return 2;
        case StorageType::Char:
        case StorageType::Byte:
        case StorageType::Bool: return 1;
    }
    return 1;
}

namespace {

const std::pair<const char*, StorageType> kStorageTypes[] = {
    {"FloatStorage", StorageType::Float}, {"HalfStorage", StorageType::Half},   {"BFloat16Storage", StorageType::BFloat16},
    {"DoubleStorage", StorageType::Double}, {"LongStorage", StorageType::Long}, {"IntStorage", StorageType::Int},
    {"ShortStorage", StorageType::Short}, {"CharStorage", StorageType::Char},   {"ByteStorage", StorageType::Byte},
    {"BoolStorage", StorageType::Bool},
};

// The callables a state dict needs; anything else is refused by name.
constexpr const char* kOrderedDict = "collections.OrderedDict";
constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kRebuildParameter = "torch._utils._rebuild_parameter";
constexpr const char* kRebuildParameterWithState = "torch._utils._rebuild_parameter_with_state";

// Every opcode of pickle protocols 0-5, for naming the ones refused.
const char* opcode_name(unsigned char op) {
    switch (op) {
        case 0x49: return "INT";
        case 0x4c: return "LONG";
        case 0x8b: return "LONG4";
        case 0x53: return "STRING";
        case 0x54: return "BINSTRING";
        case 0x55: return "SHORT_BINSTRING";
        case 0x8e: return "BINBYTES8";
        case 0x96: return "BYTEARRAY8";
        case 0x97: return "NEXT_BUFFER";
        case 0x98: return "READONLY_BUFFER";
        case 0x56: return "UNICODE";
        case 0x46: return "FLOAT";
        case 0x8f: return "EMPTY_SET";
        case 0x90: return "ADDITEMS";
        case 0x91: return "FROZENSET";
        case 0x32: return "DUP";
        case 0x67: return "GET";
        case 0x70: return "PUT";
        case 0x82: return "EXT1";
        case 0x83: return "EXT2";
        case 0x84: return "EXT4";
        case 0x69: return "INST";
        case 0x6f: return "OBJ";
        case 0x92: return "NEWOBJ_EX";
        case 0x50: return "PERSID";
        default: return nullptr;
    }
}

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::None: return "None";
        case Kind::Bool: return "a bool";
        case Kind::Int: return "an int";
        case Kind::Float: return "a float";
        case Kind::Str: return "a str";
        case Kind::Bytes: return "bytes";
        case Kind::List: return "a list";
        case Kind::Tuple: return "a tuple";
        case Kind::Dict: return "a dict";
        case Kind::Global: return "a global";
        case Kind::Storage: return "a storage";
        case Kind::Tensor: return "a tensor";
    }
    return "?";
}

}  // namespace

std::string to_string(StorageType t) {
    for (const auto& [name, type] : kStorageTypes)
        if (type == t) return name;
    return "?";
}

Unpickler::Unpickler(const unsigned char* data, std::size_t size, std::string where, const Limits& limits)
    : data_(data), size_(size), where_(std::move(where)), limits_(limits) {}

void Unpickler::fail(const std::string& what) const {
    throw CheckpointError(where_ + ": " + what + " (pickle byte " + std::to_string(op_pos_) + ")");
}

const unsigned char* Unpickler::take(std::uint64_t n) {
    if (n > size_ - pos_) fail("the pickle ends inside an opcode's operand (truncated)");
    const unsigned char* p = data_ + pos_;
    pos_ += static_cast<std::size_t>(n);
    return p;
}

std::uint64_t Unpickler::take_le(int n) {
    const unsigned char* p = take(static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

std::string Unpickler::take_line() {
    const std::size_t limit = std::min<std::size_t>(size_ - pos_, 1024);
    const void* nl = std::memchr(data_ + pos_, '\n', limit);
    if (!nl) fail("GLOBAL's name is not a line of at most 1024 bytes");
    const std::size_t n = static_cast<std::size_t>(static_cast<const unsigned char*>(nl) - (data_ + pos_));
    std::string line(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n + 1;
    return line;
}

std::uint32_t Unpickler::add(Object o) {
    if (objects_.size() >= limits_.max_objects)
        fail("more than " + std::to_string(limits_.max_objects) + " objects, over the limit for a state dict");
    objects_.push_back(std::move(o));
    return static_cast<std::uint32_t>(objects_.size() - 1);
}

void Unpickler::push(std::uint32_t index) {
    if (stack_.size() >= limits_.max_stack) fail("the stack grows past " + std::to_string(limits_.max_stack) + " entries");
    stack_.push_back(index);
}

std::uint32_t Unpickler::pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("stack underflow");
    const std::uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
}

std::size_t Unpickler::top_mark() {
    if (marks_.empty()) fail("an opcode needs a MARK, and there is none");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    return m;
}

Object& Unpickler::top_object(Kind kind, const char* opcode) {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail(std::string(opcode) + " on an empty stack");
    Object& o = objects_[stack_.back()];
    if (o.kind != kind) fail(std::string(opcode) + " on " + kind_name(o.kind) + ", not " + kind_name(kind));
    return o;
}

std::uint32_t Unpickler::global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    Object g;
    g.kind = Kind::Global;
    g.s = full;
    if (module == "torch") {
        for (const auto& [type_name, type] : kStorageTypes)
            if (name == type_name) {
                g.storage = type;
                g.i = 1;  // names a storage type
                return add(std::move(g));
            }
    }
    if (full == kOrderedDict || full == kRebuildTensor || full == kRebuildParameter || full == kRebuildParameterWithState)
        return add(std::move(g));
    fail("refusing to unpickle " + printable(full) +
         ": vitreg reads state dicts (tensors, storages, dicts, lists, numbers, strings) and never runs what a "
         "pickle names");
}

std::uint32_t Unpickler::rebuild_tensor(const Object& args) {
    // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    if (args.items.size() != 6 && args.items.size() != 7)
        fail(std::string(kRebuildTensor) + " takes 6 or 7 arguments, not " + std::to_string(args.items.size()));
    const Object& storage = objects_[args.items[0]];
    const Object& offset = objects_[args.items[1]];
    const Object& size = objects_[args.items[2]];
    const Object& stride = objects_[args.items[3]];
    if (storage.kind != Kind::Storage) fail(std::string(kRebuildTensor) + ": its storage is " + kind_name(storage.kind));
    if (offset.kind != Kind::Int || offset.i < 0) fail(std::string(kRebuildTensor) + ": its storage offset is not a non-negative int");
    if (size.kind != Kind::Tuple || stride.kind != Kind::Tuple || size.items.size() != stride.items.size())
        fail(std::string(kRebuildTensor) + ": size and stride are not tuples of one length");
    Object t;
    t.kind = Kind::Tensor;
    t.items = {args.items[0]};
    t.i = offset.i;
    for (std::size_t d = 0; d < size.items.size(); ++d) {
        const Object& s = objects_[size.items[d]];
        const Object& st = objects_[stride.items[d]];
        if (s.kind != Kind::Int || st.kind != Kind::Int || s.i < 0 || st.i < 0)
            fail(std::string(kRebuildTensor) + ": size and stride hold something other than non-negative ints");
        t.shape.push_back(s.i);
        t.stride.push_back(st.i);
    }
    return add(std::move(t));
}

std::uint32_t Unpickler::call(std::uint32_t callable, std::uint32_t args_index, const char* opcode) {
    const Object& fn = objects_[callable];
    const Object& args = objects_[args_index];
    if (fn.kind != Kind::Global) fail(std::string(opcode) + " calls " + kind_name(fn.kind) + ", not an allowed global");
    if (args.kind != Kind::Tuple) fail(std::string(opcode) + " of " + printable(fn.s) + " with " + kind_name(args.kind) + " for arguments");
    if (fn.s == kOrderedDict) {
        if (!args.items.empty()) fail(std::string(opcode) + ": collections.OrderedDict is only built empty");
        Object d;
        d.kind = Kind::Dict;
        return add(std::move(d));
    }
    if (std::string(opcode) == "REDUCE") {
        if (fn.s == kRebuildTensor) return rebuild_tensor(args);
        if (fn.s == kRebuildParameter || fn.s == kRebuildParameterWithState) {
            // (data, requires_grad, backward_hooks[, state]): the parameter is its tensor.
            const std::size_t n = fn.s == kRebuildParameter ? 3 : 4;
            if (args.items.size() != n || objects_[args.items[0]].kind != Kind::Tensor)
                fail(printable(fn.s) + " takes a tensor and " + std::to_string(n - 1) + " more arguments");
            return args.items[0];
        }
    }
    fail(std::string(opcode) + " of " + printable(fn.s) + " is not a call a state dict makes");
}

std::uint32_t Unpickler::persistent(std::uint32_t pid_index) {
    // ('storage', torch.<T>Storage, key, location, numel)
    const Object& pid = objects_[pid_index];
    const auto bad = [&](const std::string& why) { fail("persistent id " + why + "; torch.save writes ('storage', type, key, location, numel)"); };
    if (pid.kind != Kind::Tuple || pid.items.size() != 5) bad("is not a 5-tuple");
    const Object& tag = objects_[pid.items[0]];
    const Object& type = objects_[pid.items[1]];
    const Object& key = objects_[pid.items[2]];
    const Object& location = objects_[pid.items[3]];
    const Object& numel = objects_[pid.items[4]];
    if (tag.kind != Kind::Str || tag.s != "storage") bad("does not start with 'storage'");
    if (type.kind != Kind::Global || type.i != 1) bad("does not name a torch storage type");
    if (key.kind != Kind::Str || key.s.empty() || key.s.size() > 256) bad("has no storage key");
    if (location.kind != Kind::Str) bad("has no location");
    if (numel.kind != Kind::Int || numel.i < 0) bad("has no element count");
    Object s;
    s.kind = Kind::Storage;
    s.storage = type.storage;
    s.s = key.s;
    s.i = numel.i;
    return add(std::move(s));
}

void Unpickler::push_scalar(Kind kind, std::int64_t i) {
    Object o;
    o.kind = kind;
    o.i = i;
    push(add(std::move(o)));
}

void Unpickler::push_text(Kind kind, std::uint64_t n) {
    Object o;
    o.kind = kind;
    const unsigned char* p = take(n);
    o.s.assign(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
    push(add(std::move(o)));
}

void Unpickler::push_float() {
    const unsigned char* p = take(8);
    std::uint64_t bits = 0;
    for (int k = 0; k < 8; ++k) bits = (bits << 8) | p[k];
    Object o;
    o.kind = Kind::Float;
    std::memcpy(&o.f, &bits, 8);
    push(add(std::move(o)));
}

std::int64_t Unpickler::take_long1() {
    const auto n = static_cast<int>(take_le(1));
    if (n > 8) fail("an integer of " + std::to_string(n) + " bytes, wider than 64 bits");
    std::uint64_t v = n ? take_le(n) : 0;
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~std::uint64_t(0) << (8 * n);  // sign-extend
    return static_cast<std::int64_t>(v);
}

void Unpickler::push_container(Kind kind, std::size_t from) {
    Object o;
    o.kind = kind;
    o.items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
    stack_.resize(from);
    if (kind == Kind::Dict && o.items.size() % 2) fail("DICT with an odd number of items");
    push(add(std::move(o)));
}

// APPENDS / SETITEMS: the items since the mark go into the container just below it.
void Unpickler::extend(Kind kind, const char* opcode) {
    const std::size_t mark = top_mark();
    if (mark == 0 || (!marks_.empty() && mark <= marks_.back())) fail(std::string(opcode) + " with no container below its MARK");
    Object& target = objects_[stack_[mark - 1]];
    if (target.kind != kind) fail(std::string(opcode) + " into " + kind_name(target.kind));
    if (kind == Kind::Dict && (stack_.size() - mark) % 2) fail("SETITEMS with an odd number of items");
    target.items.insert(target.items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
}

void Unpickler::memo_put(std::uint64_t key) {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("a memo put with nothing on the stack");
    if (memo_.size() >= limits_.max_memo && !memo_.count(key))
        fail("the memo grows past " + std::to_string(limits_.max_memo) + " entries");
    memo_[key] = stack_.back();
}

void Unpickler::memo_get(std::uint64_t key) {
    const auto it = memo_.find(key);
    if (it == memo_.end()) fail("memo entry " + std::to_string(key) + " is read but was never written");
    push(it->second);
}

// BUILD: attributes of an OrderedDict (its _metadata) or a tensor; checked, then ignored.
void Unpickler::check_build() {
    const Object& state = objects_[pop()];
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("BUILD on an empty stack");
    const Kind target = objects_[stack_.back()].kind;
    if (target != Kind::Dict && target != Kind::Tensor) fail(std::string("BUILD on ") + kind_name(target));
    if (state.kind != Kind::None && state.kind != Kind::Dict && state.kind != Kind::Tuple)
        fail(std::string("BUILD with ") + kind_name(state.kind) + " for a state");
}

std::uint32_t Unpickler::load() {
    while (pos_ < size_) {
        op_pos_ = pos_;
        const unsigned char op = data_[pos_++];
        switch (op) {
            case 0x80: {  // PROTO
                const auto v = take_le(1);
                if (v > 5) fail("pickle protocol " + std::to_string(v) + " (vitreg reads 2 to 5)");
                break;
            }
            case 0x95: {  // FRAME: a length hint
                const auto n = take_le(8);
                if (n > size_ - pos_) fail("a FRAME runs past the end of the pickle (truncated)");
                break;
            }
            case '.': return pop();  // STOP
            case '(':  // MARK
                if (marks_.size() >= limits_.max_stack) fail("more than " + std::to_string(limits_.max_stack) + " open MARKs");
                marks_.push_back(stack_.size());
                break;
            case '0':  // POP: an item, or the mark when none is above it
                if (!marks_.empty() && stack_.size() == marks_.back()) marks_.pop_back();
                else pop();
                break;
            case '1': stack_.resize(top_mark()); break;  // POP_MARK
            case 'N': push_scalar(Kind::None, 0); break;
            case 0x88: push_scalar(Kind::Bool, 1); break;  // NEWTRUE
            case 0x89: push_scalar(Kind::Bool, 0); break;  // NEWFALSE
            case 'J': push_scalar(Kind::Int, static_cast<std::int32_t>(take_le(4))); break;  // BININT
            case 'K': push_scalar(Kind::Int, static_cast<std::int64_t>(take_le(1))); break;  // BININT1
            case 'M': push_scalar(Kind::Int, static_cast<std::int64_t>(take_le(2))); break;  // BININT2
            case 0x8a: push_scalar(Kind::Int, take_long1()); break;  // LONG1
            case 'G': push_float(); break;                            // BINFLOAT
            case 0x8c: push_text(Kind::Str, take_le(1)); break;       // SHORT_BINUNICODE
            case 'X': push_text(Kind::Str, take_le(4)); break;        // BINUNICODE
            case 0x8d: push_text(Kind::Str, take_le(8)); break;       // BINUNICODE8
            case 'C': push_text(Kind::Bytes, take_le(1)); break;      // SHORT_BINBYTES
            case 'B': push_text(Kind::Bytes, take_le(4)); break;      // BINBYTES
            case '}': push_container(Kind::Dict, stack_.size()); break;   // EMPTY_DICT
            case ']': push_container(Kind::List, stack_.size()); break;   // EMPTY_LIST
            case ')': push_container(Kind::Tuple, stack_.size()); break;  // EMPTY_TUPLE
            case 'd': push_container(Kind::Dict, top_mark()); break;      // DICT
            case 'l': push_container(Kind::List, top_mark()); break;      // LIST
            case 't': push_container(Kind::Tuple, top_mark()); break;     // TUPLE
            case 0x85:
            case 0x86:
            case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
                const std::size_t n = op - 0x84u;
                if (stack_.size() < (marks_.empty() ? 0 : marks_.back()) + n) fail("stack underflow");
                push_container(Kind::Tuple, stack_.size() - n);
                break;
            }
            case 's': {  // SETITEM
                const std::uint32_t value = pop(), key = pop();
                Object& d = top_object(Kind::Dict, "SETITEM");
                d.items.push_back(key);
                d.items.push_back(value);
                break;
            }
            case 'u': extend(Kind::Dict, "SETITEMS"); break;
            case 'a': {  // APPEND
                const std::uint32_t value = pop();
                top_object(Kind::List, "APPEND").items.push_back(value);
                break;
            }
            case 'e': extend(Kind::List, "APPENDS"); break;
            case 'q': memo_put(take_le(1)); break;          // BINPUT
            case 'r': memo_put(take_le(4)); break;          // LONG_BINPUT
            case 0x94: memo_put(memo_.size()); break;       // MEMOIZE
            case 'h': memo_get(take_le(1)); break;          // BINGET
            case 'j': memo_get(take_le(4)); break;          // LONG_BINGET
            case 'c': {  // GLOBAL "module\nname\n"
                const std::string module = take_line();
                const std::string name = take_line();
                push(global(module, name));
                break;
            }
            case 0x93: {  // STACK_GLOBAL
                const std::uint32_t name = pop(), module = pop();
                if (objects_[name].kind != Kind::Str || objects_[module].kind != Kind::Str) fail("STACK_GLOBAL of something other than two strings");
                push(global(objects_[module].s, objects_[name].s));
                break;
            }
            case 'R': {  // REDUCE
                const std::uint32_t args = pop(), fn = pop();
                push(call(fn, args, "REDUCE"));
                break;
            }
            case 0x81: {  // NEWOBJ
                const std::uint32_t args = pop(), cls = pop();
                push(call(cls, args, "NEWOBJ"));
                break;
            }
            case 'b': check_build(); break;  // BUILD
            case 'Q': push(persistent(pop())); break;  // BINPERSID
            default: {
                const char* name = opcode_name(op);
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02x", op);
                if (name) fail(std::string("opcode ") + name + " (" + hex + "), which a state dict does not need, is refused");
                fail(std::string("byte ") + hex + " is not a pickle opcode (corrupt data.pkl?)");
            }
        }
    }
    op_pos_ = pos_;
    fail("the pickle ends without STOP (truncated)");
}

}  // namespace vitreg::pickle
