"""`fl.investigate`: the course's distinguishing experiments, run on your own loop.

parts (the contract) -> arms (one factor changed each) -> runner (each arm under a
Monitor, in forked workers) -> checks (data, gradient flow) -> verdict (the catalogue's
confirm/refute outcomes) -> report (text, table, HTML).
"""

from .errors import PartsError
from .parts import Parts
from .study import Investigation, investigate

__all__ = ["Investigation", "Parts", "PartsError", "investigate"]
