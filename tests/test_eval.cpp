// The metrics of `vitreg eval` on synthetic cases with known answers (the PyTorch reference
// checks them on real data in tests/python/test_eval.py), and the geometry files it refuses.
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "fuzz_files.hpp"  // zip_archive
#include "test_support.hpp"
#include "vitreg/analysis/correspondence.hpp"
#include "vitreg/analysis/dense_knn.hpp"
#include "vitreg/analysis/iou.hpp"
#include "vitreg/analysis/knn_accuracy.hpp"
#include "vitreg/error.hpp"

using namespace vitreg;

namespace {

// n distinct unit-ish feature rows of `dim` channels: row i peaks at channel i % dim, scaled by i.
std::vector<float> distinct_rows(int n, int dim) {
    std::vector<float> f(static_cast<std::size_t>(n) * dim, 0.01f);
    for (int i = 0; i < n; ++i) {
        f[static_cast<std::size_t>(i) * dim + i % dim] = 1.0f;
        f[static_cast<std::size_t>(i) * dim + (i / dim) % dim] += 0.5f;
    }
    return f;
}

Features grid_features(const std::vector<float>& rows, int grid_h, int grid_w, int dim) {
    Features f;
    f.batch = 1;
    f.dim = dim;
    f.grid_h = grid_h;
    f.grid_w = grid_w;
    f.patches = rows;
    return f;
}

}  // namespace

TEST_CASE("eval: IoU of known predictions", "[eval]") {
    // truth 0 0 1 1 ignored; predicted 0 1 1 1 0: class 0 IoU 1/2, class 1 IoU 2/3.
    const IouScores s = iou_scores({0, 0, 1, 1, -1}, {0, 1, 1, 1, 0}, 3);
    CHECK(std::abs(s.iou[0] - 0.5) < 1e-12);
    CHECK(std::abs(s.iou[1] - 2.0 / 3) < 1e-12);
    CHECK(std::isnan(s.iou[2]));
    CHECK(std::abs(s.miou - (0.5 + 2.0 / 3) / 2) < 1e-12);
    CHECK(std::abs(s.accuracy - 0.75) < 1e-12);
}

TEST_CASE("eval: mutual nearest neighbours find a permutation; the identity homography gives PCK 1", "[eval]") {
    const int gh = 4, gw = 6, dim = 8, n = gh * gw;
    const std::vector<float> a = distinct_rows(n, dim);
    std::vector<float> b(a.size());
    for (int i = 0; i < n; ++i)  // b's patch (n-1-i) is a's patch i
        std::copy(a.begin() + i * dim, a.begin() + (i + 1) * dim, b.begin() + (n - 1 - i) * dim);
    const auto pairs = mutual_nearest_neighbours(a, b, dim);
    REQUIRE(pairs.size() == static_cast<std::size_t>(n));
    for (const auto& [i, j] : pairs) CHECK(j == n - 1 - i);

    Geometry g;
    g.source_width = g.resized_width = g.width = gw * 14;
    g.source_height = g.resized_height = g.height = gh * 14;
    PairGeometry identity;
    identity.homography = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    const Features fa = grid_features(a, gh, gw, dim);
    CorrespondenceScore s = score_correspondence(fa, g, fa, g, 14, identity, {0.05, 0.10, 0.15});
    CHECK(s.matches == n);
    CHECK(s.scored == n);
    for (double v : s.pck) CHECK(v == 1.0);
    // Against the point-reversed features the identity is wrong everywhere but near the centre.
    s = score_correspondence(fa, g, grid_features(b, gh, gw, dim), g, 14, identity, {0.05});
    CHECK(s.pck[0] == 0.0);
    // A homography that moves everything out of view 2 leaves nothing to score.
    PairGeometry away = identity;
    away.homography[2] = 10000;
    CHECK(score_correspondence(fa, g, fa, g, 14, away, {0.1}).scored == 0);
}

