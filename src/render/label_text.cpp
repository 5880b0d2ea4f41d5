#include "vitreg/render/label_text.hpp"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace vitreg::render {

namespace {

std::atomic<std::int64_t> g_undrawable{0};

// Code points vitreg's labels use, and the Latin-1 letters of file and model names, in ASCII.
const std::pair<char32_t, const char*> kSpelled[] = {
    {U'\u00d7', "x"},     {U'\u00b7', "-"},      {U'\u2022', "-"},     {U'\u00b1', "+/-"},   {U'\u03c3', "sigma"},
    {U'\u00b5', "u"},     {U'\u03bc', "u"},      {U'\u2264', "<="},    {U'\u2265', ">="},    {U'\u2260', "!="},
    {U'\u2248', "~"},     {U'\u2013', "-"},      {U'\u2014', "--"},    {U'\u2212', "-"},     {U'\u2026', "..."},
    {U'\u00b0', " deg"},  {U'\u2018', "'"},      {U'\u2019', "'"},     {U'\u201c', "\""},    {U'\u201d', "\""},
    {U'\u2192', "->"},    {U'\u2190', "<-"},     {U'\u00b2', "^2"},    {U'\u00b3', "^3"},    {U'\u03b1', "alpha"},
    {U'\u03b2', "beta"},  {U'\u03b3', "gamma"},  {U'\u03b4', "delta"}, {U'\u0394', "Delta"}, {U'\u03bb', "lambda"},
    {U'\u03c0', "pi"},    {U'\u03c4', "tau"},    {U'\u221a', "sqrt"},  {U'\u2605', "*"},     {U'\u00a0', " "},
    {U'\u00df', "ss"},    {U'\u00e6', "ae"},     {U'\u00c6', "AE"},    {U'\u0153', "oe"},    {U'\u00f8', "o"},
    {U'\u00d8', "O"},
};

// Latin-1's accented letters (U+00C0-U+00FF) by their base letter; 0: not a letter spelled so.
char latin1_base(char32_t c) {
    static const char kBase[] = "AAAAAAACEEEEIIIIDNOOOOOxOUUUUYTsaaaaaaaceeeeiiiidnooooo-ouuuuyty";
    if (c < 0xC0 || c > 0xFF) return 0;
    const char b = kBase[c - 0xC0];
    return b == 'x' || b == '-' || b == 'T' || b == 't' || b == 's' ? 0 : b;  // ×, ÷, Þ, þ, ß: spelled above or not
}

// The next code point of `s` at `i` (advanced past it); U+FFFD for a malformed sequence.
char32_t next_code_point(const std::string& s, std::size_t& i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b = byte(i);
    const int extra = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + static_cast<std::size_t>(extra) >= s.size()) {
        ++i;
        return U'\ufffd';
    }
    char32_t c = extra == 0 ? b : b & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) {
            ++i;
            return U'\ufffd';
        }
        c = (c << 6) | (byte(i + k) & 0x3F);
    }
    i += extra + 1;
    return c;
}

// Appends `c` in ASCII to `out`; false where it cannot be spelled.
bool spell(char32_t c, std::string& out) {
    if ((c >= 0x20 && c < 0x7F) || c == '\n') {  // (a line break splits a label into lines)
        out += static_cast<char>(c);
        return true;
    }
    for (const auto& [code, text] : kSpelled)
        if (code == c) {
            out += text;
            return true;
        }
    if (const char base = latin1_base(c)) {
        out += base;
        return true;
    }
    return false;
}

}  // namespace

std::string drawable_label(const std::string& utf8) {
    static const bool strict = std::getenv("VITREG_STRICT_LABELS") != nullptr;
    std::string out;
    for (std::size_t i = 0; i < utf8.size();)
        if (!spell(next_code_point(utf8, i), out)) {
            out += '?';
            g_undrawable.fetch_add(1, std::memory_order_relaxed);
            if (strict) throw std::logic_error("label '" + utf8 + "' has a character the picture's font cannot draw");
        }
    return out;
}

bool label_is_drawable(const std::string& utf8) {
    std::string ignored;
    for (std::size_t i = 0; i < utf8.size();)
        if (!spell(next_code_point(utf8, i), ignored)) return false;
    return true;
}

std::int64_t undrawable_characters() { return g_undrawable.load(std::memory_order_relaxed); }

}  // namespace vitreg::render
