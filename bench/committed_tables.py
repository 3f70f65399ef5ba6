"""Whether the committed simulated tables still match the code: one cheap cell of each, recomputed.

A simulated table is deterministic (no search, or a seeded search with a generation cap: no
wall clock in its figures), so a committed file that no longer matches what its bench prints
is stale: the planner changed and the file was not regenerated (as the program digests of
``bench.program_hashes`` say for Programs). Each check names the bench's results files, reads
one cell of the newest one and recomputes it the way the bench does (the bench's own function
where it has one), small enough for a test: a few seconds each.

Not checked: tables whose figures depend on a timed search or on measured time (ga_search,
table2, smartswap, sim_vs_measured, cli_stability, the GPU files), and deterministic ones with no
cell cheap enough for a test (fragmentation: a window search per batch, 50-140 s; search_quality:
enumerated optima; serving; Figure 9's generation-capped searches in the papers file, 70-90 CPU s
each). The papers file's other sections are checked by one cell each (the file is one run of
``bench.papers``: a section regenerated alone would leave the others behind).

    python -m bench.committed_tables          # every check: committed, now, ok or STALE
"""
from __future__ import annotations

import glob
import os
import re
import sys
from dataclasses import dataclass
from typing import Callable

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def newest(prefix: str) -> str:
    """The newest committed ``bench/results/<prefix>_<date>.txt`` (dated names sort by date; a
    suffix after the date, such as ``_search120s``, names another setting and is not one)."""
    dated = [p for p in glob.glob(os.path.join(RESULTS, f"{prefix}_*.txt"))
             if re.fullmatch(rf"{re.escape(prefix)}_\d{{4}}-\d{{2}}-\d{{2}}\.txt", os.path.basename(p))]
    if not dated:
        raise FileNotFoundError(f"no committed bench/results/{prefix}_<date>.txt")
    return max(dated)


def github_cell(text: str, row: str, column: str) -> str:
    """The cell of a ``tablefmt="github"`` table: the row whose first cell is ``row``, under ``column``."""
    header = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and column in cells:
            header = cells
        elif header and line.startswith("|") and cells[0] == row:
            return cells[header.index(column)]
    raise KeyError(f"no row '{row}' under a column '{column}'")


def plain_cell(text: str, match: Callable[[list[str]], bool], column: str) -> str:
    """The cell of a ``tabulate`` plain table (a header, a line of dashes, rows): the first row that
    ``match``es (its cells) under ``column``; columns are cut where the dashes are."""
    lines = text.splitlines()
    for i in range(1, len(lines)):
        if not re.fullmatch(r"[- ]+", lines[i]) or "-" not in lines[i]:
            continue
        spans = [m.span() for m in re.finditer(r"-+", lines[i])]

        def cut(line: str) -> list[str]:
            return [line[a:b if k + 1 < len(spans) else None].strip() for k, (a, b) in enumerate(spans)]
        header = cut(lines[i - 1])
        if column not in header:
            continue
        for line in lines[i + 1:]:
            if not line.strip() or re.fullmatch(r"[- ]+", line):
                break
            cells = cut(line)
            if match(cells):
                return cells[header.index(column)]
    raise KeyError(f"no row matched under a column '{column}'")


def section(text: str, title: str) -> str:
    """The section of a ``bench.papers`` file whose ``## `` heading starts with ``title``, up to the next."""
    parts = re.split(r"^## ", text, flags=re.M)
    for part in parts[1:]:
        if part.startswith(title):
            return part
    raise KeyError(f"no section '{title}'")


@dataclass(frozen=True)
class Check:
    """One cell of one committed table: ``committed(text)`` reads it, ``recompute()`` makes it."""
    name: str
    prefix: str
    committed: Callable[[str], str]
    recompute: Callable[[], str]

    def run(self) -> tuple[str, str, str]:
        """(file, committed cell, recomputed cell)."""
        path = newest(self.prefix)
        with open(path) as f:
            return path, self.committed(f.read()), self.recompute()


