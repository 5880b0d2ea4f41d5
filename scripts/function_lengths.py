#!/usr/bin/env python3
"""The longest C++ functions of the tree, found by a heuristic that needs no compiler.

Comments and string, character and raw string literals are blanked first (newlines kept, so the
line numbers stay); then the braces are followed. A brace block whose header looks like a function
definition (a parameter list after a name, then only qualifiers, a trailing return type or a
constructor's initializer list) counts as one function, from the line of its name to its closing
brace; blocks, lambdas and local classes inside it count toward it. Outside functions, namespace,
class, struct, union, enum and extern "C" blocks are walked into, brace initializers are skipped,
and a lambda in a namespace-scope initializer (a table's entry) counts as a function of its own.
Preprocessor lines are ignored; code that only balances across #if branches can confuse it.

Usage:
  function_lengths.py [--root ROOT] [--top N] [--max LINES [--allow FILE]] PATH...
--top N prints the N longest functions (FILE:LINE, name, lines). --max LINES exits 1 and lists each
function over LINES that the allowlist does not name, and each allowlist entry that names no such
function (so it cannot outlive its reason). The allowlist (default: function_lengths.allow beside
this script) holds lines `path:function  # why it stays long`; only a parser's state machine, which
splitting would hide, belongs there.
"""
import argparse
import pathlib
import re
import sys

SUFFIXES = {".cpp", ".cc", ".hpp", ".h", ".inc"}
CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "typeid",
           "static_assert", "new", "delete", "throw", "co_await", "co_return", "co_yield"}
# Parenthesised groups in a header that are not its parameter list.
NOT_PARAMETERS = {"decltype", "alignas", "noexcept", "__attribute__", "__declspec", "explicit",
                  "void", "bool", "char", "int", "long", "short", "float", "double", "auto"}
NAME = re.compile(r"((?:[A-Za-z_]\w*\s*(?:<[^<>{};]*>)?\s*::\s*)*~?[A-Za-z_]\w*)\s*$")
OPERATOR = re.compile(r"((?:[A-Za-z_]\w*\s*::\s*)*operator\s*(?:\(\s*\)|\[\s*\]|[^\s(]+))\s*$")
QUALIFIER = re.compile(r"\s*(?:const\b|volatile\b|override\b|final\b|mutable\b|constexpr\b|try\b|&&?"
                       r"|noexcept\b(?:\s*\((?:[^()]|\([^()]*\))*\))?)")
CONTAINER = re.compile(r"^\s*(?:(?:inline|export|typedef)\s+)*(namespace|class|struct|union|enum)\b(.*)$", re.S)
LAMBDA = re.compile(r"(?:^|[=(,{;:?]|\breturn)\s*\[[^\[\]]*\]\s*(?:\((?:[^()]|\([^()]*\))*\))?"
                    r"\s*(?:mutable\s*|constexpr\s*|noexcept\s*|->\s*[\w:<>,\s*&]+)*$", re.S)


