"""SmartSwap's detailed monitoring mode: its records are the graph's and the Program's (operator
names, tensor ids, readers, addresses at the Program's placements), and turning it on during
training changes no trained parameter."""
import numpy as np
import pytest

import zoo
from engine import iteration_stream as st
from engine.autodiff import make_optimizer
from engine.backend_registry import choose
from engine.detailed_monitor import DetailedMonitor
from engine.library.stream_plans import StreamPlanner, WindowObserver
from engine.op_monitor import Monitor
from engine.profile import analytic_profile
from engine.program import COMPUTE, SWAP_IN
from engine.training import StreamTrainer
from planner.facts import GraphFacts


def graphs():
    return st.IterationGraphs(lambda seq: zoo.build("gpt-tiny", size=seq, positions=16), make_optimizer("adamw"), 2)


def planner(g, placement=None) -> StreamPlanner:
    return StreamPlanner("smartswap", int(0.5 * GraphFacts(g.micro(16)).peak_bytes), analytic_profile("v100"),
                         placement, monitor=Monitor())


def test_records_are_the_graphs_and_the_programs():
    g = graphs()
    sp = planner(g)
    micro = g.micro(16)
    update = g.update(micro)
    programs = {id(micro): sp.plan(micro).program, id(update): sp.plan(update).program}
    assert programs[id(micro)].count(SWAP_IN) > 0            # a plan that swaps: addresses change between stays
    mon = DetailedMonitor(lambda x: programs[id(x)])
    rec = mon.observe(5, [micro, update], 0.25)
    assert (rec.iteration, rec.seconds, rec.graphs) == (5, 0.25, (micro.name, update.name))
    assert mon.durations == [(5, 0.25)] and list(mon.records) == [rec]
    k = 0
    for gi, x in enumerate((micro, update)):
        prog = programs[id(x)]
        computes = [ins for ins in prog.instrs if ins.kind == COMPUTE]
        assert [ins.target for ins in computes if not ins.recompute] == list(prog.schedule)
        where = {}      # tensor -> the object the Program last put it in, walked independently
        for ins in prog.instrs:
            if ins.kind == SWAP_IN:
                where[ins.target] = ins.obj
            if ins.kind != COMPUTE:
                continue
            node = x.nodes[ins.target]
            assert mon.names[rec.op_name[k]] == node.name and rec.op_graph[k] == gi
            assert rec.n_inputs[k] == len(node.inputs) and rec.recompute[k] == ins.recompute
            rows = slice(rec.io_ptr[k], rec.io_ptr[k + 1])
            ts = list(node.inputs) + list(node.outputs)
            assert rec.tensor[rows].tolist() == ts
            objs = list(ins.objects)
            for t, o in zip(node.inputs, objs):            # an input is where it was written or swapped in
                if t in where:
                    assert o == where[t]
            for t, o in zip(node.outputs, objs[len(node.inputs):]):
                where[t] = o
            assert rec.address[rows].tolist() == [int(prog.arena.object_offset[o]) for o in objs]
            assert [mon.dtypes[d] for d in rec.dtype[rows]] == [x.tensors[t].dtype for t in ts]
            assert rec.readers[rows].tolist() == [sum(t in n.inputs for n in x.nodes) for t in ts]
            for t, origin in zip(ts, rec.origin[rows]):
                p = x.producer[t]
                want = x.nodes[p].name if p >= 0 else f"{x.tensors[t].kind.name.lower()}:{x.tensors[t].name}"
                assert mon.names[origin] == want
            k += 1
    assert k == rec.operators and rec.io_ptr[-1] == len(rec.tensor)
    # a swapped tensor read at two addresses in one iteration: the record sees both
    row_graph = np.repeat(rec.op_graph, np.diff(rec.io_ptr))
    moved = [t for t in set(rec.tensor[row_graph == 0].tolist())
             if len(set(rec.address[(rec.tensor == t) & (row_graph == 0)].tolist())) > 1]
    assert moved
    assert any(mon.names[o].startswith("block0/") for o in rec.origin)      # the layer scope is there


def test_only_the_last_records_are_kept_and_an_unrun_graph_is_named():
    g = graphs()
    sp = planner(g)
    micro = g.micro(8)
    prog = sp.plan(micro).program
    mon = DetailedMonitor(lambda x: prog, keep=2)
    for i in range(4):
        mon.observe(i, [micro], 0.1)
    assert [r.iteration for r in mon.records] == [2, 3] and len(mon.durations) == 4
    with pytest.raises(KeyError, match=micro.name):
        sp.program_ran(micro)           # planned, but no runner was handed out for it


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # the forced non-finite step
def test_turning_it_on_changes_no_trained_parameter():
    settings = st.StreamSettings((8, 12, 16), eval_every=6, accumulate=2, nonfinite_at=(3,), seed=0)
    runs = []
    for detailed in (False, True):
        g = graphs()
        sp = planner(g, choose("cpu"))
        mon = sp.monitor
        det = DetailedMonitor(sp.program_ran) if detailed else None
        observe = WindowObserver(mon, det)
        trainer = StreamTrainer(graphs(), st.IterationPlan(settings), sp.runner_for, after=observe)
        try:
            for _ in range(10):
                trainer.step()
        finally:
            sp.close()
        runs.append((trainer.named_state(), det, observe))
    (plain, _, _), (watched, det, observe) = runs
    assert set(plain) == set(watched) and all(np.array_equal(plain[k], watched[k]) for k in plain)
    assert len(det.durations) == len(observe.windows) >= 5
    assert all(d > 0 for _, _, _, d in observe.windows)
    last = det.records[-1]
    computes = {e.graph.name: sum(ins.kind == COMPUTE for ins in e.program.instrs) for e in sp.cache.entries.values()}
    assert len(last.graphs) == 3 and last.operators == sum(computes[name] for name in last.graphs)  # 2 micro, update
