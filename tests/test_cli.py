"""The `failurelab` command, run as a user runs it: a subprocess with its exit status,
stdout and stderr.  Each subprocess pays ~3 s of importing torch, so edge cases (bad
options, missing files, grading) call `main` in-process; few seeds and short runs keep
the whole file near half a minute."""

import importlib.util
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

import failurelab as fl
from failurelab.cli import main

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
ENV.pop("CI", None)  # progress bars must stay off because stderr is a pipe, not because of CI
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FAST_FAULTS = "nan_in_data,fp16_overflow"  # both stop at their first NaN: cheap runs


def failurelab(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "failurelab", *map(str, args)], env=ENV,
                          capture_output=True, text=True, cwd=cwd, timeout=180)


def in_process(capsys, *args):
    """(exit status, stdout, stderr) of `main`, as the console script would exit."""
    try:
        status = main([str(a) for a in args])
    except SystemExit as exit_:  # argparse's usage errors
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def huge_lr(tmp_path_factory):
    """One `run` with every output option; several tests read what it wrote."""
    out = tmp_path_factory.mktemp("run")
    result = failurelab("run", "huge_lr", "--steps", 60, "--plot", out / "cmp.png",
                        "--save", out / "huge_lr.csv")
    return result, out


@pytest.fixture(scope="module")
def verify():
    return failurelab("verify", "--seeds", "0-1", "--faults", FAST_FAULTS)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    result = failurelab("report", "--out", out, "--faults", "huge_lr,nan_in_data,dead_relu",
                        "--steps", 60)
    return result, out


# --- list, run, diagnose ------------------------------------------------------------------

def test_list_shows_every_fault_with_its_family_and_task():
    result = failurelab("list")
    assert result.returncode == 0, result.stderr
    for name, fault in fl.FAULTS.items():
        line = next(row for row in result.stdout.splitlines() if row.startswith(name + " "))
        assert fault.family in line and fault.task in line


def test_run_prints_the_signature_beside_the_baseline_and_the_check_verdict(huge_lr):
    result, _ = huge_lr
    assert result.returncode == 0, result.stderr
    assert "Learning rate 30x too large" in result.stdout
    assert "update ratio of the first steps" in result.stdout
    assert "check: reproduced" in result.stdout
    assert "diagnosis of the huge_lr run" in result.stdout and "shape:" in result.stdout


def test_run_writes_a_png_plot(huge_lr):
    _, out = huge_lr
    assert (out / "cmp.png").read_bytes()[:8] == PNG_MAGIC


def test_the_saved_history_round_trips_through_read_history(huge_lr):
    _, out = huge_lr
    saved = fl.read_history(out / "huge_lr.csv")
    fresh = fl.run("huge_lr", steps=60).history
    pd.testing.assert_series_equal(saved["loss"], fresh["loss"], check_dtype=False)


def test_run_of_a_task_name_runs_its_baseline_alone(capsys, tmp_path):
    status, out, _ = in_process(capsys, "run", "sequence", "--steps", 20, "--plot",
                                tmp_path / "overview.png")
    assert status == 0
    assert "sequence baseline" in out and "final_loss" in out
    assert (tmp_path / "overview.png").read_bytes()[:8] == PNG_MAGIC


def test_diagnose_reads_a_saved_history_and_names_its_cause(huge_lr):
    _, out = huge_lr
    result = failurelab("diagnose", out / "huge_lr.csv")
    assert result.returncode == 0, result.stderr
    assert "cause: huge_lr" in result.stdout


@pytest.mark.parametrize("content", [None, "not,a\nhistory,at all\n", "\x00\x01garbage"])
def test_diagnose_of_a_missing_or_corrupt_file_is_one_line_and_status_2(capsys, tmp_path,
                                                                        content):
    path = tmp_path / "history.csv"
    if content is not None:
        path.write_text(content)
    status, _, err = in_process(capsys, "diagnose", path)
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and str(path) in err


# --- verify -----------------------------------------------------------------------------------

def test_verify_prints_the_table_and_exits_0_when_everything_reproduces(verify):
    result = verify
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^nan_in_data\s+2/2\s+0\s+\S+\s+yes$", result.stdout, re.M)
    assert re.search(r"^fp16_overflow\s+2/2\s+0\s+\S+\s+yes$", result.stdout, re.M)
    assert "no baseline false alarm" in result.stdout
    assert "huge_lr" not in result.stdout  # only the faults asked for


