// A tiled shared-memory SIMT GEMM shared by dense.cu, attention.cu and conv.cu:
//   C[m, n] = sum over k in [k_begin, k_end) of A(m, k) * B(k, n)
// read through two operand objects (a dense matrix, or an implicit-GEMM gather from a
// convolution's tensors) and written through a store object.
//
// One block computes a BM x BN tile with 256 threads, each holding a TM x TN register
// tile split into two halves (rows ty*TM/2 + i and BM/2 + ty*TM/2 + i, the same for
// columns) so shared-memory reads are broadcast or conflict-free. The next BK-slice of A
// and B is loaded into registers while the current one is multiplied (double buffering
// shared memory instead costs the 128x128 tiles registers they do not have: spills).
// Every output is one thread's fma chain over k in increasing order: deterministic, no atomics. Split-K is
// done by the caller: each split writes its partial tile to scratch and a separate kernel
// adds the partials in split order.
//
// Each thread loads, per slice, the elements of A at one k and EA rows 32 apart (B: one k,
// EB columns 32 apart). What depends only on a row (a column) is worked out once per block
// into shared memory (Operand::row, and the store's Col; in registers they would spill), and the position along k is advanced by BK with adds
// (Operand::next): an implicit GEMM's gather then costs a few adds and multiplies per
// element instead of the integer divisions that splitting k and the column take.
//
// An operand X (A or B) provides
//   using Row = ...;  Row row(int i) const;          per row of A / column of B, once
//   using K = ...;    K at(int k) const;             the thread's position along k, once
//   void next(K&) const;                             k += GEMM_BK
//   T get(const Row&, const K&) const;               called only for i < M (N) and k < k_end
// and the store S provides
//   using Col = ...;  Col col(int n) const;  void put(int m, const Col&, T v) const;
#pragma once
#include "common.cuh"

#define GEMM_THREADS 256
#define GEMM_BK 8

struct TileLarge { static constexpr int BM = 128, BN = 128, BK = GEMM_BK, TM = 8, TN = 8; };
struct TileSmall { static constexpr int BM = 64, BN = 64, BK = GEMM_BK, TM = 4, TN = 4; };

// A position along k in three digits, k = (hi * R1 + mid) * R0 + lo, advanced by GEMM_BK
// with adds and compares (an implicit GEMM's k runs over (channel, row, column) or
// (image, row, column)). KDigits holds the radices and GEMM_BK written in them.
struct KDigits {
    int R1, R0, step_hi, step_mid, step_lo;
    __device__ KDigits(int r1, int r0) : R1(max(r1, 1)), R0(max(r0, 1)) {
        step_lo = GEMM_BK % R0;
        const int q = GEMM_BK / R0;
        step_mid = q % R1;
        step_hi = q / R1;
    }
};

struct KPos {
    int hi, mid, lo;
    __device__ KPos(int k, const KDigits& d) {
        lo = k % d.R0;
        const int q = k / d.R0;
        mid = q % d.R1;
        hi = q / d.R1;
    }
    __device__ void advance(const KDigits& d) {        // lo, mid stay below their radices: one carry each
        lo += d.step_lo;
        const int c0 = lo >= d.R0;
        if (c0) lo -= d.R0;
        mid += d.step_mid + c0;
        const int c1 = mid >= d.R1;
        if (c1) mid -= d.R1;
        hi += d.step_hi + c1;
    }
};

// A dense operand: element (i, k) at p[i * row_stride + k * k_stride].
template <typename T>
struct Strided {
    const T* p; i64 row_stride, k_stride;
    using Row = i64;
    using K = i64;
    __device__ Row row(int i) const { return i * row_stride; }
    __device__ K at(int k) const { return k * k_stride; }
    __device__ void next(K& k) const { k += GEMM_BK * k_stride; }
    __device__ T get(Row r, K k) const { return p[r + k]; }
};

// A dense row-major output C[m * ld + n] (+ bias[n] when given).
template <typename T>
struct RowMajorStore {
    T* c; i64 ld; const T* bias;
    using Col = int;
    __device__ Col col(int n) const { return n; }
    __device__ void put(int m, Col n, T v) const { c[m * ld + n] = bias ? add_rn(v, bias[n]) : v; }
};

