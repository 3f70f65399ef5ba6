"""``swapadvisor``: the SwapAdvisor planner (Belady eviction with a recency threshold; each
tensor it evicts swapped out and back or dropped and recomputed, whichever costs less) on a
schedule and allocation found by the genetic search, or, without a search, on the default
order with the simple allocation.

Where tensors live (``PlanRequest.allocator``, read as kinds of placement: allocator.registry):
- ``SIZE_CLASSES`` (``pool``): the paper's size classes (``simple_allocation``, or the search's
  allocation);
- ``CHUNKED`` (``va``): chunks through virtual addressing (paper 001's allocator): the sizes of at
  least a chunk share one class of chunks, a tensor taking as many as it needs, any of them
  (``chunked_allocation``); the search then chooses the schedule, not the allocation;
- both (``auto``, the default): the Program that simulates faster (the pool without a profile
  to time them). Analytic V100, 16 GiB, default order: va is 1-10% faster on the
  five Table 1 models (bench/results/plan_quality_*.txt), the pool on small graphs whose
  tensors are far below a chunk.
"""
from __future__ import annotations

from dataclasses import replace

from allocator.registry import CHUNKED, SIZE_CLASSES

from ..allocation import chunked_allocation, simple_allocation
from ..errors import OutOfRoom, PlanError
from ..facts_memo import memo
from ..policy import RECOMPUTE_OPTION, Knob, PlanRequest, Policy, placement_kinds, register
from ..simulate import simulated_seconds
from ..swap_planner import GraphArrays, PlanOptions, final_arrays, program_of

# The default chunk: the allocation granularity of CUDA's virtual memory on the GPUs we run
# (V100, H100), so a plan's page table maps as it is; --chunk-mib sets another. Analytic V100,
# 16 GiB: the five Table 1 models take 106.7 s at 2 MiB, 106.8 s at 4, 110.9 s at 8.
CHUNK_BYTES = 2 << 20
# Evict ahead to keep a quarter of each class free, next values included, and order the copy
# streams by urgency (measured on the Table 1 models: bench/results/plan_quality_*.txt).
# Recompute chains of up to 16 producers: analytic V100, 16 GiB, default order, NasNet-25
# 6.803 -> 6.681 s against 8, Inception-4 6.163 -> 6.141, the other three unchanged (32 made
# NasNet-25 slower: 8.52 s).
OPTIONS = PlanOptions(headroom=0.25, order_copies=True, kept_ahead=True, max_chain=16)
# The headroom the search may choose instead (a gene): unsearched, the best differs by model and
# order (analytic V100, 16 GiB: NasNet-25 and RNN-8-8K 1.5-1.8% faster at 0 on the default
# order; Inception-4 3% faster at 0.5 with updates when ready; 0.25 elsewhere).
HEADROOM = Knob((0.0, 0.125, 0.25, 0.375, 0.5), OPTIONS.headroom)
# Keep, swap or recompute: a tensor leaving with a stale host copy is dropped and recomputed at
# its next read when its chain costs less than this many times the copies out and back (0: swap
# only, --swap-only); a gene of the search.
RECOMPUTE = Knob((0.0, 0.5, 1.0, 2.0, 4.0), 1.0, seeds=(0.0,))
# How long a recompute chain may grow; a gene too (the best differs by model and order), held at
# its default where recompute is 0 (it then changes nothing).
MAX_CHAIN = Knob((4, 8, 16), OPTIONS.max_chain, inert_unless=RECOMPUTE_OPTION)

def _options(request: PlanRequest) -> PlanOptions:
    chosen = request.policy_options
    return replace(OPTIONS, headroom=float(chosen.get("headroom", OPTIONS.headroom)),
                   recompute=float(chosen.get(RECOMPUTE_OPTION, RECOMPUTE.default)),
                   max_chain=int(chosen.get("max_chain", MAX_CHAIN.default)))


def _chunked(request: PlanRequest):
    chunk = int(request.allocator_options.get("chunk_bytes") or CHUNK_BYTES)

    def make():
        try:
            return chunked_allocation(request.facts, request.budget, chunk, request.profile, request.op_seconds)
        except OutOfRoom as e:
            return e
    # Kept per facts, budget and chunk (its refusal too): the search asks for it once per
    # candidate, and it depends on neither the schedule nor the search's allocation.
    made = memo(request.facts, ("swapadvisor chunked", request.budget.pool_bytes, chunk), make)
    if isinstance(made, OutOfRoom):
        raise made
    return made


def _allocations(request: PlanRequest, kinds: tuple[str, ...]) -> list:
    """The allocations to plan on: the pool's, the chunked one, or both (the chunked one then
    only where the budget holds it). A given allocation (the search's) is used for its kind."""
    given = request.allocation
    out = []
    if SIZE_CLASSES in kinds:
        given_size_classes = given is not None and not given.chunk_bytes
        out.append(given if given_size_classes else simple_allocation(request.facts, request.budget, request.profile,
                                                        request.op_seconds))
    if CHUNKED in kinds:
        try:
            out.append(given if given is not None and given.chunk_bytes else _chunked(request))
        except OutOfRoom:
            if len(kinds) == 1:
                raise
    return out


def _timed(request: PlanRequest):
    """(order, (seconds, final arrays)) of the fastest plan over the allocations, each with and
    without recomputation; without a profile to time them, the first allocation's plan (the
    pool's under auto) and seconds None."""
    g, secs, profile = request.graph, request.op_seconds, request.profile
    order = request.facts.order if request.schedule is None else request.schedule
    best = None
    kinds = placement_kinds(POLICY, request.allocator)
    allocations = _allocations(request, kinds)
    options = _options(request)
    # Recomputing is a per-tensor estimate: with a profile to time them, the swap-only plan is
    # timed too and the faster kept, so keeping, swapping or recomputing never loses to swapping.
    # A value someone chose is planned as chosen: the search's gene (whose values include 0, so the
    # search compares the two itself, at half the cost per candidate) or --swap-only.
    chosen = RECOMPUTE_OPTION in request.policy_options
    variants = [options] if profile is None or options.recompute == 0 or chosen \
        else [options, replace(options, recompute=0.0)]
    for k, alloc in enumerate(allocations if profile is not None else allocations[:1]):
        for opts in variants:
            try:
                final = final_arrays(g, order, alloc, profile, secs, opts)
            except PlanError:
                if k == 0 or len(kinds) == 1:
                    raise
                break       # both kinds: chunks that do not plan (the double pass may not settle) leave the pool's
            t = None if profile is None else simulated_seconds(final[0], GraphArrays.of(g).tensor_bytes, secs, profile)
            if best is None or t < best[0]:
                best = (t, final)
    return order, best


def make(request: PlanRequest):
    order, (_, final) = _timed(request)
    return program_of(request.graph, order, final, request.budget.scratch_bytes, POLICY.name)


def seconds(request: PlanRequest) -> float:
    """The simulated time of ``make(request)``'s Program, planned and simulated on arrays."""
    return _timed(request)[1][0]


POLICY = register(Policy("swapadvisor", "SwapAdvisor: Belady eviction, each tensor kept, swapped or recomputed, "
                         "on a searched schedule and allocation", make, searches=True, seconds=seconds,
                         knobs={"headroom": HEADROOM, RECOMPUTE_OPTION: RECOMPUTE, "max_chain": MAX_CHAIN}, kinds=(SIZE_CLASSES, CHUNKED),
                         options=(RECOMPUTE_OPTION,), budget_ladder=True))
