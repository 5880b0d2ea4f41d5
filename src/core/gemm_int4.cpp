// int4 weights (W4A8): the packer and the group-wise GEMM over the int8 tiles (gemm_lowp.hpp).
#include <algorithm>
#include <string>

#include "gemm_lowp.hpp"
#include "vector_loops.hpp"
#include "vitreg/error.hpp"

namespace vitreg::gemm {

namespace {
constexpr int kGroupQuads = quant::kInt4Group / 4;  // a group's 32-bit words along k
}  // namespace

Int8Isa int4_kernel() {
    const Int8Isa isa = int8_kernel(7);
    return isa == Int8Isa::Amx ? Int8Isa::Avx512Vnni : isa;
}

PackedInt4 pack_int4(const float* b, int k, int n, long ldb, Int8Isa isa) {
    const quant::Int4Weights w = quant::quantize_groups(b, n, k, 1, ldb);
    return pack_int4(w.codes.data(), w.scale.data(), w.zero.data(), k, n, isa);
}

PackedInt4 pack_int4(const std::uint8_t* codes, const std::uint16_t* scale, const std::uint16_t* zero, int k, int n,
                     Int8Isa isa) {
    PackedInt4 p;
    p.k = k;
    p.n = n;
    p.isa = isa == Int8Isa::Amx || !supported(isa) ? int4_kernel() : isa;
    p.nr = detail::int8_tiles(p.isa).nr;
    const std::size_t params = static_cast<std::size_t>(p.blocks()) * n;
    p.scale.assign(params, 0);
    p.zero.assign(params, 0);
    p.sums.assign(params, 0);
    const int row_bytes = quant::int4_row_bytes(k);
    const auto code_at = [&](int row, int col) { return quant::int4_code(codes + static_cast<std::size_t>(col) * row_bytes, row); };
    for (int col = 0; col < n; ++col)  // [n][blocks] as stored, [blocks][n] as the GEMM reads them
        for (int g = 0; g < p.blocks(); ++g) {
            const std::size_t at = static_cast<std::size_t>(g) * n + col, stored = static_cast<std::size_t>(col) * p.blocks() + g;
            p.scale[at] = scale[stored];
            p.zero[at] = zero[stored];
            int sum = 0;
            for (int row = g * quant::kInt4Group; row < std::min(k, (g + 1) * quant::kInt4Group); ++row) sum += code_at(row, col) - 8;
            p.sums[at] = static_cast<std::int16_t>(sum);
        }
    p.data.assign(static_cast<std::size_t>(p.panels()) * p.groups() * p.nr, 0x8888u);
    for (int panel = 0; panel < p.panels(); ++panel) {
        std::uint16_t* dst = p.data.data() + static_cast<std::size_t>(panel) * p.groups() * p.nr;
        const int j0 = panel * p.nr, jn = std::min(p.nr, n - j0);
        for (int g = 0; g < p.groups(); ++g)
            for (int j = 0; j < jn; ++j) {
                std::uint16_t word = 0;
                for (int i = 0; i < 4; ++i) {
                    const int row = 4 * g + i;
                    const std::uint16_t code = row < k ? code_at(row, j0 + j) : 8;
                    word = static_cast<std::uint16_t>(word | (code << (4 * i)));
                }
                dst[static_cast<std::size_t>(g) * p.nr + j] = word;
            }
    }
    return p;
}

std::vector<float> dequantize(const PackedInt4& b) {
    std::vector<float> w(static_cast<std::size_t>(b.k) * b.n);
    for (int row = 0; row < b.k; ++row)
        for (int col = 0; col < b.n; ++col) {
            const std::size_t at = static_cast<std::size_t>(row / quant::kInt4Group) * b.n + col;
            const quant::AffineU4 a{quant::from_bf16(b.scale[at]), quant::from_bf16(b.zero[at])};
            const std::uint16_t word = b.data[(static_cast<std::size_t>(col / b.nr) * b.groups() + row / 4) * b.nr + col % b.nr];
            w[static_cast<std::size_t>(row) * b.n + col] = quant::dequantize_u4(static_cast<std::uint8_t>((word >> (4 * (row % 4))) & 0xf), a);
        }
    return w;
}

namespace {

// One column panel's weights as the int8 tiles read them, and its groups' parameters as floats
// and ints over the panel's nr columns (zero past n): unpacked once, for every row of A.
struct Int4Panel {
    GroupBuffer codes;
    std::vector<float> scale, zero;
    std::vector<std::int32_t> sums;
};

void unpack_panel(const PackedInt4& b, int panel, const loops::Table& vec, Int4Panel& out) {
    const std::size_t words = static_cast<std::size_t>(b.groups()) * b.nr;
    vec.unpack_int4(b.data.data() + panel * words, words, at_least(out.codes, words));
    const std::size_t params = static_cast<std::size_t>(b.blocks()) * b.nr;
    out.scale.assign(params, 0.0f);
    out.zero.assign(params, 0.0f);
    out.sums.assign(params, 0);
    const int j0 = panel * b.nr, jn = std::min(b.nr, b.n - j0);
    for (int g = 0; g < b.blocks(); ++g)
        for (int j = 0; j < jn; ++j) {
            const std::size_t from = static_cast<std::size_t>(g) * b.n + j0 + j, to = static_cast<std::size_t>(g) * b.nr + j;
            out.scale[to] = quant::from_bf16(b.scale[from]);
            out.zero[to] = quant::from_bf16(b.zero[from]);
            out.sums[to] = b.sums[from];
        }
}

}  // namespace

void int4_row_terms(const QuantizedRows& a, int m, int k, std::int32_t* out) {
    const int groups = (k + 3) / 4, blocks = (k + quant::kInt4Group - 1) / quant::kInt4Group;
    for (int r = 0; r < m; ++r) {
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(a.data + static_cast<std::size_t>(r) * groups);
        for (int g = 0; g < blocks; ++g) {
            const int k0 = g * quant::kInt4Group, k1 = std::min(k, k0 + quant::kInt4Group);
            std::int32_t sum = 0;
            for (int i = k0; i < k1; ++i) sum += bytes[i];
            out[static_cast<std::size_t>(r) * blocks + g] = sum - a.zero_point[r] * (k1 - k0);
        }
    }
}

void multiply(const QuantizedRows& a, int m, const PackedInt4& b, int c0, int c1, float* c, long ldc,
              const Epilogue& e) {
    const loops::Table& vec = loops::active();
    const detail::LowpTiles t = detail::int8_tiles(b.isa);
    if (t.nr != b.nr) throw Error("int4 weights packed for another kernel");
    static thread_local Int4Panel panel;
    const int groups = b.groups(), blocks = b.blocks();
    alignas(64) std::int32_t acc[detail::kMaxLowpTile];
    alignas(64) float f[detail::kMaxLowpTile];
    for (int col = c0; col < c1; col += b.nr) {
        unpack_panel(b, col / b.nr, vec, panel);
        const int cols = std::min(b.nr, c1 - col);
        for (int r = 0; r < m; r += t.mr) {
            const int rows = std::min(t.mr, m - r);
            std::fill(f, f + rows * b.nr, 0.0f);
            const std::uint32_t* ar = a.data + static_cast<std::size_t>(r) * groups;
            for (int g = 0; g < blocks; ++g) {
                const int q0 = g * kGroupQuads, qn = std::min(kGroupQuads, groups - q0);
                t.tiles[rows - 1](ar + q0, groups, panel.codes.data() + static_cast<std::size_t>(q0) * b.nr, qn, acc);
                const std::size_t at = static_cast<std::size_t>(g) * b.nr;
                vec.int4_accumulate(acc, b.nr, rows, b.nr, a.zero_point + r, panel.sums.data() + at, panel.scale.data() + at,
                                    panel.zero.data() + at, a.group_terms + static_cast<std::size_t>(r) * blocks + g, blocks, f);
            }
            vec.int4_finish(f, b.nr, rows, cols, a.scale + r, e.bias ? e.bias + col : nullptr, e.scale ? e.scale + col : nullptr,
                            c + r * ldc + (col - c0), ldc);
        }
    }
}

}  // namespace vitreg::gemm
