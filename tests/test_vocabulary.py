"""One vocabulary: every threshold, column and quantity declared once and read everywhere.

- the shared thresholds are written once (evidence/thresholds.py), never again as a
  number where they are used;
- every column a quantity reads is one a Monitor records or a documented extra;
- docs/columns.md is what the declarations say;
- a live alert and the diagnosis agree about accumulating gradients on shared runs.
"""

import ast
import importlib.util
import math
from pathlib import Path

import pytest
import torch
from runs_cache import cached_run
from torch import nn

import failurelab as fl
from failurelab.evidence import alerts, columns, thresholds
from failurelab.evidence.quantities import QUANTITIES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "failurelab"
SHARED = {name: getattr(thresholds, name) for name in dir(thresholds) if name.isupper()}
# The quantities each shared threshold governs: a condition on one of them states the
# threshold by name, never as a number.
GOVERNS = {
    "UPDATE_RATIO_LOW": ("update_ratio_median", "update_ratio_start", "update_ratio_peak"),
    "UPDATE_RATIO_HIGH": ("update_ratio_median", "update_ratio_start", "update_ratio_peak"),
    "LOSS_ROSE": ("loss_peak_ratio",),
    "ACCUMULATING_TURN": ("grad_turn_end", "grad_cosine_end"),
}
# Module constants that hold one of the shared numbers with another meaning.
OTHER_MEANINGS = {
    ("evidence/quantities.py", "EARLY"),  # 0.05: the share of steps that is "the start"
    ("evidence/quantities.py", "PINNED"),  # 1e-4: relative change of a clipped norm
    ("views/plots.py", "NEAR_FLOAT16"),  # 0.1: share of float16's max worth drawing
    ("course/mystery.py", "MIDDLE"),  # 0.1: the share of the run the readout calls its middle
    ("evidence/experiments.py", "FLOOR"),  # 0.05: the least spread, as a share of the loss scale
    ("investigation/runner.py", "VALIDATIONS"),  # 10 validation passes per experiment
    ("cli.py", "PROGRESS_EVERY_S"),  # 10 s between progress lines in a pipe
    ("lab/lr_range.py", "SMOOTHING"),  # 0.05: weight of the newest loss
    ("lab/lr_range.py", "NORMALISED_EDGE_SAFETY"),  # 10: rate divisor for Adam-like
    ("lab/lr_range.py", "START_LR"), ("lab/lr_range.py", "END_LR"),  # the sweep's range
    ("lab/train.py", "EXTRA_PADS"),  # 10 pads appended
    ("lab/data.py", "VALUE_NOISE"),  # 0.1: std of the regression target's noise
    ("zoo/loop.py", "VAL_EVERY"),  # validation every 10 steps
    ("cli.py", "MYSTERY_SEEDS"),  # 1000 mystery seeds
    ("lab/data.py", "N_FEATURES"),  # 16 input features of the lab's data
    ("telemetry/instruments.py", "UNIT_RUN"),  # 16 units read side by side
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text("utf-8"))


def _number(node):
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):  # 1 - 0.05
        left, right = _number(node.left), _number(node.right)
        return None if left is None or right is None else left - right
    return None


def test_each_shared_threshold_is_assigned_once_in_the_whole_package():
    assigned = {}
    for path, tree in _modules():
        for node in tree.body:
            if not isinstance(node, ast.Assign):
                continue
            target, value = node.targets[0], node.value
            values = value.elts if isinstance(value, ast.Tuple) else [value]
            names = target.elts if isinstance(target, ast.Tuple) else [target] * len(values)
            for name_node, value_node in zip(names, values, strict=False):  # A, B = 1, 2**4
                name, value = getattr(name_node, "id", None), _number(value_node)
                if value is None or name is None:
                    continue
                if value in SHARED.values() and (path, name) not in OTHER_MEANINGS:
                    assigned.setdefault(value, []).append(f"{path}:{name}")
    assert {v: sorted(w) for v, w in assigned.items()} == {
        v: [f"evidence/thresholds.py:{n}" for n, x in SHARED.items() if x == v]
        for v in SHARED.values()}


