"""Python's cyclic garbage collector held off while a pure-Python planning pass, or autodiff, runs.

An online policy's pass (lms, window, tflms: ``planner.online_program``) makes hundreds of
thousands of small objects (instructions, allocator blocks, per-object lists). Each 700 of them
start a collection of the young generation, and every few of those a full one that walks every
object the process holds, the graph's included: on NasNet-25 (14,676 operators) that was 42% of
each candidate's CPU time (3 lms candidates with their simulations: 2.83 CPU-s collecting, 1.64
held off). Held off, nothing is collected during the pass; at its end one collection of the
youngest generation (only what the pass made, where its garbage cycles are: the allocator's
doubly linked blocks) frees the pass's garbage, so memory does not grow from pass to pass.
Autodiff (``engine.autodiff.build_training_graph``) holds it off too: the backward and update
nodes it makes started full collections over everything else the process held, which made its
time grow faster than the graph once the graph outgrew the rest (RNN-8-8K after loading numba's
code: 0.15 CPU-s against 0.11).
"""
from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def collector_held():
    """Run the body with automatic collection off, then collect what it left in the youngest
    generation; nested or where the caller turned collection off already, it changes nothing."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)
