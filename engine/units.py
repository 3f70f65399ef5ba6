"""Parsing and printing byte sizes. Binary units only: '16GB' is refused as ambiguous."""
from __future__ import annotations

import math
import re
from fractions import Fraction

UNITS = {"B": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
# No device, host or pool holds more; sizes stay far inside the planner's int64 arithmetic
# (offset + bytes, budget + scratch), and a 400-digit number is refused, not an OverflowError.
MAX_BYTES = 2**50
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(text: str) -> int:
    """'64MiB' -> 67108864. Raises ValueError with a line saying what would work."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"'{text}' is not a size; write a number and a binary unit, e.g. 64MiB or 16GiB")
    number, unit = Fraction(m.group(1)), (m.group(2) or "B").upper()      # exact: no float overflow
    if unit not in UNITS:
        hint = f"{m.group(1)}{unit[0]}iB" if unit in ("KB", "MB", "GB", "TB") else "64MiB or 16GiB"
        raise ValueError(f"'{text}' has unit '{m.group(2)}'; use binary units (B, KiB, MiB, GiB, TiB), "
                         f"e.g. {hint}")
    value = int(round(number * UNITS[unit]))
    if value <= 0:
        raise ValueError(f"'{text}' must be a positive size")
    return checked_size(value, text)


def checked_size(value: int, text: str) -> int:
    """``value`` (bytes, written ``text``) if at most MAX_BYTES; ValueError saying so otherwise."""
    if value > MAX_BYTES:
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
        raise ValueError(f"'{shown}' is more than any device holds; give at most {MAX_BYTES // UNITS['TIB']}TiB")
    return value


def format_bytes(n: float) -> str:
    """Human-readable binary size, rounded up to the digit shown (3.1 MiB, 180.2 GiB): a size
    printed as a budget that works is one that works when typed back as --memory."""
    unit = unit_that_fits(n)
    return f"{format_in(n, unit)} {unit[0]}"


def unit_that_fits(n: float) -> tuple[str, int]:
    """The binary unit format_bytes would print ``n`` in, and its size in bytes: a table's
    column of sizes takes its largest value's unit, so its figures read in one unit."""
    n = abs(math.ceil(n))
    if n < 1024:
        return "B", 1
    for unit in ("KiB", "MiB", "GiB"):
        if -(-n * 10 // UNITS[unit.upper()]) < 10240:
            return unit, UNITS[unit.upper()]
    return "TiB", UNITS["TIB"]


def format_in(n: float, unit: tuple[str, int]) -> str:
    """``n`` bytes as a number of ``unit`` (from unit_that_fits), without the unit's name and
    rounded up to the tenth as format_bytes rounds: the same figure as the text beside it."""
    size = unit[1]
    n = math.ceil(n)
    if size == 1:
        return str(n)
    sign, n = ("-", -n) if n < 0 else ("", n)
    tenths = -(-n * 10 // size)                 # integer ceiling: no float rounding down
    return f"{sign}{tenths // 10}.{tenths % 10}"
