/* The classifier's loss heads computed another way: sg_hs_loss against a long double loop
 * and against the same loss built from general dense ops (index_select, rowdot,
 * log_sigmoid), its W gradient naming exactly the path rows, bitwise determinism across
 * thread counts and its input errors; one-vs-all (sg_bce_with_logits times B*C) against
 * the sum of per-label logistic losses and its closed-form gradient. Finite-difference
 * gradchecks are in test_gradcheck_ops.c. */
#include "testutil.h"

#include <stdbool.h>
#include <stdint.h>

static sg_tensor *filled(sg_ctx *ctx, int64_t r, int64_t c, double lo, double hi)
{
    sg_tensor *x = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){r, c});
    sg_tensor_fill_uniform(x, lo, hi);
    return x;
}

static sg_tensor *ints(sg_ctx *ctx, int64_t n, const int64_t *v)
{
    return sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){n}, v);
}

enum { B = 4, D = 3, N = 5, P = 8 };
/* paths of lengths 3, 0, 4 and 1; node 2 three times, node 4 never */
static const int64_t nodes_v[P] = {2, 0, 1, 3, 2, 2, 0, 1};
static const int64_t codes_v[P] = {1, 0, 1, 0, 0, 1, 1, 0};
static const int64_t offs_v[B] = {0, 3, 3, 7};
static const int64_t owner_v[P] = {0, 0, 0, 2, 2, 2, 2, 3}; /* example of each entry */

TEST(hs_matches_a_long_double_loop)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.seed = 11});
    sg_tensor *h = filled(ctx, B, D, -2, 2), *W = filled(ctx, N, D, -2, 2);
    sg_tensor *L = sg_hs_loss(h, W, ints(ctx, P, nodes_v), ints(ctx, P, codes_v), ints(ctx, B, offs_v));
    CHECK(L != NULL);
    long double want = 0;
    for (int e = 0; e < P; e++) {
        long double s = 0;
        for (int d = 0; d < D; d++)
            s += (long double)sg_tensor_get(W, nodes_v[e] * D + d) * sg_tensor_get(h, owner_v[e] * D + d);
        long double p = 1 / (1 + expl(-s)); /* sigmoid(s) */
        want -= logl(codes_v[e] ? p : 1 - p);
    }
    CHECK_NEAR(sg_tensor_get(L, 0), (double)want, 1e-13);
    /* saturated scores stay finite and exact */
    sg_tensor_fill_uniform(W, 30, 40);
    sg_tensor_fill_uniform(h, 30, 40);
    L = sg_hs_loss(h, W, ints(ctx, P, nodes_v), ints(ctx, P, codes_v), ints(ctx, B, offs_v));
    long double big = 0;
    for (int e = 0; e < P; e++)
        if (!codes_v[e]) {
            long double s = 0;
            for (int d = 0; d < D; d++)
                s += (long double)sg_tensor_get(W, nodes_v[e] * D + d) * sg_tensor_get(h, owner_v[e] * D + d);
            big += s; /* -log(1 - sigmoid(s)) = s + log1p(exp(-s)), the rest below 1e-300 */
        }
    CHECK(L && isfinite(sg_tensor_get(L, 0)));
    CHECK_NEAR(sg_tensor_get(L, 0), (double)big, 1e-12 * (double)big);
    sg_ctx_free(ctx);
}

/* The dense path: z_e = sign_e * rowdot(W[nodes], h[owner]), loss = -sum log_sigmoid(z). */
static sg_tensor *hs_by_general_ops(sg_ctx *ctx, sg_tensor *h, sg_tensor *W)
{
    double sign[P];
    for (int e = 0; e < P; e++) sign[e] = codes_v[e] ? 1 : -1;
    sg_tensor *sg = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){P}, sign);
    sg_tensor *s = sg_rowdot(sg_index_select(W, 0, ints(ctx, P, nodes_v)),
                             sg_index_select(h, 0, ints(ctx, P, owner_v)));
    return sg_scale(sg_sum(sg_log_sigmoid(sg_mul(s, sg))), -1);
}

TEST(hs_gradients_match_the_dense_path_and_touch_only_path_rows)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.seed = 12});
    sg_tensor *h = sg_tensor_requires_grad(filled(ctx, B, D, -1, 1), 1);
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, N, D, -1, 1), 1);
    double gh[B * D], gw[N * D], ref_loss;
    sg_tensor *ref = hs_by_general_ops(ctx, h, W);
    CHECK_STATUS(ctx, sg_backward(ref), SG_OK);
    ref_loss = sg_tensor_get(ref, 0);
    for (int i = 0; i < B * D; i++) gh[i] = sg_tensor_get(sg_tensor_grad(h), i);
    for (int i = 0; i < N * D; i++) gw[i] = sg_tensor_get(sg_tensor_grad(W), i);
    sg_tape_reset(ctx);

    sg_tensor *nodes = ints(ctx, P, nodes_v);
    sg_tensor *L = sg_hs_loss(h, W, nodes, ints(ctx, P, codes_v), ints(ctx, B, offs_v));
    CHECK(L != NULL);
    CHECK_NEAR(sg_tensor_get(L, 0), ref_loss, 1e-13);
    CHECK_STATUS(ctx, sg_backward(sg_scale(L, 0.5)), SG_OK); /* an incoming gradient != 1 */
    for (int i = 0; i < B * D; i++) CHECK_NEAR(sg_tensor_get(sg_tensor_grad(h), i), 0.5 * gh[i], 1e-14);
    sg_tensor *g = sg_tensor_grad(W);
    CHECK(sg_tensor_layout(g) == SG_COO && sg_coo_nnz(g) == P);
    for (int i = 0; i < N * D; i++) CHECK_NEAR(sg_tensor_get(g, i), 0.5 * gw[i], 1e-14);
    sg_tensor *gi = sg_coo_indices(g);
    for (int e = 0; g && e < P; e++) CHECK(sg_tensor_get(gi, e) == (double)nodes_v[e]);
    /* a plain SGD step moves only the path rows: row 4 is on no path */
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){.lr = 0.1});
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    double before[N * D];
    for (int i = 0; i < N * D; i++) before[i] = sg_tensor_get(W, i);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    for (int i = 0; i < N * D; i++) {
        bool on_path = i / D != 4;
        if (!on_path) CHECK(sg_tensor_get(W, i) == before[i]);
        else CHECK_NEAR(sg_tensor_get(W, i), before[i] - 0.1 * 0.5 * gw[i], 1e-14);
    }
    sg_ctx_free(ctx);
}

