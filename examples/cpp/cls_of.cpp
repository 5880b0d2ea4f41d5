// cls_of MODEL IMAGE: prints the first values of the image's CLS feature.
#include <iostream>
#include <vitreg/image.hpp>
#include <vitreg/model.hpp>
#include <vitreg/preprocess.hpp>

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    const vitreg::Model model = vitreg::Model::load(argv[1]);
    const vitreg::Config& c = model.config();
    // The file as the checkpoint's own PyTorch pipeline prepares it (its eval transform).
    const vitreg::Pixels px = vitreg::load_pixels(argv[2], vitreg::ResizeSpec::parse("eval"), c, vitreg::ImageLimits{});
    const vitreg::Features f = model.forward(px.chw.data(), 1, px.height, px.width);
    std::cout << "dim " << f.dim << " cls " << f.cls[0] << " " << f.cls[1] << " " << f.cls[2] << "\n";
}
