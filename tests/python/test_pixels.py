"""The same pixels as the user's PyTorch pipeline (issue #28, docs/design.md, "Pixel pipelines"), checked against
Debian's PIL and torchvision running live on real files: vitreg.read_image against
Image.open(f).convert("RGB"), and Model.preprocess against each pipeline's eval transform, float32
for float32.

Run by CTest with the other module tests (PYTHONPATH=build/python)."""
import json
import os

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image, ImageOps

import vitreg

ROOT = os.environ.get("VITREG_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
PHOTOS = os.path.join(FIXTURES, "photos")
ASSETS = os.path.join(ROOT, "assets", "images")
FILES = json.load(open(os.path.join(PHOTOS, "cases.json")))["files"]
SHIPPED = "vitreg-untrained-s14-d192-reg4"  # DINOv2's transform: short side 256, crop 224
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def photo(entry):
    return os.path.join(PHOTOS, entry["file"])


def torchvision_eval(short, crop, mean, std):
    return T.Compose([T.Resize(short, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(crop), T.ToTensor(),
                      T.Normalize(mean, std)])


@pytest.fixture(scope="module")
def model():
    return vitreg.Model(SHIPPED, threads=2)


@pytest.mark.parametrize("entry", FILES, ids=[os.path.basename(f["file"]) for f in FILES])
def test_read_image_is_pil_convert_rgb(entry):
    want = np.asarray(Image.open(photo(entry)).convert("RGB"))
    np.testing.assert_array_equal(vitreg.read_image(photo(entry)), want)
    if "exif_orientation" in entry:
        want = np.asarray(ImageOps.exif_transpose(Image.open(photo(entry))).convert("RGB"))
        np.testing.assert_array_equal(vitreg.read_image(photo(entry), exif_transpose=True), want)


@pytest.mark.parametrize("entry", FILES, ids=[os.path.basename(f["file"]) for f in FILES])
def test_preprocess_is_the_dinov2_eval_transform_to_the_bit(model, entry):
    """DINOv2's hub transform (torchvision Resize(256, BICUBIC), CenterCrop(224), ToTensor,
    Normalize) on PIL's RGB image: the same float32 values, not merely close ones."""
    want = torchvision_eval(256, 224, *IMAGENET)(Image.open(photo(entry)).convert("RGB")).numpy()
    got = model.preprocess(photo(entry))
    assert got.shape == want.shape
    assert np.array_equal(got, want), f"max |diff| {np.abs(got - want).max()}"


@pytest.mark.parametrize("name", ["astronaut.jpg", "coffee.jpg", "chelsea.png"])
def test_other_pipelines_on_photos(model, name):
    """HF's slow processor floors the crop offset; open_clip resizes before converting; timm is
    torchvision's with its own short side. Each named pipeline gives its own bytes."""
    path = os.path.join(ASSETS, name)
    rgb = Image.open(path).convert("RGB")
    resized = rgb.resize((int(256 * rgb.width / rgb.height), 256) if rgb.width >= rgb.height
                         else (256, int(256 * rgb.height / rgb.width)), Image.BICUBIC)
    left, top = (resized.width - 224) // 2, (resized.height - 224) // 2
    hf = T.Compose([T.ToTensor(), T.Normalize(*IMAGENET)])(resized.crop((left, top, left + 224, top + 224))).numpy()
    assert np.array_equal(model.preprocess(path, pipeline="hf"), hf)
    clip = T.Compose([T.Resize(256, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224),
                      lambda im: im.convert("RGB"), T.ToTensor(), T.Normalize(*IMAGENET)])(Image.open(path)).numpy()
    assert np.array_equal(model.preprocess(path, pipeline="open_clip"), clip)


def test_draft_and_torch_resampling_are_named_choices(model):
    """--decode draft is PIL's Image.draft before the resize (other pixels, the same picture);
    --resample torch is the float path; neither is the default, and a bad name is refused."""
    path = os.path.join(PHOTOS, "files", "jpeg_camera_512x384.jpg")
    exact = model.preprocess(path, resize="short:112")  # 512x384 -> 149x112 -> 140x112 (whole patches)
    assert exact.shape == (3, 112, 140)
    draft = model.preprocess(path, resize="short:112", decode="draft")
    im = Image.open(path)
    im.draft("RGB", (140, 112))
    assert im.size == (256, 192)  # scale 1/2: min(512 // 140, 384 // 112) = 3, snapped to 2
    want = T.Compose([T.ToTensor(), T.Normalize(*IMAGENET)])(im.convert("RGB").resize((140, 112), Image.BICUBIC))
    assert np.array_equal(draft, want.numpy())
    assert 0 < np.abs(draft - exact).max() < 1.0
    torch_resampled = model.preprocess(path, resample="torch")
    assert 0 < np.abs(torch_resampled - model.preprocess(path)).max() < 0.2
    with pytest.raises(vitreg.UsageError, match="pipeline"):
        model.preprocess(path, pipeline="keras")
    with pytest.raises(vitreg.UsageError, match="draft"):
        model.preprocess(path, decode="fast")
