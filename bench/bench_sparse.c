/* sgrad-bench sparse: the sparse-gradient hot paths against the plainest C loops doing the
 * same work, D = 64, f32, one thread unless a row says otherwise.
 * - embedding_fwd_bwd: B = 10,000 rows gathered from V in {1e4, 1e5, 1e6}, then backward
 *   with a given incoming gradient to W's sparse gradient (which borrows that gradient and
 *   the index buffer). Reference: the gather loop (the sparse gradient is then the pair
 *   (idx, gout) and costs nothing). Memory, from a cold step of sum(embedding(W, idx)) in a
 *   fresh context: peak_bytes = the most bytes the library held at once beyond W and idx
 *   (the output, the loss gradient and the step arena's slack, all O(B x D));
 *   backward_new_bytes = bytes newly obtained during the backward; BxD_bytes and
 *   table_bytes (V x D, what a dense gradient would take) for scale.
 * - index_add: dense (V,D) += COO with nnz random rows (duplicates allowed), through
 *   sg_index_add_ (indices validated each call). Reference: the loop dst[idx[e]] += v[e].
 *   The 2-thread row reports its speedup over the 1-thread library row and whether its
 *   result is bitwise equal to the 1-thread one (its ref_ms is the 1-thread loop again).
 * - coalesce: nnz = 1e6 random rows of V = 1e6 through sg_coalesce (tape reset after
 *   each), on one thread and on two. Reference: memcpy of the values array. probe_ms: a
 *   plain loop copying every value row in sorted-row order, by an order computed before
 *   timing (out[k] = values[order[k]]): the reordering traffic any out-of-place coalesce
 *   must do, with no sort and no summation; ms / probe_ms is the library's distance from
 *   that bound (the copy writes all nnz rows, the coalesce only the unique ones).
 * Library, reference and probe runs alternate, so that load from other processes hits
 * them alike; ms, ref_ms and probe_ms are the medians of each. */
#include "bench.h"
#include "sgrad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D 64

