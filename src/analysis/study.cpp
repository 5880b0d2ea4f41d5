#include "vitreg/analysis/study.hpp"

#include <stdlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "vitreg/analysis/calibrate.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/analysis/classifier_head.hpp"
#include "vitreg/error.hpp"
#include "vitreg/image.hpp"
#include "vitreg/model_spec.hpp"
#include "vitreg/analysis/sink_calibration.hpp"

namespace vitreg {

StudyConfig StudyConfig::parse(const std::string& text, const SafetensorsLimits& limits) {
    const ModelSpec spec = ModelSpec::parse(text);
    StudyConfig c;
    c.name = spec.label();
    c.path = resolve_model_path(spec.model);
    c.overrides.attention = spec.attention;
    c.overrides.limits = limits;
    if (spec.precision) c.precision = *spec.precision;
    if (spec.intervention) c.intervention = *spec.intervention;
    // Refuse a bad checkpoint, precision or intervention now, without packing the weights
    // (the study loads each configuration when its turn comes).
    c.precision.validate();
    c.intervention.validate(Checkpoint(c.path, c.overrides).config());
    return c;
}

Model StudyConfig::load() const { return Model::load(path, overrides, precision).with(intervention); }

StudyImages StudyImages::files(const std::vector<std::string>& paths, const ImageLimits& limits) {
    StudyImages s;
    s.names = paths;
    s.load = [paths, limits](std::size_t i, const ResizeSpec& resize, const Config& c) {
        return load_pixels(paths.at(i), resize, c, limits);
    };
    return s;
}

namespace {

using nlohmann::json;

// The kinds a token can be, in the order that breaks ties.
const std::array<const char*, 5> kKinds = {"cls", "register", "test_time_register", "artifact", "patch"};

// A private folder for the files the study makes to load its variants (int8 ranges, calibrated
// sink checkpoints), removed when the study ends.
class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "vitreg-study-XXXXXX").string();
        if (!mkdtemp(pattern.data())) throw IoError(pattern + ": cannot make a temporary folder");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

// The kind of token t of image b of a trace, given that image's artifact tokens.
int token_kind(int t, const Trace& trace, const std::vector<int>& artifacts) {
    if (trace.class_token && t == 0) return 0;
    if (t < trace.register_offset() + trace.registers - trace.test_time_registers) return 1;
    if (t < trace.patch_offset()) return 2;
    return std::find(artifacts.begin(), artifacts.end(), t) != artifacts.end() ? 3 : 4;
}

// Cosines of a variant's features to a reference's, image by image.
struct Cosines {
    double cls = 0, cls_min = 1, patch = 0;
    int images = 0;
    void add(const Features& got, const Features& want) {
        const FeatureAgreement a = agreement(got, want);
        cls += a.cls_cosine_mean;
        cls_min = std::min(cls_min, a.cls_cosine_mean);
        patch += a.patch_cosine_mean;
        ++images;
    }
    json to_json() const {
        return {{"cls_cosine", cls / images}, {"cls_cosine_min", cls_min}, {"patch_cosine", patch / images}};
    }
};

json nested(const std::vector<double>& values, int rows, int cols) {
    json out = json::array();
    for (int r = 0; r < rows; ++r) {
        json row = json::array();
        for (int c = 0; c < cols; ++c) row.push_back(values[static_cast<std::size_t>(r) * cols + c]);
        out.push_back(row);
    }
    return out;
}

double mean_of(const json& grid) {
    double sum = 0;
    int n = 0;
    for (const auto& row : grid)
        for (const auto& v : row) sum += v.get<double>(), ++n;
    return n ? sum / n : 0;
}

// Defect directions by checkpoint file: they are a function of its weights alone, so the
// configurations of one file (its precisions and interventions) share one fit.
using DefectFits = std::map<std::string, std::shared_ptr<const DefectDirections>>;

// One configuration's study.
class ConfigStudy {
public:
    ConfigStudy(const StudyConfig& cfg, const StudyImages& images, const StudyOptions& o, const TempDir& tmp,
                const std::map<std::string, json>* labels, const std::function<void(const std::string&)>& log,
                DefectFits& fits)
        : cfg_(cfg), images_(images), o_(o), tmp_(tmp), labels_(labels), log_(log), model_(cfg.load()),
          c_(model_.config()) {
        rules_ = o.rules;
        auto& fit = fits[model_.path()];
        rules_.rule.defects = fit;
        rules_.rule = rules_.rule.with_directions(model_);
        fit = rules_.rule.defects;
        // CLIP's `head` (timm) is its projection, not a classifier.
        if (c_.family != Family::Clip) head_ = ClassifierHead::read(Checkpoint(cfg.path, cfg.overrides).file(), c_.dim);
        const std::size_t n = images.names.size();
        for (std::size_t i = 0; i < n; ++i) (n > 1 && i % 2 == 0 ? calibration_ : evaluation_).push_back(i);
    }

