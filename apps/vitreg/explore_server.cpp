#include "explore_server.hpp"

#include <httplib.h>

#include <cctype>
#include <iostream>
#include <limits>

#include "vitreg/error.hpp"
#include "vitreg/inputs.hpp"
#include "core/parse_number.hpp"
#include "http_util.hpp"

namespace vitreg::cli {

using nlohmann::json;

// One image through every configuration; Exploration's caches serve one caller at a time.
struct ExploreServer::LiveImage {
    std::string name;
    std::vector<std::unique_ptr<render::Exploration>> views;
    json entry;
    std::size_t bytes = 0;  // what it holds: q/k and, once rollout is asked, the fused rows
    std::mutex mutex;
};

void send_json(httplib::Response& res, const json& body, int status) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
    res.set_header("Cache-Control", "no-store");
}

std::string param(const httplib::Request& req, const char* key) {
    if (!req.has_param(key)) throw HttpError(400, std::string("missing parameter '") + key + "'");
    return req.get_param_value(key);
}

int int_param(const httplib::Request& req, const char* key, long lo, long hi) {
    const std::string text = param(req, key);
    const auto v = parse_integer(text, lo, hi);
    if (!v) throw HttpError(400, std::string("parameter '") + key + "' must be a whole number in " + std::to_string(lo) + ".." +
                                     std::to_string(hi) + ", not '" + text + "'");
    return static_cast<int>(*v);
}

namespace {

// %XX sequences decoded (the page sends X-Filename percent-encoded, so any name survives a header).
std::string percent_decoded(const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
            out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

// An uploaded file's name as shown: its last path part, printable ASCII only, short.
std::string upload_name(const std::string& given, int number) {
    const std::string decoded = percent_decoded(given);
    std::string base = decoded.substr(decoded.find_last_of("/\\") + 1), clean;
    for (char ch : base)
        if (ch >= 32 && ch < 127 && ch != '"' && ch != '&' && ch != '?' && ch != '#' && ch != '%') clean += ch == ' ' ? '_' : ch;
    if (clean.size() > 80) clean.resize(80);
    return "upload-" + std::to_string(number) + (clean.empty() ? "" : "-" + clean);
}

}  // namespace

ExploreServer::ExploreServer(std::vector<render::PageConfig> configs, ServerOptions options)
    : configs_(std::move(configs)), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
    if (configs_.empty()) throw UsageError("serve: no configuration given");
    if (!options_.images_dir.empty()) {
        std::string dir = options_.images_dir;
        while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
        for (const auto& path : expand_inputs({dir})) {
            const std::string name = path.rfind(dir + "/", 0) == 0 ? path.substr(dir.size() + 1) : path;
            listing_.emplace(name, path);
        }
        if (listing_.empty()) throw UsageError("serve: no images in " + options_.images_dir);
    }
    routes();
}

ExploreServer::~ExploreServer() = default;

std::shared_ptr<ExploreServer::LiveImage> ExploreServer::cached(const std::string& name) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
        if ((*it)->name == name) {
            cache_.splice(cache_.begin(), cache_, it);
            return cache_.front();
        }
    return nullptr;
}

std::shared_ptr<ExploreServer::LiveImage> ExploreServer::compute(const std::string& name, const std::string& path,
                                                                 const std::string& bytes) {
    ForwardSlot slot(forwards_, options_.max_forwards);
    auto image = std::make_shared<LiveImage>();
    image->name = name;
    std::vector<const render::Exploration*> views;
    for (const auto& c : configs_) {
        const Config& cfg = c.model->config();
        const Pixels px = path.empty() ? load_pixels(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), name,
                                                     options_.resize, cfg, options_.limits)
                                       : load_pixels(path, options_.resize, cfg, options_.limits);
        c.model->check_tokens(px.height, px.width, options_.max_tokens, name);
        image->views.push_back(std::make_unique<render::Exploration>(*c.model, c.label, px, options_.threads, options_.max_tokens, c.rule));
        views.push_back(image->views.back().get());
        const Trace& t = views.back()->trace();
        image->bytes += (t.qkv.size() + static_cast<std::size_t>(t.layers) * t.tokens * t.tokens) * sizeof(float);
    }
    image->entry = render::image_entry(name, views, nullptr, false);
    std::lock_guard<std::mutex> lock(cache_mutex_);
    cache_.push_front(image);
    cached_bytes_ += image->bytes;
    while (cache_.size() > 1 && cached_bytes_ > options_.cache_bytes) {  // the newest stays, whatever its size
        cached_bytes_ -= cache_.back()->bytes;
        cache_.pop_back();
    }
    return image;
}

