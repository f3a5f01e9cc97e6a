/* coalesce: out-of-place sort by row and summation of duplicate rows.
 * (row, position) pairs are sorted with a stable LSD radix sort on the row's bytes, only as
 * many byte passes as the largest row needs (a pass whose byte is the same for every pair
 * is skipped); then each unique row's values are summed in the original order of its
 * entries. Stability makes the result a function of the input alone: bitwise identical for
 * any thread count. A pair is packed into one 64-bit word (row << 32 | position) when both
 * fit in 32 bits, halving the sort's memory traffic; otherwise it takes two words.
 * One thread counts every pass's digits while it makes the pairs; several threads split
 * the pairs into contiguous chunks for the histogram and scatter of each pass (offsets
 * laid out digit-major, chunk-minor, which keeps the sort stable) and for the summation
 * (each chunk owns the runs that start in it). Scratch memory comes from the step arena, which later steps reuse, so a
 * steady-state coalesce neither mallocs nor faults pages in. */
#include "sparse/sparse.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many entries the sort runs on one thread. */
#define SG__COALESCE_PAR_MIN ((int64_t)1 << 15)
/* Distance, in sorted entries, at which the summation prefetches the value rows it will
 * read: they come in sort order, scattered over the values array. */
#define SG__PREFETCH_AHEAD 8

typedef struct {
    uint64_t row;
    int64_t pos;
} kv; /* a wide pair */

static inline uint64_t pair_row(const void *p, int64_t i, bool packed)
{
    return packed ? ((const uint64_t *)p)[i] >> 32 : ((const kv *)p)[i].row;
}
static inline int64_t pair_pos(const void *p, int64_t i, bool packed)
{
    return packed ? (int64_t)(((const uint64_t *)p)[i] & 0xffffffffu) : ((const kv *)p)[i].pos;
}
static inline void pair_move(void *dst, int64_t j, const void *src, int64_t i, bool packed)
{
    if (packed) ((uint64_t *)dst)[j] = ((const uint64_t *)src)[i];
    else ((kv *)dst)[j] = ((const kv *)src)[i];
}

/* Turns counts h[0..256) into starting offsets; true when one digit holds all n pairs
 * (the pass would not move anything). */
static bool counts_to_offsets(int64_t *h, int64_t n)
{
    int64_t run = 0;
    bool all = false;
    for (int d = 0; d < 256; d++) {
        int64_t c = h[d];
        all |= c == n;
        h[d] = run;
        run += c;
    }
    return all;
}

/* One thread: hist holds every pass's counts already (taken while the pairs were made). */
static void *radix_serial(void *a, void *b, int64_t n, int passes, bool packed, int64_t *hist)
{
    for (int p = 0; p < passes; p++) {
        int64_t *h = hist + 256 * p;
        if (counts_to_offsets(h, n)) continue;
        for (int64_t i = 0; i < n; i++) pair_move(b, h[(pair_row(a, i, packed) >> (8 * p)) & 255]++, a, i, packed);
        void *s = a;
        a = b;
        b = s;
    }
    return a;
}

static void *radix_parallel(void *a, void *b, int64_t n, int passes, bool packed, int nt, int64_t *hist)
{
    (void)nt;
    for (int p = 0; p < passes; p++) {
        int shift = 8 * p;
        bool skip = false;
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
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
            for (int64_t i = lo; i < hi; i++) h[(pair_row(a, i, packed) >> shift) & 255]++;
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
                    if (c == n) skip = true;
                }
            }
            if (!skip)
                for (int64_t i = lo; i < hi; i++) pair_move(b, h[(pair_row(a, i, packed) >> shift) & 255]++, a, i, packed);
        }
        if (!skip) {
            void *s = a;
            a = b;
            b = s;
        }
    }
    return a;
}

/* Sums the runs of sorted pairs s[i0..i1) (whole runs, the first one result row u0) into
 * out's values, each run's rows in order, prefetching the value rows of the pairs
 * SG__PREFETCH_AHEAD further on. No branch depends on the run lengths (random, so
 * mispredicted branches would discard the loads in flight): a pair that starts a run adds
 * its row to negzero (-0.0 everywhere, and -0.0 + x == x for every x), any other pair to
 * the run's partial sum. */
static void sum_pairs(const sg_tensor *t, const void *s, bool packed, int64_t i0, int64_t i1, int64_t u0,
                      sg_tensor *out, const void *negzero)
{
    int64_t D = sg__coo_rowsize(t), n = t->nnz;
    size_t rowbytes = (size_t)D * sg_dtype_size(t->dtype);
    const unsigned char *raw = t->values->data;
    int64_t *oi = out->indices->data;
    bool flat = t->sparse_dim == 1;
    int64_t u = u0 - 1;
    uint64_t prev = UINT64_MAX; /* no row: rows are below 2^63 */
    SG__DISPATCH_FLOAT(t->dtype, T, {
        T *o = out->values->data;
        for (int64_t k = i0; k < i1; k++) {
            if (k + SG__PREFETCH_AHEAD < n)
                sg__prefetch_row(raw, pair_pos(s, k + SG__PREFETCH_AHEAD, packed), rowbytes, rowbytes);
            uint64_t r = pair_row(s, k, packed);
            bool start = r != prev;
            prev = r;
            u += start;
            T *dst = o + u * D;
            const T *base = start ? (const T *)negzero : dst;
            const T *x = (const T *)(raw + (size_t)pair_pos(s, k, packed) * rowbytes);
            for (int64_t j = 0; j < D; j++) dst[j] = base[j] + x[j];
            if (flat) oi[u] = (int64_t)r;
        }
    });
    if (flat) return;
    u = u0 - 1;
    prev = UINT64_MAX;
    for (int64_t k = i0; k < i1; k++) {
        uint64_t r = pair_row(s, k, packed);
        if (r != prev) sg__coo_put_row(oi, t->sparse_dim, out->nnz, t->shape, ++u, (int64_t)r);
        prev = r;
    }
}