    json run() {
        json out = {{"name", cfg_.name},
                    {"artifact_rule", rules_.rule.to_json()},
                    {"model", model_.path()},
                    {"attention", to_string(c_.attention)},
                    {"trained_attention", to_string(c_.trained_attention)},
                    {"registers", model_.registers()},
                    {"test_time_registers", model_.intervention().test_time_registers},
                    {"precision", model_.precision().describe()},
                    {"intervention", model_.intervention().to_string()},
                    {"depth", c_.depth},
                    {"dim", c_.dim}};
        say("statistics");
        main_pass(out);
        say("eviction");
        out["eviction"] = eviction();
        say("int8");
        out["int8"] = int8();
        say("retrofit");
        out["retrofit"] = retrofit();
        say("mass against the number of keys");
        mass_vs_tokens(out);
        say("abstaining query");
        out["abstaining_query"] = abstaining_query();
        say("cost");
        out["cost"] = {{"parameters", c_.parameters}, {"parameters_added", parameters_added()}, {"ms_per_image", ms_per_image()}};
        out["summary"] = summary(out);
        return out;
    }

private:
    void say(const std::string& stage) const {
        if (log_) log_(cfg_.name + ": " + stage);
    }

    Pixels pixels(std::size_t i, const ResizeSpec& resize) const {
        Pixels px = images_.load(i, resize, c_);
        model_.check_tokens(px.height, px.width, o_.max_tokens, images_.names[i]);
        return px;
    }
    Features forward(const Model& m, const Pixels& px, const Probe* probe = nullptr, Trace* trace = nullptr) const {
        const ForwardOptions fo{o_.threads, o_.max_tokens};
        return probe ? m.forward(px.chw.data(), 1, px.height, px.width, *probe, *trace, fo)
                     : m.forward(px.chw.data(), 1, px.height, px.width, fo);
    }
    Model variant(std::optional<AttentionKind> attention, const PrecisionOptions& precision) const {
        ConfigOverrides ov = cfg_.overrides;
        if (attention) ov.attention = attention;
        return Model::load(cfg_.path, ov, precision).with(cfg_.intervention);
    }
    Model variant_file(const std::string& file) const {
        ConfigOverrides ov;
        ov.limits = cfg_.overrides.limits;
        return Model::load(file, ov, cfg_.precision).with(cfg_.intervention);
    }

    // Head accuracy on the evaluation half from its features, or null without a head and labels.
    json accuracy(const std::vector<Features>& evaluated) const {
        if (!head_ || !labels_) return nullptr;
        int right = 0;
        for (std::size_t j = 0; j < evaluation_.size(); ++j)
            right += head_->correct(evaluated[j].cls_of(0), label(evaluation_[j]), images_.names[evaluation_[j]]);
        return static_cast<double>(right) / evaluation_.size();
    }
    const json& label(std::size_t i) const {
        const std::string& path = images_.names[i];
        const auto it = labels_->find(path.substr(path.find_last_of('/') + 1));
        if (it == labels_->end()) throw UsageError("the labels file has no label for " + path);
        return it->second;
    }

