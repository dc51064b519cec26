"""Mystery runs for the capstone: one catalogue fault, picked by a seed, run blind.

The student gets the telemetry and nothing else, diagnoses it, and writes the answer
down before the reveal:

    m = fl.mystery(7)                       # m.history is all there is to read
    fl.diagnose(m)                          # ...or plots, or their own checks
    ws.predict(m.key, cause="huge_lr")      # the answer, written before the reveal
    print(fl.reveal(m, worksheet=ws))       # what it was, and whether the answer matched

The pick shuffles a frozen pool (`POOL`) with `random.Random`, which is stable across
processes and Python versions (unlike the salted built-in `hash`), so a seed names the
same mystery on every machine and through every upgrade of the catalogue.  The answer never
sits in a public attribute or the repr: a student who prints the object learns nothing.
"""

from __future__ import annotations

import html
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from ..basics.recipes import check_seed
from ..basics.text import Text
from ..catalogue import FAULTS
from ..catalogue.faults import Fault, accepted_shapes, get
from ..evidence.quantities import LATE, MIN_WINDOW, QUANTITIES, measure
from ..evidence.shapes import name as shape_name
from ..evidence.signatures import Condition
from ..views.tables import html_table
from .worksheet import Worksheet, check_cause

# The default draw, frozen: the catalogue as it stood when mysteries were first dealt,
# in its order.  A seed must name the same fault for a whole term, through upgrades,
# because a student's written answer is graded against it; a shuffle over `FAULTS`
# itself re-dealt every seed whenever a fault was added.  Later faults are drawn with
# `faults=`; growing this tuple re-deals every seed, a decision for between terms.
POOL = ("no_zero_grad", "huge_lr", "saturated_sigmoid", "shuffled_labels", "no_input_norm",
        "fp16_no_scaling", "bad_padding_mask", "lr_too_small", "class_imbalance",
        "nan_in_data", "dead_relu", "bad_init", "wrong_loss", "dropout_too_strong",
        "eval_mode_forgotten", "no_shuffle", "label_offset", "fp16_overflow", "overfitting",
        "slow_data", "weight_decay_too_large", "batch_too_small", "exploding_gradients",
        "inverted_padding_mask", "zero_grad_misplaced", "init_too_small", "label_leakage",
        "lr_decayed_too_early", "summed_loss", "negated_loss", "accumulation_not_divided",
        "val_not_normalized", "clip_before_unscale", "log_softmax_by_hand",
        "train_mode_not_restored", "params_not_in_optimizer", "output_activation_mismatch",
        "target_broadcast")
KEY_PREFIX = "mystery-"  # worksheet experiment names: "mystery-7"
MIDDLE = 0.1  # the readout's middle column: a tenth of the run around its middle step
SHAPE_FLAG = "unhealthy_curve"  # the shape rules' verdict: the student's to work out
# Labels for the shape rules' inputs (shapes.INPUTS) that no signature condition names.
SHAPE_INPUTS = {"loss_end_spread": Text("relative spread of the loss over the last 20%",
                                        "最后 20% 步数内损失的相对离散程度"),
                "negative_loss_growth": Text("how many times its negative start the loss "
                                             "ended below zero",
                                             "损失最终低于零的程度，是其负初始值的多少倍"),
                "val_loss_rise": Text("validation loss rise from its minimum",
                                      "验证损失比其最低点的升幅"),
                "loss_late_fall": Text("share of the loss's fall that came in the second half",
                                       "损失降幅中出现在后半程的比例"),
                "val_loss_start": Text("first validation loss", "第一次的验证损失"),
                "val_loss_progress": Text("share of the first validation loss removed",
                                          "第一次验证损失被消除的比例")}

