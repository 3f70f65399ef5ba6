"""Issue 39's acceptance harness: hostile input to the four commands and the files they read.

Each case is a small record: a name, the command (train, infer, serve, stream_train) and its
arguments, the hostile file it builds first in a temporary folder (if any), and what is
expected of it:

- ``refused``: exit status other than 0, exactly one error line on stderr, no traceback, within
  the time limit (a ``warning:`` line the run printed before, e.g. that the machine was busy
  while timing, is a note, not an error);
- ``accepted``: exit status 0; where the input changes nothing or loses output, a line
  (stdout or stderr) matching ``says`` must say so.

Every case runs in a subprocess of its own with a timeout (a hang is a failure), in its own
temporary folder (so the default ``runs/`` lands there), at most two at a time. The outcome is
one of: ok, one-line refusal (when acceptance was expected), traceback, hang, silent
acceptance, multi-line error, wrong refusal (one line, but not the reason ``says`` names).

    python -m bench.hostile_inputs                 # every case, a table and a summary line
    python -m bench.hostile_inputs --save          # ... also bench/results/hostile_inputs_<date>.txt
    python -m bench.hostile_inputs --only plan     # the cases whose name contains 'plan'

Run it from the clone's root (bench/ is not installed). Arguments may hold ``{tmp}`` (the
case's own folder) and ``{fix}`` (the fixtures every case reads: a checkpoint, a plan, a
profile, a search checkpoint, a report, data, an imported model, made once at the start).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REFUSED, ACCEPTED = "refused", "accepted"
WORKERS = 2                 # the machine has two cores, shared
MEMORY_LIMIT = 8 << 30      # address space of each case: a case reading /dev/zero must not take the machine
TIMEOUT = 60.0              # seconds; a case that has not ended by then hangs
HUGE = str(2**70)
ON_GPU = os.path.exists("/dev/nvidia0")     # --backend cuda runs there: those cases are accepted
CUDA = ACCEPTED if ON_GPU else REFUSED
BOMB_DEPTH = 200_000

# ---------------------------------------------------------------------- the commands' small settings
TRAIN = ("--model", "small-lstm", "--batch", "4", "--size", "3", "--quiet", "--backend", "cpu", "--profile", "v100",
         "--policy", "swapadvisor", "--iterations", "1", "--no-check", "--search-seconds", "0")
SIM = TRAIN + ("--simulate-only",)
TRAIN_IMPORTED = tuple(a for i, a in enumerate(TRAIN) if a not in ("--batch", "--size")
                       and TRAIN[i - 1] not in ("--batch", "--size"))      # an imported model keeps its shapes
BARE = ("--quiet", "--simulate-only")       # --config cases: the file's settings are not overridden
INFER = ("--model", "resnet-14", "--size", "64", "--memory", "50%")
INFER_SIM = INFER + ("--simulate-only",)
SERVE = ("--model", "resnet-14", "--size", "64", "--models", "2", "--rate", "5", "--seconds", "1")
STREAM = ("--iterations", "2")
SEARCH = ("--search-generations", "1", "--population", "4", "--workers", "1")   # the fixture's search
RESUME_SEARCH = ("--search-generations", "3", "--population", "4", "--workers", "1")  # two more generations
BASE = {"train": TRAIN, "sim": SIM, "train_imported": TRAIN_IMPORTED, "bare": BARE, "infer": INFER,
        "infer_sim": INFER_SIM, "serve": SERVE, "stream_train": STREAM}
MODULE = {"train": "engine.train", "sim": "engine.train", "train_imported": "engine.train", "bare": "engine.train",
          "infer": "engine.infer", "infer_sim": "engine.infer",
          "serve": "engine.serve", "stream_train": "engine.stream_train"}


@dataclass(frozen=True)
class Case:
    name: str
    command: str                       # a key of BASE: its small settings come first, then ``args``
    args: tuple[str, ...]
    expect: str = REFUSED
    make: Callable[[Path, Path], None] | None = None    # (tmp, fix): builds the hostile file(s)
    says: str | None = None            # refused: the line must match; accepted: some line must match
    timeout: float = TIMEOUT


# ---------------------------------------------------------------------- file makers
def text(name: str, content: str | bytes):
    def make(tmp: Path, fix: Path):
        (tmp / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return make


def as_json(name: str, doc):
    return text(name, json.dumps(doc))


def fixture_json(fixture: str, name: str, change: Callable[[dict], object]):
    """The fixture's JSON with ``change`` applied (it edits the dict, or returns a new document)."""
    def make(tmp: Path, fix: Path):
        doc = json.loads((fix / fixture).read_text())
        new = change(doc)
        (tmp / name).write_text(json.dumps(doc if new is None else new))
    return make


def setter(path: tuple, value):
    """A change that sets doc[path...] = value."""
    def change(doc):
        at = doc
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] = value
    return change


def truncated(fixture: str, name: str, keep: float = 0.5):
    def make(tmp: Path, fix: Path):
        data = (fix / fixture).read_bytes()
        (tmp / name).write_bytes(data[: int(len(data) * keep)])
    return make


def nesting_bomb(name: str, depth: int = BOMB_DEPTH):
    return text(name, "[" * depth + "]" * depth)


def fifo(name: str):
    def make(tmp: Path, fix: Path):
        os.mkfifo(tmp / name)
    return make


def symlink(name: str, target: str):
    def make(tmp: Path, fix: Path):
        os.symlink(target.format(tmp=tmp, fix=fix), tmp / name)
    return make


def a_file(name: str):
    return text(name, "")


def both(*makers):
    def make(tmp: Path, fix: Path):
        for m in makers:
            m(tmp, fix)
    return make


def npz(name: str, **arrays):
    def make(tmp: Path, fix: Path):
        np.savez(tmp / name, **arrays)
    return make


def checkpoint_with(name: str, header_change=None, arrays_change=None):
    """The fixture checkpoint re-written with its header or arrays changed."""
    def make(tmp: Path, fix: Path):
        with np.load(fix / "ck.npz", allow_pickle=False) as z:
            members = {k: z[k] for k in z.files}
        header = json.loads(str(members["__header__"]))
        if header_change:
            header_change(header)
        if arrays_change:
            arrays_change(members)
        members["__header__"] = np.array(json.dumps(header))
        np.savez(tmp / name, **members)
    return make


def claiming_member(name: str, member: str, shape=(2**39,), dtype="<f8"):
    """An npz whose member's npy header claims ``shape`` (4 TiB by default) over a few bytes."""
    def make(tmp: Path, fix: Path):
        import io
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": dtype, "fortran_order": False, "shape": shape})
        with zipfile.ZipFile(tmp / name, "w") as z:
            z.writestr(member + ".npy", header.getvalue() + b"\0" * 64)
    return make


def zip_bomb(name: str, member: str):
    """An npz whose member inflates 1000-fold (64 MiB of zeros, deflated)."""
    def make(tmp: Path, fix: Path):
        import io
        head = io.BytesIO()
        n = 64 << 20
        np.lib.format.write_array_header_1_0(head, {"descr": "|u1", "fortran_order": False, "shape": (n,)})
        with zipfile.ZipFile(tmp / name, "w", compression=zipfile.ZIP_DEFLATED) as z:
            with z.open(member + ".npy", "w") as f:
                f.write(head.getvalue())
                zeros = bytes(1 << 20)
                for _ in range(64):
                    f.write(zeros)
    return make


