"""`fl.investigate`: every arm changes one factor, the same seed is bitwise the same,
and on tiny loops with one planted bug the experiments name it (or refuse to)."""

import math

import pytest
import torch
from torch import nn

import failurelab as fl
from failurelab.evidence import experiments as ex
from failurelab.investigation import PartsError, arms, checks, runner, verdict
from failurelab.investigation.parts import build, make_parts

STEPS = 40


def _data(n=384, d=8, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    y = (X @ torch.randn(d, classes, generator=g)).argmax(1)
    return [(X[i:i + 32], y[i:i + 32]) for i in range(0, n, 32)]


def _mlp():
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))


def _step(model, optimizer, batch):
    x, y = batch
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def _forgets_zero_grad(model, optimizer, batch):
    x, y = batch
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


class _Cut(nn.Module):
    """A graph cut by .detach(): the body never learns (outside the catalogue)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.body(x).detach())


def _parts(lr=0.05, step=_step, model=_mlp, **more):
    def optimizer(m):
        opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
        return opt, torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)
    return dict(model=model, optimizer=optimizer, batches=_data(), step=step,
                loss=nn.functional.cross_entropy, steps=STEPS, seed=0, **more)


def _investigate(**parts):
    return fl.investigate(**parts, progress=False, workers=2)


# --- every arm changes exactly one factor -----------------------------------------------

def _initial_state(parts):
    with torch.random.fork_rng():
        model, optimizer, scheduler = build(parts)
    return model.state_dict(), optimizer, scheduler


def _same_state(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k].float(), b[k].float()) for k in a)


def _same_batches(a, b):
    return len(a) == len(b) and all(
        all(torch.equal(u, v) for u, v in zip(x, y, strict=True)) for x, y in zip(a, b, strict=True))


def _fields_changed(base, arm):
    return {f for f in base.__dataclass_fields__ if getattr(base, f) is not getattr(arm, f)}


@pytest.fixture(scope="module")
def base():
    return make_parts(**_parts())


def test_reseeding_changes_the_seed_only(base):
    arm = arms.ARMS["reseed+1"].apply(base)
    assert _fields_changed(base, arm) == {"seed"} and arm.seed == base.seed + 1
    assert not _same_state(_initial_state(base)[0], _initial_state(arm)[0])


@pytest.mark.parametrize("name,factor", [("lr/10", 0.1), ("lr*10", 10.0), ("lr*100", 100.0)])
def test_a_scaled_rate_changes_every_group_and_the_schedule_only(base, name, factor):
    arm = arms.ARMS[name].apply(base)
    assert _fields_changed(base, arm) == {"make_optimizer"}
    (s0, o0, k0), (s1, o1, k1) = _initial_state(base), _initial_state(arm)
    assert _same_state(s0, s1)
    for g0, g1 in zip(o0.param_groups, o1.param_groups, strict=True):
        assert g1["lr"] == pytest.approx(g0["lr"] * factor)
        assert {k: v for k, v in g0.items() if k not in arms.LR_KEYS + ("params",)} == \
               {k: v for k, v in g1.items() if k not in arms.LR_KEYS + ("params",)}
    assert k1.base_lrs == pytest.approx([lr * factor for lr in k0.base_lrs])


def test_overfitting_one_batch_changes_the_batches_only(base):
    arm = arms.ARMS["overfit_batch"].apply(base)
    assert _fields_changed(base, arm) == {"batches"} and arm.steps == base.steps
    assert all(b is base.batches[0] for b in arm.batches)
    assert _same_state(_initial_state(base)[0], _initial_state(arm)[0])


def test_permuting_labels_moves_the_targets_only(base):
    arm = arms.ARMS["labels_permuted"].apply(base)
    assert _fields_changed(base, arm) == {"batches"}
    assert _same_batches([(x,) for x, _ in base.batches], [(x,) for x, _ in arm.batches])
    before = torch.cat([y for _, y in base.batches[:12]])
    after = torch.cat([y for _, y in arm.batches[:12]])
    assert not torch.equal(before, after)
    assert torch.equal(before.sort().values, after.sort().values)  # the same labels, moved
    assert _same_state(_initial_state(base)[0], _initial_state(arm)[0])


def test_standardising_changes_the_inputs_only(base):
    shifted = make_parts(**{**_parts(), "batches": [(x * 30 + 5, y) for x, y in _data()]})
    arm = arms.ARMS["inputs_standardised"].apply(shifted)
    assert _fields_changed(shifted, arm) == {"batches"}
    assert _same_batches([(y,) for _, y in shifted.batches], [(y,) for _, y in arm.batches])
    xs = torch.cat([x for x, _ in arm.batches[:12]])
    assert xs.mean(0).abs().max() < 1e-4 and (xs.std(0, unbiased=False) - 1).abs().max() < 1e-4


def test_float32_changes_the_precision_only():
    half = make_parts(**{**_parts(), "model": lambda: _mlp().bfloat16()})
    arm = arms.ARMS["float32"].apply(half)
    assert _fields_changed(half, arm) == {"make_model", "autocast"}
    s0, s1 = _initial_state(half)[0], _initial_state(arm)[0]
    assert all(v.dtype == torch.float32 for v in s1.values()) and _same_state(s0, s1)


def test_reinitialising_changes_the_initial_weights_only(base):
    scaled = make_parts(**{**_parts(), "model": lambda: _mlp().apply(_shrink)})
    arm = arms.ARMS["reinit_defaults"].apply(scaled)
    assert _fields_changed(scaled, arm) == {"make_model"}
    assert not _same_state(_initial_state(scaled)[0], _initial_state(arm)[0])


def _shrink(module):
    if isinstance(module, nn.Linear):
        with torch.no_grad():
            module.weight.mul_(1e-3)


def test_the_reference_step_changes_the_step_only(base):
    arm = arms.ARMS["reference_step"].apply(base)
    assert _fields_changed(base, arm) == {"step"}
    assert arms.ARMS["reference_step"].apply(make_parts(**{**_parts(), "loss": None})) is None


def _regression(n=256, d=8, flat=True):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, d, generator=g)
    y = X[:, :1] * 2 + X[:, 1:2]
    return [(X[i:i + 32], y[i:i + 32].flatten() if flat else y[i:i + 32])
            for i in range(0, n, 32)]


def test_shaping_the_targets_changes_their_shape_only():
    flat = make_parts(**{**_parts(), "model": lambda: nn.Linear(8, 1), "batches": _regression(),
                         "loss": nn.functional.mse_loss})
    arm = arms.ARMS["targets_shaped"].apply(flat)
    assert _fields_changed(flat, arm) == {"batches"}
    assert _same_batches([(x,) for x, _ in flat.batches], [(x,) for x, _ in arm.batches])
    assert all(y1.shape == (len(y0), 1) and torch.equal(y1.flatten(), y0)
               for (_, y0), (_, y1) in zip(flat.batches, arm.batches, strict=True))
    assert _same_state(_initial_state(flat)[0], _initial_state(arm)[0])
    # the shapes already agree, or the targets hold other entries: nothing to change
    assert arms.ARMS["targets_shaped"].apply(base_parts_of(_regression(flat=False))) is None
    one_target = [(x, y[:1]) for x, y in _regression()]  # a collate that keeps one target
    assert arms.ARMS["targets_shaped"].apply(base_parts_of(one_target)) is None


def base_parts_of(batches):
    return make_parts(**{**_parts(), "model": lambda: nn.Linear(8, 1), "batches": batches})


class _ReusedRelu(nn.Module):
    """The body's ReLU module called once more on the logits."""

    def __init__(self):
        super().__init__()
        self.inner, self.relu, self.head = nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)

    def forward(self, x):
        return self.relu(self.head(self.relu(self.inner(x))))


