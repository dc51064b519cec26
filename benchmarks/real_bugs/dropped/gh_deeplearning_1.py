"""TransFG (a ViT for fine-grained birds) trained from the repository: "loss does not decrease".

Source: https://github.com/KKKSQJ/DeepLearning/issues/1 (2022-05-28); the maintainer replied
"I found a bug in models/transfg.py. Now, I have fixed this bug. The model can be trained
normally" (2022-05-29); fix commit beff94e ("fix a bug", 2022-05-29).
Root cause (as the fix commit established it): the multi-head self-attention normalised its
scores with nn.Softmax(dim=1).  The scores have shape (batch, heads, query, key), so dim=1
is the HEAD axis: for every query/key pair the weights were shared out among the heads,
and no head's weights over the keys summed to one (each row sums to about L / heads), so
every attention output was an unnormalised sum over the tokens, and the part-selection
module, which multiplies the attention maps of all layers, ranked tokens by those sums.
The commit changes it to nn.Softmax(dim=-1) (over the keys).
Re-created: TransFG's model as the repository writes it -- patch embedding (Conv2d,
non-overlapping patches) with a cls token and learned position embeddings, pre-norm
blocks (LayerNorm eps 1e-6, q/k/v/out Linear attention, GELU MLP with xavier init and
dropout 0.1), the Part_Attention module (product of all layers' attention maps, the
most-attended token per head from the cls row) feeding a last "part" block and LayerNorm,
the part_head on the cls token, and the loss CrossEntropy + the repository's contrastive
loss (margin 0.4); SGD lr 0.03, momentum 0.9, weight decay 1e-4, WarmupCosine schedule
(warm-up 5% of the steps, as 500 of 10000), clip_grad_norm_ 1.0, batch 16 (the config's);
evaluation with model.eval();
differs from the original: ViT-B_16 (768 wide, 12 heads, 12 layers, 448x448 CUB-200 images,
ImageNet-21k weights) shrunk to 64 wide, 4 heads of 16, 3 blocks + the part block, on
seeded 3x32x32 images of 10 classes (a per-class colour layout plus noise, normalised with
the ImageNet mean/std) trained from scratch; 300 steps.  The repository's train.py at the
time also called optimizer.zero_grad() before optimizer.step() (introduced in 285eace on
2022-05-24, moved after step() in 8dfd4a6 on 2023-01-18); the thread and its fix name only
the softmax, so the step here has the later, correct order and the softmax is the one bug.
Fix: nn.Softmax(dim=-1).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import copy
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 300
BATCH = 16
HARM_METRIC = "val_acc"
CLASSES, SIDE, PATCH = 10, 32, 8
HIDDEN, HEADS, MLP_DIM, LAYERS = 64, 4, 128, 4
N_TRAIN, N_VAL = 640, 160
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def birds(seed: int, n: int):
    """Seeded 3x32x32 images: a coarse per-class colour layout, jittered, plus noise,
    in [0, 1] and then normalised as transforms.Normalize(ImageNet mean, std)."""
    g = generator(seed)
    layouts = torch.rand(CLASSES, 3, 4, 4, generator=g)
    y = torch.randint(CLASSES, (n,), generator=g)
    coarse = layouts[y] + 0.25 * torch.randn(n, 3, 4, 4, generator=g)
    x = F.interpolate(coarse, size=(SIDE, SIDE), mode="bilinear", align_corners=False)
    x = (x + 0.3 * torch.randn(n, 3, SIDE, SIDE, generator=g)).clamp(0, 1)
    return (x - MEAN) / STD, y


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        n_patches = (SIDE // PATCH) ** 2
        self.patch_embeddings = nn.Conv2d(3, HIDDEN, kernel_size=PATCH, stride=PATCH)
        self.position_embeddings = nn.Parameter(torch.zeros(1, n_patches + 1, HIDDEN))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, HIDDEN))
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        cls_tokens = self.cls_token.expand(x.shape[0], -1, -1)
        x = self.patch_embeddings(x).flatten(2).transpose(-1, -2)
        x = torch.cat((cls_tokens, x), dim=1)
        return self.dropout(x + self.position_embeddings)


class Attention(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.head_size = HIDDEN // HEADS
        self.query = nn.Linear(HIDDEN, HIDDEN)
        self.key = nn.Linear(HIDDEN, HIDDEN)
        self.value = nn.Linear(HIDDEN, HIDDEN)
        self.out = nn.Linear(HIDDEN, HIDDEN)
        if fixed:
            self.softmax = nn.Softmax(dim=-1)  # FIX: normalise over the keys
        else:
            self.softmax = nn.Softmax(dim=1)  # BUG: dim 1 of (B, heads, L, L) is the heads

    def split(self, x):  # B L C -> B heads L head_size
        return x.view(*x.shape[:-1], HEADS, self.head_size).permute(0, 2, 1, 3)

    def forward(self, x):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_size)
        probs = self.softmax(scores)
        context = (probs @ v).permute(0, 2, 1, 3).contiguous()
        return self.out(context.view(*context.shape[:-2], HIDDEN)), probs


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(HIDDEN, MLP_DIM)
        self.fc2 = nn.Linear(MLP_DIM, HIDDEN)
        self.dropout = nn.Dropout(0.1)
        for fc in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(fc.weight)
            nn.init.normal_(fc.bias, std=1e-6)

    def forward(self, x):
        return self.dropout(self.fc2(self.dropout(F.gelu(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.attention_norm = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.ffn_norm = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.ffn = MLP()
        self.attn = Attention(fixed)

    def forward(self, x):
        h, weights = self.attn(self.attention_norm(x))
        x = x + h
        return x + self.ffn(self.ffn_norm(x)), weights


def part_select(attn_weights):
    """Part_Attention: multiply the layers' attention maps, take the cls row, and pick
    the most-attended patch token for every head."""
    last_map = attn_weights[0]
    for weights in attn_weights[1:]:
        last_map = weights @ last_map
    return last_map[:, :, 0, 1:].max(2)[1]


class TransFG(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.embeddings = Embeddings()
        block = Block(fixed)
        self.layer = nn.ModuleList(copy.deepcopy(block) for _ in range(LAYERS - 1))
        self.part_layer = Block(fixed)
        self.part_norm = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.part_head = nn.Linear(HIDDEN, CLASSES)

    def encode(self, x):
        hidden = self.embeddings(x)
        attn_weights = []
        for layer in self.layer:
            hidden, weights = layer(hidden)
            attn_weights.append(weights)
        part_inx = part_select(attn_weights) + 1
        parts = torch.stack([hidden[i, part_inx[i]] for i in range(len(hidden))])
        part_states, _ = self.part_layer(torch.cat((hidden[:, :1], parts), dim=1))
        return self.part_norm(part_states)

    def forward(self, x, label=None):
        part_tokens = self.encode(x)
        part_logits = self.part_head(part_tokens[:, 0])
        if label is None:
            return part_logits
        loss = F.cross_entropy(part_logits, label) + contrastive_loss(part_tokens[:, 0], label)
        return loss, part_logits


def contrastive_loss(features, labels):
    features = F.normalize(features)
    cos = features @ features.t()
    same = (labels[:, None] == labels[None, :]).float()
    neg = (cos - 0.4).clamp(min=0)
    return ((1 - cos) * same + neg * (1 - same)).sum() / len(labels) ** 2


def make_optimizer(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
    warmup = STEPS // 20

    def warmup_cosine(step):
        if step < warmup:
            return step / max(1, warmup)
        progress = (step - warmup) / max(1, STEPS - warmup)
        return max(0.0, 0.5 * (1 + math.cos(math.pi * 2 * 0.5 * progress)))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = birds(seed, N_TRAIN + N_VAL)
    xt, yt, xv, yv = x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]
    g = generator(seed + 1)
    batches = []  # the DataLoader reshuffles every epoch
    while len(batches) < STEPS:
        order = torch.randperm(N_TRAIN, generator=g)
        batches += batched(xt[order], yt[order], BATCH)

    def step(model, optimizer, batch):
        images, labels = batch
        loss, logits = model(images, labels)
        loss = loss.mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()  # the harness steps the WarmupCosine scheduler next
        optimizer.zero_grad()
        return loss

    return dict(model=lambda: TransFG(fixed), optimizer=make_optimizer,
                batches=batches[:STEPS], step=step, loss=F.cross_entropy,
                val_batches=batched(xv, yv, BATCH), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """valid(): accuracy of argmax(part_logits) over the validation set, in eval mode."""
    return {"val_acc": accuracy(model, val_batches)}
