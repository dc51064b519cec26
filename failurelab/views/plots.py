"""Instruments: plots of recorded telemetry, one question per plot.

Probes compute, plots draw: every function here draws columns that `Monitor` and
`fl.run` recorded and computes nothing beyond a moving average for display and a unit
change, so a plot can never disagree with the numbers a signature quotes.

Each function takes `runs` -- a `Run`, a history DataFrame, a list of them, or a
mapping `{"label": run_or_history}` -- and an optional matplotlib `ax`, and returns
the ax.  In an overlay the first entry is the reference (the healthy baseline): it is
drawn first, in grey, so that the fault is the coloured line.  A column a history
lacks (a plain `Monitor` history has no validation or timing columns) is never an
error: what exists is drawn and a note in the axes says what is missing.

Every word a plot writes is a `Text` in WORDS, said in the language of `language()`
(a notebook in notebooks/zh/ is Chinese by itself) when a CJK font is installed to draw
it (`cjk_font`, CJK_FONTS); without one the plot falls back to English, whole and clean,
instead of drawing boxes.  Column and quantity names stay code names in every language.
"""

from __future__ import annotations

import functools
import logging
import textwrap
from collections.abc import Mapping
from contextlib import contextmanager

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..basics.recipes import baseline as baseline_recipe
from ..basics.recipes import diff, format_value
from ..basics.text import Text, language
from ..catalogue.faults import FAULTS
from ..catalogue.faults import get as get_fault
from ..evidence.quantities import QUANTITIES, first_nonfinite
from ..evidence.runs import TIMING_COLUMNS, history_of
from ..evidence.thresholds import UPDATE_RATIO_HIGH, UPDATE_RATIO_LOW

HEALTHY_UPDATE_RATIO = (UPDATE_RATIO_LOW, UPDATE_RATIO_HIGH)  # see evidence.thresholds
FLOAT16_MAX = 65504.0  # largest finite float16: a larger input becomes inf under autocast
NEAR_FLOAT16 = 0.1  # draw the float16 limit once inputs reach a tenth of it
LOG_SPAN = 100.0  # a curve spanning more than two decades gets a log axis
SPARSE = 0.5  # a column filled on under half the steps (evaluations) gets markers
REFERENCE_COLOR = "0.55"  # the first run of an overlay, the healthy reference
LINESTYLES = ("-", "--", ":", "-.")  # several columns of several runs: style per column
LEGEND_WIDTH = 28  # characters per legend line: wider labels are wrapped
STYLE_NAMES = {"-": "solid", "--": "dashed_style", ":": "dotted", "-.": "dash-dot"}  # WORDS keys
TRAIN_COUNTERPART = {"val_loss": "loss", "val_acc": "batch_acc"}  # drawn faintly behind
# CJK font families matplotlib may find, best first (Debian: fonts-noto-cjk gives the
# first, fonts-wqy-zenhei a small one; macOS and Windows ship the later ones).
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
             "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback", "PingFang SC",
             "Hiragino Sans GB", "Microsoft YaHei", "SimHei", "Heiti SC", "Arial Unicode MS")

LATIN_FONT = "DejaVu Sans"  # matplotlib's own font, drawn first: Latin letters, the minus sign
_FONT_LOG = logging.getLogger("matplotlib.font_manager")
CJK_FILES = ("notosanscjk", "notosanssc", "sourcehansans", "wqy", "droidsansfallback",
             "pingfang", "hiragino", "msyh", "simhei", "stheiti", "arialuni")  # their files

