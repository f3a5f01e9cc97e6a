/* Gathers with sparse gradients: embedding (any index shape, int32/int64, padding_idx,
 * max_norm, fused optimizer), embedding_bag (sum/mean/max, per-sample weights, padding,
 * CSR offsets, fused optimizer), index_select and slice. Gradients are checked against
 * naive scatter loops and the dense selection path (their finite-difference gradchecks
 * are in test_gradcheck_ops.c); the embedding gradient is checked to borrow the incoming
 * gradient buffer and to cost O(B x D) memory. */
#include "ops/ops.h"
#define TU_SEED 0xD1B54A32D192ED03ull
#include "testutil.h"


static sg_tensor *rand_dense(sg_ctx *ctx, sg_dtype dt, int ndim, const int64_t *shape)
{
    sg_tensor *t = sg_tensor_new(ctx, dt, ndim, shape);
    for (int64_t i = 0; i < sg_tensor_numel(t); i++) {
        if (dt == SG_F64) sg_tensor_f64(t)[i] = tu_rand_unit();
        else sg_tensor_f32(t)[i] = (float)tu_rand_unit();
    }
    return t;
}

/* Persistent index tensor of the given dtype from int64 values. */
static sg_tensor *index_tensor(sg_ctx *ctx, sg_dtype dt, int ndim, const int64_t *shape, const int64_t *v)
{
    sg_tensor *t = sg_tensor_new(ctx, dt, ndim, shape);
    for (int64_t i = 0; i < sg_tensor_numel(t); i++) {
        if (dt == SG_I64) ((int64_t *)sg_tensor_data(t))[i] = v[i];
        else ((int32_t *)sg_tensor_data(t))[i] = (int32_t)v[i];
    }
    return t;
}

/* ---- embedding */

static sg_embedding_bag_opts bag_opts(sg_bag_mode mode, sg_tensor *psw)
{
    sg_embedding_bag_opts o = SG_EMBEDDING_BAG_OPTS_DEFAULT;
    o.mode = mode;
    o.per_sample_weights = psw;
    return o;
}

TEST(embedding_matches_naive_gather_and_scatter)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 50, D = 5, B = 40;
    sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F32, 2, (int64_t[]){V, D}), 1);
    int64_t v[40];
    for (int i = 0; i < B; i++) v[i] = (int64_t)(tu_rand() % 7) * 7; /* duplicates */
    for (int dt = 0; dt < 2; dt++) {
        sg_tensor *idx = index_tensor(ctx, dt ? SG_I32 : SG_I64, 3, (int64_t[]){2, 4, 5}, v);
        sg_embedding_opts o = {14, 0, NULL};
        sg_tensor *y = sg_embedding(W, idx, &o);
        CHECK(sg_tensor_ndim(y) == 4 && sg_tensor_dim(y, 3) == D);
        int bad = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < D; j++)
                bad += sg_tensor_f32(y)[b * D + j] != (v[b] == 14 ? 0.0f : sg_tensor_f32(W)[v[b] * D + j]);
        CHECK(bad == 0);
        sg_tensor *G = rand_dense(ctx, SG_F32, 4, sg_tensor_shape(y));
        CHECK_STATUS(ctx, sg_backward_grad(y, G), SG_OK);
        double *want = calloc((size_t)(V * D), sizeof *want);
        for (int64_t b = 0; b < B; b++)
            if (v[b] != 14)
                for (int64_t j = 0; j < D; j++) want[v[b] * D + j] += sg_tensor_f32(G)[b * D + j];
        double *got = tu_meaning(sg_tensor_grad(W), V * D);
        double worst = 0;
        for (int64_t i = 0; i < V * D; i++) worst = fmax(worst, fabs(got[i] - want[i]));
        CHECK(worst < 1e-5);
        sg_tensor *g = sg_tensor_grad(W);
        int64_t npad = 0;
        for (int64_t b = 0; b < B; b++) npad += v[b] == 14;
        CHECK(npad > 0 && sg_coo_nnz(g) == B - npad); /* padding entries are dropped */
        free(want), free(got);
        sg_tape_reset(ctx);
    }
    sg_ctx_free(ctx);
}

TEST(embedding_gradient_borrows_the_incoming_gradient)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F32, 2, (int64_t[]){10, 4}), 1);
    int64_t v[6] = {3, 3, 9, 0, 3, 1};
    sg_tensor *idx = index_tensor(ctx, SG_I64, 2, (int64_t[]){3, 2}, v);
    sg_tensor *y = sg_embedding(W, idx, NULL);
    sg_tensor *G = rand_dense(ctx, SG_F32, 3, sg_tensor_shape(y));
    CHECK_STATUS(ctx, sg_backward_grad(y, G), SG_OK);
    sg_tensor *g = sg_tensor_grad(W);
    CHECK(g != NULL && sg_tensor_layout(g) == SG_COO);
    CHECK(sg_tensor_data(sg_coo_values(g)) == sg_tensor_data(G));   /* no copy of values */
    CHECK(sg_tensor_data(sg_coo_indices(g)) == sg_tensor_data(idx)); /* nor of int64 indices */
    CHECK(!sg_coo_is_coalesced(g) && sg_coo_nnz(g) == 6 && sg_coo_sparse_dim(g) == 1);
    sg_tape_reset(ctx);

    sg_tensor *idx32 = index_tensor(ctx, SG_I32, 1, (int64_t[]){6}, v);
    y = sg_embedding(W, idx32, NULL);
    G = rand_dense(ctx, SG_F32, 2, sg_tensor_shape(y));
    CHECK_STATUS(ctx, sg_backward_grad(y, G), SG_OK);
    g = sg_tensor_grad(W);
    CHECK(sg_tensor_data(sg_coo_values(g)) == sg_tensor_data(G));
    const int64_t *gi = sg_tensor_data(sg_coo_indices(g));
    for (int i = 0; i < 6; i++) CHECK(gi[i] == v[i]); /* int32 converted */
    sg_ctx_free(ctx);
}

TEST(embedding_backward_memory_is_O_B_times_D)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 100000, D = 16, B = 1000;
    sg_tensor *W = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){V, D}), 1);
    sg_tensor *idx = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){B});
    for (int64_t b = 0; b < B; b++) ((int64_t *)sg_tensor_data(idx))[b] = (int64_t)(tu_rand() % (uint64_t)V);
    sg_tensor *y = sg_embedding(W, idx, NULL);
    sg_tensor *loss = sg_sum(y);
    size_t before = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_ctx_reset_peak(ctx);
    CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
    size_t extra = sg_ctx_mem_stats(ctx).peak_bytes - before;
    size_t bd = (size_t)(B * D) * sizeof(float), vd = (size_t)(V * D) * sizeof(float);
    CHECK(extra <= 4 * bd + 65536); /* the gradient of sum (B x D) and small headers */
    CHECK(extra < vd / 20);
    CHECK(sg_tensor_layout(sg_tensor_grad(W)) == SG_COO);
    sg_ctx_free(ctx);
}

