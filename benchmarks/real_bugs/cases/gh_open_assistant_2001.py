"""Supervised fine-tuning of a causal LM on dialogues reports NaN losses now and then.

Source: https://github.com/LAION-AI/Open-Assistant/pull/2001 (merged 2023-03-07, commit
f2ed582a, "Fixes small error where nan losses could appear if whole input is masked"),
on model/model_training/losses.py and trainer_sft.py.
Root cause (as the fix established it): the SFT loss is a CrossEntropyLoss subclass
that keeps only the positions whose label mask is True (`input[mask]`, `target[mask]`)
and then takes the default mean.  The collator truncates every dialogue to max_length
and masks everything except the answer tokens; when a question alone fills max_length
the sample has no answer token left, and when every sample of a (2-sample) batch is like
that the mean is taken over zero elements: 0/0 = NaN.  The training loss of that step
and the evaluation loss (the mean of the per-batch losses) become NaN.  The gradient of
an empty mean is zero, so the weights themselves are not damaged; what breaks is the
loss the program reports.  The fix uses reduction="none" and divides the sum by the
number of kept tokens + 1e-8, which gives 0 for an empty batch.
Re-created: the loss class as it was before and after the fix; the collator's facts
(dialogue = question + answer + EOS, truncated to max_length, label mask True on the
answer tokens and False on the last position, targets = input_ids rolled by one);
a decoder-only causal LM; AdamW with the config's betas (0.9, 0.95) and eps 1e-8, no
weight decay, gradient norm clipped at 2.0; per-device batch 2 for training and for
evaluation, the evaluation loss averaged over batches as the Trainer does;
differs from the original: pythia-70m and the real datasets replaced by a 2-layer,
64-wide decoder trained from scratch on seeded dialogues (vocabulary 64; questions of
4-40 tokens, the answer copies the first 4 question tokens into a second range of the
vocabulary) with max_length 32 instead of 520, so that about a third of the dialogues
lose their whole answer to truncation; learning rate 1e-3 instead of 8e-6 (a model from
scratch), no warm-up, no gradient accumulation (32 in the config), 200 steps.
Fix: reduction="none" and loss.sum() / (n_kept + 1e-8).  Run fixed: FAILURELAB_FIX=1 or
parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_loss"
VOCAB, MAX_LENGTH, WIDTH, HEADS, LAYERS = 64, 32, 64, 4, 2
PAD, EOS, ANSWER_LEN, BATCH = 0, 1, 4, 2


class CrossEntropyLoss(nn.CrossEntropyLoss):
    """The SFT loss: cross-entropy over the positions the label mask keeps."""

    def __init__(self, fixed: bool):
        super().__init__(reduction="none" if fixed else "mean")
        self.fixed = fixed

    def forward(self, logits, target, mask):
        mask = mask.view(-1).bool()
        logits = logits.view(-1, logits.size(-1))[mask]
        target = target.view(-1)[mask]
        if self.fixed:
            return super().forward(logits, target).sum() / (target.numel() + 1e-8)  # FIX
        return super().forward(logits, target)  # BUG: mean over 0 kept tokens = 0/0 = NaN


def dialogues(seed: int, n: int):
    """Question tokens in [2, 34), answer = first 4 question tokens + 30, then EOS."""
    g = generator(seed)
    samples = []
    for _ in range(n):
        length = int(torch.randint(4, 41, (1,), generator=g))
        question = torch.randint(2, 34, (length,), generator=g)
        answer = question[:ANSWER_LEN] + 30
        samples.append((question, answer))
    return samples


def collate(samples):
    """Truncate to MAX_LENGTH, mask all but the answer, pad, targets = roll(ids, -1)."""
    ids, masks = [], []
    for question, answer in samples:
        tokens = torch.cat([question, answer, torch.tensor([EOS])])[:MAX_LENGTH]
        in_answer = torch.zeros(len(tokens), dtype=torch.bool)
        in_answer[len(question):len(question) + ANSWER_LEN] = True
        in_answer[-1] = False  # the last token is never active
        ids.append(tokens)
        masks.append(in_answer)
    dim = max(len(t) for t in ids)
    input_ids = torch.full((len(ids), dim), PAD)
    label_masks = torch.zeros(len(ids), dim, dtype=torch.bool)
    attention_mask = torch.zeros(len(ids), dim, dtype=torch.long)
    for i, (t, m) in enumerate(zip(ids, masks, strict=True)):
        input_ids[i, :len(t)], label_masks[i, :len(m)], attention_mask[i, :len(t)] = t, m, 1
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "label_masks": label_masks, "targets": torch.roll(input_ids, -1, -1)}


class CausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Embedding(MAX_LENGTH, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, 4 * WIDTH, dropout=0.0,
                                           batch_first=True)
        self.decoder = nn.TransformerEncoder(layer, LAYERS)
        self.lm_head = nn.Linear(WIDTH, VOCAB)

    def forward(self, input_ids, attention_mask=None):
        n = input_ids.shape[1]
        h = self.embed(input_ids) + self.position(torch.arange(n))
        causal = nn.Transformer.generate_square_subsequent_mask(n)
        padding = None if attention_mask is None else attention_mask == 0
        return self.lm_head(self.decoder(h, mask=causal, is_causal=True,
                                         src_key_padding_mask=padding))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    samples = dialogues(seed, 2 * STEPS + 100)
    batches = [collate(samples[i:i + BATCH]) for i in range(0, 2 * STEPS, BATCH)]
    val_batches = [collate(samples[i:i + BATCH]) for i in range(2 * STEPS, len(samples), BATCH)]
    loss_fct = CrossEntropyLoss(fixed)

    def step(model, optimizer, batch):  # the Trainer's compute_loss, backward, clip, step
        logits = model(batch["input_ids"], attention_mask=batch["attention_mask"])
        loss = loss_fct(logits, batch["targets"], mask=batch["label_masks"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return dict(model=CausalLM,
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3,
                                                      betas=(0.9, 0.95), eps=1e-8,
                                                      weight_decay=0.0),
                batches=batches, step=step, loss=None, val_batches=val_batches,
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """The Trainer's evaluation loss: the program's own loss, averaged over the batches."""
    loss_fct = CrossEntropyLoss(fixed)
    model.eval()
    with torch.no_grad():
        losses = [float(loss_fct(model(b["input_ids"], attention_mask=b["attention_mask"]),
                                 b["targets"], mask=b["label_masks"])) for b in val_batches]
    model.train()
    return {"val_loss": sum(losses) / len(losses)}
