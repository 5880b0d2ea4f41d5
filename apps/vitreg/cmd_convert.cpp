// vitreg convert MODEL OUT.safetensors [--dtype f32|f16|bf16]: any checkpoint vitreg reads (any
// family, layout or file format) in vitreg's own layout, its resolved configuration in the
// metadata, with the source's name and digest.
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
    cmd->add_option("--dtype", a->dtype, "storage type of the weights")->check(CLI::IsMember({"f32", "f16", "bf16"}))->capture_default_str();
    // The table's options that change the configuration written; convert bakes them in.
    add_table_option(*cmd, "key", a->model.options["key"]);
    add_table_option(*cmd, "attention", a->model.options["attention"])
        ->description("bake in another normalizer than trained (a retrofit)");
    add_table_option(*cmd, "pos-interp", a->model.options["pos-interp"])->description("position-embedding resampling to record");
    cmd->callback([&run, a] {
        run = [a] {
            const DType dtype = a->dtype == "f16" ? DType::F16 : a->dtype == "bf16" ? DType::BF16 : DType::F32;
            const Config c = convert_checkpoint(resolve_model_path(a->model.model), a->model.request().overrides, dtype, a->out);
            for (const auto& note : c.notes) status_out() << "vitreg: note: " << note << "\n";
            status_out() << "vitreg: wrote " << a->out << " (" << to_string(c.family) << ", " << to_string(dtype) << ", from "
                      << c.source << " layout)\n";
            return 0;
        };
    });
}

}  // namespace vitreg::cli