# Every word the plots write, in English and Chinese.
WORDS = {
    "training loss": Text("training loss", "训练损失"), "total": Text("total", "总计"),
    "per_layer_single": Text("per-layer lines need a single run", "逐层曲线只能画一个运行"),
    "gradient norm": Text("gradient norm ‖g‖", "梯度范数 ‖g‖"),
    "healthy_band": Text("healthy: {lo:g} to {hi:g}", "健康范围：{lo:g} 到 {hi:g}"),
    "update ratio": Text("update ratio ‖Δw‖/‖w‖", "更新比 ‖Δw‖/‖w‖"),
    "saturated": Text("share saturated / dead", "饱和 / 死亡单元的比例"),
    "largest input": Text("largest |input|", "最大 |输入|"),
    "std spread": Text("feature std max/min", "特征标准差 最大/最小"),
    "float16 max": Text("float16 max {value:g}", "float16 最大值 {value:g}"),
    "nan_input": Text("NaN/Inf input at step {step}{of}", "第 {step} 步出现 NaN/Inf 输入{of}"),
    "nan_loss": Text("NaN/Inf loss at step {step}{of}", "第 {step} 步损失为 NaN/Inf{of}"),
    "input value": Text("input value", "输入值"),
    "zero logit gradients": Text("share of zero logit gradients", "logit 梯度为零的比例"),
    "dashed": Text("dashed: training batches, smoothed", "虚线：训练批次，平滑后"),
    "val_loss": Text("validation loss", "验证损失"), "val_acc": Text("accuracy", "准确率"),
    "val_min_recall": Text("recall of the worst class", "最差类别的召回率"),
    "val_jitter": Text("largest logit change, two equal passes",
                       "两次相同验证之间 logit 的最大变化"),
    "train_mode": Text("training mode at the step (1 = train, 0 = eval)",
                       "迈步时的训练模式（1 = train，0 = eval）"),
    "cosine": Text("cosine(g_t, g_t-1)", "余弦 cosine(g_t, g_t-1)"),
    "step": Text("step", "步"), "run": Text("run", "运行"),
    "time per step": Text("time per step (ms)", "每步耗时（毫秒）"),
    "median": Text("{column} (median)", "{column}（中位数）"),
    "pads": Text("attention on pads", "落在填充位上的注意力"),
    "more pads": Text("change with more pads", "填充变多后的变化"),
    "pad share": Text("share / probability change", "比例 / 概率变化"),
    "weight norm": Text("weight norm ‖w‖", "权重范数 ‖w‖"),
    "logit std": Text("logit std", "logit 标准差"),
    "loss": Text("loss", "损失"), "output ce": Text("output's cross-entropy", "输出自身的交叉熵"),
    "ce twice": Text("cross-entropy of softmax twice", "两次 softmax 后的交叉熵"),
    "eval shift": Text("evaluation-input shift (training std)",
                       "评估输入的偏移（以训练标准差计）"),
    "zero gradients": Text("share of zero gradient entries", "梯度分量为零的比例"),
    "batch": Text("{label}, batch {size:g}", "{label}，批大小 {size:g}"),
    "label share": Text("commonest label's share", "最常见标签的比例"),
    "loss weight": Text("loss weight per step", "每步的损失权重"),
    "target share": Text("gradient share the output does not explain",
                         "输出解释不了的梯度份额"),
    "mean of step": Text("a mean over the step: 1", "整步上的平均：1"),
    "baseline": Text("baseline", "基线"), "faulty": Text("faulty", "有故障"),
    "baseline vs faulty": Text("baseline vs faulty", "基线与有故障的运行"),
    "experiment": Text("experiment {name}: baseline vs faulty", "实验 {name}：基线与有故障的运行"),
    "missing": Text("no {what} in {whom}", "{whom}中没有 {what}"),
    "this history": Text("this history", "这份记录"),
    "these histories": Text("these histories", "这些记录"),
    "columns": Text("columns", "列"),
    "activation columns": Text("activation columns", "激活列"),
    "input columns": Text("input columns", "输入列"),
    "validation columns": Text("validation columns", "验证列"),
    "padding columns": Text("padding columns (sequence task only)", "填充列（仅序列任务）"),
    "or": Text(" or ", " 或 "),
    "twin": Text("{label} (= {twin} exactly, drawn over it)",
                 "{label}（与{twin}完全相同，画在它上面）"),
    "solid": Text("solid", "实线"), "dashed_style": Text("dashed", "虚线"),
    "dotted": Text("dotted", "点线"), "dash-dot": Text("dash-dot", "点划线"),
    "style_key": Text("{style}: {name}", "{style}：{name}"),
    "per batch": Text("loss per batch", "每个批次的损失"), "smoothed": Text("smoothed", "平滑后"),
    "suggested": Text("suggested {lr:.2g}", "建议 {lr:.2g}"),
    "blew up": Text("blew up at {lr:.2g}", "在 {lr:.2g} 处爆炸"),
    "learning rate": Text("learning rate", "学习率"),
    "run_label": Text("{what} (seed {seed})", "{what}（种子 {seed}）"),
    "task baseline": Text("{task} baseline", "{task} 基线"),
    "history": Text("history", "记录"), "history i": Text("history {i}", "记录 {i}"),
}
PANEL_TITLES = {"loss": Text("loss", "损失 (loss)"), "gradients": Text("gradients", "梯度 (gradients)"),
                "update_ratio": Text("update_ratio", "更新比 (update_ratio)"),
                "activations": Text("activations", "激活 (activations)"),
                "validation": Text("validation", "验证 (validation)"),
                "inputs": Text("inputs", "输入 (inputs)")}
VAL_LABELS = ("val_loss", "val_acc", "val_min_recall", "val_jitter")  # keys of WORDS