def data_arrays(samples: int = 16, **override):
    """small-lstm's --data at --batch 4 --size 3: x0, x1, x2 [N, 8] float32, loss_labels [N] int32 < 5."""
    r = np.random.default_rng(0)
    arrays = {f"x{i}": r.standard_normal((samples, 8), dtype=np.float32) for i in range(3)}
    arrays["loss_labels"] = r.integers(0, 5, samples, dtype=np.int32)
    arrays.update(override)
    return {k: v for k, v in arrays.items() if v is not None}


def model_folder(name: str, change: Callable[[dict], object] | None = None, values: bool = True):
    """The fixture's imported model copied, its model.json changed by ``change``."""
    def make(tmp: Path, fix: Path):
        shutil.copytree(fix / "imported", tmp / name)
        if change:
            path = tmp / name / "model.json"
            doc = json.loads(path.read_text())
            new = change(doc)
            path.write_text(json.dumps(doc if new is None else new))
        if not values:
            os.unlink(tmp / name / "values.npz")
    return make


# ---------------------------------------------------------------------- the cases
# Each numeric flag under the six bad numbers; the values are REFUSED unless the row says otherwise.
BAD_NUMBERS = {"negative": "-1", "zero": "0", "nan": "nan", "inf": "inf", "huge": HUGE, "text": "many"}
NUMERIC = [
    # (command, flag, extra args, {bad number: (expectation, says) where not refused})
    ("train", "--batch", (), {}),
    ("train", "--size", (), {}),
    ("train", "--iterations", (), {}),
    ("train", "--seed", (), {"zero": (ACCEPTED, None)}),
    ("train", "--lr", ("--iterations", "3"), {"huge": (ACCEPTED, None)}),          # PyTorch takes any lr too
    ("train", "--momentum", ("--iterations", "3"), {"zero": (ACCEPTED, None)}),
    ("train", "--weight-decay", ("--iterations", "3"), {"zero": (ACCEPTED, None), "huge": (ACCEPTED, r"diverged")}),
    ("train", "--checkpoint-every", ("--checkpoint", "{tmp}/ck.npz"), {}),
    ("train", "--measure-iterations", ("--policy", "ideal,swapadvisor"), {}),
    ("train", "--device", ("--backend", "cuda"), {"zero": (CUDA, None)}),
    ("train", "--search-seconds", ("--search-generations", "1", "--population", "4", "--workers", "1"),
     {"zero": (ACCEPTED, None)}),
    ("train", "--search-generations", ("--search-seconds", "1", "--population", "4", "--workers", "1"), {}),
    ("train", "--population", ("--search-generations", "1", "--workers", "1"), {}),
    ("train", "--workers", ("--search-generations", "1", "--population", "4"), {}),
    ("train", "--link-gbps", (), {"huge": (ACCEPTED, None)}),
    ("train", "--chunk-mib", ("--policy", "window", "--allocator", "va", "--memory", "64KiB"), {}),
    ("infer_sim", "--batch", (), {}),
    ("infer_sim", "--size", (), {}),
    ("infer_sim", "--search-seconds", (), {"zero": (ACCEPTED, None)}),
    ("infer", "--batches", (), {}),
    ("infer", "--link-gbps", (), {"huge": (ACCEPTED, None)}),
    ("infer_sim", "--seed", (), {"zero": (ACCEPTED, None)}),
    ("serve", "--batch", (), {}),
    ("serve", "--size", (), {}),
    ("serve", "--models", (), {}),
    ("serve", "--rate", (), {}),
    ("serve", "--seconds", (), {}),
    ("serve", "--seed", (), {"zero": (ACCEPTED, None)}),
    ("stream_train", "--batch", (), {}),
    ("stream_train", "--iterations", (), {}),
    ("stream_train", "--accumulate", (), {}),
    ("stream_train", "--eval-every", (), {"zero": (ACCEPTED, None)}),
    ("stream_train", "--lr", (), {"huge": (ACCEPTED, None)}),
    ("stream_train", "--seed", (), {"zero": (ACCEPTED, None)}),
]


def numeric_cases() -> list[Case]:
    cases = []
    for command, flag, extra, exceptions in NUMERIC:
        for kind, value in BAD_NUMBERS.items():
            expect, says = exceptions.get(kind, (REFUSED, None))
            cases.append(Case(f"{command} {flag} {kind}", command, (*extra, flag, value), expect, says=says))
    return cases


SIZES = {"1.5GiB": ACCEPTED, "-1": REFUSED, "1e400": REFUSED, "0": REFUSED, "0B": REFUSED, "64": REFUSED,
         "64MB": REFUSED, "0.4B": REFUSED, "nanMiB": REFUSED, "infGiB": REFUSED, "": REFUSED, HUGE + "TiB": REFUSED}


def size_cases() -> list[Case]:
    cases = []
    for text_, expect in SIZES.items():
        says = r"holds the whole peak|nothing needs to swap" if text_ == "1.5GiB" else None
        cases.append(Case(f"train --memory '{text_}'", "sim", ("--memory", text_), expect, says=says))
    for text_ in ("-1", "1e400", "0", "0B", "64"):
        cases.append(Case(f"train --window '{text_}'", "sim", ("--policy", "window", "--window", text_)))
    for text_ in ("-1", "1e400", "0", "0%", "-5%", "nan%", "1e400%", ",", "64"):
        cases.append(Case(f"infer --memory '{text_}'", "infer_sim", ("--memory", text_)))
    cases.append(Case("infer --memory 1.5GiB", "infer_sim", ("--memory", "1.5GiB"), ACCEPTED))
    for text_ in ("-1", "1e400", "0"):
        cases.append(Case(f"serve --memory '{text_}'", "serve", ("--memory", text_)))
        cases.append(Case(f"stream_train --memory '{text_}'", "stream_train", ("--memory", text_)))
    cases.append(Case("serve --memory 1B (no model fits)", "serve", ("--memory", "1B")))
    cases.append(Case("stream_train --memory 1B (no graph fits)", "stream_train", ("--memory", "1B")))
    return cases


LONG = "x" * 300
OUTPUTS = ("--checkpoint", "--json", "--save-plan", "--save-profile", "--search-checkpoint", "--save-weights")