TEST(embedding_max_norm_renormalises_looked_up_rows_first)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 5, D = 3;
    sg_tensor *W = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){V, D});
    double w0[15] = {3, 4, 0, /* norm 5 */ 0.1, 0.2, 0.2, /* 0.3 */ 6, 8, 0, 1, 1, 1, 0, 0, 12};
    memcpy(sg_tensor_f64(W), w0, sizeof w0);
    sg_tensor *idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){4}, (int64_t[]){0, 1, 0, 4});
    /* an out-of-range index anywhere: error, and W untouched */
    sg_tensor *bad = index_tensor(ctx, SG_I64, 1, (int64_t[]){3}, (int64_t[]){0, 4, 5});
    sg_embedding_opts o = {-1, 2.0, NULL};
    CHECK(sg_embedding(W, bad, &o) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    CHECK(memcmp(sg_tensor_f64(W), w0, sizeof w0) == 0);
    sg_tensor *y = sg_embedding(W, idx, &o);
    CHECK(y != NULL);
    double want[15];
    memcpy(want, w0, sizeof w0);
    for (int r = 0; r < V; r++) {
        if (r != 0 && r != 4) continue;
        double n = sqrt(w0[r * 3] * w0[r * 3] + w0[r * 3 + 1] * w0[r * 3 + 1] + w0[r * 3 + 2] * w0[r * 3 + 2]);
        for (int j = 0; j < 3; j++) want[r * 3 + j] = w0[r * 3 + j] * (2.0 / (n + 1e-7));
    }
    for (int i = 0; i < 15; i++) CHECK_NEAR(sg_tensor_f64(W)[i], want[i], 1e-15);
    CHECK_NEAR(sg_tensor_get(y, 0), want[0], 1e-15);
    CHECK_NEAR(sg_tensor_get(y, 3 * 3 + 2), want[14], 1e-15);
    sg_ctx_free(ctx);
}

/* An allocator that fails its N-th call (tu_counting from `calls` = 0; fail_at <= 0: never). */
typedef struct {
    long calls, fail_at;
} failing_alloc;
static void *fa_alloc(void *ud, size_t n)
{
    failing_alloc *a = ud;
    if (a->fail_at > 0 && ++a->calls == a->fail_at) return NULL;
    return malloc(n);
}
static void fa_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

TEST(embedding_max_norm_out_of_memory_leaves_the_table_unchanged)
{
    /* Every allocation an embedding with max_norm makes fails in turn: whenever the call
     * returns NULL (NOMEM), no row of W was renormalised. Outputs of several sizes put the
     * arena's chunk boundaries (hence which allocation needs a new chunk) in different
     * places: the output's data, its header, the node. */
    const int64_t sizes[4][2] = {{4, 3}, {64, 300}, {64, 600}, {2000, 40}};
    for (int c = 0; c < 4; c++) {
        int64_t V = 10, B = sizes[c][0], D = sizes[c][1];
        int returned = 0, failed = 0;
        for (long n = 1; n < 30 && !returned; n++) {
            failing_alloc fa = {0, 0};
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {fa_alloc, fa_free, &fa}, .threads = 1});
            sg_tensor *W = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
            double *w = sg_tensor_f64(W);
            for (int64_t i = 0; i < V * D; i++) w[i] = 1.0 + (double)(i % 7); /* norms > 1 */
            double *w0 = malloc((size_t)(V * D) * sizeof *w0);
            memcpy(w0, w, (size_t)(V * D) * sizeof *w0);
            sg_tensor *idx = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){B});
            for (int64_t b = 0; b < B; b++) ((int64_t *)sg_tensor_data(idx))[b] = (b * 3) % V;
            fa.fail_at = n; /* the n-th allocation from here on fails */
            sg_tensor *y = sg_embedding(W, idx, &(sg_embedding_opts){-1, 1.0, NULL});
            if (y) {
                returned = 1;
                CHECK(memcmp(w, w0, (size_t)(V * D) * sizeof *w0) != 0); /* it did renormalise */
            } else {
                failed++;
                CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_NOMEM);
                CHECK(memcmp(w, w0, (size_t)(V * D) * sizeof *w0) == 0);
            }
            free(w0);
            sg_ctx_free(ctx);
        }
        CHECK(returned && failed > 0);
    }
}

TEST(embedding_fused_update_stores_no_gradient)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 8, D = 4, B = 5;
    sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
    double w0[32];
    memcpy(w0, sg_tensor_f64(W), sizeof w0);
    sg_sgd_opts so = SG_SGD_OPTS_DEFAULT;
    so.lr = 0.1;
    sg_optim *opt = sg_optim_sgd(ctx, &so);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    int64_t v[5] = {2, 7, 2, 3, 2};
    sg_tensor *idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){B}, v);
    sg_embedding_opts o = {3, 0, opt}; /* padding row 3 must not move */
    sg_tensor *y = sg_embedding(W, idx, &o);
    sg_tensor *G = rand_dense(ctx, SG_F64, 2, (int64_t[]){B, D});
    CHECK_STATUS(ctx, sg_backward_grad(y, G), SG_OK);
    CHECK(sg_tensor_grad(W) == NULL);
    double want[32];
    memcpy(want, w0, sizeof w0);
    for (int64_t b = 0; b < B; b++)
        if (v[b] != 3)
            for (int64_t j = 0; j < D; j++) want[v[b] * D + j] -= 0.1 * sg_tensor_f64(G)[b * D + j];
    for (int i = 0; i < 32; i++) CHECK_NEAR(sg_tensor_f64(W)[i], want[i], 1e-14);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST(embedding_fused_update_needs_a_leaf_parameter_of_the_optimizer)
{
    /* A fused update writes W in place and stores no gradient for it: on a non-leaf W
     * (W0 * 1) it would change a tape temporary and W0's gradient would be lost; on a
     * tensor the optimizer does not hold, or one that does not require grad, it would
     * not happen. Each is refused before anything is recorded. */
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t shape[2] = {5, 3};
    sg_tensor *W0 = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, shape), 1);
    sg_tensor *U = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, shape), 1);
    sg_tensor *O = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, shape), 1);
    sg_tensor *F = rand_dense(ctx, SG_F64, 2, shape); /* a parameter not requiring grad */
    sg_optim *opt = sg_optim_sgd(ctx, NULL), *other = sg_optim_sgd(ctx, NULL);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W0), SG_OK);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, F), SG_OK);
    CHECK_STATUS(ctx, sg_optim_add_param(other, O), SG_OK);
    sg_tensor *idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){2}, (int64_t[]){1, 4});
    sg_embedding_opts eo = {-1, 0, opt};
    sg_tensor *S = sg_scale(W0, 1.0);
    int64_t nodes = sg_tape_nodes(ctx);
    sg_tensor *bad[4] = {S, U, O, F};
    for (int i = 0; i < 4; i++) {
        sg_ctx_clear_error(ctx);
        CHECK(sg_embedding(bad[i], idx, &eo) == NULL);
        CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    }
    CHECK(sg_tape_nodes(ctx) == nodes);
    CHECK(sg_embedding(S, idx, NULL) != NULL); /* unfused, all of them are fine */
    CHECK(sg_embedding(W0, idx, &eo) != NULL);
    sg_optim_free(opt);
    sg_optim_free(other);
    sg_ctx_free(ctx);
}