# The instrument (a plot function below) that shows where each quantity comes from, as
# the quantity declares it; `instrument_for` picks the one of a fault's first condition.
INSTRUMENTS = {name: quantity.plot for name, quantity in QUANTITIES.items()}


# --- the language of a plot ---------------------------------------------------------

@functools.lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The first of CJK_FONTS that matplotlib can find, or None (then plots speak
    English: Chinese drawn in a Latin font would be boxes and a warning per glyph)."""
    from matplotlib import font_manager

    def found():
        installed = {f.name for f in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FONTS if name in installed), None)
    if found() is None:  # installed after matplotlib cached its font list: add the files
        for path in font_manager.findSystemFonts():
            if any(part in path.lower() for part in CJK_FILES):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):  # an unreadable font file
                    continue
    if found() is not None and not any(isinstance(f, _OtherWeight) for f in _FONT_LOG.filters):
        _FONT_LOG.addFilter(_OtherWeight())
    return found()


_SPOKEN: list[str] = []  # languages set by `speaking` blocks, the innermost last


@contextmanager
def speaking(lang: str | None):
    """Draw the plots made in this block in `lang` (a report or a command's --lang),
    whatever $FAILURELAB_LANG says."""
    _SPOKEN.append(language(lang))
    try:
        yield
    finally:
        _SPOKEN.pop()


def plot_language() -> str:
    """The language plots are drawn in now (`speaking`'s, else `language()`), if a font
    can draw its script."""
    lang = _SPOKEN[-1] if _SPOKEN else language()
    return lang if lang == "en" or cjk_font() is not None else "en"


def _w(key: str, **values) -> str:
    return WORDS[key].say(plot_language(), **values)


@contextmanager
def _font():
    """Chinese plots draw every text in the CJK font (it holds Latin letters too), so
    titles, labels and legends made inside this context keep it when they are drawn."""
    font = cjk_font() if plot_language() == "zh" else None
    if font is None:
        yield
        return
    import matplotlib

    with matplotlib.rc_context({"font.family": [LATIN_FONT, font]}):  # CJK glyphs: fallback
        yield


class _OtherWeight(logging.Filter):
    """Drops matplotlib's note that a CJK font has no exact "normal" weight (WenQuanYi is
    registered as medium): it is used anyway, and the note would repeat per text size."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.getMessage().startswith("findfont: Failed to find font weight")
                    and any(name in record.getMessage() for name in CJK_FONTS))


def _speaks(draw):
    """A drawing function whose texts are made in the plot's language and font."""
    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        with _font():
            return draw(*args, **kwargs)
    return drawn


# --- the instruments ------------------------------------------------------------------

@_speaks
def loss(runs, ax=None, smooth=9) -> Axes:
    """Training loss: every step faint, a `smooth`-step moving average on top (minibatch
    noise hides the trend otherwise); a log axis once it spans more than two decades."""
    items, ax = _items(runs), _axes(ax)
    notes = _plot(ax, items, ["loss"], smooth=smooth)
    _auto_log(ax, items, "loss")
    return _finish(ax, items, _w("training loss"), notes)


@_speaks
def gradients(runs, ax=None, per_layer=False) -> Axes:
    """Global gradient norm on a log axis (growth and collapse are both in decades);
    `per_layer` adds one line per parameter for a single run, smoothed over 9 steps
    (raw lines faint behind) because seven noisy lines on one axis hide every trend."""
    items, ax = _items(runs), _axes(ax)
    names = {"grad_norm": _w("total")}
    if per_layer and len(items) == 1:
        names |= {c: c.split("/", 1)[1] for c in items[0][1].columns
                  if c.startswith("grad_norm/")}
    notes = _plot(ax, items, names, smooth=9 if len(names) > 1 else 1)
    if per_layer and len(items) > 1:
        notes.append(_w("per_layer_single"))
    ax.set_yscale("log")
    return _finish(ax, items, _w("gradient norm"), notes)


@_speaks
def update_ratio(runs, ax=None) -> Axes:
    """‖Δw‖/‖w‖ per step against the healthy band: above it the rate rewrites the
    weights each step, below it nothing moves."""
    items, ax = _items(runs), _axes(ax)
    lo, hi = HEALTHY_UPDATE_RATIO
    ax.axhspan(lo, hi, color="tab:green", alpha=0.12, lw=0, label=_w("healthy_band", lo=lo, hi=hi))
    for written, used in calibrated_lines(("update_ratio_start", "update_ratio_peak",
                                           "update_ratio_median"), (lo, hi)):
        ax.axhline(used, color="tab:red", lw=0.8, ls="--")  # what a signature reads
        ax.annotate(f"threshold used {used:.3g} (written {written:g})", (0.01, used),
                    color="tab:red", xycoords=("axes fraction", "data"), va="bottom",
                    fontsize="small")
    notes = _plot(ax, items, ["update_ratio"])
    ax.set_yscale("log")
    return _finish(ax, items, _w("update ratio"), notes)


