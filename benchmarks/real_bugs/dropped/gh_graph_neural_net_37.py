"""A graph-matching network's scores go through softmax before CrossEntropyLoss: matching learns slowly.

Source: https://github.com/mlelarge/graph_neural_net/pull/37 (2021-11-05), merged by the
author ("There was a softmax before a crossentropyloss... I removed the softmax"),
commit 62c6240 ("correcting a bug by removing softmax").
Root cause (as the pull request established it): for the quadratic assignment problem the
siamese network scores every vertex of one graph against every vertex of the other,
raw_scores of shape (n, n), and triplet_loss applied `torch.softmax(raw_scores, -1)`
before `nn.CrossEntropyLoss(reduction='sum')` against the identity matching, so the loss
applied a second (log-)softmax to probabilities: scores in [0, 1] can never make a
confident match (the loss cannot fall below log(1 + (n-1)/e)) and the gradient reaching
the scores is scaled down by the first softmax.
Re-created: pairs of Erdos-Renyi graphs (edge density 0.5) where the second is the first
with noise 0.1 (each vertex pair's edge redrawn with probability 0.1), vertex i of one
graph matched to vertex i of the other, a shared (siamese) node embedding, raw_scores =
embeddings of graph 1 times embeddings of graph 2 transposed, the loss summed over
vertices and divided by their number ('mean' reduction of triplet_loss), Adam;
per-vertex accuracy of the row argmax (accuracy_max);
differs from the original: 100-vertex graphs replaced by 40-vertex ones, the equivariant
GNN by a node embedding of each vertex's adjacency row (an MLP, then one round of
neighbour averaging) -- the same vertex order in both graphs lets it match without
equivariance; Adam lr 1e-3, batch 16 pairs, 200 steps (values ours).
Fix: no softmax before the loss.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import evaluating, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
N_VERTICES, DENSITY, NOISE, BATCH = 40, 0.5, 0.1, 16


def graph_pairs(seed: int, n_pairs: int):
    """(A1, A2): symmetric 0/1 adjacency matrices, A2 a noisy copy of A1."""
    g = generator(seed)

    def symmetric(prob):
        upper = (torch.rand(n_pairs, N_VERTICES, N_VERTICES, generator=g) < prob).float()
        upper = upper.triu(1)
        return upper + upper.transpose(1, 2)
    a1 = symmetric(DENSITY)
    redraw = symmetric(NOISE)
    a2 = torch.where(redraw.bool(), symmetric(DENSITY), a1)
    return a1, a2


class Siamese(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(N_VERTICES, 128), nn.ReLU(), nn.Linear(128, dim))
        self.mix = nn.Linear(dim, dim)

    def node_embedding(self, adjacency):
        h = self.embed(adjacency)
        return h + self.mix(adjacency @ h / N_VERTICES)

    def forward(self, pair):
        a1, a2 = pair
        return self.node_embedding(a1) @ self.node_embedding(a2).transpose(1, 2)


class triplet_loss(nn.Module):
    def __init__(self, fixed: bool, loss=nn.CrossEntropyLoss(reduction='sum')):
        super().__init__()
        self.fixed, self.loss = fixed, loss

    def forward(self, raw_scores, target_dummy=None):
        loss, total = 0, 0
        if self.fixed:
            outputs = raw_scores  # FIX: the raw scores are the logits
        else:
            outputs = torch.softmax(raw_scores, -1)  # BUG: softmax, then CrossEntropyLoss
        for out in outputs:
            n_vertices = out.shape[0]
            target = torch.arange(n_vertices)
            loss += self.loss(out, target)
            total += n_vertices
        return loss / total


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    a1, a2 = graph_pairs(seed, 64 * BATCH // 4 + 256)
    n_train = len(a1) - 256
    criterion = triplet_loss(fixed)

    def step(model, optimizer, batch):
        raw_scores = model(batch[0])
        loss = criterion(raw_scores, batch[1])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    def batches(lo, hi):
        return [((a1[i:i + BATCH], a2[i:i + BATCH]), torch.empty(0))
                for i in range(lo, hi, BATCH)]

    return dict(model=Siamese, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batches(0, n_train), step=step, loss=criterion,
                val_batches=batches(n_train, len(a1)), steps=STEPS, seed=seed)


@evaluating
def measure(model, val_batches, fixed: bool) -> dict:
    """accuracy_max: the share of vertices whose highest score is their own match."""
    right = total = 0
    for pair, _ in val_batches:
        preds = model(pair).argmax(-1)
        right += int((preds == torch.arange(N_VERTICES)).sum())
        total += preds.numel()
    return {"val_acc": right / total}