def path_cases() -> list[Case]:
    cases = []
    for flag in OUTPUTS + ("--out",):
        suffix = ".safetensors" if flag == "--save-weights" else ".npz" if flag == "--checkpoint" else ".json"
        extra = SEARCH if flag in ("--save-plan", "--search-checkpoint") else ()
        name = "" if flag == "--out" else "o" + suffix
        cases += [
            Case(f"train {flag} missing directory", "train", (*extra, flag, f"{{tmp}}/no/such/dir/{name}"), ACCEPTED),
            Case(f"train {flag} name too long", "train", (*extra, flag, f"{{tmp}}/{LONG}{suffix}")),
            Case(f"train {flag} file used as a directory", "train", (*extra, flag, f"{{tmp}}/f/{name or 'x'}"),
                 make=a_file("f")),
            Case(f"train {flag} empty string", "train", (*extra, flag, "")),
            Case(f"train {flag} unwritable (/proc)", "train", (*extra, flag, f"/proc/hostile/{name or 'x'}")),
        ]
        if flag != "--out":
            cases.append(Case(f"train {flag} a directory", "train", (*extra, flag, "{tmp}")))
    cases += [
        Case("train --out a file", "train", ("--out", "{tmp}/f"), make=a_file("f")),
        Case("train --checkpoint FIFO", "train", ("--checkpoint", "{tmp}/p"), make=fifo("p")),
        Case("train --search-checkpoint FIFO", "train", (*SEARCH, "--search-checkpoint", "{tmp}/p"), make=fifo("p")),
        Case("train --json FIFO without a reader", "train", ("--json", "{tmp}/p"), make=fifo("p")),
        Case("train --save-plan FIFO without a reader", "train", (*SEARCH, "--save-plan", "{tmp}/p"), make=fifo("p")),
        Case("train --save-weights FIFO without a reader", "train", ("--save-weights", "{tmp}/p.npz"),
             make=fifo("p.npz")),
        Case("train --save-profile FIFO without a reader", "train", ("--save-profile", "{tmp}/p"), make=fifo("p")),
        # /dev/null is asked for by name: the run says 'saved to /dev/null', nothing is lost unasked
        Case("train --checkpoint /dev/null", "train", ("--checkpoint", "/dev/null"), ACCEPTED,
             says=r"checkpoint saved to /dev/null"),
        Case("train --json /dev/null", "train", ("--json", "/dev/null"), ACCEPTED),
        Case("train --save-weights /dev/null (no format in the name)", "train", ("--save-weights", "/dev/null")),
        Case("train --out /dev/null", "train", ("--out", "/dev/null")),
        Case("train --json symlink to a file elsewhere", "train", ("--json", "{tmp}/l.json"), ACCEPTED,
             make=both(lambda t, f: (t / "store").mkdir(), symlink("l.json", "{tmp}/store/r.json"))),
        Case("train --json dangling symlink into a missing folder", "train", ("--json", "{tmp}/l.json"), ACCEPTED,
             make=symlink("l.json", "{tmp}/nowhere/r.json")),
        # a file output over a broken link replaces the link with the file: written, not lost
        Case("train --json symlink loop", "train", ("--json", "{tmp}/loop.json"), ACCEPTED,
             make=symlink("loop.json", "{tmp}/loop.json")),
        Case("train --checkpoint symlink loop", "train", ("--checkpoint", "{tmp}/loop.npz"), ACCEPTED,
             make=symlink("loop.npz", "{tmp}/loop.npz")),
        Case("train --out symlink loop", "train", ("--out", "{tmp}/loop"), make=symlink("loop", "{tmp}/loop")),
        Case("train --out dangling symlink", "train", ("--out", "{tmp}/l"), make=symlink("l", "{tmp}/nowhere/run")),
        Case("train --json over --resume", "train", ("--resume", "{tmp}/ck.npz", "--iterations", "3", "--json",
                                                     "{tmp}/ck.npz"),
             make=lambda t, f: shutil.copy(f / "ck.npz", t / "ck.npz")),
        Case("train --save-weights over --data", "train", ("--data", "{tmp}/d.npz", "--save-weights", "{tmp}/d.npz"),
             make=lambda t, f: shutil.copy(f / "data.npz", t / "d.npz")),
        Case("train --json into --out's plan.json", "train", ("--out", "{tmp}/run", "--json", "{tmp}/run/plan.json")),
        Case("train --save-weights unknown format", "train", ("--save-weights", "{tmp}/w.pt")),
        Case("train --json the same file as --checkpoint", "train",
             ("--json", "{tmp}/same", "--checkpoint", "{tmp}/same")),
        Case("train --save-plan the same file as --load-plan (the same plan again)", "train",
             ("--load-plan", "{tmp}/plan.json", "--save-plan", "{tmp}/plan.json"), ACCEPTED,
             make=lambda t, f: shutil.copy(f / "plan.json", t / "plan.json")),
        Case("stream_train --stages-plot a directory", "stream_train", ("--stages-plot", "{tmp}")),
        Case("stream_train --stages-plot empty string", "stream_train", ("--stages-plot", "")),
        Case("stream_train --stages-plot unknown format", "stream_train", ("--stages-plot", "{tmp}/s.xyz")),
        Case("stream_train --stages-plot name too long", "stream_train", ("--stages-plot", f"{{tmp}}/{LONG}.png")),
        Case("stream_train --stages-plot FIFO", "stream_train", ("--stages-plot", "{tmp}/p.png"), make=fifo("p.png")),
    ]
    # input paths
    for flag, command in (("--load-plan", "train"), ("--resume", "train"), ("--profile", "sim"), ("--config", "sim"),
                          ("--data", "train"), ("--model", "train"), ("--profile", "infer_sim"),
                          ("--model", "infer_sim")):
        label = f"{command} {flag}"
        cases += [
            Case(f"{label} missing file", command, (flag, "{tmp}/missing.json")),
            Case(f"{label} name too long", command, (flag, f"{{tmp}}/{LONG}.json")),
            Case(f"{label} empty string", command, (flag, "")),
            Case(f"{label} FIFO (no writer)", command, (flag, "{tmp}/p.json"), make=fifo("p.json"), timeout=60),
            Case(f"{label} /dev/zero", command, (flag, "/dev/zero"), timeout=60),
            Case(f"{label} /dev/null", command, (flag, "/dev/null")),
            Case(f"{label} symlink loop", command, (flag, "{tmp}/loop"), make=symlink("loop", "{tmp}/loop")),
        ]
        if flag != "--model":
            cases.append(Case(f"{label} a directory", command, (flag, "{tmp}")))
    cases.append(Case("train --search-checkpoint --resume-search FIFO", "train",
                      (*SEARCH, "--search-checkpoint", "{tmp}/p.json", "--resume-search"), make=fifo("p.json")))
    return cases


