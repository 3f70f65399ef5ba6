// Fully connected layer (ops/dense.py) on the tiled GEMM of gemm.cuh.
//   gemm_nt: C[M,N] = A[M,K] @ B[N,K]^T (+ bias[N])   forward:      y  = x @ w.T + b
//   gemm_nn: C[M,N] = A[M,K] @ B[K,N]                 data grad:    dx = dy @ w
//   gemm_tn: C[M,N] = A[K,M]^T @ B[K,N]               weight grad:  dw = dy.T @ x
// Each comes with 128x128 tiles and, suffixed _s, 64x64 tiles for small products; the
// launch descriptor picks. With splits > 1, blockIdx.z is the split, k runs over
// [z*k_chunk, (z+1)*k_chunk) and C is scratch holding splits partial products that
// gemm_splitk_reduce then adds in split order (adding the bias there).
#include "gemm.cuh"

template <typename T, class Tile, bool TRANS_A, bool TRANS_B>
__device__ __forceinline__ void dense_gemm(T* C, const T* A, const T* B, const T* bias, int M, int N, int K,
                                           int has_bias, int k_chunk) {
    // A is [M,K] (or [K,M] when TRANS_A); B is [K,N] (or [N,K] when TRANS_B).
    const int split = blockIdx.z;
    const Strided<T> a = TRANS_A ? Strided<T>{A, 1, M} : Strided<T>{A, K, 1};
    const Strided<T> b = TRANS_B ? Strided<T>{B, K, 1} : Strided<T>{B, 1, N};
    const RowMajorStore<T> c{C + (i64)split * M * N, N, has_bias != 0 && gridDim.z == 1 ? bias : nullptr};
    const int k_begin = split * k_chunk;
    const int k_end = min(K, k_begin + k_chunk);
    // A's k is contiguous unless A is transposed; B's k is contiguous only when B is.
    gemm_tile<T, Tile, !TRANS_A, TRANS_B>(a, b, c, M, N, k_begin, k_end);
}

#define DENSE_GEMM(NAME, TILE, TA, TB)                                                                \
    KERNEL void __launch_bounds__(GEMM_THREADS, 2) NAME(float* C, const float* A, const float* B,        \
                                                     const float* bias, int M, int N, int K,          \
                                                     int has_bias, int k_chunk) {                     \
        dense_gemm<float, TILE, TA, TB>(C, A, B, bias, M, N, K, has_bias, k_chunk);                   \
    }                                                                                                 \
    KERNEL void __launch_bounds__(GEMM_THREADS) NAME##_f64(double* C, const double* A, const double* B, \
                                                           const double* bias, int M, int N, int K,     \
                                                           int has_bias, int k_chunk) {                 \
        dense_gemm<double, TILE, TA, TB>(C, A, B, bias, M, N, K, has_bias, k_chunk);                  \
    }

DENSE_GEMM(gemm_nt, TileLarge, false, true)
DENSE_GEMM(gemm_nt_s, TileSmall, false, true)
DENSE_GEMM(gemm_nn, TileLarge, false, false)
DENSE_GEMM(gemm_nn_s, TileSmall, false, false)
DENSE_GEMM(gemm_tn, TileLarge, true, false)
DENSE_GEMM(gemm_tn_s, TileSmall, true, false)

KERNEL void gemm_splitk_reduce(float* out, const float* part, const float* bias, i64 total, int splits,
                               int bias_period, int has_bias) {
    splitk_reduce_t(out, part, bias, total, splits, bias_period, has_bias);
}
KERNEL void gemm_splitk_reduce_f64(double* out, const double* part, const double* bias, i64 total, int splits,
                                   int bias_period, int has_bias) {
    splitk_reduce_t(out, part, bias, total, splits, bias_period, has_bias);
}

// db[c] = sum over rows r of dy[r, c], rows added in order: one thread per column, so
// neighbouring threads read neighbouring addresses.
template <typename T>
__device__ __forceinline__ void sum_rows_t(T* out, const T* x, int rows, int cols) {
    for (i64 c = global_thread(); c < cols; c += global_stride()) {
        T acc = T(0);
        for (int r = 0; r < rows; ++r) acc = add_rn(acc, x[(i64)r * cols + c]);
        out[c] = acc;
    }
}
KERNEL void sum_rows(float* out, const float* x, int rows, int cols) { sum_rows_t(out, x, rows, cols); }
KERNEL void sum_rows_f64(double* out, const double* x, int rows, int cols) { sum_rows_t(out, x, rows, cols); }
