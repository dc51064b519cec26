"""The evidence wing: pure functions of a history (named quantities, loss-curve shapes,
signatures as conditions on quantities, live alerts, `Run` and its CSV), with numpy and
pandas, never torch.

Floor 2 of the layout (tests/test_layout.py): it imports only `basics`.
"""