    // One image's defect row at the output layer: the angle between its highest-norm patch and the
    // layer's defect direction u (as lines: acos |cos|, degrees), and the share of its patches
    // each artifact rule flags. Needs norms and direction cosines.
    json defect_row(const Trace& t) const {
        const int last = t.layers - 1, p0 = t.patch_offset(), np = t.patch_count();
        const float* norms = t.norms_of(last, 0);
        const int top = static_cast<int>(std::max_element(norms + p0, norms + p0 + np) - norms);
        const double cosine = std::min(1.0, static_cast<double>(t.direction_cos_of(last, 0)[top]));
        json row = {{"top_token", top}, {"top_angle_deg", std::acos(cosine) * 180.0 / M_PI}};
        ArtifactRule rule = rules_.rule;
        for (const auto test : {ArtifactTest::Norm, ArtifactTest::Direction, ArtifactTest::Both}) {
            rule.test = test;
            row["flagged_" + name_of(test)] = static_cast<double>(rule.flag(t, 0, last).size()) / np;
        }
        return row;
    }
    json defect_summary(const json& images) const {
        json out = {{"layer", c_.depth - 1},
                    {"directions", rules_.rule.defects_file.empty() ? "computed from the model's weights" : rules_.rule.defects_file},
                    {"fit", rules_.rule.defects->fit_description()},
                    {"singular_value", rules_.rule.defects->singular_value(c_.depth - 1, 0)},
                    {"images", images}};
        for (const char* k : {"top_angle_deg", "flagged_norm", "flagged_direction", "flagged_both"}) {
            double sum = 0;
            for (const auto& row : images) sum += row[k].get<double>();
            out[std::string("mean_") + k] = sum / static_cast<double>(images.size());
        }
        return out;
    }

