"""The lab wing: the lab's two tasks and tiny models, its one training loop, the run cache,
worker processes, the LR range test.

Floor 4 of the layout (tests/test_layout.py), the floor of the loop: it imports only
`basics`, `evidence`, `telemetry`.  The loop trains recipes and knows no faults; the
catalogue above it resolves fault names (`fl.run`) and sweeps them over seeds.
"""
