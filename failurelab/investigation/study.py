"""`investigate`: the passive reading proposes, single-factor experiments decide.

1. The baseline and the same seed again (reproducibility), in parallel.
2. `fl.diagnose` on the baseline: a healthy curve with no cause fired ends here.
3. The hypotheses (passive causes, then the shape's usual suspects) name the arms to
   run; they run with two reseeded baselines, whose spread every effect is read
   against, and the checks of the parts (data, gradient flow).
4. Each hypothesis is confirmed, refuted or left open by its declared outcomes.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import pandas as pd
import torch

from .. import catalogue
from ..catalogue.diagnosis import Diagnosis, diagnose
from ..evidence import experiments as ex
from ..evidence.quantities import dead_start, eval_mode_share, saturation_start
from . import checks, report, runner, verdict
from .arms import ARMS, SEEDS
from .errors import PartsError
from .parts import build, make_parts


def _threshold(fault: str, quantity: str) -> float:
    """A threshold of a fault's own signature, read from it (one number, one place)."""
    return next(c.physical or c.threshold for c in catalogue.FAULTS[fault].signature.conditions
                if c.quantity == quantity)


# How far validation inputs must sit from the training inputs to be "shifted".
VAL_SHIFT = _threshold("val_not_normalized", "eval_input_shift")
IN_EVAL = _threshold("train_mode_not_restored", "eval_mode_share")  # steps in eval mode
WEIGHTS_KEPT = _threshold("weight_decay_too_large", "weight_norm_change")  # weights halved


@dataclass
class Investigation:
    """What the experiments showed.  Like a `Diagnosis`: `.shape`, `.top` (a fault name
    or None), `.confidence`; plus `.experiments` (one row per arm), `.histories`
    (arm -> history), `.diagnosis` (the passive reading of the baseline)."""

    diagnosis: Diagnosis
    top: str | None
    confidence: str
    experiments: pd.DataFrame
    histories: dict[str, pd.DataFrame]
    judgements: list = field(default_factory=list)
    effects: dict[str, float] = field(default_factory=dict)
    spread: float = math.nan
    log_scale: bool = True  # effects compare final losses as logarithms
    reproducible: bool | None = None
    flow: checks.Flow | None = None
    tested: bool = True  # False: `top` comes from the passive reading alone
    notes: list[str] = field(default_factory=list)  # sequential runs, interruption, errors
    lang: str = "en"
    why: str = verdict.NONE  # how specific the evidence for `top` is (verdict.decide)

    @property
    def shape(self) -> str:
        return self.diagnosis.shape

    @property
    def healthy(self) -> bool:
        return self.top is None and self.confidence != "low"

    def text(self, lang: str | None = None) -> str:
        return report.text(self, lang or self.lang)

    def __str__(self) -> str:
        return self.text()

    def to_html(self, path) -> None:
        report.to_html(self, path, self.lang)


def investigate(model=None, optimizer=None, batches=None, step=None, loss=None,
                val_batches=None, inputs=None, targets=None, steps=200, seed=0, *,
                datamodule=None, evaluate=None, workers: int | None = None,
                progress: bool = True, lang: str | None = None,
                faults: dict | None = None) -> Investigation:
    """Investigate your own training loop (see docs/investigate.md).

    `model`: () -> nn.Module (or a LightningModule); `optimizer`: (model) -> Optimizer
    or (Optimizer, scheduler); `batches`: re-iterable of batches; `step`: (model,
    optimizer, batch) -> loss, your step as written; `loss`: (output, target) -> loss
    (enables the reference-step experiment); `evaluate`: (model, val_batches) ->
    anything, your evaluation as written (is the model in eval mode there?); `steps`:
    steps per run; `workers`:
    processes (default: up to 4 cores); `progress`: one line per arm on stderr."""
    faults = catalogue.FAULTS if faults is None else faults
    parts = make_parts(model, optimizer, batches, step, loss, val_batches, inputs, targets,
                       steps, seed, datamodule, evaluate)
    workers = runner.default_workers() if workers is None else max(1, int(workers))
    notes: list[str] = []
    if workers > 1 and not runner.parallel_possible():
        notes.append("arms ran one after another (this platform cannot fork workers)")
    say = _progress(progress, lang)
    with torch.random.fork_rng():
        _try_build(parts)  # a clean error for parts that do not work; torch's lazy
        #                    imports are paid once here, not in every forked worker
        runs, stopped = runner.run_arms(parts, ["baseline", "repeat"], workers, say)
        base = runs.get("baseline")
        if not readable(base):
            raise_for_baseline(base, stopped)
        passive = diagnose(base.history, faults, lang)
        measured = part_checks(parts)
        premises = {**measured, "inputs_unscaled": checks.inputs_unscaled(base.history)}
        hyps = verdict.hypotheses(passive, faults, premises)
        wanted = verdict.arms_needed(hyps, faults) if hyps else []
        more = [a for a in wanted if a not in runs
                and (a != "float32" or base.low_precision)]  # float32 undoes low precision only
        if more and not stopped:
            extra, stopped = runner.run_arms(parts, more, workers, say)
            runs.update(extra)
        flow = checks.gradient_flow(parts) if not stopped else None
    if stopped:
        notes.append("stopped by Ctrl-C: the arms not run are missing")
    return assemble(measured, passive, hyps, runs, flow, faults, notes, lang)


