"""`Case`: one zoo run, named by what it is made of, and the default population."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .families import FAMILIES, FAMILIES_BY_NAME, HALF, OPTIMIZERS
from .faults import FAULTS

# Loop habits (see zoo/loop.py): "val" validation every VAL_EVERY steps passing val_loss
# and val_acc; "clip" gradient-norm clipping; "cosine" / "step_lr" an LR schedule;
# "accum" accumulation over two micro-batches; "extras" lr and batch accuracy as columns;
# "amp" float16 autocast with a GradScaler (mixed precision done right: a healthy
# control for the float16 faults, in the families that run in float16; and the loop a
# fault of mixed precision itself lives in).
HABITS = ("val", "clip", "cosine", "step_lr", "accum", "extras", "amp")
HABIT_SETS = ((), ("val",), ("val", "cosine"), ("val", "clip", "extras"),
              ("step_lr", "accum"), ("val", "clip", "cosine", "accum", "extras"))


@dataclass(frozen=True)
class Case:
    family: str
    optimizer: str
    fault: str | None = None  # None: healthy
    severity: object = None  # one of the fault's severities
    seed: int = 0
    habits: tuple = ()

    def __post_init__(self):
        if self.family not in FAMILIES_BY_NAME:
            raise ValueError(f"unknown family {self.family!r}; known: {', '.join(FAMILIES)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; "
                             f"known: {', '.join(OPTIMIZERS)}")
        unknown = set(self.habits) - set(HABITS)
        if unknown:
            raise ValueError(f"unknown habit(s) {sorted(unknown)}; known: {', '.join(HABITS)}")
        if "amp" in self.habits and HALF not in FAMILIES_BY_NAME[self.family].traits:
            raise ValueError(f"{self.family} does not run in float16: no 'amp' habit")
        if self.fault is not None:
            fault = FAULTS.get(self.fault)
            if fault is None:
                raise ValueError(f"unknown zoo fault {self.fault!r}; known: {', '.join(FAULTS)}")
            if "amp" in self.habits and "amp" not in fault.habits:
                raise ValueError("the 'amp' habit is a healthy control, except for a fault "
                                 "that lives in a mixed-precision loop")
            if not fault.applies(self.family, self.optimizer):
                raise ValueError(f"{self.fault} does not apply to {self.family}/{self.optimizer}")
            missing = [h for h in fault.habits if h not in self.habits]
            if missing:
                raise ValueError(f"{self.fault} is only observable with the habit(s) {missing}")
            if self.severity not in fault.severities_for(self.family):
                raise ValueError(f"{self.fault} on {self.family} has severities "
                                 f"{fault.severities_for(self.family)}, got {self.severity!r}")
        elif self.severity is not None:
            raise ValueError("a healthy case has no severity")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")

    @property
    def id(self) -> str:
        what = "healthy" if self.fault is None else f"{self.fault}@{self.severity}"
        habits = "+".join(self.habits) or "plain"
        return f"{self.family}/{self.optimizer}/{what}/seed{self.seed}/{habits}"

    @property
    def expected(self) -> str:
        """"healthy", the catalogue fault fl.diagnose should name, or "outside"."""
        if self.fault is None:
            return "healthy"
        return FAULTS[self.fault].cause or "outside"


def habits_for(family: str, optimizer: str, seed: int) -> tuple:
    """A fixed rotation of habit sets over family, optimizer and seed."""
    i = FAMILIES.index(family) + OPTIMIZERS.index(optimizer) + seed
    return HABIT_SETS[i % len(HABIT_SETS)]


def control(case: Case) -> Case:
    """The healthy run of the same family, optimizer, seed and habits."""
    return replace(case, fault=None, severity=None)


def cases(families=None, seeds=(0, 1, 2), faulty: bool = True, healthy: bool = True,
          optimizers=None, faults=None) -> list[Case]:
    """The population: every family x optimizer x seed healthy (and once more with the
    "amp" habit where the family runs in float16), and each fault at every severity on
    every family it applies to (one optimizer per seed, rotating), each with its healthy
    control (same family, optimizer, seed and habits) included.

    `optimizers` narrows the optimizers used, `faults` the faults (names)."""
    families = FAMILIES if families is None else tuple(families)
    optimizers = OPTIMIZERS if optimizers is None else tuple(optimizers)
    chosen = list(FAULTS.values()) if faults is None else [FAULTS[f] for f in faults]
    out: dict[str, Case] = {}
    for family in families:
        for seed in seeds:
            if healthy:
                for optimizer in optimizers:
                    habits = habits_for(family, optimizer, seed)
                    c = Case(family, optimizer, seed=seed, habits=habits)
                    out[c.id] = c
                    if HALF in FAMILIES_BY_NAME[family].traits:
                        amp = replace(c, habits=(*habits, "amp"))
                        out[amp.id] = amp
            if faulty:
                for c in _faulty(family, seed, optimizers, chosen):
                    out[c.id] = c
                    if healthy:
                        out.setdefault(control(c).id, control(c))
    return list(out.values())


def _faulty(family, seed, optimizers, chosen):
    """Each fault on `family` and `seed` under one of its optimizers, rotating, so a
    fault meets several optimizers across seeds and the population stays small."""
    for fault in chosen:
        usable = [o for o in optimizers if fault.applies(family, o)]
        if not usable:
            continue
        rotation = FAMILIES.index(family) + seed + list(FAULTS).index(fault.name)
        optimizer = usable[rotation % len(usable)]
        habits = set(habits_for(family, optimizer, seed)) | set(fault.habits)
        habits = tuple(h for h in HABITS if h in habits)
        for severity in fault.severities_for(family):
            yield Case(family, optimizer, fault.name, severity, seed, habits)
