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