# What a student may read over time, by column (a "prefix/" takes the worst layer):
# measured telemetry only.  Columns that echo a recipe field (the batch size) are not
# drawn over time; the batch size is one of the `measurements` (counted from the input
# batches) because batch_too_small's signature reads it.  Nor is the curve's shape here:
# the student is asked to predict it.
INSTRUMENTS = (("loss", Text("training loss", "训练损失")),
               ("val_loss", Text("validation loss", "验证损失")),
               ("val_acc", Text("validation accuracy", "验证准确率")),
               ("grad_norm", Text("gradient norm", "梯度范数 (gradient norm)")),
               ("grad_cosine", Text("gradient cosine", "相邻梯度余弦 (gradient cosine)")),
               ("update_ratio", Text("update ratio", "更新比 (update ratio)")),
               ("weight_norm", Text("weight norm", "权重范数 (weight norm)")),
               ("zero_grad_frac", Text("share of zero gradients", "梯度为零的比例")),
               ("saturated_frac/", Text("saturated share (worst layer)",
                                        "饱和比例（最差的一层）")),
               ("dead_frac/", Text("dead ReLU share (worst layer)",
                                   "死 ReLU 比例（最差的一层）")),
               ("input_absmax", Text("largest |input|", "最大 |输入|")),
               ("input_std_ratio", Text("feature std spread", "特征标准差之比")),
               ("input_nonfinite", Text("non-finite inputs", "非有限输入")),
               ("label_purity", Text("main class share", "批次中主类别的比例")),
               ("pad_attention", Text("attention on pads", "落在填充位上的注意力")),
               ("t_data", Text("data time (s/step)", "数据加载时间（秒/步）")),
               ("nonfinite", Text("non-finite values", "非有限值")))

READOUT = {
    "over_time": Text("The instruments at the start (first {start} steps), middle and end "
                      "(last {end:.0%}) of the run, medians",
                      "运行开始（最前 {start} 步）、中段和结束（最后 {end:.0%}）时的仪表读数，取中位数"),
    "measured": Text("Every quantity the catalogue's signatures and the loss-curve rules read, "
                     "measured as fl.diagnose measures it (what fault-free runs read: "
                     "docs/signatures.md)",
                     "目录中各特征和损失曲线规则读取的每一个量，按 fl.diagnose 的方式测量（无故障运行的读数见 "
                     "docs/signatures.md）"),
}

REVEAL = {
    "no_answer": Text("No answer was given.", "没有作答。"),
    "answer": Text("Your answer: {answer} - {verdict}.", "你的答案：{answer}。{verdict}。"),
    "correct": Text("correct", "正确"), "wrong": Text("not it", "不对"),
    "lookalike": Text("not it, though a look-alike: {fault} produces the evidence of "
                      "{answer} (its curve and its instruments), so only the distinguishing "
                      "experiment below tells the two apart",
                      "不对，但这是一个相似的原因：{fault} 会产生 {answer} 的证据（它的曲线和它的仪表读数），"
                      "所以只有下面的区分实验才能把两者分开"),
    "was": Text("{key} was {fault}: {title}.", "{key} 是 {fault}：{title}。"),
    "symptom": Text("Symptom: {text}", "现象：{text}"),
    "shape": Text("Shape: {text}", "曲线形状：{text}"),
    "cause": Text("Cause: {text}", "原因：{text}"),
    "experiment": Text("Distinguishing experiment: {text}", "区分实验：{text}"),
    "fix": Text("Fix: {text}", "修复动作：{text}"), "or": Text(" or ", " 或 "),
}


@dataclass(frozen=True, eq=False, repr=False)
class Mystery:
    """A blind run: its seed, its task and its telemetry; the answer stays hidden."""

    seed: int
    task: str  # "tabular" | "sequence": which model and data the telemetry comes from
    history: pd.DataFrame  # one row per step, as `Run.history`; no recipe attached
    _fault: str = field(default="", compare=False)  # the answer; read it with `reveal`

    @property
    def key(self) -> str:
        """The worksheet experiment name for this mystery."""
        return key_for(self.seed)

    def __repr__(self) -> str:
        return f"Mystery(seed={self.seed}, task={self.task!r}, key={self.key!r})"

    def readout(self, lang: str | None = None) -> pd.DataFrame:
        """Each instrument at the start, middle and end of the run (see `readout`)."""
        return readout(self.history, lang)

    def measurements(self, lang: str | None = None) -> pd.DataFrame:
        """Every quantity a signature reads, measured (see `measurements`)."""
        return measurements(self.history, lang)

    def _repr_html_(self) -> str:
        """In a notebook: both tables, in the notebook's language."""
        def number(value):
            return f"{value:.4g}" if isinstance(value, float) else value
        over_time = self.readout().map(number).set_index("instrument")
        measured = self.measurements().map(number).set_index("quantity")
        return (f"<p><code>{html.escape(repr(self))}</code></p>"
                + html_table(over_time, READOUT["over_time"].say(start=MIN_WINDOW, end=LATE))
                + html_table(measured, READOUT["measured"].say()))


