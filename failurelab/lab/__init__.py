"""The lab wing: the lab's two tasks and tiny models, its one training loop, the run cache,
worker processes, sweeps over seeds, the LR range test.

Floor 5 of the layout (tests/test_layout.py): it imports only `basics`, `evidence`,
`telemetry`, `catalogue`, `views`.
"""
