"""Control: "Test ACC 0.0%?" -- a triplet network trains, its printed accuracy is floored.

Source: https://github.com/rxtan2/Learning-Similarity-Conditions/issues/4 (2019-09-30), on
main.py (commit 36d6151).
What the thread established: nothing is wrong with training.  The reporter saw "Test set:
Average loss: 0.0767, Accuracy: 0.00%" and per-batch training accuracies of either 0.00%
or 100.00% while the triplet loss fell; the author asked whether the specified PyTorch
(0.1.12) was used, and the reporter found the cause in main.py's accuracy functions:
`(pred > 0).sum()*1.0/dista.size()[0]`.  Under 0.1.12 `.sum()` gave a Python number;
under the PyTorch the reporter ran it is an integer tensor, `*1.0` keeps it integer and
`/` floor-divides by the batch size, so a batch scores 0 unless every triplet in it is
right.  With the accuracy computed in floating point the same run printed 59.5% before
training and 73.6% after the first epoch.  The model and its updates are unchanged.
Healthy training: the fix changes only the printed numbers.
Re-created: main.py with the README's --learned flag -- an image embedding net (64-d)
inside ConditionalSimNet with 4 learned masks (init N(0.9, 0.7), ReLU), CS_Tripletnet's
concept branch (3 x 64 -> 32 -> 4, softmax) weighting the 4 masked, L2-normalised
embeddings, pairwise distances, MarginRankingLoss(margin 0.2) plus 5e-3 x embedding norm
/ sqrt(batch) and 5e-4 x mask norm / batch, Adam at 5e-5 x 0.985 (adjust_learning_rate
in epoch 1), batch 96, test batch 64; the training accuracy printed per batch as
train() computes it, floored;
differs from the original: the ImageNet-pretrained ResNet-18 on 112 x 112 Zappos shoes
replaced by a small MLP trained from scratch (3 x 8 x 8 -> 128, batch norm, ReLU -> 64;
a conv net ran ~50 s a run, as the code embeds every image once per concept) on seeded
images built from 4 attributes of 3 values each (one similarity notion per attribute);
3840 training and 960 validation triplets ("close" shares the
condition's attribute value with the anchor, "far" does not); 300 steps instead of 15
epochs of 100000 triplets; the old floor division is written `//` (today's `/` on an
integer tensor is true division).
Fix (to the printout only): float(...) around the count.  Run: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "control"
STEPS = 300
HARM_METRIC = "val_acc"
N_CONDITIONS, VALUES, SIDE, DIM_EMBED = 4, 3, 8, 64
N_TRAIN, N_VAL, BATCH, TEST_BATCH = 3840, 960, 96, 64
MARGIN, EMBED_LOSS, MASK_LOSS = 0.2, 5e-3, 5e-4


def triplets(n: int, patterns: torch.Tensor, g: torch.Generator):
    """(anchor, far, close, condition): close shares the anchor's value of attribute
    `condition`, far has another value of it; the other attributes are drawn freely."""
    c = torch.randint(N_CONDITIONS, (n,), generator=g)
    anchor = torch.randint(VALUES, (n, N_CONDITIONS), generator=g)
    close = torch.randint(VALUES, (n, N_CONDITIONS), generator=g)
    far = torch.randint(VALUES, (n, N_CONDITIONS), generator=g)
    rows = torch.arange(n)
    close[rows, c] = anchor[rows, c]
    far[rows, c] = (anchor[rows, c] + torch.randint(1, VALUES, (n,), generator=g)) % VALUES

    def render(attrs):
        img = sum(patterns[a, attrs[:, a]] for a in range(N_CONDITIONS))
        return img + 0.5 * torch.randn(n, 3, SIDE, SIDE, generator=g)
    return render(anchor), render(far), render(close), c


def data(seed: int):
    g = generator(seed)
    patterns = F.avg_pool2d(torch.randn(N_CONDITIONS, VALUES * 3, SIDE, SIDE, generator=g),
                            3, 1, 1).reshape(N_CONDITIONS, VALUES, 3, SIDE, SIDE)
    patterns = patterns / patterns.std()
    return triplets(N_TRAIN, patterns, g), triplets(N_VAL, patterns, g)


def batches_of(parts4, size):
    n = len(parts4[0])
    return [tuple(t[i:i + size] for t in parts4) for i in range(0, n, size)]


class EmbeddingNet(nn.Module):  # stands in for Resnet_18.resnet18(embedding_size=64)
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Flatten(), nn.Linear(3 * SIDE * SIDE, 128),
                                      nn.BatchNorm1d(128), nn.ReLU())
        self.fc = nn.Linear(128, DIM_EMBED)

    def forward(self, x):
        return self.fc(self.features(x))


class ConditionalSimNet(nn.Module):
    def __init__(self, embeddingnet, n_conditions, embedding_size):
        super().__init__()
        self.embeddingnet = embeddingnet
        self.masks = nn.Embedding(n_conditions, embedding_size)
        self.masks.weight.data.normal_(0.9, 0.7)  # learned masks (--learned)

    def forward(self, x, c):
        embedded_x = self.embeddingnet(x)
        mask = F.relu(self.masks(c))
        masked_embedding = embedded_x * mask
        norm = torch.norm(masked_embedding, p=2, dim=1, keepdim=True) + 1e-10
        masked_embedding = masked_embedding / norm.expand_as(masked_embedding)
        return masked_embedding, mask.norm(1), embedded_x.norm(2), masked_embedding.norm(2)


class CSTripletnet(nn.Module):
    def __init__(self, embeddingnet, num_concepts):
        super().__init__()
        self.embeddingnet = embeddingnet
        self.num_concepts = num_concepts
        self.concept_branch = nn.Sequential(nn.Linear(DIM_EMBED * 3, 32), nn.ReLU(),
                                            nn.Linear(32, num_concepts), nn.Softmax(dim=1))

    def forward(self, x, y, z, c):
        """x anchor, y distant (negative), z close (positive); c is not used by the
        model (the notions of similarity are learned without supervision)."""
        general = [self.embeddingnet.embeddingnet(t) for t in (x, y, z)]
        general = [e / (torch.norm(e, p=2, dim=1, keepdim=True) + 1e-10) for e in general]
        weights_xy = self.concept_branch(torch.cat(general, 1))
        embedded_x = embedded_y = embedded_z = mask_norm = 0
        for idx in range(self.num_concepts):
            concept_idx = torch.full((len(x),), idx, dtype=torch.long)
            ex, mask_norm_x, embed_norm_x, _ = self.embeddingnet(x, concept_idx)
            ey, _, embed_norm_y, _ = self.embeddingnet(y, concept_idx)
            ez, _, embed_norm_z, _ = self.embeddingnet(z, concept_idx)
            mask_norm = mask_norm + mask_norm_x
            weights = weights_xy[:, idx].unsqueeze(1)
            embedded_x = embedded_x + ex * weights.expand_as(ex)
            embedded_y = embedded_y + ey * weights.expand_as(ey)
            embedded_z = embedded_z + ez * weights.expand_as(ez)
        mask_norm = mask_norm / self.num_concepts
        embed_norm = (embed_norm_x + embed_norm_y + embed_norm_z) / 3
        dist_a = F.pairwise_distance(embedded_x, embedded_y, 2)
        dist_b = F.pairwise_distance(embedded_x, embedded_z, 2)
        return dist_a, dist_b, mask_norm, embed_norm


def make_model() -> nn.Module:
    return CSTripletnet(ConditionalSimNet(EmbeddingNet(), N_CONDITIONS, DIM_EMBED),
                        N_CONDITIONS)


criterion = nn.MarginRankingLoss(margin=MARGIN)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    train, val = data(seed)
    printed = []  # the per-batch "Acc:" of train()'s log

    def accuracy(dista, distb):
        pred = (dista - distb).detach()
        if fixed:
            return float((pred > 0).sum()) / dista.size()[0]  # FIX: count as a float
        return float((pred > 0).sum() * 1 // dista.size()[0])  # BUG: integer tensor, floored

    def step(tnet, optimizer, batch):
        data1, data2, data3, c = batch
        dista, distb, mask_norm, embed_norm = tnet(data1, data2, data3, c)
        target = torch.ones_like(dista)  # 1 means dista should be larger than distb
        loss_triplet = criterion(dista, distb, target)
        loss_embedd = embed_norm / data1.size(0) ** 0.5
        loss_mask = mask_norm / data1.size(0)
        loss = loss_triplet + EMBED_LOSS * loss_embedd + MASK_LOSS * loss_mask
        printed.append(accuracy(dista, distb))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(
                    [p for p in m.parameters() if p.requires_grad], lr=5e-5 * (1 - 0.015)),
                batches=batches_of(train, BATCH), step=step, loss=None,
                val_batches=batches_of(val, TEST_BATCH), steps=STEPS, seed=seed)


def measure(tnet, val_batches, fixed: bool) -> dict:
    """test(): the fraction of validation triplets with the far image farther, counted
    in floating point, and the triplet loss."""
    was = tnet.training
    tnet.eval()
    right = total = 0
    losses = []
    with torch.no_grad():
        for data1, data2, data3, c in val_batches:
            dista, distb, _, _ = tnet(data1, data2, data3, c)
            right += int((dista > distb).sum())
            total += len(dista)
            losses.append(float(criterion(dista, distb, torch.ones_like(dista))))
    tnet.train(was)
    return {"val_acc": right / total, "val_loss": sum(losses) / len(losses)}
