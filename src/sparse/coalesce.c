/* coalesce: out-of-place sort by row and summation of duplicate rows.
 * (row, position) pairs are sorted with a stable LSD radix sort on the row's bytes, only as
 * many byte passes as the largest row needs (a pass whose byte is the same for every pair
 * is skipped); then each unique row's values are summed in the original order of its
 * entries. Stability makes the result a function of the input alone: bitwise identical for
 * any thread count. Threads split the pairs into contiguous chunks for the histogram and
 * scatter of each pass (offsets are laid out digit-major, chunk-minor, which keeps the sort
 * stable) and split the unique rows for the summation. */
#include "sparse.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many entries the sort runs on one thread. */
#define SG__COALESCE_PAR_MIN ((int64_t)1 << 15)

typedef struct {
    uint64_t row;
    int64_t pos;
} kv;

/* Stable LSD radix sort of a[0..n) by row; b is scratch of the same size, hist holds
 * 256 counters per thread. Returns the array that holds the result (a or b). */
static kv *radix_sort(kv *a, kv *b, int64_t n, uint64_t max_row, int nt, int64_t *hist)
{
    int passes = 0;
    while (passes < 8 && (max_row >> (8 * passes)) != 0) passes++;
    bool par = nt > 1 && n >= SG__COALESCE_PAR_MIN;
    for (int p = 0; p < passes; p++) {
        int shift = 8 * p;
        bool skip = false;
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (par)
#endif
        {
#ifdef _OPENMP
            int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
#else
            int64_t t = 0, T = 1;
#endif
            int64_t lo = n * t / T, hi = n * (t + 1) / T;
            int64_t *h = hist + 256 * t;
            memset(h, 0, 256 * sizeof *h);
            for (int64_t i = lo; i < hi; i++) h[(a[i].row >> shift) & 255]++;
#ifdef _OPENMP
#pragma omp barrier
#pragma omp single
#endif
            {
                int64_t run = 0;
                for (int d = 0; d < 256; d++) {
                    int64_t c = 0;
                    for (int64_t u = 0; u < T; u++) {
                        int64_t k = hist[256 * u + d];
                        hist[256 * u + d] = run;
                        run += k;
                        c += k;
                    }
                    if (c == n) skip = true; /* every pair has this byte */
                }
            }
            if (!skip)
                for (int64_t i = lo; i < hi; i++) b[h[(a[i].row >> shift) & 255]++] = a[i];
        }
        if (!skip) {
            kv *s = a;
            a = b;
            b = s;
        }
    }
    return a;
}

/* Sums the values of entries s[k0..k1) (one row) into dst, in order. */
static void sum_run(const sg_tensor *t, const kv *s, int64_t k0, int64_t k1, void *dst)
{
    int64_t D = sg__coo_rowsize(t);
    SG__DISPATCH_FLOAT(t->dtype, T, {
        const T *v = t->values->data;
        T *restrict o = dst;
        const T *restrict src = v + s[k0].pos * D;
        for (int64_t j = 0; j < D; j++) o[j] = src[j];
        for (int64_t k = k0 + 1; k < k1; k++) {
            src = v + s[k].pos * D;
            for (int64_t j = 0; j < D; j++) o[j] += src[j];
        }
    });
}

/* Writes the U unique rows of the sorted pairs s (runs start[u]..start[u+1]) into out. */
static void sum_runs(const sg_tensor *t, const kv *s, const int64_t *start, int64_t U,
                     sg_tensor *out, int nt)
{
    int64_t *oi = out->indices->data;
    unsigned char *o = out->values->data;
    size_t rowbytes = (size_t)sg__coo_rowsize(t) * sg_dtype_size(t->dtype);
    bool par = nt > 1 && t->nnz * sg__coo_rowsize(t) >= SG__COALESCE_PAR_MIN;
    (void)par;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (par)
#endif
    for (int64_t u = 0; u < U; u++) {
        sum_run(t, s, start[u], start[u + 1], o + (size_t)u * rowbytes);
        sg__coo_put_row(oi, t->sparse_dim, U, t->shape, u, (int64_t)s[start[u]].row);
    }
}

sg_tensor *sg_coalesce(sg_tensor *t)
{
    if (!t) return NULL;
    sg_ctx *ctx = t->ctx;
    if (t->layout != SG_COO) return sg__fail(ctx, SG_ERR_LAYOUT, "sg_coalesce: COO tensor needed");
    if (t->coalesced) return t;
    int64_t n = t->nnz;
    int nt = sg__threads(ctx);
    kv *a = sg__malloc(ctx, (size_t)(n ? n : 1) * sizeof *a);
    kv *b = a ? sg__malloc(ctx, (size_t)(n ? n : 1) * sizeof *b) : NULL;
    int64_t *hist = b ? sg__malloc(ctx, (size_t)nt * 256 * sizeof *hist) : NULL;
    int64_t *start = hist ? sg__malloc(ctx, (size_t)(n + 1) * sizeof *start) : NULL;
    sg_tensor *out = NULL;
    if (!start) goto done;

    uint64_t max_row = 0;
    for (int64_t e = 0; e < n; e++) {
        uint64_t r = (uint64_t)sg__coo_row(t, e);
        a[e].row = r;
        a[e].pos = e;
        if (r > max_row) max_row = r;
    }
    kv *s = radix_sort(a, b, n, max_row, nt, hist);
    int64_t U = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || s[i].row != s[i - 1].row) start[U++] = i;
    start[U] = n;

    int64_t ishape[2] = {t->sparse_dim, U};
    int64_t vshape[SG_MAX_DIMS];
    vshape[0] = U;
    for (int d = 1; d < t->values->ndim; d++) vshape[d] = t->values->shape[d];
    sg_tensor *ind = sg__tmp(ctx, SG_I64, 2, ishape, false);
    sg_tensor *val = ind ? sg__tmp(ctx, t->dtype, t->values->ndim, vshape, false) : NULL;
    out = val ? sg__coo_wrap(ctx, t->ndim, t->shape, t->sparse_dim, ind, val, true) : NULL;
    if (out) sum_runs(t, s, start, U, out, nt);
done:
    sg__free(ctx, start);
    sg__free(ctx, hist);
    sg__free(ctx, b);
    sg__free(ctx, a);
    return out;
}
