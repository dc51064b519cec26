"""Plots: every instrument draws on the axes it is given, overlays runs, never raises
on missing columns, marks the first non-finite loss, and each fault has an instrument."""

import math
import re
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from torch import nn

import failurelab as fl
from failurelab.basics import text as fl_text
from failurelab.evidence.quantities import QUANTITIES
from failurelab.evidence.runs import TIMING_COLUMNS
from failurelab.views import plots


@pytest.fixture(scope="module")
def runs():
    return {"tabular": fl.run("tabular", steps=40), "huge_lr": fl.run("huge_lr", steps=40),
            "sequence": fl.run("bad_padding_mask", steps=30),
            "nan": fl.run("nan_in_data", seed=3)}  # seed 3: the first NaN batch is step 4


@pytest.fixture(scope="module")
def monitor_history():
    """A plain Monitor history: no validation, timing, activation or padding columns."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with fl.Monitor(model, optimizer) as mon:
            for _ in range(5):
                x, y = torch.randn(8, 3), torch.randint(0, 2, (8,))
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                mon.record(loss)
    return mon.history


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def _draw(name, runs, ax, **kwargs):
    if name == "column":
        return plots.column(runs, "grad_norm", ax=ax, **kwargs)
    return plots.FUNCTIONS[name](runs, ax=ax, **kwargs)


def _labelled_lines(ax):
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


def _runs_in_legend(ax):
    """The labelled lines without the note that a line hides an identical one."""
    return [label.split(" (= ")[0] for label in _labelled_lines(ax)]


def _texts(ax):
    return " | ".join(t.get_text() for t in ax.texts)


def _vertical_lines_at(ax, x):
    return [line for line in ax.get_lines() if list(line.get_xdata()) == [x, x]]


# --- every instrument, on every kind of history ---------------------------------------

@pytest.mark.parametrize("source", ["tabular", "sequence", "nan", "monitor"])
@pytest.mark.parametrize("name", list(plots.FUNCTIONS))
def test_every_instrument_draws_on_the_given_axes_and_labels_them(name, source, runs,
                                                                  monitor_history, ax):
    history = monitor_history if source == "monitor" else runs[source]
    figures = plt.get_fignums()
    assert _draw(name, history, ax) is ax
    assert ax.get_xlabel() and ax.get_ylabel()
    assert ax.get_lines() or ax.collections or ax.patches or ax.texts
    assert plt.get_fignums() == figures  # drew on the given axes, opened no figure


def test_without_axes_a_new_figure_is_made(runs):
    ax = plots.loss(runs["tabular"])
    assert ax.get_ylabel() == "training loss"
    plt.close(ax.figure)


def test_anything_but_runs_or_histories_is_a_clear_type_error():
    with pytest.raises(TypeError, match="Run, a history DataFrame"):
        plots.loss([1, 2])


# --- overlays ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["loss", "gradients", "update_ratio", "output_gradient",
                                  "gradient_cosine", "weights", "column"])
def test_an_overlay_draws_one_labelled_line_per_run_baseline_first_in_grey(name, runs, ax):
    _draw(name, {"baseline": runs["tabular"], "huge_lr": runs["huge_lr"]}, ax)
    assert _runs_in_legend(ax) == ["baseline", "huge_lr"]
    first = next(line for line in ax.get_lines() if line.get_label() == "baseline")
    assert first.get_color() == plots.REFERENCE_COLOR
    assert ax.get_legend() is not None


def test_a_list_of_runs_is_labelled_by_what_each_recipe_changes(runs, ax):
    lr = fl.baseline().lr * 0.1  # a tenth of the rate, as Scale("lr", 0.1) computes it
    slower = fl.run(fl.baseline().replace(lr=lr), steps=5)
    plots.loss([runs["tabular"], runs["huge_lr"], slower], ax=ax)
    assert lr != 0.01  # 0.010000000000000002 in floating point, shown as 0.01
    assert _labelled_lines(ax) == ["tabular baseline (seed 0)", "lr=3 (seed 0)",
                                   "lr=0.01 (seed 0)"]


def test_a_line_that_hides_an_earlier_one_exactly_says_so_in_the_legend(runs, ax):
    again = fl.run("tabular", steps=40)  # the same recipe and seed: the same history
    plots.loss({"baseline": runs["tabular"], "fix": again, "fault": runs["huge_lr"]}, ax=ax)
    assert _labelled_lines(ax) == ["baseline", "fix (= baseline exactly, drawn over it)",
                                   "fault"]
    shown = [t.get_text() for t in ax.get_legend().get_texts()]  # wrapped, not squeezing
    assert all(len(line) <= plots.LEGEND_WIDTH for text in shown for line in text.split("\n"))


def test_every_legend_sits_outside_the_axes_so_it_never_covers_the_data(runs):
    fig, axes = plt.subplots(1, 3, figsize=(18, 4), layout="constrained")
    many = {"baseline": runs["tabular"], "huge_lr": runs["huge_lr"], "nan": runs["nan"]}
    plots.gradients(runs["tabular"], ax=axes[0], per_layer=True)
    plots.activations(many, ax=axes[1])
    plots.accuracy(many, ax=axes[2])
    fig.canvas.draw()
    for ax in axes:
        legend = ax.get_legend().get_window_extent()
        assert legend.x0 >= ax.get_window_extent().x1  # to the right of the plotting area
    plt.close(fig)
    fig = plots.overview(many)  # a grid: below each panel, so the panels keep their width
    fig.canvas.draw()
    for ax in (a for a in fig.axes if a.get_legend() is not None):
        assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0
    plt.close(fig)


def test_several_runs_of_several_columns_get_one_key_per_run_and_per_column(runs, ax):
    plots.activations({"baseline": runs["tabular"], "huge_lr": runs["huge_lr"],
                       "nan": runs["nan"]}, ax=ax)
    keys = ["solid: saturated_frac/sigmoid", "dashed: dead_frac/relu"]
    assert _runs_in_legend(ax) == ["baseline", "huge_lr", "nan", *keys]  # 5, not 3 x 2
    assert len([line for line in ax.get_lines() if line.get_label() == "_nolegend_"]) == 6


def test_accuracy_names_each_run_once_and_the_dashed_training_lines_once(runs, ax):
    plots.accuracy({"baseline": runs["tabular"], "huge_lr": runs["huge_lr"]}, ax=ax)
    labels = _labelled_lines(ax)
    assert labels[:2] == ["baseline", "huge_lr"] and len(labels) == 3
    assert "training" in labels[2]


# --- missing columns, non-finite values -------------------------------------------------

@pytest.mark.parametrize("name, note", [
    ("validation", "no validation columns in this history"),
    ("timing", "no timing columns in this history"),
    ("activations", "no activation columns in this history"),
    ("padding", "no padding columns"),
    ("batches", "no label_purity in this history"),
])
def test_a_monitor_history_gets_a_note_for_what_it_lacks(name, note, monitor_history, ax):
    _draw(name, monitor_history, ax)
    assert note in _texts(ax)


def test_a_run_missing_a_column_in_an_overlay_is_named_in_the_note(runs, monitor_history,
                                                                   ax):
    plots.validation({"baseline": runs["tabular"], "mine": monitor_history}, ax=ax)
    assert "no val_loss in mine" in _texts(ax)
    assert "baseline" in _labelled_lines(ax)


def test_the_first_nonfinite_loss_is_marked_with_a_labelled_line(runs, ax):
    plots.loss(runs["nan"], ax=ax)
    assert _vertical_lines_at(ax, 4)
    assert "NaN/Inf loss at step 4" in _texts(ax)


def test_the_nonfinite_input_that_caused_it_is_marked_too(runs, ax):
    plots.inputs({"baseline": runs["tabular"], "nan": runs["nan"]}, ax=ax)
    assert "NaN/Inf input at step 4 (nan)" in _texts(ax)
    assert "NaN/Inf loss at step 4 (nan)" in _texts(ax)


def test_a_healthy_run_has_no_nonfinite_marker(runs, ax):
    plots.loss(runs["tabular"], ax=ax)
    assert "NaN" not in _texts(ax)


# --- scales and reference marks ---------------------------------------------------------

@pytest.mark.parametrize("name", ["gradients", "update_ratio", "inputs"])
def test_norms_and_ratios_are_drawn_on_a_log_axis(name, runs, ax):
    _draw(name, runs["huge_lr"], ax)
    assert ax.get_yscale() == "log"


def test_the_loss_gets_a_log_axis_only_when_it_spans_two_decades(runs):
    falling = pd.DataFrame({"step": range(50), "loss": np.logspace(1, -3, 50)})
    for history, scale in [(falling, "log"), (runs["tabular"], "linear")]:
        ax = plots.loss(history)
        assert ax.get_yscale() == scale
        plt.close(ax.figure)


def test_update_ratio_shades_and_labels_the_healthy_band(runs, ax):
    plots.update_ratio(runs["tabular"], ax=ax)
    lo, hi = plots.HEALTHY_UPDATE_RATIO
    assert any("healthy" in p.get_label() for p in ax.patches)
    assert ax.get_ylim()[0] <= lo and ax.get_ylim()[1] >= hi
    # the line huge_lr's signature reads, calibrated from the written band edge
    used = fl.FAULTS["huge_lr"].signature.conditions[0]
    assert used.physical == hi and used.threshold > hi
    assert f"threshold used {used.threshold:.3g} (written {hi:g})" in _texts(ax)


def test_the_float16_limit_is_drawn_only_when_inputs_come_near_it(runs):
    big = pd.DataFrame({"step": range(5), "loss": 1.0,
                        "input_absmax": [1e2, 1e3, 1e4, 7e4, 8e4]})
    for history, shown in [(big, True), (runs["tabular"], False)]:
        ax = plots.inputs(history)
        assert ("float16 max 65504" in _texts(ax)) is shown
        plt.close(ax.figure)


def test_gradient_cosine_spans_minus_one_to_one(runs, ax):
    plots.gradient_cosine(runs["tabular"], ax=ax)
    low, high = ax.get_ylim()
    assert low <= -1 and high >= 1 and low > -1.1 and high < 1.1


def test_shares_are_drawn_between_zero_and_one(runs, ax):
    plots.activations(runs["huge_lr"], ax=ax)
    assert ax.get_ylim() == pytest.approx((-0.02, 1.02))
    assert set(_labelled_lines(ax)) == {"saturated_frac/sigmoid", "dead_frac/relu"}


# --- particular instruments -------------------------------------------------------------

def test_per_layer_gradients_draw_one_line_per_parameter(runs, ax):
    plots.gradients(runs["tabular"], ax=ax, per_layer=True)
    params = [c.split("/", 1)[1] for c in runs["tabular"].history if c.startswith("grad_norm/")]
    assert _labelled_lines(ax) == ["total", *params]


def test_per_layer_gradients_of_several_runs_say_why_they_are_not_drawn(runs, ax):
    plots.gradients([runs["tabular"], runs["huge_lr"]], ax=ax, per_layer=True)
    assert len(_labelled_lines(ax)) == 2
    assert "per-layer lines need a single run" in _texts(ax)


def test_validation_draws_markers_at_the_evaluated_steps_over_the_training_curve(runs, ax):
    plots.validation(runs["tabular"], ax=ax)
    val = next(line for line in ax.get_lines()
               if line.get_label() == "tabular baseline (seed 0)")
    assert list(val.get_xdata()) == [0, 10, 20, 30, 39]
    assert val.get_marker() == "o"
    assert any("training" in label for label in _labelled_lines(ax))


def test_accuracy_draws_validation_accuracy(runs, ax):
    plots.accuracy(runs["tabular"], ax=ax)
    h = runs["tabular"].history
    ys = [list(line.get_ydata()) for line in ax.get_lines()]
    assert h["val_acc"].dropna().tolist() in ys


def test_timing_of_one_run_stacks_four_segments_in_milliseconds(runs, ax):
    plots.timing(runs["tabular"], ax=ax)
    assert sum(isinstance(c, PolyCollection) for c in ax.collections) == len(TIMING_COLUMNS)
    assert ax.get_legend_handles_labels()[1] == list(TIMING_COLUMNS)
    total_ms = runs["tabular"].history[list(TIMING_COLUMNS)].sum(axis=1).max() * 1e3
    assert ax.get_ylim()[1] == pytest.approx(total_ms, rel=0.1)


def test_timing_of_several_runs_stacks_their_median_segments(runs, ax):
    plots.timing({"baseline": runs["tabular"], "huge_lr": runs["huge_lr"]}, ax=ax)
    bars = ax.patches
    assert len(bars) == 2 * len(TIMING_COLUMNS)
    assert bars[0].get_height() == pytest.approx(
        runs["tabular"].history["t_data"].median() * 1e3)


def test_padding_draws_attention_per_step_and_sensitivity_at_evaluations(runs, ax):
    plots.padding(runs["sequence"], ax=ax)
    assert _labelled_lines(ax) == ["attention on pads", "change with more pads"]
    sensitivity = ax.get_lines()[1]
    assert len(sensitivity.get_xdata()) == runs["sequence"].history["pad_sensitivity"].count()


def test_a_sparsely_recorded_column_gets_markers(ax):
    economy = fl.run("tabular", steps=30, preset="economy")
    plots.gradients(economy, ax=ax)
    assert ax.get_lines()[0].get_marker() == "o"


# --- instruments for faults, and the figures -------------------------------------------

def _signature_quantities():
    return sorted({c.quantity for f in fl.FAULTS.values()
                   for s in (f.signature, *f.also, f.outcome) for c in s.conditions})


@pytest.mark.parametrize("fault", list(fl.FAULTS))
def test_every_fault_maps_to_an_existing_instrument(fault):
    assert plots.instrument_for(fault) in plots.FUNCTIONS


@pytest.mark.parametrize("quantity", _signature_quantities())
def test_every_quantity_used_by_a_signature_has_an_instrument(quantity):
    assert plots.INSTRUMENTS[quantity] in plots.FUNCTIONS


def test_the_instrument_table_names_only_known_quantities():
    assert set(plots.INSTRUMENTS) <= set(QUANTITIES)


def test_the_instrument_follows_the_first_signature_condition():
    assert plots.instrument_for("huge_lr") == "update_ratio"
    assert plots.instrument_for("no_zero_grad") == "gradient_cosine"
    assert plots.instrument_for("bad_padding_mask") == "padding"


def test_instrument_for_an_unknown_fault_lists_the_known_ones():
    with pytest.raises(KeyError, match="huge_lr"):
        plots.instrument_for("huge_lrr")


def test_compare_draws_the_loss_and_the_faults_instrument_side_by_side(runs):
    fig = plots.compare(runs["tabular"], runs["huge_lr"], fault="huge_lr")
    assert isinstance(fig, Figure)
    left, right = fig.axes[:2]
    assert len(fig.axes) == 2
    assert "huge_lr" in fig._suptitle.get_text()
    assert left.get_ylabel() == "training loss"
    assert right.get_ylabel().startswith("update ratio")
    assert _runs_in_legend(left) == ["baseline", "huge_lr"]
    fig.canvas.draw()
    plt.close(fig)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_experiment_opened_by_its_course_key_plots_without_naming_its_fault(runs, lang,
                                                                            monkeypatch):
    """The notebooks plot before the student explains: title and legend must not give
    the answer away (the key is neutral for the same reason)."""
    monkeypatch.setenv("FAILURELAB_LANG", lang)
    fig = plots.compare(runs["tabular"], runs["huge_lr"], fault="huge_lr", key="01-2")
    shown = [fig._suptitle.get_text(), *_runs_in_legend(fig.axes[0])]
    assert "01-2" in shown[0]
    assert not any("huge_lr" in text or "30" in text for text in shown)
    plt.close(fig)


@pytest.mark.parametrize("instrument", ["activations", plots.activations])
def test_compare_takes_an_instrument_by_name_or_function(instrument, runs):
    fig = plots.compare(runs["tabular"], runs["huge_lr"], instrument=instrument)
    assert fig.axes[1].get_ylabel() == "share saturated / dead"
    plt.close(fig)


def test_compare_rejects_an_unknown_instrument_by_listing_the_known_ones(runs):
    with pytest.raises(KeyError, match="update_ratio"):
        plots.compare(runs["tabular"], runs["huge_lr"], instrument="update_rate")


def test_overview_is_a_two_by_three_grid_of_the_main_instruments(runs, monitor_history):
    for what in (runs["tabular"], {"baseline": runs["tabular"], "nan": runs["nan"]},
                 monitor_history):
        fig = plots.overview(what)
        assert [a.get_title() for a in fig.axes] == [
            "loss", "gradients", "update_ratio", "activations", "validation", "inputs"]
        assert all(a.get_ylabel() for a in fig.axes)
        fig.canvas.draw()  # layout, log and symlog axes, notes: all render
        plt.close(fig)


def test_plotting_leaves_the_history_unchanged(runs, ax):
    before = runs["nan"].history.copy()
    plots.inputs(runs["nan"], ax=ax)
    plots.loss(runs["nan"], ax=ax)
    pd.testing.assert_frame_equal(runs["nan"].history, before)
    assert math.isnan(before["loss"].iloc[-1])


# --- Chinese plots, with and without a CJK font (issue 29, item 16) -------------------------

CJK = re.compile(r"[\u4e00-\u9fff]")


def _figure_texts(fig: Figure) -> list[str]:
    """Every text the figure shows: titles, axis labels, legends, notes, marks."""
    found = [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))]
    return [t for t in found if t]


def _draw_every_instrument(runs) -> list[Figure]:
    pair = {"baseline": runs["tabular"], "huge_lr": runs["huge_lr"]}
    figures = [plots.compare(runs["tabular"], runs["huge_lr"], fault="huge_lr"),
               plots.overview(pair)]
    for draw in plots.FUNCTIONS.values():
        if draw is not plots.column:
            figures.append(draw(pair).figure)
            plt.close(figures[-1])  # pyplot forgets it; it still draws
    return figures


def test_without_a_cjk_font_chinese_plots_fall_back_to_english_cleanly(runs, monkeypatch):
    """No font can draw Chinese: every label stays English (no boxes) and drawing warns
    about nothing (matplotlib would warn once per missing glyph)."""
    monkeypatch.setenv(fl_text.ENV, "zh")
    monkeypatch.setattr(plots, "cjk_font", lambda: None)
    assert plots.plot_language() == "en"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fig in _draw_every_instrument(runs):
            fig.canvas.draw()
            assert not [t for t in _figure_texts(fig) if CJK.search(t)]
    assert "training loss" in _figure_texts(plots.loss(runs["tabular"]).figure)


def test_with_a_cjk_font_titles_labels_and_legends_speak_chinese(runs, monkeypatch):
    monkeypatch.setenv(fl_text.ENV, "zh")
    monkeypatch.setattr(plots, "cjk_font", lambda: "Some CJK Font")  # the words only
    fig = plots.compare(runs["tabular"], runs["huge_lr"], fault="huge_lr")
    texts = _figure_texts(fig)
    assert fl.FAULTS["huge_lr"].text("title", "zh") in fig.get_suptitle()
    assert {"训练损失", "基线", "步"} <= set(texts), texts
    assert any(t.startswith("健康范围") for t in texts)  # the update ratio's band, in the legend
    ax = plots.overview(runs["tabular"]).axes[0]
    assert ax.get_title() == "损失 (loss)"
    assert fl_text.language("en") == "en" and plots.plot_language() == "zh"


@pytest.mark.skipif(plots.cjk_font() is None, reason="no CJK font installed (e.g. fonts-noto-cjk)")
def test_an_installed_cjk_font_draws_every_chinese_plot_without_a_missing_glyph(runs, monkeypatch):
    monkeypatch.setenv(fl_text.ENV, "zh")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a UserWarning
        for fig in _draw_every_instrument(runs):
            fig.canvas.draw()
            assert any(CJK.search(t) for t in _figure_texts(fig))


def test_plots_speak_english_by_default(runs, monkeypatch):
    monkeypatch.delenv(fl_text.ENV, raising=False)
    fig = plots.compare(runs["tabular"], runs["huge_lr"], fault="huge_lr")
    assert not [t for t in _figure_texts(fig) if CJK.search(t)]


def test_a_report_or_command_language_decides_over_the_environment(runs, monkeypatch):
    """`failurelab report --lang zh` draws its figures in Chinese with no variable set,
    and an English block inside a Chinese notebook stays English."""
    monkeypatch.setattr(plots, "cjk_font", lambda: "Some CJK Font")
    monkeypatch.delenv(fl_text.ENV, raising=False)
    with plots.speaking("zh"):
        assert "训练损失" in _figure_texts(plots.loss(runs["tabular"]).figure)
        with plots.speaking("en"):
            assert plots.plot_language() == "en"
    assert plots.plot_language() == "en"
