#pragma once
// A restricted pickle machine for what torch.save writes into data.pkl: dicts and
// OrderedDicts, lists, tuples, strings, bytes, numbers, and tensors built by
// torch._utils._rebuild_tensor_v2 / _rebuild_parameter from storages named by persistent ids.
// It knows a fixed list of opcodes and globals; any other global is refused by name ("refusing
// to unpickle posix.system") and nothing is ever called or executed: the result is a graph of
// plain objects. Memo, stack, objects and input are bounded, and every opcode costs O(its
// operands), so a hostile pickle cannot run long or large.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace vitreg::pickle {

// torch.<Name>Storage: the element type of a storage.
enum class StorageType : std::uint8_t { Float, Half, BFloat16, Double, Long, Int, Short, Char, Byte, Bool };
std::size_t item_size(StorageType t);
std::string to_string(StorageType t);  // "FloatStorage"

enum class Kind : std::uint8_t { None, Bool, Int, Float, Str, Bytes, List, Tuple, Dict, Global, Storage, Tensor };

// One unpickled object. Containers hold indices into the machine's object table (so shared and
// even cyclic references are plain numbers).
struct Object {
    Kind kind = Kind::None;
    StorageType storage = StorageType::Float;  // Storage; Global naming a storage type
    std::int64_t i = 0;    // Int, Bool (0/1); Storage: its numel; Tensor: the storage offset
    double f = 0;          // Float
    std::string s;         // Str, Bytes; Global: "module.name"; Storage: its key
    std::vector<std::uint32_t> items;  // List, Tuple; Dict: key, value, key, value, ...; Tensor: {storage}
    std::vector<std::int64_t> shape, stride;  // Tensor
};

struct Limits {
    std::size_t max_objects = 1u << 21;
    std::size_t max_memo = 1u << 21;
    std::size_t max_stack = 1u << 20;  // stack entries and open marks, each
};

class Unpickler {
public:
    // `where` prefixes every error ("PATH: data.pkl").
    Unpickler(const unsigned char* data, std::size_t size, std::string where, const Limits& limits = {});

    // Runs the pickle to its STOP and returns the index of the result. Throws CheckpointError
    // naming `where`, the fault and its byte offset.
    std::uint32_t load();
    const Object& at(std::uint32_t index) const { return objects_[index]; }

private:
    [[noreturn]] void fail(const std::string& what) const;
    const unsigned char* take(std::uint64_t n);
    std::uint64_t take_le(int n);
    std::string take_line();

    std::uint32_t add(Object o);
    void push(std::uint32_t index);
    std::uint32_t pop();
    std::size_t top_mark();  // pops the last mark, returns the stack size it marked
    Object& top_object(Kind kind, const char* opcode);

    // What the opcodes do to the stack and the memo (load is their loop).
    void push_scalar(Kind kind, std::int64_t i);
    void push_text(Kind kind, std::uint64_t n);        // the next n bytes, as a Str or Bytes
    void push_float();                                 // BINFLOAT: a big-endian double
    std::int64_t take_long1();                         // LONG1: little-endian two's complement
    void push_container(Kind kind, std::size_t from);  // of the stack's items from `from` on
    void extend(Kind kind, const char* opcode);        // APPENDS, SETITEMS
    void memo_put(std::uint64_t key);
    void memo_get(std::uint64_t key);
    void check_build();                                // BUILD

    std::uint32_t global(const std::string& module, const std::string& name);
    std::uint32_t call(std::uint32_t callable, std::uint32_t args, const char* opcode);
    std::uint32_t persistent(std::uint32_t pid);
    std::uint32_t rebuild_tensor(const Object& args);

    const unsigned char* data_;
    std::size_t size_, pos_ = 0, op_pos_ = 0;
    std::string where_;
    Limits limits_;
    std::vector<Object> objects_;
    std::vector<std::uint32_t> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, std::uint32_t> memo_;
};

}  // namespace vitreg::pickle