def test_verify_says_what_it_does_then_its_progress_as_lines_off_a_terminal(verify):
    assert verify.returncode == 0
    assert "\r" not in verify.stderr  # no tqdm bar ("\r...%|") when stderr is a pipe
    lines = verify.stderr.splitlines()
    assert lines[0].startswith("verify: 2 faults x 2 seeds") and "Ctrl-C" in lines[0]
    assert lines[1].startswith("verify: 0/6 runs, ")  # the pool started, nothing finished
    assert lines[-1].startswith("verify: 6/6 runs, ")
    assert all(re.match(r"verify: [1-6]/6 runs, \d+ s$", line) for line in lines[2:])


# --- report -----------------------------------------------------------------------------------

def test_report_writes_an_index_and_a_page_per_fault(report):
    result, out = report
    assert result.returncode == 0, result.stderr
    index = (out / "index.html").read_text()
    for name in ("huge_lr", "nan_in_data", "dead_relu"):
        assert f'href="{name}.html"' in index
        assert (out / f"{name}.html").exists()


def test_every_card_references_its_own_png_and_the_file_exists(report):
    _, out = report
    for page in out.glob("*.html"):
        for image in re.findall(r'<img src="([^"]+)"', page.read_text()):
            assert "/" not in image  # relative, next to the page
            assert (out / image).read_bytes()[:8] == PNG_MAGIC
    assert len(list(out.glob("*.png"))) == 3


def test_report_cards_show_the_worksheet_the_signature_and_the_diagnosis(report):
    _, out = report
    page = (out / "dead_relu.html").read_text()
    fault = fl.FAULTS["dead_relu"]
    for text in (fault.symptom, fault.fix, fault.signature.conditions[0].label):
        assert _html(text) in page
    assert "Diagnosis of the faulty run" in page and "shape:" in page


def test_report_is_offline_no_script_and_no_network_references(report):
    _, out = report
    for page in out.glob("*.html"):
        text = page.read_text().lower()
        assert "<script" not in text and "http" not in text and "@import" not in text


def _html(text: str) -> str:
    import html
    return html.escape(text)


# --- errors -------------------------------------------------------------------------------------

def test_an_unknown_fault_is_one_line_naming_the_closest_match_without_a_traceback():
    result = failurelab("run", "hugelr")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "Did you mean 'huge_lr'?" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [("verify", "--faults", "hugelr"),
                                  ("report", "--out", "r", "--faults", "huge_lr,hugelr"),
                                  ("mystery", "--seed", "1", "--reveal", "--answer", "hugelr")])
def test_every_command_refuses_an_unknown_fault_before_any_work(capsys, args, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = in_process(capsys, *args)
    assert status == 2
    assert err.count("\n") == 1 and "Did you mean 'huge_lr'?" in err
    assert not (tmp_path / "r").exists()  # nothing is written before the names check out


def test_a_bad_option_is_a_usage_error_with_status_2():
    result = failurelab("verify", "--bogus")
    assert result.returncode == 2
    assert "usage: failurelab verify" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [("run",), ("run", "huge_lr", "--steps", "ten"),
                                  ("run", "huge_lr", "--seed", "-1"), ("report",),
                                  ("frobnicate",), ()])
def test_missing_or_malformed_arguments_are_usage_errors(capsys, args):
    status, _, err = in_process(capsys, *args)
    assert status == 2 and "usage: failurelab" in err


@pytest.mark.parametrize("seeds", ["9-0", "0-x", ""])
def test_a_bad_seed_range_is_one_line_with_status_2(capsys, seeds):
    status, _, err = in_process(capsys, "verify", "--seeds", seeds)
    assert status == 2
    assert err.count("\n") == 1 and "seeds" in err


@pytest.mark.parametrize("args", [("run", "huge_lr", "--seed", "99999999999999999999"),
                                  ("mystery", "--seed", str(2**63)),
                                  ("report", "--out", "r", "--seed", "1e3")])