TEST(embedding_fused_update_waits_for_the_whole_backward)
{
    /* The bag's backward reads W's rows for its weights' gradient; it runs after the fused
     * embedding's backward (nodes go in reverse), yet must see W as the forward saw it. */
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 6, D = 3;
    sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
    double w0[18];
    memcpy(w0, sg_tensor_f64(W), sizeof w0);
    sg_sgd_opts so = SG_SGD_OPTS_DEFAULT;
    so.lr = 0.5;
    sg_optim *opt = sg_optim_sgd(ctx, &so);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    int64_t v[4] = {1, 4, 4, 0};
    sg_tensor *idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){4}, v);
    sg_tensor *off = index_tensor(ctx, SG_I64, 1, (int64_t[]){1}, (int64_t[]){0});
    sg_tensor *psw = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 1, (int64_t[]){4}), 1);
    sg_embedding_bag_opts bo = bag_opts(SG_BAG_SUM, psw);
    sg_tensor *bag = sg_embedding_bag(W, idx, off, &bo);
    sg_tensor *e = sg_embedding(W, idx, &(sg_embedding_opts){-1, 0, opt});
    CHECK_STATUS(ctx, sg_backward(sg_add(sg_sum(bag), sg_sum(e))), SG_OK);
    for (int i = 0; i < 4; i++) /* d/dw_i sum(bag) = sum_j W0[v_i, j] */
        CHECK_NEAR(sg_tensor_get(sg_tensor_grad(psw), i), w0[v[i] * D] + w0[v[i] * D + 1] + w0[v[i] * D + 2], 1e-14);
    for (int64_t r = 0; r < V; r++) { /* and the fused step happened: W -= 0.5 * counts */
        int cnt = 0;
        for (int i = 0; i < 4; i++) cnt += v[i] == r;
        for (int64_t j = 0; j < D; j++) CHECK_NEAR(sg_tensor_f64(W)[r * D + j], w0[r * D + j] - 0.5 * cnt, 1e-14);
    }
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST(embedding_errors_and_empty_batch)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F32, 2, (int64_t[]){4, 3}), 1);
    sg_tensor *neg = index_tensor(ctx, SG_I32, 1, (int64_t[]){2}, (int64_t[]){1, -1});
    CHECK(sg_embedding(W, neg, NULL) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    sg_tensor *fidx = sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){2});
    CHECK(sg_embedding(W, fidx, NULL) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_DTYPE);
    sg_tensor *ok = index_tensor(ctx, SG_I64, 1, (int64_t[]){2}, (int64_t[]){1, 2});
    CHECK(sg_embedding(W, ok, &(sg_embedding_opts){4, 0, NULL}) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    CHECK(sg_embedding(ok, ok, NULL) == NULL);
    CHECK(sg_ctx_status(ctx) != SG_OK);
    CHECK(sg_tape_nodes(ctx) == 0);
    sg_ctx_clear_error(ctx);

    sg_tensor *empty = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){0});
    sg_tensor *y = sg_embedding(W, empty, NULL);
    CHECK(y != NULL && sg_tensor_dim(y, 0) == 0 && sg_tensor_dim(y, 1) == 3);
    CHECK_STATUS(ctx, sg_backward_grad(y, sg_tensor_new_tmp(ctx, SG_F32, 2, (int64_t[]){0, 3})), SG_OK);
    CHECK(sg_coo_nnz(sg_tensor_grad(W)) == 0);
    sg_ctx_free(ctx);
}

/* ---- embedding_bag */

/* The bags by naive loops in double: entries equal to pad are left out (and not counted
 * by the mean); bag b covers [off[b], b + 1 < nb ? off[b + 1] : N). */
static double naive_bag_worst(const float *w, const int64_t *v, const int64_t *off, int64_t nb,
                              int64_t N, int64_t D, int mode, const float *pw, int64_t pad,
                              const float *y)
{
    double worst = 0;
    for (int64_t b = 0; b < nb; b++) {
        int64_t s = off[b], e = b + 1 < nb ? off[b + 1] : N;
        for (int64_t j = 0; j < D; j++) {
            double acc = mode == SG_BAG_MAX ? -INFINITY : 0;
            int64_t cnt = 0;
            for (int64_t i = s; i < e; i++) {
                if (v[i] == pad) continue;
                double x = w[v[i] * D + j];
                cnt++;
                if (mode == SG_BAG_MAX) acc = fmax(acc, x);
                else acc += (pw ? pw[i] : 1.0) * x;
            }
            if (cnt == 0) acc = 0;
            else if (mode == SG_BAG_MEAN) acc /= (double)cnt;
            worst = fmax(worst, fabs(acc - y[b * D + j]));
        }
    }
    return worst;
}

TEST(embedding_bag_matches_naive_loops)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 20, D = 4, N = 30, B = 6;
    sg_tensor *W = rand_dense(ctx, SG_F32, 2, (int64_t[]){V, D});
    int64_t v[30], off[7] = {0, 4, 4, 11, 20, 29, 30};
    for (int i = 0; i < N; i++) v[i] = (int64_t)(tu_rand() % (uint64_t)V);
    v[0] = v[1] = v[2] = v[3] = 5; /* bag 0: padding only when padding_idx is 5 */
    sg_tensor *idx = index_tensor(ctx, SG_I32, 1, (int64_t[]){N}, v);
    sg_tensor *offs = index_tensor(ctx, SG_I64, 1, (int64_t[]){B}, off);
    sg_tensor *csr = index_tensor(ctx, SG_I32, 1, (int64_t[]){B + 1}, off);
    sg_tensor *psw = rand_dense(ctx, SG_F32, 1, (int64_t[]){N});
    for (int pad = -1; pad <= 5; pad += 6)
        for (int last = 0; last < 2; last++)
            for (int mode = SG_BAG_SUM; mode <= SG_BAG_MAX; mode++)
                for (int weighted = 0; weighted <= (mode == SG_BAG_SUM); weighted++) {
                    sg_embedding_bag_opts o = bag_opts((sg_bag_mode)mode, weighted ? psw : NULL);
                    o.padding_idx = pad;
                    o.include_last_offset = last;
                    sg_tensor *y = sg_embedding_bag(W, idx, last ? csr : offs, &o);
                    CHECK(y != NULL && sg_tensor_dim(y, 0) == B && sg_tensor_dim(y, 1) == D);
                    if (!y) continue;
                    CHECK(naive_bag_worst(sg_tensor_f32(W), v, off, B, N, D, mode,
                                          weighted ? sg_tensor_f32(psw) : NULL, pad,
                                          sg_tensor_f32(y)) < 1e-5);
                }
    /* NULL options: PyTorch's default, the mean */
    sg_tensor *y = sg_embedding_bag(W, idx, offs, NULL);
    CHECK(y && naive_bag_worst(sg_tensor_f32(W), v, off, B, N, D, SG_BAG_MEAN, NULL, -1,
                               sg_tensor_f32(y)) < 1e-5);
    sg_ctx_free(ctx);
}

