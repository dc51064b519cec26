"""A 3D detector's total loss does not fall: only its score term is backpropagated.

Source: https://github.com/tom-roddick/oft/issues/6 (2019-11-27; answered 2020-02-20 and
fixed in commit 04f7383, "Fix bug where validation loss does not decrease").
Root cause (as the author established it): `compute_loss` in train.py sums four Huber
losses (score heatmap, position, dimension and angle offsets, the last three masked to
the cells that hold an object) into `total_loss`, logs each of them and the total, and
then a line left over from a test, `total_loss = score_loss`, replaces the sum before it
is returned: only the score is optimised, so the position, dimension and angle outputs
of the shared detection head never train and the logged total stays high.  The fix
deletes that line.
Re-created: the loop as train.py writes it (forward, `compute_loss`, a NaN check,
`zero_grad`, `backward`, `step`), SGD with momentum 0.9 and weight decay 1e-4, batch 1,
summed (not averaged) Huber losses, one 3x3 convolution producing all 9 channels per grid
cell (1 score, 3 position, 3 dimension, 2 angle) split into four outputs, as OftNet's
head does.
Differs from the original: no camera image, ResNet front end or orthographic transform:
the input is already a 16 x 16 top-down feature grid of 9 channels, noisy cues of each
cell's targets, generated from the seed (two to five objects a scene, Gaussian score
blobs, offsets in [-0.5, 0.5], log-dimension offsets, sine and cosine of the heading),
so that a two-layer convolutional body can learn every head in seconds; lr 2e-3 instead
of 1e-7 (a 16 x 16 grid instead of 160 x 160 sums 100 times fewer cells); no
per-epoch ExponentialLR (200 steps are a fraction of one epoch); the recorded loss is
the one the loop backpropagates (`loss`, as a user attaching a Monitor would pass it),
while the logged total is the case's harm metric.
Fix: delete `total_loss = score_loss`.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn.functional import smooth_l1_loss

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import evaluating, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_loss"
GRID = 16


class TopDownDetector(nn.Module):
    """A convolutional body over the top-down grid and one head of 9 channels a cell."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(9, width, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(width, width, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(width, 9, 3, padding=1)

    def forward(self, grid):
        out = self.head(self.body(grid))
        return out[:, :1], out[:, 1:4], out[:, 4:7], out[:, 7:9]


def huber(pred, target, mask=None):
    loss = smooth_l1_loss(pred, target, reduction="none")
    return loss.sum() if mask is None else (loss * mask).sum()


def compute_loss(pred, truth, fixed: bool):
    score, pos, dim, ang = pred
    heatmap, gt_pos, gt_dim, gt_ang, mask = truth
    score_loss = huber(score, heatmap)
    pos_loss = huber(pos, gt_pos, mask)
    dim_loss = huber(dim, gt_dim, mask)
    ang_loss = huber(ang, gt_ang, mask)
    total_loss = score_loss + pos_loss + dim_loss + ang_loss
    logged = {"score": score_loss.item(), "position": pos_loss.item(),
              "dimension": dim_loss.item(), "angle": ang_loss.item(),
              "total": total_loss.item()}
    if not fixed:
        total_loss = score_loss  # BUG: a leftover test line: only the score is optimised
    # FIX: the line above deleted, the sum of all four terms is returned
    return total_loss, logged


def scene(g: torch.Generator):
    """One top-down grid: targets for every head, and noisy cues of them as input."""
    heatmap = torch.zeros(1, GRID, GRID)
    pos, dim, ang = torch.zeros(3, GRID, GRID), torch.zeros(3, GRID, GRID), \
        torch.zeros(2, GRID, GRID)
    mask = torch.zeros(1, GRID, GRID)
    rows = torch.arange(GRID).float()
    for _ in range(int(torch.randint(2, 6, (1,), generator=g))):
        i, j = (int(v) for v in torch.randint(1, GRID - 1, (2,), generator=g))
        blob = torch.exp(-((rows[:, None] - i) ** 2 + (rows[None, :] - j) ** 2) / 2)
        heatmap[0] = torch.maximum(heatmap[0], blob)
        mask[0, i, j] = 1
        pos[:, i, j] = torch.rand(3, generator=g) - 0.5
        dim[:, i, j] = 0.3 * torch.randn(3, generator=g)
        heading = 2 * math.pi * float(torch.rand(1, generator=g))
        ang[:, i, j] = torch.tensor([math.sin(heading), math.cos(heading)])
    truth = (heatmap[None], pos[None], dim[None], ang[None], mask[None])
    clean = torch.cat([heatmap, pos, dim, ang])
    cues = clean + 0.2 * torch.randn(clean.shape, generator=g)
    return cues[None], truth


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    g = generator(seed)
    train = [scene(g) for _ in range(200)]
    val = [scene(g) for _ in range(40)]

    def step(model, optimizer, batch):
        grid, truth = batch
        pred = model(grid)
        loss, logged = compute_loss(pred, truth, fixed)
        if loss.item() != loss.item():
            raise RuntimeError("Loss diverged")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=TopDownDetector,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=2e-3, momentum=0.9,
                                                    weight_decay=1e-4),
                batches=train, step=step, loss=None,
                val_batches=val, steps=STEPS, seed=seed)


@evaluating
def measure(model, val_batches, fixed: bool) -> dict:
    """The validation pass's logged total (all four terms), averaged over the scenes."""
    totals = [compute_loss(model(grid), truth, True)[1]["total"] for grid, truth in val_batches]
    return {"val_loss": sum(totals) / len(totals)}
