// Up to six dimensions (padded in front with size 1) and per-operand element strides along
// them (0 along a broadcast dimension), as kernel arguments: the indexing broadcast.cu and
// logic.cu share. One thread per output element maps its flat index to each operand's offset.
#pragma once
#include "common.cuh"

#define BC_DIMS int d0, int d1, int d2, int d3, int d4, int d5
#define BC_STRIDES(p) i64 p##0, i64 p##1, i64 p##2, i64 p##3, i64 p##4, i64 p##5
#define BC_D {d0, d1, d2, d3, d4, d5}
#define BC_INTS(p) int p##0, int p##1, int p##2, int p##3, int p##4, int p##5
#define BC_S(p) {p##0, p##1, p##2, p##3, p##4, p##5}
#define BC_PASS_DIMS d0, d1, d2, d3, d4, d5
#define BC_PASS_STRIDES(p) p##0, p##1, p##2, p##3, p##4, p##5

// Flat row-major index i over dims d -> the offsets of K operands with strides s[k].
template <int K>
__device__ __forceinline__ void bc_offsets(i64 i, const int* d, const i64 (*s)[6], i64* off) {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = 0;
    for (int j = 5; j >= 0; --j) {
        const i64 c = i % d[j];
        i /= d[j];
#pragma unroll
        for (int k = 0; k < K; ++k) off[k] += c * s[k][j];
    }
}