PLAN_BAD = {
    "copy is a string": lambda d: d["instructions"][0].__setitem__("copy", "no"),
    "offset 2^62": lambda d: d["arena"]["object_offset"].__setitem__(0, 2**62),
    "offset 2^70": lambda d: d["arena"]["object_offset"].__setitem__(0, 2**70),
    "offset negative": lambda d: d["arena"]["object_offset"].__setitem__(0, -64),
    "object size 2^62": lambda d: d["arena"]["object_bytes"].__setitem__(0, 2**62),
    "arena 2^70 bytes": lambda d: d["arena"].__setitem__("arena_bytes", 2**70),
    "arena negative": lambda d: d["arena"].__setitem__("arena_bytes", -1),
    "scratch 2^62": lambda d: d["arena"].__setitem__("scratch_bytes", 2**62),
    "target 2^70": lambda d: d["instructions"][0].__setitem__("target", 2**70),
    "obj out of range": lambda d: d["instructions"][0].__setitem__("obj", 10**6),
    "dep negative": lambda d: d["instructions"][-1].__setitem__("deps", [-1]),
    "dep on itself": lambda d: d["instructions"][-1].__setitem__("deps", [len(d["instructions"]) - 1]),
    "schedule not an order": lambda d: d.__setitem__("schedule", [0] * len(d["schedule"])),
    "schedule 2^70": lambda d: d["schedule"].__setitem__(0, 2**70),
    "unknown stream": lambda d: d["instructions"][0].__setitem__("kind", "teleport"),
    "instructions a dict": lambda d: d.__setitem__("instructions", {"a": 1}),
    "no instructions": lambda d: d.__setitem__("instructions", []),
    "initial_resident junk": lambda d: d.__setitem__("initial_resident", [[1]]),
    "format missing": lambda d: d.pop("format"),
    "another graph": lambda d: d.__setitem__("graph_fingerprint", "0" * 16),
    "a list": lambda d: [1, 2, 3],
}

PROFILE_BAD = {
    "rate zero": setter(("link", "h2d_bytes_per_s"), 0),
    "rate negative": setter(("link", "d2h_bytes_per_s"), -5),
    "rate 1e-300": setter(("link", "h2d_bytes_per_s"), 1e-300),
    "latency 1e300": setter(("link", "latency_s"), 1e300),
    "rate a string": setter(("link", "h2d_bytes_per_s"), "fast"),
    "link missing": lambda d: d.pop("link"),
    "link extra key": setter(("link", "warp"), 1),
    "device empty": setter(("device",), ""),
    "op time 2 hours": lambda d: d.setdefault("ops", {}).__setitem__("x", 7200.0),
    "flops 1e-300": setter(("analytic", "flops_per_s"), 1e-300),
    "op time 1e308": lambda d: d.setdefault("ops", {}).__setitem__("x", 1e308),
    "format another": setter(("format",), "swapengine.profile/9"),
}


def json_text_cases(kind: str, command: str, flag_args: Callable[[str], tuple], fixture: str) -> list[Case]:
    """Truncated, garbage, binary, empty, nested 200k deep, Infinity and NaN, for a JSON input."""
    path = "{tmp}/x.json"
    return [
        Case(f"{kind} truncated", command, flag_args(path), make=truncated(fixture, "x.json")),
        Case(f"{kind} garbage", command, flag_args(path), make=text("x.json", "{this is: not json")),
        Case(f"{kind} binary", command, flag_args(path), make=text("x.json", bytes(range(256)) * 8)),
        Case(f"{kind} empty file", command, flag_args(path), make=text("x.json", "")),
        Case(f"{kind} nesting bomb 200k", command, flag_args(path), make=nesting_bomb("x.json")),
        Case(f"{kind} object nesting bomb 200k", command, flag_args(path),
             make=text("x.json", '{"a":' * BOMB_DEPTH + "1" + "}" * BOMB_DEPTH)),
        Case(f"{kind} a bare number", command, flag_args(path), make=text("x.json", "1e999")),
    ]