def test_passing_the_output_activation_by_changes_the_last_call_only(base):
    reused = make_parts(**{**_parts(), "model": _ReusedRelu})
    arm = arms.ARMS["output_identity"].apply(reused)
    assert _fields_changed(reused, arm) == {"make_model"}
    assert _same_state(_initial_state(reused)[0], _initial_state(arm)[0])
    x = reused.batches[0][0]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = arm.make_model()
    logits = model.head(torch.relu(model.inner(x)))  # the hidden ReLU still applies
    assert torch.equal(model(x), logits) and bool((logits < 0).any())
    assert arms.ARMS["output_identity"].apply(base) is None  # the MLP ends in Linear


def test_re_dealing_the_samples_changes_which_share_a_batch_only(base):
    arm = arms.ARMS["reshuffled"].apply(base)
    assert _fields_changed(base, arm) == {"batches"}
    assert [len(x) for x, _ in arm.batches] == [len(x) for x, _ in base.batches]

    def rows(batches):
        return torch.cat([torch.cat([x, y[:, None].float()], 1) for x, y in batches])
    before, after = rows(base.batches), rows(arm.batches)
    assert not torch.equal(before, after)
    # every sample once, with its own label: the same rows, in another order
    assert torch.equal(before[before[:, 0].argsort()], after[after[:, 0].argsort()])
    assert _same_state(_initial_state(base)[0], _initial_state(arm)[0])


def test_training_mode_changes_the_mode_of_gradient_taking_passes_only(base):
    arm = arms.ARMS["train_mode"].apply(base)
    assert _fields_changed(base, arm) == {"make_model"}
    assert _same_state(_initial_state(base)[0], _initial_state(arm)[0])
    model = arm.make_model().eval()
    with torch.no_grad():
        model(base.batches[0][0])
    assert not model.training  # validation keeps the mode the loop set
    model(base.batches[0][0])
    assert model.training


def test_the_premise_checks_see_a_broadcast_pair_and_one_class_batches():
    assert checks.targets_misshaped(base_parts_of(_regression())) == 1.0
    assert checks.targets_misshaped(base_parts_of(_regression(flat=False))) == 0.0
    assert checks.targets_misshaped(base_parts_of([(x, y[:1]) for x, y in _regression()])) == 0.0
    data = _data()
    x = torch.cat([b[0] for b in data])
    y = torch.cat([b[1] for b in data])
    order = y.argsort(stable=True)
    ordered = [(x[order][i:i + 32], y[order][i:i + 32]) for i in range(0, len(y), 32)]
    assert checks.batches_unmixed(make_parts(**{**_parts(), "batches": ordered})) == 1.0
    assert checks.batches_unmixed(make_parts(**_parts())) == 0.0
    relu_out = make_parts(**{**_parts(), "model": _ReusedRelu})
    assert checks.output_kind(relu_out) == (1.0, 0.0)
    probs = make_parts(**{**_parts(), "model": lambda: nn.Sequential(_mlp(), nn.Softmax(-1))})
    assert checks.output_kind(probs) == (0.0, 1.0)
    assert checks.output_kind(make_parts(**_parts())) == (0.0, 0.0)


def test_the_same_seed_gives_a_bitwise_identical_history(base):
    a, b = runner.run_arm(base, "baseline"), runner.run_arm(base, "repeat")
    assert len(a.history) == STEPS
    assert a.history.equals(b.history)


# --- the effect vocabulary ----------------------------------------------------------------

