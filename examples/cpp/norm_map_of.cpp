// norm_map_of MODEL IMAGE OUT.png: writes the image's patch-feature norms as a heatmap
// (vitreg::render), and prints the grid's size.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>
#include <vitreg/image.hpp>
#include <vitreg/model.hpp>
#include <vitreg/preprocess.hpp>
#include <vitreg/render/render.hpp>

int main(int argc, char** argv) {
    if (argc != 4) return 2;
    const vitreg::Model model = vitreg::Model::load(argv[1]);
    const vitreg::Pixels px = vitreg::load_pixels(argv[2], vitreg::ResizeSpec::parse("eval"), model.config(), vitreg::ImageLimits{});
    const vitreg::Features f = model.forward(px.chw.data(), 1, px.height, px.width);
    std::vector<float> norms(static_cast<std::size_t>(f.patch_count()));
    for (std::size_t p = 0; p < norms.size(); ++p) {
        double sum = 0;
        for (int d = 0; d < f.dim; ++d) sum += double(f.patches[p * f.dim + d]) * f.patches[p * f.dim + d];
        norms[p] = static_cast<float>(std::sqrt(sum));
    }
    const auto [lo, hi] = std::minmax_element(norms.begin(), norms.end());
    namespace render = vitreg::render;
    render::write_png(argv[3], render::colorize(norms.data(), f.grid_h, f.grid_w, *lo, *hi, render::Colormap::Viridis));
    std::cout << "norm map " << f.grid_h << "x" << f.grid_w << "\n";
}
