"""Dense features at resolution (docs/design.md, "Dense features at resolution"), written from
the definitions and sharing no code with vitreg's C++: the sliding-window paste, multi-scale and
flip averaging on one grid, bilinear upsampling (F.interpolate), joint bilateral upsampling
(Kopf et al. 2007) and the --pca-dims reduction. Everything is float64.

A "patch forward" is a callable images [B,3,H,W] -> [B,L,h,w,D]: the patch tokens of the chosen
layers of each image, as a grid (see `patch_forward`)."""
import math

import torch
import torch.nn.functional as F

import vit_reference as ref


def patch_forward(cfg, weights, layers, normed=True, intervention=None):
    """The patch forward of a model: blocks `layers` (get_intermediate_layers), final-normed when
    `normed`, prefix tokens (CLS, registers) dropped, reshaped to the patch grid."""
    def run(images):
        out = ref.forward(cfg, weights, images, trace=True, intervention=intervention)
        blocks = out["trace"]["blocks_normed" if normed else "blocks"][:, list(layers)]
        prefix = ref.prefix_tokens(cfg) + cfg.registers
        h, w = images.shape[-2] // cfg.patch, images.shape[-1] // cfg.patch
        patches = blocks[:, :, prefix:]
        return patches.reshape(patches.shape[0], patches.shape[1], h, w, patches.shape[-1])
    return run


def window_starts(extent, crop, stride):
    """mmseg's slide inference on one axis: max(extent - crop + stride - 1, 0) // stride + 1 crops;
    crop i spans [i*stride, i*stride + crop) moved back to end at the edge when it passes it. A
    crop longer than the extent is the whole extent."""
    crop = min(crop, extent)
    count = max(extent - crop + stride - 1, 0) // stride + 1
    return [max(min(i * stride + crop, extent) - crop, 0) for i in range(count)]