def test_a_gain_is_measured_in_spreads_and_a_broken_run_loses():
    assert ex.gain(1.0, 0.5, 0.1, log=False) == pytest.approx(5.0)
    assert ex.gain(math.inf, 0.5, 0.1, log=True) == math.inf
    assert ex.gain(math.inf, math.inf, 0.1, log=True) == 0.0
    # the spread never falls under FLOOR of the loss scale, however close the seeds end
    assert ex.spread([1.0, 1.0, 1.0], scale=2.0, baseline_end=1.0, log=False) == ex.FLOOR * 2.0


# --- verdicts on tiny loops with one planted bug ---------------------------------------------

def test_a_healthy_loop_is_called_healthy_with_few_arms():
    inv = _investigate(**_parts())
    assert inv.top is None and inv.healthy and inv.shape == "healthy"
    assert set(inv.experiments["arm"]) == {"baseline", "repeat"}
    assert inv.reproducible is True


def test_a_forgotten_zero_grad_is_confirmed_by_the_reference_step():
    inv = _investigate(**_parts(step=_forgets_zero_grad))
    assert inv.top == "no_zero_grad"
    assert inv.effects["gain[reference_step]"] > ex.CLEAR
    assert "the step: zero_grad" in inv.text()


def test_a_rate_100x_too_large_is_confirmed_by_dividing_it_by_10():
    inv = _investigate(**_parts(lr=5.0))
    assert inv.top == "huge_lr"
    assert inv.effects["gain[lr/10]"] > ex.CLEAR
    assert inv.effects["gain[reference_step]"] < ex.CLEAR  # the loop itself is fine


def test_a_graph_cut_outside_the_catalogue_gets_no_confident_name():
    inv = _investigate(**_parts(model=_Cut))
    assert inv.top is None or inv.confidence == "low"
    assert inv.flow.without_grad == ["body.0.weight", "body.0.bias"]
    assert inv.confidence != "high"


class _GeneratorAndCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
        self.critic = nn.Linear(3, 1)

    def forward(self, x):
        return self.generator(x)


def _gan_parts(critic_optimized: bool):
    """The generator's optimizer handed over; the critic's own optimizer (or none: its
    parameters left out) built beside it and stepped inside the step."""
    def optimizer(m):
        m.critic_optimizer = (torch.optim.SGD(m.critic.parameters(), lr=0.01)
                              if critic_optimized else None)
        return torch.optim.SGD(m.generator.parameters(), lr=0.05)

    def step(model, optimizer, batch):
        x, y = batch
        if model.critic_optimizer is not None:
            model.critic_optimizer.zero_grad()
            model.critic(model(x).detach()).mean().backward()
            model.critic_optimizer.step()
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y) - 0.01 * model.critic(model(x)).mean()
        loss.backward()
        optimizer.step()
        return loss
    return make_parts(**dict(_parts(model=_GeneratorAndCritic), optimizer=optimizer, step=step))


@pytest.mark.parametrize("critic_optimized", [True, False])
def test_gradient_flow_tells_a_second_optimizers_parameters_from_left_out_ones(critic_optimized):
    """Parameters outside the handed optimizer that the step moved are trained by
    another optimizer; those it did not move are left out."""
    flow = checks.gradient_flow(_gan_parts(critic_optimized))
    assert flow.error is None
    expected = [] if critic_optimized else ["critic.weight", "critic.bias"]
    assert flow.not_optimized == expected


@pytest.mark.parametrize("bad,says", [
    (dict(model=None), "model must be"),
    (dict(batches=[]), "yielded no batch"),
    (dict(batches=5), "re-iterable"),
    (dict(optimizer=lambda m: "sgd"), "torch.optim.Optimizer"),
    (dict(steps=1), "steps must be"),
])
def test_bad_parts_get_a_one_line_error(bad, says):
    with pytest.raises(PartsError, match=says) as err:
        fl.investigate(**{**_parts(), **bad}, progress=False)
    assert "\n" not in str(err.value)


def test_a_step_that_returns_nothing_is_said_in_one_line():
    def silent(model, optimizer, batch):
        _step(model, optimizer, batch)
    with pytest.raises(PartsError, match="step returned nothing"):
        fl.investigate(**_parts(step=silent), progress=False)


def test_a_lightning_module_is_accepted_in_place_of_the_parts():
    lightning = pytest.importorskip("lightning.pytorch")

    class Lit(lightning.LightningModule):
        def __init__(self, lr=0.05):
            super().__init__()
            self.save_hyperparameters()
            self.net = _mlp()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)

    inv = fl.investigate(Lit(), batches=_data(), steps=STEPS, progress=False, workers=1)
    assert inv.top is None and inv.shape == "healthy"
    assert len(inv.histories["baseline"]) == STEPS


def test_the_report_reads_in_both_languages_and_escapes_html(tmp_path):
    inv = _investigate(**_parts(lr=5.0))
    assert "symptom" in inv.text("en") and "现象" in inv.text("zh")
    page = tmp_path / "inv.html"
    inv.to_html(page)
    html = page.read_text("utf-8")
    assert "data:image/png;base64," in html and "<script" not in html


def test_the_command_investigates_a_file_of_parts_and_refuses_a_bad_target(tmp_path, capsys):
    from failurelab import cli

    loop = tmp_path / "my_loop.py"
    loop.write_text("import torch\nfrom torch import nn\n\n"
                    "def parts():\n"
                    "    X = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))\n"
                    "    y = (X[:, 0] > 0).long()\n"
                    "    def step(model, opt, batch):\n"
                    "        opt.zero_grad()\n"
                    "        loss = nn.functional.cross_entropy(model(batch[0]), batch[1])\n"
                    "        loss.backward()\n"
                    "        opt.step()\n"
                    "        return loss\n"
                    "    return dict(model=lambda: nn.Linear(4, 2),\n"
                    "                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.5),\n"
                    "                batches=[(X[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)],\n"
                    "                step=step, steps=20)\n")
    assert cli.main(["investigate", f"{loop}:parts", "--workers", "1"]) == 0
    assert "symptom" in capsys.readouterr().out
    assert cli.main(["investigate", f"{loop}:missing"]) == 2
    assert "defines no function 'missing'" in capsys.readouterr().err


