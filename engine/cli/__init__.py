"""The command line's wing: the only part of ``engine`` that imports ``planner``, ``ga`` and
``zoo``. ``python -m engine.train`` (engine/train.py) enters here."""