    // The model's own statistics on every image at the main size (definitions 1, 2 and 4).
    void main_pass(json& out) {
        const int L = c_.depth, H = c_.heads;
        const std::size_t n = images_.names.size();
        std::vector<double> top_alpha(L * H, 0), abstention(L * H, 0);
        std::vector<std::array<int, 5>> kinds(L * H, std::array<int, 5>{});
        std::vector<double> sum_min(L, std::numeric_limits<double>::infinity()), sum_max(L, -std::numeric_limits<double>::infinity());
        struct Entry {
            float value;
            int token, channel, image, kind;
        };
        std::vector<std::vector<Entry>> top(L);
        std::vector<double> median(L, 0), ratio(L, 0), kurtosis(L, 0);
        best_abstention_ = -1;
        Probe probe;
        probe.norms = probe.key_mass = probe.abstention = true;
        probe.directions = rules_.rule.defects->directions;
        for (int l = 0; l < L; ++l) probe.block_layers.push_back(l);
        json defects = json::array();
        for (std::size_t i = 0; i < n; ++i) {
            const Pixels px = pixels(i, o_.resize);
            Trace t;
            features_.push_back(forward(model_, px, &probe, &t));
            if (i == 0) size_ = {px.height, px.width}, tokens_ = t.tokens;
            const auto artifacts = layer_stats(t, 0, L - 1, rules_).artifact_tokens_flagged;
            defects.push_back(defect_row(t));
            const int N = t.tokens;
            for (int l = 0; l < L; ++l) {
                for (int h = 0; h < H; ++h) {
                    const float* alpha = t.key_mass_of(l, 0, h);
                    const int k = static_cast<int>(std::max_element(alpha, alpha + N) - alpha);
                    top_alpha[l * H + h] += alpha[k];
                    ++kinds[l * H + h][token_kind(k, t, artifacts)];
                    const float* a = t.abstention_of(l, 0, h);
                    double s = 0;
                    for (int q = 0; q < N; ++q) {
                        s += a[q];
                        sum_min[l] = std::min(sum_min[l], 1.0 - a[q]);
                        sum_max[l] = std::max(sum_max[l], 1.0 - a[q]);
                        if (a[q] > best_abstention_) {
                            best_abstention_ = a[q];
                            best_ = {static_cast<int>(i), l, h, q};
                            best_kind_ = token_kind(q, t, artifacts);
                        }
                    }
                    abstention[l * H + h] += s / N;
                }
                // Massive activations: |x| over tokens × channels of the block's output.
                const float* x = t.block_of(l, 0);
                std::vector<float> mags(static_cast<std::size_t>(N) * t.dim);
                for (std::size_t j = 0; j < mags.size(); ++j) mags[j] = std::fabs(x[j]);
                std::vector<std::size_t> order(mags.size());
                for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
                const std::size_t k3 = std::min<std::size_t>(3, order.size());
                std::partial_sort(order.begin(), order.begin() + k3, order.end(),
                                  [&](std::size_t a, std::size_t b) { return mags[a] > mags[b] || (mags[a] == mags[b] && a < b); });
                for (std::size_t j = 0; j < k3; ++j) {
                    const int token = static_cast<int>(order[j] / t.dim);
                    top[l].push_back({mags[order[j]], token, static_cast<int>(order[j] % t.dim), static_cast<int>(i),
                                      token_kind(token, t, artifacts)});
                }
                const float top1 = mags[order[0]];
                auto mid = mags.begin() + (mags.size() - 1) / 2;
                std::nth_element(mags.begin(), mid, mags.end());
                median[l] += *mid;
                ratio[l] += *mid > 0 ? top1 / *mid : 0;
                kurtosis[l] += t.kurtosis[l];
            }
        }
        json heads = json::array(), sums = json::array(), range = json::array(), massive = json::array();
        for (int l = 0; l < L; ++l) {
            json hrow = json::array(), srow = json::array();
            for (int h = 0; h < H; ++h) {
                const double ta = top_alpha[l * H + h] / n, ab = abstention[l * H + h] / n;
                const auto& count = kinds[l * H + h];
                const int kind = static_cast<int>(std::max_element(count.begin(), count.end()) - count.begin());
                const char* cls = ab > o_.abstain ? "abstain" : ta > o_.rules.sink_alpha ? "dump" : "neither";
                hrow.push_back({{"class", cls}, {"key_kind", kKinds[kind]}, {"top_alpha", ta}, {"mean_abstention", ab}});
                srow.push_back(1.0 - ab);
            }
            heads.push_back(hrow);
            sums.push_back(srow);
            range.push_back({sum_min[l], sum_max[l]});
            // The three largest over all images (ties: the earlier image, token, channel).
            std::vector<std::size_t> idx(top[l].size());
            for (std::size_t j = 0; j < idx.size(); ++j) idx[j] = j;
            std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return top[l][a].value > top[l][b].value; });
            json tops = json::array();
            for (std::size_t j = 0; j < std::min<std::size_t>(3, idx.size()); ++j) {
                const Entry& e = top[l][idx[j]];
                tops.push_back({e.value, e.token, e.channel, e.image});
            }
            massive.push_back({{"top", tops},
                               {"top_kind", kKinds[top[l][idx[0]].kind]},
                               {"median", median[l] / n},
                               {"ratio", ratio[l] / n},
                               {"kurtosis", kurtosis[l] / n}});
        }
        out["size"] = {size_[0], size_[1]};
        out["defects"] = defect_summary(defects);
        out["tokens"] = tokens_;
        out["heads"] = heads;
        out["weights_sum"] = sums;
        out["weights_sum_range"] = range;
        out["massive"] = massive;
    }

    // Window safety (definition 6): every image, the configuration plus one more eviction.
    json eviction() const {
        json out = json::object();
        using Flag = bool Eviction::*;
        for (const auto& [what, flag] : {std::pair<const char*, Flag>{"sink", &Eviction::sink},
                                         {"artifacts", &Eviction::artifacts},
                                         {"registers", &Eviction::registers}}) {
            if (flag == &Eviction::registers && model_.registers() == 0) continue;
            Intervention edit = model_.intervention();
            edit.evict.*flag = true;
            const Model evicted = model_.with(edit);
            Cosines cos;
            for (std::size_t i = 0; i < images_.names.size(); ++i)
                cos.add(forward(evicted, pixels(i, o_.resize)), features_[i]);
            out[what] = cos.to_json();
        }
        return out;
    }

    // Cosines of `m` to `reference` (features of the evaluation half) with m's accuracy.
    json against(const Model& m, const std::vector<Features>& reference, const json& reference_accuracy) const {
        const auto got = evaluation_features(m);
        Cosines cos;
        for (std::size_t j = 0; j < got.size(); ++j) cos.add(got[j], reference[j]);
        json out = cos.to_json();
        const json acc = accuracy(got);
        if (!acc.is_null()) {
            out["accuracy"] = acc;
            if (!reference_accuracy.is_null()) out["accuracy_change"] = acc.get<double>() - reference_accuracy.get<double>();
        }
        return out;
    }
    std::vector<Features> evaluation_features(const Model& m) const {
        std::vector<Features> f;
        for (std::size_t i : evaluation_) f.push_back(&m == &model_ ? features_[i] : forward(m, pixels(i, o_.resize)));
        return f;
    }

    // INT8 viability (definition 5): the real int8 engine against the configuration at fp32.
    json int8() const {
        const bool is_fp32 = model_.precision().precision == Precision::Fp32;
        const Model fp_variant = is_fp32 ? model_ : variant(c_.attention, PrecisionOptions{});
        const Model& fp = is_fp32 ? model_ : fp_variant;
        const auto reference = evaluation_features(fp);
        const json fp_accuracy = accuracy(reference);
        PrecisionOptions per_token;
        per_token.precision = Precision::Int8;
        json out = {{"fp32_accuracy", fp_accuracy}, {"per_token", against(variant(c_.attention, per_token), reference, fp_accuracy)}};
        out["per_tensor"] = nullptr;
        if (!calibration_.empty()) {
            Int8Calibrator calibrator;
            Probe probe;
            probe.linear_inputs = true;
            for (std::size_t i : calibration_) {
                Trace t;
                forward(fp, pixels(i, o_.resize), &probe, &t);
                calibrator.observe(t);
            }
            Int8Calibration cal = calibrator.finish();
            cal.model = cfg_.path;
            for (std::size_t i : calibration_) cal.images.push_back(images_.names[i]);
            const std::string scales = tmp_.file("int8-" + std::to_string(reinterpret_cast<std::uintptr_t>(this)) + ".json");
            write_int8_calibration(scales, cal);
            PrecisionOptions per_tensor{Precision::Int8, ActQuant::PerTensor, scales};
            out["per_tensor"] = against(variant(c_.attention, per_tensor), reference, fp_accuracy);
        }
        return out;
    }

    // Retrofits of a softmax checkpoint run with softmax (definition 7).
    json retrofit() const {
        if (c_.trained_attention != AttentionKind::Softmax || c_.attention != AttentionKind::Softmax) return nullptr;
        const auto reference = evaluation_features(model_);
        const json original = accuracy(reference);
        json out = {{"softmax1", against(variant(AttentionKind::Softmax1, cfg_.precision), reference, original)},
                    {"calibrated_sink", nullptr},
                    {"calibrated_sink_evicted", nullptr}};
        if (calibration_.empty()) return out;
        // As `vitreg calibrate-sink`: the checkpoint itself, without the intervention, which
        // the calibrated variants then run with.
        const Model plain = Model::load(cfg_.path, cfg_.overrides, cfg_.precision);
        SinkCalibrator calibrator(c_.depth, c_.heads, c_.head_dim);
        const Probe probe = sink_calibration_probe(c_.depth);
        for (std::size_t i : calibration_) {
            Trace t;
            forward(plain, pixels(i, o_.resize), &probe, &t);
            calibrator.observe(t);
        }
        SinkCalibration cal = calibrator.finish();
        cal.source = plain.path();
        for (std::size_t i : calibration_) cal.images.push_back(images_.names[i]);
        std::vector<double> sinks(cal.sinks.begin(), cal.sinks.end());
        for (const bool evict : {false, true}) {
            const std::string file =
                tmp_.file("sink-" + std::to_string(reinterpret_cast<std::uintptr_t>(this)) + (evict ? "-evicted" : "") + ".safetensors");
            write_sink_checkpoint(plain, cal, evict, file);
            json r = against(variant_file(file), reference, original);
            if (!evict) r["sinks"] = nested(sinks, c_.depth, c_.heads);
            out[evict ? "calibrated_sink_evicted" : "calibrated_sink"] = r;
        }
        return out;
    }

    // Mass against the number of keys (definition 8).
    void mass_vs_tokens(json& out) const {
        const int L = c_.depth, H = c_.heads;
        json list = json::array();
        if (o_.sizes.empty()) {
            list.push_back({{"size", out["size"]}, {"tokens", tokens_}, {"mass", out["weights_sum"]}});
        } else {
            std::vector<int> sizes = o_.sizes;
            std::sort(sizes.begin(), sizes.end());
            Probe probe;
            probe.abstention = true;
            for (int s : sizes) {
                ResizeSpec resize;
                resize.mode = ResizeSpec::Mode::Exact;
                resize.width = resize.height = s;
                std::vector<double> mass(L * H, 0);
                int tokens = 0;
                for (std::size_t i = 0; i < images_.names.size(); ++i) {
                    Trace t;
                    forward(model_, pixels(i, resize), &probe, &t);
                    tokens = t.tokens;
                    for (int l = 0; l < L; ++l)
                        for (int h = 0; h < H; ++h) {
                            const float* a = t.abstention_of(l, 0, h);
                            double abstained = 0;
                            for (int q = 0; q < t.tokens; ++q) abstained += a[q];
                            mass[l * H + h] += abstained / t.tokens;
                        }
                }
                for (double& m : mass) m = 1.0 - m / images_.names.size();  // exactly 1 for softmax
                list.push_back({{"size", {s, s}}, {"tokens", tokens}, {"mass", nested(mass, L, H)}});
            }
        }
        const json& first = list.front();
        json z = json::array();
        for (int l = 0; l < L; ++l) {
            json row = json::array();
            for (int h = 0; h < H; ++h) {
                const double m0 = first["mass"][l][h].get<double>();
                if (c_.attention == AttentionKind::Softmax || m0 >= 1.0 || m0 <= 0.0) row.push_back(nullptr);
                else row.push_back(std::log(m0 / (1.0 - m0)) - std::log(first["tokens"].get<double>()));
            }
            z.push_back(row);
        }
        out["mass_vs_tokens"] = list;
        out["mass_uniform_logit"] = z;
    }

    // The query with the largest abstention and its row beside softmax's (definition 9).
    json abstaining_query() const {
        if (c_.attention == AttentionKind::Softmax) return nullptr;
        const auto [image, layer, head, query] = best_;
        Probe probe;
        probe.attention_layers = {layer};
        probe.queries = {query};
        probe.norms = true;  // artifact tokens, for the keys' kinds
        probe.directions = rules_.rule.defects->directions;
        probe.abstention = true;
        const Pixels px = pixels(image, o_.resize);
        Trace t, ts;
        forward(model_, px, &probe, &t);
        forward(variant(AttentionKind::Softmax, cfg_.precision), px, &probe, &ts);
        const auto artifacts = layer_stats(t, 0, c_.depth - 1, rules_).artifact_tokens_flagged;
        const float* row = t.attention_row(0, 0, head, 0);
        const float* soft = ts.attention_row(0, 0, head, 0);
        std::vector<int> order(t.tokens);
        for (int j = 0; j < t.tokens; ++j) order[j] = j;
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
        json keys = json::array();
        double kept = 0, kept_soft = 0;
        for (int j = 0; j < std::min(6, t.tokens); ++j) {
            const int k = order[j];
            keys.push_back({{"token", k}, {"kind", kKinds[token_kind(k, t, artifacts)]}, {"weight", row[k]}, {"softmax_weight", soft[k]}});
            kept += row[k];
            kept_soft += soft[k];
        }
        const double null_mass = t.abstention_of(layer, 0, head)[query];
        return {{"image", image},
                {"layer", layer},
                {"head", head},
                {"query", query},
                {"query_kind", kKinds[best_kind_]},
                {"abstention", null_mass},
                {"keys", keys},
                {"rest", 1.0 - null_mass - kept},
                {"softmax_rest", 1.0 - kept_soft}};
    }

    std::int64_t parameters_added() const {
        const std::int64_t sinks = c_.attention == AttentionKind::Sink ? static_cast<std::int64_t>(c_.depth) * c_.heads : 0;
        return sinks + static_cast<std::int64_t>(c_.registers) * c_.dim;
    }

    // A plain forward, one image at a time, the faster of two passes.
    json ms_per_image() const {
        const std::size_t n = std::min<std::size_t>(o_.timing_images, images_.names.size());
        if (n == 0) return nullptr;
        std::vector<Pixels> px;
        for (std::size_t i = 0; i < n; ++i) px.push_back(pixels(i, o_.resize));
        double best = std::numeric_limits<double>::infinity();
        for (int pass = 0; pass < 2; ++pass) {
            const auto start = std::chrono::steady_clock::now();
            for (const auto& p : px) forward(model_, p);
            best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        }
        return best / n;
    }

    json summary(const json& s) const {
        json out;
        for (const char* k : {"name", "attention", "registers", "precision", "intervention"}) out[k] = s[k];
        const int L = c_.depth, H = c_.heads;
        std::map<std::string, int> classes, dumps;
        for (const auto& row : s["heads"])
            for (const auto& h : row) {
                ++classes[h["class"].get<std::string>()];
                if (h["class"] == "dump") ++dumps[h["key_kind"].get<std::string>()];
            }
        for (const char* k : {"dump", "abstain", "neither"}) out[std::string("heads_") + k] = static_cast<double>(classes[k]) / (L * H);
        for (const char* k : kKinds) out[std::string("dump_") + k] = static_cast<double>(dumps[k]) / (L * H);
        out["weights_sum_mean"] = mean_of(s["weights_sum"]);
        double lo = 1, hi = 0;
        for (const auto& r : s["weights_sum_range"]) lo = std::min(lo, r[0].get<double>()), hi = std::max(hi, r[1].get<double>());
        out["weights_sum_min"] = lo;
        out["weights_sum_max"] = hi;
        out["parameters_added"] = s["cost"]["parameters_added"];
        out["ms_per_image"] = s["cost"]["ms_per_image"];
        int worst = 0;
        double kurt = 0;
        for (int l = 0; l < L; ++l) {
            if (s["massive"][l]["ratio"].get<double>() > s["massive"][worst]["ratio"].get<double>()) worst = l;
            kurt = std::max(kurt, s["massive"][l]["kurtosis"].get<double>());
        }
        out["massive_ratio"] = s["massive"][worst]["ratio"];
        out["massive_layer"] = worst;
        out["massive_top"] = s["massive"][worst]["top"][0][0];
        out["massive_kind"] = s["massive"][worst]["top_kind"];
        out["kurtosis_max"] = kurt;
        for (const char* k : {"top_angle_deg", "flagged_norm", "flagged_direction", "flagged_both"})
            out[std::string("defect_") + k] = s["defects"][std::string("mean_") + k];
        const auto pick = [](const json& j, std::initializer_list<const char*> path) -> json {
            const json* at = &j;
            for (const char* k : path) {
                if (!at->is_object() || !at->contains(k) || (*at)[k].is_null()) return nullptr;
                at = &(*at)[k];
            }
            return *at;
        };
        const json& i8 = s["int8"];
        for (const char* q : {"per_token", "per_tensor"})
            for (const char* m : {"cls_cosine", "patch_cosine"}) out[std::string("int8_") + q + "_" + m] = pick(i8, {q, m});
        out["fp32_accuracy"] = i8["fp32_accuracy"];
        out["int8_per_token_accuracy"] = pick(i8, {"per_token", "accuracy"});
        out["int8_per_tensor_accuracy"] = pick(i8, {"per_tensor", "accuracy"});
        for (const char* e : {"sink", "artifacts", "registers"})
            for (const char* m : {"cls_cosine", "patch_cosine"}) out[std::string("evict_") + e + "_" + m] = pick(s["eviction"], {e, m});
        for (const char* r : {"softmax1", "calibrated_sink", "calibrated_sink_evicted"})
            for (const char* m : {"cls_cosine", "patch_cosine", "accuracy_change"})
                out[std::string("retrofit_") + r + "_" + m] = pick(s["retrofit"], {r, m});
        const json& list = s["mass_vs_tokens"];
        out["mass_smallest"] = mean_of(list.front()["mass"]);
        out["mass_largest"] = mean_of(list.back()["mass"]);
        out["mass_drift"] = nullptr;
        if (list.size() > 1) {
            const double logL = std::log(list.back()["tokens"].get<double>());
            double drift = 0;
            int n = 0;
            for (int l = 0; l < L; ++l)
                for (int h = 0; h < H; ++h) {
                    const json& z = s["mass_uniform_logit"][l][h];
                    if (z.is_null()) continue;
                    drift += list.back()["mass"][l][h].get<double>() - 1.0 / (1.0 + std::exp(-(z.get<double>() + logL)));
                    ++n;
                }
            if (n) out["mass_drift"] = drift / n;
        }
        out["abstaining_query_abstention"] = pick(s, {"abstaining_query", "abstention"});
        return out;
    }

    const StudyConfig& cfg_;
    const StudyImages& images_;
    const StudyOptions& o_;
    const TempDir& tmp_;
    const std::map<std::string, json>* labels_;
    const std::function<void(const std::string&)>& log_;
    Model model_;
    const Config& c_;
    std::optional<ClassifierHead> head_;
    std::vector<std::size_t> calibration_, evaluation_;
    std::vector<Features> features_;  // the configuration's, every image at the main size
    std::array<int, 2> size_{0, 0};
    int tokens_ = 0;
    double best_abstention_ = -1;
    std::array<int, 4> best_{0, 0, 0, 0};  // image, layer, head, query
    int best_kind_ = 0;
    ArtifactRules rules_;  // the options' rules, with this model's defect directions
};

}  // namespace