def file_cases() -> list[Case]:
    cases = []
    load_plan = lambda p: ("--load-plan", p)                                           # noqa: E731
    cases += json_text_cases("plan", "train", load_plan, "plan.json")
    for what, change in PLAN_BAD.items():
        cases.append(Case(f"plan {what}", "train", load_plan("{tmp}/x.json"), make=fixture_json("plan.json", "x.json",
                                                                                                 change)))
    cases.append(Case("plan NaN in offsets", "train", load_plan("{tmp}/x.json"),
                      make=lambda t, f: (t / "x.json").write_text(
                          (f / "plan.json").read_text().replace('"object_offset": [0', '"object_offset": [NaN', 1)
                          .replace('"object_offset":[0', '"object_offset":[NaN', 1))))
    cases.append(Case("plan the fixture itself", "train", load_plan("{fix}/plan.json"), ACCEPTED))

    profile = lambda p: ("--profile", p)                                               # noqa: E731
    cases += json_text_cases("profile", "sim", profile, "profile.json")
    for what, change in PROFILE_BAD.items():
        cases.append(Case(f"profile {what}", "sim", profile("{tmp}/x.json"),
                          make=fixture_json("profile.json", "x.json", change)))
    cases.append(Case("profile Infinity rate", "sim", profile("{tmp}/x.json"),
                      make=lambda t, f: (t / "x.json").write_text(
                          json.dumps(json.loads((f / "profile.json").read_text()) | {"dispatch_s": 0})
                          .replace('"dispatch_s": 0', '"dispatch_s": Infinity'))))
    cases.append(Case("profile dispatch 0.5 s (allowed: under a second)", "sim", profile("{tmp}/x.json"), ACCEPTED,
                      make=fixture_json("profile.json", "x.json", setter(("dispatch_s",), 0.5))))
    cases.append(Case("infer profile rate zero", "infer_sim", profile("{tmp}/x.json"),
                      make=fixture_json("profile.json", "x.json", PROFILE_BAD["rate zero"])))

    config = lambda p: ("--config", p)                                                 # noqa: E731
    cases += json_text_cases("config", "sim", config, "report.json")
    # the file's settings alone (BARE): a flag typed beside it would win over the hostile one
    small = {"model": "small-lstm", "batch": 4, "size": 3, "policies": ["swapadvisor"], "search_seconds": 0,
             "profile": "v100"}
    for what, doc in {"unknown key": {"batchsize": 4}, "batch a string": {"batch": "4"}, "batch 2^70": {"batch": 2**70},
                      "lr NaN": {"lr": float("nan")}, "memory negative": {"memory_bytes": -5},
                      "policies numbers": {"policies": [1, 2]}, "iterations true": {"iterations": True},
                      "model unknown": {"model": "no-such-model"}, "profile a missing file": {"profile": "/nope.json"},
                      "window without the window policy": {"window_bytes": 1 << 20},
                      }.items():
        cases.append(Case(f"config {what}", "bare", config("{tmp}/x.json"), make=as_json("x.json", small | doc)))
    for what, doc in {"a list": [1, 2], "another format": {"format": "x/1", "settings": {}},
                      "settings not an object": {"format": "swapengine.report/1", "settings": [1]}}.items():
        cases.append(Case(f"config {what}", "bare", config("{tmp}/x.json"), make=as_json("x.json", doc)))
    cases.append(Case("config its own settings alone", "bare", config("{tmp}/x.json"), ACCEPTED,
                      make=as_json("x.json", small)))
    cases.append(Case("config given twice", "sim", ("--config", "{fix}/report.json", "--config", "{fix}/report.json")))
    cases.append(Case("config a report, replayed", "sim", ("--config", "{fix}/report.json"), ACCEPTED))

    search = lambda p: (*RESUME_SEARCH, "--search-checkpoint", p, "--resume-search")    # noqa: E731
    cases += json_text_cases("search checkpoint", "train", search, "search.json")
    first = ("population", 0)
    for what, change in {"bad population entry": setter(first, {"schedule": "abc"}),
                         "population entry schedule 2^70":
                             lambda d: d["population"][0]["schedule"].__setitem__(0, 2**70),
                         "negative generation": setter(("generation",), -3),
                         "generation 2^70": setter(("generation",), 2**70),
                         "population empty": setter(("population",), []),
                         "elapsed a string": setter(("elapsed_s",), "long"),
                         "another search": setter(("identity", "seed"), 99),
                         "format missing": lambda d: d.pop("format"),
                         "allocation counts negative": lambda d: d["population"][0]["allocation"].__setitem__(
                             "counts", [-1] * len(d["population"][0]["allocation"].get("counts", [0]))),
                         }.items():
        cases.append(Case(f"search checkpoint {what}", "train", search("{tmp}/x.json"),
                          make=fixture_json("search.json", "x.json", change)))
    cases.append(Case("search checkpoint, the fixture resumed", "train", search("{tmp}/s.json"), ACCEPTED,
                      make=lambda t, f: shutil.copy(f / "search.json", t / "s.json")))
    cases.append(Case("search checkpoint already at --search-generations", "train",
                      (*SEARCH, "--search-checkpoint", "{tmp}/s.json", "--resume-search"),
                      make=lambda t, f: shutil.copy(f / "search.json", t / "s.json")))

    resume = lambda p: ("--resume", p, "--iterations", "3")                              # noqa: E731
    cases += [
        Case("checkpoint truncated", "train", resume("{tmp}/c.npz"), make=truncated("ck.npz", "c.npz")),
        Case("checkpoint garbage", "train", resume("{tmp}/c.npz"), make=text("c.npz", "PK\x03\x04 garbage")),
        Case("checkpoint empty", "train", resume("{tmp}/c.npz"), make=text("c.npz", "")),
        Case("checkpoint header nesting bomb", "train", resume("{tmp}/c.npz"),
             make=npz("c.npz", __header__=np.array("[" * BOMB_DEPTH + "]" * BOMB_DEPTH))),
        Case("checkpoint another model", "train", resume("{fix}/ck-cnn.npz")),
        Case("checkpoint member claiming 4 TiB", "train", resume("{tmp}/c.npz"),
             make=claiming_member("c.npz", "t/x")),
        Case("checkpoint zip-bomb member", "train", resume("{tmp}/c.npz"), make=zip_bomb("c.npz", "t/x")),
        Case("checkpoint object array", "train", resume("{tmp}/c.npz"),
             make=npz("c.npz", __header__=np.array("{}"), x=np.array([{"a": 1}], dtype=object))),
        Case("checkpoint iteration negative", "train", resume("{tmp}/c.npz"),
             make=checkpoint_with("c.npz", setter(("iteration",), -5))),
        Case("checkpoint iteration 2^70", "train", resume("{tmp}/c.npz"),
             make=checkpoint_with("c.npz", setter(("iteration",), 2**70))),
        Case("checkpoint iteration a string", "train", resume("{tmp}/c.npz"),
             make=checkpoint_with("c.npz", setter(("iteration",), "2"))),
        Case("checkpoint seed 2^70", "train", resume("{tmp}/c.npz"),
             make=checkpoint_with("c.npz", setter(("seed",), 2**70))),
        Case("checkpoint lr Infinity", "train", resume("{tmp}/c.npz"),
             make=checkpoint_with("c.npz", setter(("settings", "lr"), float("inf")))),
        Case("checkpoint settings a list", "train", resume("{tmp}/c.npz"),
             make=checkpoint_with("c.npz", setter(("settings",), [1]))),
        Case("checkpoint tensor of the wrong shape", "train", resume("{tmp}/c.npz"),
             make=checkpoint_with("c.npz", arrays_change=lambda m: m.__setitem__(
                 next(k for k in m if k.startswith("t/")), np.zeros(3, np.float32)))),
        Case("checkpoint tensor missing", "train", resume("{tmp}/c.npz"),
             make=checkpoint_with("c.npz", arrays_change=lambda m: m.pop(next(k for k in m if k.startswith("t/"))))),
        Case("checkpoint with a seed other than the run's", "train", (*resume("{fix}/ck.npz"), "--seed", "7")),
        Case("checkpoint already past --iterations", "train", ("--resume", "{fix}/ck.npz", "--iterations", "2")),
        Case("checkpoint the fixture resumed", "train", resume("{fix}/ck.npz"), ACCEPTED),
    ]

    data = lambda p: ("--data", p)                                                      # noqa: E731
    cases += [
        Case("data truncated", "train", data("{tmp}/d.npz"), make=truncated("data.npz", "d.npz")),
        Case("data garbage", "train", data("{tmp}/d.npz"), make=text("d.npz", "not an npz")),
        Case("data member claiming 4 TiB", "train", data("{tmp}/d.npz"), make=claiming_member("d.npz", "x0")),
        Case("data zip-bomb member", "train", data("{tmp}/d.npz"), make=zip_bomb("d.npz", "x0")),
        Case("data missing member", "train", data("{tmp}/d.npz"), make=npz("d.npz", **data_arrays(x2=None))),
        Case("data extra member", "train", data("{tmp}/d.npz"),
             make=npz("d.npz", **data_arrays(extra=np.zeros(16, np.float32)))),
        Case("data wrong dtype", "train", data("{tmp}/d.npz"),
             make=npz("d.npz", **data_arrays(x0=np.zeros((16, 8), np.float64)))),
        Case("data wrong shape", "train", data("{tmp}/d.npz"),
             make=npz("d.npz", **data_arrays(x0=np.zeros((16, 9), np.float32)))),
        Case("data labels out of range", "train", data("{tmp}/d.npz"),
             make=npz("d.npz", **data_arrays(loss_labels=np.full(16, 99, np.int32)))),
        Case("data negative labels", "train", data("{tmp}/d.npz"),
             make=npz("d.npz", **data_arrays(loss_labels=np.full(16, -1, np.int32)))),
        Case("data samples differ between members", "train", data("{tmp}/d.npz"),
             make=npz("d.npz", **data_arrays(x1=np.zeros((15, 8), np.float32)))),
        Case("data fewer samples than a batch", "train", data("{tmp}/d.npz"), make=npz("d.npz", **data_arrays(2))),
        Case("data no samples", "train", data("{tmp}/d.npz"), make=npz("d.npz", **data_arrays(0))),
        Case("data NaN inputs", "train", (*data("{tmp}/d.npz"), "--iterations", "3"), ACCEPTED,
             make=npz("d.npz", **data_arrays(x0=np.full((16, 8), np.nan, np.float32))), says=r"not finite|diverged"),
        Case("data the fixture", "train", data("{fix}/data.npz"), ACCEPTED),
    ]

    model = lambda p: ("--model", p)                                                   # noqa: E731
    cases += [
        Case("imported model.json garbage", "train_imported", model("{tmp}/m"),
             make=both(lambda t, f: shutil.copytree(f / "imported", t / "m"), text("m/model.json", "{oops"))),
        Case("imported model.json nesting bomb", "train_imported", model("{tmp}/m"),
             make=both(lambda t, f: shutil.copytree(f / "imported", t / "m"), nesting_bomb("m/model.json"))),
        Case("imported wrong format", "train_imported", model("{tmp}/m"),
             make=model_folder("m", setter(("format",), "x"))),
        Case("imported task unknown", "train_imported", model("{tmp}/m"),
             make=model_folder("m", setter(("task",), "dance"))),
        Case("imported values.npz missing", "train_imported", model("{tmp}/m"), make=model_folder("m", values=False)),
        Case("imported values member claiming 4 TiB", "train_imported", model("{tmp}/m"),
             make=both(model_folder("m"), claiming_member("m/values.npz", "v0"))),
        Case("imported values zip bomb", "train_imported", model("{tmp}/m"),
             make=both(model_folder("m"), zip_bomb("m/values.npz", "v0"))),
        Case("imported tensor shape negative", "train_imported", model("{tmp}/m"),
             make=model_folder("m", lambda d: d["graph"]["tensors"][0].__setitem__("shape", [-4, 8]))),
        Case("imported tensor shape 2^62", "train_imported", model("{tmp}/m"),
             make=model_folder("m", lambda d: d["graph"]["tensors"][0].__setitem__("shape", [2**62, 8]))),
        Case("imported unknown operator", "train_imported", model("{tmp}/m"),
             make=model_folder("m", lambda d: d["graph"]["nodes"][0].__setitem__("op", "teleport"))),
        Case("imported inputs not a list", "train_imported", model("{tmp}/m"),
             make=model_folder("m", setter(("inputs",), "x"))),
        Case("imported graph a string", "train_imported", model("{tmp}/m"),
             make=model_folder("m", setter(("graph",), "g"))),
        Case("imported, with --batch", "train_imported", (*model("{fix}/imported"), "--batch", "8")),
        Case("imported training model given to infer", "infer_sim", ("--model", "{fix}/imported", "--memory",
                                                                        "100%")),
        Case("imported the fixture", "train_imported", model("{fix}/imported"), ACCEPTED),
    ]
    return cases


