#!/usr/bin/env python3
"""Independent float64 reference of `vitreg study` (docs/study.md, docs/design.md, "Artifact metrics" and "Interventions and the study").

`study(configs, inputs, main_size, sizes, ...)` returns the `study.json` dict of docs/study.md
for every key except the timing (`cost.ms_per_image`, `summary.ms_per_image`: null) and the
head-accuracy keys (absent; `fp32_accuracy` and the `*_accuracy*` summary columns null): the
fixture models have no classifier head and there are no labels. Everything runs in float64 on
top of `vit_reference` (forward, traces, Numerics, Intervention, sink_keys, artifact_tokens,
eviction_mask, calibrate_sink).

Readings of docs/study.md where it leaves a choice (for the C++ and the doc to align on):
  * `heads` in a configuration is the [layer][head] table of definition 1; the model's head
    count (listed beside `depth` and `dim` in the doc's table under the same key) is its width.
  * `registers` counts trained + test-time registers; "when it has registers" (eviction) means
    that count > 0, so a `@ttr=` configuration of a register-free checkpoint evicts its
    test-time registers under `registers`.
  * massive `top` values and `massive_top` are |x| (definition 4 ranks |x|); ties in the
    ranking go to the lower (image, token, channel). The fixture has exact ties: in the planted
    model's layer 0 the planted tokens hold exactly 8.0 on channel 37 in every image (nothing
    writes that channel before block 1's MLP), so top = image 0's tokens 2, 11, 13 there.
  * retrofit with an intervention: the sinks are fitted on the checkpoint as trained, without
    the intervention (`vitreg calibrate-sink` refuses one), rounded to float32 as the written
    checkpoint holds them (`sinks` reports those); every retrofit variant then runs with the
    configuration's intervention; "calibrated sink, evicted" takes its sink keys from the
    calibrated model's own first forward (with that intervention), as make_fixtures does.
  * per-tensor int8 ranges come from the fp32 configuration (intervention included) on the
    calibration half, min/max over every image, rounded to float32 (a scales file holds floats);
    with evictions only the evicting forward is observed, not the first forward choosing keys.
  * eviction variants add one eviction to the configuration's own; all keys come from one first
    forward of the configuration without any eviction.
  * `mass_uniform_logit` is null in every entry for a softmax configuration (m0 = 1 there by
    definition; the computed Σp differs from 1 by rounding only).
  * `weights_sum_mean` is the mean of `weights_sum` over layers and heads; `weights_sum_min` /
    `_max` the extremes of `weights_sum_range`; `massive_layer` the first layer with the largest
    `ratio`, `massive_ratio` / `massive_top` / `massive_kind` that layer's ratio, top[0] value
    and top_kind; `dump_<kind>` the fraction of all heads classed dump whose key_kind is <kind>.

Every discrete choice (sink keys, the class thresholds, the artifact rule, the massive top-3
and layer, the abstaining query and its six keys) records its margin into an optional
`Margins`, so a fixture generator can assert that a float32 implementation makes the same
choices.
"""
import math
import os
import sys
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import defects_reference  # noqa: E402
import vit_reference as ref  # noqa: E402

