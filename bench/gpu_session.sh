#!/usr/bin/env bash
# The CUDA backend's checks on a lent GPU, in parts that each fit one device call (< 10 min).
#
#   bash bench/gpu_session.sh PART [OUT_DIR]
#
# PART:
#   tests     every gpu-marked test (8 pytest workers where pytest-xdist is there): each kernel
#             against numpy, streams and pinned copies, graph capture and replay, the link,
#             bit-identical training at 1/4 of the peak (plain and sanitized), the sanitizer
#             catching a removed edge, the command line on the GPU. (The torch-marked tests,
#             float64 training beside PyTorch, need no GPU: CI runs them.)
#   bench     python -m bench.cuda_vs_torch: our time per iteration beside PyTorch's; under
#             budgets of 0.5 and 0.25 of the peak, simulated beside measured; the pinned link
#             beside the swap copies' rate while compute runs; each GPU profile saved in OUT_DIR
#   quick     the same benchmark on smaller configurations (a first look, ~2 min)
#   shapes    python -m bench.kernel_shapes: each convolution and dense shape of wresnet-50-2 and
#             rnn-4-2k on our kernels beside PyTorch's, the costliest gaps first (for kernel tuning)
#   memcheck  the bit-identity tests of one family under compute-sanitizer's memcheck
#             (out-of-bounds and misaligned accesses in our kernels)
#
# Each part writes <part>_<device>_<date>.txt into OUT_DIR (default bench/results; on the
# device machine pass "$OUT" so the file comes back), and exits with the test/benchmark's
# status. The kernel cache lives in /tmp, so the first part of a fresh machine compiles
# every kernel first (NVRTC, in parallel: well under a minute on 16 cores).
#
# NUMBA_DISABLE_JIT=1 unless the caller sets it: a fresh machine would spend minutes of device
# time compiling the planner's swap pass (numba) for graphs that plan in about a second as
# plain Python (measured: the benchmark's quick configurations, 0.3-1.0 CPU-s each). What is
# checked here is the CUDA path; the compiled pass is checked against the same code in CI.
#
# The backend calls cuda.bindings.driver (13.x) alone; NVRTC goes through cuda.core 1.x. The part
# stops at once, with status 3, if the machine's cuda.core is another major version. Wheels carried in .whl/
# (see the device tool's README: pip download --no-deps ... cuda-core==1.2.2
# cuda-bindings==13.4.4 cuda-pathfinder) are installed into /tmp/site first when present.
# compute-sanitizer (memcheck) works on Firecracker machines, not under gVisor (uname -r
# says 4.4.0 there), where it answers "Device not supported" (the device tool's KINDS.md).
set -uo pipefail
part=${1:?usage: bash bench/gpu_session.sh tests|bench|quick|shapes|memcheck [OUT_DIR]}
out=${2:-bench/results}
case $part in tests|bench|quick|shapes|memcheck) ;; *) echo "unknown part '$part' (tests, bench, quick, shapes, memcheck)" >&2; exit 2 ;; esac
mkdir -p "$out"
export PYTHONUNBUFFERED=1 SWAPENGINE_KERNEL_CACHE=${SWAPENGINE_KERNEL_CACHE:-/tmp/swapengine-kernels}
export NUMBA_DISABLE_JIT=${NUMBA_DISABLE_JIT:-1}
py=$(command -v python3 || command -v python)
if compgen -G ".whl/*.whl" >/dev/null; then
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "could not install the wheels in .whl/" >&2; exit 3; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -c 'A-Za-z0-9.\n' '-' | tr -s '-')
file="$out/${part}_${device:-no-gpu}_$(date +%F).txt"
{
  echo "# bash bench/gpu_session.sh $part   $(date -u +%FT%TZ)   ${device:-no GPU found}   $($py --version 2>&1)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null
  $py - <<'PY'
from importlib import metadata
names = ("cuda-core", "cuda-bindings", "cuda-pathfinder", "nvidia-cuda-nvrtc", "numpy", "torch")
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"
print("# packages: " + ", ".join(f"{n} {version(n)}" for n in names))
PY
} >"$file"
if ! $py -c "import sys, cuda.core; sys.exit(int(cuda.core.__version__.split('.')[0]) != 1)" 2>>"$file"; then
  echo "# cuda.core 1.x is needed (see the packages line); carry cuda-core 1.2.2, cuda-bindings 13.4.4 and" \
       "cuda-pathfinder as wheels in .whl/ (status 3)" | tee -a "$file" >&2
  exit 3
fi
# Every kernel compiled once, in parallel, before the parts' processes ask for them.
$py -c "from engine.backends import nvrtc; nvrtc.compile_all('sm_90')" 2>&1 | tail -3 | tee -a "$file"
# One hung test must not take the whole device call with it (pytest-timeout is in the image).
timeout_flag=$($py -c "import pytest_timeout" 2>/dev/null && echo "--timeout=240")
workers=$($py -c "import xdist" 2>/dev/null && echo "-n 8")
case $part in
  tests)    # only the files that hold gpu tests: others may import what the image lacks (jsonschema)
            $py -m pytest -q -m gpu -p no:cacheprovider -rfE --durations=15 $timeout_flag $workers \
              $(grep -rl --include='test_*.py' 'mark.gpu' tests) 2>&1 | tee -a "$file" ;;
  bench)    $py -m bench.cuda_vs_torch --budget 0.5,0.25 --save-profiles "$out" 2>&1 | tee -a "$file" ;;
  quick)    $py -m bench.cuda_vs_torch --quick --iterations 5 --budget 0.5,0.25 --save-profiles "$out" 2>&1 | tee -a "$file" ;;
  shapes)   { $py -m bench.kernel_shapes && $py -m bench.kernel_shapes --model rnn-4-2k --batch 64 --size 32; } 2>&1 | tee -a "$file" ;;
  memcheck) compute-sanitizer --tool memcheck --error-exitcode 9 \
              $py -m pytest -q -p no:cacheprovider tests/engine/backends/test_cuda.py \
              -k "quarter_budget and rnn" 2>&1 | tee -a "$file" ;;
esac
status=${PIPESTATUS[0]}
echo "# exit status $status" >>"$file"
exit "$status"
