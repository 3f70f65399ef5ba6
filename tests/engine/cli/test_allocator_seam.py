"""An online allocator from outside allocator/, registered in this test module, runs through
`engine.train --policy window --allocator firstfit` end to end: listed by --allocator, accepted
by the online policies, planned, verified, executed on the cpu backend with the sanitizer, and
trained to parameters bit-identical to the unlimited-memory run. Nothing in allocator/,
planner/ or engine/ had to learn its name (docs/architecture.md, "Adding an allocator")."""
import json

import numpy as np
import pytest

from allocator import aligned_bytes, registry
from allocator.online import AllocatorMisuse, AllocatorStats, OnlineLayout, register_online
from engine import api
from engine.train import main, parser

TINY_LSTM = ["--model", "small-lstm", "--batch", "4", "--size", "3", "--quiet", "--backend", "cpu",
             "--profile", "v100", "--iterations", "3", "--measure-iterations", "1"]


class FirstFit:
    """First fit over one flat range: the lowest free gap that holds the aligned request;
    freed ranges coalesce with their free neighbours. Implements allocator.online.OnlineAllocator."""
    name = "firstfit"

    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = int(capacity_bytes)
        self.gaps = [(0, self.capacity_bytes)]          # free (offset, bytes), by offset
        self.offsets, self.sizes, self.live = [], [], {}
        self.reserved = self.requested = self.peak_reserved = self.peak_requested = 0

    def alloc(self, nbytes: int) -> int | None:
        size = int(aligned_bytes(max(int(nbytes), 1)))
        for i, (at, room) in enumerate(self.gaps):
            if room >= size:
                self.gaps[i:i + 1] = [(at + size, room - size)] if room > size else []
                obj = len(self.offsets)
                self.offsets.append(at)
                self.sizes.append(size)
                self.live[obj] = int(nbytes)
                self._count(size, int(nbytes))
                return obj
        return None

    def free(self, obj: int) -> None:
        if obj not in self.live:
            raise AllocatorMisuse(f"object {obj} is not live")
        self._count(-self.sizes[obj], -self.live.pop(obj))
        gaps = sorted(self.gaps + [(self.offsets[obj], self.sizes[obj])])
        merged = [gaps[0]]
        for at, room in gaps[1:]:
            last_at, last_room = merged[-1]
            if last_at + last_room == at:
                merged[-1] = (last_at, last_room + room)
            else:
                merged.append((at, room))
        self.gaps = merged

    def _count(self, reserved: int, requested: int) -> None:
        self.reserved += reserved
        self.requested += requested
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.peak_requested = max(self.peak_requested, self.requested)

    def layout(self) -> OnlineLayout:
        arena = max((o + s for o, s in zip(self.offsets, self.sizes)), default=0)
        return OnlineLayout(np.array(self.offsets, np.int64), np.array(self.sizes, np.int64), arena,
                            {"name": self.name, "capacity_bytes": self.capacity_bytes})

    def stats(self) -> AllocatorStats:
        return AllocatorStats(self.reserved, self.requested, self.peak_reserved, self.peak_requested)


@pytest.fixture
def firstfit():
    register_online("firstfit", FirstFit, "first fit over one flat range (a test allocator)")
    yield
    registry.unregister("firstfit")


def test_an_allocator_registered_outside_trains_window_bit_identically(firstfit, tmp_path, capsys):
    assert "firstfit" in parser().format_help()
    out = tmp_path / "run"
    assert main(TINY_LSTM + ["--policy", "ideal,window", "--allocator", "firstfit", "--memory", "64KiB", "--sanitize",
                             "--out", str(out), "--json", str(tmp_path / "r.json")]) == 0
    text = capsys.readouterr().out
    assert "plan   window" in text and "(firstfit)" in text
    assert "parameters identical to the unlimited run: yes (bit for bit)" in text
    row = next(p for p in json.loads((tmp_path / "r.json").read_text())["policies"] if p["policy"] == "window")
    assert row["h2d_bytes"] > 0                   # the budget made it swap
    assert json.loads((out / "plan.json").read_text())["arena"]["allocator"]["name"] == "firstfit"


def test_every_online_policy_accepts_it_and_the_others_refuse_it_in_one_line(firstfit, capsys):
    from planner import policy

    for name in ("window", "lms", "smartswap"):
        assert "firstfit" in policy.get(name).allocators
    assert main(TINY_LSTM + ["--policy", "odswap", "--allocator", "firstfit"]) == 2
    err = capsys.readouterr().err.strip()
    assert "policy 'odswap' cannot use allocator 'firstfit' (it uses pool)" in err and "\n" not in err


def test_the_python_api_plans_on_it(firstfit):
    g = api.model("small-lstm", batch=4, size=3)
    plan = api.plan(g, "window", memory="64KiB", allocator="firstfit")
    assert plan.program.arena.allocator["name"] == "firstfit"
    assert api.identical(api.train(g, plan, iterations=2, sanitize=True), api.train(g, None, iterations=2))