FORMAT, VERSION = "vitreg-study", 1
# The defect row's fit: vitreg's default sample (DefectOptions: 16384 rows, seed 0).
DEFECT_SAMPLES, DEFECT_SEED = 16384, 0
TOKEN_KINDS = ("cls", "register", "test_time_register", "artifact", "patch")  # tie order too
EVICTIONS = ("sink", "artifacts", "registers")  # Eviction::to_string order
RETROFITS = ("softmax1", "calibrated_sink", "calibrated_sink_evicted")
SUMMARY_KEYS = (
    "name", "attention", "registers", "precision", "intervention",
    "heads_dump", "heads_abstain", "heads_neither",
    "dump_cls", "dump_register", "dump_test_time_register", "dump_artifact", "dump_patch",
    "weights_sum_mean", "weights_sum_min", "weights_sum_max",
    "parameters_added", "ms_per_image",
    "massive_ratio", "massive_layer", "massive_top", "massive_kind", "kurtosis_max",
    "defect_top_angle_deg", "defect_flagged_norm", "defect_flagged_direction", "defect_flagged_both",
    "int8_per_token_cls_cosine", "int8_per_token_patch_cosine", "int8_per_tensor_cls_cosine",
    "int8_per_tensor_patch_cosine", "fp32_accuracy", "int8_per_token_accuracy",
    "int8_per_tensor_accuracy",
    "evict_sink_cls_cosine", "evict_sink_patch_cosine", "evict_artifacts_cls_cosine",
    "evict_artifacts_patch_cosine", "evict_registers_cls_cosine", "evict_registers_patch_cosine",
    "retrofit_softmax1_cls_cosine", "retrofit_softmax1_patch_cosine",
    "retrofit_softmax1_accuracy_change", "retrofit_calibrated_sink_cls_cosine",
    "retrofit_calibrated_sink_patch_cosine", "retrofit_calibrated_sink_accuracy_change",
    "retrofit_calibrated_sink_evicted_cls_cosine", "retrofit_calibrated_sink_evicted_patch_cosine",
    "retrofit_calibrated_sink_evicted_accuracy_change",
    "mass_smallest", "mass_largest", "mass_drift",
    "abstaining_query_abstention")


class Margins:
    """The margin of every discrete choice, by kind -> [(gap, where)]. Kinds: sink_key (top key
    mass minus the runner-up, absolute), class (|top_alpha - sink_alpha| and |mean_abstention -
    abstain|, absolute), artifact (min over patches |norm - threshold| / threshold),
    massive_top (gaps of the four largest |x| of a layer over all images, relative to the
    larger), massive_layer (largest ratio minus the runner-up, relative), abstaining_query
    (largest abstention minus the runner-up, relative), six_keys (gaps of the row's seven
    largest weights, relative); massive_top_exact_tie (gap 0: values that are the same number
    by construction, e.g. a channel nothing writes, so a float32 implementation ties too and
    the tie rule, the lower (image, token, channel), decides)."""

    def __init__(self):
        self.gaps = {}

    def note(self, kind, gap, where):
        self.gaps.setdefault(kind, []).append((float(gap), where))

    def smallest(self, kind):
        return min(self.gaps[kind])


def relative_gaps(ordered):
    """Gaps between consecutive values of a descending sequence, each relative to the larger."""
    return [(a - b) / abs(a) for a, b in zip(ordered[:-1], ordered[1:])]


# ---------------------------------------------------------------------------------------------
# Configurations and their forwards
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    """One CONFIG, resolved: the running config (attention override applied), the checkpoint's
    trained attention, its weights and its intervention (test-time registers, register
    neurons, evictions among EVICTIONS)."""
    name: str
    path: str
    cfg: ref.Config
    trained: str
    weights: dict
    ttr: int = 0
    neurons: tuple = ()
    evict: tuple = ()
    precision: str = "fp32"

    @property
    def registers(self):
        return self.cfg.registers + self.ttr

    def variant(self, **changes):
        return replace(self, **changes)

    def intervention_string(self):
        """As vitreg's Intervention::to_string: "evict=LIST ttr=K neurons=L:N,...", or "none"."""
        parts = []
        if self.evict:
            parts.append("evict=" + ",".join(e for e in EVICTIONS if e in self.evict))
        if self.ttr:
            parts.append(f"ttr={self.ttr} neurons=" + ",".join(f"{l}:{n}" for l, n in self.neurons))
        return " ".join(parts) or "none"


def resolve(config):
    """config: {"name", "path", "attention_override" (optional), "precision" (fp32 only),
    "intervention": {"ttr": K, "neurons": [(layer, neuron)], "evict": "sink,artifacts,..."}}."""
    trained_cfg, weights = ref.load_model(config["path"])
    override = config.get("attention_override", "")
    iv = config.get("intervention") or {}
    evict = tuple(e for e in (iv.get("evict") or "").split(",") if e)
    assert set(evict) <= set(EVICTIONS), evict
    assert config.get("precision", "fp32") == "fp32", "the reference study runs fp32 configurations"
    return Setup(name=config["name"], path=config["path"],
                 cfg=replace(trained_cfg, attention=override) if override else trained_cfg,
                 trained=trained_cfg.attention, weights=weights, ttr=int(iv.get("ttr", 0)),
                 neurons=tuple(tuple(n) for n in iv.get("neurons", ())), evict=evict)