std::shared_ptr<ExploreServer::LiveImage> ExploreServer::listed(const std::string& name) {
    if (auto hit = cached(name)) return hit;
    // Only names from the listing are read: a request never makes a path.
    const auto it = listing_.find(name);
    if (it == listing_.end()) throw HttpError(404, "no image '" + name + "' among --images (GET api/images lists them)");
    return compute(name, it->second, {});
}

void ExploreServer::routes() {
    httplib::Server& s = *http_;
    s.set_payload_max_length(options_.max_body_bytes);
    s.set_read_timeout(std::chrono::seconds(20));
    s.set_write_timeout(std::chrono::seconds(20));

    // A declared body over the limit is refused before any of it is read (httplib would read
    // and discard it all first).
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        const auto declared = parse_integer(req.get_header_value("Content-Length"), 0, std::numeric_limits<long>::max());
        if (!req.has_header("Content-Length") || (declared && static_cast<std::size_t>(*declared) <= options_.max_body_bytes))
            return httplib::Server::HandlerResponse::Unhandled;
        res.set_header("Connection", "close");
        send_json(res, {{"error", "request body of " + req.get_header_value("Content-Length") + " bytes over the server's limit of " +
                                      std::to_string(options_.max_body_bytes) + " (--max-upload-mb)"}},
                  413);
        return httplib::Server::HandlerResponse::Handled;
    });
    s.Get("/", [this](const httplib::Request&, httplib::Response& res) {
        json listing = json::array();
        for (const auto& [name, path] : listing_) listing.push_back({{"name", name}});
        const std::string page =
            render::explore_page({{"format", "vitreg-explore/1"}, {"live", true}, {"title", options_.title}, {"images", listing}});
        res.set_content(page, "text/html; charset=utf-8");
    });
    s.Get("/api/images", [this](const httplib::Request&, httplib::Response& res) {
        json names = json::array();
        for (const auto& [name, path] : listing_) names.push_back(name);
        send_json(res, {{"images", names}});
    });
    s.Get("/api/image", [this](const httplib::Request& req, httplib::Response& res) {
        const auto image = listed(param(req, "name"));
        send_json(res, image->entry);
    });
    s.Post("/api/upload", [this](const httplib::Request& req, httplib::Response& res) {
        if (req.body.empty()) throw HttpError(400, "upload: the request has no body (send the image file's bytes)");
        const std::string name = upload_name(req.get_header_value("X-Filename"), ++uploads_);
        const auto image = compute(name, {}, req.body);
        send_json(res, image->entry);
    });
    s.Get("/api/rows", [this](const httplib::Request& req, httplib::Response& res) {
        const std::string name = param(req, "image");
        auto image = cached(name);
        if (!image && name.rfind("upload-", 0) == 0)
            throw HttpError(410, "upload '" + name + "' is no longer kept (--cache-mb); upload it again");
        if (!image) image = listed(name);
        const int config = int_param(req, "config", 0, static_cast<long>(image->views.size()) - 1);
        const auto& view = *image->views[static_cast<std::size_t>(config)];
        const int query = int_param(req, "query", 0, view.trace().tokens - 1);
        const bool rollout = req.has_param("rollout") && req.get_param_value("rollout") == "1";
        std::lock_guard<std::mutex> lock(image->mutex);
        send_json(res, render::query_entry(view, query, rollout));
    });

    s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        int status = 500;
        std::string message = "internal error";
        try {
            std::rethrow_exception(ep);
        } catch (const HttpError& e) {
            status = e.status;
            message = e.what();
        } catch (const ImageError& e) {
            status = 422;  // the file, not the request, is at fault
            message = e.what();
        } catch (const Error& e) {
            status = 400;
            message = e.what();
        } catch (const std::bad_alloc&) {
            status = 503;
            message = "out of memory for this request";
        } catch (const std::exception& e) {
            message = e.what();
        }
        if (status >= 500) std::cerr << "vitreg serve: " << req.method << " " << req.path << ": " << message << "\n";
        send_json(res, {{"error", message}}, status);
    });
    s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        const std::string message = res.status == 404   ? "no such page: " + req.path
                                    : res.status == 413 ? "request body over the server's limit (--max-upload-mb)"
                                                        : "bad request";
        send_json(res, {{"error", message}}, res.status);
    });
}

int ExploreServer::bind() {
    const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                        : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
    if (port < 0)
        throw IoError("serve: cannot listen on " + options_.host + ":" + std::to_string(options_.port) + " (in use? try --port 0)");
    return port;
}

void ExploreServer::run() { http_->listen_after_bind(); }

void ExploreServer::stop() { http_->stop(); }

}  // namespace vitreg::cli