# ------------------------------------------------------------------ the cells, as each bench makes them
def _table1_001_swapadvisor(batch: int) -> str:
    import zoo
    from bench import table1_001
    from engine.profile import analytic_profile
    from planner.facts import GraphFacts

    profile = analytic_profile("v100-nvlink")
    g = zoo.build("wresnet-50-1", batch=batch, size=224)
    seconds, _ = table1_001.run_one("swapadvisor", g, GraphFacts(g), profile, profile.node_seconds(g), 40 << 20)
    return "x" if seconds is None else f"{batch / seconds:.0f}"


def _lms_vs_swapadvisor(column: str, batch: int) -> str:
    from bench import lms_vs_swapadvisor

    ips, _ = lms_vs_swapadvisor.cell(column, batch)
    return "x" if ips is None else f"{ips:.2f}"


def _plan_quality_seconds(model: str, plan: str) -> str:
    from bench import plan_quality

    return plan_quality.plan_seconds(model, plan)


def _imported_vs_zoo_resnet() -> str:
    import zoo
    from bench import imported_vs_zoo
    from engine.autodiff import SGD

    g = zoo.build("wresnet-50-1", batch=256, size=224, optimizer=SGD())
    return imported_vs_zoo.row("wresnet-50-1 (zoo, sgd)", g, 16 * 2**30, 0.0, lambda line: None)[4]


def _papers_fig6_unsearched(model: str, batch: int) -> str:
    from bench.papers import frac
    from bench.plan_quality import plan_time

    device = 16 * 2**30
    return frac(plan_time(model, "ideal", device, batch) / plan_time(model, "swapadvisor", device, batch))


def _papers_figure_001(model: str, batch: int, label: str) -> str:
    """One images/s cell of 001's figures as bench.figures_001 makes it: the window on best fit,
    planned through it ("schedule") or blind to it ("blind schedule")."""
    import zoo
    from bench import figures_001
    from engine.profile import analytic_profile
    from planner.facts import GraphFacts

    profile = analytic_profile(figures_001.PROFILE)
    g = zoo.build(model, batch=batch, size=224)
    facts, secs, device = GraphFacts(g), profile.node_seconds(g), figures_001.DEVICE_BYTES
    if label == "schedule":
        run = figures_001.capped(g, facts, profile, secs, device, "bestfit", {})
    else:
        blind_bestfit = [c for c in figures_001.BLIND if c[0] == label]
        run = figures_001.blind(g, facts, profile, secs, device, blind_bestfit)[label]
    return figures_001.ips_cell(run, batch)


def _recompute_table(model: str, row: str) -> str:
    from bench import recompute_table

    wanted = [r for r in recompute_table.ROWS if r[0] == row]
    return recompute_table.model_rows(model, 16 * 2**30, 0.0, lambda line: None, wanted)[0][2]


def _smartswap_fig5_base(method: str) -> str:
    from bench import smartswap_fig5 as f
    from engine.profile import analytic_profile
    sw = f.Sweep(64 * f.GIB, 32000, "float16", analytic_profile("910b"))
    return f"{sw.run(f.PAPER_BASE, method):.3f}"


def _smartswap_fig6a(layers: int, query_us: float) -> str:
    from bench import smartswap_fig6a as f
    from engine.profile import analytic_profile
    b = f.PAPER_BASE
    p = f.point(f.Setting(b.batch, layers, b.seq, b.hidden), 64 * f.GIB, 32000, analytic_profile("910b"),
                f.DISPATCH_US * 1e-6, (query_us * 1e-6,))
    return f"{p.per_block_s[query_us * 1e-6]:.3f}"


