#pragma once
// What the index's build and load share around FAISS: its exceptions as vitreg's errors, the
// search-time parameters each kind of index gets, and its file written through AtomicFile.
#include <faiss/Index.h>

#include <functional>
#include <memory>
#include <string>

namespace vitreg {

// Runs `f`; a FaissException (or another std::exception FAISS throws) becomes a UsageError
// "WHERE: MESSAGE".
void faiss_call(const std::string& where, const std::function<void()>& f);

// FAISS's OpenMP threads for what follows on this thread (threads > 0; 0 leaves all cores).
void set_faiss_threads(int threads);

// A new, empty index of `factory` over `dim` floats by inner product (UsageError naming a
// factory FAISS refuses).
std::unique_ptr<faiss::Index> make_index(const std::string& factory, int dim);

// The search-time parameters of the rule (docs/retrieval.md "Choosing an index"): nprobe =
// min(c, max(16, c/64)) for IVF{c}, efSearch=64 for HNSW, "" for the others.
std::string search_parameters(const faiss::Index& index);
void apply_search_parameters(faiss::Index& index, const std::string& parameters, const std::string& where);

// FAISS's write_index into PATH, atomically; returns the bytes written.
std::uint64_t write_faiss_index(const faiss::Index& index, const std::string& path);

}  // namespace vitreg
