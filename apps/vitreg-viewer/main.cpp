// vitreg-viewer MODEL[@KIND]... IMAGE: click a patch and see where it looks, layer by layer and
// head by head, and flip between configurations. --snapshot renders the same view to a PNG.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <opencv2/highgui.hpp>

#include "../pixel_args.hpp"
#include "vitreg/error.hpp"
#include "vitreg/render/explorer.hpp"
#include "vitreg/image.hpp"
#include "vitreg/model_request.hpp"
#include "vitreg/model_spec.hpp"
#include "vitreg/probe.hpp"
#include "vitreg/render/render.hpp"

using namespace vitreg;
using render::ViewState;

namespace {

const char* const kWindow = "vitreg-viewer";
const char* const kHelp =
    "keys: mouse click = query that patch | c = CLS | 1-9 = register 1-9 (0 = register 10)\n"
    "      [ ] = previous / next layer | , . = previous / next head (mean, max, 0..H-1)\n"
    "      m = next mode (attention, norms, abstention, rollout) | n p = next / previous configuration\n"
    "      - + = overlay opacity | h = this help | s = save view.png | q Esc = quit";

struct Configuration {
    std::unique_ptr<Model> model;
    std::unique_ptr<render::Exploration> exploration;
};

int head_from(const std::string& s) {
    if (s == "mean") return ViewState::kMeanHead;
    if (s == "max") return ViewState::kMaxHead;
    try {
        return std::stoi(s);
    } catch (const std::exception&) {
        throw UsageError("bad --head '" + s + "' (expected mean, max or a head number)");
    }
}

struct App {
    std::vector<Configuration> configs;
    ViewState state;
    bool dirty = true;

