"""The backend interface (engine/backends/interface): each device (CpuDevice, CudaDevice) provides
every primitive of ``Device`` with the Protocol's parameters; ``Instrumented`` (timing and the
sanitizer, above every device) provides ``Backend``'s own members; and the executor and profiling
call nothing else."""
import ast
import inspect
from pathlib import Path

import pytest

from engine.backends.cpu import CpuBackend, CpuDevice
from engine.backends.cuda import CudaBackend, CudaDevice
from engine.backends.instrument import Instrumented
from engine.backends.interface import Backend, Device

from . import fake_driver

ROOT = Path(__file__).resolve().parents[3]


def members(protocol) -> set[str]:
    """The Protocol's attributes and methods, its bases' included."""
    out = set()
    for cls in protocol.__mro__:
        if cls in (Device, Backend):
            out |= {n for n, v in vars(cls).items() if inspect.isfunction(v) and not n.startswith("_")}
            out |= set(vars(cls).get("__annotations__", {}))
    return out


def set_in_init(cls) -> set[str]:
    """Attributes ``cls.__init__`` assigns (``self.x = ...``), read from its source: no instance needed."""
    init = vars(cls).get("__init__")
    if init is None:
        return set()
    tree = ast.parse(inspect.getsource(init).strip().replace("\n    ", "\n"))
    targets = [t for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target])]
    targets += [e for t in targets if isinstance(t, ast.Tuple) for e in t.elts]     # self.a, self.b = ...
    return {t.attr for t in targets if isinstance(t, ast.Attribute) and getattr(t.value, "id", None) == "self"}


def parameters(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def lacking(cls, protocol, wanted=None) -> set[str]:
    """The ``wanted`` members (default: all) of ``protocol`` that ``cls`` has neither as a class
    attribute or property nor assigns in ``__init__``, and its methods whose parameters differ."""
    wanted = members(protocol) if wanted is None else wanted
    have = set(dir(cls)) | set_in_init(cls)
    methods = {m for m in wanted if inspect.isfunction(getattr(protocol, m, None))}
    return (wanted - have) | {m for m in methods & have if not inspect.isfunction(getattr(cls, m, None))
                              or parameters(getattr(cls, m)) != parameters(getattr(protocol, m))}


def test_the_protocol_lists_what_the_executor_and_profiling_use():
    assert members(Backend) == {
        "name", "device_name", "timings", "sanitize", "allocate_arena", "allocate_virtual_arena", "view",
        "host_buffer", "read", "write", "launch", "copy_h2d", "copy_d2h", "fill", "delay", "host_call", "host_calls",
        "timed_capture",
        "record", "wait", "elapsed", "capture", "replay", "synchronize", "close"}
    used = set()
    for f in ("engine/executor.py", "engine/profiling.py", "engine/cuda_profiling.py", "engine/backends/instrument.py"):
        for n in ast.walk(ast.parse((ROOT / f).read_text())):
            if isinstance(n, ast.Attribute) and isinstance(n.value, (ast.Name, ast.Attribute)):
                owner = n.value.id if isinstance(n.value, ast.Name) else n.value.attr
                if owner in ("backend", "be", "device"):
                    used.add(n.attr)
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) in ("hasattr", "getattr") \
                    and getattr(n.args[0], "id", None) == "backend":
                used.add(n.args[1].value)
    assert used <= members(Backend), used - members(Backend)


@pytest.mark.parametrize("cls", [CpuDevice, CudaDevice])
def test_each_device_class_has_every_primitive_with_the_protocols_parameters(cls):
    """Statically: class attributes, properties and what __init__ assigns (no GPU needed)."""
    assert lacking(cls, Device) == set()


def test_instrumented_defines_what_it_adds_and_wraps_with_the_protocols_parameters():
    own = {"timings", "sanitize", "launch", "copy_h2d", "copy_d2h", "host_call", "capture", "replay", "synchronize"}
    assert lacking(Instrumented, Backend, own) == set()


def test_a_cpu_backend_has_every_member():
    be = CpuBackend()
    try:
        assert isinstance(be, Instrumented) and all(hasattr(be, m) for m in members(Backend))
    finally:
        be.close()


def test_a_cuda_backend_has_every_member(monkeypatch):
    fake_driver.install(monkeypatch)
    be = CudaBackend()
    try:
        assert isinstance(be, Instrumented) and all(hasattr(be, m) for m in members(Backend))
    finally:
        be.close()


def test_the_check_fails_when_a_member_goes_or_changes():
    without_fill = type("NoFill", (), {k: v for k, v in vars(CpuDevice).items() if k != "fill"})
    assert lacking(without_fill, Device) == {"fill"}
    without_name = type("NoDeviceName", (), {k: v for k, v in vars(CpuDevice).items() if k != "device_name"})
    assert lacking(without_name, Device) == {"device_name"}
    other_wait = type("OtherWait", (CpuDevice,), {"wait": lambda self, stream: None})
    assert lacking(other_wait, Device) == {"wait"}
