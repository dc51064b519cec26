"""Publish a benchmark's measurement in the docs, as the benchmark printed it.

Runs the command, shows its output as it comes (stderr, where progress goes, is not
published), and when it exits 0 replaces one named
section of a docs page with that output, the command, the run time, the date and the
commit (marked "+ local changes" when the tree differs from it).  So no validation number
in `docs/` is typed by hand, and each one says where it came from.

    python benchmarks/publish.py docs/validation.md "lab, blind" -- \\
        python benchmarks/diagnosis.py --seeds 100-104

A section runs from `<!-- begin: NAME -->` to `<!-- end: NAME -->`; a new one is added
at the end of the page.
"""

from __future__ import annotations

import argparse
import datetime
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout
    sha = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    return sha + (" + local changes" if git("status", "--porcelain", "--untracked-files=no")
                  else "")


def section(name: str, command: list[str], output: str, seconds: float) -> str:
    today = datetime.date.today().isoformat()
    return (f"<!-- begin: {name} -->\n"
            f"Measured {today} on commit {commit()}, {seconds:.0f} s:\n\n"
            f"```bash\n{shlex.join(command)}\n```\n\n"
            f"```text\n{output.rstrip()}\n```\n"
            f"<!-- end: {name} -->")


def replace_section(page: str, name: str, text: str) -> str:
    pattern = re.compile(rf"<!-- begin: {re.escape(name)} -->.*?<!-- end: {re.escape(name)} -->",
                         re.DOTALL)
    if pattern.search(page):
        return pattern.sub(lambda _: text, page)
    return page.rstrip() + f"\n\n{text}\n"


def run(command: list[str]) -> tuple[int, str, float]:
    started, lines = time.perf_counter(), []
    # stdout only: progress lines on stderr pass through to the terminal, not the page
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line)
    return proc.returncode, "".join(lines), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path, help="the docs page, e.g. docs/validation.md")
    parser.add_argument("name", help="the section's name")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the benchmark's command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the benchmark's command after --")
    code, output, seconds = run(command)
    if code != 0:
        print(f"publish: the command exited {code}; {args.page} left as it was", file=sys.stderr)
        return code
    page = args.page.read_text() if args.page.exists() else ""
    args.page.write_text(replace_section(page, args.name, section(args.name, command, output,
                                                                  seconds)))
    print(f"publish: section {args.name!r} of {args.page} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
