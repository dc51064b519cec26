"""A detector trained on one GPU (batch 2) with the 8-GPU learning rate 0.02 goes NaN.

Source: https://github.com/facebookresearch/maskrcnn-benchmark/issues/295 (2018-12-20).
Root cause (as the maintainer answered): "the learning rate is too large and training
diverges ... you've kept the original learning rate (0.02) but for a single GPU (batch
size 2)"; the README's single-GPU recipe scales it linearly to 0.0025.
Re-created: a small convolutional detector for one object per image (class logits + box
regression, cross-entropy + smooth L1), SGD momentum 0.9, weight decay 1e-4, batch 2,
inputs mean-subtracted but not divided by a std (the library's PIXEL_STD = 1 for
Caffe2 weights, so pixel values span about +-128);
differs from the original: R-50-FPN Mask R-CNN on COCO replaced by a 3-layer CNN on seeded
32x32 images of 3 object classes, no warm-up, 200 steps.
Fix: lr 0.0025 (0.02 x 2 / 16).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                                      nn.Conv2d(32, 32, 3, 2, 1), nn.ReLU(), nn.Flatten())
        self.cls_score = nn.Linear(32 * 16, 3)
        self.bbox_pred = nn.Linear(32 * 16, 4)

    def forward(self, images):
        feats = self.backbone(images)
        return self.cls_score(feats), self.bbox_pred(feats)


def data(seed: int, n: int):
    g = generator(seed)
    colours = 255 * torch.rand(3, 3, generator=g)
    cls = torch.randint(3, (n,), generator=g)
    xy = torch.randint(2, 18, (n, 2), generator=g)
    wh = torch.randint(6, 13, (n, 2), generator=g)
    img = 255 * torch.rand(n, 3, 32, 32, generator=g) * 0.3
    for i in range(n):
        x0, y0, w, h = int(xy[i, 0]), int(xy[i, 1]), int(wh[i, 0]), int(wh[i, 1])
        img[i, :, y0:y0 + h, x0:x0 + w] = colours[cls[i]][:, None, None]
    img = img - img.mean((0, 2, 3), keepdim=True)  # PIXEL_MEAN subtracted, PIXEL_STD = 1
    boxes = torch.cat([xy, wh], 1).float() / 32  # box targets encoded relative to the image
    return img, torch.cat([cls[:, None].float(), boxes], 1)


def loss_fn(output, target):
    logits, box = output
    return F.cross_entropy(logits, target[:, 0].long()) + F.smooth_l1_loss(box, target[:, 1:])


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 800)
    Xt, yt, Xv, yv = split(X, y, 200)
    base_lr = 0.0025 if fixed else 0.02  # BUG: 0.02 is for 16 images a batch  # FIX: 0.02 x 2/16

    def step(model, optimizer, batch):
        images, targets = batch
        losses = loss_fn(model(images), targets)
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        return losses

    return dict(model=Detector,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=base_lr, momentum=0.9,
                                                    weight_decay=1e-4),
                batches=batched(Xt, yt, 2), step=step, loss=loss_fn,
                val_batches=batched(Xv, yv, 100), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    cls_batches = [(x, t[:, 0].long()) for x, t in val_batches]
    return {"val_acc": accuracy(model, cls_batches, lambda out: out.argmax(1))}