/* With padding, W's gradient leaves the padding entries out (and the weights' gradient is
 * 0 there); compared with a dense scatter by a loop. */
TEST(embedding_bag_padding_gets_no_gradient)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 6, D = 3, N = 7;
    sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
    sg_tensor *psw = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 1, (int64_t[]){N}), 1);
    int64_t v[7] = {1, 4, 4, 0, 4, 2, 1};
    sg_tensor *idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){N}, v);
    sg_tensor *off = index_tensor(ctx, SG_I64, 1, (int64_t[]){3}, (int64_t[]){0, 3, 5});
    sg_embedding_bag_opts o = bag_opts(SG_BAG_SUM, psw);
    o.padding_idx = 4;
    sg_tensor *y = sg_embedding_bag(W, idx, off, &o);
    sg_tensor *G = rand_dense(ctx, SG_F64, 2, (int64_t[]){3, D});
    CHECK_STATUS(ctx, sg_backward_grad(y, G), SG_OK);
    sg_tensor *gw = sg_tensor_grad(W);
    CHECK(gw && sg_tensor_layout(gw) == SG_COO && sg_coo_nnz(gw) == 4);
    double want[18] = {0};
    const int bag[7] = {0, 0, 0, 1, 1, 2, 2};
    for (int i = 0; i < N; i++)
        if (v[i] != 4)
            for (int j = 0; j < D; j++)
                want[v[i] * D + j] += sg_tensor_f64(psw)[i] * sg_tensor_f64(G)[bag[i] * D + j];
    sg_tensor *dense = sg_to_dense(gw);
    for (int i = 0; dense && i < V * D; i++) CHECK_NEAR(sg_tensor_f64(dense)[i], want[i], 1e-14);
    for (int i = 0; i < N; i++) {
        double d = 0;
        for (int j = 0; v[i] != 4 && j < D; j++)
            d += sg_tensor_f64(G)[bag[i] * D + j] * sg_tensor_f64(W)[v[i] * D + j];
        CHECK_NEAR(sg_tensor_get(sg_tensor_grad(psw), i), d, 1e-14);
    }
    sg_ctx_free(ctx);
}

/* A fused bag equals the unfused bag followed by a step of the same optimizer, for the
 * linear SGD path and for Adagrad (which sums duplicate rows first), in every mode. */
TEST(embedding_bag_fused_update_equals_gradient_and_step)
{
    int64_t V = 9, D = 4, N = 10;
    int64_t v[10] = {3, 1, 3, 8, 0, 3, 1, 7, 7, 2};
    for (int kind = 0; kind < 2; kind++)
        for (int mode = SG_BAG_SUM; mode <= SG_BAG_MAX; mode++) {
            double w[2][36];
            for (int fused = 0; fused < 2; fused++) {
                tu_rng_state = 77;
                sg_ctx *ctx = sg_ctx_new(NULL);
                sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
                sg_tensor *G = rand_dense(ctx, SG_F64, 2, (int64_t[]){3, D});
                sg_optim *opt = kind == 0 ? sg_optim_sgd(ctx, &(sg_sgd_opts){.lr = 0.3})
                                          : sg_optim_adagrad(ctx, &(sg_adagrad_opts){.lr = 0.3, .eps = 1e-10});
                CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
                sg_tensor *idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){N}, v);
                sg_tensor *off = index_tensor(ctx, SG_I64, 1, (int64_t[]){3}, (int64_t[]){0, 4, 4});
                sg_embedding_bag_opts o = bag_opts((sg_bag_mode)mode, NULL);
                o.padding_idx = 8;
                o.fused = fused ? opt : NULL;
                CHECK_STATUS(ctx, sg_backward_grad(sg_embedding_bag(W, idx, off, &o), G), SG_OK);
                CHECK((sg_tensor_grad(W) == NULL) == fused);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
                memcpy(w[fused], sg_tensor_f64(W), sizeof w[0]);
                sg_optim_free(opt);
                sg_ctx_free(ctx);
            }
            CHECK(memcmp(w[0], w[1], sizeof w[0]) == 0);
        }
}

/* Every optimizer kind, for the fused bags whose update takes its rows gathered from the
 * output gradient (sum, mean with either rule; sg__fused_rows' gathered form): two steps
 * of the fused bag on `threads` threads leave W and the optimizer state bitwise as the
 * unfused bag followed by sg_optim_step on one thread does. */
