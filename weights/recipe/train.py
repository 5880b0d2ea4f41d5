#!/usr/bin/env python3
"""Train one vitreg checkpoint of the Fashion-MNIST canvas family and export it.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
      python3 weights/recipe/train.py --config softmax --steps 1700

Writes weights/vitreg-fmnist-<config>.safetensors (dinov2 layout, F16, full __metadata__).
The file is (re)written at every 25% of the schedule with complete=false, and a last time
with complete=true, so an interrupted run still leaves its latest export.

Everything that is not the attention kind / registers is identical across configurations:
seed, data stream (own generator), initialization of the shared parameters (the register
tokens and sink logits are drawn after them), schedule.

--scale gpu documents a larger run for a machine with a GPU (not run for the shipped files).
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import artifacts  # noqa: E402
import common  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HELDOUT = os.path.join(REPO, "tests", "fixtures", "heldout")

SCALES = {
    # what was run for the shipped checkpoints (2-core CPU, one thread per run)
    "cpu": dict(dim=128, depth=6, heads=2, batch=32, lr=1e-3, steps=2200),
    # a larger run for a GPU machine: 6x the width^2, 2x depth, ~20x the samples
    "gpu": dict(dim=384, depth=12, heads=6, batch=256, lr=5e-4, steps=40000),
}


def heldout_accuracy(model, device="cpu"):
    """Exact-match multi-label accuracy on tests/fixtures/heldout (PNG, vitreg preprocessing);
    None when the set is missing or its canvases are not the model's native size."""
    from PIL import Image
    path = os.path.join(HELDOUT, "labels.json")
    if not os.path.exists(path):
        return None
    labels = json.load(open(path))
    files = sorted(labels)
    u8 = np.stack([np.asarray(Image.open(os.path.join(HELDOUT, f)).convert("RGB")) for f in files])
    if u8.shape[1] != model.grid * model.patch:
        return None
    y = torch.tensor([labels[f] for f in files], dtype=torch.float32)
    with torch.no_grad():
        logits = model(common.to_input(u8).to(device)).cpu()
    pred = (torch.sigmoid(logits) > 0.5).float()
    return float((pred == y).all(1).float().mean())