def sliding_window(forward, image, patch, window, stride):
    """One image [1,3,H,W] -> [L,H/patch,W/patch,D]: every crop's patch grid added at its place
    in the image's grid, each cell divided by the number of crops that covered it. window 0:
    the whole image in one forward."""
    H, W = image.shape[-2:]
    if window == 0:
        return forward(image)[0]
    ch, cw = min(window, H), min(window, W)
    places = [(y, x) for y in window_starts(H, ch, stride) for x in window_starts(W, cw, stride)]
    crops = torch.cat([image[..., y:y + ch, x:x + cw] for y, x in places])
    grids = forward(crops)
    total = torch.zeros(grids.shape[1], H // patch, W // patch, grids.shape[-1], dtype=torch.float64)
    count = torch.zeros(H // patch, W // patch, dtype=torch.float64)
    for (y, x), grid in zip(places, grids):
        r, c = y // patch, x // patch
        total[:, r:r + ch // patch, c:c + cw // patch] += grid
        count[r:r + ch // patch, c:c + cw // patch] += 1
    assert bool((count > 0).all()), "the crops leave cells uncovered"
    return total / count[None, :, :, None]


def scaled_size(height, width, scale, patch):
    """Each side times the scale, rounded half up to a multiple of the patch (at least one)."""
    return tuple(max(1, math.floor(n * scale / patch + 0.5)) * patch for n in (height, width))


def resize_bilinear(image, height, width):
    """[B,C,H,W] -> [B,C,height,width], F.interpolate bilinear, align_corners False, no antialias."""
    if tuple(image.shape[-2:]) == (height, width):
        return image
    return F.interpolate(image, size=(height, width), mode="bilinear", align_corners=False, antialias=False)


def dense_view(forward, image, patch, window=0, stride=0, scales=(1.0,), flip=False, grid=None):
    """One preprocessed image [1,3,H,W] -> [L,gh,gw,D]: for each scale (and its mirror image
    when flip) the image resized bilinearly, its sliding-window grid (the mirror's mirrored
    back), that grid resized bilinearly to `grid` (default the image's own H/patch x W/patch);
    the mean of them all."""
    image = torch.as_tensor(image, dtype=torch.float64)
    H, W = image.shape[-2:]
    gh, gw = grid or (H // patch, W // patch)
    stride = stride or window
    views = []
    for scale in scales:
        scaled = resize_bilinear(image, *scaled_size(H, W, scale, patch))
        for mirrored in ((False, True) if flip else (False,)):
            x = scaled.flip(-1) if mirrored else scaled
            g = sliding_window(forward, x, patch, window, stride)          # [L,h,w,D]
            if mirrored:
                g = g.flip(2)
            g = resize_bilinear(g.permute(0, 3, 1, 2), gh, gw).permute(0, 2, 3, 1)
            views.append(g)
    return torch.stack(views).mean(dim=0)


def upsample_jbu(features, guide, height, width, sigma_spatial=1.0, sigma_range=0.15, radius=2):
    """Joint bilateral upsampling of features [h,w,C] to [height,width,C], guided by `guide`
    [Hg,Wg,3] (RGB in [0,1]). Output pixel p = (y, x) sits at ((y + 0.5) h / height,
    (x + 0.5) w / width) in grid cells; cell q = (i, j) at (i + 0.5, j + 0.5). I(p) is the guide
    resized bilinearly to height x width, I(q) that resized bilinearly again to h x w. q runs over
    the cells within `radius` (clipped to the grid) of p's own cell (floor of p's position):
    F(p) = sum_q F(q) exp(-|p - q|^2 / 2 sigma_s^2) exp(-|I(p) - I(q)|^2 / 2 sigma_r^2) / sum_q (weights)."""
    features = torch.as_tensor(features, dtype=torch.float64)
    h, w, C = features.shape
    g = torch.as_tensor(guide, dtype=torch.float64).permute(2, 0, 1)[None]
    guide_out = resize_bilinear(g, height, width)[0].permute(1, 2, 0)       # [height,width,3]
    guide_grid = resize_bilinear(guide_out.permute(2, 0, 1)[None], h, w)[0].permute(1, 2, 0)
    py = (torch.arange(height, dtype=torch.float64) + 0.5) * h / height
    px = (torch.arange(width, dtype=torch.float64) + 0.5) * w / width
    cy = py.floor().long().clamp(0, h - 1)
    cx = px.floor().long().clamp(0, w - 1)
    total = torch.zeros(height, width, C, dtype=torch.float64)
    weight = torch.zeros(height, width, dtype=torch.float64)
    for di in range(-radius, radius + 1):
        for dj in range(-radius, radius + 1):
            i, j = cy + di, cx + dj                                          # [height], [width]
            inside = ((i >= 0) & (i < h))[:, None] & ((j >= 0) & (j < w))[None, :]
            ic, jc = i.clamp(0, h - 1), j.clamp(0, w - 1)
            spatial = ((py - (i + 0.5)) ** 2)[:, None] + ((px - (j + 0.5)) ** 2)[None, :]
            rng = ((guide_out - guide_grid[ic][:, jc]) ** 2).sum(-1)
            wq = torch.exp(-spatial / (2 * sigma_spatial ** 2) - rng / (2 * sigma_range ** 2)) * inside
            total += wq[..., None] * features[ic][:, jc]
            weight += wq
    return total / weight[..., None]


def pca_reduce(features, k):
    """The reduction of `vitreg dense --pca-dims K`: features [n, C] (one row per patch, the
    chosen layers side by side) centred on their mean; the components are the right singular
    vectors of the centred matrix with the k largest singular values (torch.linalg.svd), each
    signed so that its entry of largest magnitude is positive; explained variance s^2 / (n - 1),
    its ratio to the total variance; reduced = (x - mean) @ components^T. Returns a dict of
    float64 tensors: mean [C], components [k, C], explained_variance [k],
    explained_variance_ratio [k], reduced [n, k]."""
    x = torch.as_tensor(features, dtype=torch.float64)
    n = x.shape[0]
    mean = x.mean(dim=0)
    centred = x - mean
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)
    components = vh[:k].clone()
    for c in range(k):
        if components[c, components[c].abs().argmax()] < 0:
            components[c] = -components[c]
    variance = s ** 2 / (n - 1)
    return {"mean": mean, "components": components, "explained_variance": variance[:k],
            "explained_variance_ratio": variance[:k] / variance.sum(), "reduced": centred @ components.T}