def test_the_docs_quote_the_catalogues_confirm_refute_table():
    from pathlib import Path

    from failurelab.investigation.report import confirm_table

    doc = (Path(__file__).resolve().parents[1] / "docs" / "investigate.md").read_text("utf-8")
    assert confirm_table() in doc


def test_a_loop_that_is_non_finite_on_its_first_step_is_a_finding_not_bad_input():
    def nan_step(model, optimizer, batch):
        x, y = batch
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x * math.nan), y)
        loss.backward()
        optimizer.step()
        return loss

    report = _investigate(**_parts(step=nan_step))
    assert report.shape == "nonfinite"


def test_an_unconfirmed_passive_cause_never_becomes_a_confident_healthy():
    """A healthy-looking curve with a passive cause that no arm confirmed (its budget may
    be too short to show the effect) is 'healthy' at low confidence, not high."""
    from types import SimpleNamespace

    from failurelab.investigation.study import healthy_confidence

    named = SimpleNamespace(shape="healthy", top="huge_lr")
    clean = SimpleNamespace(shape="healthy", top=None)
    unconfirmed = [SimpleNamespace(status="not supported")]
    assert healthy_confidence(named, None, unconfirmed, True) == "low"
    assert healthy_confidence(clean, None, [], True) == "high"
    assert healthy_confidence(clean, None, [], False) == "medium"
    assert healthy_confidence(SimpleNamespace(shape="plateau", top=None), None, [], True) is None


def _mse_step(model, optimizer, batch):
    x, y = batch
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def _regressor():
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))


def _regression_parts(batches):
    return dict(model=_regressor, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                batches=batches, step=_mse_step, loss=nn.functional.mse_loss, steps=STEPS, seed=0)


def test_a_broadcast_pair_is_target_broadcast_and_one_target_per_batch_is_not():
    """(B,) targets against (B, 1) outputs: the check sees the pair and giving the targets
    the output's shape confirms it.  One sample's target for the whole batch (a collate
    bug) broadcasts too, but no reshape can pair outputs with targets they never had:
    target_broadcast is refuted there, however alike the curves."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flat = _investigate(**_regression_parts(_regression()))
        one = _investigate(**_regression_parts([(x, y[:1]) for x, y in _regression()]))
    assert flat.top == "target_broadcast" and flat.effects["gain[targets_shaped]"] > ex.CLEAR
    assert one.top != "target_broadcast" and one.effects["targets_misshaped"] == 0.0


def test_batches_sorted_by_class_are_named_no_shuffle():
    data = _data(n=768)
    x, y = torch.cat([b[0] for b in data]), torch.cat([b[1] for b in data])
    order = y.argsort(stable=True)
    ordered = [(x[order][i:i + 32], y[order][i:i + 32]) for i in range(0, len(y), 32)]
    inv = _investigate(**{**_parts(), "batches": ordered})
    assert inv.top == "no_shuffle" and inv.effects["batches_unmixed"] == 1.0


# --- the padding mask: the loop's own choice of hidden keys, inverted -----------------------

class _Tokens(nn.Module):
    """Token ids (0 pads the end of a row) -> one transformer layer -> mean over the real
    tokens -> 2 classes.  `flip`: the mask handed to the layer hides the real tokens."""

    def __init__(self, flip=False):
        super().__init__()
        self.flip = flip
        self.embed = nn.Embedding(20, 16, padding_idx=0)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 2)

    def forward(self, tokens):
        pad = tokens == 0
        hidden = self.layer(self.embed(tokens), src_key_padding_mask=~pad if self.flip else pad)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((hidden * keep).sum(1) / keep.sum(1))


def _token_batches(n=256, length=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, length, (n,), generator=g)  # every row keeps a pad
    tokens = torch.randint(1, 20, (n, length), generator=g)
    tokens[torch.arange(length) >= lengths[:, None]] = 0
    y = (tokens == 5).any(1).long()  # does the row hold token 5?
    return [(tokens[i:i + 32], y[i:i + 32]) for i in range(0, n, 32)]


def _token_parts(flip):
    return dict(model=lambda: _Tokens(flip),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-3),
                batches=_token_batches(), step=_step, loss=nn.functional.cross_entropy,
                steps=120, seed=0)


def test_inverting_the_padding_mask_changes_the_hidden_keys_only():
    from failurelab.investigation import checks

    right = make_parts(**_token_parts(flip=False))
    arm = arms.ARMS["mask_inverted"].apply(right)
    assert _fields_changed(right, arm) == {"make_model"}
    assert _same_state(_initial_state(right)[0], _initial_state(arm)[0])
    tokens = right.batches[0][0]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        inverted = arm.make_model().eval()
        torch.manual_seed(0)
        flipped = _Tokens(flip=True).eval()  # the same weights, the mask written inverted
    with torch.no_grad():
        assert torch.allclose(inverted(tokens), flipped(tokens), atol=1e-6)
    assert checks.padding_hides_tokens(right) == 0.0
    assert checks.padding_hides_tokens(make_parts(**_token_parts(flip=True))) == 1.0
    assert math.isnan(checks.padding_hides_tokens(make_parts(**_parts())))  # no attention


@pytest.mark.parametrize("flip", [True, False], ids=["inverted", "right"])
def test_a_mask_that_hides_the_real_tokens_is_named_and_a_right_one_is_not(flip):
    """A loop that hides its real tokens still learns something from the padding's
    position and looks healthy; the premise check sees the mask let one repeated token
    through, and the inverted arm reaches the right loop's loss.  A right mask hides the
    padding: nothing is proposed, and the healthy loop takes two runs."""
    inv = _investigate(**_token_parts(flip))
    if flip:
        assert inv.top == "inverted_padding_mask", inv.text()
        assert inv.effects["gain[mask_inverted]"] > ex.CLEAR
    else:
        assert inv.top is None and inv.healthy, inv.text()
        assert set(inv.experiments["arm"]) == {"baseline", "repeat"}


# --- probabilities out of the model: squashed twice, or compared as they are ------------------

def _head_parts(head, targets, loss):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(256, 8, generator=g)
    y = {"classes": (X[:, 0] > 0).long() + (X[:, 1] > 0).long(),
         "values": 2 + 18 * torch.rand(256, generator=g) + 3 * X[:, 0]}[targets]

    def step(model, optimizer, batch):
        x, t = batch
        optimizer.zero_grad()
        value = loss(model(x), t)
        value.backward()
        optimizer.step()
        return value
    return dict(model=lambda: nn.Sequential(nn.Linear(8, 32), nn.ReLU(), *head()),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                batches=[(X[i:i + 32], y[i:i + 32]) for i in range(0, 256, 32)], step=step,
                loss=loss, steps=150, seed=0)


def _mse(out, t):
    return nn.functional.mse_loss(out.squeeze(-1), t)


def test_a_sigmoid_under_an_mse_is_its_range_and_a_softmax_under_cross_entropy_twice():
    """Both models end in a probability module and both improve when it is passed by;
    what the loss does with the probabilities tells the causes apart: the cross-entropy
    squashes them again (wrong_loss), the MSE compares them with targets from 2 to 20
    that they cannot reach (output_activation_mismatch)."""
    from failurelab.investigation import checks

    def softmax_head():
        return nn.Linear(32, 3), nn.Softmax(1)

    def sigmoid_head():
        return nn.Linear(32, 1), nn.Sigmoid()

    twice = _head_parts(softmax_head, "classes", nn.functional.cross_entropy)
    ranged = _head_parts(sigmoid_head, "values", _mse)
    in_loss = _head_parts(lambda: (nn.Linear(32, 3),), "classes",
                          lambda out, t: nn.functional.cross_entropy(out.softmax(1), t))
    assert checks.loss_takes_logits(make_parts(**twice)) == 1.0
    assert checks.loss_takes_logits(make_parts(**in_loss)) == 1.0
    assert checks.loss_takes_logits(make_parts(**ranged)) == 0.0
    assert _investigate(**twice).top == "wrong_loss"
    inv = _investigate(**ranged)
    assert inv.top == "output_activation_mismatch", inv.text()
    assert inv.effects["gain[output_identity]"] > ex.CLEAR


class _SqueezedSigmoid(nn.Module):
    """A binary head that ends in nn.Sigmoid and returns it squeezed to (B,)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.out = nn.Sequential(nn.Linear(32, 1), nn.Sigmoid())

    def forward(self, x):
        return self.out(self.body(x)).squeeze(-1)