def calibrated_lines(quantities, written) -> list[tuple[float, float]]:
    """(written, used) for every catalogue threshold on these quantities that was written
    as one of `written` and that calibration moved: the line a signature really reads."""
    moved = {(c.physical, c.threshold) for f in FAULTS.values() for s in f.signatures
             for c in s.conditions if c.quantity in quantities and c.physical in written
             and c.threshold != c.physical}
    return sorted(moved)


@_speaks
def activations(runs, ax=None) -> Axes:
    """Share of saturated sigmoid/tanh units and of dead ReLUs, per module: units
    that pass no gradient back."""
    items, ax = _items(runs), _axes(ax)
    names = list(dict.fromkeys(c for _, h in items for c in h.columns
                               if c.startswith(("saturated_frac/", "dead_frac/"))))
    notes = _plot(ax, items, names, what=_w("activation columns"))
    ax.set_ylim(-0.02, 1.02)
    return _finish(ax, items, _w("saturated"), notes)


@_speaks
def inputs(runs, ax=None) -> Axes:
    """The batch as the model sees it: its largest |value| (float16 overflows past
    65504) and the spread of feature scales (unnormalised inputs)."""
    items, ax = _items(runs), _axes(ax)
    names = {"input_absmax": _w("largest input"), "input_std_ratio": _w("std spread")}
    notes = _plot(ax, items, names, what=_w("input columns"))
    ax.set_yscale("log")
    if max(_top(h, "input_absmax") for _, h in items) >= NEAR_FLOAT16 * FLOAT16_MAX:
        ax.axhline(FLOAT16_MAX, color="tab:red", ls=":", lw=1)
        ax.annotate(_w("float16 max", value=FLOAT16_MAX), (0.01, FLOAT16_MAX), color="tab:red",
                    xycoords=("axes fraction", "data"), va="bottom", fontsize="small")
    for label, h in items:
        if "input_nonfinite" in h and (h["input_nonfinite"] > 0).any():
            step = _steps(h)[(h["input_nonfinite"] > 0).to_numpy()][0]
            _mark(ax, step, _w("nan_input", step=step, of=_of(items, label)), top=False)
    return _finish(ax, items, _w("input value"), notes)


@_speaks
def output_gradient(runs, ax=None) -> Axes:
    """Share of exactly-zero gradient entries at the logits: float16 flushes every
    value below 6e-8 to zero, and those samples send no gradient back at all."""
    items, ax = _items(runs), _axes(ax)
    notes = _plot(ax, items, ["output_grad_zero_frac"])
    ax.set_ylim(-0.02, 1.02)
    return _finish(ax, items, _w("zero logit gradients"), notes)


@_speaks
def validation(runs, ax=None, metric="val_loss") -> Axes:
    """A validation metric at the evaluated steps, over the training counterpart
    (dashed, smoothed) where there is one: the gap between them is the evidence."""
    items, ax = _items(runs), _axes(ax)
    train = TRAIN_COUNTERPART.get(metric)
    trained = False
    for i, (label, h) in enumerate(items):
        s = _series(h, train) if train else None
        if s is not None:
            ax.plot(s.index, s.rolling(9, min_periods=1).mean(), color=_color(i, items),
                    ls="--", lw=0.8, alpha=0.7)
            trained = True
    notes = _plot(ax, items, [metric], what=_w("validation columns"))
    if trained:  # one key for every dashed line: the legend names each run once
        ax.plot([], [], color="0.3", ls="--", lw=0.8, label=_w("dashed"))
    return _finish(ax, items, _w(metric) if metric in VAL_LABELS else metric, notes)


@_speaks
def accuracy(runs, ax=None) -> Axes:
    """Validation accuracy, with the training batches' accuracy behind it: a model that
    fits its training labels but not the validation ones learned the wrong labels."""
    return validation(runs, ax, metric="val_acc")


@_speaks
def min_recall(runs, ax=None) -> Axes:
    """Recall of the worst class: 0 when the model never predicts a rare class."""
    return validation(runs, ax, metric="val_min_recall")


@_speaks
def eval_jitter(runs, ax=None) -> Axes:
    """Largest logit change between two identical validation passes: exactly 0 in
    eval mode, large when dropout still fires."""
    return validation(runs, ax, metric="val_jitter")


@_speaks
def train_mode(runs, ax=None) -> Axes:
    """Whether the model was in training mode when the optimizer stepped (1) or in eval
    mode (0): dropout off and BatchNorm on its running statistics while training."""
    return column(runs, "train_mode", ax, log=False,
                  ylabel=_w("train_mode"))


