#pragma once
// The live explorer behind `vitreg serve`: the explore page over loopback HTTP, each image run
// through every configuration on first request, any query's rows computed on demand from the
// recorded q/k. What a request may cost is bounded (body size, image pixels, forwards at once);
// a bad request gets a 4xx with {"error": ...}, and only images listed from --images are read.
#include <atomic>
#include <cstdint>
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vitreg/render/explore_page.hpp"
#include "vitreg/image.hpp"
#include "vitreg/preprocess.hpp"

namespace httplib {
class Server;
}

namespace vitreg::cli {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;  // 0: any free port
    std::string images_dir;  // "" = uploads only
    std::size_t max_body_bytes = std::size_t(32) << 20;
    int max_forwards = 2;   // images being run at once; more get 429
    std::size_t cache_bytes = std::size_t(1) << 30;  // images kept (their q/k) for row requests
    ResizeSpec resize;
    ImageLimits limits;
    std::int64_t max_tokens = kDefaultMaxTokens;
    int threads = 0;
    std::string title = "vitreg serve";
};

class ExploreServer {
public:
    ExploreServer(std::vector<render::PageConfig> configs, ServerOptions options);
    ~ExploreServer();
    int bind();  // the port, listening; throws IoError when it cannot bind
    void run();  // serves until stop()
    void stop();
    // The server, for more routes under the same limits and error answers (the search page).
    httplib::Server& http() { return *http_; }
    // The forwards running now, which --max-forwards bounds (routes added through http() count theirs here).
    std::atomic<int>& forwards() { return forwards_; }
    const ServerOptions& options() const { return options_; }

private:
    struct LiveImage;
    std::shared_ptr<LiveImage> listed(const std::string& name);
    std::shared_ptr<LiveImage> cached(const std::string& name);
    std::shared_ptr<LiveImage> compute(const std::string& name, const std::string& path, const std::string& bytes);
    void routes();

    std::vector<render::PageConfig> configs_;
    ServerOptions options_;
    std::map<std::string, std::string> listing_;  // name (relative to --images) -> path
    std::unique_ptr<httplib::Server> http_;
    std::atomic<int> forwards_{0};
    std::atomic<int> uploads_{0};
    std::mutex cache_mutex_;
    std::list<std::shared_ptr<LiveImage>> cache_;  // most recently used first
    std::size_t cached_bytes_ = 0;
};

}  // namespace vitreg::cli
