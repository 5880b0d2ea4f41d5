#include "batch_input.hpp"

#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>

#include <chrono>
#include <future>
#include <atomic>
#include <map>

#include "core/half_rows.hpp"
#include "vitreg/error.hpp"
#include "vitreg/version.hpp"
#include "vitreg/writers.hpp"

namespace vitreg::batch {

namespace {

// load_pixels for a file's bytes in memory (a shard's member), the same decoder as from its path;
// the bytes are let go once decoded.
Pixels load_pixels_in_memory(std::string& bytes, const std::string& name, const ResizeSpec& spec, const Config& config,
                   const ImageLimits& limits, Geometry* geometry) {
    const ResizeSpec s = spec.for_model(config);
    const Image image = decode_image_memory(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), name,
                                            decode_options(s, config.patch, limits, name));
    std::string().swap(bytes);
    return preprocess(image, s, config.patch, config.mean, config.std, name, geometry);
}

}  // namespace

std::vector<Prepared> prepare(const Model& model, const std::string* names, std::vector<Encoded>& encoded,
                              std::size_t count, const ResizeSpec& resize, const ImageLimits& limits,
                              const InputCheck& check, tbb::task_arena& arena) {
    const Config& c = model.config();
    std::vector<Prepared> prepared(count);
    arena.execute([&] {
        tbb::parallel_for(std::size_t(0), count, [&](std::size_t i) {
            const std::string& path = names[i];
            Encoded& in = encoded[i];
            if (!in.error.empty()) {
                prepared[i].error = path + ": " + in.error;
                return;
            }
            try {
                Pixels px = in.in_memory ? load_pixels_in_memory(in.bytes, path, resize, c, limits, &prepared[i].geometry)
                                         : load_pixels(path, resize, c, limits, &prepared[i].geometry);
                check(px.height, px.width, prepared[i].geometry, path);
                prepared[i].pixels = std::move(px);
            } catch (const Error& e) {
                prepared[i].error = e.what();
            } catch (const std::bad_alloc&) {
                prepared[i].error = path + ": out of memory while decoding";
            }
        });
    });
    return prepared;
}

std::vector<Ran> run_by_size(const Model& model, const std::vector<Prepared>& prepared, const Probe& probe,
                             const ForwardOptions& options) {
    std::map<std::pair<int, int>, std::vector<std::size_t>> by_size;
    for (std::size_t i = 0; i < prepared.size(); ++i)
        if (prepared[i].pixels) by_size[{prepared[i].pixels->height, prepared[i].pixels->width}].push_back(i);
    std::vector<Ran> ran(prepared.size());
    for (const auto& [size, members] : by_size) {
        const auto [h, w] = size;
        const std::size_t plane = static_cast<std::size_t>(3) * h * w;
        std::vector<float> pixels(plane * members.size());
        for (std::size_t k = 0; k < members.size(); ++k)
            std::copy(prepared[members[k]].pixels->chw.begin(), prepared[members[k]].pixels->chw.end(),
                      pixels.begin() + static_cast<std::ptrdiff_t>(k * plane));
        auto trace = std::make_shared<Trace>();
        auto features = std::make_shared<const Features>(
            model.forward(pixels.data(), static_cast<int>(members.size()), h, w, probe, *trace, options));
        for (std::size_t k = 0; k < members.size(); ++k) ran[members[k]] = Ran{features, trace, static_cast<int>(k)};
    }
    return ran;
}

void stream_batches(const Model& model, const std::string* names, std::size_t count, const InputReader& read,
                    std::size_t batch,
                    const ResizeSpec& resize, const ImageLimits& limits, const Probe& probe,
                    const ForwardOptions& options, tbb::task_arena& arena, const BatchSink& sink,
                    const BatchRunner& runner, StageSeconds* stages) {
    batch = std::max<std::size_t>(1, batch);
    const InputCheck check = runner.check ? runner.check : [&](int h, int w, const Geometry&, const std::string& name) {
        model.check_tokens(h, w, options.max_tokens, name);
    };
    struct Work {
        std::size_t start = 0;
        std::vector<Encoded> encoded;
        std::vector<Prepared> prepared;
    };
    std::size_t next = 0;
    // Busy time per stage, added to `stages` (written only by the serial last stage, before the
    // sink, which may read it): decode runs on several batches at once.
    const StageSeconds base = stages ? *stages : StageSeconds{};
    std::atomic<std::int64_t> read_ns{0}, decode_ns{0};
    double forward = base.forward;
    using Clock = std::chrono::steady_clock;
    auto ns_since = [](Clock::time_point t0) {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    };
    ForwardOptions shared = options;  // the forward is the last stage, in the same arena
    shared.in_current_arena = true;
    arena.execute([&] {
        tbb::parallel_pipeline(
            3,  // batches in flight: one running, two decoding
            tbb::make_filter<void, std::shared_ptr<Work>>(tbb::filter_mode::serial_in_order,
                                                          [&](tbb::flow_control& fc) -> std::shared_ptr<Work> {
                                                              if (next >= count) {
                                                                  fc.stop();
                                                                  return nullptr;
                                                              }
                                                              auto w = std::make_shared<Work>();
                                                              w->start = next;
                                                              const std::size_t n = std::min(batch, count - next);
                                                              const auto t0 = Clock::now();
                                                              w->encoded = read(next, n);
                                                              read_ns += ns_since(t0);
                                                              if (w->encoded.size() != n) w->encoded.resize(n);
                                                              next += n;
                                                              return w;
                                                          }) &
                tbb::make_filter<std::shared_ptr<Work>, std::shared_ptr<Work>>(
                    tbb::filter_mode::parallel,
                    [&](std::shared_ptr<Work> w) {
                        const std::size_t n = std::min(batch, count - w->start);
                        const auto t0 = Clock::now();
                        w->prepared = prepare(model, names + w->start, w->encoded, n, resize, limits, check, arena);
                        decode_ns += ns_since(t0);
                        return w;
                    }) &
                tbb::make_filter<std::shared_ptr<Work>, void>(tbb::filter_mode::serial_in_order,
                                                              [&](std::shared_ptr<Work> w) {
                                                                  const auto t0 = Clock::now();
                                                                  const auto ran = runner.run ? runner.run(w->prepared, shared)
                                                                                              : run_by_size(model, w->prepared, probe, shared);
                                                                  if (stages)
                                                                      *stages = {base.read + read_ns * 1e-9,
                                                                                 base.decode + decode_ns * 1e-9,
                                                                                 forward + ns_since(t0) * 1e-9};
                                                                  sink(w->start, w->prepared, ran);
                                                                  forward += ns_since(t0) * 1e-9;
                                                              }));
    });
}

