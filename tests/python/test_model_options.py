"""The one table of a model's options (vitreg.model_options()): vitreg.Model takes every one of
them as a keyword, refuses any other, and the command line's --help lists every one as a flag
with the same help.

Run by CTest with the python test (VITREG_BINARY names the vitreg command)."""
import os
import re
import subprocess

import numpy as np
import pytest

import vitreg

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("VITREG_BINARY", os.path.join(ROOT, "build", "apps", "vitreg"))
SHIPPED = "vitreg-untrained-s14-d192-reg4"

OPTIONS = vitreg.model_options()
# A value each option without a default takes on the shipped model on its own (None: the option
# needs another one or another checkpoint; None is then what is passed, and still a known keyword).
EXAMPLES = {"attention": "softmax1", "pos_interp": "offset", "evict": "cls", "max_memory": "4G"}


def test_the_table_names_the_options_both_front_ends_had():
    assert [o["keyword"] for o in OPTIONS] == [
        "key", "attention", "pos_interp", "precision", "act_quant", "scales", "int8_weights", "file_weights", "evict",
        "ttr", "register_neurons", "max_header_bytes", "max_json_depth", "threads", "max_image_pixels", "max_memory", "max_tokens"]
    for o in OPTIONS:
        assert o["keyword"] == o["name"].replace("-", "_") and o["flag"] == "--" + o["name"]
        assert o["kind"] in ("int", "str") and o["group"] in ("open", "run") and o["help"]


@pytest.mark.parametrize("option", OPTIONS, ids=[o["keyword"] for o in OPTIONS])
def test_model_takes_every_keyword_of_the_table(option):
    value = option["default"] if option["default"] is not None else EXAMPLES.get(option["keyword"])
    m = vitreg.Model(SHIPPED, **{option["keyword"]: value})
    assert m.config["dim"] == 192
    assert option["keyword"] in vitreg.Model.__doc__


def test_model_applies_the_keywords():
    m = vitreg.Model(SHIPPED, attention="softmax1", precision="bf16", ttr=1, register_neurons="1:3", threads=3)
    assert m.config["attention"] == "softmax1" and m.config["retrofit"]
    assert m.config["precision"] == "bf16"
    assert m.config["test_time_registers"] == 1
    assert m.threads == 3


def test_int4_by_keyword_or_name_suffix_and_a_contradiction_refused():
    assert vitreg.Model(SHIPPED, precision="int4").config["precision"] == "int4"
    assert vitreg.Model(SHIPPED + "@int4").config["precision"] == "int4"
    with pytest.raises(Exception, match="the name asks for int4 and --precision for int8"):
        vitreg.Model(SHIPPED + "@int4", precision="int8")


def test_max_memory_refuses_an_input_whose_forward_would_not_fit():
    # Refused before anything is allocated, with the estimate and the cap; within the cap it runs.
    x = np.zeros((1, 3, 1022, 1022), np.float32)
    with pytest.raises(vitreg.UsageError, match=r"makes 5334 tokens, whose forward needs about \d+ MB \(weights .*\), "
                                                r"over the memory cap of 96 MB \(--max-memory"):
        vitreg.Model(SHIPPED, max_memory="96M").forward(x)
    small = np.zeros((1, 3, 224, 224), np.float32)
    assert vitreg.Model(SHIPPED, max_memory="96M").forward(small)["patch"].shape == (1, 16, 16, 192)


def test_model_refuses_an_unknown_keyword_or_a_wrong_value_clearly():
    with pytest.raises(vitreg.UsageError, match=r"Model: unknown option\(s\) colour"):
        vitreg.Model(SHIPPED, colour="red")
    with pytest.raises(vitreg.UsageError, match="Model: option threads='two' has the wrong type"):
        vitreg.Model(SHIPPED, threads="two")
    with pytest.raises(vitreg.UsageError, match=r"ttr=65: expected an integer in 0\.\.64 \(--ttr on the command line\)"):
        vitreg.Model(SHIPPED, ttr=65)
    with pytest.raises(vitreg.UsageError, match="unknown attention kind 'relu'"):
        vitreg.Model(SHIPPED, attention="relu")


def help_of(*command):
    r = subprocess.run([BINARY, *command, "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return " ".join(r.stdout.split())


@pytest.mark.skipif(not os.path.exists(BINARY), reason="the vitreg command is not built")
def test_the_command_lines_help_lists_every_option_of_the_table():
    # extract opens a model and runs images through it: every option; info only opens one.
    for command, groups in ((("extract",), ("open", "run")), (("info",), ("open",))):
        text = help_of(*command)
        for o in OPTIONS:
            if o["group"] not in groups:
                continue
            assert re.search(re.escape(o["flag"]) + r"\b", text), (command, o["flag"])
            assert " ".join(o["help"].split()) in text, (command, o["flag"])
            for choice in o["choices"]:
                assert choice in text, (command, o["flag"], choice)