def test_a_sigmoid_output_squeezed_before_the_logits_loss_is_still_wrong_loss():
    """A reshaping view of the probability module's output (`.squeeze(-1)`) is still its
    output: the check sees it, the bypass reaches it, and BCEWithLogitsLoss on the
    sigmoid's output is a second sigmoid."""
    from failurelab.investigation import checks

    parts = _head_parts(lambda: (), "classes", nn.functional.binary_cross_entropy_with_logits)
    parts["model"] = _SqueezedSigmoid
    parts["batches"] = [(x, (y > 0).float()) for x, y in parts["batches"]]
    made = make_parts(**parts)
    assert checks.output_kind(made) == (0.0, 1.0)
    assert checks.loss_takes_logits(made) == 1.0
    inv = _investigate(**parts)
    assert inv.top == "wrong_loss", inv.text()
    assert inv.effects["gain[output_identity]"] > ex.CLEAR


def _blobs(n, classes, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, d, generator=g) * 2
    y = torch.randint(classes, (n,), generator=g)
    return centres[y] + torch.randn(n, d, generator=g), y


def _batches(x, y, size=32):
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(y), size)]


def test_batches_sorted_by_class_are_unmixed_with_many_classes_and_imbalance_is_not():
    """Sorted by class, 50 classes in batches of 32 put one or two classes in a batch
    (never 99% one class, the passive purity's reading); random batches hold nearly all
    of the data's label diversity, imbalanced or not."""
    from failurelab.investigation import checks

    x, y = _blobs(1600, 50)
    order = y.argsort(stable=True)
    sorted_parts = make_parts(**{**_parts(), "batches": _batches(x[order], y[order])})
    assert checks.batches_unmixed(sorted_parts) == 1.0
    assert checks.batches_unmixed(make_parts(**{**_parts(), "batches": _batches(x, y)})) == 0.0
    g = torch.Generator().manual_seed(1)
    skewed = (torch.rand(1600, generator=g) < 0.05).long()  # 95% one class, dealt at random
    assert checks.batches_unmixed(make_parts(**{**_parts(), "batches": _batches(x, skewed)})) == 0.0


