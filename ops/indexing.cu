// Indexing operators (ops/indexing.py): gather (torch.gather), index_select
// (torch.index_select) and their gradients, deterministic scatter-adds. Index tensors are
// int32 (no suffix) or int64 (_i64). Forward kernels are gathers, one thread per output
// element (grid-stride); an index outside [0, size) gives NaN rather than a stray read (the
// numpy twin raises). The gradient kernels run one thread per dx element, looping over the
// positions that may contribute to it in increasing position order, adding the matching
// dy's left to right from 0 (numpy's np.add.at order), so they give numpy's bits and use no
// atomics. That loop is O(n * k) (k: the index's length along the axis), fine for the sizes
// imported graphs use today; a sort-by-index pass would make it O(n log n) if it matters.
#include "common.cuh"

#define IX_DIMS(p) int p##0, int p##1, int p##2, int p##3, int p##4, int p##5
#define IX_D(p) {p##0, p##1, p##2, p##3, p##4, p##5}

// Flat row-major index i over the six dims d -> its coordinates c.
__device__ __forceinline__ void ix_coords(i64 i, const int* d, i64* c) {
    for (int j = 5; j >= 0; --j) {
        c[j] = i % d[j];
        i /= d[j];
    }
}

// Row-major offset of coordinates c in a contiguous tensor of dims d.
__device__ __forceinline__ i64 ix_offset(const i64* c, const int* d) {
    i64 o = 0;
    for (int j = 0; j < 6; ++j) o = o * d[j] + c[j];
    return o;
}

// gather: y (index's dims e) at coordinates c = x at c with c[axis] replaced by index[c].
// Dims are padded in front to six with size 1; axis counts in the padded dims.
template <typename T, typename I>
__device__ __forceinline__ void gather_fwd_t(T* y, const T* x, const I* index, const int* xd, const int* e,
                                             int axis, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 c[6];
        ix_coords(i, e, c);
        const i64 k = (i64)index[i];
        if (k < 0 || k >= xd[axis]) {
            y[i] = quiet_nan<T>();
            continue;
        }
        c[axis] = k;
        y[i] = x[ix_offset(c, xd)];
    }
}

// gather_grad: dx (x's dims xd) at coordinates c sums dy[p] over the positions p of the
// index (dims e) that share c's other coordinates and hold c[axis], in increasing p
// (along the axis); zero where c lies outside the index's extent in another dimension.
template <typename T, typename I>
__device__ __forceinline__ void gather_bwd_t(T* dx, const I* index, const T* dy, const int* xd, const int* e,
                                             int axis, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 c[6];
        ix_coords(i, xd, c);
        const i64 want = c[axis];
        bool inside = true;
        for (int j = 0; j < 6; ++j)
            if (j != axis && c[j] >= e[j]) inside = false;
        T acc = T(0);
        if (inside) {
            c[axis] = 0;
            const i64 base = ix_offset(c, e);
            i64 step = 1;
            for (int j = axis + 1; j < 6; ++j) step *= e[j];
            for (i64 k = 0; k < e[axis]; ++k) {     // O(k) per dx element: see the file's comment
                const i64 p = base + k * step;
                if ((i64)index[p] == want) acc = add_rn(acc, dy[p]);
            }
        }
        dx[i] = acc;
    }
}

// index_select: x viewed as [O, A, R], y as [O, J, R]: y[o, j, r] = x[o, index[j], r].
template <typename T, typename I>
__device__ __forceinline__ void index_select_fwd_t(T* y, const T* x, const I* index, i64 A, i64 J, i64 R, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        const i64 r = i % R, j = (i / R) % J, o = i / (R * J);
        const i64 k = (i64)index[j];
        y[i] = (k >= 0 && k < A) ? x[(o * A + k) * R + r] : quiet_nan<T>();
    }
}

// index_select_grad: dx[o, a, r] = 0 + dy[o, j1, r] + dy[o, j2, r] + ... over the j1 < j2 < ...
// with index[j] == a (O(J) per dx element: see the file's comment).
template <typename T, typename I>
__device__ __forceinline__ void index_select_bwd_t(T* dx, const I* index, const T* dy, i64 A, i64 J, i64 R,
                                                   i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        const i64 r = i % R, a = (i / R) % A, o = i / (R * A);
        T acc = T(0);
        for (i64 j = 0; j < J; ++j)
            if ((i64)index[j] == a) acc = add_rn(acc, dy[(o * J + j) * R + r]);
        dx[i] = acc;
    }
}

#define IX_KERNELS(T, I, SUFFIX)                                                                             \
    KERNEL void gather_fwd##SUFFIX(T* y, const T* x, const I* index, IX_DIMS(xd), IX_DIMS(e), int axis,     \
                                   i64 n) {                                                                 \
        const int xd[6] = IX_D(xd), e[6] = IX_D(e);                                                          \
        gather_fwd_t(y, x, index, xd, e, axis, n);                                                           \
    }                                                                                                        \
    KERNEL void gather_bwd##SUFFIX(T* dx, const I* index, const T* dy, IX_DIMS(xd), IX_DIMS(e), int axis,   \
                                   i64 n) {                                                                 \
        const int xd[6] = IX_D(xd), e[6] = IX_D(e);                                                          \
        gather_bwd_t(dx, index, dy, xd, e, axis, n);                                                         \
    }                                                                                                        \
    KERNEL void index_select_fwd##SUFFIX(T* y, const T* x, const I* index, i64 A, i64 J, i64 R, i64 n) {    \
        index_select_fwd_t(y, x, index, A, J, R, n);                                                         \
    }                                                                                                        \
    KERNEL void index_select_bwd##SUFFIX(T* dx, const I* index, const T* dy, i64 A, i64 J, i64 R, i64 n) {  \
        index_select_bwd_t(dx, index, dy, A, J, R, n);                                                       \
    }

IX_KERNELS(float, int, )
IX_KERNELS(float, long long, _i64)
IX_KERNELS(double, int, _f64)
IX_KERNELS(double, long long, _f64_i64)