def note_sink_keys(margins, trace, where):
    if margins is not None:
        top2 = trace["key_mass"].topk(2, dim=-1).values
        margins.note("sink_key", (top2[..., 0] - top2[..., 1]).min(), where)


def note_artifacts(margins, prenorm, registers, mad_k, where):
    """The margin of the robust rule (ref.artifact_tokens): per image, how far the closest
    patch norm lies from median + mad_k * MAD, relative to that threshold."""
    if margins is None:
        return
    for i, image in enumerate(prenorm):
        norms = image[1 + registers:].norm(dim=-1)
        mid = ref.median(norms)
        threshold = mid + mad_k * ref.median((norms - mid).abs())
        margins.note("artifact", ((norms - threshold).abs().min() / threshold), f"{where} image {i}")


def run(setup, x, evict=(), numerics=None, trace=False, mad_k=10.0, margins=None, where=""):
    """The forward of `setup` on images x [B,3,H,W] with its intervention plus the evictions
    `evict`. Evicted keys come from a first forward of the same configuration (same precision,
    test-time registers included) without any eviction (docs/design.md, "Interventions and the study")."""
    base = ref.Intervention(ttr=setup.ttr, neurons=setup.neurons)
    what = [e for e in EVICTIONS if e in setup.evict or e in evict]
    if not what:
        return ref.forward(setup.cfg, setup.weights, x, trace, numerics, base)
    first_numerics = replace(numerics, observe=None) if numerics is not None else None
    first = ref.forward(setup.cfg, setup.weights, x, True, first_numerics, base)
    B, N = first["prenorm"].shape[:2]
    mask = ref.eviction_mask(B, setup.cfg.depth, setup.cfg.heads, N)
    if "sink" in what:
        note_sink_keys(margins, first["trace"], f"{where} first forward")
        mask |= ref.eviction_mask(*mask.shape, per_head=ref.sink_keys(first["trace"]))
    if "artifacts" in what:
        note_artifacts(margins, first["prenorm"], setup.registers, mad_k, f"{where} first forward")
        mask |= ref.eviction_mask(*mask.shape, per_image=ref.artifact_tokens(
            first["prenorm"], setup.registers, mad_k))
    if "registers" in what:
        mask |= ref.eviction_mask(*mask.shape, tokens=range(1, 1 + setup.registers))
    return ref.forward(setup.cfg, setup.weights, x, trace, numerics, replace(base, evict=mask))


def calibrated_model(cfg, weights, sinks):
    """The "calibrated sink" model: the same weights plus blocks.i.attn.sinks (rounded to
    float32, as a stored checkpoint holds them) and sink attention."""
    calibrated = dict(weights)
    for i in range(cfg.depth):
        calibrated[f"blocks.{i}.attn.sinks"] = sinks[i].float().double()
    return replace(cfg, attention="sink"), calibrated


def parameter_count(path):
    """Every tensor the checkpoint stores (vitreg's Config.parameters: every tensor under the
    backbone prefix, which is empty for these layouts)."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    stored, _ = ref.read_safetensors(path)
    return sum(t.numel() for t in stored.values())


def cosines(reference, variant):
    """cls_cosine (mean over images), cls_cosine_min, patch_cosine (mean over images of the
    mean over patches) of the final-normed outputs."""
    def cos(a, b):
        return (a * b).sum(dim=-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    cls = cos(reference["cls"], variant["cls"])
    patch = cos(reference["patches"], variant["patches"]).mean(dim=-1)
    return {"cls_cosine": cls.mean(), "cls_cosine_min": cls.min(), "patch_cosine": patch.mean()}


def token_kinds(prenorm, setup, mad_k):
    """Per image, the kind of every token (TOKEN_KINDS); artifacts by the robust rule on that
    image's last-block pre-norm output."""
    R, K = setup.cfg.registers, setup.ttr
    kinds = []
    for artifacts in ref.artifact_tokens(prenorm, R + K, mad_k):
        row = ["cls"] + ["register"] * R + ["test_time_register"] * K
        row += ["artifact" if t in artifacts else "patch" for t in range(len(row), prenorm.shape[1])]
        kinds.append(row)
    return kinds


