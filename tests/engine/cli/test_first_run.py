"""The first run of engine.train plans interpreted while the planner compiles in the background
(engine/cli/first_run.py, issue 38); the ready mark, the lock and the warm-up command."""
import os
import re
import subprocess
import sys

import pytest
from numba.core import config

from engine.cli import first_run, warmup

ROOT = first_run.ROOT


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder for the marks and the lock (numba's own cache is untouched: its
    folder was read when numba was imported); numba's DISABLE_JIT restored afterwards."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(config, "DISABLE_JIT", config.DISABLE_JIT)
    monkeypatch.setattr(first_run, "_tier", None)
    return tmp_path


def test_the_compiled_sources_are_every_module_with_numba_code():
    found = set()
    for package in ("planner", "ga", "engine", "allocator", "ops"):
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                path = os.path.join(folder, name)
                if name.endswith(".py") and re.search(r"@numba\.njit|numba\.njit\(", open(path).read()):
                    found.add(os.path.relpath(path, ROOT))
    assert found - {"planner/numba_cache.py"} == set(first_run.COMPILED_SOURCES)


def test_a_cold_cache_plans_interpreted_a_ready_one_compiled(cache):
    environ = {}
    assert first_run.choose_tier(environ, say=pytest.fail) == first_run.INTERPRETED
    assert environ["NUMBA_DISABLE_JIT"] == "1" and config.DISABLE_JIT      # spawned workers too
    config.DISABLE_JIT = False
    first_run.mark_ready(1.0)
    assert first_run.choose_tier({}, say=pytest.fail) == first_run.COMPILED and not config.DISABLE_JIT


def test_the_mark_vouches_for_these_sources_only(cache, tmp_path_factory, monkeypatch):
    copy = tmp_path_factory.mktemp("copy")
    for rel in first_run.COMPILED_SOURCES:
        os.makedirs(copy / os.path.dirname(rel), exist_ok=True)
        (copy / rel).write_bytes(open(os.path.join(ROOT, rel), "rb").read())
    monkeypatch.setattr(first_run, "ROOT", str(copy))
    first_run.mark_ready(1.0)
    assert first_run.is_ready()
    with open(copy / first_run.COMPILED_SOURCES[0], "a") as f:
        f.write("\n# changed\n")
    assert not first_run.is_ready()


@pytest.mark.parametrize("environ, tier", [({"NUMBA_DISABLE_JIT": "1"}, first_run.USER),
                                           ({"SWAPENGINE_COMPILE": "wait"}, first_run.COMPILED)])
def test_the_user_and_the_wait_mode_choose_for_themselves(cache, environ, tier):
    config.DISABLE_JIT = False
    given = dict(environ)
    assert first_run.choose_tier(given, say=pytest.fail) == tier
    assert not config.DISABLE_JIT and given == environ        # neither is switched to interpreted here


def test_an_unknown_mode_is_one_warning_then_auto(cache):
    said = []
    assert first_run.choose_tier({"SWAPENGINE_COMPILE": "later"}, said.append) == first_run.INTERPRETED
    assert said == ["warning: SWAPENGINE_COMPILE=later is not one of auto, wait; using auto"]


def test_a_cache_folder_that_cannot_be_made_compiles_in_the_run(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "file" / "cache"))
    monkeypatch.setattr(config, "DISABLE_JIT", False)
    monkeypatch.setattr(first_run, "_tier", None)
    assert first_run.choose_tier({}, say=pytest.fail) == first_run.COMPILED


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_one_compile_at_a_time_and_a_dead_one_is_taken_over(cache):
    assert first_run.take_lock() and first_run.compile_under_way() == os.getpid()
    assert not first_run.take_lock()                    # held by a live process (this one)
    first_run.release_lock()
    assert first_run.compile_under_way() is None
    (cache / "compiling.pid").write_text(str(dead_pid()))
    assert first_run.compile_under_way() is None and first_run.take_lock()
    first_run.release_lock()


