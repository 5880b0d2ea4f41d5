#!/usr/bin/env python3
"""The README's quick starts run as written.

Each code block the README marks with `<!-- readme-test: sh|python expects FILE... -->` on the line
before it is run as it stands, in a fresh temporary folder laid out like the repository root:
assets/, weights/, tests/ and examples/ link to the checkout, build/apps/vitreg to the binary under
test. Each must exit 0 and leave every FILE it names (relative to that folder). A Python block's
output must also agree with the comments of its `print` lines (`print(x)  # (5, 192)`), and every
block runs twice, since the README promises that its lines can run again. Blocks marked with another
kind (`cpp`, `cmake`) are built elsewhere (tests/find_package_test.sh), but the cpp block must be the
example program that test builds.

Usage: readme_test.py VITREG ROOT [--python]; --python runs the Python blocks too (the module on
PYTHONPATH, as the `python` test gets it).
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!-- readme-test: (\w+)(.*?)-->\n```(\w+)\n(.*?)^```$", re.M | re.S)


def blocks(readme):
    """[(kind, expected files, code)] of the marked blocks, in order."""
    found = []
    for m in MARKER.finditer(readme):
        kind, rest, lang, code = m.groups()
        expects = rest.split("expects", 1)[1].split() if "expects" in rest else []
        found.append((kind, expects, code))
    return found


def printed(code):
    """What a Python block's print lines say they print: the comment after each, up to a colon."""
    return [line.rsplit("# ", 1)[1].split(":")[0].strip() for line in code.splitlines()
            if line.lstrip().startswith("print(") and "# " in line]


def run(kind, code, cwd, env):
    if kind == "sh":
        cmd = ["/bin/bash", "-euo", "pipefail", "-c", code]
    else:
        cmd = [sys.executable, "-c", code]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=600)


def main():
    binary, root = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    with_python = "--python" in sys.argv[3:]
    readme = (root / "README.md").read_text(encoding="utf-8")
    found = blocks(readme)
    kinds = [k for k, _, _ in found]
    failures = []
    for needed in ("sh", "python", "cpp"):
        if needed not in kinds:
            failures.append(f"README.md: no code block marked `readme-test: {needed}`")
    for kind, _, code in found:
        if kind == "cpp":
            example = (root / "examples" / "cpp" / "cls_of.cpp").read_text(encoding="utf-8")
            body = [l for l in example.splitlines() if not l.startswith("//")]
            if code.strip() != "\n".join(body).strip():
                failures.append("README.md: the C++ quick start differs from examples/cpp/cls_of.cpp")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for name in ("assets", "weights", "tests", "examples"):
            (tmp / name).symlink_to(root / name)
        (tmp / "build" / "apps").mkdir(parents=True)
        (tmp / "build" / "apps" / "vitreg").symlink_to(binary)
        # `python3` in a shell block is the interpreter running this test (Debian's, with numpy).
        (tmp / ".bin").mkdir()
        (tmp / ".bin" / "python3").symlink_to(sys.executable)
        env = {**os.environ, "PATH": f"{tmp / '.bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        # The sanitizer runtimes the Python test preloads are for the interpreter, not for the shell.
        shell_env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
        for kind, expects, code in found:
            if kind not in ("sh", "python") or kind == "python" and not with_python:
                continue
            for attempt in (1, 2):
                r = run(kind, code, tmp, shell_env if kind == "sh" else env)
                if r.returncode != 0:
                    failures.append(f"README.md {kind} block, run {attempt}: exit {r.returncode}\n{r.stderr[-3000:]}")
                    break
                if kind == "python":
                    want, got = printed(code), r.stdout.splitlines()
                    if got != want:
                        failures.append(f"README.md python block, run {attempt}: printed {got}, its comments say {want}")
                missing = [f for f in expects if not (tmp / f).is_file() or (tmp / f).stat().st_size == 0]
                if missing:
                    failures.append(f"README.md {kind} block, run {attempt}: did not write {missing}")
            print(f"{kind} block: {len(code.splitlines())} lines run twice")
    for f in failures:
        print(f)
    print(f"{len(failures)} failures" if failures else "the README's quick starts run as written")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
