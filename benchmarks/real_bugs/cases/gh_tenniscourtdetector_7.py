"""A court-keypoint heatmap trainer never calls optimizer.zero_grad().

Source: https://github.com/yastrebksv/TennisCourtDetector/issues/7 (2024-02-27).
Root cause (as the issue pointed out and the author fixed): base_trainer.py runs
loss.backward() and optimizer.step() each batch with no optimizer.zero_grad(), so the
gradients of all earlier batches keep adding up.
Re-created: a small encoder-decoder that regresses keypoint heatmaps from court images,
MSE between predicted and target heatmaps, Adam lr 1e-3, batch 8;
differs from the original: the TrackNet-style network on 640x360 frames replaced by a
4-layer conv net on seeded 24x24 images with one Gaussian keypoint, 200 steps.
Fix: optimizer.zero_grad() before backward().  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator, mean_loss, split  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_loss"


def data(seed: int, n: int):
    g = generator(seed)
    pts = torch.randint(3, 21, (n, 2), generator=g).float()
    yy, xx = torch.meshgrid(torch.arange(24.), torch.arange(24.), indexing="ij")
    heat = torch.exp(-((yy - pts[:, :1, None]) ** 2 + (xx - pts[:, 1:, None]) ** 2) / 4)
    img = heat.unsqueeze(1) + 0.3 * torch.randn(n, 1, 24, 24, generator=g)
    return img, heat.unsqueeze(1)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 1000)
    Xt, yt, Xv, yv = split(X, y, 200)
    criterion = nn.MSELoss()

    def step(model, optimizer, batch):
        inp, gt_hm = batch
        out = model(inp)
        loss = criterion(out, gt_hm)
        if fixed:
            optimizer.zero_grad()  # FIX: clear the previous batch's gradients
        # BUG: no optimizer.zero_grad() anywhere in the loop
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                                            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                                            nn.Conv2d(16, 1, 3, padding=1)),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 8), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 100), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, nn.functional.mse_loss)}
