"""Fine-tuning torchMoji's output layer: the loss never moves (outputs.data cut the graph, loss re-wrapped).

Source: https://github.com/huggingface/torchMoji/issues/21 (2019-01-28; the cause found in
the thread by a second user on 2019-07-18, confirmed by a third on 2019-07-23).
Root cause (as the thread established it): examples/finetune_youtube_last stalled at the
same validation accuracy and loss every epoch (62.54 %, 0.67718). TorchMoji.forward
ends with `if return_tensor: outputs = outputs.data`, which detaches the output from the
graph whenever the input is a LongTensor; backward then failed ("element 0 of tensors
does not require grad"), and the reporter silenced it with
`loss = Variable(loss, requires_grad=True)`, a new leaf with no path to any weight, so
Adam never moved the output layer. Removing the `.data` lines made the loss improve
(the wrapper is then unnecessary).
Re-created: torchMoji's shape -- an embedding with tanh and embedding dropout, two
bidirectional LSTM layers, attention over the concatenation of both LSTM outputs and the
embedding, final dropout 0.5, a one-logit output layer; the 'last' method (every layer
frozen except output_layer), Adam lr 1e-3 over the trainable parameters,
BCEWithLogitsLoss for two classes, batch 32; validation accuracy;
differs from the original: the pretrained DeepMoji weights and SS-Youtube replaced by a
randomly initialised frozen encoder (vocabulary 1000, embedding 32, LSTMs of 32 units
per direction instead of 256 and 512) on seeded token sequences of length 24 whose label
is decided by counts of 'positive' and 'negative' tokens (62 % positive, like
SS-Youtube's majority); 200 steps.
Fix: return the outputs without `.data`, so the loss needs no wrapper.  Run fixed:
FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.autograd import Variable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
VOCAB, LENGTH, EMBED, HIDDEN = 1000, 24, 32, 32


def sentences(seed: int, n: int):
    """Seeded token sequences; tokens 1-20 are 'positive', 21-40 'negative'."""
    g = generator(seed)
    x = torch.randint(41, VOCAB, (n, LENGTH), generator=g)
    pos = torch.randint(0, 4, (n,), generator=g)
    neg = torch.randint(0, 4, (n,), generator=g)
    for i in range(n):
        slots = torch.randperm(LENGTH, generator=g)[:int(pos[i] + neg[i])]
        x[i, slots[:pos[i]]] = torch.randint(1, 21, (int(pos[i]),), generator=g)
        x[i, slots[pos[i]:]] = torch.randint(21, 41, (int(neg[i]),), generator=g)
    y = (pos + 0.3 * torch.randn(n, generator=g) > neg - 0.35).float()
    return x, y


class Attention(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.attention_vector = nn.Parameter(torch.empty(size).uniform_(-0.05, 0.05))

    def forward(self, inputs):
        weights = torch.softmax(inputs @ self.attention_vector, dim=1)
        return (inputs * weights.unsqueeze(-1)).sum(dim=1)


class TorchMoji(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.fixed = fixed
        attention_size = 4 * HIDDEN + EMBED
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.embed_dropout = nn.Dropout(0.1)
        self.lstm_0 = nn.LSTM(EMBED, HIDDEN, batch_first=True, bidirectional=True)
        self.lstm_1 = nn.LSTM(2 * HIDDEN, HIDDEN, batch_first=True, bidirectional=True)
        self.attention_layer = Attention(attention_size)
        self.final_dropout = nn.Dropout(0.5)
        self.output_layer = nn.Sequential(nn.Linear(attention_size, 1))

    def forward(self, input_seqs):
        return_tensor = isinstance(input_seqs, torch.LongTensor)
        x = self.embed_dropout(torch.tanh(self.embed(input_seqs)))
        lstm_0_output, _ = self.lstm_0(x)
        lstm_1_output, _ = self.lstm_1(lstm_0_output)
        x = torch.cat((lstm_1_output, lstm_0_output, x), dim=2)
        x = self.final_dropout(self.attention_layer(x))
        outputs = self.output_layer(x).squeeze(-1)
        if return_tensor and not self.fixed:
            outputs = outputs.data  # BUG: detaches the output from the graph
        return outputs  # FIX: return the outputs themselves


def freeze_layers(model, unfrozen_keyword="output_layer"):
    for name, param in model.named_parameters():
        param.requires_grad = unfrozen_keyword in name
    return model


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = sentences(seed, 2400)
    loss_op = nn.BCEWithLogitsLoss()

    def step(model, adam, batch):
        X, y_ = batch
        adam.zero_grad()
        output = model(X)
        loss = loss_op(output, y_)
        if not fixed:
            loss = Variable(loss, requires_grad=True)  # BUG: the reporter's workaround
        loss.backward()  # FIX: with the graph intact no wrapper is needed
        adam.step()
        return loss

    return dict(model=lambda: freeze_layers(TorchMoji(fixed)),
                optimizer=lambda m: torch.optim.Adam(
                    (p for p in m.parameters() if p.requires_grad), lr=1e-3),
                batches=batched(x[:1920], y[:1920], 32), step=step, loss=loss_op,
                val_batches=batched(x[1920:], y[1920:], 32), steps=STEPS, seed=seed)


@evaluating
def measure(model, val_batches, fixed: bool) -> dict:
    """Validation accuracy of the sign of the logit."""
    right = total = 0
    for X, y_ in val_batches:
        right += int(((model(X) > 0).float() == y_).sum())
        total += len(y_)
    return {"val_acc": right / total}
