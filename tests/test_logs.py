"""Logs a job already keeps (TensorBoard, Lightning's CSVLogger) are diagnosed like the
Monitor's own history of the same run; the Monitor's columns go the other way too."""

import math

import pytest
import torch
from torch import nn

import failurelab as fl
from failurelab.evidence import logs

tensorboard = pytest.importorskip("torch.utils.tensorboard",
                                  reason="the logs extra (tensorboard) is not installed")


def _loop(logdir, zero_grad: bool, steps: int = 150):
    """A small classifier logging what engineers usually log to TensorBoard, watched by
    a Monitor at the same time."""
    torch.manual_seed(0)
    X = torch.randn(512, 8)
    y = (X[:, 0] + X[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    writer = tensorboard.SummaryWriter(str(logdir))
    with fl.Monitor(model, opt) as mon:
        for step in range(steps):
            i = torch.randint(0, 512, (32,))
            if zero_grad:
                opt.zero_grad()
            loss = nn.functional.cross_entropy(model(X[i]), y[i])
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf)
            opt.step()
            mon.record(loss)
            writer.add_scalar("train/loss", loss.item(), step)
            writer.add_scalar("lr-SGD", opt.param_groups[0]["lr"], step)
            writer.add_scalar("grad_2.0_norm_total", float(norm), step)
    writer.close()
    return mon.history


@pytest.mark.parametrize("zero_grad", [True, False], ids=["healthy", "no_zero_grad"])
def test_a_tensorboard_run_folder_reads_as_the_monitor_saw_it(zero_grad, tmp_path):
    history = _loop(tmp_path, zero_grad)
    read = logs.read_log(tmp_path)
    assert read.attrs["mapped"] == {"loss": "train/loss", "lr": "lr-SGD",
                                    "grad_norm": "grad_2.0_norm_total"}
    assert read["loss"].tolist() == pytest.approx(history["loss"].tolist(), rel=1e-6)
    assert fl.diagnose(tmp_path).shape == fl.diagnose(history).shape
    assert (fl.diagnose(history).shape == "healthy") == zero_grad  # the two loops differ


def test_a_lightning_csv_logger_run_reads_as_the_callback_saw_it(tmp_path):
    lightning = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.loggers import CSVLogger

    from failurelab.lightning import MonitorCallback

    class Classifier(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))

        def training_step(self, batch, _):
            x, y = batch
            loss = nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, _):
            x, y = batch
            self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=3.0)  # far too large: diverges

    torch.manual_seed(0)
    X = torch.randn(512, 8)
    y = (X[:, 0] + X[:, 1] > 0).long()
    data = torch.utils.data.TensorDataset(X, y)
    train = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    val = torch.utils.data.DataLoader(data, batch_size=128)
    callback = MonitorCallback()
    logger = CSVLogger(str(tmp_path))
    trainer = lightning.Trainer(max_epochs=6, logger=logger, callbacks=[callback],
                                log_every_n_steps=1, enable_progress_bar=False,
                                enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(Classifier(), train, val)
    read = logs.read_log(logger.log_dir)
    assert read.attrs["mapped"] == {"loss": "train_loss", "val_loss": "val_loss"}
    assert len(read) == len(callback.history) and read["val_loss"].notna().sum() >= 5
    assert fl.diagnose(logger.log_dir).shape == fl.diagnose(callback.history).shape


def test_the_monitor_columns_go_to_a_summary_writer_once_each(tmp_path):
    history = _loop(tmp_path / "loop", zero_grad=True, steps=40)
    writer = tensorboard.SummaryWriter(str(tmp_path / "out"))
    last = logs.write_scalars(history.iloc[:25], writer)
    assert logs.write_scalars(history, writer, since=last) == history["step"].iloc[-1]
    writer.close()
    back = logs.read_log(tmp_path / "out")  # failurelab/loss maps back onto loss
    assert back["loss"].tolist() == pytest.approx(history["loss"].tolist(), rel=1e-6)
    assert back.attrs["mapped"]["grad_norm"] == "failurelab/grad_norm"


@pytest.mark.parametrize(("logged", "column"), [("lr-AdamW/pg1", "lr"), ("Loss/Train", "loss"),
                                                ("grad_norm_total", "grad_norm"),
                                                ("val/accuracy", "val_acc")])
def test_common_logged_names_map_onto_the_history_columns(logged, column):
    assert logs.mapping([logged]) == {column: logged}


def test_a_log_without_a_training_loss_is_a_clear_error(tmp_path):
    (tmp_path / "metrics.csv").write_text("step,epoch,accuracy\n0,0,0.5\n")
    with pytest.raises(ValueError, match="no logged name reads as a training loss"):
        fl.diagnose(tmp_path)
