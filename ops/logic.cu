// Comparisons and logic (ops/logic.py). Every output is bool: one byte, 0 or 1. Operands are
// read as in broadcast.cu: up to six dimensions (padded in front with size 1), each operand
// with its own element strides along the output's dimensions (0 along a broadcast one); one
// thread per output element (grid-stride), no atomics. C's comparisons are IEEE's, as
// numpy's (NaN compares unequal to everything), so every kernel gives numpy's bits.
// compare's inputs come as void* with a dtype code (COMPARE_DTYPES: float32 float64 int32
// int64 bool), as math.cu's cast; the code is compiled twice, `_f64` for float64 inputs.
#include "strides.cuh"

typedef unsigned char u8;

// fn: 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge.
template <typename T>
__device__ __forceinline__ u8 lg_cmp(int fn, T u, T v) {
    switch (fn) {
        case 0: return u == v;
        case 1: return u != v;
        case 2: return u < v;
        case 3: return u <= v;
        case 4: return u > v;
        default: return u >= v;
    }
}

template <typename T>
__device__ __forceinline__ void compare_t(u8* y, const void* pa, const void* pb, int fn, const int* d,
                                          const i64 (*s)[6], i64 n) {
    const T* a = static_cast<const T*>(pa);
    const T* b = static_cast<const T*>(pb);
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 off[2];
        bc_offsets<2>(i, d, s, off);
        y[i] = lg_cmp<T>(fn, a[off[0]], b[off[1]]);
    }
}

__device__ __forceinline__ void compare_any(u8* y, const void* a, const void* b, int dtype, int fn, BC_DIMS,
                                            BC_STRIDES(sa), BC_STRIDES(sb), i64 n) {
    const int d[6] = BC_D;
    const i64 s[2][6] = {BC_S(sa), BC_S(sb)};
    switch (dtype) {
        case 0: compare_t<float>(y, a, b, fn, d, s, n); break;
        case 1: compare_t<double>(y, a, b, fn, d, s, n); break;
        case 2: compare_t<int>(y, a, b, fn, d, s, n); break;
        case 3: compare_t<long long>(y, a, b, fn, d, s, n); break;
        default: compare_t<u8>(y, a, b, fn, d, s, n); break;
    }
}
KERNEL void logic_compare(u8* y, const void* a, const void* b, int dtype, int fn, BC_DIMS, BC_STRIDES(sa),
                          BC_STRIDES(sb), i64 n) {
    compare_any(y, a, b, dtype, fn, BC_PASS_DIMS, BC_PASS_STRIDES(sa), BC_PASS_STRIDES(sb), n);
}
KERNEL void logic_compare_f64(u8* y, const void* a, const void* b, int dtype, int fn, BC_DIMS, BC_STRIDES(sa),
                              BC_STRIDES(sb), i64 n) {
    compare_any(y, a, b, dtype, fn, BC_PASS_DIMS, BC_PASS_STRIDES(sa), BC_PASS_STRIDES(sb), n);
}

// y = x fn value. mode 0: in x's (float) type T, value rounded to T; 1: in int64 (iv);
// 2: in double (fv), x converted exactly.
template <typename T>
__device__ __forceinline__ void compare_scalar_t(u8* y, const void* px, int fn, int mode, double fv, i64 iv,
                                                 i64 n) {
    const T* x = static_cast<const T*>(px);
    const T tv = mode == 0 ? (T)fv : T(0);        // a float x only: no out-of-range int conversion
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        const T u = x[i];
        y[i] = mode == 0 ? lg_cmp<T>(fn, u, tv) : mode == 1 ? lg_cmp<i64>(fn, (i64)u, iv)
                                                            : lg_cmp<double>(fn, (double)u, fv);
    }
}
__device__ __forceinline__ void compare_scalar_any(u8* y, const void* x, int dtype, int fn, int mode, double fv,
                                                   i64 iv, i64 n) {
    switch (dtype) {
        case 0: compare_scalar_t<float>(y, x, fn, mode, fv, iv, n); break;
        case 1: compare_scalar_t<double>(y, x, fn, mode, fv, iv, n); break;
        case 2: compare_scalar_t<int>(y, x, fn, mode, fv, iv, n); break;
        case 3: compare_scalar_t<long long>(y, x, fn, mode, fv, iv, n); break;
        default: compare_scalar_t<u8>(y, x, fn, mode, fv, iv, n); break;
    }
}
KERNEL void logic_compare_scalar(u8* y, const void* x, int dtype, int fn, int mode, double fv, i64 iv, i64 n) {
    compare_scalar_any(y, x, dtype, fn, mode, fv, iv, n);
}
KERNEL void logic_compare_scalar_f64(u8* y, const void* x, int dtype, int fn, int mode, double fv, i64 iv,
                                     i64 n) {
    compare_scalar_any(y, x, dtype, fn, mode, fv, iv, n);
}

// y = a fn b of bools (any nonzero byte is true), fn: 0 and, 1 or, 2 xor.
KERNEL void logic_binary(u8* y, const u8* a, const u8* b, int fn, BC_DIMS, BC_STRIDES(sa), BC_STRIDES(sb),
                         i64 n) {
    const int d[6] = BC_D;
    const i64 s[2][6] = {BC_S(sa), BC_S(sb)};
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 off[2];
        bc_offsets<2>(i, d, s, off);
        const bool u = a[off[0]] != 0, v = b[off[1]] != 0;
        y[i] = fn == 0 ? (u && v) : fn == 1 ? (u || v) : (u != v);
    }
}

KERNEL void logic_not(u8* y, const u8* x, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) y[i] = x[i] == 0;
}

// any (fn 0) or all (fn 1) of the R reduced elements of each output, one thread per output;
// kept dims kd (x's strides ks) enumerate y row-major, reduced dims rd (strides rs) the rest.
KERNEL void logic_reduce(u8* y, const u8* x, int fn, BC_INTS(kd), BC_STRIDES(ks), BC_INTS(rd), BC_STRIDES(rs),
                         i64 R, i64 n) {
    const int kdim[6] = BC_S(kd);
    const i64 s[1][6] = {BC_S(ks)};
    const int rdim[6] = BC_S(rd);
    const i64 rstr[6] = BC_S(rs);
    const bool all = fn == 1;
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 base[1];
        bc_offsets<1>(i, kdim, s, base);
        bool acc = all;
        int c[6] = {0, 0, 0, 0, 0, 0};
        i64 off = base[0];
        for (i64 r = 0; r < R; ++r) {
            const bool v = x[off] != 0;
            acc = all ? (acc && v) : (acc || v);
            for (int j = 5; j >= 0; --j) {          // next coordinate: carry from the last dim
                off += rstr[j];
                if (++c[j] < rdim[j]) break;
                off -= (i64)rdim[j] * rstr[j];
                c[j] = 0;
            }
        }
        y[i] = acc;
    }
}
