#pragma once
// The per-layer defect directions u_i as core reads them (docs/design.md, "Repairs and dense
// evaluation"): the `directions` tensor [layers, dim] of what `vitreg defects` writes, and each
// token's |cos| with its layer's row. The forward's direction probe, the artifact rule's
// direction test and @inpaint=directions all read them through here.
#include <string>
#include <vector>

namespace vitreg {

class TensorFile;

struct DefectDirectionRows {
    int layers = 0, dim = 0;
    std::vector<float> rows;  // [layers, dim]
    const float* row(int layer) const { return rows.data() + static_cast<std::size_t>(layer) * dim; }
};

// `path`: a defects.safetensors or the folder `vitreg defects -o` wrote it in. Throws Error naming
// the file when it has no [layers, dim] tensor `directions`.
DefectDirectionRows read_defect_direction_rows(const std::string& path);
// The same from a file already open (read_defects reads its other tensors from it); `file` names it.
DefectDirectionRows defect_direction_rows(const TensorFile& f, const std::string& file);
// The defects file `path` names: itself, or <path>/defects.safetensors for a folder.
std::string defects_file(const std::string& path);

// |cos(x, u)| in double precision; 0 when either vector is zero.
float abs_cosine(const float* x, const float* u, int dim);

}  // namespace vitreg
