// A query image's vector, the same array of the forward that `vitreg extract` writes.
#include "vitreg/error.hpp"
#include "vitreg/model.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/search/index.hpp"

namespace vitreg {

std::vector<float> query_vector(const Model& model, const Pixels& px, const std::string& feature, int threads) {
    const Features f = model.forward(px.chw.data(), 1, px.height, px.width, ForwardOptions{threads});
    if (feature == "cls") return std::vector<float>(f.cls_of(0), f.cls_of(0) + f.dim);
    if (feature == "pooled") return f.pooled_of(0);
    if (feature == "embedding") {
        if (f.embedding_dim == 0) throw UsageError("search: the index holds embeddings, but this model has no projection");
        return std::vector<float>(f.embedding_of(0), f.embedding_of(0) + f.embedding_dim);
    }
    throw UsageError("search: unknown feature '" + feature + "' (cls, pooled or embedding)");
}

std::string query_mismatch(const nlohmann::json& info, const Model& model) {
    const auto source = info.find("source");
    if (source == info.end() || !source->is_object() || !source->contains("run") || !(*source)["run"].is_object()) return {};
    const std::string model_path = (*source)["run"].value("model", std::string());
    if (!model_path.empty() && model_path != model.path())
        return "the index's features were extracted by " + model_path + "; this search runs " + model.path() + "\n";
    return {};
}

}  // namespace vitreg
