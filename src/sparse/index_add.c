/* index-add: dense dst += alpha * COO src, the "dense += sparse" accumulation rule.
 * No sort, no atomics: with T threads, thread t owns a contiguous range of destination rows
 * and scans every entry of src, adding the ones whose row it owns. Each destination row
 * therefore receives its entries in src's order whatever the thread count, so the result
 * is bitwise identical for any number of threads. The ranges balance entries, not rows
 * (embedding traffic is skewed towards frequent rows): the rows are cut into coarse
 * buckets, each thread counts the entries of its share of the buckets, and every thread
 * derives the same cut points from the counts. For sparse_dim > 1 the row is the flattened
 * sparse index. */
#include "sparse.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many updated elements one thread does the work. */
#define SG__IADD_PAR_MIN ((int64_t)1 << 15)
/* Entries ahead at which the destination row is prefetched. */
#define SG__IADD_AHEAD 8
#if defined(__GNUC__)
#define SG__PREFETCH(a) __builtin_prefetch(a)
#else
#define SG__PREFETCH(a) ((void)(a))
#endif

/* dr[0..D) += a * vr[0..D) (a == 1: a plain add). Rows of a multiple of 16 elements go
 * in fixed blocks, which compile to straight vector code without remainder handling. */
#define SG__ROW_ADD(T, dr, vr, D, a, one)                                       \
    do {                                                                       \
        if ((D) % 16 == 0) {                                                   \
            for (int64_t j0 = 0; j0 < (D); j0 += 16)                           \
                for (int j = 0; j < 16; j++)                                   \
                    (dr)[j0 + j] += (one) ? (vr)[j0 + j] : (a) * (vr)[j0 + j]; \
        } else {                                                               \
            for (int64_t j = 0; j < (D); j++) (dr)[j] += (one) ? (vr)[j] : (a) * (vr)[j]; \
        }                                                                      \
    } while (0)

/* Adds the entries of src whose row lies in [lo, hi) into dst. */
static void add_range(sg_tensor *dst, const sg_tensor *src, double alpha, int64_t lo, int64_t hi)
{
    int64_t nnz = src->nnz, D = sg__coo_rowsize(src);
    uint64_t span = (uint64_t)(hi - lo);
    const int64_t *idx = src->indices->data;
    bool one = alpha == 1.0;
    if (src->sparse_dim != 1) { /* flatten each entry's index: the generic path */
        SG__DISPATCH_FLOAT(dst->dtype, T, {
            T *restrict d = dst->data;
            const T *restrict v = src->values->data;
            T a = (T)alpha;
            for (int64_t e = 0; e < nnz; e++) {
                int64_t r = sg__coo_row(src, e);
                if ((uint64_t)(r - lo) < span) SG__ROW_ADD(T, d + r * D, v + e * D, D, a, one);
            }
        });
        return;
    }
    size_t rowbytes = (size_t)D * sg_dtype_size(dst->dtype);
    unsigned char *raw = dst->data;
    SG__DISPATCH_FLOAT(dst->dtype, T, {
        T *restrict d = dst->data;
        const T *restrict v = src->values->data;
        T a = (T)alpha;
        for (int64_t e = 0; e < nnz; e++) {
            if (e + SG__IADD_AHEAD < nnz) { /* destination rows are random: fetch ahead */
                int64_t rp = idx[e + SG__IADD_AHEAD];
                if ((uint64_t)(rp - lo) < span)
                    for (size_t off = 0; off < rowbytes; off += 64) SG__PREFETCH(raw + (size_t)rp * rowbytes + off);
            }
            int64_t r = idx[e];
            if ((uint64_t)(r - lo) >= span) continue;
            if (one) SG__ROW_ADD(T, d + r * D, v + e * D, D, a, true);
            else SG__ROW_ADD(T, d + r * D, v + e * D, D, a, false);
        }
    });
}

#ifdef _OPENMP
/* Coarse buckets of rows used to balance the threads' shares of the entries. */
#define SG__IADD_BUCKETS 4096

/* Row where thread k of T starts: 0 for k = 0, rows for k = T, else the end of the first
 * bucket by which at least nnz*k/T entries have been counted. */
static int64_t cut_point(const int64_t *count, int64_t nb, int64_t width, int64_t rows, int64_t nnz, int64_t k,
                         int64_t T)
{
    if (k <= 0) return 0;
    if (k >= T) return rows;
    int64_t seen = 0, want = nnz * k / T;
    for (int64_t b = 0; b < nb; b++) {
        seen += count[b];
        if (seen >= want) return (b + 1) * width < rows ? (b + 1) * width : rows;
    }
    return rows;
}
#endif