def conflict_cases() -> list[Case]:
    return [
        Case("train --window without --policy window", "sim", ("--window", "1MiB")),
        Case("train --policy ideal --allocator bestfit", "sim", ("--policy", "ideal", "--allocator", "bestfit")),
        Case("train --chunk-mib without va", "sim", ("--chunk-mib", "2")),
        Case("train --chunk-mib that rounds to 0 bytes", "sim",
             ("--policy", "window", "--allocator", "va", "--chunk-mib", "1e-9")),
        Case("train --swap-only with --policy window", "sim", ("--policy", "window", "--swap-only")),
        Case("train --resume-search without --search-checkpoint", "sim", ("--resume-search",)),
        Case("train --load-plan with --policy window", "sim", ("--policy", "window", "--load-plan", "{fix}/plan.json")),
        Case("train --load-plan with --search-checkpoint", "sim",
             ("--load-plan", "{fix}/plan.json", "--search-checkpoint", "{tmp}/s.json")),
        Case("train --simulate-only --checkpoint", "sim", ("--checkpoint", "{tmp}/c.npz")),
        Case("train --simulate-only --data", "sim", ("--data", "{fix}/data.npz")),
        Case("train --simulate-only --save-weights", "sim", ("--save-weights", "{tmp}/w.npz")),
        Case("train --simulate-only --policy reference", "sim", ("--policy", "reference")),
        Case("train --link-gbps with --backend cuda", "train", ("--backend", "cuda", "--link-gbps", "8")),
        Case("train --device with --backend cpu", "train", ("--device", "1"), ACCEPTED,
             says=r"^warning: --device 1 changes nothing"),
        Case("train --checkpoint-every without --checkpoint", "train", ("--checkpoint-every", "5")),
        Case("train --overwrite without --out", "train", ("--overwrite",)),
        Case("train --out holding a run, no --overwrite", "train", ("--out", "{tmp}/run"),
             make=lambda t, f: shutil.copytree(f / "run", t / "run")),
        Case("train --policy empty", "sim", ("--policy", "")),
        Case("train --policy ,,", "sim", ("--policy", ",,")),
        Case("train --policy unknown", "sim", ("--policy", "teleport")),
        Case("train --allocator unknown", "sim", ("--allocator", "firstfit")),
        Case("train --dtype float16", "sim", ("--dtype", "float16")),
        Case("train --optimizer rmsprop", "sim", ("--optimizer", "rmsprop")),
        Case("train --backend tpu", "train", ("--backend", "tpu")),
        Case("train --backend cuda", "train", ("--backend", "cuda"), CUDA),
        Case("train --momentum with --optimizer adam", "train", ("--optimizer", "adam", "--momentum", "0.5"), ACCEPTED,
             says=r"^warning: --momentum 0.5 changes nothing"),
        Case("train --momentum with a GPT (adamw)", "sim", ("--model", "gpt-tiny", "--batch", "2", "--size", "4",
                                                            "--momentum", "0.5"), ACCEPTED,
             says=r"^warning: --momentum 0.5 changes nothing"),
        Case("train --measure-iterations with one policy", "train", ("--measure-iterations", "3"), ACCEPTED,
             says=r"^warning: --measure-iterations 3 changes nothing"),
        Case("train --workers without a search", "sim", ("--workers", "2")),
        Case("train --search-checkpoint without a search", "sim", ("--search-checkpoint", "{tmp}/s.json")),
        Case("train --workers above the population", "sim", ("--search-generations", "1", "--population", "4",
                                                             "--workers", "5")),
        Case("train --workers 10^6", "sim", ("--search-generations", "1", "--workers", str(10**6))),
        Case("train --population 2^40 (host memory)", "sim", ("--search-generations", "1", "--workers", "1",
                                                               "--population", str(2**40))),
        Case("train --link-gbps 1e-300", "train", ("--link-gbps", "1e-300")),
        Case("train --link-gbps 1e-12 (a byte in 17 minutes)", "train", ("--link-gbps", "1e-12")),
        Case("train --size 2^40 for an LSTM (steps)", "sim", ("--size", str(2**40))),
        Case("train --size 2^40 for a CNN (image side)", "sim", ("--model", "small-cnn", "--size", str(2**40))),
        Case("train --batch 2^30 for a GPT", "sim", ("--model", "gpt-tiny", "--batch", str(2**30))),
        Case("train --save-plan with a policy after the searched one, into --out's plan.json", "sim",
             ("--policy", "swapadvisor,ideal", "--out", "{tmp}/run", "--save-plan", "{tmp}/run/plan.json")),
        Case("train --sanitize --simulate-only", "sim", ("--sanitize",), ACCEPTED,
             says=r"--sanitize.*(nothing|simulat)"),
        Case("train --link-gbps --simulate-only", "sim", ("--link-gbps", "8"), ACCEPTED,
             says=r"--link-gbps.*(nothing|simulat)"),
        Case("train --ray-address without a searching policy", "sim", ("--policy", "window", "--ray-address", "auto")),
        Case("train --unknown flag", "sim", ("--teleport",)),
        Case("train --iterations given no value", "sim", ("--iterations",)),
        Case("train --memory below the smallest budget", "sim", ("--memory", "1KiB")),
        Case("train --batch huge, run (host memory)", "train", ("--batch", str(2**30))),
        Case("infer --simulate-only --backend garbage", "infer_sim", ("--backend", "garbage")),
        Case("infer --backend garbage", "infer", ("--backend", "garbage")),
        Case("infer --backend cuda", "infer", ("--backend", "cuda"), CUDA),
        Case("infer --link-gbps with --simulate-only", "infer_sim", ("--link-gbps", "8")),
        Case("infer --batches with --simulate-only", "infer_sim", ("--batches", "5")),
        Case("infer --sanitize with --simulate-only", "infer_sim", ("--sanitize",)),
        Case("infer --link-gbps 1e-300", "infer", ("--link-gbps", "1e-300")),
        Case("infer --model with 2^40 image side", "infer_sim", ("--size", str(2**40))),
        Case("infer --policy unknown", "infer_sim", ("--policy", "teleport")),
        Case("infer --policy reference", "infer_sim", ("--policy", "reference")),
        Case("infer --policy ideal", "infer_sim", ("--policy", "ideal"), ACCEPTED),
        Case("infer --profile unknown device", "infer_sim", ("--profile", "tpu-v9")),
        Case("infer --unknown flag", "infer_sim", ("--teleport",)),
        Case("serve --backend garbage", "serve", ("--backend", "garbage")),
        Case("serve --rate 1e200 --seconds 1e200", "serve", ("--rate", "1e200", "--seconds", "1e200"), timeout=60),
        Case("serve --rate 1e6 --seconds 1e6 (10^12 batches)", "serve", ("--rate", "1e6", "--seconds", "1e6"),
             timeout=60),
        Case("serve --models 10^6", "serve", ("--models", str(10**6)), timeout=60),
        Case("serve --batch 2^30 (host memory)", "serve", ("--batch", str(2**30)), timeout=60),
        Case("serve --unknown flag", "serve", ("--teleport",)),
        Case("stream_train --policy ideal", "stream_train", ("--policy", "ideal")),
        Case("stream_train --policy unknown", "stream_train", ("--policy", "teleport")),
        Case("stream_train --backend garbage", "stream_train", ("--backend", "garbage")),
        Case("stream_train --profile a file", "stream_train", ("--profile", "{fix}/profile.json"), ACCEPTED),
        Case("stream_train --varying-seq garbage", "stream_train", ("--varying-seq", "8,x")),
        Case("stream_train --varying-seq 0", "stream_train", ("--varying-seq", "0")),
        Case("stream_train --varying-seq negative", "stream_train", ("--varying-seq", "-8")),
        Case("stream_train --varying-seq empty", "stream_train", ("--varying-seq", "")),
        Case("stream_train --varying-seq 2^70", "stream_train", ("--varying-seq", HUGE), timeout=60),
        Case("stream_train --varying-seq on a CNN", "stream_train", ("--model", "small-cnn", "--varying-seq", "8")),
        Case("stream_train --nonfinite-at -1", "stream_train", ("--nonfinite-at", "-1")),
        Case("stream_train --nonfinite-at past the end", "stream_train", ("--nonfinite-at", "2")),
        Case("stream_train --nonfinite-at garbage", "stream_train", ("--nonfinite-at", "x")),
        Case("stream_train --nonfinite-at 2^70", "stream_train", ("--nonfinite-at", HUGE)),
        Case("stream_train --eval-every beyond --iterations", "stream_train", ("--eval-every", "100")),
        Case("stream_train --accumulate beyond --iterations", "stream_train", ("--accumulate", "100")),
        Case("stream_train --accumulate beyond the training iterations", "stream_train",
             ("--eval-every", "2", "--accumulate", "2")),
        Case("stream_train --batch 2^30", "stream_train", ("--batch", str(2**30)), timeout=60),
        Case("stream_train --varying-seq 65536 (host memory)", "stream_train", ("--varying-seq", "65536")),
        Case("stream_train --eval-every and --accumulate that fit", "stream_train",
             ("--iterations", "4", "--eval-every", "2", "--accumulate", "2"), ACCEPTED),
        Case("stream_train --unknown flag", "stream_train", ("--teleport",)),
    ]


