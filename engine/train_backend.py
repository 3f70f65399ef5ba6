"""Which backend `python -m engine.train` runs on, and everything made on it.

The choice is made once, before any CUDA object exists: ``--backend auto`` asks
``detect_gpu`` and takes cuda when it finds a device. Flags that only one backend can
honour are refused in ``check_flags``, one place, not wherever they happen to be read.
The rest of the command line asks this module for the measured profile, the runner of a
policy and the unlimited run to compare with, and so never names a backend class.
"""
from __future__ import annotations

from dataclasses import dataclass

from planner.baselines import make_program

from .backends import detect
from .backends.cpu import CpuBackend, EmulatedLink
from .backends.cuda import CudaBackend  # imports no CUDA until a CudaBackend is made
from .cuda_profiling import measure_cuda_profile
from .executor import ProgramExecutor
from .ir import Graph
from .profile import Profile
from .profiling import measure_cpu_profile
from .train_args import DEFAULT_LINK_GBPS, UsageError
from .training import ReferenceRunner


@dataclass
class BackendChoice:
    name: str                          # "cpu" or "cuda"
    why: str                           # how it was chosen, for the run's first line
    device: int = 0                    # the CUDA device number
    link_gbps: float = DEFAULT_LINK_GBPS   # the cpu backend's emulated link, one way
    device_name: str = ""              # the GPU's name, known once a CudaBackend has been made

    @property
    def link(self) -> EmulatedLink:
        rate = self.link_gbps * 1e9
        return EmulatedLink(rate, rate, 1.6 * rate)

    def announcement(self) -> str:
        where = (f"the cpu backend with an emulated {self.link_gbps:g} GB/s link" if self.name == "cpu"
                 else f"the cuda backend, device {self.device}")
        return f"engine: {self.why}; running on {where}"

    def describe(self) -> str:
        """For the report: 'cpu, emulated 2 GB/s link' or 'cuda (NVIDIA H200, device 0)'."""
        if self.name == "cpu":
            return f"cpu, emulated {self.link_gbps:g} GB/s link"
        return f"cuda ({self.device_name + ', ' if self.device_name else ''}device {self.device})"

    def to_json(self) -> dict:
        if self.name == "cpu":
            return {"backend": "cpu", "emulated_link_gbps": self.link_gbps}
        return {"backend": "cuda", "cuda_device": self.device, "device_name": self.device_name or None}


def choose_backend(args) -> BackendChoice:
    """From --backend, --device and --link-gbps; UsageError for a choice that cannot run here.
    --backend cpu never asks the driver anything."""
    if args.backend == "cpu":
        choice = BackendChoice("cpu", "--backend cpu given")
    else:
        count, reason = detect.detect_gpu()       # through the module, so tests can stand in a device
        if count == 0 and args.backend == "cuda":
            raise UsageError(f"--backend cuda: no GPU found ({reason}); use --backend cpu")
        if count == 0:
            choice = BackendChoice("cpu", f"no GPU found ({reason})")
        elif args.device >= count:
            raise UsageError(f"--device {args.device}: {count} CUDA device{'s' if count > 1 else ''} found, "
                             f"numbered from 0")
        else:
            why = ("--backend cuda given" if args.backend == "cuda"
                   else f"{count} CUDA device{'s' if count > 1 else ''} found")
            choice = BackendChoice("cuda", why, device=args.device)
    check_flags(args, choice)
    if choice.name == "cpu" and args.link_gbps is not None:
        choice.link_gbps = args.link_gbps
    return choice


def check_flags(args, choice: BackendChoice) -> None:
    """Refuse flags the chosen backend cannot honour (the one place to change when it can)."""
    if choice.name != "cuda":
        return
    if args.link_gbps is not None:
        raise UsageError(f"--link-gbps sets the cpu backend's emulated link, and the cuda backend "
                         f"({choice.why}) copies over the real one; drop it or use --backend cpu")


def make_backend(choice: BackendChoice, sanitize: bool = False, seed: int = 0):
    if choice.name == "cpu":
        return CpuBackend(choice.link, sanitize=sanitize, seed=seed)
    backend = CudaBackend(choice.device, sanitize=sanitize, seed=seed)
    choice.device_name = backend.device_name
    return backend


def measure_profile(choice: BackendChoice, g: Graph, seed: int, data) -> Profile:
    """Operator times and the link, measured on the chosen backend with the unlimited program."""
    ideal = make_program("ideal", g, None)
    if choice.name == "cpu":
        print("profiling operators on this machine ...", flush=True)
        return measure_cpu_profile(g, ideal, choice.link, seed, data=data)
    print(f"profiling operators on CUDA device {choice.device} ...", flush=True)
    return measure_cuda_profile(g, ideal, seed, data=data, device=choice.device)


def _executor(program, g: Graph, choice: BackendChoice, sanitize: bool, seed: int):
    backend = make_backend(choice, sanitize, seed)
    try:
        return ProgramExecutor(program, g, backend), backend
    except BaseException:
        backend.close()
        raise


def make_runner(policy: str, programs: dict, g: Graph, choice: BackendChoice, sanitize: bool = False,
                seed: int = 0):
    """(runner, backend or None) for one policy; the caller closes the backend."""
    if policy == "reference":
        return ReferenceRunner(g), None
    return _executor(programs[policy][0], g, choice, sanitize, seed)


def unlimited_runner(choice: BackendChoice, g: Graph, programs: dict):
    """(runner, backend or None) of the run whose parameters a policy's must equal bit for bit:
    the numpy reference on cpu (whose kernels are the same numpy code); on cuda the ideal
    Program on the same GPU, since CUDA kernels round differently from numpy."""
    if choice.name == "cpu":
        return ReferenceRunner(g), None
    ideal = programs["ideal"][0] if "ideal" in programs else make_program("ideal", g, None)
    return _executor(ideal, g, choice, False, 0)