def test_a_seed_out_of_range_is_a_usage_error_naming_the_range(capsys, args, tmp_path,
                                                                monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, err = in_process(capsys, *args)
    assert status == 2 and "usage: failurelab" in err and "Traceback" not in err
    assert "a whole number from 0 to 2**63 - 1" in err and not out
    assert not (tmp_path / "r").exists()


def test_a_seed_list_out_of_range_is_one_line_with_status_2(capsys):
    status, _, err = in_process(capsys, "verify", "--seeds", "0,99999999999999999999")
    assert status == 2 and err.count("\n") == 1 and "2**63 - 1" in err


@pytest.mark.parametrize("steps", ["0", "-3", "2000000"])
def test_steps_outside_the_allowed_range_say_the_range_they_break(capsys, steps):
    status, _, err = in_process(capsys, "run", "huge_lr", "--steps", steps)
    assert status == 2 and "expected a whole number from 1 to 1000000" in err
    assert "0 or more" not in err


def _no_training(monkeypatch):
    """Make any training run fail loudly: the checks below must stop the command first."""
    def refuse(*args, **kwargs):
        raise AssertionError("a run started before the options were checked")
    monkeypatch.setattr("failurelab.lab.train.run", refuse)


@pytest.mark.parametrize("option, path, why", [
    ("--plot", "missing/dir/a.png", "does not exist"),
    ("--save", "missing/h.csv", "does not exist"),
    ("--plot", ".", "it is a folder"),
    ("--plot", "cmp.xyz", "a plot file's name must end in"),
])
def test_an_output_path_that_cannot_be_written_is_refused_before_the_run(
        capsys, tmp_path, monkeypatch, option, path, why):
    monkeypatch.chdir(tmp_path)
    _no_training(monkeypatch)
    for name in ("huge_lr", "tabular"):  # a fault beside its baseline, and a baseline alone
        status, out, err = in_process(capsys, "run", name, option, path)
        assert status == 2 and not out
        assert err.count("\n") == 1 and why in err and path in err


@pytest.mark.parametrize("name", ["HUGE_LR", "Huge_Lr", "NO_ZERO_GRAD"])
def test_a_fault_name_in_the_wrong_case_gets_a_did_you_mean(capsys, name):
    status, _, err = in_process(capsys, "run", name)
    assert status == 2 and err.count("\n") == 1
    assert f"Did you mean {name.lower()!r}?" in err


def test_help_imports_neither_torch_nor_matplotlib():
    """`failurelab --help` must answer at once: the heavy libraries load only in the
    commands that use them (pandas stays: see failurelab/__init__.py)."""
    code = ("import sys\n"
            "from failurelab.cli import main\n"
            "for argv in (['--help'], ['run', '--help'], ['verify', '--seeds', '9-0']):\n"
            "    try:\n"
            "        main(argv)\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_every_command_has_help_with_examples(capsys):
    for command in ("list", "run", "verify", "diagnose", "mystery", "report"):
        status, out, _ = in_process(capsys, command, "--help")
        assert status == 0 and "examples:" in out and f"failurelab {command}" in out


# --- mystery ------------------------------------------------------------------------------------

needs_mystery = pytest.mark.skipif(importlib.util.find_spec("failurelab.course.mystery") is None,
                                   reason="failurelab.course.mystery has not landed yet")


@needs_mystery
def test_a_blind_mystery_shows_telemetry_but_not_its_fault():
    from failurelab.course.mystery import pick

    # a fault whose run stays finite, so every instrument has values to show
    seed = next(s for s in range(500) if pick(s) == "huge_lr")
    blind = failurelab("mystery", "--seed", seed)
    assert blind.returncode == 0, blind.stderr
    assert "training loss" in blind.stdout and "gradient norm" in blind.stdout
    assert pick(seed) not in blind.stdout and "cause" not in blind.stdout


@needs_mystery
def test_a_blind_mystery_prints_no_curve_shape_and_no_recipe_field():
    """A batch_too_small mystery: the readout once printed "batch size 2 2 2"
    and the diagnosed shape, the two things the student is asked to work out."""
    from failurelab.course.mystery import pick

    seed = next(s for s in range(500) if pick(s) == "batch_too_small")
    blind = failurelab("mystery", "--seed", seed)
    assert blind.returncode == 0, blind.stderr
    text = blind.stdout.lower()
    assert "batch size" not in text and "shape" not in text
    assert not any(shape in text for shape in ("diverging", "oscillating", "plateau",
                                               "stepwise", "degrading", "healthy"))


@needs_mystery
def test_the_reveal_names_the_fault_and_grades_the_answer(capsys):
    from failurelab.course.mystery import pick

    fault = pick(9)
    status, out, _ = in_process(capsys, "mystery", "--seed", 9, "--reveal", "--answer", fault)
    assert status == 0 and fault in out and "correct" in out
    wrong = next(n for n in fl.FAULTS if n != fault)
    status, out, _ = in_process(capsys, "mystery", "--seed", 9, "--reveal", "--answer", wrong)
    assert status == 1 and "not it" in out


def test_run_on_a_device_this_machine_lacks_is_a_usage_error(capsys):
    import torch

    missing = "meta:x" if torch.cuda.is_available() else "cuda"
    status, _, err = in_process(capsys, "run", "tabular", "--steps", 5, "--device", missing)
    assert status == 2
    assert "argument --device" in err and "cannot be used here" in err