RAY = {"garbage": "not an address", "http scheme": "http://host:6379", "port 0": "host:0", "port 99999": "host:99999",
       "bad IPv6": "[::zz]:6379", "bad IPv4": "300.1.1.1:6379", "empty": "", "no port": "host:",
       "spaces": "a b:1", "huge port": f"host:{HUGE}"}


def other_cases() -> list[Case]:
    cases = [Case(f"train --ray-address {what}", "sim", (*SEARCH, "--ray-address", address))
             for what, address in RAY.items()]
    cases.append(Case("train --ray-address unreachable (TEST-NET)", "sim",
                      (*SEARCH, "--ray-address", "192.0.2.1:6379")))
    cases.append(Case("train --ray-address a closed local port", "sim", (*SEARCH, "--ray-address", "127.0.0.1:9")))
    cases.append(Case("train --ray-address a host name that does not resolve", "sim",
                      (*SEARCH, "--ray-address", "no-such-host.invalid:6379")))
    cases.append(Case("train --ray-address auto without a cluster", "sim", (*SEARCH, "--ray-address", "auto"),
                      timeout=120))
    models = {"unknown": "no-such-model", "empty": "", "gpt with zero layers": "gpt-0-64-4",
              "resnet 2^70": f"resnet-{HUGE}", "wresnet garbage": "wresnet-x-y", "rnn negative": "rnn--2-1k",
              "gpt huge width": f"gpt-2-{HUGE}-4"}
    for what, name in models.items():
        cases.append(Case(f"train --model {what}", "sim", ("--model", name)))
    for what, name in {"unknown": "no-such-model", "a training-only model": "small-lstm",
                       "resnet 2^70": f"resnet-{HUGE}", "empty": ""}.items():
        cases.append(Case(f"infer --model {what}", "infer_sim", ("--model", name)))
        cases.append(Case(f"serve --model {what}", "serve", ("--model", name)))
    for what, name in {"unknown": "no-such-model", "empty": "", "gpt huge width": f"gpt-2-{HUGE}-4"}.items():
        cases.append(Case(f"stream_train --model {what}", "stream_train", ("--model", name)))
    return cases


def all_cases() -> list[Case]:
    return numeric_cases() + size_cases() + path_cases() + file_cases() + conflict_cases() + other_cases()


