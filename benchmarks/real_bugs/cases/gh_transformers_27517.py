"""A causal LM whose loss compares each position with its own input token: it learns to copy.

Source: https://github.com/huggingface/transformers/issues/27517 (2023-11-15); the same
loss line in BartForCausalLM is issue #30105, and macrocosm-os/pretraining merged the
shifted loss for these models in PR #66 (2024-02-05: "the model is not trained to predict
the next token, but the current token").
Root cause (as the reports established it): MBartForCausalLM.forward computes
`CrossEntropyLoss()(logits.view(-1, V), labels.view(-1))` without shifting, while the
language-modeling tutorial's collator (DataCollatorForLanguageModeling, mlm=False) passes
labels = input_ids, as GPT-2/Llama expect (they shift inside).  Position t is scored on
token t, which it can see, so the loss falls to almost nothing and the model "copies the
input"; it never learns to predict the next token.  The fix shifts logits and labels
(`logits[:, :-1]` against `labels[:, 1:]`).
Re-created: a decoder-only transformer (token and position embeddings, causal
self-attention blocks, LM head), labels = input_ids as the collator gives them, the
model's own cross-entropy over the vocabulary, AdamW with weight decay 0.01, blocks of
fixed length; the harm yardstick is the next-token loss (shifted) on held-out blocks;
differs from the original: a pretrained mBART fine-tuned on ELI5 replaced by a 2-layer,
64-wide decoder trained from scratch on seeded token streams of a sparse Markov chain
(vocabulary 64, blocks of 32); learning rate 1e-3 instead of the tutorial's 2e-5 (a
from-scratch model), batch 16, 200 steps.
Fix: shift -- logits[:, :-1] against labels[:, 1:].  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_loss"
VOCAB, BLOCK, WIDTH, HEADS, LAYERS = 64, 32, 64, 4, 2


def token_stream(seed: int, n_blocks: int):
    """Blocks of a sparse Markov chain: each token has 3 likely successors."""
    g = generator(seed)
    successors = torch.randint(VOCAB, (VOCAB, 3), generator=g)
    blocks = torch.empty(n_blocks, BLOCK, dtype=torch.long)
    blocks[:, 0] = torch.randint(VOCAB, (n_blocks,), generator=g)
    for t in range(1, BLOCK):
        pick = torch.randint(3, (n_blocks,), generator=g)
        blocks[:, t] = successors[blocks[:, t - 1], pick]
    return blocks


class CausalLM(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.fixed = fixed
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Embedding(BLOCK, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, 4 * WIDTH, dropout=0.1,
                                           batch_first=True)
        self.decoder = nn.TransformerEncoder(layer, LAYERS)
        self.lm_head = nn.Linear(WIDTH, VOCAB)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(BLOCK))

    def forward(self, input_ids, labels=None):
        n = input_ids.shape[1]
        h = self.embed(input_ids) + self.position(torch.arange(n))
        logits = self.lm_head(self.decoder(h, mask=self.causal[:n, :n], is_causal=True))
        if labels is None:
            return logits
        if self.fixed:  # FIX: position t is scored on the next token
            return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        # BUG: no shift -- position t is scored on its own input token
        return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    blocks = token_stream(seed, 3600)
    train, val = blocks[:3200], blocks[3200:]

    def step(model, optimizer, batch):
        input_ids, labels = batch  # the collator: labels = input_ids
        loss = model(input_ids, labels=labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    def model_loss(output_or_logits, labels):  # the user's loss is inside the model
        return F.cross_entropy(output_or_logits.reshape(-1, VOCAB), labels.reshape(-1))

    return dict(model=lambda: CausalLM(fixed),
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3,
                                                      weight_decay=0.01),
                batches=batched(train, train.clone(), 16), step=step, loss=model_loss,
                val_batches=batched(val, val.clone(), 100), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Next-token loss on held-out blocks (what generation needs), eval mode."""
    model.eval()
    with torch.no_grad():
        losses = [float(F.cross_entropy(model(x)[:, :-1].reshape(-1, VOCAB),
                                        x[:, 1:].reshape(-1))) for x, _ in val_batches]
    model.train()
    return {"val_loss": sum(losses) / len(losses)}