def readout(history: pd.DataFrame, lang: str | None = None) -> pd.DataFrame:
    """What a student reads before guessing: every recorded instrument over the steps
    the diagnosis reads as the start (the first MIN_WINDOW steps, where
    `update_ratio_start` looks), a window at the middle, and the end (the last LATE
    share, where `loss_end` and `dead_end` look).  Medians: one noisy step would mislead;
    counts of non-finite values are maxima, so a single NaN is not hidden.  `lang` names
    the instruments; the column names are the same in every language."""
    rows = []
    for column, label in INSTRUMENTS:
        series = _column(history, column)
        if series is not None and len(series):
            rows.append((label.say(lang), *_windows(series, "nonfinite" in column)))
    return pd.DataFrame(rows, columns=["instrument", "start", "middle", "end"])


def measurements(history: pd.DataFrame, lang: str | None = None) -> pd.DataFrame:
    """Every quantity a catalogue signature or the shape rules read, measured on
    `history` by the same functions `diagnose` uses (`evidence.quantities`), so that a
    mystery can be solved from what it shows: the loss weight per step, the backward
    passes per step, the update ratio of the first steps...  The rows are the same for
    every fault (only a quantity the history cannot give, NaN, is left out), so which
    rows appear says nothing about the answer.  Left out: `unhealthy_curve`, the shape
    itself, which the student is asked to name from the shape rules' inputs shown here.
    `quantity` is the name docs/signatures.md lists; `measurement` names it in `lang`."""
    values = measure(history, list(SIGNATURE_QUANTITIES))
    rows = [(name, value, _label(SIGNATURE_QUANTITIES[name], lang))
            for name, value in values.items() if value == value]
    return pd.DataFrame(rows, columns=["quantity", "value", "measurement"])


def _label(condition: Condition, lang: str | None) -> str:
    """"gradient norm x its step-0 value": the label with its unit, where it has one."""
    suffix = condition.text("suffix", lang).strip()
    return condition.text("label", lang) + (f" {suffix}" if suffix else "")


def _signature_quantities() -> dict[str, Condition]:
    """Each quantity any fault's signatures (main and other routes) or the shape rules
    read, but the shape itself, in the vocabulary's order, each with a condition that
    reads it (for its label)."""
    first: dict[str, Condition] = {}
    for fault in FAULTS.values():
        for signature in fault.signatures:
            for condition in signature.conditions:
                first.setdefault(condition.quantity, condition)
    for name, label in SHAPE_INPUTS.items():
        first.setdefault(name, Condition(name, ">=", 1.0, label.en, "", label_zh=label.zh))
    return {name: first[name] for name in QUANTITIES if name in first and name != SHAPE_FLAG}


SIGNATURE_QUANTITIES = _signature_quantities()


