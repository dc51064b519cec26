"""The course wing: what the notebooks and the instructor use: an experiment beside its
baseline, the worksheet with its records and hash chain, grading, the gradebook, mystery
runs, the offline report.

Floor 7 of the layout (tests/test_layout.py): it imports only `basics`, `evidence`,
`telemetry`, `catalogue`, `views`, `lab`.
"""
