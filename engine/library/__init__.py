"""The library the command line (engine/cli/) and the Python API (engine/api.py) share. Like
them it sits on top and may import every package; nothing below them imports it.

- ``planning``: the one home of planning (budget, growth, search, plan, verify, simulate, bounds);
- ``models``: models by the names ``--model`` takes.
"""