CHECKS = (
    Check("table1_001: swapadvisor, batch 256", "table1_001",
          lambda text: github_cell(text, "ours: swapadvisor", "256"), lambda: _table1_001_swapadvisor(256)),
    Check("lms_vs_swapadvisor: ideal, batch 16", "lms_vs_swapadvisor",
          lambda text: github_cell(text, "ours: ideal", "B=16"), lambda: _lms_vs_swapadvisor("ideal", 16)),
    Check("lms_vs_swapadvisor: odswap, batch 16", "lms_vs_swapadvisor",
          lambda text: github_cell(text, "ours: odswap", "B=16"), lambda: _lms_vs_swapadvisor("odswap", 16)),
    Check("lms_vs_swapadvisor: swapadvisor, batch 16", "lms_vs_swapadvisor",
          lambda text: github_cell(text, "ours: swapadvisor", "B=16"), lambda: _lms_vs_swapadvisor("swapadvisor", 16)),
    Check("plan_quality: Inception-4 odswap seconds", "plan_quality",
          lambda text: plain_cell(text, lambda c: c[:2] == ["Inception-4", "odswap"], "seconds"),
          lambda: _plan_quality_seconds("inception-4", "odswap")),
    Check("imported_vs_zoo: wresnet-50-1 (zoo) swapadvisor seconds", "imported_vs_zoo",
          lambda text: plain_cell(text, lambda c: c[0] == "wresnet-50-1 (zoo, sgd)", "swapadvisor s"),
          _imported_vs_zoo_resnet),
    Check("smartswap_fig5: base setting, smartswap seconds", "smartswap_fig5",
          lambda text: plain_cell(text, lambda c: c[:2] == ["batch", "4"], "smartswap s"),
          lambda: _smartswap_fig5_base("smartswap")),
    Check("smartswap_fig5: base setting, full_recompute seconds", "smartswap_fig5",
          lambda text: plain_cell(text, lambda c: c[:2] == ["batch", "4"], "full_recompute s"),
          lambda: _smartswap_fig5_base("full_recompute")),
    Check("smartswap_fig6a: 24 layers, recordStream at 20 us a query", "smartswap_fig6a",
          lambda text: plain_cell(text, lambda c: c[0] == "24", "recordStream 20 us/query s"),
          lambda: _smartswap_fig6a(24, 20.0)),
    Check("recompute_table: inception-4 swapadvisor seconds", "recompute_table",
          lambda text: plain_cell(text, lambda c: c[:2] == ["inception-4", "swapadvisor"], "sim s"),
          lambda: _recompute_table("inception-4", "swapadvisor")),
    # bench.papers' own cells (the sections that no other bench's file holds)
    Check("papers: Figure 7, TFLMS as published, batch 16", "papers",
          lambda text: plain_cell(section(text, "SwapAdvisor Figure 7"), lambda c: c[0] == "ours: tflms", "B=16"),
          lambda: _lms_vs_swapadvisor("tflms", 16)),
    Check("papers: Figure 6 at batch 16, Inception-4 unsearched", "papers",
          lambda text: plain_cell(section(text, "SwapAdvisor Figure 6 at every batch"),
                                  lambda c: c[:2] == ["inception-4", "16"], "SA unsearched ours"),
          lambda: _papers_fig6_unsearched("inception-4", 16)),
    Check("papers: 001 Table 1 blind, best fit at batch 512", "papers",
          lambda text: plain_cell(section(text, "Paper 001 Table 1 in 001's setting"),
                                  lambda c: c[0] == "512", "best fit images/s"),
          lambda: _papers_figure_001("wresnet-50-1", 512, "blind schedule")),
    Check("papers: 001 Figure 4, DenseNet schedule at batch 192", "papers",
          lambda text: plain_cell(section(text, "Paper 001 Figures 4 and 5"),
                                  lambda c: c[0] == "ours: schedule images/s", "192"),
          lambda: _papers_figure_001("densenet-121", 192, "schedule")),
)


def main(argv=None) -> int:
    stale = 0
    for check in CHECKS:
        path, committed, now = check.run()
        ok = committed == now
        stale += not ok
        print(f"{'ok   ' if ok else 'STALE'} {check.name}: {os.path.basename(path)} has {committed}, the code "
              f"makes {now}", flush=True)
    if stale:
        print(f"{stale} stale: rerun those benches with --save and commit their files")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
