"""The one error `investigate` raises for parts it cannot use: a one-line reason."""


class PartsError(ValueError):
    """The parts handed to `investigate` cannot be used (one line says why)."""
