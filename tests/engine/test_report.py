import os

from engine.report import PolicyRow, policy_table, rows_to_json
from engine.timing_trust import HostLoad, load_average, timing_warnings


def rows(real=True):
    return [PolicyRow("ideal", 0.10, 0.11 if real else None, 8, 0, 0, 40 * 2**20, 100, unlimited=True),
            PolicyRow("swapadvisor", 0.12, 0.13 if real else None, 8, 3 * 2**20, 2**20, 12 * 2**20, 180)]


def test_table_has_fraction_of_ideal_and_says_what_was_measured():
    text = policy_table(rows())
    assert "real s/iter" in text and "measured" in text
    line = [ln for ln in text.splitlines() if ln.startswith("swapadvisor")][0]
    assert "0.85" in line and "3.0" in line and "12.0" in line      # 0.11/0.13; MiB moved; MiB used
    sim = policy_table(rows(real=False))
    assert "real s/iter" not in sim and "simulated" in sim


def test_json_rows():
    j = rows_to_json(rows())
    assert j[1]["samples_per_s"] == 8 / 0.13 and j[0]["policy"] == "ideal"


def test_table_and_json_have_x_bound_when_a_bound_is_known():
    bounded = [PolicyRow("ideal", 0.10, None, 8, 0, 0, 40 * 2**20, 100, True, 0.10),
               PolicyRow("swapadvisor", 0.12, None, 8, 0, 0, 12 * 2**20, 180, False, 0.08, {"compute_idle_s": 0.04}),
               PolicyRow("other", 0.2, None, 8, 0, 0, 12 * 2**20, 180)]
    text = policy_table(bounded)
    assert "x bound" in text.splitlines()[0]
    line = [ln for ln in text.splitlines() if ln.startswith("swapadvisor")][0]
    assert "1.50" in line                                            # 0.12 / 0.08
    assert [ln for ln in text.splitlines() if ln.startswith("other")][0].split()[4] == "-"
    j = rows_to_json(bounded)
    assert j[1]["x_bound"] == 0.12 / 0.08 and j[1]["bound_s"] == 0.08 and j[1]["stalls"]["compute_idle_s"] == 0.04
    assert j[2]["x_bound"] is None and j[2]["stalls"] is None


def test_spread_is_the_interquartile_range_over_the_median():
    from engine.timing_trust import spread
    assert spread([1.0, 1.0, 1.0, 1.0, 9.0]) == 0.0          # one slow iteration does not move it
    assert abs(spread([1.0, 2.0, 3.0, 4.0, 5.0]) - 2.0 / 3.0) < 1e-12
    assert spread([1.0]) is None


def test_timing_warnings_say_why_the_measured_column_may_lie():
    """A busy machine, a wide spread and a swapping plan faster than ideal each get a line (issue 39:
    a loaded host printed swapping 1.9-2.7x faster than ideal with no warning)."""
    calm = rows()
    assert timing_warnings(calm, HostLoad(0.5, 0.4, cores=2)) == []
    assert timing_warnings(rows(real=False), HostLoad(9.0, 9.0, cores=2)) == []      # nothing measured
    busy = timing_warnings(calm, HostLoad(1.0, 3.2, cores=2))
    assert len(busy) == 1 and "busy" in busy[0] and "load average 1.0/3.2 before/after timing on 2 usable cores" in busy[0]
    noisy = rows()
    noisy[1].real_spread = 0.6
    assert any("swapadvisor's timed iterations spread 60% of their median" in w
               for w in timing_warnings(noisy, HostLoad(0.1, 0.1, 2)))
    faster = rows()
    faster[1].real_s = 0.05
    (line,) = timing_warnings(faster, HostLoad(0.1, 0.1, 2))
    assert line.startswith("swapadvisor measured faster than ideal (0.0500 against 0.1100 s/iter) though it moves "
                           "4.0 MiB and ideal none")


def test_a_load_before_timing_counts_as_busy_and_cores_are_the_ones_this_process_may_use(monkeypatch):
    """The one-minute average lags, so a burst seen before timing alone is a busy machine; the
    cores compared with are the affinity mask's (a 2-core container on a 64-core host is busy
    at load 3), and a load equal to them is not yet above them."""
    assert HostLoad(5.0, 0.3, cores=4).busy and HostLoad(None, 5.0, cores=4).busy
    assert not HostLoad(4.0, 4.0, cores=4).busy and not HostLoad(None, None, cores=1).busy
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 1.0, 1.0), raising=False)
    load = HostLoad.now(before=load_average())
    assert (load.before, load.after, load.cores, load.busy) == (3.0, 3.0, 2, True)


