"""One iteration captured as a CUDA graph and replayed (cuStreamBeginCapture on the compute stream).

A first pass issues nothing (``backend.dry``): it prepares every launch, so modules load and
operator errors surface before capturing. The swap streams join the capture through an event
recorded on the compute stream and rejoin it at the end. A capture the driver refuses leaves the
executor issuing every instruction instead (a warning says why); an operator error propagates.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from ops import registry as op_registry

from ..program import COMPUTE, SWAP_IN, SWAP_OUT
from .cuda_driver import CudaError, check


@dataclass
class CudaGraph:
    exec: object             # CUgraphExec
    generation: int          # the arena it was captured against


def capture(backend, issue) -> CudaGraph | None:
    d, streams = backend._d, backend.streams
    backend.dry = True
    try:
        issue()
    finally:
        backend.dry = False
    backend.synchronize()
    check(d, d.cuStreamBeginCapture(streams[COMPUTE], d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
    try:
        fork = backend.record(COMPUTE)
        for s in (SWAP_IN, SWAP_OUT):
            backend.wait(s, fork)
        issue()
        for s in (SWAP_IN, SWAP_OUT):
            backend.wait(COMPUTE, backend.record(s))
        graph = check(d, d.cuStreamEndCapture(streams[COMPUTE]))
        graph_exec = check(d, d.cuGraphInstantiate(graph, 0))
        check(d, d.cuGraphDestroy(graph))
    except (op_registry.OpError, ValueError, TypeError, KeyError):
        _abandon(backend)
        raise
    except Exception as e:      # a CUDA refusal: run without graphs rather than not at all
        _abandon(backend)
        warnings.warn(f"CUDA graph capture failed ({e}); issuing each instruction instead")
        return None
    backend.synchronize()       # events recorded during capture go back to the pool
    return CudaGraph(graph_exec, backend.generation)


def _abandon(backend) -> None:
    """End a broken capture and start over on fresh streams."""
    d = backend._d
    try:
        d.cuStreamEndCapture(backend.streams[COMPUTE])
    except Exception:
        pass
    backend.streams = backend._new_streams()
    backend._recorded.clear()
    backend._prepared.clear()


def replay(backend, graph: CudaGraph) -> None:
    if graph.generation != backend.generation:
        raise CudaError("this graph was captured against an arena that has since been replaced")
    check(backend._d, backend._d.cuGraphLaunch(graph.exec, backend.streams[COMPUTE]))
