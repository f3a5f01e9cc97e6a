/* The memory floor under bench/torch_embedding.py's embedding step: what summing the
 * looked-up rows of 8 tables of 1e6 x 64 floats into bags (2048 bags of 20 uniform rows
 * a table) and Adagrad's update of every looked-up row (its accumulator row read and
 * written, then the row) cost with nothing else: plain loops compiled per CPU level as
 * the library's kernels are (SG__HOT_CLONES), each row prefetched 8 entries ahead as
 * they do, tables advised for huge pages as numpy's and the library's are. Named family (not run by "all"; about 4 GB): sgrad-bench bagmem.
 *
 * Cases, in turn each repetition: 1 thread, and 2 threads each taking half the tables
 * (no two threads touch a row). ms is a whole step (forward + update, per step, the
 * median), and the extra fields split it. No step of any implementation that reads and
 * writes these rows can take less on the same machine: sgrad.torch's measured step over
 * this floor is the overhead left to remove; PyTorch's over it bounds the speedup any
 * implementation could show. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* madvise */
#include <sys/mman.h>
#endif
#include "bench.h"
#include "core/core.h" /* the library's per-CPU variants: the loops run at its level */

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BM_TABLES = 8, BM_DIM = 64, BM_BAGS = 2048, BM_POOL = 20, BM_AHEAD = 8, BM_BATCHES = 4 };
enum { BM_ENTRIES = BM_BAGS * BM_POOL };

typedef struct {
    int64_t rows;
    float *w[BM_TABLES], *acc[BM_TABLES]; /* rows x BM_DIM each */
    int64_t *idx;                         /* BM_BATCHES x BM_TABLES x BM_ENTRIES */
    float *out, *grad;                    /* BM_TABLES x BM_BAGS x BM_DIM */
    int batch;
    double fwd_ms, upd_ms; /* the last step's halves (thread 0's) */
} bagmem_job;

typedef struct {
    bagmem_job *j;
    int t0, t1; /* tables [t0, t1) */
} bagmem_part;

static inline void bm_prefetch(const float *base, int64_t row, int write)
{
#if defined(__GNUC__)
    const char *p = (const char *)(base + row * BM_DIM);
    for (int b = 0; b < BM_DIM * 4; b += 64) {
        if (write) __builtin_prefetch(p + b, 1);
        else __builtin_prefetch(p + b);
    }
#else
    (void)base, (void)row, (void)write;
#endif
}

SG__HOT_BODY void bm_forward__body(const bagmem_job *j, int t, const int64_t *idx)
{
    const float *w = j->w[t];
    float *out = j->out + (int64_t)t * BM_BAGS * BM_DIM;
    for (int b = 0; b < BM_BAGS; b++) {
        float s[BM_DIM] = {0};
        for (int p = 0; p < BM_POOL; p++) {
            const int e = b * BM_POOL + p;
            if (e + BM_AHEAD < BM_ENTRIES) bm_prefetch(w, idx[e + BM_AHEAD], 0);
            const float *r = w + idx[e] * BM_DIM;
            for (int d = 0; d < BM_DIM; d++) s[d] += r[d];
        }
        memcpy(out + (int64_t)b * BM_DIM, s, sizeof s);
    }
}
SG__HOT_CLONES(bm_forward, (const bagmem_job *j, int t, const int64_t *idx), (j, t, idx))

/* Adagrad (lr 0.01, eps 1e-10) on every entry's row with its bag's gradient row. */
SG__HOT_BODY void bm_update__body(const bagmem_job *j, int t, const int64_t *idx)
{
    float *w = j->w[t], *acc = j->acc[t];
    const float *g = j->grad + (int64_t)t * BM_BAGS * BM_DIM;
    for (int e = 0; e < BM_ENTRIES; e++) {
        if (e + BM_AHEAD < BM_ENTRIES) {
            bm_prefetch(w, idx[e + BM_AHEAD], 1);
            bm_prefetch(acc, idx[e + BM_AHEAD], 1);
        }
        float *wr = w + idx[e] * BM_DIM, *ar = acc + idx[e] * BM_DIM;
        const float *gr = g + (int64_t)(e / BM_POOL) * BM_DIM;
        for (int d = 0; d < BM_DIM; d++) {
            const float a = ar[d] + gr[d] * gr[d];
            ar[d] = a;
            wr[d] -= 0.01f * gr[d] / (sqrtf(a) + 1e-10f);
        }
    }
}
SG__HOT_CLONES(bm_update, (const bagmem_job *j, int t, const int64_t *idx), (j, t, idx))