static int cmp_ms(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Medians of lib(ud), ref(ud) and, unless probe is NULL, probe(ud), timed alternately
 * (after one warm-up of each), so that a change in the machine's load affects them alike. */
static void timed_medians(void (*lib)(void *), void (*ref)(void *), void (*probe)(void *), void *ud, int reps,
                          double *lib_ms, double *ref_ms, double *probe_ms)
{
    double tl[201], tr[201], tp[201];
    if (reps > 201) reps = 201;
    if (reps < 1) reps = 1;
    lib(ud);
    ref(ud);
    if (probe) probe(ud);
    for (int i = 0; i < reps; i++) {
        double t0 = sgb_now_ms();
        lib(ud);
        double t1 = sgb_now_ms();
        ref(ud);
        double t2 = sgb_now_ms();
        if (probe) probe(ud);
        tp[i] = sgb_now_ms() - t2;
        tr[i] = t2 - t1;
        tl[i] = t1 - t0;
    }
    qsort(tl, (size_t)reps, sizeof *tl, cmp_ms);
    qsort(tr, (size_t)reps, sizeof *tr, cmp_ms);
    qsort(tp, (size_t)reps, sizeof *tp, cmp_ms);
    *lib_ms = tl[reps / 2];
    *ref_ms = tr[reps / 2];
    if (probe_ms) *probe_ms = tp[reps / 2];
}

static void paired_median(void (*lib)(void *), void (*ref)(void *), void *ud, int reps, double *lib_ms,
                          double *ref_ms)
{
    timed_medians(lib, ref, NULL, ud, reps, lib_ms, ref_ms, NULL);
}

static int fail(sg_ctx *ctx, const char *what)
{
    fprintf(stderr, "sparse: %s: %s\n", what, sg_ctx_message(ctx));
    return 1;
}

/* Uniform random rows in [0, V) as an int64 tensor of n entries. */
static sg_tensor *random_rows(sg_ctx *ctx, int64_t n, int64_t V)
{
    sg_tensor *t = sg_tensor_new(ctx, SG_I64, 1, &n);
    if (!t) return NULL;
    int64_t *p = sg_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = (int64_t)(sg_rand_u64(ctx) % (uint64_t)V);
    return t;
}

/* ---------------------------------------------------------------- embedding */

typedef struct {
    sg_ctx *ctx;
    sg_tensor *W, *idx, *G;
    float *ref_out;
    int64_t B;
    int err;
} emb_case;

static void emb_lib(void *ud)
{
    emb_case *c = ud;
    sg_tensor *y = sg_embedding(c->W, c->idx, NULL);
    if (!y || sg_backward_grad(y, c->G)) c->err = 1;
    sg_tensor *g = sg_tensor_grad(c->W);
    if (!g) c->err = 1;
    else sgb_sink((double)sg_coo_nnz(g) + sg_tensor_f32(y)[0]);
    sg_tape_reset(c->ctx);
}

static void emb_ref(void *ud)
{
    emb_case *c = ud;
    const float *w = sg_tensor_f32(c->W);
    const int64_t *idx = sg_tensor_data(c->idx);
    float *out = c->ref_out;
    for (int64_t b = 0; b < c->B; b++) {
        const float *row = w + idx[b] * D;
        for (int j = 0; j < D; j++) out[b * D + j] = row[j];
    }
    /* backward: the sparse gradient is (idx, gout) itself */
    const void *grad_values = sg_tensor_data(c->G), *grad_indices = idx;
    sgb_sink(out[0] + (double)(grad_values != grad_indices));
}

/* Bytes the library held at the peak of one cold training step, forward + backward of
 * sum(embedding(W, idx)) in a fresh context, beyond the persistent W and idx; and the
 * bytes it newly obtained during the backward alone. */
static int emb_memory(int64_t V, int64_t B, long long *step_peak, long long *bwd_new)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    int64_t shape[2] = {V, D};
    sg_tensor *W = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, shape), 1);
    sg_tensor *idx = random_rows(ctx, B, V);
    size_t base = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_ctx_reset_peak(ctx);
    sg_tensor *loss = sg_sum(sg_embedding(W, idx, NULL));
    size_t before_bwd = sg_ctx_mem_stats(ctx).bytes_in_use, peak_fwd = sg_ctx_mem_stats(ctx).peak_bytes;
    sg_ctx_reset_peak(ctx);
    int ok = loss && sg_backward(loss) == SG_OK && sg_tensor_grad(W);
    sg_mem_stats m = sg_ctx_mem_stats(ctx);
    *step_peak = (long long)((m.peak_bytes > peak_fwd ? m.peak_bytes : peak_fwd) - base);
    *bwd_new = (long long)(m.peak_bytes - before_bwd);
    sg_ctx_free(ctx);
    return ok ? 0 : 1;
}

static int bench_embedding(const sgb_cfg *cfg, int threads)
{
    static const int64_t Vs[3] = {10000, 100000, 1000000};
    int64_t B = 10000;
    for (int k = 0; k < (cfg->quick ? 2 : 3); k++) {
        int64_t V = Vs[k];
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
        int64_t wshape[2] = {V, D}, gshape[2] = {B, D};
        emb_case c = {ctx, sg_tensor_new(ctx, SG_F32, 2, wshape), random_rows(ctx, B, V),
                      sg_tensor_new(ctx, SG_F32, 2, gshape), malloc((size_t)(B * D) * sizeof(float)), B, 0};
        if (!c.W || !c.idx || !c.G || !c.ref_out) return fail(ctx, "embedding setup");
        sg_tensor_fill_uniform(c.W, -1, 1);
        sg_tensor_fill_uniform(c.G, -1, 1);
        sg_tensor_requires_grad(c.W, 1);
        int reps = sgb_reps(cfg, 51);
        double ms, ref;
        paired_median(emb_lib, emb_ref, &c, reps, &ms, &ref);
        if (c.err) return fail(ctx, "embedding");
        long long peak, bwd;
        if (emb_memory(V, B, &peak, &bwd)) return fail(ctx, "embedding memory");
        char params[128], extra[256];
        snprintf(params, sizeof params, "{\"V\":%lld,\"B\":%lld,\"D\":%d}", (long long)V, (long long)B, D);
        snprintf(extra, sizeof extra,
                 "\"peak_bytes\":%lld,\"backward_new_bytes\":%lld,\"BxD_bytes\":%lld,\"table_bytes\":%lld", peak,
                 bwd, (long long)(B * D * (int64_t)sizeof(float)), (long long)(V * D * (int64_t)sizeof(float)));
        sgb_emit("sparse", "embedding_fwd_bwd", params, ms, ref, threads, extra);
        free(c.ref_out);
        sg_ctx_free(ctx);
    }
    return 0;
}

