"""The views wing: plots of recorded telemetry and tables that show their text whole; they
draw what was measured and compute nothing.

Floor 6 of the layout (tests/test_layout.py): it imports only `basics`, `evidence`,
`telemetry`, `lab`, `catalogue`.
"""