def test_no_condition_writes_a_shared_threshold_as_a_number():
    written = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("C", "Condition")
                    and len(node.args) >= 3 and isinstance(node.args[0], ast.Constant)):
                continue
            quantity, value = node.args[0].value, _number(node.args[2])
            for name, governed in GOVERNS.items():
                shared = SHARED[name]
                if quantity in governed and value is not None and \
                        (math.isclose(value, shared) or math.isclose(value, 1 - shared)):
                    written.append(f"{path}:{node.lineno} {quantity} {value} (use {name})")
    assert written == []


def test_the_shapes_blow_up_and_the_gradients_wreckage_are_two_named_factors():
    from failurelab.evidence import quantities, shapes

    assert shapes.BLOWUP == thresholds.LOSS_DIVERGED < thresholds.LOSS_WRECKED
    assert not hasattr(quantities, "BLOWUP") and not hasattr(quantities, "RISEN")


def _monitored_history():
    """Every Monitor column group on a small loop: ReLU and sigmoid units, an
    evaluation pass, the full preset."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Sigmoid(),
                          nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
    with fl.Monitor(model, optimizer) as mon:
        for _ in range(6):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            mon.record(loss)
            model.eval()
            with torch.no_grad():
                model(torch.randn(16, 6))
            model.train()
    return mon.history


def test_every_column_a_quantity_reads_is_recorded_by_the_monitor_or_a_documented_extra():
    recorded = set(_monitored_history().columns)
    for q in QUANTITIES.values():
        for c in q.requires + q.optional:
            group = columns.GROUP[columns.group_of(c)]
            if group.recorder == columns.EXTRA:
                continue  # documented in docs/columns.md as what a loop passes to record()
            found = any(r.startswith(c) for r in recorded) if c.endswith("/") else c in recorded
            assert found, f"{q.name} reads {c!r}, which the Monitor did not record"


def test_every_column_the_monitor_records_is_declared():
    assert [c for c in _monitored_history().columns if columns.group_of(c) is None] == []


def test_docs_columns_page_is_generated_from_the_declarations():
    spec = importlib.util.spec_from_file_location("vocabulary", ROOT / "benchmarks/vocabulary.py")
    vocabulary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vocabulary)
    assert (ROOT / "docs/columns.md").read_text("utf-8") == vocabulary.render(), \
        "regenerate with: python benchmarks/vocabulary.py"


def test_the_alert_and_the_catalogue_read_the_same_accumulation_conditions():
    signature = fl.FAULTS["no_zero_grad"].signature.conditions
    routes = [c for s in fl.FAULTS["no_zero_grad"].signatures for c in s.conditions]
    for shared in (alerts.PARALLEL_GRADIENTS, alerts.MIXED_BATCHES, alerts.CARRIED,
                   alerts.NEVER_EMPTIED, alerts.ALL_OPTIMIZED):
        used = next(c for c in routes if c.quantity == shared.quantity
                    and c.label == shared.label)
        assert used.threshold == shared.threshold  # calibration did not move it apart
    assert signature[0].quantity == "grad_turn_end"


# Runs on which parallel gradients have other causes (one-class batches, weights outside
# the optimizer), the fault itself and two healthy baselines.
SHARED_RUNS = ["tabular", "sequence", "no_zero_grad", "no_shuffle", "params_not_in_optimizer"]


@pytest.mark.parametrize("name", SHARED_RUNS)
def test_the_accumulating_alert_fires_exactly_where_the_diagnosis_names_no_zero_grad(name):
    recipe = fl.baseline(name) if name in ("tabular", "sequence") else \
        fl.inject(fl.baseline(fl.FAULTS[name].task), name)
    history = cached_run(recipe, 0).history
    alerted = any(a.kind == "accumulating" for a in fl.alerts(history))
    assert alerted == (fl.diagnose(history).top == "no_zero_grad") == (name == "no_zero_grad")
