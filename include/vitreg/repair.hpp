#pragma once
// Repairs of artifact tokens without retraining (docs/design.md, "Repairs and dense evaluation"):
// edits of the residual stream that a Model's Intervention applies after chosen blocks, so every
// front end takes them as ModelSpec suffixes. Several apply in the order written.
//
// - inpaint=artifacts[:LAYERS]: after each chosen block, the patch tokens the artifact rule flags
//   are replaced by the mean of their unflagged neighbours (3x3, widened while none is).
//   1 forward per image.
// - inpaint=directions:FILE[:LAYERS]: the same, the patches flagged by the direction rule: their
//   |cos| with the layer's defect direction u_i (FILE: what `vitreg defects` writes) above
//   median + 10·MAD over the image's patches. 1 forward per image.
// - denoise=shift:K[:median]: K forwards of the image shifted by whole patches (reflection
//   padding); their last-block patch grids split, per image, into the content that moves with the
//   image and the noise locked to the grid (least squares, or medians; core/shift_decomposition.hpp),
//   and the content kept. K forwards per image.
// - debias=FILE: the last calibrated block's per-position mean map (vitreg calibrate-bias)
//   minus its per-channel median over positions is subtracted from the patch tokens after that
//   block, scaled per image at the positions where it is itself an outlier (a locked artifact,
//   whose size varies between images); the map is resampled to the input's grid as the position
//   embedding is. 1 forward.
// - registers=mean:FILE[:LAYERS] | registers=zero[:LAYERS]: after each chosen block (default:
//   all) the register tokens become their mean over the calibration images (FILE from vitreg
//   calibrate-bias) or zero, the control. 1 forward.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "vitreg/config.hpp"

namespace vitreg {

struct DefectDirectionRows;  // core/defect_direction_rows.hpp

// What `vitreg calibrate-bias` writes: per-position means of the residual stream after one
// block, and every block's mean register tokens, over a folder of images (or blank ones).
struct RepairCalibration {
    int layer = 0;           // the block whose output `bias` averages
    int depth = 0, registers = 0, dim = 0;
    int grid = 0;            // `bias` is grid x grid (a square input)
    std::vector<float> bias;             // [grid*grid, dim]
    std::vector<float> register_means;   // [depth, registers, dim]
    std::vector<std::string> images;     // what was averaged ("blank:N" for --blank)
    std::string source;                  // the model's path

    // Throws UsageError naming the file when it does not hold one (or is not vitreg's).
    static RepairCalibration read(const std::string& path);
    // Atomic (temporary name, then rename); safetensors with the fields above as metadata.
    void write(const std::string& path) const;
};

struct RepairType;  // core/repairs/repair_type.hpp: one record per kind, each in its own file

struct Repair {
    const RepairType* type = nullptr;  // set by parse
    std::string layers;  // inpaint (default "last") and registers (default "all"): resolve_layers
    int shifts = 0;      // denoise: K (0 for the others: one forward)
    bool median = false; // denoise: the split's noise by medians instead of means
    bool zero = false;   // registers=zero
    std::string file;    // debias, registers=mean, inpaint=directions
    std::shared_ptr<const RepairCalibration> calibration;  // read from `file`
    std::shared_ptr<const DefectDirectionRows> directions;  // inpaint=directions: read from `file`

    // One suffix's text after '@' ("inpaint=artifacts:-1", "denoise=shift:4:median", ...); reads
    // the calibration file. Throws UsageError naming the suffix and the fault.
    static Repair parse(const std::string& word);
    // Whether `word` is a repair's suffix ("inpaint=", "denoise=", "debias=", "registers=").
    static bool names_repair(const std::string& word);
    std::string to_string() const;  // parses back
    std::string kind() const;       // the suffix's word: "inpaint", "denoise", "debias", "registers"
    int forwards_per_image() const { return shifts > 0 ? shifts : 1; }
    // Throws UsageError naming the repair when it cannot apply to this model (registers on a
    // model without them, a calibration of another model, layers out of range).
    void validate(const Config& config) const;
    // The blocks after which it edits the stream, for a model of `depth` blocks.
    std::vector<int> layers_of(int depth) const;
};

// Every repair's forms and what each costs, for the model name's help ("@inpaint=artifacts[:LAYERS]
// (...), @denoise=shift:K[:median] (...), ...").
std::string repair_help();
// The repairs' short forms, as a refusal lists them: "inpaint=artifacts, denoise=shift:K, ...".
std::string repair_forms();

// denoise=shift:K's shifts in patches (rows, columns): (0,0) first, then rings of growing radius
// r: (0,r), (r,0), (-r,-r), (0,-r), (-r,0), (r,r), (r,-r), (-r,r), ... From K = 4 on, every cell is
// seen by 2 forwards or more and every grid position observes 2 or more (K = 9: 4). Stated here so
// runs record exactly what was used.
std::vector<std::array<int, 2>> denoise_shifts(int count);
constexpr int kMaxDenoiseShifts = 25;  // rings up to radius 3

}  // namespace vitreg
