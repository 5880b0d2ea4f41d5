#!/usr/bin/env python3
"""The markdown table of one bench/dense_eval.sh run: a row per configuration with its PCKs, both
mIoUs and the k-NN accuracy, the repair written short (a calibration file by its name only).
    bench/eval_table.py OUT_DIR"""
import json
import re
import sys
from pathlib import Path

COLUMNS = [("correspondence", "pck@0.05", "PCK@0.05"), ("correspondence", "pck@0.10", "PCK@0.10"),
           ("correspondence", "pck@0.15", "PCK@0.15"), ("segmentation", "knn_miou", "k-NN mIoU"),
           ("segmentation", "linear_miou", "linear mIoU"), ("knn", "accuracy", "face k-NN acc.")]


def short(config: str) -> tuple[str, str]:
    """'model@debias=/x/y/model.safetensors' -> ('model', '@debias')."""
    model, _, repair = config.partition("@")
    repair = re.sub(r"=(?:mean:)?/\S*?\.safetensors", lambda m: "=mean" if "mean:" in m.group(0) else "", repair)
    return model, ("@" + repair if repair else "none")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    tables = {}
    for task in {task for task, _, _ in COLUMNS}:
        path = out / task / "eval.json"
        if not path.is_file():
            print(f"{path}: missing (run bench/dense_eval.sh {out} first)", file=sys.stderr)
            return 1
        tables[task] = {row["config"]: row for row in json.loads(path.read_text())["rows"]}
    print("| model | repair | " + " | ".join(title for _, _, title in COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for config in tables["correspondence"]:
        model, repair = short(config)
        cells = [f"{tables[task][config][key]:.3f}" for task, key, _ in COLUMNS]
        print(f"| {model} | {repair} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