TEST(hs_is_bitwise_the_same_for_any_thread_count)
{
    enum { BB = 3000, DD = 16, NN = 40, LEN = 5 };
    static int64_t nodes[BB * LEN], codes[BB * LEN], offs[BB];
    for (int i = 0; i < BB; i++) {
        offs[i] = (int64_t)i * LEN;
        for (int k = 0; k < LEN; k++) {
            nodes[i * LEN + k] = (int64_t)(tu_rand() % NN);
            codes[i * LEN + k] = (int64_t)(tu_rand() & 1);
        }
    }
    double loss[2], gsum[2];
    for (int run = 0; run < 2; run++) {
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.seed = 13, .threads = run ? 4 : 1});
        sg_tensor *h = sg_tensor_requires_grad(filled(ctx, BB, DD, -1, 1), 1);
        sg_tensor *W = sg_tensor_requires_grad(filled(ctx, NN, DD, -1, 1), 1);
        sg_tensor *L = sg_hs_loss(h, W, ints(ctx, BB * LEN, nodes), ints(ctx, BB * LEN, codes),
                                  ints(ctx, BB, offs));
        CHECK_STATUS(ctx, sg_backward(L), SG_OK);
        loss[run] = sg_tensor_get(L, 0);
        gsum[run] = 0;
        sg_tensor *gh = sg_tensor_grad(h);
        for (int64_t i = 0; i < BB * DD; i++) gsum[run] += sg_tensor_get(gh, i) * (double)(i % 7);
        sg_ctx_free(ctx);
    }
    CHECK(loss[0] == loss[1]);
    CHECK(gsum[0] == gsum[1]);
}

TEST(hs_refuses_bad_paths_and_records_nothing)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *h = sg_tensor_requires_grad(filled(ctx, B, D, -1, 1), 1);
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, N, D, -1, 1), 1);
    sg_tensor *nodes = ints(ctx, P, nodes_v), *codes = ints(ctx, P, codes_v), *offs = ints(ctx, B, offs_v);
    int64_t bad[P];
    memcpy(bad, nodes_v, sizeof bad);
    bad[5] = N;
    CHECK(sg_hs_loss(h, W, ints(ctx, P, bad), codes, offs) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    memcpy(bad, codes_v, sizeof bad);
    bad[2] = 2;
    CHECK(sg_hs_loss(h, W, nodes, ints(ctx, P, bad), offs) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_VALUE);
    const int64_t decreasing[B] = {0, 3, 2, 7}, not_zero[B] = {1, 3, 3, 7}, past[B] = {0, 3, 3, 9};
    CHECK(sg_hs_loss(h, W, nodes, codes, ints(ctx, B, decreasing)) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    CHECK(sg_hs_loss(h, W, nodes, codes, ints(ctx, B, not_zero)) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    CHECK(sg_hs_loss(h, W, nodes, codes, ints(ctx, B, past)) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    CHECK(sg_hs_loss(h, W, nodes, codes, ints(ctx, B - 1, offs_v)) == NULL); /* offsets != B */
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg_hs_loss(h, W, nodes, h, offs) == NULL); /* float codes */
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_DTYPE);
    CHECK(sg_hs_loss(h, filled(ctx, N, D + 1, -1, 1), nodes, codes, offs) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg_tape_nodes(ctx) == 0);
    sg_ctx_free(ctx);
}

TEST(ova_is_bce_with_logits_times_the_label_count)
{
    enum { NB = 3, C = 4 };
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.seed = 14});
    sg_tensor *x = sg_tensor_requires_grad(filled(ctx, NB, C, -4, 4), 1);
    const double y[NB * C] = {1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1}; /* two, none, three labels */
    sg_tensor *t = sg_tensor_from_data(ctx, SG_F64, 2, (int64_t[]){NB, C}, y);
    sg_tensor *L = sg_scale(sg_bce_with_logits(x, t), NB * C);
    CHECK(L != NULL);
    long double want = 0;
    for (int i = 0; i < NB * C; i++) {
        long double p = 1 / (1 + expl(-(long double)sg_tensor_get(x, i)));
        want -= y[i] ? logl(p) : logl(1 - p);
    }
    CHECK_NEAR(sg_tensor_get(L, 0), (double)want, 1e-13);
    CHECK_STATUS(ctx, sg_backward(L), SG_OK);
    for (int i = 0; i < NB * C; i++) /* d/dx = sigmoid(x) - y */
        CHECK_NEAR(sg_tensor_get(sg_tensor_grad(x), i), 1 / (1 + exp(-sg_tensor_get(x, i))) - y[i], 1e-14);
    sg_ctx_free(ctx);
}

TEST_MAIN()
