"""The views wing: plots of recorded telemetry and tables that show their text whole; they
draw what was measured and compute nothing.

Floor 4 of the layout (tests/test_layout.py): it imports only `basics`, `evidence`,
`telemetry`, `catalogue`.
"""