/* ---------------------------------------------------------------- index_add */

typedef struct {
    sg_tensor *dst, *src;
    const int64_t *idx;
    const float *val;
    int64_t nnz;
    int err;
} iadd_case;

static void iadd_lib(void *ud)
{
    iadd_case *c = ud;
    if (sg_index_add_(c->dst, c->src) != SG_OK) c->err = 1;
}

static void iadd_ref(void *ud)
{
    iadd_case *c = ud;
    float *dst = sg_tensor_f32(c->dst);
    for (int64_t e = 0; e < c->nnz; e++) {
        float *row = dst + c->idx[e] * D;
        const float *v = c->val + e * D;
        for (int j = 0; j < D; j++) row[j] += v[j];
    }
}

static int bench_index_add(const sgb_cfg *cfg, int threads)
{
    static const int64_t sizes[2] = {100000, 1000000};
    for (int k = 0; k < (cfg->quick ? 1 : 2); k++) {
        int64_t n = sizes[k], V = sizes[k];
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
        int64_t shape[2] = {V, D};
        sg_tensor *rows = random_rows(ctx, n, V);
        float *val = malloc((size_t)(n * D) * sizeof *val);
        if (!rows || !val) return fail(ctx, "index_add setup");
        for (int64_t i = 0; i < n * D; i++) val[i] = (float)sg_rand_uniform(ctx) - 0.5f;
        iadd_case c = {sg_tensor_new(ctx, SG_F32, 2, shape),
                       sg_coo_new(ctx, SG_F32, 2, shape, 1, n, sg_tensor_data(rows), val), NULL, NULL, n, 0};
        free(val);
        if (!c.dst || !c.src) return fail(ctx, "index_add setup");
        c.idx = sg_tensor_data(sg_coo_indices(c.src));
        c.val = sg_tensor_data(sg_coo_values(c.src));
        sg_tensor_fill_uniform(c.dst, -1, 1);
        int reps = sgb_reps(cfg, k ? 9 : 31);
        char params[128];
        snprintf(params, sizeof params, "{\"nnz\":%lld,\"V\":%lld,\"D\":%d}", (long long)n, (long long)V, D);

        sg_ctx_set_threads(ctx, 1);
        double ms1, ref, ms2, ref2;
        paired_median(iadd_lib, iadd_ref, &c, reps, &ms1, &ref);
        sgb_emit("sparse", "index_add", params, ms1, ref, 1, NULL);

        sg_ctx_set_threads(ctx, 2);
        paired_median(iadd_lib, iadd_ref, &c, reps, &ms2, &ref2);
        /* one add from the same starting point with 1 and with 2 threads */
        size_t bytes = (size_t)(V * D) * sizeof(float);
        float *start = malloc(bytes), *one = malloc(bytes);
        if (!start || !one) return fail(ctx, "index_add compare");
        memcpy(start, sg_tensor_f32(c.dst), bytes);
        sg_ctx_set_threads(ctx, 1);
        iadd_lib(&c);
        memcpy(one, sg_tensor_f32(c.dst), bytes);
        memcpy(sg_tensor_f32(c.dst), start, bytes);
        sg_ctx_set_threads(ctx, 2);
        iadd_lib(&c);
        int equal = memcmp(one, sg_tensor_f32(c.dst), bytes) == 0;
        if (c.err) return fail(ctx, "index_add");
        char extra[96];
        snprintf(extra, sizeof extra, "\"speedup\":%.3g,\"bitwise_equal\":%s", ms1 / ms2, equal ? "true" : "false");
        sgb_emit("sparse", "index_add", params, ms2, ref2, 2, extra);
        free(start);
        free(one);
        sg_ctx_free(ctx);
    }
    return 0;
}