@_speaks
def gradient_cosine(runs, ax=None) -> Axes:
    """Cosine of consecutive gradients: ~0.3 for healthy SGD noise, ~1 when every
    step repeats (accumulates) the last, negative when steps bounce across a valley."""
    items, ax = _items(runs), _axes(ax)
    ax.axhline(0, color="0.8", lw=0.8)
    notes = _plot(ax, items, ["grad_cosine"], smooth=9)
    ax.set_ylim(-1.05, 1.05)
    return _finish(ax, items, _w("cosine"), notes)


@_speaks
def timing(run, ax=None) -> Axes:
    """Where a step's time goes, in milliseconds: stacked per step for one run, stacked
    medians side by side for several.  A thick t_data band: the model waits for data."""
    items, ax = _items(run), _axes(ax)
    timed = [(label, h) for label, h in items if all(c in h for c in TIMING_COLUMNS)]
    notes = [f"no timing columns in {_whom(items, label)}" for label, h in items
             if not all(c in h for c in TIMING_COLUMNS)]
    if len(items) == 1 and timed:
        h = timed[0][1].dropna(subset=list(TIMING_COLUMNS))
        ax.stackplot(_steps(h), *(h[c] * 1e3 for c in TIMING_COLUMNS),
                     labels=TIMING_COLUMNS, alpha=0.85)
    elif timed:
        bottom = np.zeros(len(timed))
        for c in TIMING_COLUMNS:
            ms = np.array([h[c].median() * 1e3 for _, h in timed])
            ax.bar([label for label, _ in timed], ms, bottom=bottom, label=_w("median", column=c))
            bottom += ms
    xlabel = _w("step") if len(items) == 1 else _w("run")
    return _finish(ax, items, _w("time per step"), notes, mark=False, xlabel=xlabel)


@_speaks
def padding(runs, ax=None) -> Axes:
    """Attention mass on pad tokens per step, and how much appending pads changes the
    prediction at evaluations: both ~0 when padding is masked (symlog: 0 stays visible)."""
    items, ax = _items(runs), _axes(ax)
    names = {"pad_attention": _w("pads"), "pad_sensitivity": _w("more pads")}
    notes = _plot(ax, items, names, what=_w("padding columns"))
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylim(-2e-4, 1.1)  # exact zeros (a masked baseline) sit just above the frame
    return _finish(ax, items, _w("pad share"), notes)


@_speaks
def column(runs, name, ax=None, log=None, ylabel=None) -> Axes:
    """Any one column; `log=None` picks a log axis when it spans over two decades."""
    items, ax = _items(runs), _axes(ax)
    notes = _plot(ax, items, [name])
    if log is None:
        _auto_log(ax, items, name)
    elif log:
        ax.set_yscale("log")
    return _finish(ax, items, ylabel or name, notes)


@_speaks
def weights(runs, ax=None) -> Axes:
    """Global weight norm: weight decay shrinks it, a huge rate inflates it."""
    return column(runs, "weight_norm", ax, ylabel=_w("weight norm"))


@_speaks
def outputs(runs, ax=None) -> Axes:
    """Std of the logits: a sane initialisation starts near 1 or below."""
    return column(runs, "output_std", ax, ylabel=_w("logit std"))


@_speaks
def implied_loss(runs, ax=None) -> Axes:
    """The training loss beside two losses its output and gradient imply: the output's
    own cross-entropy (a plain cross-entropy lies on it) and the cross-entropy of
    softmax applied twice (a loop that applies softmax before CrossEntropyLoss lies on
    that one instead)."""
    items, ax = _items(runs), _axes(ax)
    notes = _plot(ax, items, {"loss": _w("training loss"), "output_ce": _w("output ce"),
                              "output_ce_twice": _w("ce twice")})
    return _finish(ax, items, _w("loss"), notes)


@_speaks
def target_share(runs, ax=None) -> Axes:
    """Share of the output gradient the output does not explain, on a log axis: a
    regression's targets keep it well above 1e-3; MSE broadcast against one common
    target leaves float rounding."""
    return column(runs, "target_grad_share", ax, log=True, ylabel=_w("target share"))


@_speaks
def eval_inputs(runs, ax=None) -> Axes:
    """How far the inputs a model is evaluated on sit from its training inputs: the
    largest per-feature mean difference, in training standard deviations (one point per
    evaluation; two samples of one population differ by sampling noise, ~0.1)."""
    return column(runs, "eval_input_shift", ax, log=True,
                  ylabel=_w("eval shift"))