def test_each_measured_plan_prints_its_spread_and_the_json_has_its_fastest_and_slowest_iteration():
    measured = rows()
    measured[0].real_spread, measured[1].real_spread = 0.04, 0.31
    measured[1].real_min_s, measured[1].real_max_s = 0.12, 0.2
    text = policy_table(measured)
    assert text.splitlines()[0].split()[:6] == ["policy", "sim", "s/iter", "real", "s/iter", "spread"]
    assert [ln.split()[3] for ln in text.splitlines()[2:4]] == ["4%", "31%"]
    assert "spread: the timed iterations' interquartile range over their median" in text
    j = rows_to_json(measured)[1]
    assert (j["real_spread"], j["real_min_s"], j["real_max_s"]) == (0.31, 0.12, 0.2)
    assert "spread" not in policy_table(rows(real=False)).splitlines()[0]


def test_byte_columns_take_the_binary_unit_their_largest_figure_fits():
    """Paper scale printed 'H2D MiB 89456.1' (issue 39); the rest of the report says GiB."""
    big = [PolicyRow("ideal", 1.0, None, 8, 0, 0, 106478 * 2**20, 10, unlimited=True),
           PolicyRow("swapadvisor", 2.0, None, 8, int(89456.1 * 2**20), 512 * 2**20, 16 * 2**30, 10)]
    text = policy_table(big)
    assert text.splitlines()[0].split()[-6:] == ["H2D", "GiB", "D2H", "MiB", "device", "GiB"]
    assert text.splitlines()[3].split()[-3:] == ["87.4", "512.0", "16.0"]
    assert text.splitlines()[2].split()[-3:] == ["0.0", "0.0", "104.0"]   # a column's unit is its largest's


def test_an_unlimited_plan_above_the_unlimited_peak_says_why_under_the_table():
    """gpt2-xl: ideal's 106,478 MiB against a 95.6 GiB peak with no word of why (issue 39)."""
    r = rows()                                        # ideal's arena: 40 MiB
    assert "exceeds" not in policy_table(r) and "exceeds" not in policy_table(r, peak_bytes=40 * 2**20)
    note = [ln for ln in policy_table(r, peak_bytes=30 * 2**20).splitlines() if "exceeds" in ln]
    assert note == ["ideal's device memory 40.0 MiB exceeds the unlimited-memory peak 30.0 MiB: each tensor size "
                    "has its own objects for its own peak count, and sizes peak at different steps (operator "
                    "scratch adds the rest)"]


def test_a_plan_that_recomputes_gets_one_line_under_the_table_and_others_print_as_before():
    from engine.report import recompute_note
    stalls = {"recomputes": 3, "recompute_s": 0.0012, "recomputed_bytes": 3 * 2**20}
    plain = rows()
    recomputing = rows()
    recomputing[1].stalls = stalls
    recomputing[0].stalls = {"recomputes": 0, "recompute_s": 0.0, "recomputed_bytes": 0}
    text = policy_table(recomputing)
    assert text.splitlines()[-1] == "swapadvisor: 3 recomputations, 0.0012 s of compute, 3.0 MiB not swapped out and back"
    assert text == policy_table(plain) + "\n" + text.splitlines()[-1]
    assert recompute_note(plain) == "" and recompute_note(recomputing[:1]) == ""


def test_x_bound_is_against_the_recompute_bound_and_the_swap_only_one_stands_beside_it():
    row = PolicyRow("swapadvisor", 0.12, None, 8, 0, 0, 12 * 2**20, 180, False, 0.06, swap_bound_s=0.08)
    text = policy_table([row])
    assert "x bound    x swap bound" in text.splitlines()[0] and "recomputing allowed" in text
    assert text.splitlines()[2].split()[4:6] == ["2.00", "1.50"]       # 0.12 / 0.06, then 0.12 / 0.08
    j = rows_to_json([row])[0]
    assert (j["x_bound"], j["swap_bound_s"], j["x_swap_bound"]) == (0.12 / 0.06, 0.08, 0.12 / 0.08)
