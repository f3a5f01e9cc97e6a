/* coalesce: out-of-place sort by row and summation of duplicate rows.
 * (row, position) pairs are sorted with a stable LSD radix sort on the row's bytes, only as
 * many byte passes as the largest row needs (a pass whose byte is the same for every pair
 * is skipped); then each unique row's values are summed in the original order of its
 * entries. Stability makes the result a function of the input alone: bitwise identical for
 * any thread count. A pair is packed into one 64-bit word (row << 32 | position) when both
 * fit in 32 bits, halving the sort's memory traffic; otherwise it takes two words.
 * On one thread the pairs are made and every pass's digits counted in one sweep. On
 * several, every phase is a sg__parallel_for over fixed chunks of the pairs: making them
 * (with the first pass's counts), then per pass a histogram per chunk, the offsets (laid
 * out digit-major, chunk-minor, which keeps the sort stable; one thread) and the scatter;
 * the summation splits the sorted pairs into the same chunks, each owning the runs that
 * start in it. Scratch memory comes from the step arena, which later steps reuse, so a
 * steady-state coalesce neither mallocs nor faults pages in. */
#include "sparse/sparse.h"

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

/* One thread: makes the pairs of t in a, counting every pass's digits on the way into
 * hist (256 per pass), and sorts them; returns a or b, whichever holds the result. */
