// vitreg convert MODEL OUT.safetensors [--dtype f32|f16|bf16|int8|int4]: any checkpoint vitreg
// reads (any family, layout or file format) in vitreg's own layout, its resolved configuration in
// the metadata, with the source's name and digest. int8 (int4): the weights quantized as
// MODEL@int8 (@int4) packs them (int8: --int8-weights 8 or 7), the file then runs only at that.
#include <iostream>

#include "common.hpp"
#include "vitreg/canonical_checkpoint.hpp"
#include "vitreg/checkpoint.hpp"

namespace vitreg::cli {

void register_convert(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("convert", "write any readable checkpoint in vitreg's own safetensors layout");
    struct Args {
        ModelArgs model;
        std::string out, dtype = "f32";
    };
    auto a = std::make_shared<Args>();
    cmd->add_option("MODEL", a->model.model, "a checkpoint in any form vitreg reads (see vitreg info --help)")->required();
    cmd->add_option("OUT", a->out, "the .safetensors file to write")->required();
    cmd->add_option("--dtype", a->dtype,
                    "storage type of the weights; int8, int4: the linears quantized as MODEL@int8 (@int4) runs them (a "
                    "file that then runs only at that precision, to the same features, loading without quantizing)")
        ->check(CLI::IsMember({"f32", "f16", "bf16", "int8", "int4"}))
        ->capture_default_str();
    add_table_option(*cmd, "int8-weights", a->model.options["int8-weights"])->description("--dtype int8: weight bits, 8 or 7 (ONNX Runtime's reduce_range)");
    // The table's options that change the configuration written; convert bakes them in.
    add_table_option(*cmd, "key", a->model.options["key"]);
    add_table_option(*cmd, "attention", a->model.options["attention"])
        ->description("bake in another normalizer than trained (a retrofit)");
    add_table_option(*cmd, "pos-interp", a->model.options["pos-interp"])->description("position-embedding resampling to record");
    cmd->callback([&run, a] {
        run = [a] {
            const DType dtype = a->dtype == "f16" ? DType::F16 : a->dtype == "bf16" ? DType::BF16 : DType::F32;
            const ModelRequest request = a->model.request();
            WeightQuantization quantization;
            if (a->dtype == "int8") quantization = {Precision::Int8, request.precision.int8_weight_bits};
            else if (a->dtype == "int4") quantization = {Precision::Int4, 4};
            else if (!a->model.options["int8-weights"].empty())
                throw UsageError("--int8-weights: applies to --dtype int8 only (--dtype is " + a->dtype + ")");
            const Config c = convert_checkpoint(resolve_model_path(request.model), request.overrides, dtype, a->out, quantization);
            for (const auto& note : c.notes) status_out() << "vitreg: note: " << note << "\n";
            status_out() << "vitreg: wrote " << a->out << " (" << to_string(c.family) << ", "
                         << (quantization.quantized()
                                 ? to_string(quantization.precision) + ", " + std::to_string(quantization.bits) + "-bit weights"
                                 : to_string(dtype))
                         << ", from " << c.source << " layout)\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