const std::vector<std::string>& study_summary_columns() {
    static const std::vector<std::string> columns = {
        "name", "attention", "registers", "precision", "intervention",
        "heads_dump", "heads_abstain", "heads_neither",
        "dump_cls", "dump_register", "dump_test_time_register", "dump_artifact", "dump_patch",
        "weights_sum_mean", "weights_sum_min", "weights_sum_max",
        "parameters_added", "ms_per_image",
        "massive_ratio", "massive_layer", "massive_top", "massive_kind", "kurtosis_max",
        "defect_top_angle_deg", "defect_flagged_norm", "defect_flagged_direction", "defect_flagged_both",
        "int8_per_token_cls_cosine", "int8_per_token_patch_cosine", "int8_per_tensor_cls_cosine",
        "int8_per_tensor_patch_cosine", "fp32_accuracy", "int8_per_token_accuracy", "int8_per_tensor_accuracy",
        "evict_sink_cls_cosine", "evict_sink_patch_cosine", "evict_artifacts_cls_cosine", "evict_artifacts_patch_cosine",
        "evict_registers_cls_cosine", "evict_registers_patch_cosine",
        "retrofit_softmax1_cls_cosine", "retrofit_softmax1_patch_cosine", "retrofit_softmax1_accuracy_change",
        "retrofit_calibrated_sink_cls_cosine", "retrofit_calibrated_sink_patch_cosine",
        "retrofit_calibrated_sink_accuracy_change", "retrofit_calibrated_sink_evicted_cls_cosine",
        "retrofit_calibrated_sink_evicted_patch_cosine", "retrofit_calibrated_sink_evicted_accuracy_change",
        "mass_smallest", "mass_largest", "mass_drift", "abstaining_query_abstention"};
    return columns;
}