static sg_optim *bag_kind_optim(sg_ctx *ctx, int kind)
{
    switch (kind) {
    case 0: return sg_optim_sgd(ctx, &(sg_sgd_opts){.lr = 0.3});
    case 1: return sg_optim_sgd(ctx, &(sg_sgd_opts){.lr = 0.3, .momentum = 0.9, .weight_decay = 0.01});
    case 2: return sg_optim_adagrad(ctx, &(sg_adagrad_opts){.lr = 0.3, .lr_decay = 0.1, .weight_decay = 0.01, .eps = 1e-10});
    case 3: return sg_optim_rowwise_adagrad(ctx, &(sg_adagrad_opts){.lr = 0.3, .initial_accumulator = 0.1, .eps = 1e-10});
    case 4: return sg_optim_lazy_adam(ctx, &(sg_adam_opts){.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
    default: return sg_optim_adam(ctx, &(sg_adam_opts){.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01});
    }
}

typedef struct {
    int64_t V, D, N, B;
    sg_dtype dtype, idx_dtype;
    int64_t pad;
    int last, threads;
    int64_t spread; /* entries name rows spread * k for k in [0, V / spread), not padding */
} bag_case;

/* W and its optimizer state after two steps of a bag of case c, mode `mode` (3: mean with
 * the word2vec rule), fused or not; a malloc'd copy of W then of each state tensor. */
static unsigned char *bag_two_steps(const bag_case *c, int kind, int mode, int fused, size_t *bytes)
{
    tu_rng_state = 1234;
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = fused ? c->threads : 1});
    sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, c->dtype, 2, (int64_t[]){c->V, c->D}), 1);
    sg_optim *opt = bag_kind_optim(ctx, kind);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    int64_t *v = malloc((size_t)c->N * sizeof *v), *off = malloc((size_t)(c->B + 1) * sizeof *off);
    for (int step = 0; step < 2; step++) {
        for (int64_t i = 0; i < c->N; i++) /* rows repeat; every 7th entry is padding */
            v[i] = c->pad >= 0 && i % 7 == 3 ? c->pad
                                             : c->spread * (int64_t)(tu_rand() % (uint64_t)(c->V / c->spread));
        off[0] = 0; /* sorted cut points, bag 0 empty */
        for (int64_t b = 1; b < c->B; b++) off[b] = b == 1 ? 0 : (int64_t)(tu_rand() % (uint64_t)(c->N + 1));
        off[c->B] = c->N;
        for (int64_t b = 1; b < c->B; b++)
            for (int64_t a = b; a > 1 && off[a] < off[a - 1]; a--) {
                int64_t t = off[a];
                off[a] = off[a - 1];
                off[a - 1] = t;
            }
        sg_tensor *idx = index_tensor(ctx, c->idx_dtype, 1, (int64_t[]){c->N}, v);
        sg_tensor *offs = index_tensor(ctx, SG_I64, 1, (int64_t[]){c->B + c->last}, off);
        sg_tensor *G = rand_dense(ctx, c->dtype, 2, (int64_t[]){c->B, c->D});
        sg_embedding_bag_opts o = bag_opts(mode == SG_BAG_SUM ? SG_BAG_SUM : SG_BAG_MEAN, NULL);
        o.padding_idx = c->pad;
        o.include_last_offset = c->last;
        o.grad = mode == 3 ? SG_BAG_GRAD_WORD2VEC : SG_BAG_GRAD_TRUE;
        o.fused = fused ? opt : NULL;
        CHECK_STATUS(ctx, sg_backward_grad(sg_embedding_bag(W, idx, offs, &o), G), SG_OK);
        CHECK((sg_tensor_grad(W) == NULL) == fused);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        sg_tape_reset(ctx);
        sg_tensor_free(idx);
        sg_tensor_free(offs);
        sg_tensor_free(G);
    }
    CHECK_STATUS(ctx, sg_optim_flush(opt), SG_OK);
    size_t wb = (size_t)sg_tensor_numel(W) * sg_dtype_size(c->dtype), total = wb;
    int ns = sg_optim_state_count(opt, W);
    for (int k = 0; k < ns; k++) {
        sg_tensor *st = sg_optim_state(opt, W, k, NULL);
        total += (size_t)sg_tensor_numel(st) * sg_dtype_size(sg_tensor_dtype(st));
    }
    unsigned char *out = malloc(total), *at = out + wb;
    memcpy(out, sg_tensor_data(W), wb);
    for (int k = 0; k < ns; k++) {
        sg_tensor *st = sg_optim_state(opt, W, k, NULL);
        size_t sb = (size_t)sg_tensor_numel(st) * sg_dtype_size(sg_tensor_dtype(st));
        memcpy(at, sg_tensor_data(st), sb);
        at += sb;
    }
    *bytes = total;
    free(v);
    free(off);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
    return out;
}

TEST(embedding_bag_fused_gathered_rows_equal_gradient_and_step_for_every_kind)
{
    const bag_case cases[] = {
        {9, 5, 23, 6, SG_F64, SG_I64, -1, 0, 1, 2},
        {9, 5, 23, 6, SG_F32, SG_I32, 2, 1, 2, 2},
        {40, 300, 50, 7, SG_F32, SG_I64, 0, 0, 1, 2}, /* rows wider than a group-sum chunk */
        {3000, 64, 12000, 700, SG_F32, SG_I64, -1, 1, 2, 2}, /* chunks on both threads */
        {3000, 64, 12000, 700, SG_F64, SG_I32, 5, 0, 2, 2},
        {200000, 4, 3000, 90, SG_F32, SG_I64, 7, 0, 2, 997}, /* rows grouped by hash */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int kind = 0; kind < 6; kind++)
            for (int mode = 0; mode < 4; mode++) {
                if (mode == SG_BAG_MAX) continue; /* 2: max keeps its COO rows */
                size_t b0 = 0, b1 = 0;
                unsigned char *want = bag_two_steps(&cases[ci], kind, mode, 0, &b0);
                unsigned char *got = bag_two_steps(&cases[ci], kind, mode, 1, &b1);
                CHECK(b0 == b1 && memcmp(want, got, b0) == 0);
                if (tu_failures) {
                    fprintf(stderr, "  (case %zu, kind %d, mode %d)\n", ci, kind, mode);
                    free(want);
                    free(got);
                    return;
                }
                free(want);
                free(got);
            }
}

/* The guard on a fused bag: a non-finite value of the output gradient in a bag that names
 * no row (empty, or padding only) gives no row anything and is accepted, as unfused; in a
 * bag that names rows it refuses the update, naming the first such row of the update
 * (entries in order, padding left out) and the element, and W does not change. */
TEST(embedding_bag_fused_guard_counts_only_the_rows_of_the_bags)
{
    enum { V = 10, D = 3, N = 8, B = 4 };
    const int64_t v[N] = {4, 1, 6, 6, 2, 4, 6, 3}; /* padding 6 */
    const int64_t off[B] = {0, 2, 2, 4};           /* bags [0,2) [2,2) [2,4) [4,8) */
    for (int mode = SG_BAG_SUM; mode <= SG_BAG_MEAN; mode++)
        for (int bag = 0; bag < B; bag++) {
            sg_ctx *ctx = sg_ctx_new(NULL);
            sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
            sg_optim *opt = sg_optim_adagrad(ctx, &(sg_adagrad_opts){.lr = 0.1, .eps = 1e-10});
            CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
            CHECK_STATUS(ctx, sg_optim_set_check_finite(opt, 1), SG_OK);
            double w0[V * D];
            memcpy(w0, sg_tensor_f64(W), sizeof w0);
            sg_tensor *idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){N}, v);
            sg_tensor *offs = index_tensor(ctx, SG_I64, 1, (int64_t[]){B}, off);
            sg_tensor *G = rand_dense(ctx, SG_F64, 2, (int64_t[]){B, D});
            sg_tensor_f64(G)[bag * D + 1] = NAN;
            sg_embedding_bag_opts o = bag_opts((sg_bag_mode)mode, NULL);
            o.padding_idx = 6;
            o.fused = opt;
            int rc = sg_backward_grad(sg_embedding_bag(W, idx, offs, &o), G);
            if (bag == 1 || bag == 2) { /* empty; padding only */
                CHECK_STATUS(ctx, rc, SG_OK);
                CHECK(memcmp(w0, sg_tensor_f64(W), sizeof w0) != 0);
                for (int k = 0; k < V * D; k++) CHECK(isfinite(sg_tensor_f64(W)[k]));
            } else {
                CHECK_STATUS(ctx, rc, SG_ERR_VALUE);
                CHECK(strstr(sg_ctx_message(ctx), bag == 0 ? "row 0 of the update, element 1"
                                                           : "row 2 of the update, element 1") != NULL);
                CHECK(memcmp(w0, sg_tensor_f64(W), sizeof w0) == 0);
            }
            sg_optim_free(opt);
            sg_ctx_free(ctx);
        }
}

