#!/usr/bin/env bash
# Does verification pass every time, also on a busy machine?  Runs the README's test
# command RUNS times in a row, then BUSY_RUNS times while a plain busy loop (started and
# stopped here) keeps one core busy, then `failurelab verify` VERIFY_RUNS times with
# the core busy.  One line per run: seconds, exit status, failing items; the full
# output of every run is kept under $LOGS.  Exits non-zero if any run failed or the
# verify verdicts differ.
#
#   benchmarks/flake_check.sh                       # 10 + 5 + 5, the whole README command
#   RUNS=3 BUSY_RUNS=2 VERIFY_RUNS=2 TARGETS="--nbmake notebooks" benchmarks/flake_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
RUNS=${RUNS:-10}
BUSY_RUNS=${BUSY_RUNS:-5}
VERIFY_RUNS=${VERIFY_RUNS:-5}
TARGETS=${TARGETS:-tests --nbmake notebooks}
LOGS=${LOGS:-$(mktemp -d -t flake-check-XXXX)}
mkdir -p "$LOGS"
export OMP_NUM_THREADS=1 CI=1
BUSY=""

start_busy() { "$PYTHON" -c 'while True: pass' & BUSY=$!; }
stop_busy() { if [ -n "$BUSY" ]; then kill "$BUSY" 2>/dev/null; wait "$BUSY" 2>/dev/null; BUSY=""; fi; }
trap stop_busy EXIT
trap 'stop_busy; exit 130' INT TERM  # an interrupted check stops, not just its busy loop

failed=0
tests() {  # $1: label
    for i in $(seq 1 "$2"); do
        log="$LOGS/$1-$i.log"
        started=$(date +%s.%N)
        # shellcheck disable=SC2086  # TARGETS is a list of arguments
        "$PYTHON" -m pytest -n 2 -rf --nbmake-timeout=600 -p no:cacheprovider $TARGETS >"$log" 2>&1
        status=$?
        seconds=$(echo "$(date +%s.%N) - $started" | bc)
        printf '%-8s run %2d: %6.1f s, exit %d  %s\n' "$1" "$i" "$seconds" "$status" \
            "$(grep -E '^FAILED|^ERROR' "$log" | tr '\n' ' ' | cut -c1-200)"
        [ "$status" -eq 0 ] || failed=1
    done
}

echo "logs: $LOGS   cores: $(getconf _NPROCESSORS_ONLN)   load: $(cut -d' ' -f1-3 /proc/loadavg)"
tests quiet "$RUNS"
start_busy
tests busy "$BUSY_RUNS"
verdicts=""
for i in $(seq 1 "$VERIFY_RUNS"); do
    log="$LOGS/verify-$i.log"
    started=$(date +%s.%N)
    "$PYTHON" -m failurelab verify >"$log" 2>&1
    status=$?
    seconds=$(echo "$(date +%s.%N) - $started" | bc)
    verdict="exit $status: $(tail -n 1 "$log" | sed 's/ in [0-9.]* s:/:/' | cut -c1-160)"
    printf 'verify   run %2d: %6.1f s, %s  [%s]\n' "$i" "$seconds" "$verdict" \
        "$(grep -E '^slow_data ' "$log" | tr -s ' ')"  # the one timing-based signature
    verdicts="$verdicts$verdict"$'\n'
done
stop_busy
if [ "$VERIFY_RUNS" -gt 0 ] && [ "$(printf '%s' "$verdicts" | sort -u | wc -l)" -ne 1 ]; then
    echo "verify: the verdicts differ"; failed=1
fi
exit "$failed"
