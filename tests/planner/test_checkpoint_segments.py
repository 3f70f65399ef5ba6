"""checkpoint's segments on graphs that branch: every droppable tensor crossing a cut is kept,
so recreating a dropped tensor never needs more than its own segment's tensors; the walk goes
from the most segments to one; and the paper-scale defect it fixes (NasNet-25's
chains around every n-th tensor) stays fixed."""
import numpy as np
import pytest

import zoo
from planner.facts import GraphFacts
from planner.policies.checkpoint import droppable_tensors, segmentations


def chain_sizes(g, order, firm):
    """Per dropped tensor, how many dropped tensors recreating it recreates (itself included):
    the droppable, not kept ancestors reached through their producers."""
    dropped = {t for t in droppable_tensors(g, order) if not firm[t]}
    producer = {t: n.id for n in g.nodes for t in n.outputs}
    sizes = []
    for t in dropped:
        seen, stack = {t}, [t]
        while stack:
            for i in g.nodes[producer[stack.pop()]].inputs:
                if i in dropped and i not in seen:
                    seen.add(i)
                    stack.append(i)
        sizes.append(len(seen))
    return sizes


@pytest.mark.parametrize("family", ["nasnet", "inception", "wresnet", "rnn"])
def test_a_chain_stays_inside_its_segment(family):
    g = zoo.tiny(family)
    order = GraphFacts(g).order
    cuts = list(segmentations(g, order))
    for cut in cuts:
        sizes = chain_sizes(g, order, cut.firm)
        assert max(sizes, default=0) <= cut.longest, (family, cut.segments)
    # from the most segments to one, which keeps no droppable tensor
    segments = [cut.segments for cut in cuts]
    assert segments == sorted(segments, reverse=True) and segments[-1] == 1, segments
    droppable = droppable_tensors(g, order)
    assert not cuts[-1].firm[droppable].any()
    assert cuts[0].segments > 1, f"{family}: no cut at all"


def test_nasnet_25_chains_are_a_cell_long():
    """NasNet-25 at the paper's batch: cutting every 64th droppable tensor left a median chain of
    1,614 nodes (chains ran around the cut through a parallel branch) and checkpoint did not
    plan at 16 GiB. Cut where the bytes crossing are fewest, no chain exceeds its segment, and
    the segments are a few cells long, not the whole network."""
    g = zoo.build("nasnet-25", batch=64)
    order = GraphFacts(g).order
    first = next(iter(segmentations(g, order)))
    sizes = chain_sizes(g, order, first.firm)
    assert max(sizes) <= first.longest < len(droppable_tensors(g, order)) / 4, (max(sizes), first.longest)
    assert np.median(sizes) < 100, np.median(sizes)
