#include "vitreg/analysis/repair_calibration.hpp"

#include "vitreg/error.hpp"

namespace vitreg {

namespace {

// Sums the traces' block outputs (every block recorded) into the calibration's two means.
class RepairAverager {
public:
    RepairAverager(const Model& model, int layer) : config_(model.config()) {
        if (layer < 0 || layer >= config_.depth)
            throw UsageError("--layer " + std::to_string(layer) + " is out of range (the model has " +
                             std::to_string(config_.depth) + " blocks: 0.." + std::to_string(config_.depth - 1) + ")");
        if (model.intervention().test_time_registers > 0)
            throw UsageError("calibrate-bias: calibrate the model without test-time registers");
        cal_.layer = layer;
        cal_.depth = config_.depth;
        cal_.registers = config_.registers;
        cal_.dim = config_.dim;
        cal_.source = model.path();
        for (int l = 0; l < config_.depth; ++l) probe_.block_layers.push_back(l);
    }
    const Probe& probe() const { return probe_; }

    void observe(const Trace& t, const std::string& name) {
        if (t.grid_h != t.grid_w || (count_ > 0 && t.grid_h != cal_.grid))
            throw UsageError(name + ": a " + std::to_string(t.grid_w) + "x" + std::to_string(t.grid_h) +
                             " patch grid; the calibration needs one square grid for every image" +
                             (count_ ? " (" + std::to_string(cal_.grid) + "x" + std::to_string(cal_.grid) + " so far)" : ""));
        if (count_ == 0) {
            cal_.grid = t.grid_h;
            bias_.assign(static_cast<std::size_t>(t.patch_count()) * cal_.dim, 0.0);
            registers_.assign(static_cast<std::size_t>(cal_.depth) * cal_.registers * cal_.dim, 0.0);
        }
        const std::size_t D = cal_.dim, layer_size = static_cast<std::size_t>(t.tokens) * D;
        const float* last = t.blocks.data() + cal_.layer * layer_size + static_cast<std::size_t>(t.patch_offset()) * D;
        for (std::size_t i = 0; i < bias_.size(); ++i) bias_[i] += last[i];
        for (int l = 0; l < cal_.depth; ++l) {
            const float* reg = t.blocks.data() + l * layer_size + static_cast<std::size_t>(t.register_offset()) * D;
            for (std::size_t i = 0; i < static_cast<std::size_t>(cal_.registers) * D; ++i)
                registers_[l * cal_.registers * D + i] += reg[i];
        }
        cal_.images.push_back(name);
        ++count_;
    }

    RepairCalibration finish() {
        if (count_ == 0) throw UsageError("calibrate-bias: no images");
        for (double v : bias_) cal_.bias.push_back(static_cast<float>(v / count_));
        for (double v : registers_) cal_.register_means.push_back(static_cast<float>(v / count_));
        return std::move(cal_);
    }

private:
    const Config& config_;
    Probe probe_;
    RepairCalibration cal_;
    std::vector<double> bias_, registers_;
    int count_ = 0;
};

}  // namespace

RepairCalibration calibrate_repair(const Model& model, const std::vector<std::string>& images, int layer,
                                   const CalibrationOptions& options,
                                   const std::function<void(std::size_t, std::size_t)>& progress) {
    RepairAverager averager(model, layer);
    observe_images(model, images, options, averager.probe(),
                   [&](const Trace& t, std::size_t i) { averager.observe(t, images[i]); }, progress);
    return averager.finish();
}

RepairCalibration calibrate_repair_blank(const Model& model, int count, int layer, const CalibrationOptions& options,
                                         const std::function<void(std::size_t, std::size_t)>& progress) {
    if (count < 1) throw UsageError("--blank " + std::to_string(count) + ": expected at least 1 image");
    RepairAverager averager(model, layer);
    const Config& c = model.config();
    const int side = c.native_size();
    const std::size_t plane = static_cast<std::size_t>(side) * side;
    std::vector<float> pixels(3 * plane);
    for (int i = 0; i < count; ++i) {
        const float level = count == 1 ? 0.5f : static_cast<float>(i) / static_cast<float>(count - 1);
        for (int ch = 0; ch < 3; ++ch)
            std::fill(pixels.begin() + ch * plane, pixels.begin() + (ch + 1) * plane, (level - c.mean[ch]) / c.std[ch]);
        Trace t;
        model.forward(pixels.data(), 1, side, side, averager.probe(), t, ForwardOptions{options.threads, options.max_tokens});
        averager.observe(t, "blank:" + std::to_string(level));
        if (progress) progress(static_cast<std::size_t>(i) + 1, static_cast<std::size_t>(count));
    }
    return averager.finish();
}

}  // namespace vitreg
