"""The dataflow simulator: a Program and a profile -> the iteration's timeline.

Three in-order streams sharing one link; the timing model is ``planner.dispatch``'s (with its
host timeline when ``host_seconds`` is given).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.ir import Graph
from engine.program import COMPUTE, STREAM_NAMES, SWAP_IN, SWAP_OUT, Program

from engine.profile import Profile

from .dispatch import run_arrays, run_streams
from .program_arrays import ProgramArrays


@dataclass
class Timeline:
    start: np.ndarray     # seconds, per instruction
    finish: np.ndarray
    total: float          # the iteration's time: when the last stream finishes

    def busy(self, program: Program, kind: int) -> float:
        sel = [i for i, ins in enumerate(program.instrs) if ins.kind == kind]
        return float(np.sum(self.finish[sel] - self.start[sel]))

    def to_chrome_trace(self, program: Program, g: Graph) -> dict:
        """Chrome trace JSON (open in Perfetto or chrome://tracing): one row per stream, a counter
        of device bytes in use, and a flow arrow per dependency that crosses streams
        (``planner.trace``)."""
        from .trace import chrome_trace

        return chrome_trace(program, g, self.start, self.finish, self.total)


def simulate(program: Program, g: Graph, profile: Profile, node_seconds: np.ndarray | None = None,
             host_seconds: np.ndarray | None = None) -> Timeline:
    """Inputs: a Program, its Graph, a Profile (node_seconds may be given precomputed,
    as the search does). Output: the Timeline of one iteration, each stream in program order.
    ``host_seconds``: per instruction, what issuing it costs the host beyond the profile's
    ``dispatch_s``: the host timeline on (``planner.dispatch``); None (every plan's): off."""
    secs = profile.node_seconds(g) if node_seconds is None else node_seconds
    start, finish, _ = run_streams(program, g, profile, secs, host_seconds=host_seconds)
    total = float(np.max(finish)) if len(finish) else 0.0
    return Timeline(start, finish, total)


def simulated_seconds(arrays: ProgramArrays, tensor_bytes: np.ndarray, node_seconds: np.ndarray,
                      profile: Profile) -> float:
    """``simulate(...).total`` of a Program given as arrays (``tensor_bytes`` as float64, per
    tensor): the search's fitness, without making Instr objects."""
    _, finish, _ = run_arrays(arrays, tensor_bytes, node_seconds, profile)
    return float(np.max(finish)) if len(finish) else 0.0