TEST_CASE("eval: a disparity map maps left to right and knows where it does not know", "[eval]") {
    PairGeometry d;
    d.kind = PairGeometry::Kind::Disparity;
    d.width = 4;
    d.height = 2;
    d.disparity = {0, 2, 2, 2, 3, NAN, 3, 3};
    double x = 0, y = 0;
    CHECK_FALSE(d.map(0, 0, x, y));  // 0: unknown
    CHECK_FALSE(d.map(1, 1, x, y));  // NaN: unknown
    CHECK_FALSE(d.map(7, 0, x, y));  // outside the map
    REQUIRE(d.map(2.2, 0.9, x, y));  // nearest pixel (2, 1): disparity 3
    CHECK(std::abs(x - (2.2 - 3)) < 1e-12);
    CHECK(y == 0.9);
}

TEST_CASE("eval: k-NN accuracy on separated clusters and a known vote", "[eval]") {
    // Two classes on two axes, five samples each: leave-one-out is right everywhere.
    std::vector<float> f;
    std::vector<int> labels;
    for (int i = 0; i < 10; ++i) {
        f.insert(f.end(), {i < 5 ? 1.0f : 0.1f * i, i < 5 ? 0.1f * i : 1.0f});
        labels.push_back(i < 5 ? 0 : 1);
    }
    const KnnAccuracy r = knn_accuracy(f, labels, 2, 2, KnnVote{3, 0.07});
    CHECK(r.accuracy == 1.0);
    CHECK(r.class_accuracy == std::vector<double>{1.0, 1.0});
    // One query, memory of three: two far neighbours of class 1 lose to one close of class 0 at a low temperature...
    const std::vector<float> memory = {1, 0, 0.6f, 0.8f, 0.6f, 0.8f};
    CHECK(knn_predict({1, 0.05f}, memory, {0, 1, 1}, 2, 2, KnnVote{3, 0.01}) == std::vector<int>{0});
    // ...and win by count at a high one.
    CHECK(knn_predict({1, 0.05f}, memory, {0, 1, 1}, 2, 2, KnnVote{3, 100.0}) == std::vector<int>{1});
}

TEST_CASE("eval: the memory draw is seeded, without replacement, and the memory is bounded", "[eval]") {
    std::uint64_t s1 = 5, s2 = 5, s3 = 6;
    const auto a = memory_sample(50, 10, s1), b = memory_sample(50, 10, s2), c = memory_sample(50, 10, s3);
    CHECK(a == b);
    CHECK(a != c);
    CHECK(std::set<std::size_t>(a.begin(), a.end()).size() == 10);
    for (std::size_t v : a) CHECK(v < 50);
    std::uint64_t s4 = 5;
    CHECK(memory_sample(4, 10, s4) == std::vector<std::size_t>{0, 1, 2, 3});

    // Two clusters of labelled patches: the dense k-NN labels the test image perfectly.
    LabelledPatches train, test;
    for (int i = 0; i < 20; ++i) {
        const int label = i % 2;
        train.features.insert(train.features.end(), {label ? 0.1f : 1.0f, label ? 1.0f : 0.1f + 0.01f * i});
        train.labels.push_back(label);
        test.features.insert(test.features.end(), {label ? 0.2f : 1.0f, label ? 1.0f : 0.2f});
        test.labels.push_back(i % 5 == 0 ? -1 : label);
    }
    DenseKnnOptions o;
    o.memory_per_image = 8;
    const DenseKnnResult r = dense_knn_segmentation({train}, {test}, 2, 2, o);
    CHECK(r.memory == 8);
    CHECK(r.test_patches == 16);
    CHECK(r.scores.miou == 1.0);
    o.max_memory = 7;
    CHECK_THROWS_WITH(dense_knn_segmentation({train}, {test}, 2, 2, o), Catch::Contains("over its bound of 7"));
}

