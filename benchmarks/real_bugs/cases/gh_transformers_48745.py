"""A causal LM whose decoder attends to future tokens: the training loss collapses to almost zero.

Source: https://github.com/huggingface/transformers/issues/48745 (2026-09-12, labelled bug,
closed): RoFormerForCausalLM, BigBirdForCausalLM, RemBertForCausalLM and
MegatronBertForCausalLM with is_decoder=True no longer apply the causal mask since v5.9.0.
Root cause (as the report established it, on CPU): "the decoder is not causal: each
position sees the tokens after it, so its label is visible" -- the reporter's plain
causal-LM training on random tokens drove the loss to almost zero within a few hundred
steps, while BertLMHeadModel (still causal) did not.  The fix restores the causal mask
in these models' self-attention.
Re-created: a decoder-only transformer trained as a causal LM exactly as the report does
(labels = input_ids, the model shifts them inside: logits[:, :-1] against labels[:, 1:]),
cross-entropy over the vocabulary, AdamW, blocks of fixed length; the bug is the missing
causal mask in the model's self-attention; the harm yardstick is the next-token loss on
held-out blocks with the causal mask a generator has (a token cannot see what has not
been generated yet);
differs from the original: RoFormer's rotary attention replaced by learned positions and
torch's encoder layer, 2 layers of width 64, trained from scratch on seeded streams of a
sparse Markov chain (vocabulary 64, blocks of 32) instead of random tokens, so that the
fixed model has something to learn; AdamW lr 1e-3, weight decay 0.01, batch 16, 200 steps.
Fix: pass the causal mask to the self-attention.  Run fixed: FAILURELAB_FIX=1.
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


class DecoderForCausalLM(nn.Module):
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

    def logits(self, input_ids, causal: bool):
        n = input_ids.shape[1]
        h = self.embed(input_ids) + self.position(torch.arange(n))
        if causal:
            h = self.decoder(h, mask=self.causal[:n, :n], is_causal=True)
        else:
            h = self.decoder(h)
        return self.lm_head(h)

    def forward(self, input_ids, labels=None):
        if self.fixed:
            logits = self.logits(input_ids, causal=True)  # FIX: the causal mask is applied
        else:
            logits = self.logits(input_ids, causal=False)  # BUG: no causal mask: sees the future
        if labels is None:
            return logits
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    blocks = token_stream(seed, 3600)
    train, val = blocks[:3200], blocks[3200:]

    def step(model, optimizer, batch):
        input_ids, labels = batch  # labels = input_ids; the model shifts them
        loss = model(input_ids, labels=labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    def model_loss(logits, labels):  # the loss the model computes inside
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))

    return dict(model=lambda: DecoderForCausalLM(fixed),
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3,
                                                      weight_decay=0.01),
                batches=batched(train, train.clone(), 16), step=step, loss=model_loss,
                val_batches=batched(val, val.clone(), 100), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Next-token loss on held-out blocks as a generator sees them (causal), eval mode."""
    model.eval()
    with torch.no_grad():
        losses = [float(F.cross_entropy(model.logits(x, causal=True)[:, :-1].reshape(-1, VOCAB),
                                        x[:, 1:].reshape(-1))) for x, _ in val_batches]
    model.train()
    return {"val_loss": sum(losses) / len(losses)}
