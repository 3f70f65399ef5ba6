// Broadcasting operators (ops/broadcast.py): binary arithmetic, where, broadcast_to, the
// reductions and their gradients. Shapes come as up to six dimensions (padded in front with
// size 1), each operand with its own element strides along the output's dimensions (0
// along a broadcast dimension), so every kernel is a gather: one thread per output element
// (grid-stride), no atomics. The element-wise formulas use non-fusing arithmetic in
// PyTorch's and numpy's evaluation order, so they give numpy's bits; sums run left to
// right in double (numpy sums pairwise), so reduce's sum and mean agree to rounding only.
#include "strides.cuh"

// fn: 0 add, 1 sub, 2 mul, 3 div, 4 maximum, 5 minimum (numpy's NaN-propagating ones).
template <typename T>
__device__ __forceinline__ T bc_apply(int fn, T u, T v) {
    switch (fn) {
        case 0: return add_rn(u, v);
        case 1: return sub_rn(u, v);
        case 2: return mul_rn(u, v);
        case 3: return u / v;
        case 4: return (u >= v || u != u) ? u : v;
        default: return (u <= v || u != u) ? u : v;
    }
}

template <typename T>
__device__ __forceinline__ void bcast_binary_t(T* y, const T* a, const T* b, int fn, BC_DIMS, BC_STRIDES(sa),
                                               BC_STRIDES(sb), i64 n) {
    const int d[6] = BC_D;
    const i64 s[2][6] = {BC_S(sa), BC_S(sb)};
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 off[2];
        bc_offsets<2>(i, d, s, off);
        y[i] = bc_apply(fn, a[off[0]], b[off[1]]);
    }
}
KERNEL void bcast_binary(float* y, const float* a, const float* b, int fn, BC_DIMS, BC_STRIDES(sa),
                         BC_STRIDES(sb), i64 n) {
    bcast_binary_t(y, a, b, fn, BC_PASS_DIMS, BC_PASS_STRIDES(sa), BC_PASS_STRIDES(sb), n);
}
KERNEL void bcast_binary_f64(double* y, const double* a, const double* b, int fn, BC_DIMS, BC_STRIDES(sa),
                             BC_STRIDES(sb), i64 n) {
    bcast_binary_t(y, a, b, fn, BC_PASS_DIMS, BC_PASS_STRIDES(sa), BC_PASS_STRIDES(sb), n);
}

// The gradient of maximum (fn 0) or minimum (fn 1) for input `side` (0: a, 1: b), PyTorch's
// rule: where(a == b, dy / 2, dy), then 0 where the other input wins.
template <typename T>
__device__ __forceinline__ void minmax_grad_t(T* dx, const T* a, const T* b, const T* dy, int fn, int side,
                                              BC_DIMS, BC_STRIDES(sa), BC_STRIDES(sb), BC_STRIDES(sg), i64 n) {
    const int d[6] = BC_D;
    const i64 s[3][6] = {BC_S(sa), BC_S(sb), BC_S(sg)};
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 off[3];
        bc_offsets<3>(i, d, s, off);
        const T u = a[off[0]], v = b[off[1]], g = dy[off[2]];
        // this input loses: (max, a) a < b; (max, b) a > b; (min, a) a > b; (min, b) a < b
        const bool loses = (fn == side) ? (u < v) : (u > v);
        dx[i] = u == v ? g / T(2) : (loses ? T(0) : g);
    }
}
KERNEL void minmax_grad(float* dx, const float* a, const float* b, const float* dy, int fn, int side, BC_DIMS,
                        BC_STRIDES(sa), BC_STRIDES(sb), BC_STRIDES(sg), i64 n) {
    minmax_grad_t(dx, a, b, dy, fn, side, BC_PASS_DIMS, BC_PASS_STRIDES(sa), BC_PASS_STRIDES(sb),
                  BC_PASS_STRIDES(sg), n);
}
KERNEL void minmax_grad_f64(double* dx, const double* a, const double* b, const double* dy, int fn, int side,
                            BC_DIMS, BC_STRIDES(sa), BC_STRIDES(sb), BC_STRIDES(sg), i64 n) {
    minmax_grad_t(dx, a, b, dy, fn, side, BC_PASS_DIMS, BC_PASS_STRIDES(sa), BC_PASS_STRIDES(sb),
                  BC_PASS_STRIDES(sg), n);
}

