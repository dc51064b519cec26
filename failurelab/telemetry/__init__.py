"""The telemetry wing: `Monitor` for any loop and under DDP (hooks, copy buffers, the
arithmetic of the columns, misuse warnings, the history table).

Floor 3 of the layout (tests/test_layout.py): it imports only `basics`, `evidence`.
"""
