"""The value types of the commands' flags: each refuses a bad value with argparse's
ArgumentTypeError (one line saying what was wrong), and returns the value converted.

Shared by the four commands (engine/cli/common_flags.py builds the flags they share from
these; engine/cli/flags.py adds engine.train's own).
"""
from __future__ import annotations

import argparse
import threading

from planner import policy as policies_registry

from ..units import checked_size, parse_bytes


def _number(kind, text: str, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not {what}") from None


MAX_COUNT = 2**63 - 1     # counts are 64-bit where they meet numpy (--batch 2**70 was an OverflowError)


def _count(text: str, least: int) -> int:
    v = _number(int, text, "an integer")
    if v < least:
        raise argparse.ArgumentTypeError(f"must be positive, got {v}" if least else f"must be 0 or more, got {v}")
    if v > MAX_COUNT:
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
        raise argparse.ArgumentTypeError(f"{shown} is more than a 64-bit count holds; give at most 2**63 - 1")
    return v


def positive_int(text: str) -> int:
    return _count(text, 1)


def nonnegative_int(text: str) -> int:
    return _count(text, 0)


def positive_float(text: str) -> float:
    """A finite number above 0 (inf and nan are refused: --lr inf diverges, --link-gbps inf
    overflows the emulated link)."""
    v = _number(float, text, "a number")
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got '{text}'")
    return v


def mebibytes(text: str) -> float:
    """A finite positive number of MiB within what a device holds (--chunk-mib 1e300 was refused
    only after profiling, with a 300-digit size in the message)."""
    v = positive_float(text)
    if round(v * 2**20) < 1:          # --chunk-mib 1e-9 was 0 bytes: taken as not given
        raise argparse.ArgumentTypeError(f"'{text}' MiB is less than a byte")
    try:
        checked_size(int(round(v * 2**20)), f"{text}MiB")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return v


SEED_LIMIT = 2**32        # numpy's seeds are unsigned 32-bit words


def seed(text: str) -> int:
    v = _number(int, text, "an integer")
    if not 0 <= v < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"must be 0 to {SEED_LIMIT - 1}, got {v}")
    return v


def nonnegative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a non-negative number, got '{text}'")
    return v


def seconds(text: str) -> float:
    """A duration: a non-negative number of seconds that Python's waits can take (at most
    threading.TIMEOUT_MAX, 292 years; --search-seconds 2**70 searched on forever)."""
    v = nonnegative_float(text)
    if v > threading.TIMEOUT_MAX:
        raise argparse.ArgumentTypeError(f"'{text[:40]}' seconds is longer than a wait can be; give at most "
                                         f"{threading.TIMEOUT_MAX:.4g}")
    return v


def window(text: str) -> int | None:
    """--window: a size with a unit, or "auto" (None: searched on the simulator)."""
    return None if text.strip().lower() == "auto" else size(text)


def size(text: str) -> int:
    """A size with a binary unit; a bare number is refused (--memory 64 meaning 64 bytes
    surprised people): write 64B for bytes."""
    if text.strip().replace(".", "", 1).isdigit():
        raise argparse.ArgumentTypeError(f"'{text}' has no unit; write {text.strip()}B for bytes, or e.g. "
                                         f"{text.strip()}MiB")
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def policies(text: str) -> list[str]:
    """Registered policy names, comma-separated (checked against the registry)."""
    names = [x.strip().lower() for x in text.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"unknown policy '{text}' "
                                         f"(choose from {', '.join(policies_registry.names())})")
    for name in names:
        try:
            policies_registry.get(name)
        except policies_registry.UnknownPolicy as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return names


def policy(text: str) -> str:
    """One registered policy name."""
    names = policies(text)
    if len(names) > 1:
        raise argparse.ArgumentTypeError(f"one policy, got {len(names)} ('{text}'); this command plans with one")
    return names[0]
