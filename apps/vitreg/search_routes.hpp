#pragma once
// `vitreg serve MODEL --index INDEX`: the search page and its API on the explorer's server (same
// loopback address, body limit, forward bound and error answers). A query is an uploaded image
// or an indexed one (by id); thumbnails are the indexed images' own bytes, read from their file
// or from their tar shard at the member's offset. Requests name ids, never paths.
#include <string>

#include "explore_server.hpp"
#include "vitreg/model.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg::cli {

class SearchRoutes {
public:
    // `model` must outlive the server; the index is loaded here (UsageError for a bad one).
    SearchRoutes(const Model& model, const std::string& index_folder, ExploreServer& server);
    // GET /search (the page), POST /api/search?k= (an image's bytes), GET /api/search?id=&k=,
    // GET /api/thumb?id= (the image's bytes, 422 when they cannot be read: a compressed shard).
    void install();

private:
    nlohmann::json results(const std::string& name, const std::string& bytes, int k);

    const Model& model_;
    Index index_;
    ExploreServer& server_;
    std::string feature_;
    ResizeSpec resize_;  // the queries': the extract's pixel options where the index states them
};

// The search page: upload an image, see the top k as thumbnails, click one to search from it.
std::string search_page(const std::string& title, int k);

}  // namespace vitreg::cli
