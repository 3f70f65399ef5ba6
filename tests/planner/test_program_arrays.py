"""planner.program_arrays: a Program's instructions as flat arrays and back, the same instructions."""
import numpy as np

from engine.program import COMPUTE, SWAP_IN, SWAP_OUT, Instr
from planner.program_arrays import ProgramArrays, _sorted_unique_rows


def test_rows_come_back_sorted_without_repeats():
    rng = np.random.default_rng(0)
    rows = [list(rng.integers(0, 20, rng.integers(0, 6))) for _ in range(500)] + [[], [3, 3, 1], [7]]
    ptr, values = _sorted_unique_rows(rows)
    assert len(ptr) == len(rows) + 1
    for k, row in enumerate(rows):
        assert values[ptr[k]:ptr[k + 1]].tolist() == sorted({int(x) for x in row})
    ptr, values = _sorted_unique_rows([])
    assert ptr.tolist() == [0] and len(values) == 0


def test_instructions_round_trip_with_their_deps_sorted_and_unique():
    instrs = [Instr(SWAP_IN, 4, 0, (), True, []),
              Instr(COMPUTE, 2, -1, (0, 1), True, [0, 0]),
              Instr(SWAP_OUT, 5, 1, (), False, [1, 0, 1]),
              Instr(COMPUTE, 3, -1, (1,), True, [2, 1], True)]
    arrays = ProgramArrays.of(instrs)
    assert arrays.dep_ptr.tolist() == [0, 0, 1, 3, 5] and arrays.deps.tolist() == [0, 0, 1, 1, 2]
    back = arrays.to_instrs()
    assert [(i.kind, i.target, i.obj, i.objects, i.copy, list(i.deps), i.recompute) for i in back] == [
        (SWAP_IN, 4, 0, (), True, [], False), (COMPUTE, 2, -1, (0, 1), True, [0], False),
        (SWAP_OUT, 5, 1, (), False, [0, 1], False), (COMPUTE, 3, -1, (1,), True, [1, 2], True)]