static void *radix_one_thread(const sg_tensor *t, void *a, void *b, int passes, bool packed, int64_t *hist)
{
    int64_t n = t->nnz;
    memset(hist, 0, (size_t)passes * 256 * sizeof *hist);
    for (int64_t e = 0; e < n; e++) {
        uint64_t r = (uint64_t)sg__coo_row(t, e);
        if (packed) ((uint64_t *)a)[e] = r << 32 | (uint64_t)e;
        else ((kv *)a)[e] = (kv){r, e};
        for (int p = 0; p < passes; p++) hist[256 * p + ((r >> (8 * p)) & 255)]++;
    }
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

/* The sort's state for the chunked (several threads) path: chunk c of SG__GRAIN pairs
 * keeps its 256 digit counts, then its scatter offsets, at hist + 256 c. */
typedef struct {
    const sg_tensor *t;
    void *a, *b; /* the pass's source and destination */
    bool packed;
    int shift;   /* the pass's digit: bits shift .. shift + 7 of the row */
    int64_t *hist;
} radix_job;

/* Chunk [lo, hi): makes its pairs in a and counts the first pass's digits. */
static void make_pairs(void *vj, int64_t lo, int64_t hi)
{
    const radix_job *j = vj;
    int64_t *h = j->hist + 256 * (lo / SG__GRAIN);
    memset(h, 0, 256 * sizeof *h);
    for (int64_t e = lo; e < hi; e++) {
        uint64_t r = (uint64_t)sg__coo_row(j->t, e);
        if (j->packed) ((uint64_t *)j->a)[e] = r << 32 | (uint64_t)e;
        else ((kv *)j->a)[e] = (kv){r, e};
        h[r & 255]++;
    }
}

static void count_digits(void *vj, int64_t lo, int64_t hi)
{
    const radix_job *j = vj;
    int64_t *h = j->hist + 256 * (lo / SG__GRAIN);
    memset(h, 0, 256 * sizeof *h);
    for (int64_t i = lo; i < hi; i++) h[(pair_row(j->a, i, j->packed) >> j->shift) & 255]++;
}

static void scatter_digits(void *vj, int64_t lo, int64_t hi)
{
    const radix_job *j = vj;
    int64_t *h = j->hist + 256 * (lo / SG__GRAIN);
    for (int64_t i = lo; i < hi; i++)
        pair_move(j->b, h[(pair_row(j->a, i, j->packed) >> j->shift) & 255]++, j->a, i, j->packed);
}

/* Turns the C chunks' counts into scatter offsets (digit-major, chunk-minor); true when one
 * digit holds all n pairs (the pass would not move anything). */
static bool chunk_counts_to_offsets(int64_t *hist, int64_t C, int64_t n)
{
    int64_t run = 0;
    bool all = false;
    for (int d = 0; d < 256; d++) {
        int64_t c = 0;
        for (int64_t u = 0; u < C; u++) {
            int64_t k = hist[256 * u + d];
            hist[256 * u + d] = run;
            run += k;
            c += k;
        }
        all |= c == n;
    }
    return all;
}

/* Several threads: makes the pairs of t in a and sorts them; returns a or b, whichever
 * holds the result. hist has room for 256 counts per chunk of SG__GRAIN pairs. */
static void *radix_chunked(sg_ctx *ctx, const sg_tensor *t, void *a, void *b, int passes, bool packed,
                           int64_t *hist)
{
    int64_t n = t->nnz, C = (n + SG__GRAIN - 1) / SG__GRAIN;
    radix_job j = {t, a, b, packed, 0, hist};
    sg__parallel_for(ctx, n, SG__GRAIN, make_pairs, &j);
    for (int p = 0; p < passes; p++) {
        j.shift = 8 * p;
        if (p > 0) sg__parallel_for(ctx, n, SG__GRAIN, count_digits, &j);
        if (chunk_counts_to_offsets(hist, C, n)) continue;
        sg__parallel_for(ctx, n, SG__GRAIN, scatter_digits, &j);
        void *s = j.a;
        j.a = j.b;
        j.b = s;
    }
    return j.a;
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

/* The summation cuts the sorted pairs into the sort's chunks of SG__GRAIN pairs; chunk c
 * handles the runs (rows of the result) that start in it, following its last run past the
 * chunk's end. first[c] is the result row of chunk c's first run. */
static bool run_starts_at(const void *s, int64_t i, bool packed)
{
    return i == 0 || pair_row(s, i, packed) != pair_row(s, i - 1, packed);
}

typedef struct {
    const sg_tensor *t;
    const void *s; /* the sorted pairs */
    bool packed;
    int64_t *first; /* per chunk: its runs, then the result row of its first run */
    sg_tensor *out;
    const void *negzero;
} sum_job;

static void count_runs(void *vj, int64_t lo, int64_t hi)
{
    const sum_job *j = vj;
    int64_t k = 0;
    for (int64_t i = lo; i < hi; i++) k += run_starts_at(j->s, i, j->packed);
    j->first[lo / SG__GRAIN] = k;
}

/* Writes the runs starting in chunk [lo, hi) as rows of out (indices and summed values). */
static void sum_runs(void *vj, int64_t lo, int64_t hi)
{
    const sum_job *j = vj;
    int64_t n = j->t->nnz, u0 = j->first[lo / SG__GRAIN];
    while (lo < hi && !run_starts_at(j->s, lo, j->packed)) lo++;
    while (hi < n && !run_starts_at(j->s, hi, j->packed)) hi++; /* finish the last run */
    if (lo < hi) sum_pairs(j->t, j->s, j->packed, lo, hi, u0, j->out, j->negzero);
}

sg_tensor *sg_coalesce(sg_tensor *t)
{
    if (!t) return NULL;
    sg_ctx *ctx = t->ctx;
    if (t->layout != SG_COO) return sg__fail(ctx, SG_ERR_LAYOUT, "sg_coalesce: COO tensor needed");
    if (t->coalesced) return t;
    int64_t n = t->nnz;
    bool chunked = sg__parallel_threads(ctx, n, SG__GRAIN) > 1;
    uint64_t rows = (uint64_t)sg__coo_rows(t);
    bool packed = rows <= ((uint64_t)1 << 32) && (uint64_t)n <= ((uint64_t)1 << 32);
    int passes = 0; /* bytes of the largest possible row; a pass finding one digit is skipped */
    while (passes < 8 && ((rows - 1) >> (8 * passes)) != 0) passes++;
    size_t pair = packed ? sizeof(uint64_t) : sizeof(kv);
    size_t nh = 256 * (size_t)(chunked ? (n + SG__GRAIN - 1) / SG__GRAIN : (passes ? passes : 1));
    int64_t D = sg__coo_rowsize(t);
    int64_t sum_chunks = (n + SG__GRAIN - 1) / SG__GRAIN;
    void *a = sg__arena_alloc(ctx, (size_t)(n ? n : 1) * pair);
    void *b = a ? sg__arena_alloc(ctx, (size_t)(n ? n : 1) * pair) : NULL;
    int64_t *hist = b ? sg__arena_alloc(ctx, nh * sizeof *hist) : NULL;
    int64_t *first = hist ? sg__arena_alloc(ctx, (size_t)(sum_chunks + 1) * sizeof *first) : NULL;
    void *negzero = first ? sg__arena_alloc(ctx, (size_t)(D ? D : 1) * sg_dtype_size(t->dtype)) : NULL;
    if (!negzero) return NULL;
    SG__DISPATCH_FLOAT(t->dtype, T, {
        T *z = negzero;
        for (int64_t j = 0; j < D; j++) z[j] = (T)-0.0;
    });

    void *s = chunked ? radix_chunked(ctx, t, a, b, passes, packed, hist)
                      : radix_one_thread(t, a, b, passes, packed, hist);
    sum_job j = {t, s, packed, first, NULL, negzero};
    sg__parallel_for(ctx, n, SG__GRAIN, count_runs, &j);
    int64_t U = 0;
    for (int64_t c = 0; c < sum_chunks; c++) {
        int64_t k = first[c];
        first[c] = U;
        U += k;
    }

    int64_t ishape[2] = {t->sparse_dim, U};
    int64_t vshape[SG_MAX_DIMS];
    vshape[0] = U;
    for (int d = 1; d < t->values->ndim; d++) vshape[d] = t->values->shape[d];
    sg_tensor *ind = sg__tmp(ctx, SG_I64, 2, ishape, false);
    sg_tensor *val = ind ? sg__tmp(ctx, t->dtype, t->values->ndim, vshape, false) : NULL;
    j.out = val ? sg__coo_wrap(ctx, t->ndim, t->shape, t->sparse_dim, ind, val, true) : NULL;
    if (j.out) sg__parallel_for(ctx, n, SG__GRAIN, sum_runs, &j);
    return j.out;
}
