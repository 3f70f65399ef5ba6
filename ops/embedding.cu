// Embedding lookup and its deterministic scatter-add gradient (ops/embedding.py). Ids are
// int32 (no suffix) or int64 (_i64); the gradient is numpy's bits: each table row is
// 0 + dy[p1] + dy[p2] + ... over its positions p1 < p2 < ..., and no atomics are used.
#include "common.cuh"

#define EMB_COLS_PER_THREAD 8      // columns one thread accumulates per pass over the ids

// y[p, c] = table[ids[p], c]; an id outside [0, V) gives NaN rather than a stray read.
template <typename T, typename I>
__device__ __forceinline__ void emb_fwd_t(T* y, const T* table, const I* ids, i64 V, int D, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        const i64 p = i / D, c = i - p * D;
        const i64 id = (i64)ids[p];
        y[i] = (id >= 0 && id < V) ? table[id * D + c] : quiet_nan<T>();
    }
}

// Block v: in chunks of REDUCE_THREADS positions, each thread flags its position if its id
// is v, thread 0 lists the flagged ones in order, then every thread adds those rows'
// columns (threadIdx.x + k*REDUCE_THREADS) to its running sums.
template <typename T, typename I>
__device__ __forceinline__ void emb_bwd_t(T* dtable, const I* ids, const T* dy, i64 V, int D, i64 n) {
    __shared__ int hits[REDUCE_THREADS];
    __shared__ int flag[REDUCE_THREADS];
    __shared__ int count;
    constexpr int SPAN = REDUCE_THREADS * EMB_COLS_PER_THREAD;
    for (i64 v = blockIdx.x; v < V; v += gridDim.x) {
        for (int c0 = 0; c0 < D; c0 += SPAN) {
            T acc[EMB_COLS_PER_THREAD];
#pragma unroll
            for (int k = 0; k < EMB_COLS_PER_THREAD; ++k) acc[k] = T(0);
            for (i64 base = 0; base < n; base += REDUCE_THREADS) {
                const i64 p = base + threadIdx.x;
                flag[threadIdx.x] = p < n && (i64)ids[p] == v;
                __syncthreads();
                if (threadIdx.x == 0) {
                    int h = 0;
                    for (int t = 0; t < REDUCE_THREADS; ++t)
                        if (flag[t]) hits[h++] = t;
                    count = h;
                }
                __syncthreads();
                for (int h = 0; h < count; ++h) {
                    const T* row = dy + (base + hits[h]) * D;
#pragma unroll
                    for (int k = 0; k < EMB_COLS_PER_THREAD; ++k) {
                        const int c = c0 + threadIdx.x + k * REDUCE_THREADS;
                        if (c < D) acc[k] = add_rn(acc[k], row[c]);
                    }
                }
                __syncthreads();
            }
#pragma unroll
            for (int k = 0; k < EMB_COLS_PER_THREAD; ++k) {
                const int c = c0 + threadIdx.x + k * REDUCE_THREADS;
                if (c < D) dtable[v * D + c] = acc[k];
            }
        }
    }
}

#define EMB_KERNELS(T, I, SUFFIX)                                                                        \
    KERNEL void embedding_fwd##SUFFIX(T* y, const T* table, const I* ids, i64 V, int D, i64 n) {          \
        emb_fwd_t(y, table, ids, V, D, n);                                                               \
    }                                                                                                    \
    KERNEL void __launch_bounds__(REDUCE_THREADS) embedding_bwd##SUFFIX(T* dtable, const I* ids,          \
                                                                        const T* dy, i64 V, int D, i64 n) { \
        emb_bwd_t(dtable, ids, dy, V, D, n);                                                             \
    }

EMB_KERNELS(float, int, )
EMB_KERNELS(float, long long, _i64)
EMB_KERNELS(double, int, _f64)
EMB_KERNELS(double, long long, _f64_i64)