# ---------------------------------------------------------------------------------------------
# Definitions 1-9 of one configuration
# ---------------------------------------------------------------------------------------------

def heads_table(trace, kinds, rules, margins, where):
    """Definition 1: [layer][head] of class, key_kind, top_alpha, mean_abstention."""
    keys = ref.sink_keys(trace)                                   # [B,L,h]
    note_sink_keys(margins, trace, where)
    top_alpha = trace["key_mass"].amax(dim=-1).mean(dim=0)        # [L,h]
    abstention = trace["abstention"].mean(dim=(0, 3))             # [L,h]
    if margins is not None:
        margins.note("class", torch.minimum((top_alpha - rules["sink_alpha"]).abs(),
                                            (abstention - rules["abstain"]).abs()).min(), where)
    table = []
    for l in range(top_alpha.shape[0]):
        row = []
        for h in range(top_alpha.shape[1]):
            counts = Counter(kinds[i][int(keys[i, l, h])] for i in range(len(kinds)))
            key_kind = max(TOKEN_KINDS, key=lambda k: counts[k])  # the first kind on ties
            a, m = float(top_alpha[l, h]), float(abstention[l, h])
            cls = "abstain" if m > rules["abstain"] else "dump" if a > rules["sink_alpha"] else "neither"
            row.append({"class": cls, "key_kind": key_kind, "top_alpha": a, "mean_abstention": m})
        table.append(row)
    return table


