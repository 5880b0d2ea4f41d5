// The option tables (vitreg/option_spec.hpp): every entry reads back what it sets, refuses values
// outside its bounds and choices by name, and the dense record lists each option once.
#include <catch2/catch.hpp>

#include "vitreg/analysis/eval_options.hpp"
#include "vitreg/batch_options.hpp"
#include "vitreg/dense_options.hpp"
#include "vitreg/error.hpp"
#include "vitreg/pixel_options.hpp"
#include "vitreg/search/index.hpp"

using namespace vitreg;

namespace {

// Each entry's default, parsed back from its text and set again, reads back the same; an entry
// with bounds refuses the value just past them, naming the option and the value.
template <class S, std::size_t N>
void check_table(const OptionTable<S, N>& table) {
    const S defaults;
    for (const auto& spec : table) {
        const OptionInfo& info = spec.info;
        INFO(info.name);
        CHECK_FALSE(info.help.empty());
        const std::string text = option_text(spec.get(defaults));
        if (text.empty()) continue;  // unset by default (--pipeline, --grid)
        S copy = defaults;
        spec.apply(copy, info.parse(text, info.flag()), info.flag());
        CHECK(option_text(spec.get(copy)) == text);
        if (info.bounded()) {
            CHECK(info.text_fault(option_text(OptionValue(info.max * 2 + 1))) != "");
            CHECK_THROWS_WITH(spec.apply(copy, info.parse(option_text(OptionValue(info.min - 1)), info.flag()), info.flag()),
                              Catch::StartsWith(info.flag() + ": "));
        }
        for (const auto& choice : info.choices) CHECK(info.text_fault(choice).empty());
    }
}

}  // namespace

TEST_CASE("every option table reads back what it sets and refuses what is out of bounds", "[options]") {
    check_table(pixel_option_table());
    check_table(batch_option_table());
    check_table(dense_option_table());
    check_table(segmentation_option_table());
    check_table(knn_option_table());
    check_table(index_option_table());
}

TEST_CASE("an option's faults name the value and the bound", "[options]") {
    const auto& batch = *find_option(batch_option_table(), "batch");
    CHECK(batch.info.text_fault("0") == "0 is outside 1..4096");
    CHECK(batch.info.text_fault("4096").empty());
    CHECK(batch.info.text_fault("eight") == "'eight' is not an integer");
    const auto& decode = *find_option(pixel_option_table(), "decode");
    CHECK(decode.info.text_fault("fast") == "'fast' is not one of exact, draft");
    const auto& temperature = *find_option(knn_option_table(), "temperature");
    CHECK_THAT(temperature.info.text_fault("0.00005"), Catch::StartsWith("5e-05 is outside ") && Catch::EndsWith("..10"));
    BatchOptions o;
    CHECK_THROWS_WITH(batch.apply(o, OptionValue(std::int64_t(5000)), "batch"), "batch: 5000 is outside 1..4096");
    CHECK(o.batch == 8);
}

TEST_CASE("dense options set through the table reach the struct and its record once each", "[options][dense]") {
    DenseOptions o;
    const auto& table = dense_option_table();
    const auto set = [&](const std::string& name, const std::string& text) {
        const auto& spec = *find_option(table, name);
        spec.apply(o, spec.info.parse(text, spec.info.flag()), spec.info.flag());
    };
    set("image-scales", "0.5,1");
    set("grid", "8x12");
    set("upsample", "jbu:x2");
    set("jbu-sigma-range", "0.2");
    set("dtype", "f16");
    CHECK(o.view.scales == std::vector<double>{0.5, 1.0});
    CHECK((o.view.grid_h == 8 && o.view.grid_w == 12));
    CHECK(o.half);
    CHECK(o.jbu.sigma_range == Approx(0.2));
    CHECK(find_option(table, "image-scales")->info.python_name() == "scales");
    CHECK(find_option(table, "jbu-sigma-range")->info.python_name() == "jbu_sigma_range");
    const auto record = o.to_json({3, 5}, nullptr);
    CHECK(record["layers"] == nlohmann::ordered_json({3, 5}));
    CHECK(record["upsample"] == "jbu:x2");
    CHECK(record["jbu"]["sigma_range"].get<double>() == Approx(0.2));
    CHECK(record["view"]["grid"] == nlohmann::ordered_json({8, 12}));
    CHECK(record["dtype"] == "f16");
    CHECK(record["pca"] == "none");
    CHECK_FALSE(record.contains("pca_dims"));
    CHECK_THROWS_WITH(set("grid", "8by12"), Catch::Contains("--grid '8by12'"));
}
