// vitreg search INDEX MODEL IMAGE... -k 10: each image's nearest indexed images, as JSON lines.
#include <iostream>

#include "common.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg::cli {

void register_search(CLI::App& app, Command& run) {
    auto* cmd = app.add_subcommand("search", "the k nearest indexed images of each image, one JSON line per image");
    struct Args {
        std::string index;
        ModelArgs model;
        std::vector<std::string> images;
        int k = 10, threads = 0;
        PixelArgs pixels;
        InputLimits limits;
    };
    auto a = std::make_shared<Args>();
    cmd->add_option("INDEX", a->index, "the folder `vitreg index -o` wrote")->required();
    add_model_args(*cmd, a->model);
    cmd->add_option("IMAGE", a->images, "query images: files, folders, @list files")->required();
    cmd->add_option("-k", a->k, "results per image")->check(CLI::Range(1, 1024))->capture_default_str();
    add_pixel_args(*cmd, a->pixels,
                   "eval | none | WxH | short:N | long:N; every pixel option defaults to the extract's that the index "
                   "states (index.json), and one that contradicts it is refused");
    add_input_limit_args(*cmd, a->limits);
    cmd->add_option("--threads", a->threads, "worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
    cmd->callback([&run, a] {
        run = [a] {
            const Index index(a->index);
            const std::string feature = index.info().value("feature", "cls");
            const Model model = load_model(a->model);
            std::vector<std::pair<std::string, std::string>> given;
            for (const auto& kv : a->pixels.given) given.push_back({kv.first, "--" + kv.first});
            const ResizeSpec resize = query_pixels(index.info(), model, pixel_spec(a->pixels), given);
            status_out() << query_mismatch(index.info(), model);
            for (const auto& image : expand_inputs(a->images)) {
                const Pixels px = load_pixels(image, resize, model.config(), a->limits.image);
                const auto q = query_vector(model, px, feature, a->threads);
                if (static_cast<int>(q.size()) != index.dim())
                    throw UsageError(a->index + ": holds " + std::to_string(index.dim()) + "-d " + feature + " vectors, but " +
                                     a->model.model + " gives " + std::to_string(q.size()));
                nlohmann::json results = nlohmann::json::array();
                const auto found = index.search(q.data(), 1, a->k);
                for (const auto& hit : found[0]) results.push_back(index.describe(hit));
                std::cout << nlohmann::json{{"query", image}, {"results", results}}.dump() << "\n";
            }
            return 0;
        };
    });
}

}  // namespace vitreg::cli
