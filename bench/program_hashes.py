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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"record the digests in {RESULTS}")
    args = ap.parse_args(argv)
    now = digests()
    for model, by_policy in now.items():
        for policy, digest in by_policy.items():
            print(f"{model:16s} {policy:12s} {digest}")
    if args.write:
        with open(RESULTS, "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
        print(f"written to {RESULTS}")
        return 0
    with open(RESULTS) as f:
        same = json.load(f) == now
    print("identical to the committed digests" if same else "DIFFERENT from the committed digests")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