def blank(text):
    """The text with comments, literals and preprocessor lines replaced by spaces, newlines kept."""
    out = list(text)
    i, n = 0, len(text)

    def erase(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":  # a directive, with its continuation lines
            j = i
            while j < n and not (text[j] == "\n" and text[j - 1] != "\\"):
                j += 1
            erase(i, j)
            i = j
            continue
        if c == "\n":
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            erase(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            erase(i, j)
            i = j
        elif c == "R" and text.startswith('R"', i) and re.search(r"(?:^|[^\w]|\bu8|\b[uUL])$", text[max(0, i - 3):i]):
            open_paren = text.find("(", i + 2)
            delimiter = text[i + 2:open_paren]
            j = text.find(")" + delimiter + '"', open_paren)
            j = n if j < 0 else j + len(delimiter) + 2
            erase(i + 2, j - 1)
            i = j
        elif c == '"' or (c == "'" and not digit_separator(text, i)):
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            erase(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def digit_separator(text, i):
    """Whether the ' at i separates digits (1'000) rather than opening a character literal."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_.'"):
        j -= 1
    return j < i and text[j].isdigit()


def parameter_list(header):
    """(name, offset of the name) when the header is a function's, else None."""
    depth, start = 0, None
    for k, c in enumerate(header):
        if c == "(":
            if depth == 0:
                start = k
            depth += 1
        elif c == ")" and depth:
            depth -= 1
            if depth == 0:
                found = name_before(header, start)
                if found is False:
                    return None
                if found is not None and follows_parameters(header[k + 1:]):
                    return found
    return None


def name_before(header, paren):
    """The function name before a top-level '(', None to look further, False when no function."""
    before = header[:paren]
    match = OPERATOR.search(before) or NAME.search(before)
    if not match:
        return None
    word = re.sub(r"\s+", "", match.group(1))
    last = word.split("::")[-1]
    if last in CONTROL:
        return False
    if last in NOT_PARAMETERS:
        return None
    return word, match.start(1)


def follows_parameters(rest):
    """Whether what follows a parameter list can precede a function body."""
    qualifier = QUALIFIER.match(rest)
    while qualifier:
        rest = rest[qualifier.end():]
        qualifier = QUALIFIER.match(rest)
    rest = rest.strip()
    if not rest:
        return True
    if rest.startswith("->"):
        return "=" not in rest
    # A constructor's initializer list, complete: its last initializer is closed.
    return rest.startswith(":") and not rest.startswith("::") and rest.rstrip()[-1] in ")}"


def functions(text):
    """(name, first line, lines) for each function of the C++ text."""
    code = blank(text)
    line_of = []
    line = 1
    for c in code:
        line_of.append(line)
        line += c == "\n"
    found = []
    # Each open brace outside a function: (kind, name, first line, where the header resumes).
    stack = []
    header_start = 0
    skipping = 0  # braces open inside a function or an expression, the outermost included
    for k, c in enumerate(code):
        if skipping:
            skipping += (c == "{") - (c == "}")
            if skipping == 0:
                kind, name, first, resume = stack.pop()
                if kind == "function":
                    found.append((name, first, line_of[k] - first + 1))
                header_start = resume if kind == "expression" else k + 1
        elif c == "{":
            header = code[header_start:k]
            # Inside an open parenthesis (a lambda passed in a constructor's member initializer):
            # part of the declaration around it.
            kind, name, first = (("expression", None, 0) if header.count("(") > header.count(")")
                                 else classify(header, stack))
            if kind in ("function", "expression"):
                skipping = 1
                first = line_of[header_start + first]
            stack.append((kind, name, first, header_start))
            header_start = k + 1
        elif c == "}" and stack:
            kind, _, _, resume = stack.pop()
            # A brace initializer is part of its declaration (a constructor's member initializer).
            header_start = resume if kind == "initializer" else k + 1
        elif c == ";":
            header_start = k + 1
        elif c == "," and stack and stack[-1][0] == "initializer":
            header_start = k + 1  # the next entry of a table: a lambda there is a function
    return found


def classify(header, stack):
    """(kind, name, offset of the name in the header) of a brace block outside any function:
    kind is function, namespace, class or initializer (an initializer's name is its variable)."""
    classes = [name for kind, name, _, _ in stack if kind == "class"]
    table = stack[-1][1] if stack and stack[-1][0] == "initializer" else None
    lambda_match = LAMBDA.search(header)
    if lambda_match:
        offset = lambda_match.end() - len(header[lambda_match.start():].lstrip("=(,{;:? \n\treturn"))
        owner = table or variable(header[:lambda_match.start()]) or "namespace scope"
        return "function", "::".join(classes + [f"lambda in {owner}"]), offset
    if re.match(r'^\s*extern\s*"[^"]*"\s*$', header):
        return "namespace", None, 0
    container = CONTAINER.match(strip_template(header))
    if container and container.group(1) == "namespace":
        return "namespace", None, 0
    found = parameter_list(header)
    if found:
        name, offset = found
        return "function", "::".join(classes + [name]), offset
    if container and "=" not in container.group(2):
        words = re.findall(r"[A-Za-z_]\w*", re.sub(r"\([^()]*\)", "", container.group(2)).split(":")[0])
        words = [w for w in words if w not in ("final", "class", "struct")]
        return "class", (words[-1] if words else "<anonymous>"), 0
    return "initializer", table or variable(header), 0


def variable(header):
    """The variable a declaration header ends with (`T name[] =`, `T name{`), if any."""
    match = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*=?\s*$", header)
    return match.group(1) if match else None


def strip_template(header):
    """The header without its leading template<...> clauses."""
    text = header.lstrip()
    while text.startswith("template"):
        depth, k = 0, len("template")
        for k in range(len("template"), len(text)):
            if text[k] == "<":
                depth += 1
            elif text[k] == ">":
                depth -= 1
                if depth == 0:
                    break
        text = text[k + 1:].lstrip()
    return text


def source_files(root, paths):
    for path in paths:
        full = root / path
        candidates = [full] if full.is_file() else sorted(full.rglob("*"))
        yield from (p for p in candidates if p.suffix in SUFFIXES and p.is_file())


def measure(root, paths):
    """(path relative to root, first line, name, lines) of every function, longest first."""
    rows = []
    for path in source_files(root, paths):
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(root).as_posix()
        rows += [(rel, first, name, lines) for name, first, lines in functions(text)]
    return sorted(rows, key=lambda r: (-r[3], r[0], r[1]))


def read_allowlist(path):
    """{path:function: reason} of the allowlist file (absent: empty)."""
    entries = {}
    if not path.is_file():
        return entries
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        entry, _, reason = line.partition("#")
        entry = entry.strip()
        if not entry:
            continue
        if not reason.strip() or ":" not in entry:
            sys.exit(f"{path}:{number}: expected 'path:function  # why it stays long', got {line!r}")
        entries[entry] = reason.strip()
    return entries


def over_limit(rows, limit, allowed, allow_path):
    """What --max reports: each function over `limit` lines that `allowed` does not name, and
    each entry of `allowed` that names no such function."""
    long = [(f"{rel}:{name}", f"{rel}:{first}: {name} is {lines} lines (limit {limit})")
            for rel, first, name, lines in rows if lines > limit]
    failures = [failure for key, failure in long if key not in allowed]
    seen = {key for key, _ in long}
    return failures + [f"{allow_path}: {entry} is allowed to be long but is not over {limit} lines (or not found)"
                       for entry in allowed if entry not in seen]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", help="files or folders, relative to --root")
    parser.add_argument("--root", type=pathlib.Path, default=pathlib.Path.cwd())
    parser.add_argument("--top", type=int, default=0, help="print the N longest functions")
    parser.add_argument("--max", type=int, help="fail on a function longer than this, unless allowed")
    parser.add_argument("--allow", type=pathlib.Path,
                        default=pathlib.Path(__file__).with_name("function_lengths.allow"))
    args = parser.parse_args()
    root = args.root.resolve()
    rows = measure(root, args.paths)
    for rel, first, name, lines in rows[:args.top]:
        print(f"{lines:5d}  {rel}:{first}  {name}")
    if args.max is None:
        return 0
    failures = over_limit(rows, args.max, read_allowlist(args.allow), args.allow)
    print("\n".join(failures + [f"{len(rows)} functions, {len(failures)} failures of --max {args.max}"]))
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
