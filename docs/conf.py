# Sphinx configuration of vitreg's documentation: the Markdown pages of docs/ through MyST, the
# furo theme, and the Python API from the docstrings of `import vitreg` (scripts/docs.sh puts the
# built module on the path). scripts/docs.sh builds it with warnings as errors.
import pathlib
import re

_root = pathlib.Path(__file__).resolve().parent.parent
project = "vitreg"
author = "the vitreg authors"
copyright = "the vitreg authors"
# The version CMake builds, from project(vitreg VERSION ...).
release = re.search(r"project\(vitreg VERSION ([0-9.]+)", (_root / "CMakeLists.txt").read_text()).group(1)
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# Headings up to ### get anchors, so pages can link to each other's sections (cli.md#commands).
myst_heading_anchors = 3
# imported-members: the package may re-export what its compiled module defines.
autodoc_default_options = {"members": True, "undoc-members": True, "imported-members": True, "show-inheritance": True}
autodoc_member_order = "bysource"

html_theme = "furo"
html_title = f"vitreg {release}"


def _preformatted(app, what, name, obj, options, lines):
    """vitreg's docstrings are laid out for help() (aligned columns of arguments), not written in
    reStructuredText: they are shown as they are, preformatted."""
    if any(line.strip() for line in lines):
        lines[:] = ["::", ""] + [("    " + line) if line.strip() else "" for line in lines] + [""]


def setup(app):
    app.connect("autodoc-process-docstring", _preformatted)
