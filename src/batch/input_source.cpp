#include "input_source.hpp"

#include <algorithm>

#include "core/json_limits.hpp"
#include "io/webdataset.hpp"
#include "vitreg/batch_job.hpp"
#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"

namespace vitreg::batch {

namespace {

class FileInputs final : public InputSource {
public:
    explicit FileInputs(const std::vector<std::string>& paths) { names_ = paths; }
    bool shards() const override { return false; }
    void describe(std::size_t, nlohmann::ordered_json&) const override {}
    std::vector<Encoded> read(const std::size_t*, std::size_t n) override { return std::vector<Encoded>(n); }
    std::uint64_t order(std::size_t i) const override { return i; }
    std::vector<std::size_t> mine(int index, int count) const override { return shard_positions(names_, index, count); }
};

// One sample of a shard, or a shard's own fault (ordinal -1).
struct Entry {
    std::size_t shard = 0;
    std::uint64_t order = 0;  // the shard's position in the whole list << 32 | the entry's in the shard
    long ordinal = -1;  // the sample's place among the shard's samples
    std::string key;
    std::uint64_t offset = 0;
    std::string json, caption, error;
};

class ShardInputs final : public InputSource {
public:
    ShardInputs(const std::vector<std::string>& shards, const std::vector<std::size_t>& positions,
                const ImageLimits& limits)
        : limits_{static_cast<std::uint64_t>(std::max<std::int64_t>(0, limits.max_file_bytes))} {
        for (const std::size_t p : positions) {
            shards_.push_back(shards[p]);
            index(shards_.size() - 1, static_cast<std::uint64_t>(p) << 32);
        }
    }
    bool shards() const override { return true; }
    std::uint64_t order(std::size_t i) const override { return entries_[i].order; }
    std::vector<std::size_t> mine(int, int) const override { return shard_positions(names_, 0, 1); }

    void describe(std::size_t i, nlohmann::ordered_json& row) const override {
        const Entry& e = entries_[i];
        row["path"] = shards_[e.shard];
        if (e.ordinal >= 0) row["key"] = e.key;
        row["offset"] = e.offset;
        if (!e.caption.empty()) row["caption"] = e.caption;
        if (e.json.empty()) return;
        try {
            row["metadata"] = parse_json_bounded(e.json);
        } catch (const std::exception& x) {
            row["metadata_error"] = std::string("KEY.json is not JSON: ") + x.what();
        }
    }

    std::vector<Encoded> read(const std::size_t* positions, std::size_t n) override {
        std::vector<Encoded> out(n);
        for (std::size_t k = 0; k < n; ++k) {
            const Entry& e = entries_[positions[k]];
            if (!e.error.empty()) out[k].error = e.error;
            else fetch(e, out[k]);
        }
        return out;
    }

private:
    // The index pass over shard s: its samples' keys, offsets and text, and its fault.
    void index(std::size_t s, std::uint64_t order) {
        webdataset::ShardReader reader(shards_[s], limits_);
        webdataset::Sample sample;
        long ordinal = 0;
        for (; reader.next(sample, false); ++ordinal) {
            names_.push_back(shards_[s] + ":" + sample.key);
            entries_.push_back(Entry{s, order + static_cast<std::uint64_t>(ordinal), ordinal, sample.key, sample.offset,
                                     std::move(sample.json), std::move(sample.caption), std::move(sample.error)});
        }
        if (reader.error().empty()) return;
        names_.push_back(shards_[s]);
        const bool missing = reader.error() == "does not exist";
        entries_.push_back(Entry{s, order + static_cast<std::uint64_t>(ordinal), -1, "", reader.error_offset(), "", "",
                                 missing ? "shard does not exist"
                                         : "shard broken at byte " + std::to_string(reader.error_offset()) + ": " +
                                               reader.error()});
    }

    // The image bytes of sample `e`, the stream moved forward to it (reopened when it lies behind).
    void fetch(const Entry& e, Encoded& out) {
        if (!reader_ || at_shard_ != e.shard || at_ordinal_ > e.ordinal) {
            reader_ = std::make_unique<webdataset::ShardReader>(shards_[e.shard], limits_);
            at_shard_ = e.shard;
            at_ordinal_ = 0;
        }
        webdataset::Sample sample;
        for (; at_ordinal_ < e.ordinal; ++at_ordinal_)
            if (!reader_->next(sample, false)) break;
        const bool got = at_ordinal_ == e.ordinal && reader_->next(sample, true);
        ++at_ordinal_;
        if (!got) {
            out.error = "shard broke before this sample (at byte " + std::to_string(reader_->error_offset()) +
                        "): " + reader_->error();
            reader_.reset();
        } else if (sample.key != e.key || !sample.error.empty()) {
            out.error = "shard changed since it was indexed";
        } else {
            out.in_memory = true;
            out.bytes = std::move(sample.image);
        }
    }

    std::vector<std::string> shards_;
    webdataset::Limits limits_;
    std::vector<Entry> entries_;
    std::unique_ptr<webdataset::ShardReader> reader_;
    std::size_t at_shard_ = 0;
    long at_ordinal_ = 0;
};

}  // namespace

std::unique_ptr<InputSource> open_inputs(const std::vector<std::string>& inputs, const ImageLimits& limits,
                                         int shard_index, int shard_count) {
    const auto shards =
        static_cast<std::size_t>(std::count_if(inputs.begin(), inputs.end(), [](const std::string& p) { return is_shard_path(p); }));
    if (shards == 0) return std::make_unique<FileInputs>(inputs);
    if (shards != inputs.size()) {
        const auto other = std::find_if(inputs.begin(), inputs.end(), [](const std::string& p) { return !is_shard_path(p); });
        throw UsageError(*other + ": an image file among webdataset shards; give shards or images, not both");
    }
    return std::make_unique<ShardInputs>(inputs, shard_positions(inputs, shard_index, shard_count), limits);
}

}  // namespace vitreg::batch