    const render::Exploration& current() const { return *configs[state.config].exploration; }
    void clamp() {
        const Trace& t = current().trace();
        state.layer = std::clamp(state.layer, 0, t.layers - 1);
        if (state.head >= t.heads) state.head = t.heads - 1;
        if (state.query >= t.tokens) state.query = 0;
    }
    // Every change is printed, so scripts (and the test) can follow the view.
    void announce() const { std::cout << "view: " << render::describe(current(), state) << std::endl; }
};

void on_mouse(int event, int x, int y, int, void* user) {
    auto* app = static_cast<App*>(user);
    if (event != cv::EVENT_LBUTTONDOWN) return;
    const int token = render::token_at(app->current(), x, y);
    if (token < 0) return;
    app->state.query = token;
    app->dirty = true;
}

void on_layer(int pos, void* user) {
    auto* app = static_cast<App*>(user);
    app->state.layer = pos;
    app->dirty = true;
}

bool handle_key(App& app, int key) {
    const Trace& t = app.current().trace();
    ViewState& s = app.state;
    switch (key) {
        case 'q': case 27: return false;
        case 'c': s.query = 0; break;
        case '[': s.layer = std::max(0, s.layer - 1); break;
        case ']': s.layer = std::min(t.layers - 1, s.layer + 1); break;
        case ',': s.head = s.head == ViewState::kMaxHead ? t.heads - 1 : s.head - 1; break;
        case '.': s.head = s.head == t.heads - 1 ? ViewState::kMaxHead : s.head + 1; break;
        case 'm': s.mode = static_cast<render::ViewMode>((static_cast<int>(s.mode) + 1) % 4); break;
        case 'n': s.config = (s.config + 1) % static_cast<int>(app.configs.size()); break;
        case 'p': s.config = (s.config + static_cast<int>(app.configs.size()) - 1) % static_cast<int>(app.configs.size()); break;
        case '-': s.opacity = std::max(0.0f, s.opacity - 0.1f); break;
        case '+': case '=': s.opacity = std::min(1.0f, s.opacity + 0.1f); break;
        case 'h': std::cout << kHelp << std::endl; return true;
        case 's': cv::imwrite("view.png", render::render_view(app.current(), s)); return true;
        default:
            if (key >= '0' && key <= '9') {
                const int reg = key == '0' ? 9 : key - '1';
                if (reg < t.registers) s.query = t.register_offset() + reg;
                break;
            }
            return true;
    }
    if (s.head < ViewState::kMaxHead) s.head = t.heads - 1;
    app.clamp();
    app.dirty = true;
    return true;
}

int run(int argc, char** argv) {
    CLI::App cli{"vitreg-viewer: an interactive attention-map explorer"};
    std::vector<std::string> positional;
    std::string snapshot, layer = "last", head = "mean", query = "cls", mode = "attention";
    std::vector<std::string> retrofits;
    int threads = 0;
    float opacity = 0.6f;
    std::string precision_name = "fp32", act_quant = "per-token", scales, evict, register_neurons;
    int ttr = 0;
    cli.add_option("MODEL_AND_IMAGE", positional,
                   "checkpoints (each optionally @softmax|@softmax1|@sink, @fp32|@bf16|@int8|@int8=SCALES.json, "
                   "@evict=LIST and @ttr=K:NEURONS), then the image")
        ->required()
        ->expected(2, 64);
    vitreg::cli::PixelArgs pixels;
    vitreg::cli::add_pixel_args(cli, pixels);
    cli.add_option("--attention", retrofits, "also run every checkpoint with these normalizers (retrofits), e.g. softmax1 sink")
        ->check(CLI::IsMember(enum_names<AttentionKind>()));
    cli.add_option("--snapshot", snapshot, "render the view to this PNG and exit (no window)");
    cli.add_option("--layer", layer, "layer to show (a number, -1 or last)")->capture_default_str();
    cli.add_option("--head", head, "mean | max | a head number")->capture_default_str();
    cli.add_option("--query", query, "cls | reg:K | patch:R,C")->capture_default_str();
    cli.add_option("--mode", mode, "attention | norms | abstention | rollout")->capture_default_str();
    cli.add_option("--opacity", opacity, "overlay opacity 0..1")->check(CLI::Range(0.0f, 1.0f))->capture_default_str();
    cli.add_option("--threads", threads, "worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
    cli.add_option("--precision", precision_name, "fp32 | bf16 | int8, for checkpoints without an @PRECISION")
        ->check(CLI::IsMember(enum_names<Precision>()))
        ->capture_default_str();
    cli.add_option("--act-quant", act_quant, "int8 activations: per-token or per-tensor (with --scales)")
        ->check(CLI::IsMember(enum_names<ActQuant>()))
        ->capture_default_str();
    cli.add_option("--scales", scales, "SCALES.json from vitreg calibrate-int8, for --act-quant per-tensor");
    cli.add_option("--evict", evict, "for checkpoints without @evict= or @ttr=: keys to evict (as vitreg --evict)");
    cli.add_option("--ttr", ttr, "for checkpoints without @evict= or @ttr=: test-time registers (needs --register-neurons)")
        ->check(CLI::Range(0, 64));
    cli.add_option("--register-neurons", register_neurons, "neurons.json[:TOP] or LAYER:NEURON,... for --ttr");
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return cli.exit(e) == 0 ? 0 : 2;
    }
    // The precision and intervention of checkpoints that name none of their own (@PRECISION, @evict=, @ttr=).
    const ModelRequest fallback = ModelRequest::from_options(
        "", {{"precision", precision_name}, {"act-quant", act_quant}, {"scales", scales}, {"evict", evict},
             {"ttr", std::to_string(ttr)}, {"register-neurons", register_neurons}});
    const std::string image_path = positional.back();
    positional.pop_back();
    const ResizeSpec spec = vitreg::cli::pixel_spec(pixels);

    // Each checkpoint as given, then with every --attention kind: n and p flip through them all.
    std::vector<std::string> specs = positional;
    for (const auto& kind : retrofits)
        for (const auto& m : positional) {
            ModelSpec s = ModelSpec::parse(m);
            s.attention = parse_attention_kind(kind);
            specs.push_back(s.to_string());
        }
    App app;
    for (const auto& m : specs) {
        const std::string label = m.substr(m.find_last_of('/') + 1);
        Configuration c;
        c.model = std::make_unique<Model>(open_model(ModelRequest::from_spec(ModelSpec::parse(m), fallback)));
        const Config& cfg = c.model->config();
        for (const auto& note : cfg.notes) std::cerr << "vitreg-viewer: note: " << note << "\n";
        const Pixels px = load_pixels(image_path, spec, cfg, ImageLimits{});
        c.exploration = std::make_unique<render::Exploration>(*c.model, label, px, threads);
        app.configs.push_back(std::move(c));
    }
    const Trace& t = app.current().trace();
    app.state.layer = resolve_layers(layer, t.layers).at(0);
    app.state.head = head_from(head);
    if (app.state.head >= t.heads || app.state.head < ViewState::kMaxHead)
        throw UsageError("--head " + head + ": the model has " + std::to_string(t.heads) + " heads");
    app.state.query = TokenRef::parse(query).token_index(t.registers, t.grid_h, t.grid_w, t.class_token);
    app.state.mode = render::parse_view_mode(mode);
    app.state.opacity = opacity;

    if (!snapshot.empty()) {
        render::write_png(snapshot, render::render_view(app.current(), app.state));
        app.announce();
        return 0;
    }
    cv::namedWindow(kWindow, cv::WINDOW_AUTOSIZE);
    cv::setMouseCallback(kWindow, on_mouse, &app);
    cv::createTrackbar("layer", kWindow, nullptr, t.layers - 1, on_layer, &app);
    cv::setTrackbarPos("layer", kWindow, app.state.layer);
    std::cout << kHelp << std::endl;
    while (true) {
        if (app.dirty) {
            app.clamp();
            cv::imshow(kWindow, render::render_view(app.current(), app.state));
            cv::setTrackbarPos("layer", kWindow, app.state.layer);
            app.announce();
            app.dirty = false;
        }
        const int key = cv::waitKey(30);
        if (key >= 0 && !handle_key(app, key & 0xff)) break;
        if (cv::getWindowProperty(kWindow, cv::WND_PROP_VISIBLE) < 1) break;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const Error& e) {
        std::cerr << "vitreg-viewer: " << e.what() << "\n";
        return 1;
    } catch (const cv::Exception& e) {
        std::cerr << "vitreg-viewer: display: " << e.what() << "\n";
        return 1;
    }
}