// A_K: A's consecutive k are adjacent in memory (else consecutive rows are); B_K likewise
// for B (else consecutive columns are). It only chooses which way threads sweep a tile
// load, so that neighbouring threads read neighbouring addresses.
template <typename T, class Tile, bool A_K, bool B_K, class OA, class OB, class S>
__device__ __forceinline__ void gemm_tile(const OA& opa, const OB& opb, const S& out, int M, int N, int k_begin,
                                          int k_end) {
    constexpr int BM = Tile::BM, BN = Tile::BN, BK = Tile::BK, TM = Tile::TM, TN = Tile::TN;
    constexpr int EA = BM / 32, EB = BN / 32;
    static_assert((BM / TM) * (BN / TN) == GEMM_THREADS, "tile shape must use 256 threads");
    static_assert(BK == 8 && EA * GEMM_THREADS == BM * BK && EB * GEMM_THREADS == BN * BK,
                  "each thread loads one k of 32-apart rows: 256 threads = 8 k x 32 rows");
    __shared__ __align__(16) T As[BK][BM + 4];
    __shared__ __align__(16) T Bs[BK][BN + 4];

    const int t = threadIdx.x;
    const int tx = t % (BN / TN), ty = t / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    // The thread's k within a slice and its first row (column); its others are 32 apart.
    const int a_k = A_K ? t % BK : t / 32, a_i = A_K ? t / BK : t % 32;
    const int b_k = B_K ? t % BK : t / 32, b_i = B_K ? t / BK : t % 32;

    // Each row's (column's) context, worked out once per block; rows past M read row M - 1's.
    __shared__ typename OA::Row a_rows[BM];
    __shared__ typename OB::Row b_rows[BN];
    __shared__ typename S::Col c_cols[BN];
    for (int i = t; i < BM; i += GEMM_THREADS) a_rows[i] = opa.row(min(m0 + i, M - 1));
    for (int i = t; i < BN; i += GEMM_THREADS) {
        b_rows[i] = opb.row(min(n0 + i, N - 1));
        c_cols[i] = out.col(min(n0 + i, N - 1));
    }
    __syncthreads();
    int ka = k_begin + a_k, kb = k_begin + b_k;
    typename OA::K a_pos = opa.at(ka);
    typename OB::K b_pos = opb.at(kb);

    T ra[EA], rb[EB];
    auto load = [&]() {                     // the slice at ka, kb; then both move on by BK
#pragma unroll
        for (int j = 0; j < EA; ++j) {
            const int i = a_i + 32 * j;
            ra[j] = (m0 + i < M && ka < k_end) ? opa.get(a_rows[i], a_pos) : T(0);
        }
#pragma unroll
        for (int j = 0; j < EB; ++j) {
            const int i = b_i + 32 * j;
            rb[j] = (n0 + i < N && kb < k_end) ? opb.get(b_rows[i], b_pos) : T(0);
        }
        ka += BK;
        kb += BK;
        opa.next(a_pos);
        opb.next(b_pos);
    };
    auto stash = [&]() {
#pragma unroll
        for (int j = 0; j < EA; ++j) As[a_k][a_i + 32 * j] = ra[j];
#pragma unroll
        for (int j = 0; j < EB; ++j) Bs[b_k][b_i + 32 * j] = rb[j];
    };

    T acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = T(0);

    if (k_begin < k_end) {
        load();
        stash();
        __syncthreads();
        for (int k0 = k_begin; k0 < k_end; k0 += BK) {
            const bool more = k0 + BK < k_end;
            if (more) load();
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

    // Row by row, as the registers hold them: a thread's neighbouring stores then land in the same
    // sectors close together in time (column by column, an output-bound product such as a weight
    // gradient over a batch of 64 ran 1.8x slower on the H100). The columns' contexts come from
    // shared memory here, after the k loop's last barrier, so they hold no registers during it.
    typename S::Col cols[TN];
#pragma unroll
    for (int j = 0; j < TN; ++j) cols[j] = c_cols[j < TN / 2 ? tx * (TN / 2) + j : BN / 2 + tx * (TN / 2) + (j - TN / 2)];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + (i < TM / 2 ? ty * (TM / 2) + i : BM / 2 + ty * (TM / 2) + (i - TM / 2));
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = n0 + (j < TN / 2 ? tx * (TN / 2) + j : BN / 2 + tx * (TN / 2) + (j - TN / 2));
            if (n < N) out.put(m, cols[j], acc[i][j]);
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