void sg__index_add_unchecked(sg_tensor *dst, const sg_tensor *src, double alpha)
{
    int64_t rows = sg__coo_rows(src), nnz = src->nnz;
    if (nnz == 0 || rows == 0) return;
    int nt = sg__threads(dst->ctx);
    if (nt > rows) nt = (int)rows;
    if (nt <= 1 || nnz * sg__coo_rowsize(src) < SG__IADD_PAR_MIN) {
        add_range(dst, src, alpha, 0, rows);
        return;
    }
#ifdef _OPENMP
    int shift = 0; /* buckets of 2^shift rows, at most SG__IADD_BUCKETS of them */
    while (((rows - 1) >> shift) >= SG__IADD_BUCKETS) shift++;
    int64_t width = (int64_t)1 << shift, nb = ((rows - 1) >> shift) + 1;
    int64_t count[SG__IADD_BUCKETS]; /* entries per bucket */
    const int64_t *idx = src->indices->data;
    bool flat = src->sparse_dim == 1;
#pragma omp parallel num_threads(nt)
    {
        int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
        int64_t b0 = nb * t / T, b1 = nb * (t + 1) / T; /* buckets this thread counts */
        for (int64_t b = b0; b < b1; b++) count[b] = 0;
        for (int64_t e = 0; e < nnz; e++) {
            int64_t b = (flat ? idx[e] : sg__coo_row(src, e)) >> shift;
            if (b >= b0 && b < b1) count[b]++;
        }
#pragma omp barrier
        int64_t lo = cut_point(count, nb, width, rows, nnz, t, T);
        int64_t hi = cut_point(count, nb, width, rows, nnz, t + 1, T);
        if (hi > lo) add_range(dst, src, alpha, lo, hi);
    }
#else
    add_range(dst, src, alpha, 0, rows);
#endif
}

/* Validates dst += alpha * src; records and returns the error, SG_OK if none. */
static int check_index_add(const char *op, const sg_tensor *dst, const sg_tensor *src, double alpha)
{
    if (!dst || !src) {
        sg_ctx *ctx = dst ? dst->ctx : src ? src->ctx : NULL;
        return ctx ? sg__failc(ctx, SG_ERR_NULL, "%s: NULL tensor", op) : SG_ERR_NULL;
    }
    sg_ctx *ctx = dst->ctx;
    if (src->ctx != ctx) return sg__failc(ctx, SG_ERR_ARG, "%s: tensors of different contexts", op);
    if (dst->layout != SG_DENSE || src->layout != SG_COO)
        return sg__failc(ctx, SG_ERR_LAYOUT, "%s: dense destination and COO source needed", op);
    if (!sg__is_float(dst->dtype) || dst->dtype != src->dtype)
        return sg__failc(ctx, SG_ERR_DTYPE, "%s: destination and source need the same float dtype", op);
    if (!sg__same_shape(dst, src)) {
        char a[64], b[64];
        return sg__failc(ctx, SG_ERR_SHAPE, "%s: shapes %s and %s differ", op,
                         sg__shape_str(dst, a, sizeof a), sg__shape_str(src, b, sizeof b));
    }
    if (!isfinite(alpha)) return sg__failc(ctx, SG_ERR_VALUE, "%s: alpha is not finite", op);
    /* src may have been assembled by hand from its parts: check its indices. */
    const int64_t *idx = src->indices->data;
    int64_t nnz = src->nnz;
    for (int d = 0; d < src->sparse_dim; d++)
        for (int64_t e = 0; e < nnz; e++) {
            int64_t i = idx[(int64_t)d * nnz + e];
            if (i < 0 || i >= src->shape[d])
                return sg__failc(ctx, SG_ERR_INDEX, "%s: index %lld of entry %lld is outside [0, %lld) in dim %d",
                                 op, (long long)i, (long long)e, (long long)src->shape[d], d);
        }
    return SG_OK;
}

int sg_index_add_scaled_(sg_tensor *dst, const sg_tensor *src, double alpha)
{
    int rc = check_index_add("sg_index_add_scaled_", dst, src, alpha);
    if (rc) return rc;
    sg__index_add_unchecked(dst, src, alpha);
    return SG_OK;
}

int sg_index_add_(sg_tensor *dst, const sg_tensor *src)
{
    int rc = check_index_add("sg_index_add_", dst, src, 1.0);
    if (rc) return rc;
    sg__index_add_unchecked(dst, src, 1.0);
    return SG_OK;
}