void write_array(const std::string& path_without_suffix, const std::string& tensor, const ArrayRef& array,
                 FeatureFormat format, const std::map<std::string, std::string>& metadata) {
    const std::string path = path_without_suffix + file_extension(format);
    if (format == FeatureFormat::Npy) write_npy(path, array);
    else write_safetensors(path, {{tensor, array}}, metadata);
}

namespace {

// One block of rows in the file's dtype, its buffers kept from block to block: fresh ones cost a
// page fault per 4 KB each time.
struct EncodedRows {
    std::vector<float> f32;
    std::vector<std::uint16_t> u16;
    std::string other;

    std::pair<const void*, std::size_t> encode(const float* x, std::size_t n, DType dtype) {
        if (dtype == DType::F32) {
            f32.assign(x, x + n);
            return {f32.data(), n * 4};
        }
        if (dtype == DType::F16) {
            u16.resize(n);
            floats_to_half(x, n, u16.data());
            return {u16.data(), n * 2};
        }
        other = array_bytes(ArrayRef{{static_cast<std::int64_t>(n)}, x, dtype});
        return {other.data(), other.size()};
    }
};

}  // namespace

void write_array_rows(const std::string& path_without_suffix, const std::string& tensor,
                      const std::vector<std::int64_t>& shape, DType dtype, FeatureFormat format,
                      const std::map<std::string, std::string>& metadata, std::size_t row_floats,
                      const std::function<void(std::size_t first, std::size_t count, float* out)>& fill) {
    const ArrayRef whole{shape, nullptr, dtype};
    const std::size_t rows = row_floats ? whole.numel() / row_floats : 0;
    // Past the page cache from 64 MB (a 2048² grid of 192 channels in f16 is 1.6 GB): on a
    // shared virtual disk, half the time of buffered writes and their fsync.
    const bool large = whole.numel() * dtype_size(dtype) >= (std::size_t(64) << 20);
    AtomicFile file(path_without_suffix + file_extension(format), large);
    file.write(format == FeatureFormat::Npy ? npy_header(whole) : safetensors_header({{tensor, whole}}, metadata));
    const std::size_t block = std::max<std::size_t>(1, (std::size_t(1) << 22) / std::max<std::size_t>(1, row_floats));
    std::vector<float> buffer(std::min(block, rows) * row_floats);
    // Two encoded blocks: one being written while the next is filled and encoded (the write, a
    // copy into the page cache, ran serially between the parallel fills before).
    EncodedRows encoded[2];
    std::future<void> writing;
    for (std::size_t first = 0, k = 0; first < rows; first += block, ++k) {
        const std::size_t count = std::min(block, rows - first);
        fill(first, count, buffer.data());
        const auto bytes = encoded[k % 2].encode(buffer.data(), count * row_floats, dtype);
        if (writing.valid()) writing.get();  // block k - 1, from the other buffer
        writing = std::async(std::launch::async, [&file, bytes] { file.write(bytes.first, bytes.second); });
    }
    if (writing.valid()) writing.get();
    file.commit();
}

bool start_row(nlohmann::ordered_json& row, const std::string& path, const Prepared& prepared, BatchSummary& summary) {
    row["path"] = path;
    if (prepared.pixels) return true;
    row["status"] = "error";
    row["error"] = prepared.error;
    ++summary.failed;
    return false;
}

void finish(const std::string& out_dir, const std::vector<nlohmann::ordered_json>& manifest, nlohmann::json run,
            const BatchSummary& summary) {
    std::string lines;
    for (const auto& row : manifest)  // key, caption and metadata come from shards: any bytes
        lines += row.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    write_file_atomic(out_dir + "/manifest.jsonl", lines);
    run["inputs"] = summary.inputs;
    run["ok"] = summary.ok;
    run["failed"] = summary.failed;
    run["vitreg_version"] = VITREG_VERSION;
    write_file_atomic(out_dir + "/run.json", run.dump(2) + "\n");
}

}  // namespace vitreg::batch
