/* index-add: dense dst += alpha * COO src, the "dense += sparse" accumulation rule.
 * No sort, no atomics: the destination rows are cut into one range per thread (through
 * sg__parallel_for over the ranges, at most sg__parallel_threads of the work), and the
 * range's task scans every entry of src, adding the ones whose row it owns. Each
 * destination row therefore receives its entries in src's order wherever the cuts fall, so
 * the result is bitwise identical for any number of threads. The ranges balance entries,
 * not rows (embedding traffic is skewed towards frequent rows): a strided sample of the
 * entries' rows, counted in coarse buckets, places the cut points. For sparse_dim > 1 the
 * row is the flattened sparse index. add_range has a variant per CPU level picked at run
 * time (SG__HOT_CLONES, src/core/core.h); an element's additions are the same in each. */
#include "sparse/sparse.h"

#include <math.h>

/* Entries ahead at which the destination row is prefetched; entries per block. */
#define SG__IADD_AHEAD 8
#define SG__IADD_BLOCK 256

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
SG__HOT_BODY void add_range__body(sg_tensor *dst, const sg_tensor *src, double alpha, int64_t lo, int64_t hi)
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
    if (lo == 0 && hi == sg__coo_rows(src)) { /* every row: a straight pass */
        SG__DISPATCH_FLOAT(dst->dtype, T, {
            T *restrict d = dst->data;
            const T *restrict v = src->values->data;
            T a = (T)alpha;
            for (int64_t e = 0; e < nnz; e++) {
                if (e + SG__IADD_AHEAD < nnz) sg__prefetch_row(raw, idx[e + SG__IADD_AHEAD], rowbytes, rowbytes);
                if (one) SG__ROW_ADD(T, d + idx[e] * D, v + e * D, D, a, true);
                else SG__ROW_ADD(T, d + idx[e] * D, v + e * D, D, a, false);
            }
        });
        return;
    }
    /* A share of the rows: entries go in blocks; first the block's entries whose row is in
     * range are listed (no branch, so a thread that owns half the rows mispredicts
     * nothing), then added, with each destination row prefetched a few entries ahead. */
    int64_t list[SG__IADD_BLOCK];
    for (int64_t e0 = 0; e0 < nnz; e0 += SG__IADD_BLOCK) {
        int64_t e1 = e0 + SG__IADD_BLOCK < nnz ? e0 + SG__IADD_BLOCK : nnz, m = 0;
        for (int64_t e = e0; e < e1; e++) {
            list[m] = e;
            m += (uint64_t)(idx[e] - lo) < span;
        }
        for (int64_t k = 0; k < m && k < SG__IADD_AHEAD; k++) sg__prefetch_row(raw, idx[list[k]], rowbytes, rowbytes);
        SG__DISPATCH_FLOAT(dst->dtype, T, {
            T *restrict d = dst->data;
            const T *restrict v = src->values->data;
            T a = (T)alpha;
            for (int64_t k = 0; k < m; k++) {
                if (k + SG__IADD_AHEAD < m) sg__prefetch_row(raw, idx[list[k + SG__IADD_AHEAD]], rowbytes, rowbytes);
                int64_t e = list[k];
                if (one) SG__ROW_ADD(T, d + idx[e] * D, v + e * D, D, a, true);
                else SG__ROW_ADD(T, d + idx[e] * D, v + e * D, D, a, false);
            }
        });
    }
}
SG__HOT_CLONES(add_range, (sg_tensor *dst, const sg_tensor *src, double alpha, int64_t lo, int64_t hi), (dst, src, alpha, lo, hi))

/* Coarse buckets of rows, and entries sampled, to balance the ranges' shares of entries. */
#define SG__IADD_BUCKETS 4096
#define SG__IADD_SAMPLES 8192

typedef struct {
    sg_tensor *dst;
    const sg_tensor *src;
    double alpha;
    int64_t rows, parts, nb, total;
    int shift;
    int64_t count[SG__IADD_BUCKETS]; /* sampled entries per bucket of 2^shift rows */
} iadd_job;

/* Row where range k of the job's parts starts: 0 for k = 0, rows for k = parts, else the
 * end of the first bucket by which at least total*k/parts samples have been counted. */
static int64_t cut_point(const iadd_job *j, int64_t k)
{
    if (k <= 0) return 0;
    if (k >= j->parts) return j->rows;
    int64_t seen = 0, want = j->total * k / j->parts;
    for (int64_t b = 0; b < j->nb; b++) {
        seen += j->count[b];
        if (seen >= want) return ((b + 1) << j->shift) < j->rows ? (b + 1) << j->shift : j->rows;
    }
    return j->rows;
}

/* Ranges [p0, p1) of the job (items of a grain-1 loop). */
static void add_parts(void *vj, int64_t p0, int64_t p1)
{
    const iadd_job *j = vj;
    for (int64_t p = p0; p < p1; p++) {
        int64_t lo = cut_point(j, p), hi = cut_point(j, p + 1);
        if (hi > lo) add_range(j->dst, j->src, j->alpha, lo, hi);
    }
}

void sg__index_add_unchecked(sg_tensor *dst, const sg_tensor *src, double alpha)
{
    int64_t rows = sg__coo_rows(src), nnz = src->nnz;
    if (nnz == 0 || rows == 0) return;
    int64_t parts = sg__parallel_threads(dst->ctx, nnz * sg__coo_rowsize(src), SG__GRAIN);
    if (parts > rows) parts = rows;
    if (parts <= 1) {
        add_range(dst, src, alpha, 0, rows);
        return;
    }
    /* A strided sample of the entries' rows, counted in coarse buckets, places the cuts:
     * cheap, no synchronisation, and a function of the data alone. */
    iadd_job j = {dst, src, alpha, rows, parts, 0, 0, 0, {0}};
    while (((rows - 1) >> j.shift) >= SG__IADD_BUCKETS) j.shift++;
    j.nb = ((rows - 1) >> j.shift) + 1;
    int64_t stride = nnz > SG__IADD_SAMPLES ? nnz / SG__IADD_SAMPLES : 1;
    for (int64_t e = 0; e < nnz; e += stride, j.total++) j.count[sg__coo_row(src, e) >> j.shift]++;
    sg__parallel_for(dst->ctx, parts, 1, add_parts, &j);
}

typedef struct {
    const int64_t *row;
    uint64_t lim;
} bounds_job;

/* True when an index of row[lo..hi) is outside [0, lim). */
static bool out_of_bounds(void *vj, int64_t lo, int64_t hi)
{
    const bounds_job *j = vj;
    bool bad = false;
    for (int64_t e = lo; e < hi; e++) bad |= (uint64_t)j->row[e] >= j->lim;
    return bad;
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
    for (int d = 0; d < src->sparse_dim; d++) {
        const int64_t *row = idx + (int64_t)d * nnz;
        uint64_t lim = (uint64_t)src->shape[d];
        bool bad = sg__parallel_any(ctx, nnz, SG__GRAIN, out_of_bounds, &(bounds_job){row, lim});
        for (int64_t e = 0; bad && e < nnz; e++)
            if ((uint64_t)row[e] >= lim)
                return sg__failc(ctx, SG_ERR_INDEX, "%s: index %lld of entry %lld is outside [0, %lld) in dim %d",
                                 op, (long long)row[e], (long long)e, (long long)src->shape[d], d);
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
