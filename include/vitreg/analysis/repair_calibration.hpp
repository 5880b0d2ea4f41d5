#pragma once
// What `vitreg calibrate-bias` measures for the repairs @debias and @registers=mean
// (vitreg/repair.hpp): over calibration images, the mean residual stream after one block at each
// patch position, and every block's mean register tokens.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "vitreg/analysis/calibrate.hpp"
#include "vitreg/model.hpp"
#include "vitreg/repair.hpp"

namespace vitreg {

// Runs `model` on each image (all must give one square grid; UsageError naming the first that
// does not) and averages the stream after block `layer` per position and the registers per block.
RepairCalibration calibrate_repair(const Model& model, const std::vector<std::string>& images, int layer,
                                   const CalibrationOptions& options,
                                   const std::function<void(std::size_t, std::size_t)>& progress = {});

// The same over `count` blank images at the model's native size: uniform grey levels evenly
// spaced over [0, 1] (one image: 0.5), normalized with the model's mean and std. Images are
// recorded as "blank:LEVEL".
RepairCalibration calibrate_repair_blank(const Model& model, int count, int layer, const CalibrationOptions& options,
                                         const std::function<void(std::size_t, std::size_t)>& progress = {});

}  // namespace vitreg