static void *bm_part(void *p)
{
    bagmem_part *part = p;
    bagmem_job *j = part->j;
    const int64_t *idx = j->idx + (int64_t)j->batch * BM_TABLES * BM_ENTRIES;
    const double t0 = sgb_now_ms();
    for (int t = part->t0; t < part->t1; t++) bm_forward(j, t, idx + (int64_t)t * BM_ENTRIES);
    const double t1 = sgb_now_ms();
    for (int t = part->t0; t < part->t1; t++) bm_update(j, t, idx + (int64_t)t * BM_ENTRIES);
    if (part->t0 == 0) {
        j->fwd_ms = t1 - t0;
        j->upd_ms = sgb_now_ms() - t1;
    }
    return NULL;
}

/* One step on `threads` threads (1 or 2); -1 when the second cannot start. */
static double bm_step(bagmem_job *j, int threads)
{
    bagmem_part all = {j, 0, BM_TABLES}, lo = {j, 0, BM_TABLES / 2}, hi = {j, BM_TABLES / 2, BM_TABLES};
    const double t0 = sgb_now_ms();
    if (threads == 1) {
        bm_part(&all);
    } else {
        pthread_t th;
        if (pthread_create(&th, NULL, bm_part, &hi)) return -1;
        bm_part(&lo);
        pthread_join(th, NULL);
    }
    j->batch = (j->batch + 1) % BM_BATCHES;
    return sgb_now_ms() - t0;
}

static float *bm_table(int64_t n, float value)
{
    const size_t page = (size_t)2 << 20, bytes = ((size_t)n * sizeof(float) + page - 1) / page * page;
    float *p = aligned_alloc(page, bytes);
    if (!p) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    for (int64_t i = 0; i < n; i++) p[i] = value;
    return p;
}

static int bm_setup(bagmem_job *j)
{
    const int64_t n = j->rows * BM_DIM;
    for (int t = 0; t < BM_TABLES; t++)
        if (!(j->w[t] = bm_table(n, 0.01f)) || !(j->acc[t] = bm_table(n, 0.1f))) return 1;
    j->idx = malloc(sizeof *j->idx * BM_BATCHES * BM_TABLES * BM_ENTRIES);
    j->out = malloc(sizeof *j->out * BM_TABLES * BM_BAGS * BM_DIM);
    j->grad = malloc(sizeof *j->grad * BM_TABLES * BM_BAGS * BM_DIM);
    if (!j->idx || !j->out || !j->grad) return 1;
    uint64_t s = 1;
    for (int64_t i = 0; i < (int64_t)BM_BATCHES * BM_TABLES * BM_ENTRIES; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        j->idx[i] = (int64_t)((s >> 33) % (uint64_t)j->rows);
    }
    for (int64_t i = 0; i < (int64_t)BM_TABLES * BM_BAGS * BM_DIM; i++) j->grad[i] = 1e-3f * (float)(i % 13);
    return 0;
}

static void bm_free(bagmem_job *j)
{
    for (int t = 0; t < BM_TABLES; t++) {
        free(j->w[t]);
        free(j->acc[t]);
    }
    free(j->idx);
    free(j->out);
    free(j->grad);
}

int sgb_bagmem(const sgb_cfg *cfg)
{
    enum { MAX_REPS = 32, WARM = 2 };
    int reps = sgb_reps(cfg, 9);
    reps = reps > MAX_REPS ? MAX_REPS : reps;
    bagmem_job j = {.rows = cfg->quick ? 20000 : 1000000};
    if (bm_setup(&j)) {
        bm_free(&j);
        fprintf(stderr, "sgrad-bench bagmem: out of memory\n");
        return 1;
    }
    double ms[2][MAX_REPS], fwd[MAX_REPS], upd[MAX_REPS];
    for (int r = -WARM; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            const double t = bm_step(&j, k + 1);
            if (t < 0) {
                bm_free(&j);
                fprintf(stderr, "sgrad-bench bagmem: cannot start a second thread\n");
                return 1;
            }
            if (r < 0) continue;
            ms[k][r] = t;
            if (k == 0) fwd[r] = j.fwd_ms, upd[r] = j.upd_ms;
        }
    char params[160], extra[96];
    snprintf(params, sizeof params, "{\"tables\":%d,\"rows\":%lld,\"dim\":%d,\"bags\":%d,\"pooling\":%d}", BM_TABLES,
             (long long)j.rows, BM_DIM, BM_BAGS, BM_POOL);
    const double f = sgb_median(fwd, reps), u = sgb_median(upd, reps);
    snprintf(extra, sizeof extra, "\"forward_ms\":%.4g,\"update_ms\":%.4g", f, u);
    sgb_emit("bagmem", "forward_adagrad_step", params, sgb_median(ms[0], reps), -1, 1, extra);
    sgb_emit("bagmem", "forward_adagrad_step", params, sgb_median(ms[1], reps), -1, 2, NULL);
    sgb_sink(j.out[7] + j.w[0][3]);
    bm_free(&j);
    return 0;
}
