#!/usr/bin/env python3
"""Design citations point into the repository: no text cites the design notes that live outside it
(`DESIGN.md`, `DESIGN §N`), and every `docs/design.md, "Title"` (or, in docs/, a link
`[design.md, "Title"](design.md#…)`) names a section that docs/design.md has (a `##` or `###`
heading). Several titles may follow one citation
(`docs/design.md, "Reference semantics" and "Families"`), and a citation may wrap onto the next
comment line.

Usage: docs_citations_test.py [ROOT]; prints each offending FILE:LINE and exits 1 when there is one.
"""
import pathlib
import re
import sys

SCANNED = ["src", "include", "apps", "python", "tests", "scripts", "bench", "fuzz", "cmake", "examples",
           "weights", "docs", "README.md", "CMakeLists.txt"]
SUFFIXES = {".cpp", ".hpp", ".h", ".c", ".py", ".pyi", ".sh", ".cmake", ".txt", ".md", ".mjs", ".js", ".in"}
# Built from pieces so that this file does not cite what it forbids.
OUTSIDE = re.compile(r"\b" + "DES" + r"IGN(?:\.md\b|\s*§)")
CITATION = re.compile(r'\bdesign\.md,((?:\s|//|#)*"[^"\n]+"(?:\s*(?:,|and)\s*(?:(?://|#)\s*)?"[^"\n]+")*)')
TITLE = re.compile(r'"([^"\n]+)"')


def section_titles(design_md):
    return {m.group(1).strip() for m in re.finditer(r"^#{2,3} (.+)$", design_md, re.M)}


def faults(text, titles):
    """(line, message) of each fault of one file's text."""
    found = []
    for m in OUTSIDE.finditer(text):
        found.append((text.count("\n", 0, m.start()) + 1, f"cites the design notes outside the repository: "
                      f"{m.group(0)!r}; cite docs/design.md by section title"))
    for m in CITATION.finditer(text):
        for title in TITLE.findall(m.group(1)):
            if title not in titles:
                found.append((text.count("\n", 0, m.start()) + 1,
                              f'cites docs/design.md, "{title}", which docs/design.md has no section of'))
    return found


def self_check(titles):
    """The checker finds what it must: a wrong title, an old citation; and passes a good one."""
    good = '// as docs/design.md, "Families" and\n// "Reference semantics" say'
    assert not faults(good, titles), faults(good, titles)
    assert faults('// docs/design.md, "No such section"', titles)
    assert faults('[design.md, "No such section"](design.md#no-such-section)', titles)
    assert faults("// see " + "DES" + "IGN.md §7", titles)
    assert faults("# " + "DES" + "IGN §9: eviction", titles)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1])
    titles = section_titles((root / "docs" / "design.md").read_text(encoding="utf-8"))
    self_check(titles)
    bad = 0
    for top in SCANNED:
        base = root / top
        paths = [base] if base.is_file() else sorted(base.rglob("*"))
        for path in paths:
            if (not path.is_file() or path.suffix not in SUFFIXES or path.resolve() == pathlib.Path(__file__).resolve()
                    or "fixtures" in path.parts and path.suffix != ".py"):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            for line, message in faults(text, titles):
                print(f"{path.relative_to(root)}:{line}: {message}")
                bad += 1
    print(f"{bad} bad design citations" if bad else "every design citation names a section of docs/design.md")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
