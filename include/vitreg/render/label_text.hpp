#pragma once
// Text drawn into pictures. OpenCV's Hershey fonts draw printable ASCII only: each byte of any
// other UTF-8 character comes out as '?'. Labels therefore pass through drawable_label, which
// spells the symbols vitreg's own labels use (×, ·, ±, σ, ≤, ...) and Latin-1 letters in ASCII;
// a character it cannot spell becomes one '?' and is counted, so that a test can fail on it.
#include <cstdint>
#include <string>

namespace vitreg::render {

// `utf8` as ASCII the font draws: printable ASCII as it is, known symbols spelled out, any
// other character (or a malformed byte) one '?'. With VITREG_STRICT_LABELS set (the test suite
// sets it for every test) such a character throws std::logic_error instead.
std::string drawable_label(const std::string& utf8);
// Whether drawable_label spells every character of `utf8` (no '?' stands in for one).
bool label_is_drawable(const std::string& utf8);
// How many characters the labels drawn so far in this process could not spell (every picture's
// text goes through drawable_label; the tests that render pictures require 0).
std::int64_t undrawable_characters();

}  // namespace vitreg::render
