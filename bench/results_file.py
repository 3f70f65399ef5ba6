"""Where a benchmark's ``--save`` writes: ``bench/results/<name>_<today>.txt``."""
from __future__ import annotations

import datetime
import io
import os
import platform


def save_results(name: str, text: str) -> str:
    """Write ``text`` to bench/results/<name>_<YYYY-MM-DD>.txt (from the project's root); its path."""
    os.makedirs(os.path.join("bench", "results"), exist_ok=True)
    path = os.path.join("bench", "results", f"{name}_{datetime.date.today().isoformat()}.txt")
    with open(path, "w") as f:
        f.write(text)
    return path


class Transcript:
    """What a benchmark prints, kept for its ``--save`` file: ``say(line)`` prints the line at
    once (a long run shows its progress) and keeps it; ``say.text()`` is all of them."""

    def __init__(self):
        self._kept = io.StringIO()

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self._kept.write(line + "\n")

    def text(self) -> str:
        return self._kept.getvalue()


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one), for results files."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return cpu


def planning_machine_line() -> str:
    """The machine line of a benchmark whose times are simulated (it only plans here)."""
    return (f"machine (planning only; times are simulated): {platform.platform()}, {os.cpu_count()} cores: "
            f"{cpu_name()}; {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d')}")
