#!/usr/bin/env python3
"""No function of src/, apps/ and python/ over 120 lines, but the allowlisted parser state machines
(scripts/function_lengths.allow); first, the finder (scripts/function_lengths.py) must measure a few
known snippets right, so that a finder that finds nothing cannot pass.
Usage: function_lengths_test.py [ROOT]
"""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[1]).resolve()
sys.path.insert(0, str(ROOT / "scripts"))
import function_lengths  # noqa: E402

SNIPPET = r'''#include <x>
#define OPEN {
namespace a { namespace {
// a comment with a brace {
const char* kText = "a } brace";
const char* kRaw = R"x(a } raw " string)x";
char brace = '{';
int million = 1'000'000;
struct Table { const char* name; int (*f)(int); };
const Table kTable[] = {
    {"twice", [](int x) {
         return 2 * x;
     }},
};
}  // namespace
class Widget : public Base<int> {
public:
    Widget(int n) : n_{n}, v_(n, [](int i) { return i; }) {
        if (n) {
            n_ = 1;
        }
    }
    int get() const noexcept { return n_; }
private:
    int n_;
};
template <typename T>
auto Widget::twice(T x) const -> decltype(x) {
    auto f = [&](int y) {
        return y;
    };
    for (int i = 0; i < 2; ++i) {
    }
    return f(x);
}
extern "C" {
int c_entry(void) {
    return 0;
}
}
}  // namespace a
'''
EXPECTED = [  # (name, first line, lines)
    ("lambda in kTable", 11, 3),
    ("Widget::Widget", 18, 5),
    ("Widget::get", 23, 1),
    ("Widget::twice", 28, 8),
    ("c_entry", 37, 3),
]


def main():
    found = function_lengths.functions(SNIPPET)
    if found != EXPECTED:
        print(f"the finder measured the snippet as\n  {found}\nexpected\n  {EXPECTED}")
        return 1
    script = ROOT / "scripts" / "function_lengths.py"
    return subprocess.run([sys.executable, str(script), "--root", str(ROOT), "--max", "120", "--top", "10",
                           "src", "apps", "python"]).returncode


if __name__ == "__main__":
    sys.exit(main())