// y = cond ? a : b; cond is one byte per element (numpy's bool).
template <typename T>
__device__ __forceinline__ void bcast_where_t(T* y, const unsigned char* c, const T* a, const T* b, BC_DIMS,
                                              BC_STRIDES(sc), BC_STRIDES(sa), BC_STRIDES(sb), i64 n) {
    const int d[6] = BC_D;
    const i64 s[3][6] = {BC_S(sc), BC_S(sa), BC_S(sb)};
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 off[3];
        bc_offsets<3>(i, d, s, off);
        y[i] = c[off[0]] ? a[off[1]] : b[off[2]];
    }
}
KERNEL void bcast_where(float* y, const unsigned char* c, const float* a, const float* b, BC_DIMS,
                        BC_STRIDES(sc), BC_STRIDES(sa), BC_STRIDES(sb), i64 n) {
    bcast_where_t(y, c, a, b, BC_PASS_DIMS, BC_PASS_STRIDES(sc), BC_PASS_STRIDES(sa), BC_PASS_STRIDES(sb), n);
}
KERNEL void bcast_where_f64(double* y, const unsigned char* c, const double* a, const double* b, BC_DIMS,
                            BC_STRIDES(sc), BC_STRIDES(sa), BC_STRIDES(sb), i64 n) {
    bcast_where_t(y, c, a, b, BC_PASS_DIMS, BC_PASS_STRIDES(sc), BC_PASS_STRIDES(sa), BC_PASS_STRIDES(sb), n);
}

// y = x broadcast to y's shape (numpy's broadcast_to, PyTorch's expand), materialised.
template <typename T>
__device__ __forceinline__ void bcast_copy_t(T* y, const T* x, BC_DIMS, BC_STRIDES(sx), i64 n) {
    const int d[6] = BC_D;
    const i64 s[1][6] = {BC_S(sx)};
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 off[1];
        bc_offsets<1>(i, d, s, off);
        y[i] = x[off[0]];
    }
}
KERNEL void bcast_copy(float* y, const float* x, BC_DIMS, BC_STRIDES(sx), i64 n) {
    bcast_copy_t(y, x, BC_PASS_DIMS, BC_PASS_STRIDES(sx), n);
}
KERNEL void bcast_copy_f64(double* y, const double* x, BC_DIMS, BC_STRIDES(sx), i64 n) {
    bcast_copy_t(y, x, BC_PASS_DIMS, BC_PASS_STRIDES(sx), n);
}

// Walks the reduced elements of one output: offsets base + sum_j c_j * rs[j] over the
// reduced dims rd (row-major, a counter per dim), calling f(offset) R times in order.
template <class F>
__device__ __forceinline__ void bc_for_reduced(i64 base, const int* rd, const i64* rs, i64 R, F f) {
    int c[6] = {0, 0, 0, 0, 0, 0};
    i64 off = base;
    for (i64 r = 0; r < R; ++r) {
        f(off);
        for (int j = 5; j >= 0; --j) {          // next coordinate: carry from the last dim
            off += rs[j];
            if (++c[j] < rd[j]) break;
            off -= (i64)rd[j] * rs[j];
            c[j] = 0;
        }
    }
}

