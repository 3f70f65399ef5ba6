"""The planner interpreted (numba's DISABLE_JIT, what a first run of engine.train plans with while
the compile runs in the background: engine/cli/first_run.py) makes the very Programs, and
simulates the very times, of the compiled planner."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLANS = ("swapadvisor", "odswap", "capuchin", "window")

SCRIPT = """
import dataclasses, json, sys
from zoo import small
from bench.program_hashes import program_digest
from engine.profile import analytic_profile
from planner import policy
from planner.budget import make_budget
from planner.simulate import simulate
from planner.facts import GraphFacts

g = small.residual_cnn(batch=16)
facts = GraphFacts(g)
profile = analytic_profile("v100")
budget = make_budget(facts, int(facts.peak_bytes * 0.5))
request = policy.PlanRequest(g, facts, budget, profile, profile.node_seconds(g))
out = {}
for name in sys.argv[1:]:
    for allocator in ("pool", "va") if name == "swapadvisor" else (None,):
        options = {"chunk_bytes": 16 << 10} if allocator == "va" else {}
        r = dataclasses.replace(request, allocator=allocator, allocator_options=options)
        program = policy.get(name).make(r)
        out[f"{name}-{allocator}"] = [program_digest(program), program.recomputes,
                                      simulate(program, g, profile).total]
print(json.dumps(out))
"""


def plans(interpreted: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    if interpreted:
        env["NUMBA_DISABLE_JIT"] = "1"
    out = subprocess.run([sys.executable, "-c", SCRIPT, *PLANS], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_interpreted_planner_makes_the_compiled_plans():
    compiled, interpreted = plans(False), plans(True)
    assert interpreted == compiled
    assert any(recomputes for _, recomputes, _ in compiled.values())      # recomputation covered too
