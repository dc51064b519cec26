"""A speech-to-gesture model trained with a velocity penalty: the penalty does not constrain the motion's speed.

Source: https://github.com/Svito-zar/gesticulator/issues/10 (2020-10-05, by the author:
"IMPORTANT: the velocity loss had a bug!"), fix commit 11642221 ("It mixed up dimensions:
since the first dimension was index in a batch but not time, the loss was actually
calculating the distance between two sequences in a batch").
Root cause (as the fix established it): the predictions are (batch, time, joints), but
the velocity loss took differences along dim 0, `y_hat[1:] - y_hat[:-1]`, i.e. between
neighbouring sequences of the shuffled batch, instead of along time,
`y_hat[:, 1:] - y_hat[:, :-1]`.  The "velocity" term is then a second position error
(the difference of two samples' errors), and nothing asks consecutive frames to move
as the true motion moves.  The same slicing was in the validation loss.
Re-created: the model's layers and order as at the fix's parent (per-frame speech encoder
Linear -> TanH -> Dropout -> Linear -> TanH -> Dropout over a window of 10 past and 20
future frames, flattened, reduced by Linear -> TanH -> Dropout, one hidden layer, then
Linear -> TanH -> Dropout -> Linear to 45 joint angles, times pi; He initialisation),
training sequences of 40 predicted frames (70 with context), batch 64, Adam lr 1e-4,
loss MSE + 0.6 * velocity MSE, dropout 0.2; the harm yardstick is the temporal velocity
error on held-out sequences (what the fixed validation loss computes);
differs from the original: Trinity speech/BERT features and motion capture replaced by
seeded signals (a smooth 8-dimensional latent drives 26 noisy audio features, 16 "text"
features held for 4 frames, and 45 joint angles of about 0.3 rad), the widths scaled
down (frame encoding 16 instead of 124, window encoding 128 instead of 612, hidden 128
instead of 256, text 16 instead of BERT's 773), 200 steps; the model's autoregressive
pose conditioning is left out: it is off during the first 7 epochs
(n_epochs_with_no_autoregression), which is longer than this run, and its zero-initialised
FiLM layer then leaves validation unchanged; the per-frame loop is computed for all frames
at once (the same arithmetic, frames being independent without conditioning).
Fix: y_hat[:, 1:] - y_hat[:, :-1] (and the same for y).  Run fixed: FAILURELAB_FIX=1 or
parts(fixed=True).
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
BATCH = 64
HARM_METRIC = "val_loss"
PAST, FUTURE, SEQ = 10, 20, 40          # context frames and predicted frames
AUDIO, TEXT, JOINTS, LATENT = 26, 16, 45, 8
FRAME_ENC, WINDOW_ENC, HIDDEN = 16, 128, 128
VEL_COEF, DROPOUT = 0.6, 0.2


def recordings(seed: int, n: int):
    """n sequences of PAST + SEQ + FUTURE frames: audio, text, and the gesture angles."""
    g = generator(seed)
    mix = {k: torch.randn(LATENT, d, generator=g) / math.sqrt(LATENT)
           for k, d in (("audio", AUDIO), ("text", TEXT), ("pose", JOINTS))}
    frames = PAST + SEQ + FUTURE
    t = torch.arange(frames + 5, dtype=torch.float32)
    freq = 0.0125 + 0.0625 * torch.rand(n, 1, LATENT, generator=g)  # 0.25-1.5 Hz at 20 fps
    phase = 2 * math.pi * torch.rand(n, 1, LATENT, generator=g)
    latent = torch.sin(2 * math.pi * freq * t[None, :, None] + phase)
    audio = latent[:, 5:] @ mix["audio"] + 0.5 * torch.randn(n, frames, AUDIO, generator=g)
    held = latent[:, 5:][:, torch.arange(frames) // 4 * 4]      # words last 4 frames
    text = held @ mix["text"] + 0.3 * torch.randn(n, frames, TEXT, generator=g)
    pose = 0.3 * torch.tanh(latent[:, :frames] @ mix["pose"])   # gesture lags speech
    return audio, text, pose + 0.01 * torch.randn(n, frames, JOINTS, generator=g)


def he_init(module):
    if isinstance(module, nn.Linear):
        nn.init.kaiming_normal_(module.weight)
        nn.init.zeros_(module.bias)


class GestureModel(nn.Module):
    def __init__(self):
        super().__init__()
        act = nn.Tanh
        self.encode_speech = nn.Sequential(nn.Linear(AUDIO + TEXT, FRAME_ENC * 2), act(),
                                           nn.Dropout(DROPOUT),
                                           nn.Linear(FRAME_ENC * 2, FRAME_ENC), act(),
                                           nn.Dropout(DROPOUT))
        self.reduce_speech_enc = nn.Sequential(nn.Linear(FRAME_ENC * (PAST + FUTURE),
                                                         WINDOW_ENC), act(),
                                               nn.Dropout(DROPOUT))
        self.first_layer = nn.Sequential(nn.Linear(WINDOW_ENC, HIDDEN), act(),
                                         nn.Dropout(DROPOUT))
        self.hidden_to_output = nn.Sequential(nn.Linear(HIDDEN, JOINTS), nn.Tanh(),
                                              nn.Dropout(DROPOUT), nn.Linear(JOINTS, JOINTS))
        for part in (self.first_layer, self.hidden_to_output, self.reduce_speech_enc):
            part.apply(he_init)

    def forward(self, audio, text):
        """(N, PAST + SEQ + FUTURE, .) speech -> (N, SEQ, JOINTS) poses, one per frame."""
        speech = self.encode_speech(torch.cat((audio, text), 2))     # (N, frames, enc)
        windows = speech.unfold(1, PAST + FUTURE, 1)[:, :SEQ]        # frame t: [t-PAST, t+FUTURE)
        windows = windows.transpose(2, 3).flatten(start_dim=2)       # (N, SEQ, window * enc)
        hidden = self.first_layer(self.reduce_speech_enc(windows))
        return self.hidden_to_output(hidden) * math.pi


def velocity_error(y_hat, y):
    """The fixed validation loss: MSE between the predicted and true frame-to-frame speed."""
    return nn.functional.mse_loss(y_hat[:, 1:] - y_hat[:, :-1], y[:, 1:] - y[:, :-1])


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    audio, text, pose = recordings(seed, BATCH * 25 + 256)
    n_train = BATCH * 25
    g = generator(seed + 1)
    batches = []  # DataLoader(shuffle=True): a new order every epoch
    while len(batches) < STEPS:
        order = torch.randperm(n_train, generator=g)
        batches += [{"audio": audio[i], "text": text[i], "output": pose[i]}
                    for i in order.split(BATCH)]
    val_batches = [{"audio": audio[n_train:], "text": text[n_train:],
                    "output": pose[n_train:]}]
    mse = nn.MSELoss()

    def tr_loss(y_hat, y):
        if fixed:
            pred_speed = y_hat[:, 1:] - y_hat[:, :-1]  # FIX: differences along time
            actual_speed = y[:, 1:] - y[:, :-1]
        else:
            pred_speed = y_hat[1:] - y_hat[:-1]  # BUG: differences along the batch dimension
            actual_speed = y[1:] - y[:-1]
        return [mse(y_hat, y), mse(pred_speed, actual_speed) * VEL_COEF]

    def step(model, optimizer, batch):  # Lightning's training_step, backward, step
        predicted = model(batch["audio"], batch["text"])
        true_gesture = batch["output"][:, PAST:-FUTURE]
        mse_loss, vel_loss = tr_loss(predicted, true_gesture)
        loss = mse_loss + vel_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=GestureModel,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-4),
                batches=batches[:STEPS], step=step, loss=None, val_batches=val_batches,
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Temporal velocity error on held-out sequences, eval mode (the same yardstick for both)."""
    model.eval()
    with torch.no_grad():
        errors = [float(velocity_error(model(b["audio"], b["text"]),
                                       b["output"][:, PAST:-FUTURE])) for b in val_batches]
    model.train()
    return {"val_loss": sum(errors) / len(errors)}
