from engine.report import PolicyRow, policy_table, rows_to_json


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
    from engine.report import spread
    assert spread([1.0, 1.0, 1.0, 1.0, 9.0]) == 0.0          # one slow iteration does not move it
    assert abs(spread([1.0, 2.0, 3.0, 4.0, 5.0]) - 2.0 / 3.0) < 1e-12
    assert spread([1.0]) is None


def test_timing_warnings_say_why_the_measured_column_may_lie():
    """A busy machine, a wide spread and a swapping plan faster than ideal each get a line (issue 39:
    a loaded host printed swapping 1.9-2.7x faster than ideal with no warning)."""
    from engine.report import timing_warnings
    calm = rows()
    assert timing_warnings(calm, load=0.5, cores=2) == []
    assert timing_warnings(rows(real=False), load=9.0, cores=2) == []      # nothing measured
    busy = timing_warnings(calm, load=3.2, cores=2)
    assert len(busy) == 1 and "busy" in busy[0] and "3.2 on 2 cores" in busy[0]
    noisy = rows()
    noisy[1].real_spread = 0.6
    assert any("swapadvisor's timed iterations spread 60% of their median" in w
               for w in timing_warnings(noisy, 0.1, 2))
    faster = rows()
    faster[1].real_s = 0.05
    (line,) = timing_warnings(faster, 0.1, 2)
    assert line.startswith("swapadvisor measured faster than ideal (0.0500 against 0.1100 s/iter)")
    assert "interquartile spread up to 60%" in policy_table(noisy)


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
