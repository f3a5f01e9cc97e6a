/* What a backward costs when several run on one tape (gradient accumulation over K
 * micro-batches before one step, or a forgotten sg_tape_reset): each costs what its own
 * graph costs, in memory and time, not what the whole tape holds; and the gradients add
 * up under the accumulation rules (sparse + sparse concatenation with compaction for the
 * embedding table, dense += dense for the dense parameter). */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <time.h>

#define D 8
#define H 4
#define ROWS 3 /* table rows each micro-batch looks up */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    sg_ctx *ctx;
    sg_tensor *W, *A; /* (V,D) table, (D,H) dense parameter */
    int V;
} model;

/* A small table (V 64: K * ROWS entries overflow it, so the compaction rule merges the
 * table's gradient at nearly every backward) or a large one (no compaction). */
static model model_new(int V)
{
    model m;
    m.V = V;
    m.ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    m.W = sg_tensor_new(m.ctx, SG_F64, 2, (int64_t[]){V, D});
    m.A = sg_tensor_new(m.ctx, SG_F64, 2, (int64_t[]){D, H});
    double *w = sg_tensor_f64(m.W), *a = sg_tensor_f64(m.A);
    for (int i = 0; i < V * D; i++) w[i] = 0.5 * sin(0.37 * i + 0.1);
    for (int i = 0; i < D * H; i++) a[i] = 0.5 * cos(0.91 * i + 0.3);
    sg_tensor_requires_grad(m.W, 1);
    sg_tensor_requires_grad(m.A, 1);
    return m;
}

/* Micro-batch k's loss: sum(tanh(embedding(W, rows) @ A)), four nodes. */
static sg_tensor *micro_loss(model *m, const int64_t *rows)
{
    sg_tensor *idx = sg_tensor_new_tmp(m->ctx, SG_I64, 1, (int64_t[]){ROWS});
    if (!idx) return NULL;
    memcpy(sg_tensor_data(idx), rows, ROWS * sizeof *rows);
    return sg_sum(sg_tanh(sg_matmul(sg_embedding(m->W, idx, NULL), m->A)));
}

static int64_t *make_rows(int K, int V)
{
    int64_t *r = malloc((size_t)K * ROWS * sizeof *r);
    for (int i = 0; i < K * ROWS; i++) r[i] = (int64_t)(tu_rand() % V);
    return r;
}

typedef struct {
    size_t bytes;   /* most bytes held from the allocator during the K backwards, beyond
                       what the context held before */
    double fwd_s, bwd_s;
} cost;

/* K micro-batches on one tape, backward after each, no reset: the gradient accumulation
 * pattern. Leaves the gradients in m's store (the caller resets). */
static cost accumulate(model *m, int K, const int64_t *rows)
{
    cost c = {0, 0, 0};
    sg_ctx_reset_peak(m->ctx);
    size_t base = sg_ctx_mem_stats(m->ctx).bytes_in_use;
    for (int k = 0; k < K; k++) {
        double t0 = now_s();
        sg_tensor *loss = micro_loss(m, rows + (size_t)k * ROWS);
        double t1 = now_s();
        CHECK(loss != NULL);
        if (!loss) break;
        int rc = sg_backward(loss);
        double t2 = now_s();
        CHECK_STATUS(m->ctx, rc, SG_OK);
        c.fwd_s += t1 - t0;
        c.bwd_s += t2 - t1;
    }
    CHECK(sg_tape_nodes(m->ctx) == 4 * (int64_t)K);
    c.bytes = sg_ctx_mem_stats(m->ctx).peak_bytes - base;
    return c;
}

/* sum += the dense meaning of 2-D t (dense, or COO with sparse_dim 1), entry by entry. */
static void add_meaning(sg_tensor *t, double *sum)
{
    CHECK(t != NULL);
    if (!t) return;
    int64_t cols = sg_tensor_dim(t, 1);
    if (sg_tensor_layout(t) == SG_DENSE) {
        for (int64_t i = 0; i < sg_tensor_numel(t); i++) sum[i] += sg_tensor_get(t, i);
        return;
    }
    CHECK(sg_coo_sparse_dim(t) == 1);
    const int64_t *idx = sg_tensor_data(sg_coo_indices(t));
    sg_tensor *v = sg_coo_values(t);
    for (int64_t e = 0; e < sg_coo_nnz(t); e++)
        for (int64_t j = 0; j < cols; j++) sum[idx[e] * cols + j] += sg_tensor_get(v, e * cols + j);
}

/* The sum of the K micro-batches' gradients, each from its own step (backward, then
 * reset), as dense arrays: W's (V*D) then A's (D*H). */
static double *separate_steps(int K, int V, const int64_t *rows)
{
    model m = model_new(V);
    double *sum = calloc((size_t)V * D + D * H, sizeof *sum);
    for (int k = 0; k < K; k++) {
        sg_tensor *loss = micro_loss(&m, rows + (size_t)k * ROWS);
        CHECK(loss && sg_backward(loss) == SG_OK);
        add_meaning(sg_tensor_grad(m.W), sum);
        add_meaning(sg_tensor_grad(m.A), sum + (int64_t)V * D);
        sg_tape_reset(m.ctx);
    }
    sg_ctx_free(m.ctx);
    return sum;
}