/* SG_BAG_GRAD_WORD2VEC against a hand-written loop: each row's gradient is the sum, over
 * the bag entries naming it that are not padding, of their bag's incoming gradient row,
 * undivided. Bags: one with a repeated row, an empty one, one of padding only (with
 * padding 6), a single entry. The forward stays the mean; the fused SGD update moves W
 * by -lr times the same sums; the true rule gives the sums divided by the bag sizes. */
TEST(embedding_bag_word2vec_rule_matches_a_loop)
{
    enum { V = 8, D = 3, N = 10, B = 5 };
    const int64_t v[N] = {3, 1, 3, 0, 6, 6, 6, 2, 6, 5};
    const int64_t off[B + 1] = {0, 4, 4, 7, 9, 10}; /* bags [0,4) [4,4) [4,7) [7,9) [9,10) */
    for (int pad = -1; pad <= 6; pad += 7)
        for (int last = 0; last < 2; last++)
            for (int fused = 0; fused < 2; fused++) {
                sg_ctx *ctx = sg_ctx_new(NULL);
                sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
                double w0[V * D];
                memcpy(w0, sg_tensor_f64(W), sizeof w0);
                sg_tensor *G = rand_dense(ctx, SG_F64, 2, (int64_t[]){B, D});
                sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){.lr = 0.5});
                CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
                sg_tensor *idx = index_tensor(ctx, last ? SG_I32 : SG_I64, 1, (int64_t[]){N}, v);
                sg_tensor *offs = index_tensor(ctx, SG_I64, 1, (int64_t[]){B + last}, off);
                sg_embedding_bag_opts o = bag_opts(SG_BAG_MEAN, NULL);
                o.padding_idx = pad;
                o.include_last_offset = last;
                o.fused = fused ? opt : NULL;
                o.grad = SG_BAG_GRAD_WORD2VEC;
                sg_tensor *y = sg_embedding_bag(W, idx, offs, &o);
                CHECK(y != NULL);
                if (!y) continue;
                double want[V * D] = {0}, truth[V * D] = {0}, mean_err = 0;
                for (int b = 0; b < B; b++) {
                    int cnt = 0;
                    for (int64_t i = off[b]; i < off[b + 1]; i++) cnt += v[i] != pad;
                    for (int j = 0; j < D; j++) {
                        double m = 0;
                        for (int64_t i = off[b]; i < off[b + 1]; i++)
                            if (v[i] != pad) m += w0[v[i] * D + j] / cnt;
                        mean_err = fmax(mean_err, fabs(sg_tensor_f64(y)[b * D + j] - m));
                    }
                    for (int64_t i = off[b]; i < off[b + 1]; i++)
                        for (int j = 0; v[i] != pad && j < D; j++) {
                            want[v[i] * D + j] += sg_tensor_f64(G)[b * D + j];
                            truth[v[i] * D + j] += sg_tensor_f64(G)[b * D + j] / cnt;
                        }
                }
                CHECK(mean_err < 1e-15); /* the forward is the mean */
                CHECK_STATUS(ctx, sg_backward_grad(y, G), SG_OK);
                double worst = 0, apart = 0;
                if (fused) {
                    CHECK(sg_tensor_grad(W) == NULL);
                    for (int k = 0; k < V * D; k++)
                        worst = fmax(worst, fabs(sg_tensor_f64(W)[k] - (w0[k] - 0.5 * want[k])));
                } else {
                    double *got = tu_meaning(sg_tensor_grad(W), V * D);
                    for (int k = 0; k < V * D; k++) worst = fmax(worst, fabs(got[k] - want[k]));
                    for (int k = 0; k < V * D; k++) apart = fmax(apart, fabs(got[k] - truth[k]));
                    free(got);
                    CHECK(apart > 0.1); /* row 3 sits twice in a bag of 4: 2 sums against 1/2 */
                }
                CHECK(worst < 1e-14);
                sg_optim_free(opt);
                sg_ctx_free(ctx);
            }
}