/* ---------------------------------------------------------------- coalesce */

typedef struct {
    sg_ctx *ctx;
    sg_tensor *src;
    void *copy;
    size_t bytes;
    int64_t *order; /* entries by row, ties in entry order (the probe's order) */
    int64_t unique;
    int err;
} co_case;

static void co_lib(void *ud)
{
    co_case *c = ud;
    sg_tensor *r = sg_coalesce(c->src);
    if (!r) c->err = 1;
    else c->unique = sg_coo_nnz(r);
    sg_tape_reset(c->ctx);
}

static void co_ref(void *ud)
{
    co_case *c = ud;
    memcpy(c->copy, sg_tensor_data(sg_coo_values(c->src)), c->bytes);
    sgb_sink(((float *)c->copy)[0]);
}

static void co_probe(void *ud)
{
    co_case *c = ud;
    const float *v = sg_tensor_data(sg_coo_values(c->src));
    float *out = c->copy;
    int64_t n = sg_coo_nnz(c->src);
    for (int64_t k = 0; k < n; k++) memcpy(out + k * D, v + c->order[k] * D, D * sizeof *out);
    sgb_sink(out[0]);
}

/* The entries of n rows in [0, V) ordered by row, ties in entry order (a counting sort);
 * NULL when out of memory. */
static int64_t *rows_order(const int64_t *rows, int64_t n, int64_t V)
{
    int64_t *start = calloc((size_t)V + 1, sizeof *start), *order = malloc((size_t)n * sizeof *order);
    if (start && order) {
        for (int64_t e = 0; e < n; e++) start[rows[e] + 1]++;
        for (int64_t r = 0; r < V; r++) start[r + 1] += start[r];
        for (int64_t e = 0; e < n; e++) order[start[rows[e]]++] = e;
    } else {
        free(order);
        order = NULL;
    }
    free(start);
    return order;
}

static int bench_coalesce(const sgb_cfg *cfg, int threads)
{
    int64_t n = cfg->quick ? 100000 : 1000000, V = n;
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
    int64_t shape[2] = {V, D};
    sg_tensor *rows = random_rows(ctx, n, V);
    float *val = malloc((size_t)(n * D) * sizeof *val);
    if (!rows || !val) return fail(ctx, "coalesce setup");
    for (int64_t i = 0; i < n * D; i++) val[i] = (float)sg_rand_uniform(ctx);
    co_case c = {ctx, sg_coo_new(ctx, SG_F32, 2, shape, 1, n, sg_tensor_data(rows), val), NULL,
                 (size_t)(n * D) * sizeof(float), rows_order(sg_tensor_data(rows), n, V), 0, 0};
    free(val);
    c.copy = malloc(c.bytes);
    if (!c.src || !c.copy || !c.order) return fail(ctx, "coalesce setup");
    int reps = sgb_reps(cfg, 9);
    char params[128], extra[96];
    snprintf(params, sizeof params, "{\"nnz\":%lld,\"V\":%lld,\"D\":%d}", (long long)n, (long long)V, D);
    int tcounts[2] = {threads, 2};
    for (int k = 0; k < (threads == 2 ? 1 : 2); k++) {
        sg_ctx_set_threads(ctx, tcounts[k]);
        double ms, ref, probe;
        timed_medians(co_lib, co_ref, co_probe, &c, reps, &ms, &ref, &probe);
        if (c.err) return fail(ctx, "coalesce");
        snprintf(extra, sizeof extra, "\"unique\":%lld,\"probe_ms\":%.6g", (long long)c.unique, probe);
        sgb_emit("sparse", "coalesce", params, ms, ref, tcounts[k], extra);
    }
    free(c.copy);
    free(c.order);
    sg_ctx_free(ctx);
    return 0;
}

int sgb_sparse(const sgb_cfg *cfg)
{
    int threads = cfg->threads > 0 ? cfg->threads : 1;
    if (bench_embedding(cfg, threads)) return 1;
    if (bench_index_add(cfg, threads)) return 1;
    return bench_coalesce(cfg, threads);
}
