"""Independent float64 PyTorch implementations of the metrics of `vitreg eval` (docs/design.md,
"Repairs and dense evaluation"), written from the published protocols, sharing no code with the
C++: mutual nearest neighbours and PCK@alpha, Hummingbird's dense k-NN segmentation (memory of
training patches, k nearest by cosine, votes softmax(cos / temperature)), a class-balanced ridge
linear probe, leave-one-out k-NN accuracy, and the mIoU they are scored by. Inputs are numpy
arrays of features (from any forward) and the geometry of each model input in its source image.
"""
import numpy as np
import torch

IGNORE = 255
MASK64 = (1 << 64) - 1


def unit(x):
    x = torch.as_tensor(np.asarray(x), dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-300)


def mutual_nearest_neighbours(a, b):
    """Pairs (i, j): j is a's row i's nearest row of b by cosine and i is j's nearest of a."""
    sim = unit(a) @ unit(b).T
    ab = sim.argmax(dim=1)
    ba = sim.argmax(dim=0)
    return [(i, int(ab[i])) for i in range(sim.shape[0]) if int(ba[ab[i]]) == i]


def patch_centre(geometry, patch, grid_w, p):
    """Patch p's centre in source pixels (pixel centres at integers)."""
    sw, sh = geometry["source"]
    rw, rh = geometry["resized"]
    cl, ct = geometry["crop"]
    x = ((p % grid_w) + 0.5) * patch + cl
    y = ((p // grid_w) + 0.5) * patch + ct
    return x * sw / rw - 0.5, y * sh / rh - 0.5


def homography_map(h):
    h = np.asarray(h, dtype=np.float64).reshape(3, 3)

    def f(x, y):
        v = h @ np.array([x, y, 1.0])
        return (v[0] / v[2], v[1] / v[2]) if abs(v[2]) > 1e-12 else None
    return f


def disparity_map(d):
    d = np.asarray(d, dtype=np.float64)

    def f(x, y):
        xi, yi = int(np.floor(x + 0.5)), int(np.floor(y + 0.5))
        if not (0 <= xi < d.shape[1] and 0 <= yi < d.shape[0]):
            return None
        v = d[yi, xi]
        return (x - v, y) if np.isfinite(v) and v > 0 else None
    return f


def pck(fa, ga, fb, gb, patch, truth, alphas):
    """fa, fb: [grid_h, grid_w, D] patch features; ga, gb: geometry dicts; truth(x, y) -> (x2, y2) | None.
    Returns (pck per alpha over the matches whose truth is known and inside view 2, matches, scored)."""
    gwa, gwb = fa.shape[1], fb.shape[1]
    pairs = mutual_nearest_neighbours(fa.reshape(-1, fa.shape[2]), fb.reshape(-1, fb.shape[2]))
    sw, sh = gb["source"]
    side = max(sw, sh)
    errors = []
    for i, j in pairs:
        x1, y1 = patch_centre(ga, patch, gwa, i)
        x2, y2 = patch_centre(gb, patch, gwb, j)
        t = truth(x1, y1)
        if t is None or not (-0.5 <= t[0] < sw - 0.5 and -0.5 <= t[1] < sh - 0.5):
            continue
        errors.append(np.hypot(x2 - t[0], y2 - t[1]))
    errors = np.array(errors)
    return [float((errors <= a * side).mean()) if len(errors) else 0.0 for a in alphas], len(pairs), len(errors)


def patch_labels(mask, geometry, patch, grid_h, grid_w):
    """Majority label per patch of the model input, the mask sampled at each input pixel's nearest
    source pixel; IGNORE does not vote; -1 where nothing voted."""
    sw, sh = geometry["source"]
    rw, rh = geometry["resized"]
    cl, ct = geometry["crop"]
    xs = np.minimum(sw - 1, np.floor((np.arange(grid_w * patch) + cl + 0.5) * sw / rw).astype(int))
    ys = np.minimum(sh - 1, np.floor((np.arange(grid_h * patch) + ct + 0.5) * sh / rh).astype(int))
    m = np.asarray(mask)[np.ix_(ys, xs)]
    out = np.full(grid_h * grid_w, -1)
    for r in range(grid_h):
        for c in range(grid_w):
            cell = m[r * patch:(r + 1) * patch, c * patch:(c + 1) * patch].ravel()
            cell = cell[cell != IGNORE]
            if len(cell):
                counts = np.bincount(cell, minlength=256)
                out[r * grid_w + c] = int(counts.argmax())
    return out


def miou(truth, pred, classes):
    truth, pred = np.asarray(truth), np.asarray(pred)
    keep = (truth >= 0) & (truth < classes)
    truth, pred = truth[keep], pred[keep]
    ious = []
    for k in range(classes):
        inter = np.sum((truth == k) & (pred == k))
        union = np.sum((truth == k) | (pred == k))
        ious.append(inter / union if union else float("nan"))
    present = [v for v in ious if not np.isnan(v)]
    return float(np.mean(present)) if present else 0.0, float(np.mean(truth == pred)), ious


def splitmix64_draw(n, take, state):
    """A partial Fisher-Yates shuffle of range(n), partner j + splitmix64() % (n - j); returns (indices, state)."""
    index = list(range(n))
    if take >= n:
        return index, state
    for j in range(take):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        k = j + z % (n - j)
        index[j], index[k] = index[k], index[j]
    return index[:take], state


def knn_vote(queries, memory, labels, classes, k, temperature, leave_one_out=False):
    """Each query's label: the k nearest memory rows by cosine vote softmax(cos / temperature)."""
    sim = unit(queries) @ unit(memory).T
    if leave_one_out:
        sim.fill_diagonal_(-float("inf"))
    k = min(k, memory.shape[0] - (1 if leave_one_out else 0))
    top, idx = sim.topk(k, dim=1)
    weights = torch.softmax(top / temperature, dim=1)
    onehot = torch.nn.functional.one_hot(torch.as_tensor(np.asarray(labels))[idx], classes).to(torch.float64)
    return (weights[:, :, None] * onehot).sum(dim=1).argmax(dim=1).numpy()


def hummingbird(train, test, classes, k=30, temperature=0.02, per_image=100, seed=0):
    """train, test: lists of (features [P, D], labels [P]); returns (mIoU, accuracy, memory size)."""
    memory, memory_labels, state = [], [], seed
    for f, l in train:
        labelled = np.nonzero((l >= 0) & (l < classes))[0]
        picks, state = splitmix64_draw(len(labelled), per_image, state)
        memory.append(f[labelled[picks]])
        memory_labels.append(l[labelled[picks]])
    memory, memory_labels = np.concatenate(memory), np.concatenate(memory_labels)
    q = np.concatenate([f[(l >= 0) & (l < classes)] for f, l in test])
    truth = np.concatenate([l[(l >= 0) & (l < classes)] for f, l in test])
    pred = knn_vote(q, memory, memory_labels, classes, k, temperature)
    m, acc, _ = miou(truth, pred, classes)
    return m, acc, len(memory_labels)


def linear_probe(train, test, classes, ridge=1.0):
    """Ridge regression onto one-hot labels on standardized features with a bias, every class
    weighted alike (rows scaled by sqrt(n / (classes seen * count))), argmax; returns (mIoU, accuracy)."""
    x = torch.as_tensor(np.concatenate([f[(l >= 0) & (l < classes)] for f, l in train]), dtype=torch.float64)
    y = torch.as_tensor(np.concatenate([l[(l >= 0) & (l < classes)] for f, l in train]))
    xt = torch.as_tensor(np.concatenate([f[(l >= 0) & (l < classes)] for f, l in test]), dtype=torch.float64)
    yt = np.concatenate([l[(l >= 0) & (l < classes)] for f, l in test])
    mean = x.mean(0)
    sd = ((x - mean) ** 2).mean(0).sqrt() + 1e-6
    design = lambda a: torch.cat([(a - mean) / sd, torch.ones(a.shape[0], 1, dtype=torch.float64)], 1)  # noqa: E731
    a, b = design(x), design(xt)
    count = torch.bincount(y, minlength=classes).to(torch.float64)
    w = torch.sqrt(a.shape[0] / ((count > 0).sum() * count[y]))
    a = a * w[:, None]
    target = torch.nn.functional.one_hot(y, classes).to(torch.float64) * w[:, None]
    dim = x.shape[1]
    gram = a.T @ a
    gram[:dim, :dim] += torch.eye(dim, dtype=torch.float64) * ridge * a.shape[0] / dim
    weights = torch.linalg.solve(gram, a.T @ target)
    pred = (b @ weights).argmax(1).numpy()
    m, acc, _ = miou(yt, pred, classes)
    return m, acc


def knn_accuracy(features, labels, classes, k=20, temperature=0.07):
    """Leave-one-out accuracy of similarity-weighted k-NN."""
    labels = np.asarray(labels)
    pred = knn_vote(np.asarray(features), np.asarray(features), labels, classes, k, temperature, leave_one_out=True)
    return float((pred == labels).mean()), pred
