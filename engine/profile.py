"""Profiles: how long each operator takes and how fast the host-device link is.

A profile is measured on a backend, loaded from JSON, or analytic for a named
device (flops and bytes over its peak rates), so that a GPU's profile can drive
planning on a machine without one. Measured operator times are keyed by a
signature (operator, input shapes and dtypes, attributes), so one profile
serves every graph that uses the same operator instances.

JSON: {"format": "swapengine.profile/1", "device": str,
       "link": {"h2d_bytes_per_s", "d2h_bytes_per_s", "duplex_bytes_per_s", "latency_s"},
       "network": {"bytes_per_s", "latency_s"} (optional: the link between data-parallel ranks),
       "host": {"ranks", "bytes_per_s", "group", "group_bytes_per_s"} (optional: ranks sharing one
       host whose memory and root ports carry all their copies at most at bytes_per_s together;
       group and group_bytes_per_s, optional: ranks behind one PCIe switch share its uplink),
       "analytic": {"flops_per_s", "bytes_per_s", "launch_s"} (optional: rates for ops not measured),
       "ops": {signature: seconds}, "dispatch_s": seconds of host work per instruction,
       "wake_s": seconds a stream takes to resume after waiting on another's event (optional, 0)}
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

import numpy as np

from ops import registry as op_registry

from .ir import Graph
from .checkpoint import write_atomically
from .errors import EngineError
from .files import read_json

FORMAT = "swapengine.profile/1"


class ProfileError(EngineError, ValueError):
    pass


@dataclass(frozen=True)
class Link:
    h2d_bytes_per_s: float
    d2h_bytes_per_s: float
    duplex_bytes_per_s: float   # both directions together, when a swap-in and a swap-out overlap
    latency_s: float = 10e-6

    def seconds(self, nbytes: int, direction_h2d: bool) -> float:
        rate = self.h2d_bytes_per_s if direction_h2d else self.d2h_bytes_per_s
        return self.latency_s + nbytes / rate


@dataclass(frozen=True)
class Network:
    """The link between data-parallel ranks (each rank's share of it): what an all-reduce moves
    its bytes over. A ring all-reduce of B bytes over N ranks takes 2(N-1) steps, each a latency
    and B/N bytes: ``ring_seconds``."""
    bytes_per_s: float
    latency_s: float = 5e-6

    def ring_seconds(self, nbytes: float, ranks: int) -> float:
        if ranks <= 1:
            return 0.0
        steps = 2 * (ranks - 1)
        return steps * self.latency_s + steps / ranks * nbytes / self.bytes_per_s


@dataclass(frozen=True)
class HostShare:
    """``ranks`` devices on one host, whose copies to and from host memory all pass through a
    bound of ``bytes_per_s`` together (host memory bandwidth, a shared PCIe root port), and
    optionally through their switch's uplink, ``group`` ranks to a switch. Rank-identical plans copy
    at the same moments, so each rank's link moves at most ``bytes_per_s / ranks``, and each way at
    most its switch's uplink over the ranks behind it: ``Profile.rank_link``."""
    ranks: int
    bytes_per_s: float
    # Ranks grouped ``group`` to a PCIe switch whose uplink to the host moves ``group_bytes_per_s``
    # each way (full duplex, as PCIe): the switch's ranks divide it; None: no switch between them.
    group: int | None = None
    group_bytes_per_s: float | None = None

    def share(self, link: Link) -> Link:
        each = self.bytes_per_s / max(1, self.ranks)         # the host's, both ways together
        way = both = each
        if self.group is not None:
            uplink = self.group_bytes_per_s / max(1, min(self.group, self.ranks))
            way, both = min(each, uplink), min(each, 2 * uplink)
        return Link(min(link.h2d_bytes_per_s, way), min(link.d2h_bytes_per_s, way),
                    min(link.duplex_bytes_per_s, both), link.latency_s)


@dataclass(frozen=True)
class Rates:
    flops_per_s: float
    bytes_per_s: float
    launch_s: float = 5e-6


@dataclass
class Profile:
    device: str
    link: Link
    analytic: Rates | None = None
    ops: dict[str, float] = field(default_factory=dict)
    dispatch_s: float = 0.0     # host cost of issuing one instruction, on any stream
    network: Network | None = None   # between data-parallel ranks; None: the profile has none
    host: HostShare | None = None    # ranks sharing this device's host; None: the host is its own
    # A stream that blocked on another stream's event resumes this long after it is set (the CPU
    # backend's threads: an OS wake-up, tens of us; a GPU's streams: none worth charging).
    wake_s: float = 0.0

    @property
    def rank_link(self) -> Link:
        """The link one rank's copies see: ``link``, or its share of a host several ranks share
        (what the simulator times copies on)."""
        return self.link if self.host is None else self.host.share(self.link)

    def shared(self) -> "Profile":
        """This profile as a host-aware planner sees it: the link already its rank's share."""
        return replace(self, link=self.rank_link, host=None)

    def node_seconds(self, g: Graph) -> np.ndarray:
        """Seconds per node id: the measured time of its signature, else the analytic estimate."""
        out = np.empty(len(g.nodes))
        for n in g.nodes:
            t = self.ops.get(signature(g, n.id))
            if t is None:
                if self.analytic is None:
                    raise ProfileError(f"profile '{self.device}' has no time for node '{n.name}' ({n.op}) "
                                       "and no analytic rates; measure this model's profile")
                t = analytic_seconds(g, n.id, self.analytic)
            out[n.id] = t
        return out

    def to_dict(self) -> dict:
        d = {"format": FORMAT, "device": self.device, "link": self.link.__dict__.copy(), "ops": dict(self.ops),
             "dispatch_s": self.dispatch_s}
        if self.analytic:
            d["analytic"] = self.analytic.__dict__.copy()
        if self.network:
            d["network"] = self.network.__dict__.copy()
        if self.host:
            d["host"] = {k: v for k, v in self.host.__dict__.items() if v is not None}
        if self.wake_s:
            d["wake_s"] = self.wake_s
        return d

    @classmethod
    def from_dict(cls, d) -> "Profile":
        """Parse and validate; ProfileError (one line) naming the first bad field. Every time
        must be finite and non-negative and every rate finite and positive: a NaN bandwidth
        would make the simulator loop forever, a zero rate divide by zero."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ProfileError(f"not a swapengine profile (expected format '{FORMAT}')")
        try:
            device = d["device"]
            if not isinstance(device, str) or not device:
                raise TypeError("'device' must be a non-empty string")
            link = Link(**{k: _number(v, f"link.{k}") for k, v in _object(d["link"], "link").items()})
            analytic = (Rates(**{k: _number(v, f"analytic.{k}") for k, v in _object(d["analytic"], "analytic").items()})
                        if d.get("analytic") else None)
            ops = {str(k): _number(v, f"ops[{k!r:.60}]") for k, v in _object(d.get("ops", {}), "ops").items()}
            dispatch = _number(d.get("dispatch_s", 0.0), "dispatch_s")
            wake = _number(d.get("wake_s", 0.0), "wake_s")
            network = (Network(**{k: _number(v, f"network.{k}") for k, v in _object(d["network"], "network").items()})
                       if d.get("network") else None)
            host = None
            if d.get("host"):
                h = _object(d["host"], "host")
                ranks = h.get("ranks")
                if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
                    raise ValueError(f"'host.ranks' must be a whole number of ranks, at least 1, got {ranks!r:.40}")
                group = h.get("group")
                if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group < 1):
                    raise ValueError(f"'host.group' must be a whole number of ranks, at least 1, got {group!r:.40}")
                if (group is None) != (h.get("group_bytes_per_s") is None):
                    raise ValueError("'host.group' and 'host.group_bytes_per_s' come together (ranks per switch "
                                     "and its uplink's bytes per second)")
                host = HostShare(ranks, _number(h.get("bytes_per_s"), "host.bytes_per_s"), group,
                                 None if group is None else _number(h["group_bytes_per_s"], "host.group_bytes_per_s"))
        except KeyError as e:
            raise ProfileError(f"malformed profile: missing {e}") from None
        except (TypeError, ValueError) as e:
            raise ProfileError(f"malformed profile: {e}") from None
        _positive(("link.h2d_bytes_per_s", link.h2d_bytes_per_s), ("link.d2h_bytes_per_s", link.d2h_bytes_per_s),
                  ("link.duplex_bytes_per_s", link.duplex_bytes_per_s))
        _seconds(("link.latency_s", link.latency_s), ("dispatch_s", dispatch), ("wake_s", wake),
                 *((f"ops[{k!r:.60}]", v) for k, v in ops.items()))
        if not dispatch < 1:
            raise ProfileError(f"dispatch_s {dispatch} is a second or more per instruction")
        if not wake < 1:
            raise ProfileError(f"wake_s {wake} is a second or more per wake-up")
        if analytic is not None:
            _positive(("analytic.flops_per_s", analytic.flops_per_s), ("analytic.bytes_per_s", analytic.bytes_per_s))
            _seconds(("analytic.launch_s", analytic.launch_s))
        if network is not None:
            _positive(("network.bytes_per_s", network.bytes_per_s))
            _seconds(("network.latency_s", network.latency_s))
        if host is not None:
            _positive(("host.bytes_per_s", host.bytes_per_s))
            if host.group is not None:
                _positive(("host.group_bytes_per_s", host.group_bytes_per_s))
        return cls(device, link, analytic, ops, dispatch, network, host, wake)

    def save(self, path: str) -> None:
        """Atomically, making the folders ``path`` needs (engine/checkpoint.write_atomically)."""
        text = json.dumps(self.to_dict(), indent=1)
        write_atomically(path, lambda f: f.write(text.encode()))

    @classmethod
    def load(cls, path: str) -> "Profile":
        d = read_json(path, "profile file", ProfileError, "a JSON file --save-profile wrote")
        try:
            return cls.from_dict(d)
        except ProfileError as e:
            raise ProfileError(f"profile file '{path}': {e}") from None


def _object(v, where: str) -> dict:
    if not isinstance(v, dict):
        raise TypeError(f"'{where}' must be an object, got {type(v).__name__}")
    return v


def _number(v, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"'{where}' must be a number, got {v!r:.40}")
    return float(v)


# No device is slower than a byte (or flop) a second, nor takes an hour for one operator or one
# copy's latency: past these a profile's simulated times ran to 300 digits (1e-300 bytes/s).
MIN_RATE = 1.0
MAX_SECONDS = 3600.0


def _positive(*named) -> None:
    for where, v in named:
        if not (v >= MIN_RATE and math.isfinite(v)):
            raise ProfileError(f"{where} is {v}; rates must be finite and at least {MIN_RATE:g} per second")


def _seconds(*named) -> None:
    for where, v in named:
        if not (0 <= v <= MAX_SECONDS):
            raise ProfileError(f"{where} is {v}; times must be from 0 to {MAX_SECONDS:g} seconds")


def signature(g: Graph, nid: int) -> str:
    n = g.nodes[nid]
    ins = ",".join(f"{'x'.join(map(str, g.tensors[t].shape))}:{g.tensors[t].dtype.name}" for t in n.inputs)
    attrs = json.dumps(n.attrs, sort_keys=True, default=list)
    return f"{n.op}({ins}){attrs}"


def analytic_seconds(g: Graph, nid: int, rates: Rates) -> float:
    """Roofline estimate: the slower of compute and memory traffic, plus a launch cost."""
    n = g.nodes[nid]
    ins = [g.tensors[t] for t in n.inputs]
    outs = [g.tensors[t] for t in n.outputs]
    cost = op_registry.get(n.op).cost(n.attrs, ins, outs)
    return rates.launch_s + max(cost.flops / rates.flops_per_s, cost.bytes / rates.bytes_per_s)


# Named devices for analytic profiles. V100 figures are the paper's (Section 6.1: PCIe 12 GB/s
# one way, 20 GB/s both ways); peak rates are the vendors' fp32 figures.
DEVICES = {
    "v100": (Rates(15.7e12, 900e9), Link(12e9, 12e9, 20e9, 10e-6), 16 * 2**30),
    "h100": (Rates(51e12, 2.0e12), Link(25e9, 25e9, 45e9, 10e-6), 80 * 2**30),
    # Paper 001's machine (Section 5): a V100 joined to the host by two NVLinks, "each can transfer
    # memory at 50GB/s"; taken as 50 GB/s each way and 100 GB/s both ways together.
    "v100-nvlink": (Rates(15.7e12, 900e9), Link(50e9, 50e9, 100e9, 10e-6), 16 * 2**30),
    # SmartSwap's (004) device, an Ascend 910B with 64 GB of HBM. Matrix rate from CANN's platform
    # file for the 910B2 (github.com/hicann/runtime, src/platform/platform_config/Ascend910B2.ini:
    # 24 cube cores at 1800 MHz, a 16x16x16 fp16 multiply-add each per cycle: 353.9 TFLOPS; memory_size
    # 64 GiB); our ops have one rate, so vector work runs at it too (the file's 48 vector cores of
    # vec_calc_size 128 would give about 22 TFLOPS fp16 by our reading: elementwise work is bound by
    # memory here anyway). HBM2e at 1.6 TB/s and the host link PCIe 4.0 x16 (31.5 GB/s a way, in
    # theory) are the figures commonly published, not in Huawei's own documents that we could read:
    # we assume 25 GB/s a way (the H100's PCIe above) and 40 GB/s both ways together. The paper
    # gives none of these.
    "910b": (Rates(353.9e12, 1.6e12), Link(25e9, 25e9, 40e9, 10e-6), 64 * 2**30),
}


def analytic_profile(device: str) -> Profile:
    try:
        rates, link, _ = DEVICES[device.lower()]
    except KeyError:
        raise ProfileError(f"no analytic profile for device '{device}' (known: {', '.join(DEVICES)})") from None
    return Profile(device.lower(), link, rates)
