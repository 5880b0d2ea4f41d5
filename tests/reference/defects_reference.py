"""Defect directions from the weights (SINDER, Wang et al. 2024), in float64 PyTorch, written from
the definitions (docs/design.md, "Repairs and dense evaluation") and sharing no code with vitreg's C++:

  LayerNorm  -> diag(w) C, C = I - (1/D) 1 1^T (the 1/sigma scale dropped)
  attention  -> A = I + diag(g1) W_o [diag(w_a) C] W_v diag(w1) C   (value path; [..]: EVA-CLIP's
                inner LayerNorm on the merged heads, where the block has one)
  MLP        -> M = I + diag(g2) W2 B diag(w2) C, B = the least-squares linear map (no intercept)
                from x to the fc2 input act(W1 x + b1) (SwiGLU: silu(gate) * value; EVA-02's
                sub-LayerNorm applied) over a Gaussian sample x ~ N(0, I)
  E_i = M_i A_i, G_i = E_i ... E_0; u_i = the leading left singular vector of G_i, its
  largest-magnitude component made positive; the top singular values beside it.

The sample is the one vitreg draws (vitreg/analysis/defects.hpp states it): element j of the
[samples, dim] matrix, row-major, is the Box-Muller normal of the pair p = j // 2 (cos for even j,
sin for odd) whose uniforms are SplitMix64 outputs number 2p + 1 and 2p + 2 of the seed, mapped
to ((z >> 11) + 0.5) * 2^-53."""
import numpy as np
import torch
import torch.nn.functional as F

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(seed, n):
    """Output number n (uint64 array) of SplitMix64 started at `seed`."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + n.astype(np.uint64) * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def gaussian_sample(samples, dim, seed):
    """The [samples, dim] float64 sample every layer's MLP fit uses."""
    j = np.arange(samples * dim, dtype=np.uint64)
    p = j // np.uint64(2)

    def uniform(z):
        return ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53

    u1 = uniform(splitmix64(seed, np.uint64(2) * p + np.uint64(1)))
    u2 = uniform(splitmix64(seed, np.uint64(2) * p + np.uint64(2)))
    r, angle = np.sqrt(-2.0 * np.log(u1)), 2.0 * np.pi * u2
    x = np.where(j % np.uint64(2) == 0, r * np.cos(angle), r * np.sin(angle))
    return torch.from_numpy(x.reshape(samples, dim))


def _norm_map(weight):
    D = weight.numel()
    centring = torch.eye(D, dtype=torch.float64) - torch.full((D, D), 1.0 / D, dtype=torch.float64)
    return torch.diag(weight) @ centring


def _fc2_input(cfg, w, prefix, x):
    """What the block's second MLP linear reads for inputs x [n, D] (torch's own activations)."""
    if cfg.mlp == "swiglu":
        gate, value = F.linear(x, w[prefix + ".w12.weight"], w.get(prefix + ".w12.bias")).chunk(2, dim=-1)
        hidden = F.silu(gate) * value
    else:
        z = F.linear(x, w[prefix + ".fc1.weight"], w.get(prefix + ".fc1.bias"))
        hidden = {"gelu": lambda t: F.gelu(t),
                  "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
                  "quick_gelu": lambda t: t * torch.sigmoid(1.702 * t)}[cfg.mlp](z)
    if cfg.mlp_norm:
        hidden = F.layer_norm(hidden, hidden.shape[-1:], w[prefix + ".norm.weight"], w[prefix + ".norm.bias"], cfg.eps)
    return hidden


def block_maps(cfg, w, samples, seed):
    """E_i for every block of a model loaded by vit_reference.load_model (float64 weights)."""
    D = cfg.dim
    x = gaussian_sample(samples, D, seed)
    eye = torch.eye(D, dtype=torch.float64)
    maps = []
    for i in range(cfg.depth):
        b = f"blocks.{i}."
        g1 = w.get(b + "ls1.gamma", torch.ones(D, dtype=torch.float64))
        g2 = w.get(b + "ls2.gamma", torch.ones(D, dtype=torch.float64))
        w_v = w[b + "attn.qkv.weight"][2 * D:3 * D]
        value = w_v @ _norm_map(w[b + "norm1.weight"])
        if cfg.attn_norm:
            value = _norm_map(w[b + "attn.norm.weight"]) @ value
        A = eye + torch.diag(g1) @ w[b + "attn.proj.weight"] @ value
        y = _fc2_input(cfg, w, b + "mlp", x)
        B = torch.linalg.lstsq(x, y).solution.T  # [H, D]: x B^T ~ y
        w2 = w[b + ("mlp.w3.weight" if cfg.mlp == "swiglu" else "mlp.fc2.weight")]
        M = eye + torch.diag(g2) @ w2 @ B @ _norm_map(w[b + "norm2.weight"])
        maps.append(M @ A)
    return maps


def defect_directions(cfg, w, samples, seed, top):
    """(directions [L, D], singular values [L, top]) as float64 tensors."""
    product = torch.eye(cfg.dim, dtype=torch.float64)
    directions, values = [], []
    for E in block_maps(cfg, w, samples, seed):
        product = E @ product
        U, S, _ = torch.linalg.svd(product)
        u = U[:, 0]
        if u[u.abs().argmax()] < 0:
            u = -u
        directions.append(u)
        values.append(S[:top])
    return torch.stack(directions), torch.stack(values)