def test_fifty_classes_stored_class_by_class_are_named_no_shuffle():
    x, y = _blobs(1600, 50)
    order = y.argsort(stable=True)

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return loss
    inv = _investigate(model=lambda: nn.Linear(16, 50),
                       optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                       batches=_batches(x[order], y[order]), step=step,
                       loss=nn.functional.cross_entropy, steps=50, seed=0)
    assert inv.top == "no_shuffle", inv.text()
    assert inv.effects["batches_unmixed"] == 1.0


# --- batches of one sample: a collate that keeps only the first ----------------------------

def _pictures(n=6400, classes=10, d=144, seed=0):
    """Pixel-like inputs in [0, 1]: a sparse pattern per class under heavy noise."""
    g = torch.Generator().manual_seed(seed)
    patterns = (torch.rand(classes, d, generator=g) < 0.3).float() * 0.6
    y = torch.randint(classes, (n,), generator=g)
    return (patterns[y] + 1.2 * torch.randn(n, d, generator=g)).clamp(0, 1), y


def _collated(keep=None, size=32):
    """Batches of `size`; `keep=1`: the collate bug that keeps the first sample only."""
    x, y = _pictures()
    return [(x[i:i + size][:keep], y[i:i + size][:keep]) for i in range(0, len(y), size)]


def _picture_parts(batches):
    return dict(model=lambda: nn.Sequential(nn.Linear(144, 64), nn.ReLU(), nn.Linear(64, 10)),
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
                batches=batches, step=_step, loss=nn.functional.cross_entropy, steps=200, seed=0)


def test_merging_batches_changes_their_size_only():
    single = make_parts(**_picture_parts(_collated(keep=1)))
    arm = arms.ARMS["batches_merged"].apply(single)
    assert _fields_changed(single, arm) == {"batches"}
    assert len(arm.batches) == len(single.batches)
    k = arms.MERGED  # batches of 1 sample: 64 of them per step
    for i in (0, 5, len(single.batches) - 1):  # consecutive batches, wrapping at the end
        take = [single.batches[(i + j) % len(single.batches)] for j in range(k)]
        assert torch.equal(arm.batches[i][0], torch.cat([x for x, _ in take]))
        assert torch.equal(arm.batches[i][1], torch.cat([y for _, y in take]))
    assert _same_state(_initial_state(single)[0], _initial_state(arm)[0])
    # batches larger than batch_too_small's threshold: not this arm's suspect
    assert arms.ARMS["batches_merged"].apply(make_parts(**_picture_parts(_collated()))) is None


def test_batches_of_one_sample_are_batch_too_small_and_batches_of_32_are_healthy():
    """A collate that keeps one sample of each batch of 32: the loss plateaus, one batch
    is memorised and permuted labels change nothing, as for labels that carry no signal;
    the same steps on batches merged to 64 samples learn (the gradient was noise).  The
    fixed collate reads healthy."""
    from failurelab.investigation import checks

    single = _picture_parts(_collated(keep=1))
    assert checks.batch_small(make_parts(**single)) == 1.0
    inv = _investigate(**single)
    assert inv.top == "batch_too_small", inv.text()
    assert inv.effects["gain[batches_merged]"] > ex.CLEAR
    fixed = _investigate(**_picture_parts(_collated()))
    assert fixed.top is None and fixed.effects["batch_small"] == 0.0


# --- the user's own evaluation: is the model in eval mode there? ----------------------------

def _dropout_mlp():
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 3))


def _accuracy(eval_first):
    def evaluate(model, val_batches):
        if eval_first:
            model.eval()
        with torch.no_grad():
            right = sum(int((model(x).argmax(1) == y).sum()) for x, y in val_batches)
        model.train()
        return right / sum(len(y) for _, y in val_batches)
    return evaluate


def test_an_evaluation_without_eval_is_eval_mode_forgotten_and_with_it_healthy():
    """Training is healthy either way; the user's evaluation, handed in, runs a model
    with dropout in training mode (named) or in eval mode (healthy).  Without a module
    whose forward depends on the mode, forgetting eval() changes nothing: not flagged."""
    from failurelab.investigation import checks

    val = _data(n=128, seed=1)
    forgot = {**_parts(model=_dropout_mlp), "val_batches": val, "evaluate": _accuracy(False)}
    careful = {**forgot, "evaluate": _accuracy(True)}
    plain = {**_parts(), "val_batches": val, "evaluate": _accuracy(False)}
    assert checks.evaluates_in_train_mode(make_parts(**forgot)) == 1.0
    assert checks.evaluates_in_train_mode(make_parts(**careful)) == 0.0
    assert checks.evaluates_in_train_mode(make_parts(**plain)) == 0.0
    assert math.isnan(checks.evaluates_in_train_mode(make_parts(**_parts(model=_dropout_mlp))))
    inv = _investigate(**forgot)
    assert inv.top == "eval_mode_forgotten" and inv.confidence == "high", inv.text()
    assert _investigate(**careful).top is None


def test_a_small_batch_at_a_rate_that_diverges_is_not_batch_too_small():
    """Batches of 2 with a rate far too large: merging the batches helps (3.6 spreads
    measured), but a tenth of the rate does too - the course's own experiment says the rate,
    not the batch's noise, is too large, and refutes batch_too_small."""
    parts = {**_picture_parts(_collated(size=2)), "steps": 100,
             "optimizer": lambda m: torch.optim.SGD(m.parameters(), lr=3.0, momentum=0.9)}
    inv = _investigate(**parts)
    assert inv.shape != "healthy", inv.text()
    assert inv.effects["gain[lr/10]"] > ex.CLEAR
    status = {j.fault: j.status for j in inv.judgements}
    assert status.get("batch_too_small") == "refuted" and inv.top != "batch_too_small"


