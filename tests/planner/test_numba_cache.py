"""One numba cache per user whichever copy of the code is imported (planner/numba_cache.py)."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from planner import numba_cache

MODULE = textwrap.dedent('''
    import numba

    @numba.njit(cache=True)
    def twice(x):
        return 2 * x
''')

RUN = textwrap.dedent('''
    import sys
    sys.path.insert(0, sys.argv[1])
    from planner import numba_cache
    numba_cache.ROOT = sys.argv[1]                     # this copy's root
    assert numba_cache.register()
    from planner.cache_probe import twice
    assert twice(21) == 42
    print(twice.stats.cache_hits and "hit" or "miss")
''')


@pytest.fixture
def two_copies(tmp_path):
    """Two copies of a package folder, each with a module of one cached function."""
    for copy in ("a", "b"):
        package = tmp_path / copy / "planner"
        shutil.copytree(os.path.dirname(numba_cache.__file__), package,
                        ignore=shutil.ignore_patterns("__pycache__", "policies", "smartswap"))
        (package / "__init__.py").write_text("")      # the probe needs nothing else of the planner
        (package / "cache_probe.py").write_text(MODULE)
    return tmp_path


def run(root, cache_home):
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", RUN, str(root)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_second_copy_of_the_code_loads_the_first_copy_s_compiled_code(two_copies):
    home = two_copies / "cache"
    assert run(two_copies / "a", home) == "miss"           # compiled, then cached under the user's folder
    assert os.listdir(home / "swapengine" / "numba" / "planner")
    assert run(two_copies / "b", home) == "hit"            # the other copy: loaded, not compiled
    assert not (two_copies / "b" / "planner" / "__pycache__").exists() or not any(
        p.endswith(".nbi") for p in os.listdir(two_copies / "b" / "planner" / "__pycache__"))


def test_a_changed_copy_compiles_again(two_copies):
    home = two_copies / "cache"
    assert run(two_copies / "a", home) == "miss"
    (two_copies / "b" / "planner" / "cache_probe.py").write_text(MODULE.replace("2 * x", "x + x"))
    assert run(two_copies / "b", home) == "miss"           # numba's stamp is the source's content


def test_only_the_project_s_files_are_filed_there():
    assert numba_cache._package_dir(os.path.join(numba_cache.ROOT, "planner", "swap_scan.py")) == "planner"
    assert numba_cache._package_dir(os.path.join(numba_cache.ROOT, "ga", "locality.py")) == "ga"
    assert numba_cache._package_dir(os.path.join(numba_cache.ROOT, "numba", "core", "x.py")) is None
    assert numba_cache._package_dir("/elsewhere/planner/x.py") is None