@_speaks
def zero_gradients(runs, ax=None) -> Axes:
    """Share of gradient entries that are exactly zero: dead units give no gradient."""
    ax = column(runs, "zero_grad_frac", ax, ylabel=_w("zero gradients"))
    ax.set_ylim(-0.02, 1.02)
    return ax


@_speaks
def batches(runs, ax=None) -> Axes:
    """Share of each batch taken by its commonest label (1 = one class only: unshuffled
    sorted data; high throughout: imbalance), with the batch size in the legend."""
    labelled = {}
    for label, h in _items(runs):
        size = _series(h, "batch_size")
        labelled[label if size is None else _w("batch", label=label, size=size.median())] = h
    ax = column(labelled, "label_purity", ax, log=False, ylabel=_w("label share"))
    ax.set_ylim(-0.02, 1.02)
    if ax.get_legend_handles_labels()[1]:  # one run too: the legend holds its batch size
        _legend(ax)
    return ax


@_speaks
def loss_weight(runs, ax=None) -> Axes:
    """The total weight each optimizer step's loss gave its samples (backward passes x
    each one's `loss_weight`): exactly 1 for a mean over the step, k for k micro-batch
    means never divided by k.  Drawn only where a softmax cross-entropy trains the
    output (elsewhere the gradient does not tell)."""
    weighed = {label: h.assign(step_loss_weight=h["loss_weight"] * h["output_backwards"])
               if {"loss_weight", "output_backwards"} <= set(h.columns) else h
               for label, h in _items(runs)}
    ax = column(weighed, "step_loss_weight", ax, ylabel=_w("loss weight"))
    ax.axhline(1.0, color=REFERENCE_COLOR, lw=0.8, ls=":", label=_w("mean of step"))
    if ax.get_legend_handles_labels()[1]:
        _legend(ax)
    return ax


# --- figures --------------------------------------------------------------------------

def instrument_for(fault_name: str) -> str:
    """The instrument that shows the fault's cause: the fault's own choice if it names
    one, else that of the first signature condition not read off the loss curve (the
    loss is already the left panel of `compare`); the gradient norm failing both."""
    fault = get_fault(fault_name)
    if fault.instrument:
        return fault.instrument
    for condition in fault.signature.conditions:
        if condition.quantity not in INSTRUMENTS:
            raise KeyError(f"{fault_name}: no instrument for quantity "
                           f"{condition.quantity!r}; declare its plot in evidence.quantities")
        if INSTRUMENTS[condition.quantity] != "loss":
            return INSTRUMENTS[condition.quantity]
    return "gradients"


@_speaks
def compare(baseline, faulty, fault=None, instrument=None, key=None) -> Figure:
    """Baseline and faulty run side by side: the loss, and the instrument that shows
    the cause (`instrument`: a name or a function; default: `instrument_for(fault)`).

    With a course `key` ("01-2") the title and legend name the experiment, not the
    fault: a student looks at this figure before explaining what caused it."""
    draw = instrument or (instrument_for(fault) if fault else "gradients")
    if isinstance(draw, str):
        if draw not in FUNCTIONS:
            raise KeyError(f"unknown instrument {draw!r}; known: {', '.join(FUNCTIONS)}")
        draw = FUNCTIONS[draw]
    lang = plot_language()
    if key:
        title, label = _w("experiment", name=key), _w("faulty")
    elif fault:
        title, label = f"{fault}: {get_fault(fault).text('title', lang)}", fault
    else:
        title, label = _w("baseline vs faulty"), _w("faulty")
    runs = {_w("baseline"): baseline, label: faulty}
    fig, (left, right) = _pyplot().subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    loss(runs, ax=left)
    draw(runs, ax=right)
    fig.suptitle(title)
    return _detached(fig)


@_speaks
def overview(run_or_runs) -> Figure:
    """The six main instruments in a 2x3 grid, for a first look at a run."""
    fig, axes = _pyplot().subplots(2, 3, figsize=(15, 7), layout="constrained")
    for draw, ax in zip((loss, gradients, update_ratio, activations, validation, inputs),
                        axes.flat, strict=False):
        draw(run_or_runs, ax=ax)
        ax.set_title(PANEL_TITLES[draw.__name__].say(plot_language()))
        if ax.get_legend() is not None:  # beside each panel would narrow the whole grid
            _legend(ax, below=True)
    return _detached(fig)


def _pyplot():
    """pyplot, imported on first use: it costs a third of a second that `import
    failurelab` (the CLI, every notebook kernel, every test worker) need not pay."""
    import matplotlib.pyplot as plt

    return plt


def _detached(fig: Figure) -> Figure:
    """Hand the figure to the caller only: pyplot forgets it, so a notebook shows the
    returned figure once instead of twice, and loops that make many do not pile up."""
    _pyplot().close(fig)
    return fig