/* The summation splits the sorted pairs into C chunks; chunk c handles the runs (rows of
 * the result) that start in [n*c/C, n*(c+1)/C), following its last run past the chunk's
 * end. first[c] is the result row of chunk c's first run. */
static bool run_starts_at(const void *s, int64_t i, bool packed)
{
    return i == 0 || pair_row(s, i, packed) != pair_row(s, i - 1, packed);
}

/* Counts the runs starting in each chunk and turns the counts into first[0..C]; returns
 * the number of runs U. */
static int64_t count_runs(const void *s, int64_t n, bool packed, int C, int64_t *first)
{
    bool par = C > 1;
    (void)par;
#ifdef _OPENMP
#pragma omp parallel for num_threads(C) schedule(static, 1) if (par)
#endif
    for (int c = 0; c < C; c++) {
        int64_t k = 0;
        for (int64_t i = n * c / C; i < n * (c + 1) / C; i++) k += run_starts_at(s, i, packed);
        first[c] = k;
    }
    int64_t run = 0;
    for (int c = 0; c < C; c++) {
        int64_t k = first[c];
        first[c] = run;
        run += k;
    }
    first[C] = run;
    return run;
}

/* Writes every run of the sorted pairs s as one row of out (indices and summed values). */
static void sum_runs(const sg_tensor *t, const void *s, bool packed, int C, const int64_t *first, sg_tensor *out,
                     const void *negzero)
{
    int64_t n = t->nnz;
    bool par = C > 1;
    (void)par;
#ifdef _OPENMP
#pragma omp parallel for num_threads(C) schedule(static, 1) if (par)
#endif
    for (int c = 0; c < C; c++) {
        int64_t i0 = n * c / C, i1 = n * (c + 1) / C;
        while (i0 < i1 && !run_starts_at(s, i0, packed)) i0++;
        while (i1 < n && !run_starts_at(s, i1, packed)) i1++; /* finish the last run */
        if (i0 < i1) sum_pairs(t, s, packed, i0, i1, first[c], out, negzero);
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
    bool par = nt > 1 && n >= SG__COALESCE_PAR_MIN;
    uint64_t rows = (uint64_t)sg__coo_rows(t);
    bool packed = rows <= ((uint64_t)1 << 32) && (uint64_t)n <= ((uint64_t)1 << 32);
    int passes = 0; /* bytes of the largest possible row; a pass finding one digit is skipped */
    while (passes < 8 && ((rows - 1) >> (8 * passes)) != 0) passes++;
    size_t pair = packed ? sizeof(uint64_t) : sizeof(kv);
    int C = par ? nt : 1;
    size_t nh = (size_t)(nt > 8 ? nt : 8) * 256;
    void *a = sg__arena_alloc(ctx, (size_t)(n ? n : 1) * pair);
    void *b = a ? sg__arena_alloc(ctx, (size_t)(n ? n : 1) * pair) : NULL;
    int64_t *hist = b ? sg__arena_alloc(ctx, nh * sizeof *hist) : NULL;
    int64_t *first = hist ? sg__arena_alloc(ctx, (size_t)(C + 1) * sizeof *first) : NULL;
    int64_t D = sg__coo_rowsize(t);
    void *negzero = first ? sg__arena_alloc(ctx, (size_t)(D ? D : 1) * sg_dtype_size(t->dtype)) : NULL;
    if (!negzero) return NULL;
    SG__DISPATCH_FLOAT(t->dtype, T, {
        T *z = negzero;
        for (int64_t j = 0; j < D; j++) z[j] = (T)-0.0;
    });

    if (!par) memset(hist, 0, (size_t)passes * 256 * sizeof *hist);
    for (int64_t e = 0; e < n; e++) {
        uint64_t r = (uint64_t)sg__coo_row(t, e);
        if (packed) ((uint64_t *)a)[e] = r << 32 | (uint64_t)e;
        else ((kv *)a)[e] = (kv){r, e};
        if (!par)
            for (int p = 0; p < passes; p++) hist[256 * p + ((r >> (8 * p)) & 255)]++;
    }
    void *s = par ? radix_parallel(a, b, n, passes, packed, nt, hist) : radix_serial(a, b, n, passes, packed, hist);
    int64_t U = count_runs(s, n, packed, C, first);

    int64_t ishape[2] = {t->sparse_dim, U};
    int64_t vshape[SG_MAX_DIMS];
    vshape[0] = U;
    for (int d = 1; d < t->values->ndim; d++) vshape[d] = t->values->shape[d];
    sg_tensor *ind = sg__tmp(ctx, SG_I64, 2, ishape, false);
    sg_tensor *val = ind ? sg__tmp(ctx, t->dtype, t->values->ndim, vshape, false) : NULL;
    sg_tensor *out = val ? sg__coo_wrap(ctx, t->ndim, t->shape, t->sparse_dim, ind, val, true) : NULL;
    if (out) sum_runs(t, s, packed, C, first, out, negzero);
    return out;
}
