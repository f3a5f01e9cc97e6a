/* The memory floor under a large vocabulary's word2vec step: what reading and updating
 * the table rows a step touches costs with a table of V rows, V from 15k to 1M (rows of
 * 100 floats, as sgrad-w2v's tables). Named family (not run by "all"): sgrad-bench
 * rowmem. Plain loops, no library calls.
 *
 * Rows are drawn as word2vec draws its negatives: from unigram^0.75 over a Zipf(1)
 * vocabulary of V words (the counts of bench/w2v_scale.sh's corpora), row 0 the most
 * frequent, a batch of 8192 examples x 6 targets (sgrad-w2v's step at a large vocabulary)
 * at a time. Per table size, two ways, in turn:
 *   two_pass (ms): sgrad's step. One pass reads every row of the batch (a dot product
 *     with a vector: the forward), the next adds a multiple of the vector to each row (the
 *     update, which sgrad applies after the whole forward); each pass prefetches the row
 *     8 entries ahead, as sgrad's kernels do.
 *   one_pass (ref_ms): word2vec.c's. Each row is read, dotted and updated at once.
 * ms and ref_ms are per batch; ns_per_row, ref_ns_per_row per row. A row's cost at 1M
 * rows over its cost at 15k is the drop in pairs/sec that the memory traffic alone has,
 * the limit of the 15k-to-1M goal on that machine. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* madvise */
#include <sys/mman.h>
#endif
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { ROWMEM_DIM = 100, ROWMEM_BATCH = 8192 * 6, ROWMEM_AHEAD = 8 };

typedef struct {
    int64_t rows;
    float *w;       /* rows x ROWMEM_DIM */
    int32_t *idx;   /* batches x ROWMEM_BATCH */
    int batches;
    int one_pass;
} rowmem_job;

static void rowmem_prefetch(const float *w, int32_t row)
{
#if defined(__GNUC__)
    const char *p = (const char *)(w + (int64_t)row * ROWMEM_DIM);
    for (int b = 0; b < ROWMEM_DIM * 4; b += 64) __builtin_prefetch(p + b);
#else
    (void)w, (void)row;
#endif
}

static void rowmem_run(void *ud)
{
    const rowmem_job *j = ud;
    float x[ROWMEM_DIM];
    for (int d = 0; d < ROWMEM_DIM; d++) x[d] = 1e-3f * (float)(d % 7);
    double acc = 0;
    for (int b = 0; b < j->batches; b++) {
        const int32_t *idx = j->idx + (int64_t)b * ROWMEM_BATCH;
        const int passes = j->one_pass ? 1 : 2;
        for (int pass = 0; pass < passes; pass++)
            for (int e = 0; e < ROWMEM_BATCH; e++) {
                if (e + ROWMEM_AHEAD < ROWMEM_BATCH) rowmem_prefetch(j->w, idx[e + ROWMEM_AHEAD]);
                float *r = j->w + (int64_t)idx[e] * ROWMEM_DIM;
                if (pass == 0) { /* 4 sums, so the arithmetic does not hide the loads */
                    float s[4] = {0};
                    for (int d = 0; d < ROWMEM_DIM; d += 4)
                        for (int k = 0; k < 4; k++) s[k] += r[d + k] * x[d + k];
                    acc += (double)(s[0] + s[1] + s[2] + s[3]);
                }
                if (j->one_pass || pass == 1)
                    for (int d = 0; d < ROWMEM_DIM; d++) r[d] += 1e-6f * x[d];
            }
    }
    sgb_sink(acc);
}

/* The table, advised for huge pages as the library's default allocator does (so that the
 * floor is measured under the same paging as sgrad-w2v's tables). */
static float *rowmem_table(int64_t rows)
{
    const size_t bytes = (size_t)rows * ROWMEM_DIM * sizeof(float);
    const size_t page = (size_t)2 << 20;
    float *w = aligned_alloc(page, (bytes + page - 1) / page * page);
    if (!w) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(w, (bytes + page - 1) / page * page, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < (size_t)rows * ROWMEM_DIM; i++) w[i] = 1e-3f * (float)(i % 11);
    return w;
}

/* n rows drawn from unigram^0.75 over Zipf(1) counts of `rows` words (inverse CDF). */
static int32_t *rowmem_draws(int64_t rows, int64_t n, uint64_t seed)
{
    double *cdf = malloc((size_t)rows * sizeof *cdf);
    int32_t *idx = malloc((size_t)n * sizeof *idx);
    if (!cdf || !idx) {
        free(cdf);
        free(idx);
        return NULL;
    }
    double sum = 0;
    for (int64_t i = 0; i < rows; i++) cdf[i] = sum += pow(1.0 / (double)(i + 1), 0.75);
    for (int64_t k = 0; k < n; k++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const double u = (double)(seed >> 11) * 0x1p-53 * sum;
        int64_t lo = 0, hi = rows - 1; /* the first i with cdf[i] > u */
        while (lo < hi) {
            const int64_t mid = (lo + hi) / 2;
            if (cdf[mid] > u) hi = mid;
            else lo = mid + 1;
        }
        idx[k] = (int32_t)lo;
    }
    free(cdf);
    return idx;
}

int sgb_rowmem(const sgb_cfg *cfg)
{
    enum { SIZES = 3, MAX_REPS = 16 };
    const int64_t full[SIZES] = {15000, 150000, 1000000}, quick[SIZES] = {1500, 15000, 100000};
    const int batches = cfg->quick ? 2 : 20;
    int reps = sgb_reps(cfg, 5);
    reps = reps > MAX_REPS ? MAX_REPS : reps;
    rowmem_job jobs[SIZES] = {{0}};
    int rc = 0;
    for (int s = 0; s < SIZES && !rc; s++) {
        jobs[s].rows = cfg->quick ? quick[s] : full[s];
        jobs[s].batches = batches;
        jobs[s].w = rowmem_table(jobs[s].rows);
        jobs[s].idx = rowmem_draws(jobs[s].rows, (int64_t)batches * ROWMEM_BATCH, 1 + (uint64_t)s);
        if (!jobs[s].w || !jobs[s].idx) rc = 1;
    }
    if (rc) fprintf(stderr, "sgrad-bench rowmem: out of memory\n");
    /* every size and both ways in turn, reps times: the machine's drift hits all alike */
    double t[SIZES][2][MAX_REPS];
    for (int r = 0; r < reps && !rc; r++)
        for (int s = 0; s < SIZES; s++)
            for (int way = 0; way < 2; way++) {
                jobs[s].one_pass = way;
                t[s][way][r] = sgb_median_ms(rowmem_run, &jobs[s], 1);
            }
    for (int s = 0; s < SIZES && !rc; s++) {
        const double ms = sgb_median(t[s][0], reps) / batches, ref = sgb_median(t[s][1], reps) / batches;
        char params[96], extra[96];
        snprintf(params, sizeof params, "{\"rows\":%lld,\"dim\":%d,\"batch_rows\":%d}",
                 (long long)jobs[s].rows, ROWMEM_DIM, ROWMEM_BATCH);
        snprintf(extra, sizeof extra, "\"ns_per_row\":%.4g,\"ref_ns_per_row\":%.4g", ms * 1e6 / ROWMEM_BATCH,
                 ref * 1e6 / ROWMEM_BATCH);
        sgb_emit("rowmem", "two_pass", params, ms, ref, 1, extra);
    }
    for (int s = 0; s < SIZES; s++) {
        free(jobs[s].w);
        free(jobs[s].idx);
    }
    return rc;
}
