#!/usr/bin/env python3
"""Design citations point into the repository: no text cites the design notes that live outside it
(`DESIGN.md`, `DESIGN §N`), and every `docs/design.md, "Title"` (or, in docs/, a link
`[design.md, "Title"](design.md#…)`) names a section that docs/design.md has (a `##` or `###`
heading). Several titles may follow one citation
(`docs/design.md, "Reference semantics" and "Families"`), and a citation may wrap onto the next
comment line.

Published work is cited by the key of its entry in docs/design.md's "References" section (a `##`
heading; an entry is a line `- **[Key]** ...`). A key is a capitalised name and four digits, with
an optional letter (`[Darcet2024]`, `[Darcet2024b]`). The keys checked are:
- anywhere: those right after `"References"` (`docs/design.md, "References" [Miller2023]`,
  `"References" [Miller2023], [Xiao2024]` or `... [Miller2023] and [Xiao2024]`, possibly wrapping
  onto the next comment line), so that array indexing in code (`a[Darcet2024]`) is never read;
- in Markdown files (docs/*.md, the README, ...): every `[Key]` of that form; when it is a link,
  `[Key](TARGET)`, TARGET must be the References section by its path from that file
  (`#references` in design.md, `design.md#references` in docs/, `docs/design.md#references` in
  the README).
Every such key must have an entry. And no text cites as an authority "the seed", a document the
repository neither holds nor names (`the seed's Figure 2`, `as the seed predicts`,
`(the seed, ...)`); random-number seeds (`--seed`, `seed 0`, `seeded`, `one seed each`,
`outputs 2p+1 of the seed`) and fuzz seeds are not citations and pass.

Usage: docs_citations_test.py [ROOT]; prints each offending FILE:LINE and exits 1 when there is one.
"""
import os
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
KEY = r"[A-Z][A-Za-z]+[0-9]{4}[a-z]?"
# `"References" [Key]`, more keys joined by commas, semicolons or "and", wrapping onto the next
# comment line; every bracket after "References" is read, so that a malformed key is reported.
REFERENCE_CITATION = re.compile(r'"References"((?:\s*(?:,|;|and)?\s*(?:(?://|#)\s*)?\[[^\]\n]*\])+)')
BRACKET = re.compile(r"\[([^\]\n]*)\]")
# In docs: a key in brackets, and the link target when there is one.
DOC_KEY = re.compile(r"\[(" + KEY + r")\](?:\(([^)\n]*)\))?")
ENTRY = re.compile(r"^- \*\*\[(" + KEY + r")\]\*\*", re.M)
# "the seed" as an authority. Built from pieces so that this file does not cite what it forbids.
SEED = "the" + r"\s+(?:(?://|#)\s*)?seed"  # "the" may end a comment line
VERBS = (r"predicts?|says?|expects?|warns?|claims?|argues?|proposes?|shows?|states?|suggests?|"
         r"describes?|notes?|calls?|asks?|wants?|defines?|reports?")
AUTHORITY = re.compile(
    r"\b" + SEED + r"(?:'s|\u2019s)(?!\s+(?:value|bits?|state|low|high|hash|number)\b)"  # the seed's Figure 2
    r"|\b" + SEED + r"\s+(?:" + VERBS + r")\b"                                           # as the seed predicts
    r"|\(" + SEED + r"(?:[,;:)]|\s+(?:§|section|figure|fig\.|table|p\.))"                  # (the seed, §3)
    r"|\b(?:per|see|cf\.|according\s+to|supports?(?:\s+in)?)\s+" + SEED + r"\b(?!\s*(?:=|value|file))"
    r"|\b" + SEED + r"\s+(?:document|notes|paper|text|figures?|table)\b",
    re.I)


def reference_keys(design_md):
    """The keys of the entries of docs/design.md's References section."""
    m = re.search(r"^## References[ \t]*$(.*?)(?=^## |\Z)", design_md, re.M | re.S)
    return set(ENTRY.findall(m.group(1))) if m else set()


def section_titles(design_md):
    return {m.group(1).strip() for m in re.finditer(r"^#{2,3} (.+)$", design_md, re.M)}


def faults(text, titles, keys=frozenset(), link=None):
    """(line, message) of each fault of one file's text. `link` is, for a Markdown file, the target
    its key links must have (`design.md#references` in docs/); None elsewhere."""
    found = []

    def at(pos):
        return text.count("\n", 0, pos) + 1

    for m in AUTHORITY.finditer(text):
        found.append((at(m.start()), f"cites {m.group(0)!r} as an authority, a document the repository neither "
                      f"holds nor names; cite the published work (docs/design.md, \"References\") or vitreg's "
                      f"own derivation"))
    for m in REFERENCE_CITATION.finditer(text):
        for key in BRACKET.findall(m.group(1)):
            if not re.fullmatch(KEY, key):
                found.append((at(m.start()), f'cites "References" [{key}], which is not a key (a capitalised name and '
                              f"four digits, e.g. [Darcet2024])"))
            elif key not in keys:
                found.append((at(m.start()), f"cites [{key}], which docs/design.md's References has no entry of"))
    if link is not None:
        for m in DOC_KEY.finditer(text):
            if m.group(1) not in keys:
                found.append((at(m.start()),
                              f"cites [{m.group(1)}], which docs/design.md's References has no entry of"))
            elif m.group(2) is not None and m.group(2) != link:
                found.append((at(m.start()), f"links [{m.group(1)}] to {m.group(2)!r}; the References entries are at "
                              f"{link!r}"))
    for m in OUTSIDE.finditer(text):
        found.append((text.count("\n", 0, m.start()) + 1, f"cites the design notes outside the repository: "
                      f"{m.group(0)!r}; cite docs/design.md by section title"))
    for m in CITATION.finditer(text):
        for title in TITLE.findall(m.group(1)):
            if title not in titles:
                found.append((text.count("\n", 0, m.start()) + 1,
                              f'cites docs/design.md, "{title}", which docs/design.md has no section of'))
    return found