def massive_table(trace, kinds, margins, where):
    """Definition 4 per layer, from the trace's blocks [B,L,N,D] (the residual stream after each
    block) and kurtosis [B,L] (Pearson, population moments over N*D)."""
    blocks = trace["blocks"]
    B, L, N, D = blocks.shape
    table = []
    for l in range(L):
        values = blocks[:, l].abs()                                   # [B,N,D]
        flat = values.flatten()
        order = torch.sort(-flat, stable=True).indices[:4]            # ties: lower (image, token, channel)
        top = []
        for index in order[:3].tolist():
            image, rest = divmod(index, N * D)
            token, channel = divmod(rest, D)
            top.append([float(flat[index]), token, channel, image])
        if margins is not None:  # an exact tie is structural (the same float in float32 too)
            gaps = relative_gaps(flat[order].tolist())
            for gap in gaps:
                margins.note("massive_top" if gap else "massive_top_exact_tie", gap, f"{where} layer {l}")
        per_image = values.flatten(1)                                 # [B, N*D]
        medians = torch.sort(per_image, dim=1).values[:, (N * D - 1) // 2]   # the lower middle
        table.append({"top": top, "top_kind": kinds[top[0][3]][top[0][1]],
                      "median": float(medians.mean()),
                      "ratio": float((per_image.amax(dim=1) / medians).mean()),
                      "kurtosis": float(trace["kurtosis"][:, l].mean())})
    return table


def abstaining_query(setup, x, trace, kinds, mad_k, margins, where):
    """Definition 9: the (image, layer, head, query) with the largest abstention, its six
    largest weights beside the same row of the checkpoint run with softmax."""
    abstention = trace["abstention"]                                  # [B,L,h,N]
    flat = abstention.flatten()
    order = torch.sort(-flat, stable=True).indices                    # ties: the first
    if margins is not None:
        margins.note("abstaining_query", relative_gaps(flat[order[:2]].tolist())[0], where)
    b, l, h, q = np.unravel_index(int(order[0]), tuple(abstention.shape))
    row = trace["attn"][b, l, h, q]
    six = torch.sort(-row, stable=True).indices[:7]                   # ties: the lower token
    if margins is not None:
        margins.note("six_keys", min(relative_gaps(row[six].tolist())), where)
    six = six[:6].tolist()
    softmax = run(setup.variant(cfg=replace(setup.cfg, attention="softmax")), x[b:b + 1],
                  trace=True, mad_k=mad_k)
    softmax_row = softmax["trace"]["attn"][0, l, h, q]
    value = float(abstention[b, l, h, q])
    return {"image": int(b), "layer": int(l), "head": int(h), "query": int(q),
            "query_kind": kinds[b][q], "abstention": value,
            "keys": [{"token": t, "kind": kinds[b][t], "weight": float(row[t]),
                      "softmax_weight": float(softmax_row[t])} for t in six],
            "rest": 1 - value - float(row[six].sum()),
            "softmax_rest": 1 - float(softmax_row[six].sum())}


def study_config(config, inputs, main_size, sizes, rules, calibration, evaluation, margins):
    s = resolve(config)
    cfg, mad_k, name = s.cfg, rules["mad_k"], s.name
    x = inputs[main_size]
    base = run(s, x, trace=True, mad_k=mad_k, margins=margins, where=f"{name} main")
    trace = base["trace"]
    note_artifacts(margins, base["prenorm"], s.registers, mad_k, f"{name} main")
    kinds = token_kinds(base["prenorm"], s, mad_k)
    out = {"name": name, "model": s.path, "attention": cfg.attention,
           "trained_attention": s.trained, "registers": s.registers,
           "test_time_registers": s.ttr, "precision": s.precision,
           "intervention": s.intervention_string(), "depth": cfg.depth, "dim": cfg.dim,
           "size": list(x.shape[-2:]), "tokens": base["prenorm"].shape[1]}

    # 1. heads, 2. weights sum
    out["heads"] = heads_table(trace, kinds, rules, margins, f"{name} main")
    sums = trace["attn"].sum(dim=-1)                                  # [B,L,h,N]
    out["weights_sum"] = sums.mean(dim=(0, 3))
    out["weights_sum_range"] = [[float(sums[:, l].min()), float(sums[:, l].max())]
                                for l in range(cfg.depth)]
    # 3. cost
    out["cost"] = {"parameters": parameter_count(s.path),
                   "parameters_added": (cfg.depth * cfg.heads if cfg.attention == "sink" else 0)
                   + cfg.registers * cfg.dim,
                   "ms_per_image": None}
    # 4. massive activations
    out["massive"] = massive_table(trace, kinds, margins, name)

    # 5. int8: the fp32 configuration on the evaluation half is the reference
    xe, xc = x[evaluation], x[calibration]
    fp32 = run(s, xe, mad_k=mad_k)
    per_token = cosines(fp32, run(s, xe, numerics=ref.Numerics("int8"), mad_k=mad_k))
    per_tensor = None
    if calibration:
        observed = {}
        run(s, xc, numerics=ref.Numerics(observe=observed), mad_k=mad_k)
        ranges = {k: (float(np.float32(lo)), float(np.float32(hi))) for k, (lo, hi) in observed.items()}
        per_tensor = cosines(fp32, run(s, xe, numerics=ref.Numerics("int8", "per-tensor", ranges),
                                       mad_k=mad_k))
    out["int8"] = {"fp32_accuracy": None, "per_token": per_token, "per_tensor": per_tensor}

    # 6. eviction, every image, against the configuration as given
    out["eviction"] = {what: cosines(base, run(s, x, evict=(what,), mad_k=mad_k, margins=margins,
                                               where=f"{name} evict {what}"))
                       for what in EVICTIONS if what != "registers" or s.registers}

    # 7. retrofit of a softmax-trained checkpoint run with softmax
    out["retrofit"] = None
    if s.trained == "softmax" and cfg.attention == "softmax":
        retro = {"softmax1": cosines(fp32, run(s.variant(cfg=replace(cfg, attention="softmax1")),
                                               xe, mad_k=mad_k)),
                 "calibrated_sink": None, "calibrated_sink_evicted": None}
        if calibration:
            sinks, _, _ = ref.calibrate_sink(cfg, s.weights, xc)   # as trained, no intervention
            note_sink_keys(margins, ref.forward(cfg, s.weights, xc, trace=True)["trace"],
                           f"{name} sink calibration")
            sink_cfg, sink_weights = calibrated_model(cfg, s.weights, sinks)
            calibrated = s.variant(cfg=sink_cfg, weights=sink_weights)
            retro["calibrated_sink"] = {**cosines(fp32, run(calibrated, xe, mad_k=mad_k)),
                                        "sinks": sinks.float().double()}
            retro["calibrated_sink_evicted"] = cosines(fp32, run(
                calibrated, xe, evict=("sink",), mad_k=mad_k, margins=margins,
                where=f"{name} calibrated sink"))
        out["retrofit"] = retro

    # 8. mass against the number of keys
    curve = []
    for size in sorted(sizes):
        traced = run(s, inputs[size], trace=True, mad_k=mad_k)
        curve.append({"size": list(inputs[size].shape[-2:]), "tokens": traced["prenorm"].shape[1],
                      "mass": traced["trace"]["attn"].sum(dim=-1).mean(dim=(0, 3))})
    out["mass_vs_tokens"] = curve
    m0, l0 = curve[0]["mass"], curve[0]["tokens"]
    out["mass_uniform_logit"] = ([[None] * cfg.heads for _ in range(cfg.depth)]
                                 if cfg.attention == "softmax" else
                                 torch.log(m0 / (1 - m0)) - math.log(l0))

    # 9. the abstaining query
    out["abstaining_query"] = (abstaining_query(s, x, trace, kinds, mad_k, margins, name)
                               if cfg.attention in ("softmax1", "sink") else None)
    # 10. the defect row (docs/design.md, "Artifact metrics")
    out["defects"] = defect_row(s, base["prenorm"], mad_k, margins, name)
    out["summary"] = summary(out, margins, name)
    return plain(out)


def outliers(values, mad_k):
    """The indices above median + mad_k * MAD (unscaled), and the smallest distance of any value
    from that threshold relative to it (the margin of the choice)."""
    mid = ref.median(values)
    threshold = mid + mad_k * ref.median((values - mid).abs())
    return (set(torch.nonzero(values > threshold).flatten().tolist()),
            float((values - threshold).abs().min() / threshold))


def defect_row(s, prenorm, mad_k, margins, where):
    """The study's defect row at the output layer L-1: per image the angle between its
    highest-norm patch and u_{L-1} (degrees, acos |cos|, lines not arrows), and the share of its
    patches each artifact rule flags (norm, direction: |cos(x, u)|, both: the two together),
    u from the PyTorch reference's defect directions (defects_reference) of the weights."""
    u, values = defects_reference.defect_directions(s.cfg, s.weights, DEFECT_SAMPLES, DEFECT_SEED, 1)
    last = s.cfg.depth - 1
    first = 1 + s.registers
    images = []
    for i, image in enumerate(prenorm):
        patches = image[first:]
        norms = patches.norm(dim=-1)
        cos = (patches @ u[last]).abs() / norms
        top = int(norms.argmax())
        by_norm, norm_margin = outliers(norms, mad_k)
        by_direction, direction_margin = outliers(cos, mad_k)
        if margins is not None:
            margins.note("defect_top", relative_gaps(norms.sort(descending=True).values[:2].tolist())[0],
                         f"{where} defect row image {i}")
            margins.note("artifact", norm_margin, f"{where} defect row image {i}")
            margins.note("direction", direction_margin, f"{where} defect row image {i}")
        n = patches.shape[0]
        images.append({"top_token": first + top,
                       "top_angle_deg": math.degrees(math.acos(min(1.0, float(cos[top])))),
                       "flagged_norm": len(by_norm) / n, "flagged_direction": len(by_direction) / n,
                       "flagged_both": len(by_norm & by_direction) / n})
    row = {"layer": last, "singular_value": float(values[last, 0]), "images": images}
    for key in ("top_angle_deg", "flagged_norm", "flagged_direction", "flagged_both"):
        row["mean_" + key] = sum(image[key] for image in images) / len(images)
    return row


def summary(c, margins, where):
    """The configuration's row of study.csv: exactly SUMMARY_KEYS."""
    heads = [h for row in c["heads"] for h in row]
    n = len(heads)
    s = {"name": c["name"], "attention": c["attention"], "registers": c["registers"],
         "precision": c["precision"], "intervention": c["intervention"]}
    for cls in ("dump", "abstain", "neither"):
        s[f"heads_{cls}"] = sum(h["class"] == cls for h in heads) / n
    for kind in TOKEN_KINDS:
        s[f"dump_{kind}"] = sum(h["class"] == "dump" and h["key_kind"] == kind for h in heads) / n
    s["weights_sum_mean"] = float(torch.as_tensor(c["weights_sum"]).mean())
    s["weights_sum_min"] = min(r[0] for r in c["weights_sum_range"])
    s["weights_sum_max"] = max(r[1] for r in c["weights_sum_range"])
    s["parameters_added"] = c["cost"]["parameters_added"]
    s["ms_per_image"] = c["cost"]["ms_per_image"]
    ratios = [m["ratio"] for m in c["massive"]]
    layer = ratios.index(max(ratios))
    if margins is not None and len(ratios) > 1:
        margins.note("massive_layer", relative_gaps(sorted(ratios, reverse=True)[:2])[0], where)
    s.update(massive_ratio=ratios[layer], massive_layer=layer,
             massive_top=c["massive"][layer]["top"][0][0], massive_kind=c["massive"][layer]["top_kind"],
             kurtosis_max=max(m["kurtosis"] for m in c["massive"]))
    for key in ("top_angle_deg", "flagged_norm", "flagged_direction", "flagged_both"):
        s["defect_" + key] = c["defects"]["mean_" + key]

    def cos(entry, key):
        return None if entry is None else float(entry[key])
    for mode in ("per_token", "per_tensor"):
        for key in ("cls", "patch"):
            s[f"int8_{mode}_{key}_cosine"] = cos(c["int8"][mode], f"{key}_cosine")
    s["fp32_accuracy"] = c["int8"]["fp32_accuracy"]
    s["int8_per_token_accuracy"] = s["int8_per_tensor_accuracy"] = None  # no head
    for what in EVICTIONS:
        for key in ("cls", "patch"):
            s[f"evict_{what}_{key}_cosine"] = cos(c["eviction"].get(what), f"{key}_cosine")
    for what in RETROFITS:
        entry = c["retrofit"][what] if c["retrofit"] is not None else None
        for key in ("cls", "patch"):
            s[f"retrofit_{what}_{key}_cosine"] = cos(entry, f"{key}_cosine")
        s[f"retrofit_{what}_accuracy_change"] = None  # no head
    curve = c["mass_vs_tokens"]
    first, last = torch.as_tensor(curve[0]["mass"]), torch.as_tensor(curve[-1]["mass"])
    s["mass_smallest"], s["mass_largest"] = float(first.mean()), float(last.mean())
    s["mass_drift"] = None
    if c["attention"] != "softmax" and len(curve) > 1:
        z = torch.as_tensor(c["mass_uniform_logit"], dtype=torch.float64)
        s["mass_drift"] = float((last - torch.sigmoid(z + math.log(curve[-1]["tokens"]))).mean())
    aq = c["abstaining_query"]
    s["abstaining_query_abstention"] = None if aq is None else aq["abstention"]
    assert tuple(s) == SUMMARY_KEYS, [k for k in SUMMARY_KEYS if k not in s]
    return s


def plain(obj):
    """Tensors and numpy scalars -> JSON-ready Python numbers and lists."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if torch.is_tensor(obj):
        return obj.tolist() if obj.dim() else obj.item()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def study(configs, inputs, main_size, sizes=None, mad_k=10.0, sink_alpha=0.3, abstain=0.5,
          images=None, resize="none", margins=None):
    """The study.json dict of docs/study.md (see the module docstring for what is left out).

    configs: dicts for `resolve`, in order; inputs: {size S: normalized pixels [B,3,S,S]} (the
    same B images at every size; values taken as given, in float64); main_size: the key of
    `inputs` the statistics use; sizes: the sizes of definition 8 (default [main_size]);
    images: the names reported (default image0, image1, ...); margins: a Margins to fill."""
    sizes = sorted(sizes or [main_size])
    inputs = {size: torch.as_tensor(x, dtype=torch.float64) for size, x in inputs.items()}
    count = inputs[main_size].shape[0]
    assert all(inputs[size].shape[0] == count for size in sizes)
    calibration = list(range(0, count, 2)) if count > 1 else []
    evaluation = list(range(1, count, 2)) if count > 1 else [0]
    rules = {"mad_k": mad_k, "sink_alpha": sink_alpha, "abstain": abstain}
    return {"format": FORMAT, "version": VERSION,
            "images": list(images or [f"image{i}" for i in range(count)]), "resize": resize,
            "sizes": sizes, "calibration_images": calibration, "evaluation_images": evaluation,
            "rules": rules,
            "configs": [study_config(c, inputs, main_size, sizes, rules, calibration, evaluation,
                                     margins) for c in configs]}