# --- helpers ----------------------------------------------------------------------------

def _items(runs) -> list[tuple[str, pd.DataFrame]]:
    """`runs` as [(label, history), ...]: one run, a list of runs, or {label: run}."""
    if isinstance(runs, Mapping):
        pairs = [(str(label), r) for label, r in runs.items()]
    elif isinstance(runs, (list, tuple)):
        pairs = [(_label(r, i), r) for i, r in enumerate(runs)]
    else:
        pairs = [(_label(runs, None), runs)]
    return [(label, history_of(r, "a plot", "a Run, a history DataFrame, or a list or "
                                            "dict of them")) for label, r in pairs]


def _label(run, i: int | None) -> str:
    """A Run is named by what its recipe changes in its task's baseline."""
    recipe = getattr(run, "recipe", None)
    if recipe is None:
        return _w("history") if i is None else _w("history i", i=i)
    changed = diff(baseline_recipe(recipe.task), recipe)
    what = ", ".join(f"{k}={format_value(b)}" for k, (a, b) in changed.items() if k != "steps")
    return _w("run_label", what=what or _w("task baseline", task=recipe.task), seed=run.seed)


def _axes(ax: Axes | None) -> Axes:
    if ax is None:
        _, ax = _pyplot().subplots(figsize=(6.4, 3.6), layout="constrained")
    return ax


def _color(i: int, items: list) -> str:
    if len(items) == 1:
        return "C0"
    return REFERENCE_COLOR if i == 0 else f"C{i - 1}"


def _steps(h: pd.DataFrame) -> np.ndarray:
    return (h["step"] if "step" in h else h.index).to_numpy()