def evaluate_val(model, val_x, val_y, device):
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(common.to_input(val_x[i:i + 256]).to(device)).cpu()
                            for i in range(0, len(val_x), 256)])
    model.train()
    y = torch.from_numpy(val_y)
    loss = float(torch.nn.functional.binary_cross_entropy_with_logits(logits, y))
    pred = (torch.sigmoid(logits) > 0.5).float()
    return loss, float((pred == y).all(1).float().mean()), float((pred == y).float().mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, choices=sorted(common.CONFIGS))
    ap.add_argument("--scale", default="cpu", choices=sorted(SCALES))
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--warmup", type=float, default=0.05, help="fraction of steps")
    ap.add_argument("--ls-init", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dim", type=int, default=None)
    ap.add_argument("--depth", type=int, default=None)
    ap.add_argument("--heads", type=int, default=None)
    ap.add_argument("--canvas", type=int, default=112, help="canvas side in px (a multiple of 14)")
    ap.add_argument("--no-class-token", action="store_true",
                    help="no CLS: the head reads the mean of the final-normed patch tokens")
    ap.add_argument("--min-items", type=int, default=1)
    ap.add_argument("--max-items", type=int, default=1)
    ap.add_argument("--plain", type=float, default=0.75, help="share of plain-colour backgrounds")
    ap.add_argument("--resume", action="store_true",
                    help="continue from OUTPUT.state.pt (written at every export)")
    ap.add_argument("--head-input", default="cls", choices=["cls", "cls+pooled"])
    ap.add_argument("--item-sizes", default="42,56")
    ap.add_argument("--val", type=int, default=512, help="synthetic validation canvases")
    ap.add_argument("--exports", type=int, default=4, help="exports over the schedule (every 1/N)")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("-o", "--output", default=None)
    ap.add_argument("--max-steps-now", type=int, default=None,
                    help="stop after this many steps (timing / smoke test); schedule unchanged")
    args = ap.parse_args(argv)

    sc = dict(SCALES[args.scale])
    for k in ("dim", "depth", "heads"):
        if getattr(args, k) is not None:
            sc[k] = getattr(args, k)
    steps = args.steps or sc["steps"]
    batch = args.batch or sc["batch"]
    lr = args.lr or sc["lr"]
    torch.set_num_threads(args.threads)
    out = args.output or os.path.join(REPO, "weights", f"vitreg-fmnist-{args.config}.safetensors")

    # data: own generators, independent of the model init
    tr_x, tr_y = common.load_fmnist("train")
    textures = common.load_textures()
    sizes = [int(v) for v in args.item_sizes.split(",")]
    data = dict(size=args.canvas, min_items=args.min_items, max_items=args.max_items,
                item_sizes=sizes, plain=args.plain)  # CanvasSynth settings, recorded in the metadata
    synth = common.CanvasSynth(tr_x, tr_y, textures, **data)
    data_rng = np.random.default_rng([args.seed, 1])
    # validation canvases from the *test* split (held-out items), fixed seed
    te_x, te_y = common.load_fmnist("t10k")
    vsynth = common.CanvasSynth(te_x[:5000], te_y[:5000], textures, **data)
    val_x, val_y = vsynth.batch(np.random.default_rng([args.seed, 2]), args.val)

    model = common.build_model(args.config, args.seed, dim=sc["dim"], depth=sc["depth"],
                               heads=sc["heads"], ls_init=args.ls_init,
                               head_input=args.head_input, grid=args.canvas // 14,
                               class_token=not args.no_class_token).to(args.device)
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.ndim >= 2 and "token" not in n and "pos_embed" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr)
    warm = max(1, int(args.warmup * steps))

    def lr_at(s):
        if s < warm:
            return lr * (s + 1) / warm
        return lr * 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, steps - warm)))

    kind, regs = common.CONFIGS[args.config]
    print(f"config={args.config} attention={kind} registers={regs} steps={steps} batch={batch} "
          f"lr={lr} params={sum(p.numel() for p in model.parameters())} device={args.device}",
          flush=True)
    export_at = {int(round(steps * k / args.exports)) for k in range(1, args.exports + 1)}
    t0 = time.time()
    ema = None
    train_time = 0.0
    last_loss = float("nan")
    stop = args.max_steps_now or steps
    first = 0
    state_path = out + ".state.pt"
    if args.resume and os.path.exists(state_path):
        st = torch.load(state_path, map_location=args.device, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        data_rng.bit_generator.state = st["data_rng"]
        first, ema, train_time = st["step"], st["ema"], st["train_time"]
        print(f"resumed from {state_path} at step {first}", flush=True)
    # the artifact criterion on held-out canvases drawn like the training data
    crit_u8, _, crit_cover = artifacts.heldout_canvases(data, 128)
    crit_x = common.to_input(crit_u8).to(args.device)
    for s in range(first, stop):
        ts = time.time()
        xb, yb = synth.batch(data_rng, batch)
        x = common.to_input(xb).to(args.device)
        y = torch.from_numpy(yb).to(args.device)
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        logits = model(x)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        train_time += time.time() - ts
        last_loss = float(loss)
        ema = last_loss if ema is None else 0.98 * ema + 0.02 * last_loss
        done = s + 1
        if done % args.log_every == 0 or done == stop:
            print(f"step {done}/{steps} loss {last_loss:.4f} ema {ema:.4f} lr {lr_at(s):.2e} "
                  f"{(done - first) / (time.time() - t0):.3f} it/s elapsed {time.time() - t0:.0f}s", flush=True)
        if done in export_at or done == stop:
            vloss, vacc, vlab = evaluate_val(model, val_x, val_y, args.device)
            model.eval()
            crit = artifacts.criterion(model, crit_x, crit_cover)
            model.train()
            print(f"criterion step {done}: {json.dumps(crit)}", flush=True)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": done,
                        "data_rng": data_rng.bit_generator.state, "ema": ema,
                        "train_time": train_time}, state_path + ".tmp")
            os.replace(state_path + ".tmp", state_path)
            meta = {
                "heads": str(sc["heads"]), "patch_size": "14", "num_registers": str(regs),
                "attention": kind, "pos_interp": "antialias", "layer_norm_eps": "1e-6",
                "image_mean": ",".join(str(v) for v in common.IMAGE_MEAN),
                "image_std": ",".join(str(v) for v in common.IMAGE_STD),
                "trained": "true", "config": args.config,
                "complete": "true" if done == steps else "false",
                "description": (f"vitreg Fashion-MNIST canvas ViT ({args.config}): D{sc['dim']} "
                                f"depth {sc['depth']} {sc['heads']} heads, patch 14, {args.canvas} px, "
                                f"multi-label classifier on {'the mean patch token' if args.no_class_token else 'CLS'}. A small research model, "
                                f"not a general-purpose feature extractor."),
                "data": (f"fashion-mnist (Debian dataset-fashion-mnist, train split) items, "
                         f"{args.min_items}-{args.max_items} per {args.canvas}x{args.canvas} canvas, {args.item_sizes} px, "
                         f"on plain ({args.plain:.0%}) or skimage texture (brick, grass, gravel) backgrounds"),
                "task": "multilabel", "classes": ",".join(common.CLASSES),
                "head_input": args.head_input,
                "head": ("logits = head.weight @ h + head.bias, h = " +
                         ("final-normed CLS" if args.head_input == "cls" else
                          "concat(final-normed CLS, mean of the final-normed patch tokens)") +
                         "; sigmoid; label present if > threshold"),
                "threshold": "0.5", "metric": "exact_match",
                **common.data_metadata(data), "steps": str(done), "schedule_steps": str(steps),
                "batch": str(batch), "seed": str(args.seed), "lr": str(lr),
                "lr_schedule": f"linear warmup {warm} steps, cosine to 0",
                "optimizer": f"AdamW wd {args.weight_decay} (not on norms, biases, tokens, "
                             f"gammas, sinks), grad clip 1.0",
                "ls_init": str(args.ls_init),
                "train_seconds": f"{train_time:.0f}", "final_loss": f"{ema:.4f}",
                "final_loss_note": "EMA (0.98) of the training BCE at the last step",
                "val_loss": f"{vloss:.4f}", "val_accuracy": f"{vacc:.4f}",
                "val_label_accuracy": f"{vlab:.4f}",
                "recipe": "weights/recipe/train.py", "threads": str(args.threads),
                "device": args.device,
            }
            common.write_safetensors(out, common.export_tensors(model), meta)
            # held-out accuracy with the weights as stored (F16), then rewrite the metadata
            m16, _ = common.load_model(out)
            ha = heldout_accuracy(m16)
            meta["heldout_accuracy"] = "" if ha is None else f"{ha:.4f}"
            common.write_safetensors(out, common.export_tensors(m16), meta)
            print(f"export step {done}: val_loss {vloss:.4f} val_acc {vacc:.4f} "
                  f"val_label_acc {vlab:.4f} heldout_acc {ha} -> {out}", flush=True)
    print(f"done {stop} steps, train_seconds {train_time:.0f}, wall {time.time() - t0:.0f}s",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
