"""Data-parallel plans: which gradients are all-reduced across the ranks, and a single-rank
Program with its all-reduces added (engine.program.ALLREDUCE, on their own stream).

``reduced_gradients``: every tensor an optimizer's step reads as its gradient (``Op.gradient_input``);
in a plan for N > 1 ranks each is summed across the ranks exactly once, after the compute that
makes it and before the update reads it (planner.verify checks both, and that nothing writes
its bytes while the reduction runs).

``add_allreduce`` takes a verified single-rank Program and adds the reductions in buckets: a
bucket collects gradients as the backward pass finishes them and closes (one ALLREDUCE
instruction, depending on each member's producer) when it reaches ``bucket_bytes``, or before
any instruction that reads, moves or overwrites a member's bytes (the update that reads one, a
swap-out that would evict one); every later instruction touching those bytes waits for it.
Nothing else moves, so the swaps and the compute keep their plan; placing the reductions
against the swaps (choosing the buckets, delaying a swap-out past them) is the search's next step.
"""
from __future__ import annotations

from engine.ir import Graph
from engine.program import ALLREDUCE, COMPUTE, Instr, Program, sharing_objects
from ops import registry as op_registry


def reduced_gradients(g: Graph) -> dict[int, int]:
    """Gradient tensor -> the node (an optimizer's step) that reads it as its gradient."""
    out = {}
    for n in g.nodes:
        k = op_registry.get(n.op).gradient_input
        if k is not None:
            out[n.inputs[k]] = n.id
    return out


def add_allreduce(program: Program, g: Graph, ranks: int, bucket_bytes: int = 25 * 2**20) -> Program:
    """``program`` (planned for one rank) with its gradients all-reduced across ``ranks`` in
    buckets of about ``bucket_bytes`` (PyTorch DDP's default bucket is 25 MiB)."""
    grads = reduced_gradients(g)
    sharing = sharing_objects(program.arena)
    instrs: list[Instr] = []
    new_of: list[int] = []                 # old instruction index -> new
    bucket: list[tuple[int, int, int]] = []  # (tensor, object, producer's new index)
    guarded: dict[int, int] = {}           # object -> the all-reduce a later touch must wait for

    def touched(ins: Instr) -> set[int]:
        objs = set(ins.objects) if ins.kind == COMPUTE else {ins.obj}
        return objs | {x for o in objs for x in sharing[o]}

    def close() -> None:
        if not bucket:
            return
        at = len(instrs)
        instrs.append(Instr(ALLREDUCE, bucket[0][0], -1, tuple(o for _, o, _ in bucket), True,
                            sorted({p for _, _, p in bucket}), bucket=tuple(t for t, _, _ in bucket)))
        for _, o, _ in bucket:
            for x in (o, *sharing[o]):
                guarded[x] = at
        bucket.clear()

    for old in program.instrs:
        objs = touched(old)
        if any(o in objs for _, o, _ in bucket):
            close()
        waits = {guarded[o] for o in objs if o in guarded}
        ins = Instr(old.kind, old.target, old.obj, old.objects, old.copy,
                    sorted({new_of[d] for d in old.deps} | waits), old.recompute)
        new_of.append(len(instrs))
        instrs.append(ins)
        if old.kind == COMPUTE and not old.recompute:
            node = g.nodes[old.target]
            for t, o in zip(node.outputs, old.objects[len(node.inputs):]):
                if t in grads:
                    bucket.append((t, o, new_of[-1]))
            if sum(g.tensors[t].nbytes for t, _, _ in bucket) >= bucket_bytes:
                close()
    close()
    return Program(program.graph_name, list(program.schedule), program.arena, instrs, dict(program.initial_resident),
                   program.policy, program.graph_fingerprint, ranks)
