// artifacts_of MODEL OUT_DIR IMAGE...: writes the images' CLS features to OUT_DIR (vitreg::batch,
// cls.npy and a manifest) and prints each image's artifact patches in the last layer
// (vitreg::analysis: norm > median + 10 MAD over the patch tokens).
#include <iostream>
#include <string>
#include <vector>
#include <vitreg/analysis/stats.hpp>
#include <vitreg/extract.hpp>
#include <vitreg/image.hpp>
#include <vitreg/model.hpp>
#include <vitreg/preprocess.hpp>

int main(int argc, char** argv) {
    if (argc < 4) return 2;
    const vitreg::Model model = vitreg::Model::load(argv[1]);
    const std::vector<std::string> images(argv + 3, argv + argc);
    vitreg::ExtractOptions options;
    options.out_dir = argv[2];
    options.resize = vitreg::ResizeSpec::parse("eval");
    const vitreg::BatchSummary written = vitreg::extract_features(model, images, options);
    std::cout << "extracted " << written.ok << " of " << written.inputs << "\n";
    const int last = model.config().depth - 1;
    for (const std::string& image : images) {
        const vitreg::Pixels px = vitreg::load_pixels(image, options.resize, model.config(), vitreg::ImageLimits{});
        vitreg::Trace trace;
        model.forward(px.chw.data(), 1, px.height, px.width, vitreg::Probe::statistics(model.config().depth), trace);
        const vitreg::LayerStats s = vitreg::layer_stats(trace, 0, last);
        std::cout << "artifacts " << s.artifacts_robust << " of layer " << last << " in " << image << "\n";
    }
}
