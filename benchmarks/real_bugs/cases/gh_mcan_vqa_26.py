"""Control: "net.train() is not called again after evaluation" -- the evaluation used a separate network.

Source: https://github.com/MILVLG/mcan-vqa/issues/26 (2020-09-24).
What the thread established: nothing is wrong with training.  The reporter saw
`net.train()` only before the epoch loop and an evaluation after every epoch, and
suspected the dropout layers stayed off for the rest of training; the maintainers
replied that `eval()` builds a NEW Net, calls `.eval()` on it and loads the training
net's state_dict into it, so the network being trained never leaves training mode.
The reporter: "Sorry, didn't notice this."
Healthy training: there is no fix to the training.
Re-created: core/exec.py's loop -- net.train() once, optim.zero_grad(), the net's sigmoid
answer scores under BCELoss(reduction='sum') against soft answer targets, optim.step();
Adam (betas 0.9/0.98, eps 1e-9) with the warm-up of its WarmupOptimizer (the base rate
scaled by 1/4, 2/4, 3/4 over the first three epochs); dropout 0.1; batch 64; after every
epoch an evaluation that builds a second network, puts it in eval mode, loads the
training net's state_dict and takes the argmax answer;
differs from the original: MCAN's co-attention layers over Faster R-CNN region features
and GloVe question embeddings replaced by a question-guided attention over 16 seeded
region features of width 32 (the net takes the pair (features, question ids) as
one input), a mean-pooled question embedding and an MLP fusion with
dropout; 50 answers; the VQA accuracy replaced by top-1 accuracy; an epoch is 25 steps
and the run is 300 steps; base rate 1e-3 instead of 1e-4, so that
the from-scratch stand-in learns within the run (MCAN starts from pretrained features).
Fix: none (a healthy report).  FAILURELAB_FIX adds the net.train() the reporter asked
for after each evaluation, which changes nothing.
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
EPOCH_STEPS = 25
HARM_METRIC = "val_acc"
REGIONS, WIDTH, TOKENS, VOCAB, ANSWERS, HIDDEN = 16, 32, 8, 100, 50, 64
BASE_LR = 1e-3


def vqa(seed: int, n: int):
    """Questions ask about one of 4 regions' content; the answer depends on both."""
    g = generator(seed)
    codebook = torch.randn(ANSWERS, WIDTH, generator=g)
    answers = torch.randint(ANSWERS, (n,), generator=g)
    slot = torch.randint(4, (n,), generator=g)
    images = 0.5 * torch.randn(n, REGIONS, WIDTH, generator=g)
    images[torch.arange(n), slot] += codebook[answers]
    questions = torch.randint(4, VOCAB, (n, TOKENS), generator=g)
    questions[:, 0] = slot  # the word that says where to look
    soft = F.one_hot(answers, ANSWERS).float() * 0.9  # VQA soft scores (0.9 for the answer)
    return images, questions, soft, answers


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.img = nn.Linear(WIDTH, HIDDEN)
        self.att = nn.Linear(HIDDEN, HIDDEN)
        self.fuse = nn.Sequential(nn.Linear(2 * HIDDEN, HIDDEN), nn.ReLU(), nn.Dropout(0.1),
                                  nn.Linear(HIDDEN, ANSWERS))

    def forward(self, inputs):
        img_feat, ques_ix = inputs
        q = self.embed(ques_ix).mean(1)
        v = self.img(img_feat)
        weights = torch.softmax((v * self.att(q).unsqueeze(1)).sum(-1), dim=1)
        pooled = (weights.unsqueeze(-1) * v).sum(1)
        return torch.sigmoid(self.fuse(torch.cat([q, pooled], -1)))


def warmup_rate(step: int) -> float:
    """WarmupOptimizer: 1/4, 2/4, 3/4 of the base rate over the first three epochs."""
    epoch = step // EPOCH_STEPS
    return BASE_LR * (epoch + 1) / 4 if epoch < 3 else BASE_LR


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    images, questions, soft, answers = vqa(seed, 1600 + 400)
    train = [((images[i:i + 64], questions[i:i + 64]), soft[i:i + 64])
             for i in range(0, 1600, 64)]
    val = [((images[i:i + 200], questions[i:i + 200]), soft[i:i + 200])
           for i in range(1600, 2000, 200)]
    loss_fn = nn.BCELoss(reduction="sum")
    state = {"step": 0, "val_acc": []}


    def step(net, optim, batch):
        (img_feat_iter, ques_ix_iter), ans_iter = batch
        for group in optim.param_groups:
            group["lr"] = warmup_rate(state["step"])
        optim.zero_grad()
        pred = net((img_feat_iter, ques_ix_iter))
        loss = loss_fn(pred, ans_iter)
        loss.backward()
        optim.step()
        state["step"] += 1
        if state["step"] % EPOCH_STEPS == 0:  # eval after every epoch
            state["val_acc"].append(evaluate(net.state_dict(), val))
            if fixed:
                net.train()  # the reporter's suggestion: a no-op, the net never left train mode
        return loss

    def make_model():
        net = Net()
        net.train()
        return net

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=BASE_LR / 4,
                                                     betas=(0.9, 0.98), eps=1e-9),
                batches=train, step=step, loss=loss_fn, val_batches=val,
                steps=STEPS, seed=seed)


def evaluate(state_dict, val_batches) -> float:
    """Execution.eval: a separate net, in eval mode, loaded with the weights; top-1."""
    net = Net()
    net.eval()
    net.load_state_dict(state_dict)
    with torch.no_grad():
        right = sum(int((net(x).argmax(1) == y.argmax(1)).sum()) for x, y in val_batches)
    return right / sum(len(y) for _, y in val_batches)


def measure(net, val_batches, fixed: bool) -> dict:
    return {"val_acc": evaluate(net.state_dict(), val_batches)}
