#include "vitreg/precision.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "cpu.hpp"
#include "gemm_lowp.hpp"
#include "json_limits.hpp"
#include "vitreg/error.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {
constexpr const char* kCalibrationFormat = "vitreg-int8-calibration";
constexpr int kCalibrationVersion = 1;
}  // namespace

Precision parse_precision(const std::string& s) { return parse_enum<Precision>(s); }
std::string to_string(Precision p) { return name_of(p); }
ActQuant parse_act_quant(const std::string& s) { return parse_enum<ActQuant>(s); }
std::string to_string(ActQuant a) { return name_of(a); }

namespace {
std::string bf16_kernels() {
    return gemm::native_bf16() ? gemm::to_string(gemm::best_bf16()) : "bf16-rounded operands on fp32 FMA";
}
}  // namespace

std::string kernel_isa(Precision p, int int8_weight_bits) {
    switch (p) {
        case Precision::Fp32: return cpu::describe_level();
        case Precision::Bf16: return bf16_kernels() + "; " + cpu::describe_level();
        case Precision::Int8:
            return std::string(gemm::to_string(gemm::int8_kernel(int8_weight_bits))) + ", attention " + bf16_kernels() + "; " +
                   cpu::describe_level();
        case Precision::Int4:
            return std::string(gemm::to_string(gemm::int4_kernel())) + " on int4 weights unpacked to int8, attention " +
                   bf16_kernels() + "; " + cpu::describe_level();
    }
    return "?";
}

void PrecisionOptions::validate() const {
    if (act_quant == ActQuant::PerTensor && precision != Precision::Int8)
        throw UsageError("--act-quant per-tensor applies to --precision int8 only (got " + to_string(precision) + ")");
    if (act_quant == ActQuant::PerTensor && scales.empty())
        throw UsageError("--act-quant per-tensor needs --scales SCALES.json (made by vitreg calibrate-int8)");
    if (act_quant != ActQuant::PerTensor && !scales.empty())
        throw UsageError("--scales is for --act-quant per-tensor (with --precision int8)");
    if (int8_weight_bits != 7 && int8_weight_bits != 8)
        throw UsageError("--int8-weights takes 7 or 8 (got " + std::to_string(int8_weight_bits) + ")");
    if (int8_weight_bits != 8 && precision != Precision::Int8)
        throw UsageError("--int8-weights 7 applies to --precision int8 only (got " + to_string(precision) + ")");
    if (file_weights_packed && precision == Precision::Fp32)
        throw UsageError("--file-weights packed applies to --precision bf16, int8 and int4 only (got fp32)");
}

std::string PrecisionOptions::describe() const {
    if (precision != Precision::Int8) return to_string(precision);
    const std::string weights = int8_weight_bits == 8 ? "" : ", " + std::to_string(int8_weight_bits) + "-bit weights";
    if (act_quant == ActQuant::PerToken) return "int8 per-token" + weights;
    return "int8 per-tensor (" + scales + ")" + weights;
}

Int8Calibration read_int8_calibration(const std::string& path) {
    const nlohmann::json j = read_format_file(path, kCalibrationFormat, kCalibrationVersion, "int8 calibration", "vitreg calibrate-int8");
    const auto fail = [&](const std::string& why) { return IoError(path + ": not a vitreg int8 calibration: " + why); };
    Int8Calibration c;
    try {
        c.model = j.value("model", "");
        c.method = j.value("method", "minmax");
        c.percentile = j.value("percentile", 100.0);
        c.images = j.value("images", std::vector<std::string>{});
        const auto& ranges = j.at("ranges");
        if (!ranges.is_object() || ranges.empty()) throw fail("\"ranges\" is not a non-empty object");
        for (const auto& [name, r] : ranges.items()) {
            const auto min = r.at("min"), max = r.at("max");
            if (!min.is_number() || !max.is_number()) throw fail("the range of " + name + " is not two numbers");
            const ActivationRange a{min.get<float>(), max.get<float>()};
            if (!std::isfinite(a.min) || !std::isfinite(a.max) || a.min > a.max)
                throw fail("the range of " + name + " is not finite with min <= max");
            c.ranges[name] = a;
        }
    } catch (const nlohmann::json::exception& e) {
        throw fail(e.what());
    }
    return c;
}

void write_int8_calibration(const std::string& path, const Int8Calibration& c) {
    nlohmann::ordered_json ranges = nlohmann::ordered_json::object();
    for (const auto& [name, r] : c.ranges) ranges[name] = {{"min", r.min}, {"max", r.max}};
    const nlohmann::ordered_json j = {
        {"format", kCalibrationFormat}, {"version", kCalibrationVersion}, {"model", c.model},   {"method", c.method},
        {"percentile", c.percentile}, {"images", c.images}, {"ranges", ranges},
    };
    write_file_atomic(path, j.dump(2) + "\n");
}

}  // namespace vitreg
