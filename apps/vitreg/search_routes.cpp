#include "search_routes.hpp"

#include <httplib.h>

#include "http_util.hpp"
#include "vitreg/preprocess.hpp"

namespace vitreg::cli {

namespace {

constexpr int kMaxK = 100;

// The image type by its first bytes (what a browser needs to draw it), or "" for none it draws.
std::string image_type(const std::string& bytes) {
    if (bytes.rfind("\xff\xd8\xff", 0) == 0) return "image/jpeg";
    if (bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0) return "image/png";
    if (bytes.size() >= 12 && bytes.compare(0, 4, "RIFF") == 0 && bytes.compare(8, 4, "WEBP") == 0) return "image/webp";
    if (bytes.rfind("GIF8", 0) == 0) return "image/gif";
    if (bytes.rfind("BM", 0) == 0) return "image/bmp";
    return "";
}

// An indexed image's bytes; 422 when they cannot be read (a compressed shard, a moved file).
std::string entry_bytes(const IndexEntry& e, std::uint64_t max_bytes) {
    try {
        return read_entry_bytes(e, max_bytes);
    } catch (const UsageError& error) {
        throw HttpError(422, std::string("cannot read ") + e.key + ": " + error.what());
    }
}

}  // namespace

SearchRoutes::SearchRoutes(const Model& model, const std::string& index_folder, ExploreServer& server)
    : model_(model),
      index_(index_folder),
      server_(server),
      feature_(index_.info().value("feature", "cls")),
      resize_(extracted_pixels(index_.info()).value_or(server.options().resize)) {}

nlohmann::json SearchRoutes::results(const std::string& name, const std::string& bytes, int k) {
    const ServerOptions& o = server_.options();
    std::vector<float> q;
    {
        ForwardSlot slot(server_.forwards(), o.max_forwards);
        const Pixels px = load_pixels(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), name, resize_,
                                      model_.config(), o.limits);
        model_.check_tokens(px.height, px.width, o.max_tokens, name);
        q = query_vector(model_, px, feature_, o.threads);
    }
    if (static_cast<int>(q.size()) != index_.dim())
        throw HttpError(409, "the index holds " + std::to_string(index_.dim()) + "-d vectors, the model gives " + std::to_string(q.size()));
    nlohmann::json hits = nlohmann::json::array();
    const auto found = index_.search(q.data(), 1, static_cast<int>(std::min<std::int64_t>(k, index_.size())));
    for (const auto& hit : found[0]) {
        nlohmann::json j = index_.describe(hit);
        j["thumb"] = "api/thumb?id=" + std::to_string(hit.id);
        hits.push_back(std::move(j));
    }
    return {{"query", name}, {"results", hits}};
}

void SearchRoutes::install() {
    httplib::Server& s = server_.http();
    const long last = static_cast<long>(std::min<std::int64_t>(index_.size() - 1, 0x7fffffff));
    s.Get("/search", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(search_page(server_.options().title + " search", 10), "text/html; charset=utf-8");
    });
    s.Post("/api/search", [this](const httplib::Request& req, httplib::Response& res) {
        if (req.body.empty()) throw HttpError(400, "search: the request has no body (send the image file's bytes)");
        const int k = req.has_param("k") ? int_param(req, "k", 1, kMaxK) : 10;
        send_json(res, results("upload", req.body, k));
    });
    s.Get("/api/search", [this, last](const httplib::Request& req, httplib::Response& res) {
        const int id = int_param(req, "id", 0, last);
        const int k = req.has_param("k") ? int_param(req, "k", 1, kMaxK) : 10;
        const IndexEntry e = index_.entry(id);
        send_json(res, results(e.key, entry_bytes(e, server_.options().max_body_bytes), k));
    });
    s.Get("/api/thumb", [this, last](const httplib::Request& req, httplib::Response& res) {
        const IndexEntry e = index_.entry(int_param(req, "id", 0, last));
        const std::string bytes = entry_bytes(e, server_.options().max_body_bytes);
        const std::string type = image_type(bytes);
        if (type.empty()) throw HttpError(422, "no thumbnail: " + e.key + " is no image type a browser draws");
        res.set_content(bytes, type);
        res.set_header("Cache-Control", "max-age=3600");
    });
}

}  // namespace vitreg::cli
