"""SmartSwap's policy generator (004 Section 4) and its release points (Section 5.2); the
policy itself is ``planner.policies.smartswap``.

SmartSwap decides from what a lightweight profiler can see, the operator sequence, the memory
trace, the iteration's duration and the link's bandwidth and per-copy cost, never per-operator
times; between finished plans it chooses by their runtime (004 keeps the fastest of the
policies it generates), here the simulator's. The parts, in the order a plan uses them:

- ``layers``: logical layers (Eq. 1), each phase's operators in even groups with Eq. 1's times;
- ``candidates``: device storages, the candidates (a storage's stay between two uses, or
  persistent state held on the host instead of resident) and Eq. 2's score;
- ``layer_simulator``: Eq. 3 and 4.4's per-layer copy budgets (pre-trigger and completion layers);
- ``algorithm2``: Algorithm 2 at one memory target (the memory reduction list, candidates by
  score, timed by the layer simulator, rounds until nothing is above the target);
- ``stays``: each stay of a storage on the device as the decisions lay them out;
- ``release_points``: when a swapped-out stay's bytes go back to the pool (from the copy
  queues in program order, within the pool), and 004 Figure 6b's report;
- ``build``: the Program, each stay one object of the online allocator;
- ``plan``: ``SmartSwapPlan``, the above for one graph in the order an eager framework runs it,
  the target lowered while the allocator finds no room.
"""
from .algorithm2 import Algorithm2
from .candidates import Candidate, Storage, candidates, score, storages
from .layer_simulator import Simulator, swap_seconds
from .layers import BACKWARD, FORWARD, LAYERS, OPTIMIZER, Layers, logical_layers, phases
from .plan import C_DEFAULT, FIRST_TARGET, TARGET_STEP, TRIES, SmartSwapPlan
from .release_points import ReleaseReport, release_report
from .stays import Stay

__all__ = ["Algorithm2", "BACKWARD", "C_DEFAULT", "Candidate", "FIRST_TARGET", "FORWARD", "LAYERS", "Layers",
           "OPTIMIZER", "ReleaseReport", "SmartSwapPlan", "Simulator", "Stay", "Storage", "TARGET_STEP", "TRIES",
           "candidates", "logical_layers", "phases", "release_report", "score", "storages", "swap_seconds"]
