#!/usr/bin/env python3
"""Summarize a `vitreg compare` stats.csv as a markdown table: one row per configuration, each
statistic averaged over the images (artifact counts summed).

    vitreg compare weights/vitreg-fmnist-*.safetensors --images tests/fixtures/heldout \\
        --resize none -o /tmp/family
    python3 weights/recipe/compare_table.py /tmp/family/stats.csv
"""
import csv
import sys
from collections import OrderedDict

COLUMNS = [  # (stats.csv column, heading, how to combine over images)
    ("norm_median", "median output patch norm", "mean"),
    ("norm_max", "max output patch norm", "mean"),
    ("norm_max_over_median", "max / median", "mean"),
    ("artifact_fraction_robust", "artifact fraction (median + 10·MAD)", "mean"),
    ("artifacts_abs", "patches > 150", "sum"),
    ("kurtosis", "kurtosis (Pearson)", "mean"),
    ("sink_rate", "sink rate, last layer (α > 0.3)", "mean"),
    ("top_key_mass", "top key's mean attention α", "mean"),
    ("mean_abstention", "mean abstention, last layer", "mean"),
    ("cls_on_registers", "CLS attention on registers", "mean"),
]


def main(path):
    rows = OrderedDict()
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.setdefault(r["config"], []).append(r)
    n = len(next(iter(rows.values())))
    print(f"Averaged over {n} images (`vitreg compare` on the last layer; stats.csv in the run's folder).\n")
    print("| configuration | " + " | ".join(h for _, h, _ in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for config, rs in rows.items():
        cells = []
        for key, _, how in COLUMNS:
            values = [float(r[key]) for r in rs]
            v = sum(values) if how == "sum" else sum(values) / len(values)
            cells.append(f"{int(v)}" if how == "sum" else f"{v:.3g}")
        print(f"| {config} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
