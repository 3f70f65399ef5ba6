"""The backend interface (engine/backends/interface.Backend): the cpu and cuda backends provide
every member, with the Protocol's parameters, and the executor and profiling call nothing else."""
import ast
import inspect
from pathlib import Path

import pytest

from engine.backends.cpu import CpuBackend
from engine.backends.cuda import CudaBackend
from engine.backends.interface import Backend

from . import fake_cuda

ROOT = Path(__file__).resolve().parents[3]


def members(protocol) -> set[str]:
    """The Protocol's attributes and methods."""
    methods = {n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_")}
    return methods | set(protocol.__annotations__)


def set_in_init(cls) -> set[str]:
    """Attributes ``cls.__init__`` assigns (``self.x = ...``), read from its source: no instance needed."""
    tree = ast.parse(inspect.getsource(cls.__init__).strip().replace("\n    ", "\n"))
    return {t.attr for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Attribute) and getattr(t.value, "id", None) == "self"}


def parameters(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def test_the_protocol_lists_what_the_executor_and_profiling_use():
    assert members(Backend) == {
        "name", "device_name", "timings", "allocate_arena", "allocate_virtual_arena", "view", "host_buffer",
        "read", "write", "launch", "copy_h2d", "copy_d2h", "host_call", "host_calls", "record", "wait", "capture",
        "replay", "synchronize", "close"}
    used = set()
    for f in ("engine/executor.py", "engine/profiling.py", "engine/cuda_profiling.py"):
        for n in ast.walk(ast.parse((ROOT / f).read_text())):
            if isinstance(n, ast.Attribute) and isinstance(n.value, (ast.Name, ast.Attribute)):
                owner = n.value.id if isinstance(n.value, ast.Name) else n.value.attr
                if owner in ("backend", "be"):
                    used.add(n.attr)
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) in ("hasattr", "getattr") \
                    and getattr(n.args[0], "id", None) == "backend":
                used.add(n.args[1].value)
    assert used <= members(Backend), used - members(Backend)


def lacking(cls) -> set[str]:
    """The Protocol's members ``cls`` has neither as a class attribute or property nor assigns
    in ``__init__``, and its methods whose parameters differ from the Protocol's."""
    have = set(dir(cls)) | set_in_init(cls)
    methods = members(Backend) - set(Backend.__annotations__)
    return (members(Backend) - have) | {m for m in methods & have if not inspect.isfunction(getattr(cls, m, None))
                                        or parameters(getattr(cls, m)) != parameters(getattr(Backend, m))}


@pytest.mark.parametrize("cls", [CpuBackend, CudaBackend])
def test_each_backend_class_has_every_member_with_the_protocols_parameters(cls):
    """Statically: class attributes, properties and what __init__ assigns (no GPU needed)."""
    assert lacking(cls) == set()


def test_a_cpu_backend_has_every_member():
    be = CpuBackend()
    try:
        assert all(hasattr(be, m) for m in members(Backend))
    finally:
        be.close()


def test_a_cuda_backend_has_every_member(monkeypatch):
    fake_cuda.install(monkeypatch)
    be = CudaBackend()
    try:
        assert all(hasattr(be, m) for m in members(Backend))
    finally:
        be.close()


def test_the_check_fails_when_a_member_goes_or_changes():
    without_replay = type("NoReplay", (), {k: v for k, v in vars(CpuBackend).items() if k != "replay"})
    assert lacking(without_replay) == {"replay"}
    without_name = type("NoDeviceName", (), {k: v for k, v in vars(CpuBackend).items() if k != "device_name"})
    assert lacking(without_name) == {"device_name"}
    other_wait = type("OtherWait", (CpuBackend,), {"wait": lambda self, stream: None})
    assert lacking(other_wait) == {"wait"}