def self_check(titles, keys):
    """The checker finds what it must: a wrong title, an old citation, "the seed" as an authority,
    an unknown or malformed reference key, a key linked elsewhere; and passes good text."""
    good = '// as docs/design.md, "Families" and\n// "Reference semantics" say'
    assert not faults(good, titles), faults(good, titles)
    assert faults('// docs/design.md, "No such section"', titles)
    assert faults('[design.md, "No such section"](design.md#no-such-section)', titles)
    assert faults("// see " + "DES" + "IGN.md §7", titles)
    assert faults("# " + "DES" + "IGN §9: eviction", titles)

    seed = "the" + " seed"
    for bad in [f"(the figure is {seed}'s Figure 2, measured)", "// from the\n// seed's property table",
                f"moves as -log L, as {seed} predicts.", f"{seed.capitalize()} expects calibration to help",
                f"// {seed.capitalize()}'s property table",
                f"what this supports in {seed}, and what it does not", f"a claim (" + seed + ", section 3)",
                f"{seed.capitalize()}\u2019s warning", f"{seed} says so"]:
        assert faults(bad, titles), bad
    for fine in ["--seed 3 --defect-seed 7", "seed 0", "the seeded Gaussian sample", "fuzz seeds in fuzz/corpus",
                 "outputs 2p+1 and 2p+2 of " + seed + ", mapped to", "the model, the sample size and " + seed + ";",
                 "these differences come from one seed each", '{"seed", nullptr}', "seed = splitmix64(seed)",
                 seed + "'s value", "another seed moves the fit", "(" + seed + " is fixed)", "(" + seed + " 0 run)",
                 "the low bits in " + seed, "a --seed flag (" + seed + " of the draw)",
                 "N-sample least-squares fit, " + "seed S"]:
        assert not faults(fine, titles), (fine, faults(fine, titles))

    key = sorted(keys)[0]
    assert not faults(f'// docs/design.md, "References" [{key}], and\n// [{key}] say', titles, keys)
    assert not faults(f"x = table[{key}]; y = a[Darcet2024];", titles, keys)  # indexing, not a citation
    assert not faults(f"as [{key}](design.md#references) shows", titles, keys, "design.md#references")
    assert not faults("std::array<float, 4>[Darcet2024]", titles, keys)
    assert faults('// docs/design.md, "References" [Nobody1999]', titles, keys)
    assert faults('// docs/design.md, "References" [darcet2024]', titles, keys)
    assert faults(f'// docs/design.md, "References" [{key}] and\n// [Nobody1999]', titles, keys)
    assert faults("as [Nobody1999](design.md#references) shows", titles, keys, "design.md#references")
    assert faults("as [Nobody1999] shows", titles, keys, "design.md#references")
    assert faults(f"as [{key}](design.md#families) shows", titles, keys, "design.md#references")
    assert not faults("as [Nobody1999] shows", titles, keys)  # outside docs, only after "References"
    assert faults('// docs/design.md, "References" [Nobody1999]', titles | {"References"}, set())


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1])
    design_md = (root / "docs" / "design.md").read_text(encoding="utf-8")
    titles = section_titles(design_md)
    keys = reference_keys(design_md)
    assert keys, "docs/design.md has no References section with entries `- **[Key]** ...`"
    self_check(titles, keys)
    bad = 0
    for top in SCANNED:
        base = root / top
        paths = [base] if base.is_file() else sorted(base.rglob("*"))
        for path in paths:
            if (not path.is_file() or path.suffix not in SUFFIXES or path.resolve() == pathlib.Path(__file__).resolve()
                    or "fixtures" in path.parts and path.suffix != ".py" or "node_modules" in path.parts):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            link = None  # a Markdown file's key links go to the References section, relative to it
            if path.suffix == ".md":
                design = root / "docs" / "design.md"
                link = "#references" if path.resolve() == design.resolve() else \
                    os.path.relpath(design, path.parent).replace(os.sep, "/") + "#references"
            for line, message in faults(text, titles, keys, link):
                print(f"{path.relative_to(root)}:{line}: {message}")
                bad += 1
    print(f"{bad} bad citations" if bad else "every design citation names a section of docs/design.md, every "
          "reference key an entry of its References, and no text cites the seed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
