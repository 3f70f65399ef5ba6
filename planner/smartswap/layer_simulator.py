"""004 Section 4.4's simulator over the logical layers: Eq. 3 (T_swap = S / B, plus the link's
fixed cost per copy), the swap-in pre-trigger layer (searching backward from the first use) and
the swap-out completion layer, each layer's time left for copies kept per direction."""
from __future__ import annotations

import math

import numpy as np

from .layers import Layers


def swap_seconds(nbytes: int, bytes_per_s: float, latency_s: float = 0.0) -> float:
    """Eq. 3: T_swap = S / B, plus ``latency_s``, the link's fixed cost per copy, which the paper
    leaves out. A profiler measures it beside B; where a model's tensors are small (a copy of
    a few KiB costs ~10 us, two operators' time), a plan that ignores it queues more copies into
    a layer than the layer hides."""
    return (nbytes / bytes_per_s if bytes_per_s > 0 else 0.0) + (latency_s if nbytes > 0 else 0.0)


class Simulator:
    """Each layer's time left for copies, one budget per direction (a swap-in and a swap-out run
    on separate copy streams; the link is full duplex)."""

    def __init__(self, layers: Layers, bytes_per_s: float, d2h_bytes_per_s: float | None = None,
                 latency_s: float = 0.0):
        self.layers, self.latency_s = layers, latency_s
        self.bw = {True: bytes_per_s, False: bytes_per_s if d2h_bytes_per_s is None else d2h_bytes_per_s}
        self.remaining = {True: layers.seconds.copy(), False: layers.seconds.copy()}   # by inbound

    def copy(self) -> "Simulator":
        """Another simulator with this one's time left per layer (taken from independently)."""
        other = Simulator.__new__(Simulator)
        other.layers, other.latency_s, other.bw = self.layers, self.latency_s, self.bw
        other.remaining = {inbound: left.copy() for inbound, left in self.remaining.items()}
        return other

    def swap_out_release(self, last_use: int, nbytes: int) -> tuple[int, int]:
        """(step during which the swap-out issued after ``last_use`` completes, its layer): the
        first layer from last_use's on with T_remaining > T_swap; (-1, -1) if none."""
        ly, t, left = self.layers, self.seconds(nbytes, False), self.remaining[False]
        k0 = int(ly.of_step[last_use])
        # The layers scanned as one array operation: a graph whose updates interleave with its
        # gradients has a layer per run of them (NasNet-16: 4,795), and once the link is busy a
        # scan in Python crossed thousands (half of smartswap's plan there).
        roomy = left[k0:] > t
        k = k0 + int(roomy.argmax())
        if not roomy[k - k0]:
            return -1, -1
        used = ly.seconds[k] - left[k] + t          # the copy stream's work in this layer
        start = ly.first[k] if k != k0 else last_use + 1
        r = max(start, ly.first[k] + math.ceil(used / ly.op_seconds) - 1) if ly.op_seconds > 0 else start
        return int(min(r, ly.last[k])), k

    def swap_in_trigger(self, first_use: int, not_before: int, nbytes: int) -> tuple[int, int]:
        """(step at whose start the swap-in for ``first_use`` is issued, its layer): searching
        backward from the layer before first_use's for one with T_remaining > T_swap whose
        start is after ``not_before``; (-1, -1) if none."""
        ly, t, left = self.layers, self.seconds(nbytes, True), self.remaining[True]
        lowest = int(np.searchsorted(ly.first, not_before, side="right"))   # layers start in step order
        roomy = left[lowest:int(ly.of_step[first_use])] > t
        if not roomy.any():
            return -1, -1
        k = lowest + len(roomy) - 1 - int(roomy[::-1].argmax())           # the latest with room
        return int(ly.first[k]), k

    def take(self, layer: int, nbytes: int, inbound: bool = True) -> None:
        self.remaining[inbound][layer] -= self.seconds(nbytes, inbound)

    def seconds(self, nbytes: int, inbound: bool) -> float:
        """Eq. 3 for a copy of ``nbytes`` in one direction."""
        return swap_seconds(nbytes, self.bw[inbound], self.latency_s)
