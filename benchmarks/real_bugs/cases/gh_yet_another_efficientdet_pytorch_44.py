"""An EfficientDet's training loss grows after some epochs and its test boxes stay poor.

Source: https://github.com/zylo117/Yet-Another-EfficientDet-Pytorch/issues/44 (2020-04-13);
the maintainer answered the next day that the loss function had a bug and fixed it in commit
8e69527 ("fix loss function", 2020-04-14), with a readme note apologising for it.
Root cause (as the maintainer and the fix established it): the anchors are stored as
(y1, x1, y2, x2), but FocalLoss read them as (x1, y1, x2, y2) when it built the regression
targets: the anchor "width" was its height, its "centre x" its centre y.  The targets the
box head is trained on are measured from a transposed anchor, while BBoxTransform decodes the
head's output against the true anchor, so the trained offsets put boxes in the wrong place,
and for anchors off the image diagonal the targets are large, so the regression loss is big.
The fix reads the anchor as (y1, x1, y2, x2).
Re-created: the repository's anchor layout (anchor_scale 4, scales 2^0, 2^(1/3), 2^(2/3),
ratios (1, 1), (1.4, 0.7), (0.7, 1.4), 9 anchors per location, strides 8 and 16), its focal
loss written out (clamp 1e-4, IoU >= 0.5 positive, < 0.4 negative, the rest ignored, alpha 0.25,
gamma 2, classification summed over anchors / number of positives, smooth L1 with beta 1/9 on
(dy, dx, dh, dw) of the positive anchors, cls + reg), the decode of BBoxTransform; the tutorial
project it published the same day (shapes: rectangles and circles, 2 classes), images normalised
with the ImageNet mean/std, AdamW at the tutorial command's lr 1e-3, batch 12 (train.py's
default; the tutorial used 32, too slow here);
differs from the original: EfficientDet-D0 (EfficientNet + BiFPN, 512 px, 5 levels) replaced
by a four-conv backbone (16-32-64-64 channels, stride 2 each) on seeded 64 x 64 shape images
with two pyramid levels and shared two-conv heads of 32 channels, trained from scratch (the
tutorial fine-tuned the heads of pretrained weights); one object per image; the evaluation
is the top-scoring detection per image, counted right when its class matches and its box
has IoU >= 0.5 with the truth (an AP50-style hit rate), where the repository runs NMS and
COCO AP; 200 steps.
Fix: anchor_widths = anchor[:, 3] - anchor[:, 1] etc. (y1, x1, y2, x2 order).
Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import itertools
import math
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
SIDE, CLASSES = 64, 2
STRIDES = (8, 16)
SCALES = (2 ** 0, 2 ** (1 / 3), 2 ** (2 / 3))
RATIOS = ((1.0, 1.0), (1.4, 0.7), (0.7, 1.4))
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


def shapes(seed: int, n: int):
    """Seeded 64 x 64 images each holding one filled rectangle (class 0) or circle (class 1)
    on a noisy background; annotations (n, 1, 5) as x1, y1, x2, y2, class."""
    g = generator(seed)
    imgs = 0.4 + 0.1 * torch.randn(n, 3, SIDE, SIDE, generator=g)
    ann = torch.zeros(n, 1, 5)
    yy, xx = torch.meshgrid(torch.arange(SIDE).float(), torch.arange(SIDE).float(), indexing="ij")
    for i in range(n):
        w, h = (16 + 28 * torch.rand(2, generator=g)).tolist()
        x1 = float(torch.rand(1, generator=g)) * (SIDE - w)
        y1 = float(torch.rand(1, generator=g)) * (SIDE - h)
        cls = int(torch.randint(CLASSES, (1,), generator=g))
        colour = 0.3 + 0.7 * torch.rand(3, 1, generator=g)
        if cls == 0:
            inside = (xx >= x1) & (xx < x1 + w) & (yy >= y1) & (yy < y1 + h)
        else:
            cx, cy = x1 + w / 2, y1 + h / 2
            inside = ((xx - cx) / (w / 2)) ** 2 + ((yy - cy) / (h / 2)) ** 2 <= 1
        imgs[i][:, inside] = colour
        ann[i, 0] = torch.tensor([x1, y1, x1 + w, y1 + h, cls])
    return (imgs.clamp(0, 1) - MEAN) / STD, ann


def make_anchors() -> torch.Tensor:
    """(anchors, 4) in (y1, x1, y2, x2), location-major then (scale, ratio), as Anchors does."""
    levels = []
    for stride in STRIDES:
        per = []
        for scale, ratio in itertools.product(SCALES, RATIOS):
            base = 4.0 * stride * scale
            half_x, half_y = base * ratio[0] / 2, base * ratio[1] / 2
            centres = torch.arange(stride / 2, SIDE, stride)
            yv, xv = torch.meshgrid(centres, centres, indexing="ij")
            xv, yv = xv.reshape(-1), yv.reshape(-1)
            per.append(torch.stack([yv - half_y, xv - half_x, yv + half_y, xv + half_x], 1))
        levels.append(torch.stack(per, 1).reshape(-1, 4))
    return torch.cat(levels)


ANCHORS = make_anchors()
A = len(SCALES) * len(RATIOS)


class TinyDet(nn.Module):
    def __init__(self):
        super().__init__()

        def conv(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, 2, 1), nn.BatchNorm2d(cout), nn.ReLU())
        self.stem = nn.Sequential(conv(3, 16), conv(16, 32), conv(32, 64))  # stride 8
        self.down = conv(64, 64)  # stride 16
        self.regressor = nn.Sequential(nn.Conv2d(64, 32, 3, padding=1), nn.ReLU(),
                                       nn.Conv2d(32, A * 4, 3, padding=1))
        self.classifier = nn.Sequential(nn.Conv2d(64, 32, 3, padding=1), nn.ReLU(),
                                        nn.Conv2d(32, A * CLASSES, 3, padding=1))

    def forward(self, x):
        p3 = self.stem(x)
        feats = (p3, self.down(p3))
        regression = torch.cat([self.regressor(f).permute(0, 2, 3, 1).reshape(len(x), -1, 4)
                                for f in feats], 1)
        classification = torch.cat([self.classifier(f).permute(0, 2, 3, 1)
                                    .reshape(len(x), -1, CLASSES) for f in feats], 1)
        return regression, classification.sigmoid(), ANCHORS.unsqueeze(0)


def calc_iou(a, b):
    """a: anchors (y1, x1, y2, x2); b: boxes (x1, y1, x2, y2)."""
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    iw = (torch.min(a[:, 3:4], b[:, 2]) - torch.max(a[:, 1:2], b[:, 0])).clamp(min=0)
    ih = (torch.min(a[:, 2:3], b[:, 3]) - torch.max(a[:, 0:1], b[:, 1])).clamp(min=0)
    union = ((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])).unsqueeze(1) + area - iw * ih
    return iw * ih / union.clamp(min=1e-8)


class FocalLoss(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.fixed = fixed

    def forward(self, classifications, regressions, anchors, annotations):
        alpha, gamma = 0.25, 2.0
        anchor = anchors[0]
        if self.fixed:  # FIX: anchors are (y1, x1, y2, x2)
            anchor_widths = anchor[:, 3] - anchor[:, 1]
            anchor_heights = anchor[:, 2] - anchor[:, 0]
            anchor_ctr_x = anchor[:, 1] + 0.5 * anchor_widths
            anchor_ctr_y = anchor[:, 0] + 0.5 * anchor_heights
        else:  # BUG: anchors read as (x1, y1, x2, y2)
            anchor_widths = anchor[:, 2] - anchor[:, 0]
            anchor_heights = anchor[:, 3] - anchor[:, 1]
            anchor_ctr_x = anchor[:, 0] + 0.5 * anchor_widths
            anchor_ctr_y = anchor[:, 1] + 0.5 * anchor_heights
        cls_losses, reg_losses = [], []
        for j in range(classifications.shape[0]):
            classification = classifications[j].clamp(1e-4, 1 - 1e-4)
            regression = regressions[j]
            boxes = annotations[j]
            iou = calc_iou(anchor, boxes[:, :4])
            iou_max, iou_argmax = iou.max(dim=1)
            targets = -torch.ones_like(classification)
            targets[iou_max < 0.4] = 0
            positive = iou_max >= 0.5
            num_positive = positive.sum()
            assigned = boxes[iou_argmax]
            targets[positive] = 0
            targets[positive, assigned[positive, 4].long()] = 1
            alpha_factor = torch.where(targets == 1, alpha, 1 - alpha)
            focal_weight = torch.where(targets == 1, 1 - classification, classification)
            focal_weight = alpha_factor * focal_weight ** gamma
            bce = -(targets * classification.log() + (1 - targets) * (1 - classification).log())
            cls_loss = torch.where(targets != -1, focal_weight * bce, torch.zeros_like(bce))
            cls_losses.append(cls_loss.sum() / num_positive.float().clamp(min=1))
            if num_positive > 0:
                gt = assigned[positive]
                gt_w = (gt[:, 2] - gt[:, 0]).clamp(min=1)
                gt_h = (gt[:, 3] - gt[:, 1]).clamp(min=1)
                gt_cx = gt[:, 0] + 0.5 * (gt[:, 2] - gt[:, 0])
                gt_cy = gt[:, 1] + 0.5 * (gt[:, 3] - gt[:, 1])
                aw, ah = anchor_widths[positive], anchor_heights[positive]
                reg_targets = torch.stack([(gt_cy - anchor_ctr_y[positive]) / ah,
                                           (gt_cx - anchor_ctr_x[positive]) / aw,
                                           torch.log(gt_h / ah), torch.log(gt_w / aw)], 1)
                diff = (reg_targets - regression[positive]).abs()
                reg_losses.append(torch.where(diff <= 1 / 9, 4.5 * diff ** 2, diff - 0.5 / 9).mean())
            else:
                reg_losses.append(regression.sum() * 0)
        return torch.stack(cls_losses).mean(), torch.stack(reg_losses).mean()


def decode(anchors, regression):
    """BBoxTransform: (dy, dx, dh, dw) against (y1, x1, y2, x2) anchors -> (x1, y1, x2, y2)."""
    cy = (anchors[..., 0] + anchors[..., 2]) / 2
    cx = (anchors[..., 1] + anchors[..., 3]) / 2
    ha = anchors[..., 2] - anchors[..., 0]
    wa = anchors[..., 3] - anchors[..., 1]
    w, h = regression[..., 3].exp() * wa, regression[..., 2].exp() * ha
    y, x = regression[..., 0] * ha + cy, regression[..., 1] * wa + cx
    return torch.stack([x - w / 2, y - h / 2, x + w / 2, y + h / 2], -1).clamp(0, SIDE - 1)


class ModelWithLoss(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.model = TinyDet()
        self.criterion = FocalLoss(fixed)

    def forward(self, imgs, annotations=None):
        regression, classification, anchors = self.model(imgs)
        if annotations is None:
            return regression, classification, anchors
        return self.criterion(classification, regression, anchors, annotations)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, ann = shapes(seed, 768)

    def step(model, optimizer, batch):
        imgs, annot = batch
        optimizer.zero_grad()
        cls_loss, reg_loss = model(imgs, annot)
        loss = cls_loss + reg_loss
        if loss == 0 or not torch.isfinite(loss):
            return loss
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: ModelWithLoss(fixed),
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
                batches=batched(x[:512], ann[:512], 12), step=step, loss=None,
                val_batches=batched(x[512:], ann[512:], 128), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """AP50-style hit rate: the top-scoring detection of each image is right when its class
    matches and its decoded box overlaps the true box with IoU >= 0.5."""
    was = model.training
    model.eval()
    hits = total = 0
    with torch.no_grad():
        for imgs, annot in val_batches:
            regression, classification, anchors = model(imgs)
            boxes = decode(anchors, regression)
            score, cls = classification.max(2)
            best = score.argmax(1)
            rows = torch.arange(len(imgs))
            pred, gt = boxes[rows, best], annot[:, 0]
            iw = (torch.min(pred[:, 2], gt[:, 2]) - torch.max(pred[:, 0], gt[:, 0])).clamp(min=0)
            ih = (torch.min(pred[:, 3], gt[:, 3]) - torch.max(pred[:, 1], gt[:, 1])).clamp(min=0)
            union = ((pred[:, 2] - pred[:, 0]) * (pred[:, 3] - pred[:, 1])
                     + (gt[:, 2] - gt[:, 0]) * (gt[:, 3] - gt[:, 1]) - iw * ih)
            iou = iw * ih / union.clamp(min=1e-8)
            hits += int(((iou >= 0.5) & (cls[rows, best] == gt[:, 4].long())).sum())
            total += len(imgs)
    model.train(was)
    return {"val_acc": hits / total if total else math.nan}
