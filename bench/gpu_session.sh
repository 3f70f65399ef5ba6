#!/usr/bin/env bash
# The CUDA backend's checks on a lent GPU, in parts that each fit one device call (< 10 min).
#
#   bash bench/gpu_session.sh PART [OUT_DIR]
#
# PART:
#   tests     every gpu-marked test: each kernel against numpy, streams and pinned copies,
#             graph capture and replay, the link, bit-identical training at 1/4 of the peak
#             (plain and sanitized), the sanitizer catching a removed edge
#   bench     python -m bench.cuda_vs_torch: our time per iteration beside PyTorch's; under
#             a budget that forces swapping, simulated beside measured; the pinned link
#             beside the swap copies' rate while compute runs
#   quick     the same benchmark on smaller configurations (a first look, ~2 min)
#   memcheck  the bit-identity tests of one family under compute-sanitizer's memcheck
#             (out-of-bounds and misaligned accesses in our kernels)
#
# Each part writes <part>_<device>_<date>.txt into OUT_DIR (default bench/results; on the
# device machine pass "$OUT" so the file comes back), and exits with the test/benchmark's
# status. The kernel cache lives in /tmp, so the first part of a fresh machine compiles
# every kernel (NVRTC, in parallel: well under a minute on 16 cores).
set -uo pipefail
part=${1:?usage: bash bench/gpu_session.sh tests|bench|quick|memcheck [OUT_DIR]}
out=${2:-bench/results}
case $part in tests|bench|quick|memcheck) ;; *) echo "unknown part '$part' (tests, bench, quick, memcheck)" >&2; exit 2 ;; esac
mkdir -p "$out"
export PYTHONUNBUFFERED=1 SWAPENGINE_KERNEL_CACHE=${SWAPENGINE_KERNEL_CACHE:-/tmp/swapengine-kernels}
py=$(command -v python3 || command -v python)
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -c 'A-Za-z0-9.\n' '-' | tr -s '-')
file="$out/${part}_${device:-no-gpu}_$(date +%F).txt"
{
  echo "# bash bench/gpu_session.sh $part   $(date -u +%FT%TZ)   ${device:-no GPU found}   $($py --version 2>&1)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null
} >"$file"
case $part in
  tests)    $py -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tee -a "$file" ;;
  bench)    $py -m bench.cuda_vs_torch 2>&1 | tee -a "$file" ;;
  quick)    $py -m bench.cuda_vs_torch --quick --iterations 5 2>&1 | tee -a "$file" ;;
  memcheck) compute-sanitizer --tool memcheck --error-exitcode 9 \
              $py -m pytest -q -p no:cacheprovider tests/engine/backends/test_cuda.py \
              -k "quarter_budget and rnn" 2>&1 | tee -a "$file" ;;
esac
status=${PIPESTATUS[0]}
echo "# exit status $status" >>"$file"
exit "$status"
