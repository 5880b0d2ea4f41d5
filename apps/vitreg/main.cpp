// vitreg: ViT feature extraction and attention-artifact analysis on the CPU.
#include <iostream>

#include "common.hpp"
#include "vitreg/error.hpp"
#include "vitreg/version.hpp"

int main(int argc, char** argv) {
    vitreg::cli::keep_big_blocks_in_heap(true);  // the images' decode buffers are reused
    // Named, so --help, the man page and docs/cli.md say `vitreg` whatever path ran it.
    CLI::App app{"vitreg: ViT feature extraction with registers, softmax-1 and sink attention", "vitreg"};
    app.set_version_flag("--version", std::string("vitreg ") + VITREG_VERSION);
    app.require_subcommand(1);
    vitreg::cli::Command run;
    vitreg::cli::register_info(app, run);
    vitreg::cli::register_extract(app, run);
    vitreg::cli::register_bench(app, run);
    vitreg::cli::register_maps(app, run);
    vitreg::cli::register_compare(app, run);
    vitreg::cli::register_dense(app, run);
    vitreg::cli::register_linprobe(app, run);
    vitreg::cli::register_merge(app, run);
    vitreg::cli::register_calibrate(app, run);
    vitreg::cli::register_calibrate_sink(app, run);
    vitreg::cli::register_calibrate_bias(app, run);
    vitreg::cli::register_find_register_neurons(app, run);
    vitreg::cli::register_study(app, run);
    vitreg::cli::register_defects(app, run);
    vitreg::cli::register_convert(app, run);
    vitreg::cli::register_explore(app, run);
    vitreg::cli::register_serve(app, run);
    vitreg::cli::register_eval(app, run);
    vitreg::cli::register_index(app, run);
    vitreg::cli::register_search(app, run);
    vitreg::cli::add_quiet_flag(app);  // after every subcommand is registered
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;  // --help and --version succeed; bad usage is 2
    }
    try {
        return run();
    } catch (const vitreg::Error& e) {
        std::cerr << "vitreg: " << e.what() << "\n";
        return 1;
    } catch (const std::bad_alloc&) {
        std::cerr << "vitreg: out of memory\n";
        return 1;
    }
}
