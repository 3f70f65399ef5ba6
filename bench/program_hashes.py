"""Digests of the Programs the planner makes for the paper's five Table 1 models.

A refactoring that must change no plan is checked against the digests committed in
``bench/results/program_hashes.json``: for each model (analytic V100 profile, 16 GiB,
the paper's batches, the default order), the ideal Program and the Belady (swapadvisor)
and LRU (odswap) Programs on the simple allocation, and swapadvisor on va's chunks (the
chunked allocation; "swapadvisor-va").

The digest covers what a Program means, not how it is stored: the schedule, the arena
and its scratch, each initially resident tensor's byte range, and every instruction's
stream, target, copy flag, dependencies and the byte ranges it touches (virtual ranges, and
the page table that maps them, for an arena with one).

The online policies (lms, window, smartswap, tflms, full_recompute: pure-Python passes over an
online allocator, made faster more than once) are checked the same way in
``bench/results/online_program_hashes.json``, on bestfit: the tiny zoo at 0.8 of each model's
peak, NasNet-2 (batch 8) 0.75 of the way from its smallest budget to unswapped, where lms plans,
and tiny Llama at 1.2 of its peak, where full_recompute plans; a refusal is recorded by its
exception's name (bestfit's 2 MiB segments leave lms no room on most tiny models).

    python -m bench.program_hashes            # print and compare with the committed digests
    python -m bench.program_hashes --write    # record them (only when a plan is meant to change)
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys

import zoo
from engine.profile import analytic_profile

MODELS = {"wresnet-152-10": 64, "inception-4": 64, "nasnet-25": 64, "rnn-8-8k": 256, "brnn-4-8k": 128}
BUDGET = 16 * 2**30
RESULTS = os.path.join(os.path.dirname(__file__), "results", "program_hashes.json")
ONLINE_POLICIES = ("lms", "window", "smartswap", "tflms", "full_recompute")
ONLINE_TINY_FRACTION = 0.8        # of a tiny model's peak, beside its scratch
ONLINE_RESULTS = os.path.join(os.path.dirname(__file__), "results", "online_program_hashes.json")


def program_digest(program) -> str:
    """sha256 over the Program's meaning (byte ranges, not object ids)."""
    arena = program.arena
    def where(o: int) -> list[int]:
        return [int(arena.object_offset[o]), int(arena.object_bytes[o])]
    body = {
        "schedule": [int(n) for n in program.schedule],
        "arena": [int(arena.arena_bytes), int(arena.scratch_bytes)],
        "resident": sorted([int(t), *where(o)] for t, o in program.initial_resident.items()),
        "instructions": [[int(i.kind), int(i.target), bool(i.copy), sorted(int(d) for d in i.deps),
                          where(i.obj) if i.obj >= 0 else None, [where(o) for o in i.objects]]
                         for i in program.instrs],
    }
    if arena.virtual:
        body["mappings"] = arena.mappings.tolist()
    return hashlib.sha256(json.dumps(body, separators=(",", ":")).encode()).hexdigest()


def digests(models=MODELS) -> dict[str, dict[str, str]]:
    """{model: {"ideal"|"swapadvisor"|"odswap": digest}} of today's policies, unsearched."""
    from planner import policy
    from planner.budget import make_budget
    from planner.facts import GraphFacts

    profile = analytic_profile("v100")
    out = {}
    for name, batch in models.items():
        g = zoo.build(name, batch=batch)
        facts = GraphFacts(g)
        budget = make_budget(facts, BUDGET)
        request = policy.PlanRequest(g, facts, budget, profile, profile.node_seconds(g), allocator="pool")
        out[name] = {p: program_digest(policy.get(p).make(request)) for p in ("ideal", "swapadvisor", "odswap")}
        va = dataclasses.replace(request, allocator="va")
        out[name]["swapadvisor-va"] = program_digest(policy.get("swapadvisor").make(va))
    return out


def online_cases():
    """(label, the graph's facts, budget bytes) of the online policies' digests."""
    from bench.scaling import budget_at
    from planner.facts import GraphFacts

    for family in zoo.TINY:
        facts = GraphFacts(zoo.tiny(family))
        yield f"{family}-tiny@{ONLINE_TINY_FRACTION}", facts, int(facts.peak_bytes * ONLINE_TINY_FRACTION) + facts.scratch.bytes
    facts = GraphFacts(zoo.build("nasnet-2", batch=8))
    yield "nasnet-2:8@0.75", facts, budget_at(facts, 0.75, "bestfit")
    facts = GraphFacts(zoo.tiny("llama"))
    yield "llama-tiny@1.2", facts, int(facts.peak_bytes * 1.2) + facts.scratch.bytes


def online_digests() -> dict[str, dict[str, str]]:
    """{case: {policy: digest, or "refused: <exception>"}} of ``online_cases``."""
    from planner import policy
    from planner.budget import make_budget
    from planner.errors import PlanError

    profile = analytic_profile("v100")
    out = {}
    for label, facts, budget_bytes in online_cases():
        g = facts.graph
        request = policy.PlanRequest(g, facts, make_budget(facts, budget_bytes, ["bestfit"]), profile,
                                     profile.node_seconds(g), allocator="bestfit")
        row = out[label] = {}
        for name in ONLINE_POLICIES:
            try:
                row[name] = program_digest(policy.get(name).make(request))
            except PlanError as e:
                row[name] = f"refused: {type(e).__name__}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"record the digests in {RESULTS} and {ONLINE_RESULTS}")
    args = ap.parse_args(argv)
    same = True
    for path, now in ((RESULTS, digests()), (ONLINE_RESULTS, online_digests())):
        for case, by_policy in now.items():
            for policy, digest in by_policy.items():
                print(f"{case:24s} {policy:16s} {digest}")
        if args.write:
            with open(path, "w") as f:
                json.dump(now, f, indent=1, sort_keys=True)
            print(f"written to {path}")
            continue
        with open(path) as f:
            same_here = json.load(f) == now
        print(f"identical to {path}" if same_here else f"DIFFERENT from {path}")
        same = same and same_here
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