std::string study_csv(const nlohmann::json& study) {
    const auto field = [](const json& v) -> std::string {
        if (v.is_null()) return "";
        if (v.is_string()) {
            const std::string s = v.get<std::string>();
            if (s.find_first_of(",\"\n") == std::string::npos) return s;
            std::string q = "\"";
            for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
            return q + "\"";
        }
        if (v.is_number_float()) {
            std::ostringstream os;
            os.precision(9);
            os << v.get<double>();
            return os.str();
        }
        return v.dump();
    };
    std::string csv;
    for (const auto& k : study_summary_columns()) csv += (csv.empty() ? "" : ",") + k;
    csv += "\n";
    for (const auto& c : study.at("configs")) {
        std::string row;
        for (std::size_t j = 0; j < study_summary_columns().size(); ++j)
            row += (j ? "," : "") + field(c.at("summary").at(study_summary_columns()[j]));
        csv += row + "\n";
    }
    return csv;
}

json run_study(const std::vector<StudyConfig>& configs, const StudyImages& images, const StudyOptions& o,
               const std::function<void(const std::string&)>& log) {
    if (configs.empty()) throw UsageError("study: no configurations given");
    if (images.names.empty()) throw UsageError("study: no images given");
    for (int s : o.sizes)
        if (s <= 0) throw UsageError("study: size " + std::to_string(s) + " is not a positive number of pixels");
    std::optional<std::map<std::string, json>> labels;
    if (!o.labels.empty()) labels = read_labels(o.labels);
    TempDir tmp;
    json out = {{"format", "vitreg-study"},
                {"version", 1},
                {"images", images.names},
                {"resize", o.resize.to_string()},
                {"sizes", o.sizes},
                {"rules", {{"mad_k", o.rules.rule.mad_k},
                           {"artifact_rule", name_of(o.rules.rule.test)},
                           {"sink_alpha", o.rules.sink_alpha},
                           {"abstain", o.abstain}}}};
    json cal = json::array(), eval = json::array();
    for (std::size_t i = 0; i < images.names.size(); ++i) (images.names.size() > 1 && i % 2 == 0 ? cal : eval).push_back(i);
    out["calibration_images"] = cal;
    out["evaluation_images"] = eval;
    json list = json::array();
    for (const auto& c : configs) {
        // Sizes are checked against each model before any image runs.
        const int patch = Checkpoint(c.path, c.overrides).config().patch;
        for (int s : o.sizes)
            if (s % patch)
                throw UsageError("study: size " + std::to_string(s) + " is not a multiple of " + c.name + "'s patch " +
                                 std::to_string(patch));
    }
    DefectFits fits;
    for (const auto& c : configs)
        list.push_back(ConfigStudy(c, images, o, tmp, labels ? &*labels : nullptr, log, fits).run());
    out["configs"] = list;
    return out;
}

}  // namespace vitreg