# --- dropout: a rate past the common range, and the same run with dropout off ---------------

def _dropout_parts(p):
    return {**_parts(model=lambda: nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Dropout(p),
                                                 nn.Linear(64, 3))), "steps": 120}


def test_dropout_off_changes_the_rate_only_and_keeps_the_weights():
    parts = make_parts(**_dropout_parts(0.9))
    arm = arms.ARMS["dropout_off"].apply(parts)
    assert _fields_changed(parts, arm) == {"make_model"}
    assert _same_state(_initial_state(parts)[0], _initial_state(arm)[0])
    assert [m.p for m in arm.make_model().modules() if isinstance(m, nn.Dropout)] == [0.0]
    assert arms.ARMS["dropout_off"].apply(make_parts(**_parts())) is None  # no dropout


def test_dropout_of_nine_tenths_is_dropout_too_strong_and_a_fifth_is_not():
    """Dropout 0.9 on a 64-unit layer: the premise (a rate past 0.6, the fault's own
    threshold) is in the model, and the run with dropout off ends clearly lower.  At
    0.2, dropout off still lowers the training-mode loss (it always does), but the
    premise is absent, so the fault is refuted, not named."""
    from failurelab.investigation import checks

    strong = _dropout_parts(0.9)
    assert checks.dropout_strong(make_parts(**strong)) == 1.0
    inv = _investigate(**strong)
    assert inv.top == "dropout_too_strong", inv.text()
    assert inv.effects["gain[dropout_off]"] > ex.CLEAR
    mild = _investigate(**_dropout_parts(0.2))
    assert mild.effects["dropout_strong"] == 0.0 and mild.top != "dropout_too_strong"


# --- weight decay: strong enough to halve the weights within the run, and the same run without it

def _decay_parts(decay, kind="sgd"):
    def optimizer(m):
        if kind == "sgd":
            return torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=decay)
        return torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=decay)
    return {**_parts(), "optimizer": optimizer, "steps": 120}


def _gain(parts, arm):
    """`gain[arm]` measured as investigate measures it: against the spread of the baseline
    and two reseeded runs."""
    made = make_parts(**parts)
    runs, _ = runner.run_arms(made, [*arms.SEEDS, arm], 1, lambda run: None)
    ends = {name: ex.final_loss(run.history) for name, run in runs.items()}
    log = ex.on_log_scale(list(ends.values()))
    spread = ex.spread([ends[s] for s in arms.SEEDS], ex.loss_scale(runs["baseline"].history),
                       ends["baseline"], log)
    return ex.gain(ends["baseline"], ends[arm], spread, log)


def test_weight_decay_off_changes_the_decay_only():
    parts = make_parts(**_decay_parts(0.4))
    arm = arms.ARMS["weight_decay_off"].apply(parts)
    assert _fields_changed(parts, arm) == {"make_optimizer"}
    (s0, o0, k0), (s1, o1, k1) = _initial_state(parts), _initial_state(arm)
    assert _same_state(s0, s1) and k1 is None and k0 is None
    for g0, g1 in zip(o0.param_groups, o1.param_groups, strict=True):
        assert g0["weight_decay"] == 0.4 and g1["weight_decay"] == 0.0
        assert {k: v for k, v in g0.items() if k not in ("weight_decay", "params")} == \
               {k: v for k, v in g1.items() if k not in ("weight_decay", "params")}
    assert arms.ARMS["weight_decay_off"].apply(make_parts(**_parts())) is None  # no decay


def test_decay_strong_reads_lr_times_decay_over_the_steps():
    """lr x decay per step, compounded over the 120 steps, against the half the fault's
    signature reads: 0.05 x 0.4 = 2% per step keeps 9% of the weights (strong); SGD's
    common 5e-4 and AdamW's 0.1 at 3e-3 keep 99.7% / 96% (not); no decay is not
    measured (a penalty in the loss is not seen)."""
    from failurelab.investigation import checks
    from failurelab.investigation.study import WEIGHTS_KEPT

    assert WEIGHTS_KEPT == 0.5
    read = [checks.decay_strong(make_parts(**_decay_parts(d, k)), WEIGHTS_KEPT)
            for d, k in ((0.4, "sgd"), (5e-4, "sgd"), (0.1, "adamw"), (7.0, "adamw"))]
    assert read == [1.0, 0.0, 0.0, 1.0]
    assert math.isnan(checks.decay_strong(make_parts(**_decay_parts(0.0)), WEIGHTS_KEPT))
    # Adam's coupled L2 is divided by the gradient's RMS: lr x decay reads it weak, and
    # weak is not said (it could be stronger); strong still is
    coupled = {**_decay_parts(0.0), "optimizer": lambda m: torch.optim.Adam(
        m.parameters(), lr=1e-3, weight_decay=0.1)}
    assert math.isnan(checks.decay_strong(make_parts(**coupled), WEIGHTS_KEPT))
    coupled["optimizer"] = lambda m: torch.optim.Adam(m.parameters(), lr=1e-3, weight_decay=20)
    assert checks.decay_strong(make_parts(**coupled), WEIGHTS_KEPT) == 1.0