// One thread per output element, looping over its R reduced elements in row-major order.
// fn: 0 sum, 1 mean (the sum / R), 2 amax, 3 amin (NaN-propagating, as numpy's).
// Kept dims kd (x's strides ks) enumerate y in row-major order, with or without keepdim.
template <typename T>
__device__ __forceinline__ void bcast_reduce_t(T* y, const T* x, int fn, BC_INTS(kd), BC_STRIDES(ks),
                                               BC_INTS(rd), BC_STRIDES(rs), i64 R, i64 n) {
    const int kdim[6] = BC_S(kd);
    const i64 s[1][6] = {BC_S(ks)};
    const int rdim[6] = BC_S(rd);
    const i64 rstr[6] = BC_S(rs);
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 base[1];
        bc_offsets<1>(i, kdim, s, base);
        if (fn <= 1) {
            double acc = 0.0;
            bc_for_reduced(base[0], rdim, rstr, R, [&](i64 o) { acc = acc + (double)x[o]; });
            T v = (T)acc;
            y[i] = fn == 1 ? v / (T)R : v;
        } else {
            T acc = x[base[0]];
            const bool mx = fn == 2;
            bc_for_reduced(base[0], rdim, rstr, R, [&](i64 o) {
                const T v = x[o];
                const bool keep = acc != acc || (mx ? acc >= v : acc <= v);
                acc = keep ? acc : v;
            });
            y[i] = acc;
        }
    }
}
KERNEL void bcast_reduce(float* y, const float* x, int fn, BC_INTS(kd), BC_STRIDES(ks), BC_INTS(rd),
                         BC_STRIDES(rs), i64 R, i64 n) {
    bcast_reduce_t(y, x, fn, BC_PASS_STRIDES(kd), BC_PASS_STRIDES(ks), BC_PASS_STRIDES(rd), BC_PASS_STRIDES(rs),
                   R, n);
}
KERNEL void bcast_reduce_f64(double* y, const double* x, int fn, BC_INTS(kd), BC_STRIDES(ks), BC_INTS(rd),
                             BC_STRIDES(rs), i64 R, i64 n) {
    bcast_reduce_t(y, x, fn, BC_PASS_STRIDES(kd), BC_PASS_STRIDES(ks), BC_PASS_STRIDES(rd), BC_PASS_STRIDES(rs),
                   R, n);
}

// amax/amin's gradient, step 1: count[i] = how many reduced elements of x equal y[i].
template <typename T>
__device__ __forceinline__ void reduce_count_t(T* count, const T* x, const T* y, BC_INTS(kd), BC_STRIDES(ks),
                                               BC_INTS(rd), BC_STRIDES(rs), i64 R, i64 n) {
    const int kdim[6] = BC_S(kd);
    const i64 s[1][6] = {BC_S(ks)};
    const int rdim[6] = BC_S(rd);
    const i64 rstr[6] = BC_S(rs);
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 base[1];
        bc_offsets<1>(i, kdim, s, base);
        const T m = y[i];
        i64 k = 0;
        bc_for_reduced(base[0], rdim, rstr, R, [&](i64 o) { k += x[o] == m ? 1 : 0; });
        count[i] = (T)k;
    }
}
KERNEL void reduce_count(float* count, const float* x, const float* y, BC_INTS(kd), BC_STRIDES(ks),
                         BC_INTS(rd), BC_STRIDES(rs), i64 R, i64 n) {
    reduce_count_t(count, x, y, BC_PASS_STRIDES(kd), BC_PASS_STRIDES(ks), BC_PASS_STRIDES(rd),
                   BC_PASS_STRIDES(rs), R, n);
}
KERNEL void reduce_count_f64(double* count, const double* x, const double* y, BC_INTS(kd), BC_STRIDES(ks),
                             BC_INTS(rd), BC_STRIDES(rs), i64 R, i64 n) {
    reduce_count_t(count, x, y, BC_PASS_STRIDES(kd), BC_PASS_STRIDES(ks), BC_PASS_STRIDES(rd),
                   BC_PASS_STRIDES(rs), R, n);
}

// Step 2, one thread per x element: dx = (dy / count) * (x == y), PyTorch's mask / count
// rule; y, dy and count are read through strides that are 0 along the reduced dims.
template <typename T>
__device__ __forceinline__ void reduce_spread_t(T* dx, const T* x, const T* y, const T* dy, const T* count,
                                                BC_DIMS, BC_STRIDES(sy), i64 n) {
    const int d[6] = BC_D;
    const i64 s[1][6] = {BC_S(sy)};
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 o[1];
        bc_offsets<1>(i, d, s, o);
        const T q = dy[o[0]] / count[o[0]];
        dx[i] = mul_rn(q, x[i] == y[o[0]] ? T(1) : T(0));
    }
}
KERNEL void reduce_spread(float* dx, const float* x, const float* y, const float* dy, const float* count, BC_DIMS,
                          BC_STRIDES(sy), i64 n) {
    reduce_spread_t(dx, x, y, dy, count, BC_PASS_DIMS, BC_PASS_STRIDES(sy), n);
}
KERNEL void reduce_spread_f64(double* dx, const double* x, const double* y, const double* dy, const double* count,
                              BC_DIMS, BC_STRIDES(sy), i64 n) {
    reduce_spread_t(dx, x, y, dy, count, BC_PASS_DIMS, BC_PASS_STRIDES(sy), n);
}
