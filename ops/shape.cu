// Data movement without arithmetic (ops/shape.py): concat, split and reshape are all
//   dst[dst_off + r*dst_ld + k] = src[src_off + r*src_ld + k],  r < rows, k < row_bytes
// in bytes. The widest unit (16, 8, 4, 2 or 1 bytes) that divides every address, offset,
// stride and row length is chosen at run time (the same for every thread); the grid
// strides over rows in y and over units within a row in x.
#include "common.cuh"

template <typename U>
__device__ __forceinline__ void copy_rows_as(char* dst, const char* src, i64 rows, i64 row_bytes, i64 dst_ld,
                                             i64 src_ld) {
    const i64 units = row_bytes / (i64)sizeof(U);
    for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
        U* d = reinterpret_cast<U*>(dst + r * dst_ld);
        const U* s = reinterpret_cast<const U*>(src + r * src_ld);
        for (i64 k = global_thread(); k < units; k += global_stride()) d[k] = s[k];
    }
}

KERNEL void copy_rows(char* dst, const char* src, i64 rows, i64 row_bytes, i64 dst_ld, i64 src_ld,
                      i64 dst_off, i64 src_off) {
    dst += dst_off;
    src += src_off;
    const u64 all = reinterpret_cast<u64>(dst) | reinterpret_cast<u64>(src) | (u64)row_bytes | (u64)dst_ld |
                    (u64)src_ld;
    if ((all & 15) == 0) copy_rows_as<uint4>(dst, src, rows, row_bytes, dst_ld, src_ld);
    else if ((all & 7) == 0) copy_rows_as<unsigned long long>(dst, src, rows, row_bytes, dst_ld, src_ld);
    else if ((all & 3) == 0) copy_rows_as<unsigned int>(dst, src, rows, row_bytes, dst_ld, src_ld);
    else if ((all & 1) == 0) copy_rows_as<unsigned short>(dst, src, rows, row_bytes, dst_ld, src_ld);
    else copy_rows_as<unsigned char>(dst, src, rows, row_bytes, dst_ld, src_ld);
}
