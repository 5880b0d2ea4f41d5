#!/usr/bin/env python3
"""The layers' include rule: no source or header includes one of a higher layer, and no public
header (include/vitreg/) includes an internal one (src/); and vitreg/vitreg.hpp includes every
public header at the top of include/vitreg/.

  core (src/core, src/io)  <-  analysis  <-  batch
                           <-  analysis  <-  render
                           <-  search (FAISS)
  apps/ and python/ sit on top and may include anything.

Each #include "..." line of src/ and include/ is resolved the way the build resolves it (beside the
including file, then include/, then src/) and the file it names is given the layer of its folder;
a public header at the top of include/vitreg/ is core unless it belongs to a batch job (BATCH_API).
Usage: layers_test.py [ROOT]; prints each offending FILE:LINE and exits 1 when there is one.
"""
import pathlib
import re
import sys

# What each layer may include (its own layer included).
ALLOWED = {
    "core": {"core"},
    "analysis": {"core", "analysis"},
    "batch": {"core", "analysis", "batch"},
    "render": {"core", "analysis", "render"},
    "search": {"core", "search"},
}
# The public headers of include/vitreg/ that the batch library implements, and vitreg.hpp, which
# includes all of include/vitreg/ and so sits at the top of it.
BATCH_API = {"batch_job.hpp", "batch_options.hpp", "dense.hpp", "dense_options.hpp", "extract.hpp", "merge.hpp", "vitreg.hpp"}
SRC_LAYERS = {"core": "core", "io": "core", "analysis": "analysis", "batch": "batch", "render": "render", "search": "search"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(path, root):
    """The layer of a file of the tree, or None for one outside the layers (generated, tests)."""
    rel = path.relative_to(root).parts
    if rel[0] == "src" and len(rel) > 2:
        return SRC_LAYERS.get(rel[1])
    if rel[:2] == ("include", "vitreg"):
        if len(rel) > 3:
            return rel[2] if rel[2] in ALLOWED else None
        return "batch" if rel[2] in BATCH_API else "core"
    return None


def resolve(name, including, root):
    for base in (including.parent, root / "include", root / "src"):
        candidate = (base / name).resolve()
        if candidate.is_file() and root in candidate.parents:
            return candidate
    return None  # generated (vitreg/version.hpp) or a system header in quotes


def violations(root):
    root = root.resolve()
    files = sorted(p for d in ("src", "include") for p in (root / d).rglob("*")
                   if p.suffix in {".cpp", ".hpp", ".h", ".inc"} and p.is_file())
    for f in files:
        here = layer_of(f, root)
        public = f.relative_to(root).parts[0] == "include"
        for number, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = resolve(m.group(1), f, root)
            if target is None:
                continue
            where = f"{f.relative_to(root)}:{number}"
            named = target.relative_to(root)
            if public and named.parts[0] == "src":
                yield f'{where}: the public header includes the internal "{m.group(1)}" ({named})'
                continue
            there = layer_of(target, root)
            if here and there and there not in ALLOWED[here]:
                yield f'{where}: {here} includes "{m.group(1)}", which is {there} ({named})'


def missing_from_umbrella(root):
    """vitreg/vitreg.hpp is the public API in one include: it names every header at the top of include/vitreg/."""
    umbrella = root.resolve() / "include" / "vitreg" / "vitreg.hpp"
    named = {m.group(1) for m in map(INCLUDE.match, umbrella.read_text(encoding="utf-8").splitlines()) if m}
    for header in sorted(umbrella.parent.glob("*.hpp")):
        if header != umbrella and f"vitreg/{header.name}" not in named:
            yield f'include/vitreg/vitreg.hpp: does not include the public header "vitreg/{header.name}"'


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    found = list(violations(root)) + list(missing_from_umbrella(root))
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} fault(s) against the layers (core/io < analysis < batch, render) or the public API line")
        return 1
    print("layers: every include of src/ and include/ goes downward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
