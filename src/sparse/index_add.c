/* index-add: dense dst += alpha * COO src, the "dense += sparse" accumulation rule.
 * No sort, no atomics: with T threads, thread t owns the destination rows
 * [R*t/T, R*(t+1)/T) and scans every entry of src, adding the ones whose row it owns.
 * Each destination row therefore receives its entries in src's order whatever the thread
 * count, so the result is bitwise identical for any number of threads. For sparse_dim > 1
 * the row is the flattened sparse index. */
#include "sparse.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many updated elements one thread does the work. */
#define SG__IADD_PAR_MIN ((int64_t)1 << 15)

/* Adds the entries of src whose row lies in [lo, hi) into dst. */
static void add_range(sg_tensor *dst, const sg_tensor *src, double alpha, int64_t lo, int64_t hi)
{
    int64_t nnz = src->nnz, D = sg__coo_rowsize(src);
    uint64_t span = (uint64_t)(hi - lo);
    const int64_t *idx = src->indices->data;
    bool one = alpha == 1.0, flat = src->sparse_dim == 1;
    SG__DISPATCH_FLOAT(dst->dtype, T, {
        T *restrict d = dst->data;
        const T *restrict v = src->values->data;
        T a = (T)alpha;
        for (int64_t e = 0; e < nnz; e++) {
            int64_t r = flat ? idx[e] : sg__coo_row(src, e);
            if ((uint64_t)(r - lo) >= span) continue;
            T *restrict dr = d + r * D;
            const T *restrict vr = v + e * D;
            if (one)
                for (int64_t j = 0; j < D; j++) dr[j] += vr[j];
            else
                for (int64_t j = 0; j < D; j++) dr[j] += a * vr[j];
        }
    });
}

void sg__index_add_unchecked(sg_tensor *dst, const sg_tensor *src, double alpha)
{
    int64_t rows = sg__coo_rows(src);
    if (src->nnz == 0 || rows == 0) return;
    int nt = sg__threads(dst->ctx);
    if (nt > rows) nt = (int)rows;
    if (nt <= 1 || src->nnz * sg__coo_rowsize(src) < SG__IADD_PAR_MIN) {
        add_range(dst, src, alpha, 0, rows);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
        add_range(dst, src, alpha, rows * t / T, rows * (t + 1) / T);
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