TEST(embedding_bag_errors_change_nothing)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 20, D = 4, N = 6;
    sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F32, 2, (int64_t[]){V, D}), 1);
    int64_t v[6] = {1, 2, 3, 4, 5, 6};
    sg_tensor *idx = index_tensor(ctx, SG_I32, 1, (int64_t[]){N}, v);
    sg_tensor *offs = index_tensor(ctx, SG_I64, 1, (int64_t[]){2}, (int64_t[]){0, 3});
    sg_tensor *psw = rand_dense(ctx, SG_F32, 1, (int64_t[]){N});
    sg_tensor *bad_off = index_tensor(ctx, SG_I64, 1, (int64_t[]){3}, (int64_t[]){0, 5, 3});
    sg_tensor *late_off = index_tensor(ctx, SG_I64, 1, (int64_t[]){2}, (int64_t[]){1, 3});
    sg_tensor *far_off = index_tensor(ctx, SG_I64, 1, (int64_t[]){2}, (int64_t[]){0, 7});
    sg_tensor *short_csr = index_tensor(ctx, SG_I64, 1, (int64_t[]){2}, (int64_t[]){0, 5});
    sg_tensor *no_off = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){0});
    v[3] = V;
    sg_tensor *bad_idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){N}, v);
    sg_tensor *psw64 = rand_dense(ctx, SG_F64, 1, (int64_t[]){N});
    sg_tensor *psw5 = rand_dense(ctx, SG_F32, 1, (int64_t[]){5});
    sg_tensor *F = rand_dense(ctx, SG_F32, 2, (int64_t[]){V, D}); /* no grad, no optimizer */
    sg_optim *opt = sg_optim_sgd(ctx, NULL);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, F), SG_OK);
    sg_embedding_bag_opts ok = bag_opts(SG_BAG_SUM, NULL);
    struct {
        sg_tensor *W, *idx, *off;
        sg_embedding_bag_opts o;
        int status;
    } cases[] = {
        {W, idx, bad_off, ok, SG_ERR_ARG},   /* offsets decrease */
        {W, idx, late_off, ok, SG_ERR_ARG},  /* offsets[0] != 0 */
        {W, idx, far_off, ok, SG_ERR_INDEX}, /* offset past N */
        {W, bad_idx, offs, ok, SG_ERR_INDEX},
        {W, idx, offs, bag_opts(SG_BAG_MAX, psw), SG_ERR_ARG},
        {W, idx, offs, bag_opts(SG_BAG_MEAN, psw), SG_ERR_ARG},
        {W, idx, offs, bag_opts(SG_BAG_SUM, psw64), SG_ERR_DTYPE},
        {W, idx, offs, bag_opts(SG_BAG_SUM, psw5), SG_ERR_SHAPE},
        {W, idx, offs, bag_opts((sg_bag_mode)7, NULL), SG_ERR_ARG},
        {W, idx, offs, {.mode = SG_BAG_SUM, .padding_idx = -1, .grad = SG_BAG_GRAD_WORD2VEC}, SG_ERR_ARG},
        {W, idx, offs, {.mode = SG_BAG_MAX, .padding_idx = -1, .grad = SG_BAG_GRAD_WORD2VEC}, SG_ERR_ARG},
        {W, idx, offs, {.mode = SG_BAG_MEAN, .padding_idx = -1, .grad = (sg_bag_grad)2}, SG_ERR_ARG},
        {W, idx, offs, {.mode = SG_BAG_SUM, .padding_idx = 20}, SG_ERR_ARG}, /* padding_idx >= V */
        {W, idx, offs, {.mode = SG_BAG_SUM, .padding_idx = -2}, SG_ERR_ARG},
        {W, idx, short_csr, {.mode = SG_BAG_SUM, .padding_idx = -1, .include_last_offset = 1}, SG_ERR_ARG}, /* last != N */
        {W, idx, no_off, {.mode = SG_BAG_SUM, .padding_idx = -1, .include_last_offset = 1}, SG_ERR_SHAPE},
        {W, idx, offs, {.mode = SG_BAG_SUM, .padding_idx = -1, .fused = opt}, SG_ERR_ARG}, /* W not opt's */
        {F, idx, offs, {.mode = SG_BAG_SUM, .padding_idx = -1, .fused = opt}, SG_ERR_ARG}, /* F needs no grad */
        {sg_scale(W, 1.0), idx, offs, {.mode = SG_BAG_SUM, .padding_idx = -1, .fused = opt}, SG_ERR_ARG}, /* not a leaf */
    };
    int64_t nodes = sg_tape_nodes(ctx);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sg_ctx_clear_error(ctx);
        CHECK(sg_embedding_bag(cases[k].W, cases[k].idx, cases[k].off, &cases[k].o) == NULL);
        CHECK_STATUS(ctx, sg_ctx_status(ctx), cases[k].status);
        if (sg_ctx_status(ctx) != cases[k].status) fprintf(stderr, "  case %zu\n", k);
    }
    CHECK(sg_tape_nodes(ctx) == nodes);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* ---- index_select and slice */

TEST(index_select_and_slice_gradients_are_sparse_rows)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 1000, D = 3;
    sg_tensor *x = sg_tensor_requires_grad(rand_dense(ctx, SG_F32, 2, (int64_t[]){V, D}), 1);
    sg_tensor *idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){3}, (int64_t[]){999, 5, 999});
    sg_tensor *y = sg_index_select(x, 0, idx);
    CHECK(sg_tensor_get(y, 2 * D + 1) == sg_tensor_f32(x)[999 * D + 1]);
    sg_tensor *G = rand_dense(ctx, SG_F32, 2, (int64_t[]){3, D});
    CHECK_STATUS(ctx, sg_backward_grad(y, G), SG_OK);
    sg_tensor *g = sg_tensor_grad(x);
    CHECK(sg_tensor_layout(g) == SG_COO && sg_coo_nnz(g) == 3);
    CHECK(sg_tensor_data(sg_coo_values(g)) == sg_tensor_data(G));
    sg_tape_reset(ctx);

    sg_tensor *s = sg_slice(x, 10, 13);
    CHECK(sg_tensor_data(s) == sg_tensor_f32(x) + 10 * D); /* a view */
    G = rand_dense(ctx, SG_F32, 2, (int64_t[]){3, D});
    CHECK_STATUS(ctx, sg_backward_grad(s, G), SG_OK);
    g = sg_tensor_grad(x);
    CHECK(sg_tensor_layout(g) == SG_COO && sg_coo_nnz(g) == 3 && sg_coo_is_coalesced(g));
    CHECK(sg_tensor_get(g, 11 * D + 2) == sg_tensor_f32(G)[1 * D + 2]);
    CHECK(sg_tensor_get(g, 13 * D) == 0);

    CHECK(sg_slice(x, 5, 1001) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    CHECK(sg_slice(x, -1, 3) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    sg_tensor *oob = index_tensor(ctx, SG_I64, 1, (int64_t[]){2}, (int64_t[]){0, 3});
    CHECK(sg_index_select(x, 1, oob) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    CHECK(sg_index_select(x, 2, idx) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    sg_ctx_free(ctx);
}

/* ---- the gathers' sparse gradients mean what the dense path's gradients mean: each gather
 * is a product with a selection matrix S (rows of the identity), computed with sg_matmul */

static sg_tensor *selection(sg_ctx *ctx, const int64_t *rows, int64_t K, int64_t V, const double *weights)
{
    sg_tensor *S = sg_tensor_new_tmp(ctx, SG_F64, 2, (int64_t[]){K, V});
    for (int64_t k = 0; k < K; k++) sg_tensor_f64(S)[k * V + rows[k]] += weights ? weights[k] : 1.0;
    return S;
}

/* max |grad(a) - grad(b)| over their dense meanings */
static double grad_gap(sg_tensor *a, sg_tensor *b, int64_t n)
{
    double *ga = tu_meaning(sg_tensor_grad(a), n), *gb = tu_meaning(sg_tensor_grad(b), n), w = 0;
    for (int64_t i = 0; i < n; i++) w = fmax(w, fabs(ga[i] - gb[i]));
    free(ga), free(gb);
    return w;
}

TEST(gather_gradients_match_the_dense_selection_path)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 9, D = 5, K = 7;
    sg_tensor *W = sg_tensor_requires_grad(rand_dense(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
    sg_tensor *W2 = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
    sg_tensor_copy(W2, W);
    int64_t rows[7] = {4, 0, 4, 8, 4, 2, 0};
    sg_tensor *idx = index_tensor(ctx, SG_I64, 1, (int64_t[]){K}, rows);
    sg_tensor *G = rand_dense(ctx, SG_F64, 2, (int64_t[]){K, D});
    for (int c = 0; c < 5; c++) {
        sg_tensor *ys, *yd;
        switch (c) {
        case 0: /* embedding */
            ys = sg_embedding(W, idx, NULL);
            yd = sg_matmul(selection(ctx, rows, K, V, NULL), W2);
            break;
        case 1: /* index_select along dim 0 */
            ys = sg_index_select(W, 0, idx);
            yd = sg_matmul(selection(ctx, rows, K, V, NULL), W2);
            break;
        case 2: { /* slice [2, 9) */
            int64_t r[7] = {2, 3, 4, 5, 6, 7, 8};
            ys = sg_slice(W, 2, 9);
            yd = sg_matmul(selection(ctx, r, K, V, NULL), W2);
            break;
        }
        case 3: { /* embedding_bag, weighted sums over bags {0,1,2}, {}, {3..6} as 3 rows */
            sg_tensor *off = index_tensor(ctx, SG_I64, 1, (int64_t[]){3}, (int64_t[]){0, 3, 3});
            double w[7] = {0.5, -1, 2, 1.5, 0.25, -0.75, 1};
            sg_tensor *psw = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){K}, w);
            sg_embedding_bag_opts bo = bag_opts(SG_BAG_SUM, psw);
            ys = sg_embedding_bag(W, idx, off, &bo);
            sg_tensor *S = sg_tensor_new_tmp(ctx, SG_F64, 2, (int64_t[]){3, V});
            for (int k = 0; k < 7; k++) sg_tensor_f64(S)[(k < 3 ? 0 : 2) * V + rows[k]] += w[k];
            yd = sg_matmul(S, W2);
            break;
        }
        default: { /* an empty selection */
            sg_tensor *none = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){0});
            ys = sg_index_select(W, 0, none);
            yd = sg_matmul(sg_tensor_new_tmp(ctx, SG_F64, 2, (int64_t[]){0, V}), W2);
            break;
        }
        }
        CHECK(ys != NULL && yd != NULL);
        if (!ys || !yd) continue;
        int64_t n = sg_tensor_numel(ys);
        CHECK(n == sg_tensor_numel(yd));
        double *ms = tu_meaning(ys, n), *md = tu_meaning(yd, n), w = 0;
        for (int64_t i = 0; i < n; i++) w = fmax(w, fabs(ms[i] - md[i]));
        CHECK(w < 1e-12);
        free(ms), free(md);
        sg_tensor *g = sg_tensor_new_tmp(ctx, SG_F64, sg_tensor_ndim(ys), sg_tensor_shape(ys));
        for (int64_t i = 0; i < n; i++) sg_tensor_f64(g)[i] = sg_tensor_f64(G)[i];
        CHECK_STATUS(ctx, sg_backward_grad(ys, g), SG_OK);
        CHECK_STATUS(ctx, sg_backward_grad(yd, g), SG_OK);
        if (n) CHECK(sg_tensor_layout(sg_tensor_grad(W)) == SG_COO); /* sparse path stays sparse */
        CHECK(grad_gap(W, W2, V * D) < 1e-12);
        sg_tape_reset(ctx);
    }
    sg_ctx_free(ctx);
}