def _series(h: pd.DataFrame, name: str) -> pd.Series | None:
    """The finite values of column `name`, indexed by step; None when there are none."""
    if name not in h:
        return None
    values = pd.to_numeric(h[name], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(values)
    return pd.Series(values[ok], index=_steps(h)[ok]) if ok.any() else None


def _top(h: pd.DataFrame, name: str) -> float:
    s = _series(h, name)
    return float(s.max()) if s is not None else -np.inf


def _plot(ax, items, names, smooth=1, what=None) -> list[str]:
    """Draw each column of `names` (a list, or {column: legend name}) for each history.

    One run: a colour per column.  Several: a colour per run, a line style per column.
    Returns the notes on what is missing."""
    names = dict(zip(names, names, strict=True)) if not isinstance(names, dict) else names
    one_run = len(items) == 1
    keyed = not one_run and len(names) > 1  # colour per run, style per column: keys
    shown_as = _twin_labels(items, names)
    missing: dict[str, list[str]] = {}
    for i, (label, h) in enumerate(items):
        for j, (name, shown) in enumerate(names.items()):
            s = _series(h, name)
            if s is None:
                missing.setdefault(label, []).append(name)
                continue
            color = f"C{j % 10}" if one_run and len(names) > 1 else _color(i, items)
            style = LINESTYLES[0] if one_run else LINESTYLES[j % len(LINESTYLES)]
            text = "_nolegend_" if keyed else shown if len(names) > 1 else shown_as[label]
            marker = "o" if len(s) < SPARSE * len(h) else None
            if smooth and smooth > 1:
                ax.plot(s.index, s, color=color, lw=0.7, alpha=0.3)
                s = s.rolling(smooth, min_periods=1).mean()
            ax.plot(s.index, s, color=color, ls=style, marker=marker, ms=3, lw=1.4,
                    label=text)
    drawn = len(items) * len(names) - sum(len(v) for v in missing.values())
    if keyed and drawn:
        _keys(ax, items, names, shown_as, missing)
    if not drawn:
        return [_w("missing", what=what or _w("or").join(names) or _w("columns"),
                   whom=_whom(items))]
    return [_w("missing", what=", ".join(v), whom=_whom(items, label))
            for label, v in missing.items()]


def _auto_log(ax, items, name: str) -> None:
    """A log axis when the positive values of `name` span more than LOG_SPAN."""
    found = [s.to_numpy() for _, h in items if (s := _series(h, name)) is not None]
    values = np.concatenate(found) if found else np.array([])
    values = values[values > 0]
    if values.size and values.max() > LOG_SPAN * values.min():
        ax.set_yscale("log")


def _whom(items, label: str | None = None) -> str:
    return _w("this history") if len(items) == 1 else label or _w("these histories")


def _of(items, label: str) -> str:
    return "" if len(items) == 1 else f" ({label})"


def _mark(ax, step, text: str, top: bool = True) -> None:
    """A labelled vertical line at `step`: where the numbers stopped meaning anything."""
    ax.axvline(step, color="tab:red", ls=":", lw=1.2)
    ax.text(step, 0.97 if top else 0.03, f" {text} ", transform=ax.get_xaxis_transform(),
            rotation=90, ha="right", va="top" if top else "bottom", fontsize="small",
            color="tab:red")


def _finish(ax, items, ylabel, notes, mark=True, xlabel=None) -> Axes:
    """Labels, the first non-finite loss of each run, notes, and a legend if needed."""
    ax.set_xlabel(xlabel or _w("step"))
    ax.set_ylabel(ylabel)
    for label, h in items:
        step = first_nonfinite(h) if mark and "loss" in h and "step" in h else np.inf
        if np.isfinite(step):
            _mark(ax, int(step), _w("nan_loss", step=int(step), of=_of(items, label)))
    if notes:
        ax.text(0.5, 0.5, "\n".join(notes), transform=ax.transAxes, ha="center",
                va="center", fontsize="small", color="0.35",
                bbox=dict(facecolor="white", edgecolor="0.8", alpha=0.8))
    if len(ax.get_legend_handles_labels()[1]) > 1:
        _legend(ax)
    return ax


def _legend(ax, below: bool = False) -> None:
    """The legend beside the axes (or `below` them, in a grid), never on the data;
    constrained layout makes room, and long labels are wrapped so that one long label
    does not squeeze the plot."""
    handles, labels = ax.get_legend_handles_labels()
    labels = [textwrap.fill(label, LEGEND_WIDTH) for label in labels]
    where = dict(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2) if below else \
        dict(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.legend(handles, labels, fontsize="small", borderaxespad=0.0, frameon=False, **where)


def _twin_labels(items, names) -> dict[str, str]:
    """Each run's legend label, saying so when its lines equal an earlier run's value
    for value: the later line is drawn exactly over the earlier one and hides it."""
    labels = {}
    for i, (label, h) in enumerate(items):
        twin = next((other for other, g in items[:i] if _same_lines(h, g, names)), None)
        labels[label] = label if twin is None else _w("twin", label=label, twin=twin)
    return labels


def _same_lines(h: pd.DataFrame, g: pd.DataFrame, names) -> bool:
    pairs = [(_series(h, n), _series(g, n)) for n in names]
    pairs = [(a, b) for a, b in pairs if a is not None or b is not None]
    return bool(pairs) and all(a is not None and b is not None and a.equals(b)
                               for a, b in pairs)


def _keys(ax, items, names, shown_as, missing) -> None:
    """Legend entries for a colour-per-run, style-per-column plot: one per run and one
    per column instead of one per line (runs x columns entries bury the data)."""
    for i, (label, _) in enumerate(items):
        if len(missing.get(label, ())) < len(names):
            ax.plot([], [], color=_color(i, items), lw=1.4, label=shown_as[label])
    for j, shown in enumerate(names.values()):
        style = LINESTYLES[j % len(LINESTYLES)]
        ax.plot([], [], color="0.3", lw=1.4, ls=style,
                label=_w("style_key", style=_w(STYLE_NAMES[style]), name=shown))


# Every instrument by name: what INSTRUMENTS and `compare(instrument=...)` refer to.
FUNCTIONS = {f.__name__: f for f in (
    loss, gradients, update_ratio, activations, inputs, output_gradient, validation,
    accuracy, min_recall, eval_jitter, gradient_cosine, timing, padding, column, weights,
    outputs, implied_loss, zero_gradients, batches, loss_weight, eval_inputs, train_mode,
    target_share)}


@_speaks
def lr_range(result, ax=None) -> Axes:
    """The LR range test: loss per rate on a log axis, the suggestion and where the
    loss blew up marked (see `fl.lr_range_test`)."""
    ax = _axes(ax)
    table = result.table
    ax.plot(table["lr"], table["loss"], color=REFERENCE_COLOR, lw=0.8, alpha=0.6,
            label=_w("per batch"))
    ax.plot(table["lr"], table["smoothed_loss"], color="tab:blue", lw=1.8, label=_w("smoothed"))
    ax.axvline(result.suggested_lr, color="tab:green", ls="--",
               label=_w("suggested", lr=result.suggested_lr))
    if result.diverged_lr:
        ax.axvline(result.diverged_lr, color="tab:red", ls=":",
                   label=_w("blew up", lr=result.diverged_lr))
    ax.set_xscale("log")
    start = float(table["smoothed_loss"].iloc[0])
    ax.set_ylim(0, 1.5 * max(start, float(table["smoothed_loss"].max())))  # spikes clipped
    ax.set_xlabel(_w("learning rate"))
    ax.set_ylabel(_w("training loss"))
    _legend(ax)
    return ax
