"""bench.smartswap_fig5's search and tables, on a stand-in for the planner (the sweep itself runs
in bench.papers --quick): the largest value found is the true one on the axis's grid, and the
verdicts read the multiples and the times."""
from bench import smartswap_fig5 as f

BASE = f.Setting(batch=4, layers=5, seq=4096, hidden=4096)
LIMIT = {"batch": 13, "layers": 9, "seq": 10000, "hidden": 5100}       # fits at and below these


class Standin(f.Sweep):
    def __init__(self, scale: dict):
        super().__init__(device=0, vocab=0, dtype="float16", profile=None)
        self.scale, self.calls = scale, 0

    def _plan(self, s, method):
        self.calls += 1
        fits = all(getattr(s, a) <= LIMIT[a] * self.scale[method] for a in f.AXES)
        return (1.9 if method == "full_recompute" else 1.6) * s.batch * s.layers if fits else None


def test_the_largest_value_is_the_last_grid_point_that_fits():
    sw = Standin({m: 1.0 for m in f.METHODS})
    assert sw.largest(BASE, "batch", "smartswap") == 13
    assert sw.largest(BASE, "layers", "smartswap") == 9
    assert sw.largest(BASE, "seq", "smartswap") == 9984          # 39 * 256
    assert sw.largest(BASE, "hidden", "smartswap") == 4992        # 39 * 128, at or below 5100
    calls = sw.calls
    sw.cap = 2
    assert sw.largest(BASE, "batch", "smartswap") == 8              # capped at twice the base
    sw.cap = 8
    sw.largest(BASE, "batch", "smartswap")
    assert sw.calls == calls                                      # every plan made once


def test_verdicts_compare_the_multiples_and_the_times():
    sw = Standin({"pytorch": 0.35, "full_recompute": 0.9, "smartswap": 1.0, "swapadvisor": 1.0})
    largest = {(a, m): sw.largest(BASE, a, m) for a in f.AXES for m in f.METHODS}
    assert largest[("batch", "pytorch")] is None                  # 0.35 * 13 < 4: not even the base
    fits, times, verdicts = f.tables(sw, BASE, largest)
    assert "x" in fits.splitlines()[2].split()
    assert verdicts[0].startswith("'SmartSwap trains 4.0x the batch of native PyTorch': does not hold")
    assert "faster than full recomputation': holds (ours +18." in verdicts[-1]        # 1.9 / 1.6
