"""Edits after the fact made evident: a hash chain over a worksheet's records.

Every prediction, observation, explanation and reveal the worksheet writes is also
appended to a chain: the record's digest, linked to the previous link's digest.  An
instructor's audit recomputes both.  A prediction changed or back-dated by hand no
longer matches its digest; one written after its experiment was observed sits after
the observation in the chain; an observation deleted to make room for a new guess is
still in the chain; a broken link marks every event after it.  This is evidence, not
security: a student who recomputes every digest by hand can forge a chain, but nobody
back-fills an answer silently.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

GENESIS = "failurelab-worksheet-chain"  # the link before the first event
KINDS = ("predict", "observe", "explain", "reveal", "carried")


def digest(record: dict) -> str:
    """A record's digest: SHA-256 of its canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def link(previous: str, kind: str, name: str, record: str, at: str) -> str:
    """The link of one event: the previous link, what happened, to what, and when."""
    text = "\n".join((previous, kind, name, record, at))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def append(chain: list[dict], kind: str, name: str, record: dict) -> None:
    """Append the event 'record (of kind) was written for experiment name'."""
    previous = chain[-1]["link"] if chain else GENESIS
    record_digest = digest(record)
    at = str(record.get("at", ""))
    chain.append({"event": kind, "name": name, "record": record_digest, "at": at,
                  "link": link(previous, kind, name, record_digest, at)})


@dataclass(frozen=True)
class Audit:
    """What an instructor should look at: per experiment, and for the whole file."""

    issues: dict[str, tuple[str, ...]]  # experiment -> what looks edited
    general: tuple[str, ...]  # about the file as a whole (a broken link, a removed entry)
    unverified: tuple[str, ...]  # experiments written before the file kept a chain

    @property
    def clean(self) -> bool:
        return not self.issues and not self.general

    def of(self, name: str) -> tuple[str, ...]:
        return self.issues.get(name, ())


def carry(chain: list[dict], name: str, record: dict) -> None:
    """Append a record written before the file kept a chain (an older worksheet's):
    from now on it cannot change unnoticed, but it was never verified."""
    append(chain, "carried", name, record)


def audit(records: dict[str, list[tuple[str, dict]]], chain: list[dict],
          started: str | None) -> Audit:
    """Check each experiment's records (kind, record as JSON) against the chain.

    `started` is when the file began keeping a chain: None for a file that never did
    (written before chains existed), whose records are all unverified."""
    if started is None:
        return Audit({}, (), tuple(name for name, kinds in records.items() if kinds))
    trusted, general = _intact_prefix(chain)
    index = {(e["name"], e["event"], e["record"]): i for i, e in enumerate(trusted)}
    carried = {(e["name"], e["record"]) for e in trusted if e["event"] == "carried"}
    broken_names = {e.get("name") for e in chain[len(trusted):] if isinstance(e, dict)}
    issues: dict[str, list[str]] = {}
    unverified = []
    for name, kinds in records.items():
        found = [(kind, record, index.get((name, kind, digest(record))))
                 for kind, record in kinds]
        old = [pos is None and (name, digest(record)) in carried for _, record, pos in found]
        if any(old):
            unverified.append(name)
        problems = [_missing(kind, record) for (kind, record, pos), was_carried
                    in zip(found, old, strict=False) if pos is None and not was_carried]
        problems += _order(name, found, trusted)
        if name in broken_names:
            problems.append("written after the point where the chain breaks")
        if problems:
            issues[name] = problems
    named = {e.get("name") for e in chain if isinstance(e, dict)} - {None}
    general += [f"{name!r} is in the chain but no longer on the worksheet (removed by "
                f"hand?)" for name in sorted(named - set(records))]
    return Audit({k: tuple(v) for k, v in issues.items()}, tuple(general), tuple(unverified))


def _intact_prefix(chain: list[dict]) -> tuple[list[dict], list[str]]:
    """The events whose links all check out, and a note where the chain breaks."""
    previous, last_at = GENESIS, ""
    for i, event in enumerate(chain):
        try:
            expected = link(previous, event["event"], event["name"], event["record"],
                            event["at"])
        except (KeyError, TypeError):
            expected = None
        if expected is None or event.get("link") != expected:
            return chain[:i], [f"the chain breaks at event {i + 1} of {len(chain)}: "
                               f"the file was edited by hand there"]
        if event["at"] < last_at:
            return chain[:i], [f"event {i + 1} ({event['event']} {event['name']!r}) is "
                               f"dated before the event before it (back-dated?)"]
        previous, last_at = expected, event["at"]
    return list(chain), []


def _missing(kind: str, record: dict) -> str:
    what = {"predict": "prediction", "observe": "observation", "explain": "explanation",
            "reveal": "reveal"}[kind]
    return (f"the {what} dated {record.get('at', '?')} is not the one that was written "
            f"(changed or back-dated by hand?)")


def _order(name: str, found: Iterable[tuple[str, dict, int | None]],
           chain: list[dict]) -> list[str]:
    """A prediction written after observing, an explanation before, an observation
    (or reveal) that was in the chain and is gone from the worksheet."""
    events = [(i, e["event"]) for i, e in enumerate(chain) if e["name"] == name]
    seen = [i for i, kind in events if kind in ("observe", "reveal")]
    problems = []
    for kind, _, pos in found:
        if pos is None:
            continue
        if kind == "predict" and seen and pos > seen[0]:
            problems.append("the prediction was written after the experiment was observed")
        if kind == "explain" and (not seen or pos < seen[0]):
            problems.append("the explanation was written before observing")
    kept = {kind for kind, _, _ in found}
    for kind in ("observe", "reveal"):
        if any(k == kind for _, k in events) and kind not in kept:
            problems.append(f"an {'observation' if kind == 'observe' else 'reveal'} in the "
                            f"chain is missing from the worksheet (deleted by hand?)")
    return problems
