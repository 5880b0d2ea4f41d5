#include "core/defect_direction_rows.hpp"

#include <cmath>
#include <filesystem>

#include "vitreg/config.hpp"
#include "vitreg/error.hpp"
#include "vitreg/tensor_file.hpp"

namespace vitreg {

std::string defects_file(const std::string& path) {
    std::error_code ec;  // a name the file system cannot look up is read as a file, and refused by name
    return std::filesystem::is_directory(path, ec) ? path + "/defects.safetensors" : path;
}

DefectDirectionRows read_defect_direction_rows(const std::string& path) {
    const std::string file = defects_file(path);
    return defect_direction_rows(*open_tensor_file(file, ConfigOverrides{}), file);
}

DefectDirectionRows defect_direction_rows(const TensorFile& f, const std::string& file) {
    if (!f.has("directions")) throw Error(file + ": not a defects file (no tensor 'directions'; write one with vitreg defects)");
    const TensorView& u = f.get("directions");
    if (u.shape.size() != 2 || u.shape[0] < 1 || u.shape[1] < 1)
        throw Error(file + ": tensor 'directions' has shape " + u.shape_string() + " (expected [layers, n])");
    DefectDirectionRows d;
    d.layers = static_cast<int>(u.shape[0]);
    d.dim = static_cast<int>(u.shape[1]);
    d.rows = u.to_float();
    return d;
}

float abs_cosine(const float* x, const float* u, int dim) {
    double xu = 0, xx = 0, uu = 0;
    for (int k = 0; k < dim; ++k) {
        xu += static_cast<double>(x[k]) * u[k];
        xx += static_cast<double>(x[k]) * x[k];
        uu += static_cast<double>(u[k]) * u[k];
    }
    return xx > 0 && uu > 0 ? static_cast<float>(std::fabs(xu) / std::sqrt(xx * uu)) : 0.0f;
}

}  // namespace vitreg
