// vitreg serve MODEL... [--images DIR] [--index INDEX] [--port 8080]: the explore page live from a loopback
// HTTP server: any image of the folder or dropped onto the page, any query at any size; with an
// index, a search page over it too.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <thread>

#include "common.hpp"
#include "explore_server.hpp"
#include "search_routes.hpp"
#include "vitreg/error.hpp"

namespace vitreg::cli {

namespace {

struct ServeArgs {
    std::vector<std::string> models;
    ServerOptions server;
    PixelArgs pixels;
    InputLimits limits;
    double max_upload_mb = 32, cache_mb = 1024;
    std::string index;  // --index: the search page over it
};

// SIGINT and SIGTERM stop the server from a thread that waits for them: a signal handler may
// not call into the server, so it only writes a byte to a pipe (async-signal-safe), whichever
// thread it lands on (TBB's workers included).
int stop_pipe[2] = {-1, -1};

void on_stop_signal(int) {
    const char byte = 1;
    [[maybe_unused]] const auto n = write(stop_pipe[1], &byte, 1);
}

// A signal may come before the server listens, and a stop before it listens is lost: the
// waiter repeats it until the server's loop has returned (`finished`).
std::thread stop_on_signal(ExploreServer& server, const std::atomic<bool>& finished) {
    if (pipe(stop_pipe) != 0) throw IoError("serve: cannot make a pipe for signals");
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    return std::thread([&server, &finished] {
        char byte = 0;
        while (read(stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
        }
        if (byte == 1) status_out() << "vitreg serve: stopping\n";
        while (!finished) {
            server.stop();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
}

}  // namespace

void register_serve(CLI::App& app, Command& run) {
    auto a = std::make_shared<ServeArgs>();
    auto* cmd = app.add_subcommand("serve",
                                   "the attention explorer served live over HTTP on loopback: images from a folder or "
                                   "uploaded, any query at any size, computed on demand");
    cmd->add_option("MODEL", a->models,
                    "checkpoints, each optionally @softmax|@softmax1|@sink, @fp32|@bf16|@int8|@int8=SCALES.json, "
                    "@evict=LIST and @ttr=K:NEURONS")
        ->required();
    cmd->add_option("--images", a->server.images_dir, "a folder of images to offer (recursive); without it, uploads only")
        ->check(CLI::ExistingDirectory);
    cmd->add_option("--host", a->server.host, "address to listen on (loopback unless you mean otherwise)")->capture_default_str();
    cmd->add_option("--port", a->server.port, "port (0 = any free one, printed)")->check(CLI::Range(0, 65535))->capture_default_str();
    cmd->add_option("--max-upload-mb", a->max_upload_mb, "the largest request body (an uploaded image), MiB")
        ->check(CLI::Range(0.01, 1024.0))
        ->capture_default_str();
    cmd->add_option("--max-forwards", a->server.max_forwards, "images run at once; requests beyond get 429")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    cmd->add_option("--cache-mb", a->cache_mb, "memory for the images whose q/k stay for row requests (least recently used go first)")
        ->check(CLI::Range(1.0, 65536.0))
        ->capture_default_str();
    cmd->add_option("--index", a->index,
                    "an index folder (`vitreg index`): also serve /search, a search page over it with the first MODEL "
                    "(thumbnails read from the images' files or tar shards)")
        ->check(CLI::ExistingDirectory);
    cmd->add_option("--title", a->server.title, "the page's title")->capture_default_str();
    add_pixel_args(*cmd, a->pixels, "eval | none | WxH | short:N | long:N");
    add_input_limit_args(*cmd, a->limits);
    cmd->add_option("--threads", a->server.threads, "worker threads per forward (0 = all cores)")->check(CLI::Range(0, 1024));
    cmd->callback([&run, a] {
        run = [a] {
            std::vector<Configuration> loaded;
            for (const auto& spec : a->models) loaded.push_back(load_configuration(spec));
            std::vector<render::PageConfig> configs;
            for (const auto& c : loaded) configs.push_back({c.label, &c.model, ArtifactRule{}});
            ServerOptions o = a->server;
            o.resize = pixel_spec(a->pixels);
            o.limits = a->limits.image;
            o.max_tokens = a->limits.max_tokens;
            o.max_body_bytes = static_cast<std::size_t>(a->max_upload_mb * 1024 * 1024);
            o.cache_bytes = static_cast<std::size_t>(a->cache_mb * 1024 * 1024);
            ExploreServer server(configs, o);
            std::unique_ptr<SearchRoutes> search;
            if (!a->index.empty()) {
                search = std::make_unique<SearchRoutes>(*configs.front().model, a->index, server);
                search->install();
            }
            const int port = server.bind();
            std::atomic<bool> finished{false};
            std::thread waiter = stop_on_signal(server, finished);
            std::cout << "vitreg serve: http://" << o.host << ":" << port << "/" << std::endl;
            if (search) status_out() << "vitreg serve: the search page is http://" << o.host << ":" << port << "/search\n";
            status_out() << "vitreg serve: from another machine, tunnel it: ssh -L " << port << ":127.0.0.1:" << port
                      << " THIS_HOST, then open http://127.0.0.1:" << port << "/ (Ctrl-C stops)\n";
            server.run();
            finished = true;
            const char done = 2;  // wakes the waiter if the server stopped by itself
            [[maybe_unused]] const auto n = write(stop_pipe[1], &done, 1);
            waiter.join();
            return 0;
        };
    });
}

}  // namespace vitreg::cli
