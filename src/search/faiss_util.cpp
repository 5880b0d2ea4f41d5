#include "search/faiss_util.hpp"

#include <faiss/AutoTune.h>
#include <faiss/IVFlib.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>

#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace vitreg {

namespace {

// faiss::IOWriter onto an AtomicFile: the index is streamed, never held twice in memory.
struct AtomicWriter : faiss::IOWriter {
    AtomicFile& file;
    std::uint64_t written = 0;
    explicit AtomicWriter(AtomicFile& f) : file(f) {}
    size_t operator()(const void* ptr, size_t size, size_t nitems) override {
        file.write(ptr, size * nitems);
        written += size * nitems;
        return nitems;
    }
};

}  // namespace

void faiss_call(const std::string& where, const std::function<void()>& f) {
    try {
        f();
    } catch (const Error&) {
        throw;
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& e) {
        const std::string message = e.what();
        throw UsageError(where + ": " + message);
    }
}

void set_faiss_threads(int threads) {
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#else
    (void)threads;
#endif
}

std::unique_ptr<faiss::Index> make_index(const std::string& factory, int dim) {
    std::unique_ptr<faiss::Index> index;
    faiss_call("index: FAISS refuses the factory '" + factory + "'",
               [&] { index.reset(faiss::index_factory(dim, factory.c_str(), faiss::METRIC_INNER_PRODUCT)); });
    // Polysemous training (a Hamming-friendly code order, by simulated annealing) serves only
    // polysemous filtering, which search never turns on; it costs minutes of training.
    if (auto* ivfpq = dynamic_cast<faiss::IndexIVFPQ*>(faiss::ivflib::try_extract_index_ivf(index.get())))
        ivfpq->do_polysemous_training = false;
    if (auto* pq = dynamic_cast<faiss::IndexPQ*>(index.get())) pq->do_polysemous_training = false;
    return index;
}

std::string search_parameters(const faiss::Index& index) {
    if (const auto* ivf = faiss::ivflib::try_extract_index_ivf(&index)) {
        const auto c = static_cast<std::int64_t>(ivf->nlist);
        return "nprobe=" + std::to_string(std::min<std::int64_t>(c, std::max<std::int64_t>(16, c / 64)));
    }
    if (dynamic_cast<const faiss::IndexHNSW*>(&index)) return "efSearch=64";
    return {};
}

void apply_search_parameters(faiss::Index& index, const std::string& parameters, const std::string& where) {
    if (parameters.empty()) return;
    faiss_call(where + ": search parameters '" + parameters + "'",
               [&] { faiss::ParameterSpace().set_index_parameters(&index, parameters.c_str()); });
}

std::uint64_t write_faiss_index(const faiss::Index& index, const std::string& path) {
    AtomicFile file(path);
    AtomicWriter writer(file);
    writer.name = path;
    faiss_call(path, [&] { faiss::write_index(&index, &writer); });
    file.commit();
    return writer.written;
}

}  // namespace vitreg