TEST_CASE("eval: geometry files that are not a 3x3 homography are refused by name", "[eval]") {
    test::TempDir dir;
    const std::string xml = dir.path() + "/h.xml", text = dir.path() + "/h.txt", singular = dir.path() + "/s.txt";
    test::write_bytes(xml, "<?xml version=\"1.0\"?><opencv_storage><H type_id=\"opencv-matrix\"><rows>2</rows><cols>3</cols>"
                           "<dt>d</dt><data>1 0 0 0 1 0</data></H></opencv_storage>");
    CHECK_THROWS_WITH(read_pair_geometry(xml), Catch::Contains(xml) && Catch::Contains("3x3, this matrix is 2x3"));
    test::write_bytes(text, "1 0 0\n0 1 0\n0 0\n");
    CHECK_THROWS_WITH(read_pair_geometry(text), Catch::Contains(text) && Catch::Contains("found 8"));
    test::write_bytes(singular, "1 2 3 2 4 6 0 0 1");
    CHECK_THROWS_WITH(read_pair_geometry(singular), Catch::Contains("singular"));
    test::write_bytes(text, "1 0 0 0 1 0 0 0 1");
    CHECK(read_pair_geometry(text).homography[4] == 1.0);
    // Found by fuzz/: the zero matrix passed as regular, a size past int was cast to one (undefined
    // behaviour), and a long element overflowed std::regex's stack.
    test::write_bytes(singular, "0 0 0 0 0 0 0 0 0");
    CHECK_THROWS_WITH(read_pair_geometry(singular), Catch::Contains(singular) && Catch::Contains("singular"));
    test::write_bytes(text, "1e200 0 0 0 1e200 0 0 0 1e200");  // regular at any scale
    CHECK(read_pair_geometry(text).homography[8] == 1e200);
    test::write_bytes(xml, "<rows>1e300</rows><cols>3</cols><data>1 0 0 0 1 0 0 0 1</data>");
    CHECK_THROWS_WITH(read_pair_geometry(xml), Catch::Contains("this matrix is 1e+300x3"));
    test::write_bytes(xml, "<rows>3</rows><cols>3</cols><data>" + std::string(64000, '1') + "</data>");
    CHECK_THROWS_WITH(read_pair_geometry(xml), Catch::Contains(xml) && Catch::Contains("found 1"));
    test::write_bytes(xml, "<rows><cols>3</cols><data>1 0 0 0 1 0 0 0 1</data><rows>3</rows>");
    CHECK(read_pair_geometry(xml).homography[0] == 1.0);  // the first <rows> that holds no element
}

TEST_CASE("eval: disparity arrays whose shape or size lies are refused by name", "[eval]") {
    const std::string found = std::string(VITREG_FUZZ_DIR) + "/regressions/disparity/";
    CHECK_THROWS_WITH(read_pair_geometry(found + "npz-declares-2gb-deflated.npz"),
                      Catch::Contains("declares 2147483647 bytes, more than its 11 deflated bytes can hold"));
    test::TempDir dir;
    const std::string npz = dir.path() + "/d.npz";
    const auto array = [&](const std::string& shape, std::size_t floats) {
        std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
        header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
        std::string npy = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size() & 0xff) +
                          static_cast<char>(header.size() >> 8) + header + std::string(4 * floats, '\0');
        test::write_bytes(npz, fuzz::zip_archive({{"disparity.npy", npy}}));
    };
    array("(2, 3)", 6);
    CHECK(read_pair_geometry(npz).disparity.size() == 6);
    array("(99999999999, 1)", 1);
    CHECK_THROWS_WITH(read_pair_geometry(npz), Catch::Contains(npz) && Catch::Contains("does not match its shape"));
    array("(2147483647, 2147483647)", 1);  // 2^62 - 2^32 + 1 floats: the product must not wrap
    CHECK_THROWS_WITH(read_pair_geometry(npz), Catch::Contains("does not match its shape"));
    array("(" + std::string(60000, '1') + ", 1)", 1);
    CHECK_THROWS_WITH(read_pair_geometry(npz), Catch::Contains("does not match its shape"));
    array("(6,)", 6);
    CHECK_THROWS_WITH(read_pair_geometry(npz), Catch::Contains("must be a 2-D array"));
}