def test_weight_decay_that_halves_the_weights_is_named_and_a_common_one_is_left_alone():
    """SGD with 2% decay per step plateaus near chance; the same run without decay ends
    52 spreads lower (measured), far past the 4 a specific effect needs.  AdamW with
    7 x 3e-3 = 2% per step: 10 spreads.  On a healthy loop with a common decay (SGD 5e-4,
    AdamW 0.1) removing it moves the loss by 0.05 and 0.12 spreads (measured): no effect
    within the one spread that means "unchanged", and the premise is absent."""
    inv = _investigate(**_decay_parts(0.4))
    assert inv.top == "weight_decay_too_large" and inv.confidence == "high", inv.text()
    assert inv.effects["gain[weight_decay_off]"] > 2 * verdict.STRONG
    adamw = _investigate(**_decay_parts(7.0, "adamw"))
    assert adamw.top == "weight_decay_too_large", adamw.text()
    assert adamw.effects["gain[weight_decay_off]"] > verdict.STRONG
    for decay, kind in ((5e-4, "sgd"), (0.1, "adamw")):
        assert abs(_gain(_decay_parts(decay, kind), "weight_decay_off")) < ex.SAME
        healthy = _investigate(**_decay_parts(decay, kind))
        assert healthy.top is None and healthy.effects["decay_strong"] == 0.0


# --- a step that climbs its own loss: the gradient at optimizer.step() against the loss's

def _ce_step(penalty=None, negate=False, clip=None, smoothing=0.0):
    def step(model, optimizer, batch):
        x, y = batch
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y, label_smoothing=smoothing)
        if penalty:
            loss = loss + penalty * sum(p.pow(2).sum() for p in model.parameters())
        loss = -loss if negate else loss
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        return loss
    return step


def test_step_climbs_loss_sees_a_negated_loss_and_no_healthy_step():
    """The step's gradient against the gradient of `loss` (cross-entropy): cosine -1.0
    for -CE under SGD, Adam and dropout 0.9 (the same masks drawn), 0.99-1.0 for CE with
    label smoothing 0.2, an L2 penalty of 1e-2 written into the step, clipping at 0.01,
    dropout 0.9, batch norm, a forgotten zero_grad (measured): the 0.5 line sits half
    way on either side."""
    from failurelab.investigation import checks

    def read(**more):
        return checks.step_climbs_loss(make_parts(**{**_parts(), **more}))
    adam = {"optimizer": lambda m: torch.optim.Adam(m.parameters(), lr=1e-3)}
    drop = {"model": lambda: nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Dropout(0.9),
                                           nn.Linear(64, 3))}
    norm = {"model": lambda: nn.Sequential(nn.Linear(8, 64), nn.BatchNorm1d(64), nn.ReLU(),
                                           nn.Linear(64, 3))}
    assert [read(step=_ce_step(negate=True), **more) for more in ({}, adam, drop)] == [1.0] * 3
    healthy = [read(step=_ce_step(smoothing=0.2)), read(step=_ce_step(penalty=1e-2)),
               read(step=_ce_step(clip=0.01)), read(**drop), read(**norm),
               read(step=_forgets_zero_grad)]
    assert healthy == [0.0] * 6
    no_loss = {**_parts(step=_ce_step(negate=True)), "loss": None}
    assert math.isnan(checks.step_climbs_loss(make_parts(**no_loss)))


def test_a_negated_loss_is_named_even_where_the_curve_reads_healthy():
    """-CE under SGD diverges (the passive reading names negated_loss at medium); under
    Adam at 1e-3 for 120 steps the loss only drifts from -1.1 to -2.7, which the passive
    reading calls healthy.  The step climbing its own loss names it in both."""
    for more in ({}, {"optimizer": lambda m: torch.optim.Adam(m.parameters(), lr=1e-3)}):
        inv = _investigate(**{**_parts(step=_ce_step(negate=True)), "steps": 120, **more})
        assert inv.effects["step_climbs_loss"] == 1.0
        assert inv.top == "negated_loss" and inv.confidence == "high", inv.text()


# --- an output normalised across the batch: outside the catalogue, and said so

def _head(last):
    return lambda: nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3), *last)


def test_normalised_over_batch_sees_a_softmax_over_dim_0_only():
    """Softmax / log-softmax over dim 0 make every class column sum to 1 over the batch
    (exactly, within float32 rounding); over dim 1, plain logits, or a 2-class head of
    the same batch do not (their columns sum to anything)."""
    from failurelab.investigation import checks

    def read(*last):
        return checks.normalised_over_batch(make_parts(**_parts(model=_head(last))))
    assert read(nn.LogSoftmax(dim=0)) == 1.0 and read(nn.Softmax(dim=0)) == 1.0
    assert read(nn.LogSoftmax(dim=1)) == 0.0 and read(nn.Softmax(dim=1)) == 0.0
    assert read() == 0.0
    tokens = [(torch.randint(0, 20, (16, 6)), torch.randint(0, 4, (16, 6)))] * 4

    def tagger(dim):  # (B, T, tags) scores, as a sequence tagger makes them
        return lambda: nn.Sequential(nn.Embedding(20, 8), nn.Linear(8, 4), nn.LogSoftmax(dim))
    assert [checks.normalised_over_batch(make_parts(**{**_parts(model=tagger(d)),
                                                       "batches": tokens}))
            for d in (0, -1)] == [1.0, 0.0]


def test_a_log_softmax_over_the_batch_gets_no_confident_cause():
    """LogSoftmax(dim=0) before NLL: the report says the output is normalised across
    the batch, no cause is named and the loop is not called healthy (no catalogue fault
    has that mechanism, and a classifier normalised across its batch is broken however
    its loss falls)."""
    def step(model, optimizer, batch):
        x, y = batch
        optimizer.zero_grad()
        loss = nn.functional.nll_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss
    inv = _investigate(**{**_parts(model=_head([nn.LogSoftmax(dim=0)]), step=step),
                          "loss": nn.functional.nll_loss, "steps": 120})
    assert inv.effects["normalised_over_batch"] == 1.0
    assert inv.top is None and inv.confidence == "low" and not inv.healthy, inv.text()
    assert "normalised across the batch" in inv.text()
