"""The basics wing: plain descriptions and helpers (a recipe, a text in two languages, a
file written whole), standard library only.

Floor 1 of the layout (tests/test_layout.py): it imports nothing from failurelab.
"""