def test_settle_starts_the_background_compile_once(cache, monkeypatch):
    started, said = [], []
    monkeypatch.setattr(first_run, "_tier", first_run.INTERPRETED)
    monkeypatch.setattr(first_run, "start_background_compile", lambda: started.append(1) or 4242)
    first_run.settle(77, said.append)
    assert started == [1] and "pid 4242" in said[0] and "plans interpreted" in said[0]
    (cache / "compiling.pid").write_text(str(os.getpid()))       # one under way: joined, not doubled
    first_run.settle(77, said.append)
    assert started == [1] and f"pid {os.getpid()}" in said[1]


def test_settle_does_nothing_for_a_compiled_run(cache, monkeypatch):
    monkeypatch.setattr(first_run, "_tier", first_run.COMPILED)
    first_run.settle(10**6, pytest.fail)


def test_a_large_model_waits_for_the_compile_instead(cache, monkeypatch):
    monkeypatch.setattr(first_run, "_tier", first_run.INTERPRETED)
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    execs = []

    def execve(path, argv, env):
        execs.append((path, argv, env))
        raise SystemExit(0)

    monkeypatch.setattr(os, "execve", execve)
    said = []
    with pytest.raises(SystemExit):
        first_run.settle(first_run.LARGEST_INTERPRETED + 1, said.append)
    (path, argv, env), = execs
    assert path == sys.executable and argv[1:] == sys.orig_argv[1:]
    assert env["SWAPENGINE_COMPILE"] == "wait" and "NUMBA_DISABLE_JIT" not in env
    assert "compiling first" in said[0]


def test_waiting_ends_when_the_compile_does(cache):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    (cache / "compiling.pid").write_text(str(sleeper.pid))
    said = []
    first_run.wait_for_compile(said.append)
    sleeper.wait()
    assert said and said[0].startswith("waiting for the planner's compile")


def test_a_first_run_plans_interpreted_and_compiles_nothing_itself(cache):
    """The command end to end from a cold cache, with a compile under way (this test's own pid
    holds the lock, so none is started): it plans without numba's compiler, leaving the cache
    empty, and says so."""
    (cache / "compiling.pid").write_text(str(os.getpid()))
    env = {k: v for k, v in os.environ.items() if k not in ("SWAPENGINE_COMPILE", "NUMBA_DISABLE_JIT")}
    out = subprocess.run([sys.executable, "-m", "engine.train", "--simulate-only", "--policy", "swapadvisor",
                          "--search-seconds", "0", "--out", str(cache / "run")], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    assert f"first run: the planner compiles in the background for later runs (pid {os.getpid()}" \
        in out.stderr and "plan   swapadvisor" in out.stdout
    assert sorted(os.listdir(cache)) == ["compiling.pid", "run"]       # numba wrote nothing: nothing compiled


def test_warmup_compiles_marks_and_then_has_nothing_to_do(cache, capsys):
    assert warmup.main([]) == 0
    assert first_run.is_ready() and first_run.compile_under_way() is None
    assert "compiled in" in capsys.readouterr().err
    assert warmup.main([]) == 0 and "compiled already" in capsys.readouterr().err


def test_a_background_warmup_leaves_a_compile_under_way_alone(cache):
    (cache / "compiling.pid").write_text(str(os.getpid()))
    assert warmup.main(["--background"]) == 0 and not first_run.is_ready()


def test_a_python_without_the_engines_dependencies_is_told_so_in_one_line():
    """A clone run by a Python the engine was not installed in (numba missing: its import and its
    package metadata) gets one line naming what is missing and what to do, not a traceback."""
    blocked = ("import importlib.metadata as m, runpy, sys\n"
               "class NoNumba:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] == 'numba':\n"
               "            raise ModuleNotFoundError(f\"No module named '{name}'\", name=name)\n"
               "sys.meta_path.insert(0, NoNumba())\n"
               "version = m.version\n"
               "def no_numba(name):\n"
               "    if name == 'numba':\n"
               "        raise m.PackageNotFoundError(name)\n"
               "    return version(name)\n"
               "m.version = no_numba\n"
               "sys.argv = ['engine.train', '--help']\n"
               "runpy.run_module('engine.train', run_name='__main__', alter_sys=True)\n")
    done = subprocess.run([sys.executable, "-c", blocked], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == (f"engine.train: numba is not installed in this Python ({sys.executable}): "
                                   "install the engine with its dependencies (pip install .), or run the Python "
                                   "it is installed in")
