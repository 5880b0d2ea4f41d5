"""@denoise=shift:K[:median] from its definition (docs/design.md, "Repairs and dense evaluation"), in
float64, sharing no code with the C++: DVT's model of K forwards of one image shifted by whole
patches, view_k(g) = content(g - s_k) + noise(g) + residual, split per image into the content
(what the repair writes after the last block) and the noise locked to the grid.

- shifts(K): (0,0), then rings r = 1, 2, 3: (0,r), (r,0), (-r,-r), (0,-r), (-r,0), (r,r), (r,-r), (-r,r).
- shifted(images, (dy, dx), patch): out(y, x) = in(reflect(y - dy*patch), reflect(x - dx*patch)),
  torch's "reflect" padding (the edge not repeated).
- An observation (k, g) counts when its content cell g - s_k lies inside the grid.
- Weights: an observation at grid position g weighs w(g) = 1 / (1 + (|noise(g)| / m)^2), m the
  median of |noise| over the grid, and never below 1e-6 (all 1 while the noise is 0).
- The gauge: each channel's median of the noise over the grid is moved into the content.
- The mean split is iteratively reweighted least squares: from noise = 0, each round solves the
  weighted least-squares problem of the observations in closed form (torch.linalg.lstsq on the
  design matrix scaled by sqrt(w), one column per content cell and per grid position) with the
  weights of the previous round's noise, then fixes the gauge. The median split alternates: the
  content as the weighted mean of view - noise over its observations, the noise as the median of
  view - content over its observations, the gauge. Both stop when no noise value moves by more
  than 1e-6 times the views' largest magnitude, or after 400 rounds; the content is then the
  weighted mean of view - noise under the final noise's weights."""
import torch

import vit_reference as ref

TOLERANCE, MAX_ROUNDS, MIN_WEIGHT = 1e-7, 50, 1e-6


def shifts(count):
    out, r = [(0, 0)], 1
    while len(out) < count:
        ring = [(0, r), (r, 0), (-r, -r), (0, -r), (-r, 0), (r, r), (r, -r), (-r, r)]
        out += ring[:count - len(out)]
        r += 1
    return out


def reflect(i, n):
    return -i if i < 0 else 2 * (n - 1) - i if i >= n else i


def shifted(images, shift, patch):
    H, W = images.shape[-2:]
    rows = torch.tensor([reflect(y - shift[0] * patch, H) for y in range(H)])
    cols = torch.tensor([reflect(x - shift[1] * patch, W) for x in range(W)])
    return images[..., rows, :][..., :, cols]


def observations(shift_list, gh, gw):
    """(view k, grid position g, content cell c) of every observation, cells row-major."""
    out = []
    for k, (dy, dx) in enumerate(shift_list):
        for y in range(gh):
            for x in range(gw):
                cy, cx = y - dy, x - dx
                if 0 <= cy < gh and 0 <= cx < gw:
                    out.append((k, y * gw + x, cy * gw + cx))
    return out


def median_rows(values):
    """Median over dim 0, the mean of the two middle values for an even count."""
    ordered = values.sort(dim=0).values
    n = values.shape[0]
    return ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])


def weights(noise):
    size = noise.norm(dim=-1)
    typical = median_rows(size)
    return torch.ones_like(size) if typical == 0 else (1 / (1 + (size / typical) ** 2)).clamp(min=MIN_WEIGHT)


def gauged(noise):
    return noise - median_rows(noise)


def content_of(views, noise, obs, cells):
    """The weighted mean over each content cell's observations of view - noise."""
    w = weights(noise)
    total = torch.zeros(cells, dtype=torch.float64)
    sums = torch.zeros(cells, views.shape[-1], dtype=torch.float64)
    for k, g, c in obs:
        total[c] += w[g]
        sums[c] += w[g] * (views[k, g] - noise[g])
    return sums / total[:, None]


def iterate(views, gh, gw, step):
    """noise = step(noise) from 0 until it settles; (content, noise)."""
    cells = gh * gw
    noise = torch.zeros(cells, views.shape[-1], dtype=torch.float64)
    scale = views.abs().max()
    for _ in range(MAX_ROUNDS):
        update = step(noise)
        moved = (update - noise).abs().max()
        noise = update
        if moved <= TOLERANCE * scale:
            break
    return noise


def split_least_squares(views, shift_list, gh, gw):
    """views [K, gh*gw, D] -> (content, noise) [gh*gw, D]."""
    cells = gh * gw
    obs = observations(shift_list, gh, gw)
    target = torch.stack([views[k, g] for k, g, _ in obs])

    def step(noise):
        root = weights(noise).sqrt()
        design = torch.zeros(len(obs), 2 * cells, dtype=torch.float64)
        for i, (_, g, c) in enumerate(obs):
            design[i, c] = root[g]
            design[i, cells + g] = root[g]
        rows = torch.stack([root[g] for _, g, _ in obs])[:, None]
        solution = torch.linalg.pinv(design) @ (rows * target)
        return gauged(solution[cells:])
    noise = iterate(views, gh, gw, step)
    return content_of(views, noise, obs, cells), noise


def split_medians(views, shift_list, gh, gw):
    cells = gh * gw
    obs = observations(shift_list, gh, gw)
    by_position = [[(k, c) for k, g, c in obs if g == cell] for cell in range(cells)]

    def step(noise):
        content = content_of(views, noise, obs, cells)
        return gauged(torch.stack([median_rows(torch.stack([views[k, g] - content[c] for k, c in by_position[g]]))
                                   for g in range(cells)]))
    noise = iterate(views, gh, gw, step)
    return content_of(views, noise, obs, cells), noise


def denoise(cfg, w, images, count, median=False):
    """The planted-style forward with @denoise=shift:count[:median]: the final-normed patch
    tokens [B, gh*gw, D] and each image's split noise [B, gh*gw, D], before the final norm."""
    images = torch.as_tensor(images, dtype=torch.float64)
    gh, gw = images.shape[-2] // cfg.patch, images.shape[-1] // cfg.patch
    shift_list = shifts(count)
    P = ref.prefix_tokens(cfg) + cfg.registers
    last = torch.stack([ref.forward(cfg, w, shifted(images, s, cfg.patch))["prenorm"] for s in shift_list], dim=1)
    split = split_medians if median else split_least_squares
    contents, noises = [], []
    for b in range(images.shape[0]):
        content, noise = split(last[b, :, P:], shift_list, gh, gw)
        contents.append(content)
        noises.append(noise)
    stream = last[:, 0].clone()
    stream[:, P:] = torch.stack(contents)
    patches = ref.final_norm(stream, w, cfg)[:, P:]
    return patches, torch.stack(noises)
