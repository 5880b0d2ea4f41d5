#!/usr/bin/env python3
"""The artifact rules side by side on the demo's fashion canvases (assets/indist, the models of
scripts/demo.sh): `vitreg compare` once per rule (norm, direction, both), the flagged patches
counted per model and image, and a picture of the outlines (rows: models, columns: the images
under each rule) written to assets/artifact_rules.png.

    scripts/artifact_rules.py [--vitreg build/apps/vitreg] [--out out/artifact_rules] [--png assets/artifact_rules.png]
"""
import argparse
import glob
import json
import os
import subprocess

from PIL import Image, ImageDraw

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FAMILY = ("softmax", "softmax-reg4", "softmax1", "softmax1-reg4", "sink")
RULES = ("norm", "direction", "both")
TILE = 112
COLOURS = {"norm": (255, 64, 64), "direction": (64, 160, 255), "both": (255, 200, 0)}


def run_compare(vitreg, models, images, rule, out):
    subprocess.run([vitreg, "compare", *models, "--images", *images, "--resize", "none", "--artifact-rule", rule,
                    "-o", out], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "stats.json")) as f:
        return json.load(f)


def outlined(image_path, grid, cells, colour):
    tile = Image.open(image_path).convert("RGB").resize((TILE, TILE), Image.NEAREST)
    draw = ImageDraw.Draw(tile)
    ch, cw = TILE / grid[0], TILE / grid[1]
    for row, col in cells:
        draw.rectangle([col * cw, row * ch, (col + 1) * cw - 1, (row + 1) * ch - 1], outline=colour, width=2)
    return tile


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vitreg", default=os.path.join(ROOT, "build", "apps", "vitreg"))
    parser.add_argument("--out", default=os.path.join(ROOT, "out", "artifact_rules"))
    parser.add_argument("--png", default=os.path.join(ROOT, "assets", "artifact_rules.png"))
    args = parser.parse_args()
    models = [os.path.join(ROOT, "weights", f"vitreg-fmnist-{c}.safetensors") for c in FAMILY]
    images = sorted(glob.glob(os.path.join(ROOT, "assets", "indist", "*.png")))
    results = {rule: run_compare(args.vitreg, models, images, rule, os.path.join(args.out, rule)) for rule in RULES}

    # Counts: flagged output-layer patches per model, summed over the images (of how many).
    print(f"{'model':16s}" + "".join(f"{rule:>11s}" for rule in RULES) + "   (flagged patches, output layer, "
          f"{len(images)} images)")
    counts = {}
    for k, config in enumerate(FAMILY):
        counts[config] = {}
        for rule in RULES:
            rows = [row for row in results[rule]["rows"] if row["model"].endswith(f"-{config}.safetensors")]
            counts[config][rule] = {"flagged": sum(int(r["artifacts_flagged"]) for r in rows),
                                    "patches": sum(r["per_layer"]["grid"][0] * r["per_layer"]["grid"][1] for r in rows),
                                    "per_image": [int(r["artifacts_flagged"]) for r in rows]}
        print(f"{config:16s}" + "".join(f"{counts[config][rule]['flagged']:>11d}" for rule in RULES))
    with open(os.path.join(args.out, "counts.json"), "w") as f:
        json.dump({"images": images, "rules": {r: results[r]["artifact_rule"] for r in RULES}, "counts": counts}, f,
                  indent=1)

    # The picture: one row per model; per rule, the images with their flagged patches outlined.
    gap, label_h, label_w = 8, 18, 110
    width = label_w + len(RULES) * (len(images) * TILE + gap)
    sheet = Image.new("RGB", (width, label_h + len(FAMILY) * TILE), "white")
    draw = ImageDraw.Draw(sheet)
    for j, rule in enumerate(RULES):
        x0 = label_w + j * (len(images) * TILE + gap)
        draw.text((x0 + 2, 3), f"{rule}: {results[rule]['artifact_rule']['text']}", fill=COLOURS[rule] if rule != "both"
                  else (160, 120, 0))
        for k, config in enumerate(FAMILY):
            rows = [row for row in results[rule]["rows"] if row["model"].endswith(f"-{config}.safetensors")]
            for i, row in enumerate(rows):
                last = row["per_layer"]["layers"][-1]
                tile = outlined(images[i], row["per_layer"]["grid"], last["artifact_positions_flagged"], COLOURS[rule])
                sheet.paste(tile, (x0 + i * TILE, label_h + k * TILE))
    for k, config in enumerate(FAMILY):
        draw.text((4, label_h + k * TILE + TILE // 2 - 6), config, fill="black")
    os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)
    sheet.save(args.png, optimize=True)
    print(f"wrote {args.png} and {os.path.join(args.out, 'counts.json')}")


if __name__ == "__main__":
    main()
