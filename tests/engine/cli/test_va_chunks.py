"""`--allocator va` for the online policies on the built-in model with no other flag (issue 44):
without --chunk-mib the chunk is chosen from the pool (a fixed 20 MiB chunk was larger than the
whole pool, so no budget the growth tried could plan), the run says which, and it trains bit for
bit under the sanitizer; a chunk given larger than the pool is refused in one line."""
import pytest

from allocator.virtual_chunks import DEFAULT_CHUNK_BYTES, PAGE, VirtualChunkAllocator, chunk_for_pool
from allocator.online import AllocatorMisuse
from engine.train import main

BUILT_IN = ["--backend", "cpu", "--iterations", "2", "--measure-iterations", "1", "--sanitize"]


@pytest.mark.parametrize("pool,chunk", [(0, PAGE), (100 << 10, PAGE), (1 << 20, 64 << 10),
                                        ((1 << 20) - 1, 32 << 10), (64 << 20, 4 << 20),
                                        (16 << 30, DEFAULT_CHUNK_BYTES)])
def test_the_chunk_is_the_largest_power_of_two_at_most_a_sixteenth_of_the_pool(pool, chunk):
    assert chunk_for_pool(pool) == chunk
    if pool >= PAGE:
        assert VirtualChunkAllocator(pool).chunk_bytes == chunk


def test_a_chunk_larger_than_the_pool_is_refused_naming_the_largest_that_fits():
    with pytest.raises(AllocatorMisuse, match=r"a chunk of 20.0 MiB is larger than the whole pool of 1.0 MiB; "
                                              r"give a chunk of at most 1.0 MiB \(--chunk-mib 1\)"):
        VirtualChunkAllocator(1 << 20, chunk_bytes=20 << 20)


@pytest.mark.parametrize("policy", ["window", "lms", "tflms", "smartswap"])
def test_va_trains_the_built_in_model_with_no_other_flag(policy, tmp_path, capsys):
    assert main(BUILT_IN + ["--policy", policy, "--allocator", "va", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    plan_line = next(line for line in out.splitlines() if line.startswith("plan ") and policy in line)
    assert "(va, " in plan_line and " KiB chunks)" in plan_line
    assert "parameters identical to the unlimited run: yes" in out


def test_an_explicit_chunk_larger_than_the_pool_is_one_line(tmp_path, capsys):
    assert main(BUILT_IN + ["--policy", "window", "--allocator", "va", "--chunk-mib", "20",
                            "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--chunk-mib" in err and "larger than the whole pool" in err
