"""Diagnosis: the loss-curve shape and the likely cause, from telemetry alone.

`diagnose` never looks at a recipe or a fault name: it reads a history (from `fl.run`
or from a `Monitor` on any loop), names the loss-curve shape of the course's taxonomy,
and ranks the catalogue's faults by their signatures (the same ones `fl.check`
asserts).  Where the telemetry cannot separate causes, it says so and names the
experiment that can.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from .. import catalogue
from ..basics.text import Text, language, say
from ..evidence import logs, shapes
from ..evidence.columns import GROUP
from ..evidence.quantities import measure
from ..evidence.runs import history_of
from .fault import accepted_shapes

# --- cause ranking (scores are graded margins, see `signatures`) ----------------------
LOOKALIKE_GAP = 0.5  # fired causes within this margin of the best one are look-alikes
HIGH = 1.0  # the weakest mechanism lies as far past its threshold as the threshold lies
#             past every healthy run: named with high confidence when nothing rivals it
LOW = 0.25  # weaker evidence than this is a hint, not an answer

# What to try first when no signature explains an unhealthy curve (the course's order).
NEXT_STEP = {
    "nonfinite": Text("look at the batch of the first non-finite step for NaN/Inf inputs, "
                      "then divide the learning rate by 10",
                      "先检查第一个非有限值出现的那一步的批次里有没有 NaN/Inf 输入，再把学习率 "
                      "(learning rate) 除以 10"),
    "diverging": Text("divide the learning rate by 10 (the cheapest test), then check the "
                      "gradient norms layer by layer",
                      "把学习率除以 10（最便宜的检验），然后逐层检查梯度范数 (gradient norm)"),
    "oscillating": Text("lower the learning rate or raise the batch size, and check that "
                        "the data are shuffled",
                        "降低学习率或增大批大小 (batch size)，并确认数据已经打乱"),
    "stepwise": Text("inspect the batches around the jumps: their label mix, their inputs",
                     "检查跳变前后的批次：它们的标签构成和输入"),
    "plateau": Text("run the small-batch overfit test: a model that cannot memorise 64 "
                    "samples has an implementation bug; one that can needs its data or rate "
                    "checked",
                    "做小批量过拟合测试 (small-batch overfit test)：记不住 64 个样本的模型有实现"
                    "错误；记得住的，就要检查数据或学习率"),
    "degrading": Text("compare training and validation data and labels; then regularise or "
                      "get more data",
                      "对比训练集与验证集的数据和标签；然后加正则化或获取更多数据"),
}

# What `str(diagnosis)` says, line by line.
LINES = {
    "shape": Text("shape: {shape} - {evidence}", "曲线形状：{shape}。{evidence}"),
    "borderline": Text("{shape} (borderline {other})", "{shape}（接近 {other}）"),
    "no_cause": Text("cause: no signature of the catalogue fired",
                     "原因：目录中没有任何故障的特征 (signature) 成立"),
    "cause": Text("cause: {name} (margin {score:.2f}) - {evidence}",
                  "原因：{name}（裕度 {score:.2f}）。{evidence}"),
    "lookalikes": Text("look-alikes: {names}", "相似的原因：{names}"),
    "experiment": Text("next experiment: {text}", "下一个实验：{text}"),
    "missing": Text("not recorded: {names}", "未记录：{names}"),
    "unchecked": Text("not checkable without them: {names}", "缺少这些记录而无法检验：{names}"),
    "confidence": Text("confidence: {level}", "置信度：{level}"),
}
CONFIDENCE = {"high": Text("high", "高"), "medium": Text("medium", "中"),
              "low": Text("low", "低")}
# The column groups (see evidence.columns) a history may lack (a plain Monitor has no
# validation or timing): when absent, the diagnosis says so, in this order.
GROUP_NAMES = {
    "gradients": Text("gradients", "梯度"), "validation": Text("validation", "验证"),
    "batch labels": Text("batch labels", "批次标签"), "timing": Text("timing", "计时"),
    "input statistics": Text("input statistics", "输入统计"),
    "output gradient": Text("output gradient", "输出梯度"), "padding": Text("padding", "填充"),
    "activations": Text("activations (no Sigmoid/Tanh/ReLU output seen)",
                        "激活值（未见 Sigmoid/Tanh/ReLU 的输出）"),
}
ACTIVATION_PREFIX = "act_mean/"  # every activation instrument writes one such column


@dataclass(frozen=True)
class Diagnosis:
    """What a history says: its shape, the ranked causes and how sure that is."""

    shape: str  # healthy | diverging | oscillating | plateau | stepwise | degrading | nonfinite
    shape_evidence: str  # the measurements that decided the shape
    causes: list[tuple[str, float, str]]  # (fault name, score, evidence), best first
    lookalikes: list[str] = field(default_factory=list)  # causes the telemetry can't separate
    experiment: str | None = None  # the single-factor experiment that would tell
    confidence: str = "high"  # high | medium | low
    missing: list[str] = field(default_factory=list)  # column groups absent from the history
    shape_alternative: str | None = None  # the other side of a borderline shape
    unchecked: list[str] = field(default_factory=list)  # faults this history cannot test

    @property
    def top(self) -> str | None:
        """The best-supported fault, or None when no signature fired."""
        return self.causes[0][0] if self.causes else None

    lang: str = "en"  # the language of the evidence and of str()

    def __str__(self) -> str:
        return self.text(self.lang)

    def text(self, lang: str | None = None) -> str:
        """The diagnosis as lines of text in `lang` (evidence stays in `self.lang`)."""
        def line(key, **values):
            return LINES[key].say(lang, **values)
        shape = shapes.name(self.shape, lang)
        if self.shape_alternative:
            shape = line("borderline", shape=shape,
                         other=shapes.name(self.shape_alternative, lang))
        lines = [line("shape", shape=shape, evidence=self.shape_evidence)]
        if not self.causes:
            lines.append(line("no_cause"))
        for name, score, evidence in self.causes:
            lines.append(line("cause", name=name, score=score, evidence=evidence))
        if self.lookalikes:
            lines.append(line("lookalikes", names=", ".join(self.lookalikes)))
        if self.experiment:
            lines.append(line("experiment", text=self.experiment))
        if self.missing:
            names = ", ".join(say(GROUP_NAMES, m, lang) for m in self.missing)
            lines.append(line("missing", names=names))
        if self.unchecked and not self.causes:
            lines.append(line("unchecked", names=", ".join(self.unchecked)))
        lines.append(line("confidence", level=say(CONFIDENCE, self.confidence, lang)))
        return "\n".join(lines)


def diagnose(history, faults: dict | None = None, lang: str | None = None) -> Diagnosis:
    """Diagnose a `Run` or a history DataFrame (from `fl.run` or `fl.Monitor`), or the
    path of a log the job already keeps: a TensorBoard event file or run folder, a
    metrics CSV (Lightning's CSVLogger) or a saved history (see `evidence.logs`).

    `faults`: the catalogue to rank (default: `fl.FAULTS`, calibrated on the healthy
    population); the benchmark passes one calibrated without the family it scores.
    `lang`: the language of the evidence ("en", "zh"; default: $FAILURELAB_LANG or en)."""
    lang = language(lang)
    history = _history(history)
    faults = catalogue.FAULTS if faults is None else faults
    values = measure(history)
    shape, evidence, alternative = shapes.classify(values, lang)
    fired, unchecked = _evaluate(history, values, faults, lang)
    causes = [(e.fault, e.score, e.sentence) for e in fired]
    missing = [name for name in GROUP_NAMES if name != "activations"
               and not GROUP[name].present(history.columns)
               and not (name == "padding" and values["input_is_tokens"] == 0)]
    activations = [c for c in history.columns if str(c).startswith(ACTIVATION_PREFIX)]
    if history[activations].isna().all().all():  # none hooked, or none read as one
        missing.append("activations")
    if fired:  # other causes whose evidence is nearly as strong
        explained = faults[fired[0].fault].explains
        lookalikes = [e.fault for e in fired[1:] if fired[0].score - e.score < LOOKALIKE_GAP
                      and e.fault not in explained]
    elif shape != "healthy":  # an unexplained failure: untestable faults that fit it
        lookalikes = [name for name in unchecked if _shows(faults[name], shape)]
    else:
        lookalikes = []
    if causes:
        experiment = faults[causes[0][0]].text("experiment", lang)
        confidence = _confidence(fired[0].score, bool(lookalikes))
        if fired[0].latent or not _shows(faults[causes[0][0]], shape):
            # the harm not seen yet, or not the curve this fault makes
            confidence = "low" if confidence == "low" else "medium"
        if fired[0].by_elimination:  # what is left, which a bug outside the catalogue
            confidence = "low"          # would leave too: test it before believing it
    else:
        experiment = NEXT_STEP[shape].say(lang) if shape in NEXT_STEP else None
        confidence = "low" if shape != "healthy" else "medium" if unchecked else "high"
    return Diagnosis(shape, evidence, causes, lookalikes, experiment, confidence, missing,
                     alternative, unchecked, lang)


def _confidence(score: float, rivalled: bool) -> str:
    """high: strong evidence nothing rivals; low: evidence barely past its threshold."""
    if score < LOW:
        return "low"
    return "high" if score >= HIGH and not rivalled else "medium"


def _history(obj) -> pd.DataFrame:
    if logs.is_log(obj):  # a path: a TensorBoard log, a metrics CSV or a history CSV
        return _history(logs.read_log(obj))
    history = history_of(obj, "diagnose", "a Run, a history DataFrame or a log's path")
    if "loss" not in history.columns:
        raise ValueError("diagnose needs a history with a 'loss' column (one row per step)")
    if history.empty:
        raise ValueError("diagnose needs at least one recorded step; this history is empty")
    if len(history) < 2 and math.isfinite(float(history["loss"].iloc[0])):
        raise ValueError("diagnose needs at least 2 recorded steps to see a trend; this "
                         "history has 1 (a single finite loss says nothing about training)")
    return history


def _evaluate(history: pd.DataFrame, values: dict[str, float], faults: dict, lang: str):
    """Fired signatures (best first), and the names of faults that lack the columns to
    be tested but are contradicted by nothing that was measured."""
    fired, unchecked = [], []
    for fault in faults.values():
        ev = fault.evidence(history, dict(values), lang)
        if ev.fired:
            fired.append(ev)
        elif ev.missing and _holds_where_measured(fault, ev):
            unchecked.append(fault.name)
    fired.sort(key=lambda e: -e.score)
    return _explained_last(fired, faults), unchecked


def _explained_last(fired: list, faults: dict) -> list:
    """Move each fired fault ahead of the fired faults its mechanism explains: their
    evidence is its consequence, so their score says nothing against it."""
    order = list(fired)
    for e in fired:
        explained = [i for i, other in enumerate(order)
                     if other.fault in faults[e.fault].explains]
        if explained and min(explained) < order.index(e):
            order.remove(e)
            order.insert(min(explained), e)
    return order


def _shows(fault, shape: str) -> bool:
    """Does this fault produce the observed loss-curve shape?"""
    return shape in accepted_shapes(fault)


def _holds_where_measured(fault, ev) -> bool:
    """Every condition that could be measured holds."""
    measured = [c for c in fault.signature.conditions if c.quantity not in ev.missing]
    return all(c.margin(ev.values[c.quantity]) >= 0 for c in measured)
