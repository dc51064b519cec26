"""The `failurelab` command (placeholder until the CLI lands): run both baselines."""

from __future__ import annotations

from . import run


def main(argv: list[str] | None = None) -> int:
    for task in ("tabular", "sequence"):
        result = run(task)
        summary = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                            for k, v in result.summary.items())
        print(f"{task}: {summary}")
    return 0
