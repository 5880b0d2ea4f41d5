#!/usr/bin/env python3
"""What is written about the vitreg command from its own --help, so none of it can drift:

  cli_docs.py VITREG --write docs/cli.md       the command-line reference (every --help, the --json schemas)
  cli_docs.py VITREG --check docs/cli.md       exit 1 when that file differs from what --write writes
  cli_docs.py VITREG --completion FILE         the bash completion script (subcommands, options, choices)
  cli_docs.py VITREG --man FILE                the man page, by help2man, with every subcommand's --help

The --json schemas are stated here, once; tests/cli_output_test.py reads them back from docs/cli.md
and checks every documented field against the command's output.
"""
import difflib
import os
import re
import subprocess
import sys
import tempfile

REGENERATE = "scripts/cli_docs.py build/apps/vitreg --write docs/cli.md"

# (field, type, meaning): a dotted field is one inside an object. Types: string, integer, number,
# boolean, object, array, and "X or null" where a run may not measure it.
JSON_SCHEMAS = [
    ("info", "`vitreg info MODEL --json` prints one object:", [
        ("file", "string", "the checkpoint file that was read"),
        ("config", "object", "the resolved configuration: every field Python's `Model.config` and run.json's `config` "
                             "give; those below are always there"),
        ("config.family", "string", "the family whose forward runs (dinov2, dinov3, clip, eva02, ...)"),
        ("config.layout", "string", "the checkpoint's layout (its names and shapes)"),
        ("config.dim", "integer", "the width of the tokens"),
        ("config.depth", "integer", "the number of blocks"),
        ("config.heads", "integer", "attention heads per block"),
        ("config.head_dim", "integer", "the width of one head"),
        ("config.patch_size", "integer", "the patch side in pixels"),
        ("config.num_registers", "integer", "register tokens"),
        ("config.class_token", "boolean", "whether the model has a class token"),
        ("config.attention", "string", "the normalizer that runs: softmax, softmax1 or sink"),
        ("config.trained_attention", "string", "the normalizer the checkpoint was trained with"),
        ("config.pos_interp", "string", "how the position embedding is resampled"),
        ("config.input_size", "integer", "the evaluation input side in pixels"),
        ("config.grid", "integer", "the native patch grid's side"),
        ("config.image_mean", "array", "the per-channel mean the pixels are normalized with"),
        ("config.image_std", "array", "the per-channel standard deviation"),
        ("config.dtype", "string", "the checkpoint's stored dtype (F32, F16, BF16; I8 for an int8-quantized file, U8 for an int4 one)"),
        ("config.parameters", "integer", "the number of parameters"),
        ("config.notes", "array", "what the loader inferred or retrofitted, as sentences"),
        ("metadata", "object", "the file's own safetensors metadata, text to text (empty for a PyTorch file)"),
        ("weight_bytes", "object", "the weights' memory by format: f32, bf16, f16, int8 (with its scales) and int4-g128 "
                                   "(@int4's packing: bf16 scales and zeros, 16-bit sums per 128 inputs); the matrices in the "
                                   "format, the other tensors in fp32 (from the shapes: a quantized file runs only in its own)"),
        ("weight_bytes.f32", "integer", "every tensor in fp32"),
        ("weight_bytes.int8", "integer", "the int8 matrices with an fp32 scale and an int32 sum per output column"),
        ("missing_bytes", "integer", "tensor bytes past the end of a truncated file (0 for a whole file)"),
        ("quantization", "object or null", "a quantized file's (`vitreg convert --dtype int8|int4`); null for float weights"),
        ("quantization.precision", "string", "the one precision the file runs at: int8"),
        ("quantization.weight_bits", "integer", "its weights' width: 8, or 7"),
    ]),
    ("bench", "`vitreg bench MODEL --json` prints one object (times in milliseconds per image):", [
        ("file", "string", "the checkpoint file that was timed"),
        ("height", "integer", "input height in pixels"),
        ("width", "integer", "input width in pixels"),
        ("batch", "integer", "images per forward"),
        ("threads", "integer", "threads the forward ran on"),
        ("probe", "boolean", "whether the forward was `vitreg maps`' (`--probe`)"),
        ("precision", "string", "the precision, as `--precision` and `--act-quant` set it (`fp32`, `int8 per-token`, ...)"),
        ("kernels", "string", "the instruction sets the kernels ran"),
        ("iters", "integer", "timed forwards"),
        ("warmup", "integer", "untimed forwards before them"),
        ("load_seconds", "number", "the model's load: reading, converting and packing its weights (weights read in "
                                    "place are read by the first forward instead)"),
        ("peak_rss_mb", "number", "the process's peak resident set through the timed forwards (before the fp32 model "
                                  "loaded for `vs_fp32`), in MB of 2^20 bytes"),
        ("weights_held_mb", "integer", "the linears' weights in memory the model allocated (packed, quantized, their "
                                       "scales and biases), in MB"),
        ("weights_mapped_mb", "integer", "the linears' weights read in place from the checkpoint's mapped pages (bf16 "
                                         "stored as bf16 on AVX512-BF16 without AMX; shared with the page cache), in MB"),
        ("inputs", "string", "`random` pixels, or `images` (`--images`)"),
        ("ms_per_image", "object", "the timed forwards' cost per image"),
        ("ms_per_image.median", "number", "median"),
        ("ms_per_image.p95", "number", "95th percentile"),
        ("ms_per_image.min", "number", "fastest"),
        ("ms_per_image.max", "number", "slowest"),
        ("gflop_per_image", "number", "the forward's work per image, in GFLOP"),
        ("gflops_per_second", "number", "that work over the median time"),
        ("profile", "object", "where the timed forwards' time went, in ms per image per stage, in forward order: "
                              "`embed`, `norms`, `qkv`, `attention`, `proj`, `fc1` (with a fused GELU), "
                              "`mlp_activation` (SwiGLU), `fc2`, `other` (each linear with its bias, layer scale and "
                              "residual; attention with the rotary embedding, the scores, the normalizer and the "
                              "weighted sum)"),
        ("peak", "object or null", "`--peak` only: this CPU's measured per-core peak and the linear layers against it"),
        ("peak.fma256_gflops", "number", "fp32 FMA on 256 bits, one core (0: none)"),
        ("peak.fma512_gflops", "number", "fp32 FMA on 512 bits, one core (0: none)"),
        ("peak.bf16_gflops", "number", "vdpbf16ps, one core (0: none)"),
        ("peak.int8_gops", "number", "the int8 dot product, one core (0: none)"),
        ("peak.int8_instruction", "string", "the instruction of that int8 dot product"),
        ("peak.int8_256_gops", "number", "vpdpbusd on 256 bits, one core (0: no AVX512-VNNI nor AVX-VNNI)"),
        ("peak.int16_gops", "number", "vpdpwssd, the int16 dot product, on its widest, one core (0: no VNNI)"),
        ("peak.int16_instruction", "string",
         "that instruction and its width (`vpdpwssd (512-bit)`, or 256-bit with AVX-VNNI alone), or \"\""),
        ("peak.amx_int8_gops", "number", "AMX tdpbusd, one core (0: none)"),
        ("peak.amx_bf16_gflops", "number", "AMX tdpbf16ps, one core (0: none)"),
        ("peak.kernels", "string", "the fp32 kernels this process runs"),
        ("peak.kernel_peak_gflops", "number", "the peak of their width"),
        ("peak.linears", "array", "per precision timed (fp32, then the model's own when reduced): `precision`, "
                                  "`kernel`, `unit`, `rows`, `layers` (qkv, proj, fc1, fc2), `all`, `instruction_peak`"),
        ("peak.forward_fraction_of_peak", "number", "the forward's GFLOP/s (GOP/s) over threads × the peak its linears "
                                                    "run at: the fp32 kernels' width, or a reduced precision's instruction "
                                                    "(`vdpbf16ps`, `vpdpbusd`, AMX); 0 where the precision is emulated "
                                                    "without an instruction of its own"),
        ("vs_fp32", "object or null", "reduced precision only: the same inputs through the fp32 forward (null for a quantized "
                                            "file, which has none)"),
        ("vs_fp32.cls_cosine_min", "number", "the smallest CLS cosine over the batch"),
        ("vs_fp32.patch_cosine_mean", "number", "the mean patch-token cosine"),
        ("vs_fp32.patch_cosine_min", "number", "the smallest patch-token cosine"),
        ("vs_fp32.max_relative_error", "number", "the largest relative error over every token"),
        ("vs_fp32_skipped", "string or null", "reduced precision without `vs_fp32`: why (a quantized file, or fp32 "
                                              "weights that do not fit `--max-memory` beside the loaded ones)"),
    ]),
]


