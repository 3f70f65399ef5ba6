"""The committed simulated tables match the code: one cheap cell of each, recomputed
(bench.committed_tables). A plan that changes on purpose means rerunning that bench with --save."""
import pytest

from bench import committed_tables
from bench.committed_tables import CHECKS, Check, github_cell, newest, plain_cell, section


@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_committed_cell_matches_the_code(check):
    path, committed, now = check.run()
    assert committed == now, (f"{path} is stale: it has {committed}, the code makes {now}; rerun its bench "
                              "with --save and commit the file")


def test_a_changed_cell_is_seen(tmp_path, monkeypatch):
    monkeypatch.setattr(committed_tables, "RESULTS", str(tmp_path))
    table = ("| images/s          |   64 |   256 |\n|---|---|---|\n| ours: swapadvisor |  419 |   382 |\n")
    (tmp_path / "demo_2026-01-01.txt").write_text(table.replace("382", "1"))
    (tmp_path / "demo_2026-02-01.txt").write_text(table)                  # the newest is read
    (tmp_path / "demo_search60s_2026-03-01.txt").write_text("other setting")
    check = Check("demo", "demo", lambda text: github_cell(text, "ours: swapadvisor", "256"), lambda: "424")
    path, committed, now = check.run()
    assert path.endswith("demo_2026-02-01.txt") and (committed, now) == ("382", "424")
    assert newest("demo").endswith("demo_2026-02-01.txt")


def test_plain_tables_are_cut_at_their_dashes():
    text = ("model        plan                 seconds\n"
            "-----------  -------------------  ---------\n"
            "Inception-4  odswap               7.782\n"
            "Inception-4  odswap, MXNet order  9.1\n")
    assert plain_cell(text, lambda c: c[:2] == ["Inception-4", "odswap, MXNet order"], "seconds") == "9.1"
    with pytest.raises(KeyError):
        plain_cell(text, lambda c: c[0] == "NasNet-25", "seconds")


def test_a_papers_section_is_read_alone():
    text = ("# header\n## SwapAdvisor Figure 6: largest batch\nx 1\n"
            "## SwapAdvisor Figure 6 at every batch it plots\nx 2\n## Paper 001 Table 1\nx 3\n")
    assert section(text, "SwapAdvisor Figure 6 at every batch").endswith("x 2\n")
    assert section(text, "SwapAdvisor Figure 6").endswith("x 1\n")          # the first heading that starts so
    with pytest.raises(KeyError):
        section(text, "SmartSwap")
