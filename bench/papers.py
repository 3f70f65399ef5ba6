"""The three papers' claims, regenerated from one command: each figure's cells beside the paper's,
the setting of every cell, and whether the claim holds here (and why not where it does not).

SwapAdvisor (ASPLOS'20, "000"): Figure 6 (fraction of ideal at the largest batch; ODSwap on
our insertion order and on MXNet's default order, the paper's), Figure 7 (WResNet-152-4 against
TFLMS), Figure 10 (search with the schedule fixed), Figure 6 at every batch it plots. Paper 001
(schedule window + virtual addressing): its Table 1 (ResNet-50, growing batch), the same with the
schedule blind to the allocator (001's setting), Figures 4 and 5 on DenseNet, Pix2PixHD and DeepLabv3+
(bench.figures_001). The cells come from the benches that print
the full tables (bench.plan_quality, bench.lms_vs_swapadvisor, bench.ga_search's search,
bench.table1_001), called here, not copied; every time is simulated (analytic profiles), so
every figure is deterministic: no search is timed by the clock (the Figure 10 searches stop at
a generation cap, seeded). SmartSwap (004) is measured on an Ascend NPU with PyTorch: its Figures 5
and 6a are simulated here on an analytic 910B profile (bench.smartswap_fig5, bench.smartswap_fig6a);
its measured claims have benches of their own (bench.smartswap, bench.smartswap_long), listed at the
end with their committed files, as are the other figures this command does not regenerate.

    python -m bench.papers [--quick] [--save] [--png DIR]

--quick: small models, a budget scaled to them, Figure 10's search 2 generations of 4: the
pipeline in under two minutes (the tests run it); its verdicts are about those small settings.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

from tabulate import tabulate

from bench.results_file import Transcript, planning_machine_line, save_results

GIB = 2**30


@dataclass
class Section:
    title: str
    source: str                       # where the paper says it (section, figure or table)
    setting: str                      # what every cell of ours was made with
    headers: list[str]
    rows: list[list] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"## {self.title}", f"paper: {self.source}", f"ours: {self.setting}", "",
                 tabulate(self.rows, headers=self.headers, disable_numparse=True), ""]
        lines += [f"- {v}" for v in self.verdicts]
        return "\n".join(lines) + "\n"


def frac(x: float | None) -> str:
    return "x" if x is None else f"{x:.3f}"


# ------------------------------------------------------------------ SwapAdvisor Figure 6
# Section 6.2, Figure 6 and its text: throughput as a fraction of ideal at each model's largest batch.
FIG6_PAPER = {   # model: (SwapAdvisor, ODSwap), None where the text gives no number
    "wresnet-152-10": (0.95, 0.80), "inception-4": (None, None), "nasnet-25": (0.53, None),
    "rnn-8-8k": (0.75, 0.01), "brnn-4-8k": (0.75, 0.01)}
FIG6_TEXT = {"rnn-8-8k": ("0.70-0.80", "<0.01"), "brnn-4-8k": ("0.70-0.80", "<0.01"),
             "wresnet-152-10": ("0.95", "0.80"), "nasnet-25": ("0.53", "-"), "inception-4": ("-", "-")}


def fig6_fractions(model: str, batch: int, device: int) -> tuple[float, dict]:
    """(ideal seconds, {plan: throughput over ideal's, None where that order does not plan}) for
    Figure 6's four unsearched plans (bench.plan_quality's rows)."""
    from bench.plan_quality import plan_time
    from engine.errors import EngineError

    ideal = plan_time(model, "ideal", device, batch)
    cells = {}
    for plan in ("odswap", "odswap, MXNet order", "swapadvisor", "swapadvisor, MXNet order"):
        try:
            cells[plan] = ideal / plan_time(model, plan, device, batch)
        except EngineError:             # a budget too small for that order: the cell says x
            cells[plan] = None
    return ideal, cells


def figure6(quick: bool) -> Section:
    from zoo.stats import PAPER

    batches = {p.model: p.batch for p in PAPER}
    if quick:     # small RNNs, a budget they exceed as the paper's exceed 16 GiB
        models, device, batches = ["rnn-4-2k", "brnn-2-2k"], 2 * GIB, {"rnn-4-2k": 64, "brnn-2-2k": 32}
    else:
        models, device = ["rnn-8-8k", "brnn-4-8k", "wresnet-152-10", "inception-4", "nasnet-25"], 16 * GIB
    s = Section("SwapAdvisor Figure 6: throughput as a fraction of ideal, largest batch",
                "SwapAdvisor (ASPLOS'20) Section 6.2, Figure 6 and its text (bars not in our copy)",
                f"analytic V100 profile (PCIe 12 GB/s one way, 20 both), {device / GIB:g} GiB, batch as listed, "
                "no search (swapadvisor unsearched: the default order and the simple allocation; the paper's "
                "bars are after a 30-minute search); order: ours = the zoo's insertion order, MXNet = "
                "engine.schedules.mxnet_order",
                ["model", "batch", "ideal s", "odswap ours", "odswap MXNet", "paper odswap",
                 "SA unsearched ours", "SA unsearched MXNet", "paper SA (searched)"])
    for m in models:
        b = batches[m]
        ideal, cells = fig6_fractions(m, b, device)
        sa_text, od_text = FIG6_TEXT.get(m, ("-", "-"))
        s.rows.append([m, b, f"{ideal:.3f}", frac(cells["odswap"]), frac(cells["odswap, MXNet order"]), od_text,
                       frac(cells["swapadvisor"]), frac(cells["swapadvisor, MXNet order"]), sa_text])
        ours, mx = cells["odswap"], cells["odswap, MXNet order"]
        if m.startswith(("rnn", "brnn")) and ours and mx:
            if mx < 0.01:
                verdict = "holds"
            elif mx < ours / 3:
                verdict = (f"holds in direction, not in size: on MXNet's order ODSwap falls to {mx:.3f} of ideal "
                           f"({ours / mx:.1f}x slower than on ours, {ours:.3f}), not to the paper's <0.01")
            else:
                verdict = f"does not hold: {mx:.3f} on MXNet's order, {ours:.3f} on ours"
            s.verdicts.append(f"{m}: 'ODSwap is less than 1% of ideal' (the paper: because MXNet's default "
                              f"schedule interleaves the layers): {verdict}. Why ours stays above 1% we have not "
                              "found: the paper gives neither ODSwap's seconds nor its traffic.")
        if m == "wresnet-152-10" and ours:
            ok = abs(ours - 0.80) <= 0.10
            s.verdicts.append(f"{m}: 'ODSwap achieves 80% of ideal': {'holds' if ok else 'does not hold'} "
                              f"({ours:.3f} on our order, {frac(mx)} on MXNet's"
                              + ("; the order is not why: both within 1%" if mx and abs(mx - ours) < 0.01 * ours
                                 else "") + ("" if ok else "; why ours is slower we have not found") + ")")
        sa_paper = FIG6_PAPER.get(m, (None, None))[0]
        sa, sa_mx = cells["swapadvisor"], cells["swapadvisor, MXNet order"]
        if sa_paper is not None and sa:
            s.verdicts.append(f"{m}: SwapAdvisor at {FIG6_TEXT[m][0]} of ideal after its search: "
                              + (f"holds already unsearched on our order ({sa:.3f}; on MXNet's {frac(sa_mx)})"
                                 if sa >= sa_paper - 0.05 else
                                 f"not shown without a search (unsearched {sa:.3f} on our order, {frac(sa_mx)} on "
                                 "MXNet's; bench.ga_search searches)"))
    return s


# ------------------------------------------------------------------ SwapAdvisor Figure 6, every batch
# Figure 6 plots three batches per model. The text names the CNNs' (16 and 64 in Section 6.2, 32 in
# Section 6.5); the RNNs' are taken the same way, the largest (Table 1's) halved twice: the bars are not
# in our copy. The only numbers the text gives below the largest batch: SwapAdvisor at about 80% of
# ideal on Inception-4 and NasNet-25 at batch 16, against at most 65% at 64 (Section 6.2).
FIG6_BATCHES = {"rnn-8-8k": (64, 128, 256), "brnn-4-8k": (32, 64, 128), "wresnet-152-10": (16, 32, 64),
                "inception-4": (16, 32, 64), "nasnet-25": (16, 32, 64)}
FIG6_SA_AT = {("inception-4", 16): 0.80, ("nasnet-25", 16): 0.80, ("inception-4", 64): 0.65,
              ("nasnet-25", 64): 0.65}       # 64: "cannot achieve more than 65%" (an upper bound)
FIG6_SA_OVER_ODSWAP_CNN = (1.2, 2.5)       # "20% - 150% performance improvement compared to ODSwap"
FIG6_SA_OVER_ODSWAP_RNN = 80               # the highlights: "up to 80x for RNNs"


def figure6_batches(quick: bool) -> Section:
    """Every batch Figure 6 plots, unsearched, with the text's numbers where it gives them (the
    largest batch is also ``figure6``'s row)."""
    if quick:
        batches, device = {"rnn-4-2k": (16, 32, 64), "inception-0.25": (16, 32)}, 2 * GIB
    else:
        batches, device = FIG6_BATCHES, 16 * GIB
    s = Section("SwapAdvisor Figure 6 at every batch it plots",
                "SwapAdvisor Section 6.2, Figure 6 (three batches a model; the bars are not in our copy) and its "
                "text: about 80% of ideal at batch 16 for Inception-4 and NasNet-25, at most 65% at 64; "
                "SwapAdvisor 1.2-2.5x ODSwap on the CNNs, up to 80x on the RNNs (Section 6's highlights)",
                f"analytic V100 profile (PCIe 12 GB/s one way, 20 both), {device / GIB:g} GiB, no search "
                "(swapadvisor unsearched; the paper's after a 30-minute search); batches: the CNNs' from the "
                "text (16, 32, 64), the RNNs' the largest halved twice (assumed: not in the text); order as in "
                "figure6 (ours: insertion, MXNet: engine.schedules.mxnet_order)",
                ["model", "batch", "ideal s", "odswap ours", "odswap MXNet", "SA unsearched ours",
                 "SA unsearched MXNet", "SA / odswap MXNet", "paper SA (searched)"])
    cells = {}
    for m, bs in batches.items():
        for b in bs:
            ideal, c = fig6_fractions(m, b, device)
            cells[m, b] = c
            sa, od = c["swapadvisor"], c["odswap, MXNet order"]
            paper = FIG6_SA_AT.get((m, b))
            s.rows.append([m, b, f"{ideal:.3f}", frac(c["odswap"]), frac(od), frac(sa),
                           frac(c["swapadvisor, MXNet order"]), "x" if not (sa and od) else f"{sa / od:.2f}x",
                           "-" if paper is None else (f"<={paper:.2f}" if b == 64 else f"~{paper:.2f}")])
    for m in ("inception-4", "nasnet-25"):
        lo, hi = cells.get((m, 16), {}).get("swapadvisor"), cells.get((m, 64), {}).get("swapadvisor")
        if lo and hi:
            s.verdicts.append(
                f"{m}: 'about 80% of ideal at batch 16, at most 65% at 64': at 16 "
                + (f"holds unsearched ({lo:.3f})" if lo >= 0.75 else f"not shown unsearched ({lo:.3f})")
                + f"; at 64 ours is {hi:.3f} unsearched"
                + (" (at most 0.65: holds)" if hi <= 0.65 else ", above the paper's 0.65")
                + ("; the fall from 16 to 64 holds" if hi < lo else "; no fall from 16 to 64 here"))
    cnn = [c["swapadvisor"] / c["odswap, MXNet order"] for (m, _), c in cells.items()
           if not m.startswith(("rnn", "brnn")) and c["swapadvisor"] and c["odswap, MXNet order"]]
    if cnn:
        low, high = FIG6_SA_OVER_ODSWAP_CNN
        inside = all(low - 0.05 <= r <= high + 0.05 for r in cnn)
        s.verdicts.append(f"CNNs: 'SwapAdvisor {low:g}-{high:g}x ODSwap': "
                          + ("holds" if inside else "does not hold everywhere")
                          + f" (ours {min(cnn):.2f}-{max(cnn):.2f}x unsearched over ODSwap on MXNet's order)")
    for m in (m for m in batches if m.startswith(("rnn", "brnn"))):
        od = [cells[m, b]["odswap, MXNet order"] for b in batches[m]]
        ratios = [cells[m, b]["swapadvisor"] / o for b, o in zip(batches[m], od) if o and cells[m, b]["swapadvisor"]]
        if od and all(od) and ratios:
            s.verdicts.append(
                f"{m}: 'ODSwap less than 1% of ideal' at every batch: "
                + ("holds" if max(od) < 0.01 else f"does not hold in size ({min(od):.3f}-{max(od):.3f} on "
                   "MXNet's order)")
                + f"; 'SwapAdvisor up to {FIG6_SA_OVER_ODSWAP_RNN}x ODSwap': "
                + ("holds" if max(ratios) >= FIG6_SA_OVER_ODSWAP_RNN * 0.9 else "does not hold in size")
                + f" (ours up to {max(ratios):.1f}x: unsearched SwapAdvisor on our order over ODSwap on MXNet's"
                + "; ODSwap stays above 1%, see figure6)")
    return s


# ------------------------------------------------------------------ SwapAdvisor Figure 7
# Section 6.2, Figure 7 (images/s, read from the figure's text layer in bar order).
FIG7_PAPER = {"SwapAdvisor": (15.2, 15.0, 14.3), "ODSwap": (14.2, 14.0, 11.5), "TFLMS": (4.74, 4.34, 3.72)}


def figure7(quick: bool) -> Section:
    from bench.lms_vs_swapadvisor import BATCHES, MODEL, cell

    model, batches, device = (("wresnet-50-1", (16,), 2 * GIB) if quick else (MODEL, BATCHES, 16 * GIB))
    s = Section("SwapAdvisor Figure 7: against TFLMS",
                "SwapAdvisor Section 6.2, Figure 7 (WResNet-152-4, images/s) and its text: SwapAdvisor at least "
                "3x TFLMS, ODSwap at least 2x",
                f"{model}, analytic V100 profile, {device / GIB:g} GiB, no search; tflms = TFLMS as published, the "
                "TFLMS of the paper's figure (its [26], Le et al.'s graph rewriting: IBM's tflmsv1 defaults and "
                "rules, nothing tuned; planner.policies.tflms); tflms v2 = TFLMSv2's first defaults (half the "
                "levels, chained swap-ins; planner.policies.tflms_v2); lms = our TFLMS with its two thresholds "
                "tuned on our simulator (planner.policies.lms); all three on bestfit, parameters resident",
                ["images/s", *(f"B={b}" for b in batches)])
    columns = ("ideal", "tflms", "tflms v2", "lms", "odswap", "swapadvisor")
    ours = {c: [cell(c, b, model, device)[0] for b in batches] for c in columns}
    fmt = (lambda v: "x" if v is None else f"{v:.2f}")
    s.rows += [[f"ours: {c}", *map(fmt, v)] for c, v in ours.items()]
    if not quick:
        s.rows += [[f"paper: {k}", *map(fmt, v)] for k, v in FIG7_PAPER.items()]

    def over(c, base):          # per batch; None where either does not run
        return [a / t if a and t else None for a, t in zip(ours[c], ours[base])]

    def listed(ratios):
        return ", ".join("x" if r is None else f"{r:.2f}x" for r in ratios)

    for c, need, paper in (("swapadvisor", 3.0, "SwapAdvisor"), ("odswap", 2.0, "ODSwap")):
        published = [r for r in over(c, "tflms") if r is not None]
        ok = bool(published) and min(published) >= need
        s.verdicts.append(f"'{paper} at least {need:g}x TFLMS': {'holds' if ok else 'does not hold'} against TFLMS "
                          f"as published ({listed(over(c, 'tflms'))} over tflms); over tflms v2 "
                          f"{listed(over(c, 'tflms v2'))}, over our tuned lms {listed(over(c, 'lms'))}")
    ceiling = [r for r in over("ideal", "tflms") if r is not None]
    if ceiling and max(ceiling) < 3.0:
        why = (f"why not: ideal is only {listed(ceiling)} tflms, so no plan here is 3x it; tflms's compute waits "
               "on its swap-ins (every forward tensor a backward operator reads crosses the link both ways and "
               "is swapped in only one layer ahead of its reader)")
        if not quick:
            paper_sa = [p / t if t else None for p, t in zip(FIG7_PAPER["SwapAdvisor"], ours["tflms"])]
            why += (f"; the paper's SwapAdvisor bars pass our ideal (its setup computes the model faster than "
                    f"our analytic V100), yet even they are only {listed(paper_sa)} our tflms; what else slowed "
                    "the paper's TFLMS we have not found")
        s.verdicts.append(why)
    missing = [b for b, v in zip(batches, ours["tflms"]) if v is None]
    if missing:
        s.verdicts.append(f"TFLMS as published does not fit {device / GIB:g} GiB at batch "
                          f"{', '.join(map(str, missing))} (x; the paper's ran every batch)")
    return s


# ------------------------------------------------------------------ SwapAdvisor Figure 10
# Section 6.4, Figure 10's text: without the schedule search, 7% of the full search (RNN), 93% (Inception-4).
FIG10_PAPER = {"rnn-8-8k": 0.07, "inception-4": 0.93}


def figure10(quick: bool) -> Section:
    import zoo
    from engine.profile import analytic_profile
    from engine.schedules import mxnet_order
    from ga.search import SearchOptions, search
    from planner.budget import make_budget
    from planner.facts import GraphFacts
    from zoo.stats import PAPER

    if quick:
        models, device, population, generations = {"rnn-4-2k": 64}, 2 * GIB, 4, 2
    else:
        models, device, population, generations = ({p.model: p.batch for p in PAPER if p.model in FIG10_PAPER},
                                                   16 * GIB, 16, 4)
    s = Section("SwapAdvisor Figure 10: the search with the schedule fixed",
                "SwapAdvisor Section 6.4, Figure 10 and its text (allocation-only throughput over the full search's)",
                f"analytic V100 profile, {device / GIB:g} GiB, batch {', '.join(f'{m} {b}' for m, b in models.items())}; "
                f"a short seeded search (seed 0, "
                f"population {population}, {generations} generations, one worker; the paper: 144 individuals for 30 "
                "minutes on 72 cores): deterministic, far shorter than the paper's",
                ["model", "joint s", "alloc-only ours s", "alloc-only MXNet s", "ratio ours", "ratio MXNet",
                 "paper ratio"])
    profile = analytic_profile("v100")
    for m, b in models.items():
        g = zoo.build(m, batch=b)
        results = {}
        for key, facts in (("joint", GraphFacts(g)), ("ours", GraphFacts(g)), ("mxnet", GraphFacts(g, mxnet_order(g)))):
            opts = SearchOptions(population=population, max_generations=generations, seed=0, workers=1,
                                 mode="both" if key == "joint" else "allocation", progress=False, ideal=False)
            results[key] = search(facts, make_budget(facts, device), profile, opts).best_time
        joint = results["joint"]
        ratio = {k: joint / results[k] for k in ("ours", "mxnet")}
        paper = FIG10_PAPER.get(m)
        s.rows.append([m, f"{joint:.3f}", f"{results['ours']:.3f}", f"{results['mxnet']:.3f}",
                       f"{ratio['ours']:.2f}", f"{ratio['mxnet']:.2f}", "-" if paper is None else f"{paper:.2f}"])
        if paper is not None:
            close = abs(ratio["mxnet"] - paper) <= 0.10
            apart = ratio["ours"] - ratio["mxnet"] > 0.10
            s.verdicts.append(
                f"{m}: 'without the schedule search, {paper:.0%} of the full search': "
                + ("holds on MXNet's order" if close else "does not hold")
                + f" ({ratio['mxnet']:.2f} on MXNet's order, {ratio['ours']:.2f} on ours"
                + ("; our insertion order already runs the layers one after another, so fixing it costs little"
                   if apart else "") + ")")
    return s


# ------------------------------------------------------------------ SwapAdvisor Figure 9 and 9c
# Section 6.4's text on Figure 9 (its curves are not in our plain-text copy: no number is read off them).
FIG9_TEXT = ("GA over 144 individuals, first generation random, 30 minutes: best and mean converge within the "
             "first 100 s (6% of the search); worst and mean stay above best (diversity); 9c (Inception-4, "
             "unrestricted size mapping): best, mean and worst all worse than 9b (restricted)")
FIG9_CONVERGED_SHARE = 0.5      # ours "converges quickly" when within 5% of its end in the first half


def figure9_section(runs: list) -> Section:
    """Figures 9b/9c from ``bench.fig9_search`` runs (one restricted and one unrestricted search
    per setting): the alive population's best, mean and worst at doubling generations, and a
    verdict per claim, judged on evaluations (our x axis), not seconds."""
    import math

    from bench.fig9_search import CONVERGED, converged_at, fmt, mapping_counts, shown_generations

    settings = list(dict.fromkeys(r.setting for r in runs))
    s = Section("SwapAdvisor Figure 9 (b, c): the search's best, mean and worst alive, restricted and unrestricted "
                "size mapping",
                f"SwapAdvisor Section 6.4, Figure 9 and its text: {FIG9_TEXT}",
                "; ".join(st.words() for st in settings) + "; first generation random (the paper's), knobs off, the "
                "pool allocator; x axis = evaluations (plans + simulations), not seconds: generation caps, so "
                "nothing depends on the clock or the load",
                ["panel", "mapping", "generation", "evaluations", "best s", "mean s", "worst s", "infeasible"])
    for st in settings:
        pair = {r.mapping: r for r in runs if r.setting == st}
        for mapping, panel in (("restricted", "9b"), ("unrestricted", "9c")):
            r = pair.get(mapping)
            if r is None:
                continue
            rows = {h.generation: h for h in r.history}
            for g in shown_generations(r.history[-1].generation):
                h = rows[g]
                s.rows.append([f"{panel} {st.model}", mapping, g, h.evaluations, fmt(h.best), fmt(h.mean),
                               fmt(h.worst), h.infeasible])
            end = r.history[-1]
            at = {c: converged_at(r.history, c) for c in ("best", "mean")}
            quick = all(a is not None and a <= FIG9_CONVERGED_SHARE * end.evaluations for a in at.values())
            shares = ", ".join(f"{c} after {a} ({a / end.evaluations:.0%})" if a is not None else f"{c} never"
                               for c, a in at.items())
            s.verdicts.append(
                f"{panel} {st.model} ({mapping}): 'best and mean converge quickly' (the paper: within the first 6% "
                f"of a 30-minute search): {'holds' if quick else 'does not hold'} in our {end.evaluations} "
                f"evaluations (within {CONVERGED:.0%} of their end value: {shares}; our bar: the first "
                f"{FIG9_CONVERGED_SHARE:.0%}, our search being far shorter than the paper's)")
            spread = end.worst / end.best if math.isfinite(end.worst) and end.best > 0 else math.inf
            s.verdicts.append(
                f"{panel} {st.model} ({mapping}): 'the population keeps its diversity' (worst and mean above best "
                f"at the end): {'holds' if spread > 1.01 else 'does not hold'} (worst {spread:.2f}x best, mean "
                f"{end.mean / end.best:.2f}x)")
        if len(pair) == 2:
            a, b = pair["restricted"].history[-1], pair["unrestricted"].history[-1]
            worse = {c: getattr(b, c) > getattr(a, c) for c in ("best", "mean", "worst")}
            # The paper's panels are whole curves: how many generations have all three worse, and
            # from which generation on they stay so (None: not even at the last).
            every = [all(getattr(u, c) > getattr(r, c) for c in ("best", "mean", "worst"))
                     for r, u in zip(pair["restricted"].history, pair["unrestricted"].history)]
            since = next((g for g in range(len(every)) if all(every[g:])), None)
            log_r, log_u = mapping_counts(pair["restricted"].sizes)
            s.verdicts.append(
                f"9c {st.model}: 'best, mean and worst all worse with the mapping unrestricted': "
                + ("holds" if all(worse.values()) else
                   f"does not hold ({', '.join(c for c, w in worse.items() if not w)} not worse)")
                + f" at the end ({b.evaluations} evaluations each: best {fmt(b.best)} vs {fmt(a.best)}, mean "
                f"{fmt(b.mean)} vs {fmt(a.mean)}, worst {fmt(b.worst)} vs {fmt(a.worst)} s); all three worse after "
                f"{sum(every)} of {len(every)} generations"
                + ("" if since is None else f", after every one from generation {since} on") + "; the space: "
                f"{pair['restricted'].sizes} sizes, 10^{log_r:.0f} restricted mappings against 10^{log_u:.0f} "
                "unrestricted groupings (the paper's O(2^N) and O(N^N))")
    return s


def figure9(quick: bool) -> Section:
    from bench.fig9_search import run, settings

    return figure9_section([run(st, m) for st in settings(quick) for m in ("restricted", "unrestricted")])


# ------------------------------------------------------------------ paper 001 Table 1
def table1_001(quick: bool) -> Section:
    import zoo
    from bench import table1_001 as t
    from engine.errors import EngineError
    from engine.profile import analytic_profile
    from planner.facts import GraphFacts

    batches = (64, 256) if quick else t.BATCHES
    s = Section("Paper 001 Table 1: ResNet-50 at growing batch in 16 GB",
                "paper 001 (schedule window + virtual addressing), Table 1 (images/s; its LMS rows on P100, its own "
                "on V100) and Section 4's text: scheduling alone stops at batch 928 (fragmentation), with VA 1440 "
                "(1.6x larger)",
                "wresnet-50-1 224x224, analytic v100-nvlink profile (50 GB/s each way), 16 GiB, no search; window "
                "size searched on the simulator (deterministic), lms thresholds tuned on it, va chunk 40 MiB",
                ["images/s", *map(str, batches)])
    profile = analytic_profile("v100-nvlink")
    ips = {c: [] for c in t.COLUMNS}
    for b in batches:
        g = zoo.build("wresnet-50-1", batch=b, size=224)
        facts = GraphFacts(g)
        secs = profile.node_seconds(g)
        for c in t.COLUMNS:
            try:
                seconds, _ = t.run_one(c, g, facts, profile, secs, 40 << 20)
            except EngineError:
                seconds = None
            ips[c].append(None if seconds is None else b / seconds)
    fmt = (lambda v: "x" if v is None else f"{v:.0f}")
    s.rows += [[f"ours: {c}", *map(fmt, ips[c])] for c in t.COLUMNS]
    if not quick:
        s.rows += [[f"paper: {k}", *map(fmt, v)] for k, v in t.PAPER.items()]

    def largest(c):
        return max((b for b, v in zip(batches, ips[c]) if v is not None), default=None)
    bestfit, va = largest("window+bestfit"), largest("window+va")
    holds = bestfit is not None and va is not None and va > bestfit
    s.verdicts.append(
        f"'scheduling alone (best fit) stops at batch 928, VA reaches 1440': {'holds' if holds else 'does not hold'} "
        f"(largest batch run here: best fit {bestfit}, va {va} of {', '.join(map(str, batches))})"
        + ("" if holds else "; the paper puts its limit on fragmentation ('almost 2x differences at 928 batch size. "
           "This indicates memory fragmentation', Section 4); our best fit splits and coalesces free blocks as "
           "PyTorch's caching allocator does, which may be why it does not fragment out of 16 GiB here (not "
           "verified)"))
    best = max((v for v in ips["ideal"] if v is not None), default=None)
    va_last = ips["window+va"][-1]
    if best and batches[-1] == 1440 and va_last:
        paper = t.PAPER["schedule + VA (V100)"][-1] / max(v for v in t.PAPER["baseline (V100)"] if v)
        ours = va_last / best
        s.verdicts.append(f"'schedule + VA at batch 1440 keeps {paper:.2f} of the in-memory best' (Table 1: 321 of "
                          f"581 images/s): {'holds' if abs(ours - paper) <= 0.05 else 'does not hold'} (ours "
                          f"{ours:.2f}: {va_last:.0f} of {best:.0f})")
    lms = largest("lms")
    s.verdicts.append(f"'LMS (Le et al.) stops at batch 928': {'holds' if lms == 928 else 'does not hold'} "
                      f"(our lms's largest batch here: {lms})")
    return s


# ------------------------------------------------------------------ paper 001 Table 1 in 001's setting
BLIND_BATCHES = (512, 928, 1120, 1248, 1440)


def table1_001_blind(quick: bool) -> Section:
    """001's limit (best fit stops at 928, VA reaches 1440) where its scheduler did not know the
    allocator: bench.figures_001's blind cells on Table 1's ResNet-50."""
    import zoo
    from bench import figures_001 as f
    from bench import table1_001 as t
    from engine.profile import analytic_profile
    from planner.facts import GraphFacts

    batches = (256,) if quick else BLIND_BATCHES
    s = Section("Paper 001 Table 1 in 001's setting: the schedule blind to the allocator",
                "paper 001 Section 5.1, Table 1 and Figure 3: scheduling alone (NNL's best fit) cannot train past "
                "batch 928, and at 928 only with an 8 GB scheduling budget ('if we set larger than 8GB for 928 "
                "batch size, training process causes Out-of-Memory even though a schedule is found'); with VA "
                "(40 MB chunks) 1440",
                "wresnet-50-1 224x224, analytic v100-nvlink profile, 16 GiB, no search: the window plans within a "
                "scheduling budget on exact requests (va 2 MiB chunks), which are replayed in order on best fit and "
                "on va 40 MiB chunks holding at most 16 GiB; the budget walks down from 16 GiB to 8 in steps of "
                "2^(1/8) to the first that fits (bench.figures_001.blind). Time: the schedule's, simulated",
                ["batch", "best fit: scheduling budget GiB", "best fit: peak reserved GiB", "best fit images/s",
                 "VA: scheduling budget GiB", "VA: peak reserved GiB", "VA images/s", "paper schedule / + VA ips"])
    profile = analytic_profile(f.PROFILE)
    largest = {}
    for b in batches:
        g = zoo.build("wresnet-50-1", batch=b, size=224)
        facts = GraphFacts(g)
        runs = f.blind(g, facts, profile, profile.node_seconds(g), 16 * GIB)
        row = [b]
        for label, _, _ in f.BLIND:
            r = runs[label]
            row += [f.gib_cell(r.budget_bytes), f.gib_cell(r.peak_bytes), f.ips_cell(r, b)]
            if r.seconds is not None:
                largest[label] = b
        paper = [dict(zip(t.BATCHES, t.PAPER[k])).get(b) for k in ("schedule (V100)", "schedule + VA (V100)")]
        row.append(" / ".join("x" if v is None else str(v) for v in paper))
        s.rows.append(row)
    bf, va = largest.get("blind schedule"), largest.get("blind schedule + VA")
    holds = bf == 928 and va == 1440
    s.verdicts.append(f"'scheduling alone stops at batch 928, VA reaches 1440', 001's setting: "
                      + ("holds" if holds else ("holds in direction" if (va or 0) > (bf or 0) else "does not hold"))
                      + f" (largest batch here: best fit {bf}, va {va} of {', '.join(map(str, batches))}; "
                      "planned through the allocator instead, both reach 1440: Paper 001 Table 1 above)")
    return s


# ------------------------------------------------------------------ paper 001 Figures 4 and 5
def _largest_ratio(cols, over: str, under: str) -> float | None:
    a, b = cols[over].largest(), cols[under].largest()
    return a / b if a and b else None


# Quick mode: each model small enough to plan in seconds, in a device scaled down with it so that the
# baseline still stops early (va's chunk scaled down with the device): (zoo name, builder options,
# side, batches, device, chunk).
QUICK45 = {
    "densenet-121": ("densenet-45", {"blocks": (2, 4, 8, 6), "growth": 32}, 64, (256, 1024), GIB, 4 << 20),
    "pix2pixhd": ("pix2pixhd-16-3-3", {"ngf": 16, "downsamples": 3, "blocks": 3}, 64, (2, 16), 64 << 20, 1 << 20),
    "deeplabv3plus": ("deeplabv3plus-r26-16", {"blocks": (2, 2, 2, 2), "base_width": 16}, 65, (2, 16), 96 << 20,
                      1 << 20),
}


def figures45_001(quick: bool) -> list[Section]:
    """001 Figures 4 and 5 (bench.figures_001), a section per model: DenseNet-121, Pix2PixHD's
    global generator, DeepLabv3+."""
    from bench import figures_001 as f
    return [_figures45_model(f, model, quick) for model in f.MODELS]


def _figures45_model(f, model: str, quick: bool) -> Section:
    """One model's images/s and peak memory against batch, for the baseline, the window on best
    fit and on va, capped (ours) and blind (001's)."""
    setting = f.MODELS[model]
    if quick:
        name, options, size, batches, device, chunk = QUICK45[model]
        image = f"side {size}"
    else:
        name, options, size, batches, device, chunk = model, {}, setting.size, setting.batches, 16 * GIB, f.VA_CHUNK
        image = setting.image
    cols = f.figures(model, batches, device, size, say=lambda _: None, chunk_bytes=chunk, **options)
    paper = setting.paper
    s = Section(f"Paper 001 Figures 4 and 5: images/s and memory against batch ({paper})",
                "paper 001 Section 5.2, Figures 4 and 5 and their text (the plots are not in our copy): DenseNet, "
                "Pix2PixHD, DeepLabv3+ in 16 GB; baseline's largest batch 512, 4, 6; scheduling 1.5x, 4x, 5.3x "
                "that; VA 1.5-2x scheduling's, its memory almost constant in the batch",
                f"{name}, {image}, analytic {f.PROFILE} profile (50 GB/s each way), {device / GIB:g} GiB, no "
                "search; baseline = in memory; schedule = the window on best fit, + VA = on va "
                f"{chunk >> 20} MiB chunks, both planned through the allocator (ours: never out of memory); blind = "
                "001's setting: the window's exact requests replayed on the allocator within the device, the "
                f"scheduling budget walked down from {device / GIB:g} GiB to half until the replay fits "
                f"(bench.figures_001){MODEL_NOTES[model]}",
                ["", *map(str, batches)])
    s.rows += [[f"ours: {r[0]} images/s", *r[1:]] for r in f.ips_rows(cols, batches)]
    s.rows += [[f"ours: {r[0]} GiB", *r[1:]] for r in f.memory_rows(cols, batches)]
    base, ratio = f.PAPER_LARGEST[paper]
    low, high = f.PAPER_VA_OVER_SCHEDULE
    largest = {c: cols[c].largest() for c in cols}
    s.verdicts.append("largest batch run: " + ", ".join(f"{c} {largest[c]}" for c in cols)
                      + f" (of {', '.join(map(str, batches))}; the paper's, from its text: baseline {base}, schedule "
                      f"{base * ratio:g}, schedule + VA {base * ratio * low:g}-{base * ratio * high:g})")
    for kind, sched in (("capped (ours)", "schedule"), ("blind (001's setting)", "blind schedule")):
        r = _largest_ratio(cols, sched, "baseline")
        s.verdicts.append(f"'scheduling trains {ratio:g}x the baseline's largest batch ({paper})', {kind}: "
                          + ("x" if r is None else ("holds" if r >= ratio else "does not hold") + f" (ours {r:.1f}x"
                             + (": the batches tried end there" if largest[sched] == batches[-1] else "") + ")"))
    for kind, over, under in (("capped (ours)", "schedule + VA", "schedule"),
                              ("blind (001's setting)", "blind schedule + VA", "blind schedule")):
        r = _largest_ratio(cols, over, under)
        s.verdicts.append(f"'VA trains {low:g}-{high:g}x the batch of scheduling alone', {kind}: "
                          + ("x" if r is None else ("holds" if r >= low else "does not hold")
                             + f" ({largest[over]} vs {largest[under]}, {r:.2f}x"
                             + ("; planned through best fit, the window never lets it run out of memory"
                                if over == "schedule + VA" and r < low else "") + ")"))
    va = [cols["schedule + VA"].runs[b].peak_bytes for b in batches
          if cols["schedule + VA"].runs[b].seconds and cols["baseline"].runs[b].seconds is None]
    if va:
        spread = (max(va) - min(va)) / max(va)
        s.verdicts.append(f"'with VA, memory almost constant regardless of batch' (Figure 5): "
                          + ("holds" if spread <= 0.05 else "does not hold")
                          + f" (peak reserved {min(va) / GIB:.2f}-{max(va) / GIB:.2f} GiB over the batches that swap)")
    runs = {b: cols["blind schedule"].runs[b] for b in batches if cols["schedule"].runs[b].seconds}
    digits = 1 if device >= GIB else 3          # quick mode's devices are a fraction of a GiB
    lowered = [f"{r.budget_bytes / GIB:.{digits}f} GiB at {b}" for b, r in runs.items()
               if r.seconds and r.budget_bytes < device]
    out = [str(b) for b, r in runs.items() if not r.seconds]
    s.verdicts.append("'scheduling alone reaches the physical memory because of fragmentation' (Figure 5), blind: "
                      + ("holds: " if lowered or out else "does not hold: best fit fits the device at the full "
                         "scheduling budget wherever the window plans")
                      + "; ".join((["best fit ran only with the scheduling budget lowered to " + ", ".join(lowered)]
                                   if lowered else [])
                                  + ([f"out of memory at every budget down to half at batch {', '.join(out)}"]
                                     if out else [])))
    if paper == "Pix2PixHD":
        fastest = max((b for b in batches if cols["schedule + VA"].runs[b].seconds),
                      key=lambda b: cols["schedule + VA"].runs[b].ips(b), default=None)
        base_best = max((cols["baseline"].runs[b].ips(b) for b in batches if cols["baseline"].runs[b].seconds),
                        default=None)
        if fastest is not None and base_best:
            best = cols["schedule + VA"].runs[fastest].ips(fastest)
            s.verdicts.append("'in pix2pixHD we achieve performance gain compared to baseline' (larger batches "
                              "faster): " + ("holds" if best > base_best else "does not hold")
                              + f" (schedule + VA's best {best:.3g} images/s at batch {fastest}, the baseline's "
                              f"best {base_best:.3g}; the paper: about 3 images/s)")
    return s


MODEL_NOTES = {
    "densenet-121": "",
    "pix2pixhd": "; at full size the global generator (ngf 64, 4 downsamplings, 9 residual blocks at 1024 "
                 "channels, instance norm, reflection padding, transposed convolutions) trained with an L1 loss: the "
                 "discriminators and the GAN, feature-matching and VGG losses are not built",
    "deeplabv3plus": "; at full size a ResNet-101 backbone at output stride 16 (multi-grid 2, 4, 8), ASPP at rates 6, "
                     "12, 18 with image pooling, decoder, per-pixel cross-entropy (21 classes); no dropout",
}


# ------------------------------------------------------------------ what this command does not regenerate
NOT_HERE = (
    ("SwapAdvisor Figure 6, searched bars", "bench.ga_search (a timed search: bench/results/ga_search_*.txt)"),
    ("SwapAdvisor Figure 8 (serving)", "bench.serving (bench/results/serving_*.txt)"),
    ("SwapAdvisor Figure 9a (a panel whose model our copy's text does not name)", "not reproduced"),
    ("SwapAdvisor Figure 11 (simulated against measured, rank agreement)", "bench.sim_vs_measured (timed on this "
     "CPU: it prints the load around the timing and warns when the machine was busy)"),
    ("SwapAdvisor Table 2 (inference)", "bench.table2 (timed searches: bench/results/table2_*.txt)"),
    ("004 SmartSwap Table 1, Figure 6b", "bench.smartswap, bench.smartswap_long (both monitoring modes' overhead "
     "is timed on the cpu backend: bench.smartswap --table1, bench/results/smartswap_table1_*.txt)"),
)

# ------------------------------------------------------------------ SmartSwap (004) Figure 5
def figure5_004(quick: bool) -> Section:
    """bench.smartswap_fig5's sweep: the largest Llama 2 along each axis, natively, with full
    recomputation and with SmartSwap, on the 910B profile."""
    from bench import smartswap_fig5 as f

    base, vocab = (f.QUICK_BASE, 1000) if quick else (f.PAPER_BASE, 32000)
    device = f.quick_device() if quick else 64 * GIB
    s = Section("SmartSwap Figure 5: the largest Llama 2 along each axis on one 64 GB Ascend 910B",
                "004 Section 6.1 and Figure 5: from batch 4, 5 layers, sequence 4096, hidden 4096, SmartSwap trains 4x, "
                "1.83x, 4x and 1.24x native PyTorch's largest, and runs 16-19% faster than full recomputation on "
                "average (up to 38.94%)",
                f"llama-L-H-H/128 (zoo/llama.py), base {base.batch}/{base.layers}/{base.seq}/{base.hidden}, vocabulary "
                f"{vocab}, float16, analytic 910b profile (rates and link assumed: engine/profile.py), "
                f"{device / GIB:.2f} GiB, graph order, no search; each axis grown to at most "
                f"{2 if quick else 8}x the base (bench.smartswap_fig5 says what else is assumed)",
                f.FIT_HEADERS)
    sw, largest = f.sweep(base, device, vocab, cap=2 if quick else 8, points=2 if quick else 4)
    s.rows += f.fit_rows(base, largest)
    s.verdicts += f.tables(sw, base, largest)[2]
    return s


def figure6a_004(quick: bool) -> Section:
    """bench.smartswap_fig6a's sweep: time per step against layers, release points against
    recordStream's event queries on the host."""
    from bench import smartswap_fig6a as f

    query_s = tuple(q * 1e-6 for q in f.QUERY_US)
    points, base, device = f.sweep(quick, query_s=query_s)
    headers, rows = f.table_rows(points, query_s)
    s = Section("SmartSwap Figure 6a: time per step against layers, release points against recordStream",
                f.PAPER.split(": ", 1)[1],
                f"llama (zoo/llama.py), batch {base.batch}, sequence {base.seq}, hidden {base.hidden}, float16, "
                f"smartswap in {device / GIB:.2f} GiB on the analytic 910b profile, simulated with the host timeline "
                f"(planner.dispatch: {f.DISPATCH_US:g} us an instruction); recordStream's blocks released at the next "
                f"synchronization, each dispatch paying an event query per pending block (or FIFO polling) at an "
                f"assumed cost (bench.smartswap_fig6a cites the values)", headers)
    s.rows += rows
    s.verdicts += f.verdicts(points, query_s)
    return s


SECTIONS = (("fig6", figure6), ("fig6_batches", figure6_batches), ("fig7", figure7), ("fig9", figure9),
            ("fig10", figure10), ("table1_001", table1_001), ("table1_001_blind", table1_001_blind),
            ("figs45_001", figures45_001), ("fig5_004", figure5_004),
            ("fig6a_004", figure6a_004))


def figure6_png(section: Section, path: str) -> None:
    """Figure 6 as bars: ODSwap on our order and on MXNet's, beside the paper's, per model (a paper
    bar missing where its text gives no number)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [r[0] for r in section.rows]
    series = {"ODSwap, our order": 3, "ODSwap, MXNet order": 4, "SwapAdvisor unsearched, our order": 6}
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / (len(series) + 2)
    for k, (label, col) in enumerate(series.items()):
        ys = [float(r[col]) if r[col] != "x" else 0 for r in section.rows]
        ax.bar([i + k * width for i in range(len(models))], ys, width, label=label)
    for k, (label, which, color) in enumerate((("ODSwap, paper (<0.01 drawn as 0.01)", 1, "black"),
                                               ("SwapAdvisor searched, paper", 0, "grey")), start=len(series)):
        paper = [FIG6_PAPER.get(m, (None, None))[which] or 0 for m in models]
        ax.bar([i + k * width for i in range(len(models))], paper, width, label=label, color=color)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(models))], models)
    ax.set_ylabel("throughput / ideal")
    ax.set_ylim(0, 1.05)
    ax.set_title("SwapAdvisor Figure 6, simulated: the order the baselines run in")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.papers", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small models, short search: the pipeline in under 2 min")
    ap.add_argument("--only", default="", help=f"comma-separated sections ({', '.join(n for n, _ in SECTIONS)})")
    ap.add_argument("--save", action="store_true", help="write bench/results/papers[_quick]_<date>.txt and the PNG")
    ap.add_argument("--png", default=None, help="folder for figure6.png (default: beside the results with --save)")
    args = ap.parse_args(argv)
    only = [n for n in args.only.split(",") if n]
    unknown = [n for n in only if n not in dict(SECTIONS)]
    if unknown:
        ap.error(f"unknown section {unknown[0]}; choose from {', '.join(n for n, _ in SECTIONS)}")
    say = Transcript()

    say(f"# python -m bench.papers {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    say(f"# {planning_machine_line()}")
    say("# " + ("QUICK: small models and budgets, a 2-generation search; the verdicts are about these settings, "
                "not the papers'" if args.quick else "the papers' settings; no timed search (see each setting)"))
    say()
    started = time.process_time()
    fig6 = None
    for name, make in SECTIONS:
        if only and name not in only:
            continue
        t0 = time.process_time()
        made = make(args.quick)
        fig6 = made if name == "fig6" else fig6
        for section in made if isinstance(made, list) else [made]:       # a figure may have a section per model
            say(section.text())
        say(f"({name}: {time.process_time() - t0:.0f} CPU s)")
        say()
    say("## Not regenerated by this command")
    for what, where in NOT_HERE:
        say(f"- {what}: {where}")
    say()
    say(f"total {time.process_time() - started:.0f} CPU s")
    png_dir = args.png or (os.path.join("bench", "results") if args.save else None)
    if fig6 is not None and png_dir:
        os.makedirs(png_dir, exist_ok=True)
        path = os.path.join(png_dir, f"papers_fig6{'_quick' if args.quick else ''}.png")
        try:
            figure6_png(fig6, path)
            print(f"figure: {path}")
        except ImportError:         # the plot extra is not installed: the tables stand without it
            print("figure: not drawn (matplotlib is not installed: pip install '.[plot]')")
    if args.save:
        print(f"saved {save_results('papers_quick' if args.quick else 'papers', say.text())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