def _windows(series: pd.Series, count: bool) -> list[float]:
    """start, middle and end, over the windows `evidence.quantities` reads."""
    n = len(series)
    end = max(MIN_WINDOW, int(round(LATE * n)))  # as quantities' `_tail` reads it
    width = max(1, int(round(MIDDLE * n)))
    mid = max(0, n // 2 - width // 2)
    windows = (series.iloc[:MIN_WINDOW], series.iloc[mid:mid + width], series.iloc[-end:])
    return [float(w.max() if count else w.median()) for w in windows]


def _column(history: pd.DataFrame, column: str) -> pd.Series | None:
    """A column without its gaps; a 'prefix/' takes the largest value across layers."""
    if column.endswith("/"):
        cols = [c for c in history.columns if c.startswith(column)]
        return history[cols].max(axis=1).dropna() if cols else None
    return history[column].dropna() if column in history.columns else None


@dataclass(frozen=True)
class Reveal:
    """What a mystery was, and whether the student's answer named it."""

    key: str
    fault: str  # the fault's name in `fl.FAULTS`
    answer: str | None  # the student's answer, None when none was given
    correct: bool | None  # None when there was no answer to grade
    lookalike: bool = False  # a wrong answer whose evidence the true fault produces

    @property
    def details(self) -> Fault:
        """The catalogue entry: title, symptom, cause, experiment and fix."""
        return FAULTS[self.fault]

    def __str__(self) -> str:
        return self.text()

    def text(self, lang: str | None = None) -> str:
        """What it was, the verdict on the answer, and the catalogue's texts, in `lang`."""
        def line(part, **values):
            return REVEAL[part].say(lang, **values)
        if self.answer is None:
            verdict = line("no_answer")
        else:
            word = "correct" if self.correct else "lookalike" if self.lookalike else "wrong"
            verdict = line("answer", answer=self.answer,
                           verdict=line(word, fault=self.fault, answer=self.answer))
        f = self.details
        shapes = line("or").join(shape_name(s, lang) for s in accepted_shapes(f))
        return "\n".join([
            line("was", key=self.key, fault=self.fault, title=f.text("title", lang)), verdict,
            line("symptom", text=f.text("symptom", lang)), line("shape", text=shapes),
            line("cause", text=f.text("cause", lang)),
            line("experiment", text=f.text("experiment", lang)),
            line("fix", text=f.text("fix", lang))])


def mystery(seed: int, faults: Iterable[str] | None = None, *,
            steps: int | None = None) -> Mystery:
    """Run the fault that `seed` picks from `POOL` (or from `faults`), blind.

    The run uses the same `seed`, so one number reproduces the whole mystery.  `steps`
    shortens it (the telemetry of a short run may not show the signature)."""
    from ..catalogue.faults import run  # torch, imported when a mystery is run (see __init__)

    name = pick(seed, faults)
    history = run(name, seed=seed, steps=steps).history.copy()
    history.attrs.clear()  # nothing but the measurements travels with the mystery
    return Mystery(seed, FAULTS[name].task, history, name)


def pick(seed: int, faults: Iterable[str] | None = None) -> str:
    """The fault `seed` chooses, without running anything.

    Seeds come in rounds of one shuffle of the pool each, so consecutive seeds (one per
    student) cover every fault before any repeats.  A subset is taken in catalogue order
    whatever order it is given in (a set's order changes between processes), so the
    same seed and subset always give the same fault."""
    check_seed(seed, "a mystery seed")
    pool = _pool(faults)
    round_, position = divmod(seed, len(pool))
    random.Random(round_).shuffle(pool)
    return pool[position]


def key_for(seed: int) -> str:
    return f"{KEY_PREFIX}{seed}"


def reveal(mystery_or_seed: Mystery | int, answer: str | None = None,
           worksheet: Worksheet | None = None, *,
           faults: Iterable[str] | None = None) -> Reveal:
    """Reveal a mystery and grade an answer: `answer`, or the worksheet's prediction.

    Given a worksheet, the truth is recorded in it, which locks the answer (once
    revealed, it cannot be changed) and makes `ws.grade()` grade this mystery against
    what it really was; given a `Mystery`, its telemetry is also observed (if it was not
    yet).  `faults` is the subset a bare seed was drawn from."""
    if answer is not None and worksheet is not None:
        raise ValueError("give the answer directly or through a worksheet, not both")
    if isinstance(mystery_or_seed, Mystery):
        seed, fault = mystery_or_seed.seed, mystery_or_seed._fault
    else:
        seed = mystery_or_seed
        fault = pick(seed, faults)
    key = key_for(seed)
    if worksheet is not None:
        answer = _answer_in(worksheet, key)
        if isinstance(mystery_or_seed, Mystery) and worksheet.observation(key) is None:
            worksheet.observe(key, mystery_or_seed.history)
        worksheet.record_truth(key, fault)  # the grade follows the reveal, not diagnose
    answer = check_cause(answer)
    history = mystery_or_seed.history if isinstance(mystery_or_seed, Mystery) else None
    return Reveal(key, fault, answer, None if answer is None else answer == fault,
                  _lookalike(fault, answer, history))


def _lookalike(fault: str, answer: str | None, history: pd.DataFrame | None) -> bool:
    """A wrong answer the telemetry cannot refute: a fault whose evidence the true one's
    mechanism produces (`Fault.explains`), or whose signature fired on this very run."""
    if answer is None or answer == fault or answer not in FAULTS:
        return False
    if answer in FAULTS[fault].explains:
        return True
    return history is not None and FAULTS[answer].evidence(history).fired


def _answer_in(worksheet: Worksheet, key: str) -> str | None:
    prediction = worksheet.prediction(key)
    return prediction.cause if prediction is not None else None


def _pool(faults: Iterable[str] | None) -> list[str]:
    if faults is None:
        return list(POOL)
    wanted = {faults} if isinstance(faults, str) else set(faults)
    for name in wanted:
        get(name)  # a KeyError naming the closest fault
    if not wanted:
        raise ValueError("faults is empty: give at least one fault name, or None for all")
    return [name for name in FAULTS if name in wanted]