# ---------------------------------------------------------------------- fixtures
def make_fixtures(fix: Path) -> None:
    """A checkpoint, plan, profile, search checkpoint and report of one small run; a checkpoint of
    another model; data; an imported model folder."""
    train = [*TRAIN[:-2], "--iterations", "2", *SEARCH, "--search-seconds", "0",
             "--checkpoint", "ck.npz", "--save-plan", "plan.json", "--save-profile", "profile.json",
             "--search-checkpoint", "search.json", "--json", "report.json", "--out", "run"]
    other = ["--model", "small-cnn", "--quiet", "--backend", "cpu", "--profile", "v100", "--policy", "swapadvisor",
             "--iterations", "1", "--no-check", "--search-seconds", "0", "--checkpoint", "ck-cnn.npz",
             "--out", "run-cnn"]
    for argv in (train, other):
        done = subprocess.run([sys.executable, "-m", "engine.train", *argv], cwd=fix, env=_env(),
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"fixture run failed: {' '.join(argv)}\n{done.stderr}")
    np.savez(fix / "data.npz", **data_arrays())
    _imported_model(fix / "imported")


def _imported_model(folder: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from engine.initializers import IMPORTED
    from engine.ir import Graph
    from engine.library.imported import write_model

    g = Graph("imported-tiny")
    x = g.input("x", (4, 8))
    w = g.parameter("w", (5, 8), init=IMPORTED)
    b = g.parameter("b", (5,), init=IMPORTED)
    (y,) = g.apply("fully_connected", [x, w, b], name="fc")
    labels = g.label("labels", (4,))
    loss = g.apply("softmax_cross_entropy", [y, labels], name="loss")[0]
    g.set_loss(loss)
    r = np.random.default_rng(0)
    write_model(str(folder), g, {"w": r.standard_normal((5, 8), dtype=np.float32), "b": np.zeros(5, np.float32)},
                "train", ["x", "labels"], {"made_by": "bench.hostile_inputs"}, [])


# ---------------------------------------------------------------------- running
def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


@dataclass
class Result:
    case: Case
    outcome: str
    line: str
    seconds: float
    code: int | None


def run_case(case: Case, fix: Path, work: Path, index: int) -> Result:
    tmp = work / f"case{index:03d}"
    tmp.mkdir()
    if case.make:
        case.make(tmp, fix)
    argv = [a.format(tmp=tmp, fix=fix) for a in (*BASE[case.command], *case.args)]
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", MODULE[case.command], *argv], cwd=tmp, env=_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=_limit_memory)
    try:
        out, err = proc.communicate(timeout=case.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)          # the whole session: search workers too
        out, err = proc.communicate()
        return Result(case, "hang", _last(err.decode(errors="replace")), time.perf_counter() - t0, None)
    seconds = time.perf_counter() - t0
    _sweep(proc.pid)
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    lines = [x for x in err.splitlines() if x.strip()]
    errors = [x for x in lines if not x.startswith("warning: ")]     # a note (a busy machine) is no error
    shown = errors[0] if len(errors) == 1 else _last(err)
    if "Traceback" in err:
        return Result(case, "traceback", _last(err), seconds, proc.returncode)
    if proc.returncode < 0:
        return Result(case, f"killed by signal {-proc.returncode}", shown, seconds, proc.returncode)
    if case.expect == REFUSED:
        if proc.returncode == 0:
            return Result(case, "silent acceptance", _last(out), seconds, 0)
        if len(errors) != 1:
            return Result(case, "multi-line error", " | ".join(lines)[-300:], seconds, proc.returncode)
        if case.says and not re.search(case.says, errors[0]):
            return Result(case, "wrong refusal", errors[0], seconds, proc.returncode)
        return Result(case, "ok", errors[0], seconds, proc.returncode)
    if proc.returncode != 0:
        outcome = "one-line refusal" if len(errors) == 1 else "multi-line error"
        return Result(case, outcome, shown[-300:], seconds, proc.returncode)
    if case.says:
        said = [x for x in (out + "\n" + err).splitlines() if re.search(case.says, x)]
        if not said:
            return Result(case, "silent acceptance", _last(err) or _last(out), seconds, 0)
        return Result(case, "ok", said[0], seconds, 0)
    return Result(case, "ok", _last(err) if lines else "", seconds, 0)


def _limit_memory() -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _sweep(pgid: int) -> None:
    """Whatever the case's process left in its session (a worker it did not stop) goes too."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _last(text_: str) -> str:
    lines = [x for x in text_.splitlines() if x.strip()]
    return lines[-1][-300:] if lines else ""


# ---------------------------------------------------------------------- report
def table(results: list[Result]) -> str:
    rows = [("case", "expect", "outcome", "s", "stderr line")]
    for r in results:
        rows.append((r.case.name, r.case.expect, r.outcome, f"{r.seconds:.1f}", r.line.replace("\n", " ")[:220]))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(row[i].ljust(widths[i]) for i in range(4)) + "  " + row[4] for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * 11)
    return "\n".join(lines)


def summary(results: list[Result]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    commands = sorted({MODULE[r.case.command] for r in results})
    failed = len(results) - counts.get("ok", 0)
    return (f"{len(results)} cases ({', '.join(commands)}): "
            + ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (kv[0] != "ok", kv[0])))
            + f"; {failed} failed")


def machine_line() -> str:
    from bench.results_file import cpu_name
    return (f"machine: {platform.platform()}, {os.cpu_count()} cores: {cpu_name()}; "
            f"python {platform.python_version()}; "
            f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; "
            f"{'a GPU' if ON_GPU else 'no GPU'} (--backend cuda cases {CUDA}); {WORKERS} cases at a time, "
            f"{TIMEOUT:.0f} s limit (some cases less), {MEMORY_LIMIT >> 30} GiB of address space each")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hostile_inputs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="run the cases whose name contains this text")
    ap.add_argument("--list", action="store_true", help="list the cases and stop")
    ap.add_argument("--save", action="store_true", help="write bench/results/hostile_inputs_<date>.txt")
    ap.add_argument("--workers", type=int, default=WORKERS, help=f"cases at a time (default {WORKERS})")
    args = ap.parse_args(argv)
    cases = [c for c in all_cases() if args.only is None or args.only in c.name]
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    if args.list:
        for c in cases:
            print(f"{c.name:60} {c.expect:9} python -m {MODULE[c.command]} {' '.join(c.args)}")
        print(f"{len(cases)} cases")
        return 0
    with tempfile.TemporaryDirectory(prefix="hostile-") as work_dir:
        work = Path(work_dir)
        fix = work / "fixtures"
        fix.mkdir()
        t0 = time.perf_counter()
        make_fixtures(fix)
        print(f"fixtures made in {time.perf_counter() - t0:.0f} s; {len(cases)} cases, {args.workers} at a time",
              flush=True)
        with ThreadPoolExecutor(args.workers) as pool:
            futures = [pool.submit(run_case, c, fix, work, i) for i, c in enumerate(cases)]
            results = []
            for i, f in enumerate(futures):
                results.append(f.result())
                r = results[-1]
                if r.outcome != "ok":
                    print(f"  [{i + 1}/{len(cases)}] {r.case.name}: {r.outcome}: {r.line[:200]}", flush=True)
    wall = time.perf_counter() - t0
    report = "\n".join([machine_line(), "", table(results), "", summary(results) + f"; {wall:.0f} s in all"])
    print(report)
    if args.save:
        from bench.results_file import save_results
        os.chdir(ROOT)
        print(f"saved to {save_results('hostile_inputs', report + chr(10))}")
    return 0 if all(r.outcome == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
