"""The Lightning callback records what a plain Monitor records on the same loop."""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import failurelab as fl

pl = pytest.importorskip("lightning.pytorch")
from failurelab.lightning import MonitorCallback  # noqa: E402

STEPS, BATCH, SEED = 12, 16, 3


class TinyClassifier(pl.LightningModule):
    """Two ReLU layers; no dropout, so Lightning and the plain loop draw no random numbers."""

    def __init__(self, optimizer: str = "sgd"):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        self.optimizer_name = optimizer

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def configure_optimizers(self):
        return make_optimizer(self, self.optimizer_name)


def make_optimizer(model, name):
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=0.01)
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def dataset(n=BATCH * STEPS * 2):
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(n, 8, generator=g)
    return torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 1).long())


def loader():
    return torch.utils.data.DataLoader(dataset(), batch_size=BATCH, shuffle=False)


def fresh_model(optimizer="sgd"):
    torch.manual_seed(SEED)
    return TinyClassifier(optimizer)


def lightning_history(steps, optimizer="sgd", accumulate=1, val=False):
    callback = MonitorCallback()
    trainer = pl.Trainer(callbacks=[callback], accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, max_steps=steps, accumulate_grad_batches=accumulate,
                         num_sanity_val_steps=0,
                         val_check_interval=4 if val else None, limit_val_batches=2 if val else 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on DataLoader workers
        trainer.fit(fresh_model(optimizer), loader(), loader() if val else None)
    return callback.history


def plain_history(steps, optimizer="sgd", accumulate=1):
    """The README's loop on the same model, data and seed; accumulation as Lightning does it."""
    model = fresh_model(optimizer)
    opt = make_optimizer(model, optimizer)
    batches = iter(loader())
    with fl.Monitor(model, opt) as mon:
        for _ in range(steps):
            opt.zero_grad()
            total = 0.0
            for _ in range(accumulate):
                x, y = next(batches)
                loss = nn.functional.cross_entropy(model(x), y) / accumulate
                loss.backward()
                total += loss.item()
            opt.step()
            mon.record(total)
    return mon.history


def assert_same(lit: pd.DataFrame, plain: pd.DataFrame):
    assert len(lit) == len(plain)
    shared = [c for c in plain.columns if c in lit.columns]
    per_parameter = [c for c in shared if c.startswith(("grad_norm/", "update_ratio/"))]
    assert per_parameter and {"grad_norm", "update_ratio", "grad_cosine", "loss"} <= set(shared)
    np.testing.assert_allclose(lit[shared].to_numpy(float), plain[shared].to_numpy(float),
                               rtol=1e-5, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_the_callback_history_equals_a_plain_monitor_on_the_same_loop(optimizer):
    lit, plain = lightning_history(STEPS, optimizer), plain_history(STEPS, optimizer)
    assert_same(lit, plain)
    assert lit["grad_norm"].iloc[0] > 0  # this step's gradients, not last step's (none at step 0)


def test_with_accumulation_it_records_once_per_optimizer_step():
    lit, plain = lightning_history(6, accumulate=2), plain_history(6, accumulate=2)
    assert len(lit) == 6
    assert_same(lit, plain)


def test_logged_validation_loss_lands_on_the_row_of_its_step():
    history = lightning_history(STEPS, val=True)
    val = history["val_loss"]
    assert list(val.dropna().index) == [3, 7, 11]  # validated after every 4th batch
    assert val.dropna().between(0, 5).all()
    assert len(history) == STEPS


def test_diagnose_reads_the_callback_history():
    history = lightning_history(STEPS, val=True)
    assert fl.diagnose(history).shape == fl.diagnose(plain_history(STEPS)).shape


def test_importing_failurelab_does_not_import_lightning():
    import subprocess
    import sys

    code = "import sys, failurelab; print('lightning' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
