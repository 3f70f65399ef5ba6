// A tiled shared-memory SIMT GEMM shared by dense.cu and conv.cu:
//   C[m, n] = sum over k in [k_begin, k_end) of A(m, k) * B(k, n)
// where a problem object P says how to read A and B (a dense matrix in either layout, or
// an implicit-GEMM gather from a convolution's tensors) and where to store C.
//
// One block computes a BM x BN tile with 256 threads, each holding a TM x TN register
// tile split into two halves (rows ty*TM/2 + i and BM/2 + ty*TM/2 + i, the same for
// columns) so shared-memory reads are broadcast or conflict-free. The next BK-slice of A
// and B is loaded into registers while the current one is multiplied. Every output is
// one thread's fma chain over k in increasing order: deterministic, no atomics. Split-K
// is done by the caller: each split writes its partial tile to scratch and a separate
// kernel adds the partials in split order.
#pragma once
#include "common.cuh"

#define GEMM_THREADS 256

struct TileLarge { static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8; };
struct TileSmall { static constexpr int BM = 64, BN = 64, BK = 8, TM = 4, TN = 4; };

// A_K: A's consecutive k are adjacent in memory (else consecutive m are); B_K likewise
// for B (else consecutive n are). It only chooses which way threads sweep a tile load,
// so that neighbouring threads read neighbouring addresses.
template <typename T, class Tile, bool A_K, bool B_K, class P>
__device__ __forceinline__ void gemm_tile(const P& p, int M, int N, int k_begin, int k_end) {
    constexpr int BM = Tile::BM, BN = Tile::BN, BK = Tile::BK, TM = Tile::TM, TN = Tile::TN;
    constexpr int EA = BM * BK / GEMM_THREADS, EB = BN * BK / GEMM_THREADS;
    static_assert((BM / TM) * (BN / TN) == GEMM_THREADS, "tile shape must use 256 threads");
    static_assert(EA * GEMM_THREADS == BM * BK && EB * GEMM_THREADS == BN * BK, "tile loads must divide evenly");
    __shared__ __align__(16) T As[BK][BM + 4];
    __shared__ __align__(16) T Bs[BK][BN + 4];

    const int t = threadIdx.x;
    const int tx = t % (BN / TN), ty = t / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    // Which tile element each thread loads (fixed for the whole k loop).
    int a_m[EA], a_k[EA], b_k[EB], b_n[EB];
#pragma unroll
    for (int j = 0; j < EA; ++j) {
        if (A_K) { a_k[j] = t % BK; a_m[j] = t / BK + j * (GEMM_THREADS / BK); }
        else     { a_m[j] = t % BM; a_k[j] = t / BM + j * (GEMM_THREADS / BM); }
    }
#pragma unroll
    for (int j = 0; j < EB; ++j) {
        if (B_K) { b_k[j] = t % BK; b_n[j] = t / BK + j * (GEMM_THREADS / BK); }
        else     { b_n[j] = t % BN; b_k[j] = t / BN + j * (GEMM_THREADS / BN); }
    }

    T ra[EA], rb[EB];
    auto load = [&](int k0) {
#pragma unroll
        for (int j = 0; j < EA; ++j) {
            const int m = m0 + a_m[j], k = k0 + a_k[j];
            ra[j] = (m < M && k < k_end) ? p.a(m, k) : T(0);
        }
#pragma unroll
        for (int j = 0; j < EB; ++j) {
            const int n = n0 + b_n[j], k = k0 + b_k[j];
            rb[j] = (n < N && k < k_end) ? p.b(k, n) : T(0);
        }
    };
    auto stash = [&]() {
#pragma unroll
        for (int j = 0; j < EA; ++j) As[a_k[j]][a_m[j]] = ra[j];
#pragma unroll
        for (int j = 0; j < EB; ++j) Bs[b_k[j]][b_n[j]] = rb[j];
    };

    T acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = T(0);

    if (k_begin < k_end) {
        load(k_begin);
        stash();
        __syncthreads();
        for (int k0 = k_begin; k0 < k_end; k0 += BK) {
            const bool more = k0 + BK < k_end;
            if (more) load(k0 + BK);
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                T a[TM], b[TN];
#pragma unroll
                for (int i = 0; i < TM / 2; ++i) {
                    a[i] = As[kk][ty * (TM / 2) + i];
                    a[i + TM / 2] = As[kk][BM / 2 + ty * (TM / 2) + i];
                }
#pragma unroll
                for (int j = 0; j < TN / 2; ++j) {
                    b[j] = Bs[kk][tx * (TN / 2) + j];
                    b[j + TN / 2] = Bs[kk][BN / 2 + tx * (TN / 2) + j];
                }
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
            }
            __syncthreads();
            if (more) {
                stash();
                __syncthreads();
            }
        }
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + (i < TM / 2 ? ty * (TM / 2) + i : BM / 2 + ty * (TM / 2) + (i - TM / 2));
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = n0 + (j < TN / 2 ? tx * (TN / 2) + j : BN / 2 + tx * (TN / 2) + (j - TN / 2));
            if (n < N) p.store(m, n, acc[i][j]);
        }
    }
}

// out[i] = sum over s of part[s * total + i], s = 0, 1, ... in order, plus bias[i % bias_period]
// when has_bias. The second pass of split-K.
template <typename T>
__device__ __forceinline__ void splitk_reduce_t(T* out, const T* part, const T* bias, i64 total, int splits,
                                                int bias_period, int has_bias) {
    for (i64 i = global_thread(); i < total; i += global_stride()) {
        T acc = part[i];
        for (int s = 1; s < splits; ++s) acc = add_rn(acc, part[(i64)s * total + i]);
        if (has_bias) acc = add_rn(acc, bias[i % bias_period]);
        out[i] = acc;
    }
}