/* ---- allocation failure at every point of a step that uses every sparse path */


typedef struct {
    sg_tensor *W, *B, *idx, *offsets, *mask, *acc;
} sparse_setup;

static int setup_sparse(sg_ctx *ctx, sparse_setup *s)
{
    s->W = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){30, 4}), 1);
    s->B = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){4, 3}), 1);
    s->idx = sg_tensor_new(ctx, SG_I32, 1, (int64_t[]){12});
    s->offsets = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){3});
    int64_t mi[2 * 5] = {1, 7, 7, 29, 3, 0, 2, 2, 3, 1};
    s->mask = sg_coo_new(ctx, SG_F64, 2, (int64_t[]){30, 4}, 2, 5, mi, (double[]){1, 1, 1, 1, 1});
    s->acc = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){30, 4});
    if (!s->W || !s->B || !s->idx || !s->offsets || !s->mask || !s->acc) return sg_ctx_status(ctx);
    for (int i = 0; i < 12; i++) ((int32_t *)sg_tensor_data(s->idx))[i] = (i * 7) % 29;
    ((int64_t *)sg_tensor_data(s->offsets))[1] = 5;
    ((int64_t *)sg_tensor_data(s->offsets))[2] = 9;
    sg_tensor_fill(s->W, 0.5);
    sg_tensor_fill(s->B, -0.25);
    return SG_OK;
}

static int sparse_step(sg_ctx *ctx, sparse_setup *s)
{
    sg_tensor *e = sg_sum(sg_embedding(s->W, s->idx, &(sg_embedding_opts){7, 0, NULL}));
    sg_embedding_bag_opts bo = bag_opts(SG_BAG_MAX, NULL);
    sg_tensor *g = sg_sum(sg_embedding_bag(s->W, s->idx, s->offsets, &bo));
    sg_tensor *sel = sg_sum(sg_index_select(sg_slice(s->W, 1, 30), 0, s->idx));
    sg_tensor *m = sg_sparse_mask(s->W, s->mask);
    sg_tensor *l1 = sg_sum(sg_transpose(sg_add(m, sg_scale(m, 2.0)), 0, 1));
    sg_tensor *l2 = sg_sum(sg_matmul(m, s->B));
    sg_tensor *l3 = sg_sum(sg_to_dense(sg_to_sparse(s->W, 1)));
    sg_tensor *loss = sg_add(sg_add(sg_add(e, g), sg_add(sel, l1)), sg_add(l2, l3));
    if (!loss) return sg_ctx_status(ctx);
    int rc = sg_backward(loss);
    if (rc) return rc;
    sg_tensor *c = sg_coalesce(sg_add(m, m));
    if (!c) return sg_ctx_status(ctx);
    rc = sg_index_add_(s->acc, c);
    sg_tape_reset(ctx);
    return rc;
}

TEST(allocation_failure_at_every_point_of_a_sparse_step)
{
    tu_counting c = {0, 0};
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {tu_count_alloc, tu_count_free, &c}, .threads = 1});
    sparse_setup s;
    CHECK(setup_sparse(ctx, &s) == SG_OK);
    long setup_calls = c.calls;
    CHECK_STATUS(ctx, sparse_step(ctx, &s), SG_OK);
    long total = c.calls;
    double want = sg_tensor_get(s.acc, 7 * 4 + 2);
    CHECK(want == 2 * 0.5); /* m + m; the mask names (7,2) twice, its pattern once */
    sg_ctx_free(ctx);
    int failures_seen = 0;
    for (long n = setup_calls + 1; n <= total; n++) {
        tu_counting f = {0, n};
        sg_ctx *fc = sg_ctx_new(&(sg_ctx_opts){.allocator = {tu_count_alloc, tu_count_free, &f}, .threads = 1});
        if (!fc || setup_sparse(fc, &s) != SG_OK) {
            CHECK(0);
            sg_ctx_free(fc);
            continue;
        }
        int rc = sparse_step(fc, &s);
        if (rc) {
            failures_seen++;
            CHECK_STATUS(fc, rc, SG_ERR_NOMEM);
            CHECK(sg_tensor_get(s.acc, 7 * 4 + 2) == 0); /* the index-add never ran */
        }
        sg_ctx_free(fc);
    }
    CHECK(failures_seen > 0);
}

TEST_MAIN()
