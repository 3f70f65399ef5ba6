"""The backends a run can choose, one record each: how to find devices, make one, describe it,
and measure a profile on it.

Nothing outside this module compares a backend's name with a string: the command line
picks a ``BackendKind`` (``choose``) and reads its attributes. Adding a backend is a module
in ``engine/backends/`` implementing ``engine.backends.interface.Backend`` (the arena, views,
host buffers, launches, copies, events, capture and replay, timings) plus one ``register``
call here (see docs/architecture.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .errors import EngineError
from .profile import Profile

if TYPE_CHECKING:
    from .backends.interface import Backend
    from .ir import Graph
    from .program import Program

DEFAULT_LINK_GBPS = 2.0


class BackendUnavailable(EngineError, ValueError):
    """The asked-for backend or device cannot run here; the message says what would."""


@dataclass(frozen=True)
class Placement:
    """Where a run goes: a backend kind, one of its devices, and (emulated links) the rate."""
    kind: "BackendKind"
    why: str                               # how it was chosen, for the run's first line
    device: int = 0
    link_gbps: float = DEFAULT_LINK_GBPS   # one way; both ways together get 1.6x that

    def announcement(self) -> str:
        return f"engine: {self.why}; running on {self.kind.where(self)}"


@dataclass(frozen=True)
class BackendKind:
    name: str
    summary: str                                   # one line, for --help
    devices: Callable[[], tuple[int, str]]         # (usable devices, why none when 0)
    create: Callable[[Placement, bool, int], "Backend"]   # (placement, sanitize, seed) -> backend
    measure_profile: Callable[[Placement, "Graph", "Program", int, object], Profile]
    where: Callable[[Placement], str]              # "the cpu backend with an emulated 2 GB/s link"
    describe: Callable[[Placement, str], str]      # (placement, device name) -> for the report
    to_json: Callable[[Placement, str], dict]
    emulated_link: bool = False     # copies run at a set rate (--link-gbps); else over a real link
    numpy_twin: bool = False        # its kernels are the numpy reference's, bit for bit
    numbered_devices: bool = True   # --device picks one (False: one implicit device)
    device_noun: str = "device"     # "CUDA device", in messages
    missing: str = "no device found"


REGISTRY: dict[str, BackendKind] = {}
AUTO_PREFERENCE: list[str] = []     # what --backend auto tries, in order


def register(kind: BackendKind, auto_rank: int | None = None) -> BackendKind:
    REGISTRY[kind.name] = kind
    if auto_rank is not None:
        AUTO_PREFERENCE.insert(auto_rank, kind.name)
    return kind


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> BackendKind:
    try:
        return REGISTRY[name]
    except KeyError:
        raise BackendUnavailable(f"unknown backend '{name}' (choose from auto, {', '.join(REGISTRY)})") from None


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def choose(name: str, device: int = 0, link_gbps: float | None = None) -> Placement:
    """The placement for ``--backend name`` ('auto' or a registered kind), ``--device`` and
    ``--link-gbps``; BackendUnavailable when it cannot run here. 'auto' takes the first kind
    in AUTO_PREFERENCE with a device."""
    if link_gbps is not None and not link_gbps * 1e9 >= 1:    # 1e-300: time.sleep overflowed (a traceback)
        raise BackendUnavailable(f"--link-gbps {link_gbps:g}: an emulated link slower than a byte a second never "
                                 "ends a copy; give at least 1e-09 (GB/s)")
    if name == "auto":
        reasons = []
        for candidate in AUTO_PREFERENCE:
            kind = REGISTRY[candidate]
            count, reason = kind.devices()
            if count:
                why = "; ".join(reasons) or f"{_plural(count, kind.device_noun)} found"
                return _place(kind, why, device, count, link_gbps)
            reasons.append(f"{kind.missing} ({reason})")
        raise BackendUnavailable("no backend can run here: " + "; ".join(reasons))
    kind = get(name)
    count, reason = kind.devices()
    if count == 0:
        others = [k for k in REGISTRY if k != name]
        raise BackendUnavailable(f"--backend {name}: {kind.missing} ({reason})"
                                 + (f"; use --backend {others[0]}" if others else ""))
    return _place(kind, f"--backend {name} given", device, count, link_gbps)


def _place(kind: BackendKind, why: str, device: int, count: int, link_gbps: float | None) -> Placement:
    if kind.numbered_devices and device >= count:
        raise BackendUnavailable(f"--device {device}: {_plural(count, kind.device_noun)} found, numbered from 0")
    if link_gbps is not None and not kind.emulated_link:
        emulated = next(k for k, v in REGISTRY.items() if v.emulated_link)
        raise BackendUnavailable(f"--link-gbps sets the {emulated} backend's emulated link, and the {kind.name} "
                                 f"backend ({why}) copies over the real one; drop it or use --backend {emulated}")
    return Placement(kind, why, device, DEFAULT_LINK_GBPS if link_gbps is None else link_gbps)


# ---------------------------------------------------------------------------- the two we have
def _cpu_link(p: Placement):
    from .backends.cpu import EmulatedLink
    rate = p.link_gbps * 1e9
    return EmulatedLink(rate, rate, 1.6 * rate)


def _cpu_create(p: Placement, sanitize: bool, seed: int):
    from .backends.cpu import CpuBackend
    return CpuBackend(_cpu_link(p), sanitize=sanitize, seed=seed)


def _cpu_profile(p: Placement, g, ideal, seed: int, data) -> Profile:
    from .cpu_profiling import measure_cpu_profile
    print("profiling operators on this machine ...", flush=True)
    return measure_cpu_profile(g, ideal, _cpu_link(p), seed, data=data)


CPU = register(BackendKind(
    "cpu", "numpy kernels, a thread per stream, an emulated host-device link",
    devices=lambda: (1, ""), create=_cpu_create, measure_profile=_cpu_profile,
    where=lambda p: f"the cpu backend with an emulated {p.link_gbps:g} GB/s link",
    describe=lambda p, name: f"cpu, emulated {p.link_gbps:g} GB/s link",
    to_json=lambda p, name: {"backend": "cpu", "emulated_link_gbps": p.link_gbps},
    emulated_link=True, numpy_twin=True, numbered_devices=False, missing="no CPU backend"), auto_rank=0)


def _cuda_devices() -> tuple[int, str]:
    from .backends import detect
    return detect.detect_gpu()      # through the module, so tests can stand in a device


def _cuda_create(p: Placement, sanitize: bool, seed: int):
    from .backends.cuda import CudaBackend      # imports no CUDA until a CudaBackend is made
    return CudaBackend(p.device, sanitize=sanitize, seed=seed)


def _cuda_profile(p: Placement, g, ideal, seed: int, data) -> Profile:
    from .cuda_profiling import measure_cuda_profile
    print(f"profiling operators on CUDA device {p.device} ...", flush=True)
    return measure_cuda_profile(g, ideal, seed, data=data, device=p.device)


CUDA = register(BackendKind(
    "cuda", "our CUDA kernels on an NVIDIA GPU (cuda-python), three CUDA streams",
    devices=_cuda_devices, create=_cuda_create, measure_profile=_cuda_profile,
    where=lambda p: f"the cuda backend, device {p.device}",
    describe=lambda p, name: f"cuda ({name + ', ' if name else ''}device {p.device})",
    to_json=lambda p, name: {"backend": "cuda", "cuda_device": p.device, "device_name": name or None},
    device_noun="CUDA device", missing="no GPU found"), auto_rank=0)