/* The memory K=4000 micro-batches take over what K=1000 take, and whether the
 * accumulated gradients are the sum of the micro-batches' own. */
static void k_micro_batches(int V)
{
    static const int Ks[] = {1000, 2000, 4000};
    cost c[3];
    for (int j = 0; j < 3; j++) {
        int K = Ks[j];
        int64_t *rows = make_rows(K, V);
        model m = model_new(V);
        c[j] = accumulate(&m, K, rows);
        printf("  V=%d K=%d: %zu bytes (%.0f per micro-batch), forward %.2f ms, backward %.2f ms "
               "(%.2f us per backward), arena %zu bytes\n",
               V, K, c[j].bytes, (double)c[j].bytes / K, 1e3 * c[j].fwd_s, 1e3 * c[j].bwd_s,
               1e6 * c[j].bwd_s / K, sg_ctx_mem_stats(m.ctx).arena_bytes);
        /* the accumulated gradients: the sum of each micro-batch's own */
        double *want = separate_steps(K, V, rows);
        sg_tensor *gw = sg_tensor_grad(m.W), *ga = sg_tensor_grad(m.A);
        CHECK(gw != NULL && ga != NULL);
        CHECK(sg_grads_count(m.ctx) == 2);
        double *hw = tu_meaning(gw, (int64_t)V * D), *ha = tu_meaning(ga, D * H);
        double err = 0, scale = 0;
        for (int64_t i = 0; i < (int64_t)V * D; i++) {
            err = fmax(err, fabs(hw[i] - want[i]));
            scale = fmax(scale, fabs(want[i]));
        }
        for (int i = 0; i < D * H; i++) {
            err = fmax(err, fabs(ha[i] - want[(int64_t)V * D + i]));
            scale = fmax(scale, fabs(want[(int64_t)V * D + i]));
        }
        CHECK(scale > 1);
        CHECK(err <= 1e-12 * scale * K);
        CHECK(sg_tensor_layout(gw) == SG_COO);
        /* a small table's gradient was compacted: no more entries than a concatenation
         * past the table's rows; a large one's holds every entry */
        if (V < K * ROWS) CHECK(sg_coo_nnz(gw) <= V + ROWS);
        else CHECK(sg_coo_nnz(gw) == (int64_t)K * ROWS);
        free(hw);
        free(ha);
        free(want);
        sg_tape_reset(m.ctx);
        CHECK(sg_grads_count(m.ctx) == 0 && sg_tape_nodes(m.ctx) == 0);
        sg_ctx_free(m.ctx);
        free(rows);
    }
    double r_mem = (double)c[2].bytes / (double)c[0].bytes;
    printf("  V=%d memory K=4000 / K=1000: %.2f (linear: 4, quadratic: 16); backward time: %.2f\n",
           V, r_mem, c[2].bwd_s / c[0].bwd_s);
    CHECK(r_mem < 5);
}

TEST(k_backwards_without_reset_cost_k_times_one_small_table)
{
    k_micro_batches(64);
}

TEST(k_backwards_without_reset_cost_k_times_one_large_table)
{
    k_micro_batches(1 << 16);
}

/* Backward K times on one loss, no reset (retain semantics): each run traverses the same
 * four nodes again, and the leaves get K times one backward's gradient. */
TEST(backward_k_times_on_one_loss_gives_k_times_the_gradient)
{
    enum { K = 4000 };
    model m = model_new(64);
    int64_t rows[ROWS] = {1, 5, 1};
    sg_tensor *loss = micro_loss(&m, rows);
    CHECK(loss != NULL);
    for (int k = 0; k < K; k++) CHECK_STATUS(m.ctx, sg_backward(loss), SG_OK);
    CHECK(sg_tape_nodes(m.ctx) == 4);
    model one = model_new(64);
    sg_tensor *l1 = micro_loss(&one, rows);
    CHECK(l1 && sg_backward(l1) == SG_OK);
    double *g1 = tu_meaning(sg_tensor_grad(one.A), D * H), *gk = tu_meaning(sg_tensor_grad(m.A), D * H);
    double *w1 = tu_meaning(sg_tensor_grad(one.W), 64 * D), *wk = tu_meaning(sg_tensor_grad(m.W), 64 * D);
    for (int i = 0; i < D * H; i++) CHECK_NEAR(gk[i], K * g1[i], 1e-9 * (1 + fabs(K * g1[i])));
    for (int i = 0; i < 64 * D; i++) CHECK_NEAR(wk[i], K * w1[i], 1e-9 * (1 + fabs(K * w1[i])));
    free(g1);
    free(gk);
    free(w1);
    free(wk);
    sg_ctx_free(one.ctx);
    sg_ctx_free(m.ctx);
}

TEST_MAIN()
