#include "vitreg/canonical_checkpoint.hpp"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/gemm_lowp.hpp"
#include "core/quantize.hpp"
#include "io/file_digest.hpp"
#include "vitreg/error.hpp"
#include "vitreg/version.hpp"
#include "vitreg/writers.hpp"

namespace vitreg {

namespace {

// What one source tensor becomes in the file: its outputs' names, shapes and dtypes, known before
// any value is computed, so the header goes first and each group is made, written and freed in
// turn (a 7B's weights as floats would not fit beside anything).
struct Planned {
    std::string name;
    std::vector<std::int64_t> shape;
    DType dtype;
};
struct Group {
    std::vector<Planned> outs;
    std::function<std::vector<std::vector<float>>()> values;  // one per output, in order
};

// Weight `name` [out, in...] as --dtype int4 stores it: its codes (U8, the shape's last dim halved),
// then its bf16 scales and zeros [out, groups] (bf16 values: stored exactly).
std::vector<Planned> int4_outputs(const std::string& file, const std::string& name, std::vector<std::int64_t> shape) {
    if (shape.size() > 2 && shape.back() % 2)  // (a row's padding nibble would fall inside the flattened row)
        throw UsageError(file + ": '" + name + "' is " + std::to_string(shape.back()) +
                         " wide along its last dim, odd: an int4 file packs two codes a byte along it (an odd patch "
                         "size); run it as MODEL@int4 instead");
    std::int64_t in = 1;
    for (std::size_t i = 1; i < shape.size(); ++i) in *= shape[i];
    const std::vector<std::int64_t> groups{shape.front(), quant::int4_groups(static_cast<int>(in))};
    shape.back() = (shape.back() + 1) / 2;
    return {{name, shape, DType::U8}, {name + ".scale", groups, DType::BF16}, {name + ".zero", groups, DType::BF16}};
}

std::vector<std::vector<float>> int4_values(const std::vector<float>& values, int out) {
    const int in = static_cast<int>(values.size() / out);
    const quant::Int4Weights q = quant::quantize_groups(values.data(), out, in, in, 1);
    const auto floats = [](const std::vector<std::uint16_t>& bf16) {
        std::vector<float> f(bf16.size());
        std::transform(bf16.begin(), bf16.end(), f.begin(), quant::from_bf16);
        return f;
    };
    return {std::vector<float>(q.codes.begin(), q.codes.end()), floats(q.scale), floats(q.zero)};
}

// Weight `name` [out, in...] as --dtype int8 stores it: its integers (I8), their scales (F32) and
// each row's Σq (I32), so that loading reads neither the integers nor their sums again.
std::vector<Planned> int8_outputs(const std::string& name, const std::vector<std::int64_t>& shape) {
    const std::vector<std::int64_t> rows{shape.front()};
    return {{name, shape, DType::I8}, {name + ".scale", rows, DType::F32}, {name + ".sums", rows, DType::I32}};
}

std::vector<std::vector<float>> int8_values(const std::vector<float>& values, int out, int bits) {
    const int in = static_cast<int>(values.size() / out);
    quant::Int8Weights q = quant::quantize_channels(values.data(), out, in, in, 1, bits);
    std::vector<float> sums(static_cast<std::size_t>(out));
    for (std::size_t r = 0; r < sums.size(); ++r) {  // (integers below 127 · in: exact as floats)
        bool in_range;  // (quantize_channels' codes are)
        sums[r] = static_cast<float>(gemm::sum_s8(q.q.data() + r * in, static_cast<std::size_t>(in), 127, &in_range));
    }
    return {std::vector<float>(q.q.begin(), q.q.end()), std::move(q.scale), std::move(sums)};
}

// The file: the header of every planned output, then each group's bytes, one group in memory at a time.
void write_groups(const std::string& out, const std::vector<Group>& groups, const std::map<std::string, std::string>& meta) {
    std::vector<std::pair<std::string, ArrayRef>> order;
    for (const auto& g : groups)
        for (const auto& t : g.outs) order.push_back({t.name, ArrayRef{t.shape, nullptr, t.dtype}});
    AtomicFile file(out, true);
    file.write(safetensors_header_in_order(order, meta));
    for (const auto& g : groups) {
        const auto values = g.values();
        for (std::size_t i = 0; i < g.outs.size(); ++i) {
            const ArrayRef a{g.outs[i].shape, values.at(i).data(), g.outs[i].dtype};
            if (values[i].size() != a.numel())
                throw Error(out + ": '" + g.outs[i].name + "' came out with " + std::to_string(values[i].size()) +
                            " values for its shape");  // (a bug, not an input: the plan and the values disagree)
            file.write(array_bytes(a));
        }
    }
    file.commit();
}

}  // namespace

void write_canonical_checkpoint(const Checkpoint& ck, const Config& c, const CanonicalWrite& w, const std::string& out) {
    if (w.sinks && w.sinks->size() != static_cast<std::size_t>(c.depth) * c.heads)
        throw UsageError(out + ": " + std::to_string(w.sinks->size()) + " sink logits for a model of " +
                         std::to_string(c.depth) + " layers x " + std::to_string(c.heads) + " heads");
    const std::int64_t D = c.dim, p = c.patch, M = c.grid, H = c.mlp_hidden;
    std::vector<Group> groups;
    const auto put = [&](const std::string& name, std::vector<std::int64_t> shape, std::function<std::vector<float>()> values,
                         DType dtype) {
        groups.push_back({{{name, std::move(shape), dtype}}, [values] { return std::vector<std::vector<float>>{values()}; }});
    };
    const auto copy = [&](const std::string& name, std::vector<std::int64_t> shape) {
        put(name, shape, [&ck, name, shape] { return ck.load(name, shape); }, w.dtype);
    };
    // A weight the int8 (int4) forward quantizes: quantized here the same way (its integers, their
    // scales and row sums; int4: codes two to a byte, the shape's last dim halved, bf16 scales and
    // zeros per group).
    const auto weight = [&](const std::string& name, std::vector<std::int64_t> shape) {
        if (!w.quantization.quantized()) return copy(name, shape);
        const int out = static_cast<int>(shape.front()), bits = w.quantization.bits;
        if (w.quantization.precision == Precision::Int4)
            groups.push_back({int4_outputs(ck.path(), name, shape),
                              [&ck, name, shape, out] { return int4_values(ck.load(name, shape), out); }});
        else
            groups.push_back({int8_outputs(name, shape),
                              [&ck, name, shape, out, bits] { return int8_values(ck.load(name, shape), out, bits); }});
    };
    const auto norm = [&](const std::string& name, std::int64_t width = 0) {
        copy(name + ".weight", {width ? width : D});
        copy(name + ".bias", {width ? width : D});
    };
    const auto linear = [&](const std::string& name, std::int64_t out_dim, std::int64_t in_dim, bool bias = true,
                            bool quantized = true) {
        if (quantized) weight(name + ".weight", {out_dim, in_dim});
        else copy(name + ".weight", {out_dim, in_dim});
        if (bias) copy(name + ".bias", {out_dim});
    };
    weight("patch_embed.proj.weight", {D, 3, p, p});
    if (c.patch_bias) copy("patch_embed.proj.bias", {D});
    if (c.class_token) copy("cls_token", {1, 1, D});
    if (c.registers) copy("register_tokens", {1, c.registers, D});
    if (!c.has_pos_embed()) {
        // rotary positions only: no pos_embed (the metadata says which)
    } else if (!c.pos_embed_class && c.class_token) {  // no_embed_class: the class token's row is zero
        put("pos_embed", {1, 1 + M * M, D},
            [&ck, M, D] {
                auto grid = ck.load("pos_embed", {1, M * M, D});
                grid.insert(grid.begin(), static_cast<std::size_t>(D), 0.0f);
                return grid;
            },
            w.dtype);
    } else {
        copy("pos_embed", {1, c.prefix_tokens() + M * M, D});
    }
    if (c.pre_norm) norm("norm_pre");
    if (c.fc_norm) norm("fc_norm");
    if (c.proj_dim > 0) copy("proj", {D, c.proj_dim});
    for (int i = 0; i < c.depth; ++i) {
        const std::string b = "blocks." + std::to_string(i) + ".";
        norm(b + "norm1");
        norm(b + "norm2");
        linear(b + "attn.qkv", 3 * D, D, c.qkv_bias);
        if (c.attn_norm) norm(b + "attn.norm");
        linear(b + "attn.proj", D, D);
        if (c.mlp_norm) norm(b + "mlp.norm", H);
        if (c.mlp == MlpKind::SwiGlu) {
            linear(b + "mlp.w12", 2 * H, D);
            linear(b + "mlp.w3", D, H);
        } else {
            linear(b + "mlp.fc1", H, D);
            linear(b + "mlp.fc2", D, H);
        }
        if (c.layer_scale) {
            copy(b + "ls1.gamma", {D});
            copy(b + "ls2.gamma", {D});
        }
        if (w.sinks)
            put(b + "attn.sinks", {c.heads},
                [row = std::vector<float>(w.sinks->begin() + static_cast<std::ptrdiff_t>(i) * c.heads,
                                          w.sinks->begin() + static_cast<std::ptrdiff_t>(i + 1) * c.heads)] { return row; },
                w.dtype);
        else if (c.has_sinks)
            copy(b + "attn.sinks", {c.heads});
    }
    if (c.final_norm) norm("norm");
    if (c.pool == Pool::Map) {  // the attention-pool head
        const auto& fc1 = *ck.parts("attn_pool.mlp.fc1.weight").front();
        const std::int64_t head_hidden = fc1.shape.at(0);
        copy("attn_pool.latent", {1, 1, D});
        // (fp32 at int8 too: the forward runs the head's few rows in fp32)
        linear("attn_pool.qkv", 3 * D, D, true, false);
        linear("attn_pool.proj", D, D, true, false);
        norm("attn_pool.norm");
        linear("attn_pool.mlp.fc1", head_hidden, D, true, false);
        linear("attn_pool.mlp.fc2", D, head_hidden, true, false);
    }
    auto meta = config_metadata(to_json(c));
    meta["format"] = "pt";
    if (w.sinks) {  // new logits: the caller says whether they evict
        meta["attention"] = to_string(AttentionKind::Sink);
        meta.erase("evict");
    }
    if (w.quantization.quantized()) {
        meta["quantization"] = to_string(w.quantization.precision);
        meta["weight_bits"] = std::to_string(w.quantization.bits);
        if (w.quantization.precision == Precision::Int4) meta["group_size"] = std::to_string(quant::kInt4Group);
    }
    for (const auto& [k, v] : w.metadata) meta[k] = v;
    write_groups(out, groups, meta);
}

Config convert_checkpoint(const std::string& path, const ConfigOverrides& overrides, DType dtype, const std::string& out,
                          const WeightQuantization& quantization) {
    const Checkpoint ck(path, overrides);
    if (ck.quantization().quantized())
        throw UsageError(ck.path() + ": the file is " + to_string(ck.quantization().precision) +
                         "-quantized already; convert the checkpoint it came from (its source_digest names it)");
    const bool known = (quantization.precision == Precision::Int8 && (quantization.bits == 8 || quantization.bits == 7)) ||
                       (quantization.precision == Precision::Int4 && quantization.bits == 4);
    if (quantization.quantized() && (!known || dtype != DType::F32))
        throw UsageError(out + ": a quantized file keeps its other tensors in F32 (int8 of 8 or 7 bits, or int4 of 4, from "
                               "--dtype int8|int4)");
    CanonicalWrite w;
    w.dtype = dtype;
    w.quantization = quantization;
    const std::string& file = ck.path();  // the weights file, also for a folder
    w.metadata = {{"source", file.substr(file.find_last_of('/') + 1)},
                  {"source_digest", file_digest(file)},
                  {"source_layout", ck.config().source},
                  {"converted_by", std::string("vitreg convert ") + VITREG_VERSION}};
    write_canonical_checkpoint(ck, ck.config(), w, out);
    return ck.config();
}

}  // namespace vitreg
