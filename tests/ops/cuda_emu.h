// Host emulation of the little CUDA the ops' kernels use, so their logic can be checked on a
// machine without a GPU (tests/ops/cuda_emulator.py). A block's 256 threads are real
// threads (a pool made once); __syncthreads is a barrier over them, __shfl_down_sync a
// barrier over a warp;
// __shared__ variables are static (one block runs at a time). Arithmetic is the host's
// IEEE arithmetic with contraction off, so *_rn intrinsics, fma and division round as on
// the GPU; exp/log/tanh come from the host libm.
#pragma once
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

using std::fma;
using std::exp;
using std::log;
using std::tanh;
using std::sqrt;

struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

template <typename A, typename B> inline auto min(A a, B b) { return a < b ? a : b; }
template <typename A, typename B> inline auto max(A a, B b) { return a < b ? b : a; }

inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline float __int_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
inline double __longlong_as_double(unsigned long long v) { double d; std::memcpy(&d, &v, 8); return d; }

constexpr int EMU_THREADS = 256;
inline std::barrier<>* emu_block_barrier;
inline std::barrier<>* emu_warp_barriers[EMU_THREADS / 32];
inline unsigned long long emu_slots[EMU_THREADS];

inline void __syncthreads() { emu_block_barrier->arrive_and_wait(); }

template <typename T>
inline T __shfl_down_sync(unsigned, T v, int offset) {
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    std::memcpy(&emu_slots[t], &v, sizeof(T));
    emu_warp_barriers[warp]->arrive_and_wait();
    T out = v;
    if (lane + offset < 32) std::memcpy(&out, &emu_slots[t + offset], sizeof(T));
    emu_warp_barriers[warp]->arrive_and_wait();
    return out;
}

// A pool of EMU_THREADS threads, made once, that runs one block at a time.
struct EmuPool {
    std::barrier<> start{EMU_THREADS + 1}, done{EMU_THREADS + 1};
    void (*tramp)(void**) = nullptr;
    void** args = nullptr;
    dim3 block;
    EmuPool() {
        emu_block_barrier = new std::barrier<>(EMU_THREADS);
        for (int w = 0; w < EMU_THREADS / 32; ++w) emu_warp_barriers[w] = new std::barrier<>(32);
        for (unsigned t = 0; t < EMU_THREADS; ++t)
            std::thread([this, t] {
                threadIdx = dim3{t, 0, 0};
                for (;;) {
                    start.arrive_and_wait();
                    blockIdx = block;
                    tramp(args);
                    done.arrive_and_wait();
                }
            }).detach();     // never joined: they wait on `start` until the process ends
    }
};

// Runs tramp(args) as every thread of every block of the grid, one block at a time.
extern "C" int emu_launch(void (*tramp)(void**), void** args, unsigned gx, unsigned gy, unsigned gz,
                          unsigned threads) {
    static EmuPool* pool = new EmuPool();
    if (threads != EMU_THREADS) return 1;
    gridDim = dim3{gx, gy, gz};
    blockDim = dim3{threads, 1, 1};
    pool->tramp = tramp;
    pool->args = args;
    for (unsigned z = 0; z < gz; ++z)
        for (unsigned y = 0; y < gy; ++y)
            for (unsigned x = 0; x < gx; ++x) {
                pool->block = dim3{x, y, z};
                pool->start.arrive_and_wait();
                pool->done.arrive_and_wait();
            }
    return 0;
}