def help_text(vitreg, *subcommand):
    out = subprocess.run([vitreg, *subcommand, "--help"], capture_output=True, text=True, check=True,
                         stdin=subprocess.DEVNULL, timeout=60)
    return out.stdout.rstrip() + "\n"


def subcommands(vitreg):
    """The subcommands and their one-line descriptions, in --help's order."""
    text = help_text(vitreg)
    listed = text.split("Subcommands:\n", 1)[1]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^  (\S+) +(.*)$", listed, re.M)]


def options(help):
    """(names, choices, takes_value) of each option in one --help."""
    found = []
    for m in re.finditer(r"^  (-[^ ]+)( [^ ].*?)?(?:  +.*)?$", help, re.M):
        names = m.group(1).split(",")
        kind = (m.group(2) or "").strip()
        choices = re.search(r":\{([^}]*)\}", kind)
        found.append((names, choices.group(1).split(",") if choices else [], bool(kind)))
    return found


def markdown(vitreg):
    lines = ["# Command line", "",
             f"<!-- Generated from the command's --help by scripts/cli_docs.py: do not edit; regenerate with "
             f"`{REGENERATE}` -->", "",
             "Every subcommand takes `--help`, which prints what is below, and `--quiet` (`-q`), which drops what it "
             "says on stderr about its progress, results and notes; errors are still printed and still set the exit "
             "status (0 done, 1 error, 2 bad usage, 3 some inputs failed). `vitreg` installs a bash completion and a "
             "man page (`man vitreg`).", "",
             "## Machine-readable output", "",
             "The objects below are stable: fields are added, never renamed, retyped or removed. A value a run did "
             "not measure is `null`. A dotted name is a field of the object above it.", ""]
    for command, intro, fields in JSON_SCHEMAS:
        lines += [f"### `vitreg {command} --json`", "", intro, "", "| field | type | meaning |", "|---|---|---|"]
        lines += [f"| `{name}` | {kind} | {meaning} |" for name, kind, meaning in fields]
        lines.append("")
    lines += ["## Commands", ""]
    lines += [f"### `vitreg`", "", "```text", help_text(vitreg).rstrip(), "```", ""]
    for name, _ in subcommands(vitreg):
        lines += [f"### `vitreg {name}`", "", "```text", help_text(vitreg, name).rstrip(), "```", ""]
    return "\n".join(lines)


