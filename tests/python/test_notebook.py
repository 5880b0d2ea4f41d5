"""The notebook example (docs/guide.md) runs as written: examples/notebooks/explore.ipynb executed by
Jupyter's own client (nbclient, Debian's python3 kernel), and its last cell shows the explorer
inline: a sandboxed iframe holding the page."""
import os

import nbclient
import nbformat

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
NOTEBOOK = os.path.join(ROOT, "examples", "notebooks", "explore.ipynb")


def test_the_notebook_runs_and_shows_the_explorer():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}})
    client.execute()
    outputs = nb.cells[-1].outputs
    assert outputs, "the last cell shows nothing"
    html = outputs[-1]["data"]["text/html"]
    assert html.startswith("<iframe srcdoc=") and "vitreg-explore/1" in html
