"""Where one run's files go, and its per-iteration record.

Every run used to write runs/<model>/plan.json and trace.json, each run silently replacing
the last. Now a run without --out gets a folder of its own, runs/<model>/<UTC time>/ (with
-2, -3... when two start in the same second; made with an exclusive mkdir, so two runs never
share one), and an explicit --out DIR that already holds a run's files is refused, before any
work, unless --overwrite says to replace them (as training tools refuse a non-empty output
folder). The folder's name is printed and recorded in --json (``run_dir``).

``steps.jsonl`` in that folder records the training policy's iterations, one JSON object a
line (``{"iteration": 1, "loss": 2.31, "seconds": 0.004}``; a loss that is not finite is
null, as JSON has no NaN), written and flushed as each iteration ends, so an interrupted run
keeps what it did.
"""
from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone

from .config import RunConfig
from .flags import UsageError

STEPS_FILE = "steps.jsonl"
# the files a run writes in its folder: one of them there means the folder holds a run
RUN_FILES = ("plan.json", "trace.json", "search.csv", STEPS_FILE)


def held_run_files(folder: str) -> list[str]:
    return [name for name in RUN_FILES if os.path.exists(os.path.join(folder, name))]


def check_out(cfg: RunConfig) -> None:
    """Refuse an explicit --out that holds an earlier run's files, unless --overwrite."""
    if cfg.overwrite and not cfg.out:
        raise UsageError("--overwrite replaces the run in --out DIR; without --out each run gets a new folder "
                         "under runs/<model>/, so drop --overwrite or give --out")
    if cfg.out and not cfg.overwrite:
        held = held_run_files(cfg.out)
        if held:
            raise UsageError(f"--out {cfg.out} already holds a run ({', '.join(held)}); pass --overwrite to "
                             "replace it, or choose another folder (without --out each run gets its own)")


def make_run_folder(cfg: RunConfig, model_name: str) -> str:
    """The run's folder, made now: --out (an earlier run's files removed, as --overwrite allowed,
    so none is mistaken for this run's), or a new runs/<model>/<UTC time>/."""
    if cfg.out:
        os.makedirs(cfg.out, exist_ok=True)
        read = {os.path.abspath(p) for p in (cfg.load_plan, cfg.resume, cfg.profile, cfg.data) if p}
        for name in held_run_files(cfg.out):       # but not a file this run reads (--load-plan DIR/plan.json)
            path = os.path.join(cfg.out, name)
            if os.path.abspath(path) not in read:
                os.remove(path)
        return cfg.out
    parent = os.path.join("runs", model_name)
    os.makedirs(parent, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        folder = os.path.join(parent, stamp if n == 1 else f"{stamp}-{n}")
        try:
            os.mkdir(folder)
            return folder
        except FileExistsError:
            continue
    raise UsageError(f"{parent}: a thousand runs started this second; give --out")


class StepRecords:
    """steps.jsonl, written as iterations end (line-buffered: a killed run keeps its lines)."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, STEPS_FILE)
        self._file = open(self.path, "w", buffering=1, encoding="utf-8")

    def add(self, iteration: int, loss: float, seconds: float) -> None:
        record = {"iteration": iteration, "loss": loss if math.isfinite(loss) else None, "seconds": seconds}
        self._file.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_steps(path: str) -> list[dict]:
    """The records of a steps.jsonl (for scripts and tests)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