def part_checks(parts) -> dict[str, float]:
    """The checks that read the parts themselves (no training)."""
    above, below = checks.init_scale(parts)
    activation, probabilities = checks.output_kind(parts)
    return {"nonfinite_inputs": checks.nonfinite_inputs(parts),
            "weights_above_default": above, "weights_below_default": below,
            "val_inputs_shifted": checks.val_inputs_shifted(parts, VAL_SHIFT),
            "samples_mixed": checks.samples_mixed(parts),
            "targets_misshaped": checks.targets_misshaped(parts),
            "output_activation": activation, "output_probabilities": probabilities,
            "loss_takes_logits": checks.loss_takes_logits(parts),
            "batches_unmixed": checks.batches_unmixed(parts),
            "batch_small": checks.batch_small(parts),
            "evaluates_in_train_mode": checks.evaluates_in_train_mode(parts),
            "dropout_strong": checks.dropout_strong(parts),
            "decay_strong": checks.decay_strong(parts, WEIGHTS_KEPT),
            "step_climbs_loss": checks.step_climbs_loss(parts),
            "normalised_over_batch": checks.normalised_over_batch(parts),
            "padding_hides_tokens": checks.padding_hides_tokens(parts)}


def _try_build(parts) -> None:
    try:
        build(parts)
    except PartsError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's factory failed: one line says so
        raise PartsError(f"making the model or its optimizer failed: "
                         f"{type(exc).__name__}: {exc}".splitlines()[0]) from None


def readable(base) -> bool:
    """Can the diagnosis read the baseline: two steps, or one whose loss was already
    non-finite (a run that blows up on its first step is a finding, not bad input)?"""
    if base is None or base.history.empty:
        return False
    return len(base.history) >= 2 or not math.isfinite(float(base.history["loss"].iloc[0]))


def raise_for_baseline(base, stopped: bool) -> None:
    if stopped:
        raise KeyboardInterrupt
    why = base.error if base is not None and base.error else "it recorded fewer than 2 steps"
    raise PartsError(f"your baseline run could not be read: {why}")


def assemble(measured, passive, hyps, runs, flow, faults, notes, lang) -> Investigation:
    """The effects, the judgements and the verdict, from the arms' runs and the checks
    (`measured`: `part_checks`)."""
    base = runs["baseline"].history
    scale = ex.loss_scale(base)
    ends = {name: ex.final_loss(r.history) for name, r in runs.items() if not r.skipped}
    log = ex.on_log_scale(list(ends.values()))
    spread = ex.spread([ends[s] for s in SEEDS if s in ends], scale, ends["baseline"], log)
    effects = {f"gain[{arm}]": ex.gain(ends["baseline"], ends[arm], spread, log)
               for arm in ex.GAIN_ARMS if arm in ends}
    effects.update(measured)
    effects["inputs_unscaled"] = checks.inputs_unscaled(base)
    effects["grads_carried"] = checks.grads_carried(base)
    effects["lr_decayed"] = ex.lr_decayed(base)
    effects["dead_units"] = dead_start(base)
    effects["saturated_units"] = saturation_start(base)
    effects["steps_in_eval"] = checks.steps_in_eval(base, IN_EVAL, eval_mode_share)
    if flow is not None:
        effects["no_grad_at_step"] = flow.no_grad_at_step
        effects["grad_not_optimized"] = flow.grad_not_optimized
    reproducible = _bitwise(runs.get("repeat"), runs["baseline"])
    judgements = [verdict.judge(h, faults[h.fault], effects) for h in hyps]
    helped = {arm for arm in ex.GAIN_ARMS if arm not in verdict.NOT_A_REMEDY
              and effects.get(f"gain[{arm}]", math.nan) > ex.CLEAR}
    top, confidence, deciding, why = verdict.decide(judgements, passive, bool(reproducible),
                                                    helped)
    confidence = healthy_confidence(passive, top, judgements, reproducible) or confidence
    if top is None and confidence == "high" and flow is not None and (
            flow.without_grad or flow.unregistered):
        confidence = "medium"  # healthy-looking, but part of the model never learns
    if top is None and effects.get("normalised_over_batch") == 1.0:
        confidence = "low"  # whatever the curve: a classifier normalised across its batch
        #                     is broken (alone, every sample's scores are uniform)
    for name, r in runs.items():
        if r.error:
            notes.append(f"{name}: {r.error}" if r.skipped else f"{name}: ended by {r.error}")
    table = report.table(runs, ends, effects, spread, judgements, lang)
    return Investigation(passive, top, confidence, table,
                         {n: r.history for n, r in runs.items() if not r.skipped},
                         judgements, effects, spread, log, reproducible, flow,
                         tested=deciding is None or deciding.status == "confirmed",
                         notes=notes, lang=report.language(lang), why=why)


def healthy_confidence(passive, top, judgements, reproducible) -> str | None:
    """How sure "healthy" is, when the curve looks healthy and no experiment confirmed a
    cause: high on a reproducible run the passive reading also found nothing wrong in;
    low where the passive reading named a cause that no experiment could confirm (an arm
    that fails to confirm is not evidence of health: its budget may be too short to show
    the effect).  None when the verdict is not "healthy"."""
    if passive.shape != "healthy" or top is not None or any(
            j.status == "confirmed" for j in judgements):
        return None
    if passive.top is not None:
        return "low"
    return "high" if reproducible else "medium"


def _bitwise(repeat, baseline) -> bool | None:
    """Did the same seed give the same losses, bit for bit?"""
    if repeat is None or repeat.history.empty:
        return None
    a, b = repeat.history["loss"].to_numpy(), baseline.history["loss"].to_numpy()
    return len(a) == len(b) and bool(((a == b) | ((a != a) & (b != b))).all())


def _progress(enabled: bool, lang):
    def say(run) -> None:
        if enabled:
            print(report.progress_line(run, lang), file=sys.stderr, flush=True)
    return say


__all__ = ["ARMS", "Investigation", "investigate"]