def completion(vitreg):
    """A bash completion: subcommands first, then each one's options, an option's choices after it,
    and file names elsewhere."""
    names = [name for name, _ in subcommands(vitreg)]
    cases = []
    for name in names:
        opts = options(help_text(vitreg, name))
        flags = " ".join(n for names_, _, _ in opts for n in names_)
        valued = [(names_, choices) for names_, choices, takes in opts if takes]
        choice_cases = "".join(f"        {'|'.join(names_)}) words=\"{' '.join(choices)}\" ;;\n"
                               for names_, choices in valued if choices)
        plain = "|".join(n for names_, choices in valued if not choices for n in names_)
        value_case = f"        {plain}) words=\"\" ;;\n" if plain else ""
        cases.append(f"    {name})\n      opts=\"{flags}\"\n      case $prev in\n{choice_cases}{value_case}"
                     f"        *) words=unset ;;\n      esac ;;\n")
    return f"""# bash completion for vitreg, generated from its --help by scripts/cli_docs.py.
_vitreg() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} command="" opts="" words=unset word
  for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
    case $word in -*) ;; *) command=$word; break ;; esac
  done
  if [[ -z $command ]]; then
    COMPREPLY=($(compgen -W "{' '.join(names)} --help --version" -- "$cur"))
    return
  fi
  case $command in
{''.join(cases)}  esac
  if [[ $words != unset ]]; then
    [[ -n $words ]] && COMPREPLY=($(compgen -W "$words" -- "$cur")) || COMPREPLY=($(compgen -f -- "$cur"))
  elif [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -o bashdefault -F _vitreg vitreg
"""


def roff(text):
    """Plain text as roff: backslashes escaped, no line read as a request."""
    escaped = text.replace("\\", "\\e")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in escaped.split("\n"))


def man_page(vitreg, out):
    include = ["[COMMANDS]"]
    for name, _ in subcommands(vitreg):
        include += [f".SS {name}", ".nf", roff(help_text(vitreg, name).rstrip()), ".fi"]
    include += ["[SEE ALSO]", "The command-line reference with the --json schemas: docs/cli.md in the source."]
    with tempfile.NamedTemporaryFile("w", suffix=".h2m", delete=False) as f:
        f.write("\n".join(include) + "\n")
    try:
        subprocess.run(["help2man", "--no-info", "--section=1", "--name=ViT feature extraction and attention-artifact "
                        "analysis on the CPU", f"--include={f.name}", f"--output={out}", vitreg],
                       check=True, stdin=subprocess.DEVNULL, timeout=120)
    finally:
        os.unlink(f.name)


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 4 or argv[2] not in ("--write", "--check", "--completion", "--man"):
        sys.exit(__doc__)
    vitreg, action, path = argv[1], argv[2], argv[3]
    if action == "--write":
        write(path, markdown(vitreg))
    elif action == "--check":
        want = markdown(vitreg)
        with open(path) as f:
            got = f.read()
        if got != want:
            diff = difflib.unified_diff(got.splitlines(), want.splitlines(), path, "from --help", lineterm="", n=1)
            print("\n".join(list(diff)[:40]))
            sys.exit(f"{path} is not what the command's --help says now; regenerate it: {REGENERATE}")
    elif action == "--completion":
        write(path, completion(vitreg))
    else:
        man_page(vitreg, path)


if __name__ == "__main__":
    main(sys.argv)
