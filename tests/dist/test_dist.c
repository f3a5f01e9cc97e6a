/* sg_dist under mpirun (tests/test_dist.sh launches it with 2 and 4 ranks).
 *
 * Training: each rank trains on its own batches with sg_dist_reduce_grads between
 * backward and step; every rank also replays the whole run alone in a second context,
 * computing every rank's gradient itself, adding them as dense arrays in rank order
 * (a plain loop), dividing by the rank count and stepping on that. The parameters must
 * agree bit for bit, for an embedding model (a row-sparse table and a dense head, f32)
 * and a dense MLP (f64, tiny buckets so that parameters span several), under SGD with
 * momentum and weight decay, Adagrad and LazyAdam, and for each exchange mode.
 * Bad input: ranks that disagree get the same error everywhere, and the next call works;
 * the timeout setting refuses bad values (a bad SGRAD_DIST_TIMEOUT on one rank fails
 * sg_dist_new on every rank).
 * `test_dist die`: after a few exchanges rank 1 kills itself (SIGKILL) and the others keep
 * reducing; each survivor must get SG_ERR_IO naming itself and the timeout, print it and
 * exit 1 (tests/test_dist.sh runs it under a plain mpirun, which ends the job, and under
 * `mpirun --enable-recovery`, which leaves the survivors to their deadline).
 */
#define _POSIX_C_SOURCE 200809L /* setenv, strdup */
#include "mpi_testutil.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>

enum { MODEL_EMB, MODEL_MLP };
enum { OPT_SGD, OPT_ADAGRAD, OPT_LAZYADAM };
enum { V = 40, D = 8, C = 5, B = 6, IN = 7, H = 9, STEPS = 12, NPARAM = 4 };

typedef struct {
    sg_ctx *ctx;
    sg_tensor *p[NPARAM];
    int n;
    sg_optim *opt;
} model;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}
/* A value in [-1, 1) that depends only on (a, b, c). */
static double unit(uint64_t a, uint64_t b, uint64_t c)
{
    return (double)(mix(a * 0x9E3779B97F4A7C15ull + mix(b * 31 + c)) >> 11) * 0x1.0p-53 * 2 - 1;
}

static sg_tensor *param(sg_ctx *ctx, sg_dtype dt, int nd, const int64_t *shape, int tag)
{
    sg_tensor *t = sg_tensor_new(ctx, dt, nd, shape);
    for (int64_t i = 0; i < sg_tensor_numel(t); i++) {
        double v = 0.5 * unit((uint64_t)tag, (uint64_t)i, 7);
        if (dt == SG_F32) sg_tensor_f32(t)[i] = (float)v;
        else sg_tensor_f64(t)[i] = v;
    }
    return sg_tensor_requires_grad(t, 1);
}

static void model_init(model *m, int kind, int optk)
{
    m->ctx = sg_ctx_new(NULL);
    sg_ctx_set_threads(m->ctx, 1 + R % 2); /* threads must not matter */
    if (kind == MODEL_EMB) {
        m->p[0] = param(m->ctx, SG_F32, 2, (int64_t[]){V, D}, 1);
        m->p[1] = param(m->ctx, SG_F32, 2, (int64_t[]){D, C}, 2);
        m->n = 2;
    } else {
        m->p[0] = param(m->ctx, SG_F64, 2, (int64_t[]){IN, H}, 3);
        m->p[1] = param(m->ctx, SG_F64, 1, (int64_t[]){H}, 4);
        m->p[2] = param(m->ctx, SG_F64, 2, (int64_t[]){H, C}, 5);
        m->n = 3;
    }
    if (optk == OPT_SGD) m->opt = sg_optim_sgd(m->ctx, &(sg_sgd_opts){0.1, 0.9, 0.0, 1e-2, 0});
    else if (optk == OPT_ADAGRAD) m->opt = sg_optim_adagrad(m->ctx, &(sg_adagrad_opts){0.1, 0.0, 1e-2, 0.1, 1e-10});
    else m->opt = sg_optim_lazy_adam(m->ctx, &(sg_adam_opts){1e-2, 0.9, 0.999, 1e-8, 0.0, 0});
    for (int i = 0; i < m->n; i++) sg_optim_add_param(m->opt, m->p[i]);
}

/* Forward and backward of rank r's batch at step t. The embedding model's batches repeat
 * rows (duplicates within a rank) and overlap across ranks. */
static int backward(model *m, int kind, int t, int r)
{
    sg_ctx *ctx = m->ctx;
    sg_tensor *y = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){B});
    for (int i = 0; i < B; i++) ((int64_t *)sg_tensor_data(y))[i] = (int64_t)(mix((uint64_t)(t * 131 + r * 17 + i)) % C);
    sg_tensor *logits;
    if (kind == MODEL_EMB) {
        sg_tensor *idx = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){B});
        for (int i = 0; i < B; i++)
            ((int64_t *)sg_tensor_data(idx))[i] = (int64_t)(mix((uint64_t)(t * 977 + r * 7 + i / 2)) % (V / 2)) + (r % 2) * (V / 4);
        logits = sg_matmul(sg_tanh(sg_embedding(m->p[0], idx, NULL)), m->p[1]);
    } else {
        sg_tensor *x = sg_tensor_new_tmp(ctx, SG_F64, 2, (int64_t[]){B, IN});
        for (int i = 0; i < B * IN; i++) sg_tensor_f64(x)[i] = unit((uint64_t)t, (uint64_t)r, (uint64_t)i);
        sg_tensor *h = sg_relu(sg_add(sg_matmul(x, m->p[0]), m->p[1]));
        logits = sg_matmul(h, m->p[2]);
    }
    return sg_backward(sg_cross_entropy(logits, y));
}

/* The reference step: every rank's gradient in this one process, summed densely in rank
 * order, divided by P (average) and handed to the optimizer; a table's gradient as the
 * COO of the rows some rank touched. */
static int reference_step(model *m, int kind, int t, int average)
{
    sg_ctx *ctx = m->ctx;
    int rc = SG_OK;
    void *acc[NPARAM];
    unsigned char touched[V] = {0};
    for (int i = 0; i < m->n; i++) acc[i] = calloc((size_t)sg_tensor_numel(m->p[i]), 8);
    for (int r = 0; r < P && !rc; r++) {
        rc = backward(m, kind, t, r);
        for (int i = 0; i < m->n && !rc; i++) {
            sg_tensor *g = sg_tensor_grad(m->p[i]);
            int64_t n = sg_tensor_numel(m->p[i]);
            sg_tensor *dense = sg_tensor_new(ctx, sg_tensor_dtype(m->p[i]), sg_tensor_ndim(m->p[i]),
                                             sg_tensor_shape(m->p[i]));
            rc = sg_tensor_copy(dense, g);
            if (sg_tensor_layout(g) == SG_COO) {
                const int64_t *ix = sg_tensor_data(sg_coo_indices(g));
                for (int64_t e = 0; e < sg_coo_nnz(g); e++) touched[ix[e]] = 1;
            }
            for (int64_t k = 0; k < n; k++) {
                if (sg_tensor_dtype(dense) == SG_F32) ((float *)acc[i])[k] += sg_tensor_f32(dense)[k];
                else ((double *)acc[i])[k] += sg_tensor_f64(dense)[k];
            }
            sg_tensor_free(dense);
        }
        sg_tape_reset(ctx);
    }
    for (int i = 0; i < m->n && !rc; i++) {
        sg_tensor *p = m->p[i];
        int64_t n = sg_tensor_numel(p);
        for (int64_t k = 0; k < n && average; k++) {
            if (sg_tensor_dtype(p) == SG_F32) ((float *)acc[i])[k] /= (float)P;
            else ((double *)acc[i])[k] /= (double)P;
        }
        sg_tensor *g;
        if (kind == MODEL_EMB && i == 0) {
            int64_t rows[V], k = 0;
            float vals[V * D];
            for (int64_t row = 0; row < V; row++) {
                if (!touched[row]) continue;
                memcpy(vals + k * D, (float *)acc[i] + row * D, D * sizeof(float));
                rows[k++] = row;
            }
            g = sg_coo_new_tmp(ctx, SG_F32, 2, sg_tensor_shape(p), 1, k, rows, vals);
        } else {
            g = sg_tensor_new_tmp(ctx, sg_tensor_dtype(p), sg_tensor_ndim(p), sg_tensor_shape(p));
            if (g) memcpy(sg_tensor_data(g), acc[i], (size_t)n * sg_dtype_size(sg_tensor_dtype(p)));
        }
        rc = g ? sg_tensor_set_grad(p, g) : sg_ctx_status(ctx);
    }
    if (!rc) rc = sg_optim_step(m->opt);
    sg_tape_reset(ctx);
    for (int i = 0; i < m->n; i++) free(acc[i]);
    return rc;
}

static int same_bits(model *a, model *b)
{
    for (int i = 0; i < a->n; i++) {
        size_t bytes = (size_t)sg_tensor_numel(a->p[i]) * sg_dtype_size(sg_tensor_dtype(a->p[i]));
        if (memcmp(sg_tensor_data(a->p[i]), sg_tensor_data(b->p[i]), bytes)) return 0;
    }
    return 1;
}

/* Trains one configuration both ways and compares. */
static void train_case(int kind, int optk, sg_dist_opts o)
{
    model dist, ref;
    model_init(&dist, kind, optk);
    model_init(&ref, kind, optk);
    sg_dist *d = sg_dist_new(dist.ctx, MPI_COMM_WORLD, &o);
    CHECK(d != NULL);
    if (!d) return;
    CHECK(sg_dist_size(d) == P && sg_dist_rank(d) == R);
    for (int t = 0; t < STEPS; t++) {
        CHECK_STATUS(dist.ctx, backward(&dist, kind, t, R), SG_OK);
        CHECK_STATUS(dist.ctx, sg_dist_reduce_grads(d, dist.p, dist.n), SG_OK);
        sg_dist_param_stats ps;
        CHECK_STATUS(dist.ctx, sg_dist_param_stats_get(d, 0, &ps), SG_OK);
        if (kind == MODEL_EMB) {
            /* the rule, from the entries this test counts itself */
            int64_t mine = 0, N = 0;
            unsigned char seen[V] = {0};
            for (int i = 0; i < B; i++) {
                int64_t row = (int64_t)(mix((uint64_t)(t * 977 + R * 7 + i / 2)) % (V / 2)) + (R % 2) * (V / 4);
                if (!seen[row]) mine++;
                seen[row] = 1;
            }
            MPI_Allreduce(&mine, &N, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
            int sparse = o.sparse_mode == SG_DIST_FORCE_SPARSE ||
                         (o.sparse_mode == SG_DIST_AUTO && N * (8 + D * 4) <= 2 * (V * D * 4 + (V + 7) / 8));
            CHECK(ps.nnz_total == N);
            CHECK(ps.choice == (sparse ? SG_DIST_SPARSE_AS_SPARSE : SG_DIST_SPARSE_AS_DENSE));
            if (sparse) CHECK(ps.bytes_sent == (uint64_t)(mine * (8 + D * 4) * (P - 1)));
            CHECK(sg_coo_is_coalesced(sg_tensor_grad(dist.p[0])));
        } else {
            CHECK(ps.choice == SG_DIST_DENSE);
        }
        CHECK_STATUS(dist.ctx, sg_optim_step(dist.opt), SG_OK);
        sg_tape_reset(dist.ctx);
        CHECK_STATUS(ref.ctx, reference_step(&ref, kind, t, o.average), SG_OK);
    }
    sg_optim_flush(dist.opt);
    sg_optim_flush(ref.opt);
    int ok = same_bits(&dist, &ref);
    if (!ok) fprintf(stderr, "  rank %d: model %d optimizer %d mode %d average %d differs from the reference\n",
                     R, kind, optk, o.sparse_mode, o.average);
    CHECK(ok);
    /* the run moved the parameters (a test that trains nothing could not fail) */
    model fresh;
    model_init(&fresh, kind, optk);
    CHECK(!same_bits(&dist, &fresh));
    sg_ctx_free(fresh.ctx);
    sg_dist_free(d);
    sg_ctx_free(dist.ctx);
    sg_ctx_free(ref.ctx);
}

TEST(train_bitwise_equal_to_one_process)
{
    const sg_dist_sparse_mode modes[3] = {SG_DIST_AUTO, SG_DIST_FORCE_SPARSE, SG_DIST_FORCE_DENSE};
    for (int kind = 0; kind < 2; kind++)
        for (int optk = 0; optk < 3; optk++)
            for (int mode = 0; mode < 3; mode++) {
                sg_dist_opts o = SG_DIST_OPTS_DEFAULT;
                o.sparse_mode = modes[mode];
                o.bucket_bytes = 64; /* several buckets; parameters split across them */
                train_case(kind, optk, o);
            }
    sg_dist_opts sum = SG_DIST_OPTS_DEFAULT;
    sum.average = 0;
    train_case(MODEL_EMB, OPT_ADAGRAD, sum);
    train_case(MODEL_MLP, OPT_SGD, sum);
}

/* Every rank gets status `want`; then a well-formed call succeeds (no rank was left
 * behind in a collective). */
static void expect_everywhere(sg_dist *d, sg_ctx *ctx, int got, int want, sg_tensor **good, int n)
{
    CHECK_STATUS(ctx, got, want);
    CHECK(sg_ctx_message(ctx)[0] != '\0');
    sg_ctx_clear_error(ctx);
    CHECK_STATUS(ctx, sg_dist_reduce_grads(d, good, n), SG_OK);
}

TEST(ranks_that_disagree_all_get_the_error)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    sg_tensor *a = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){4, 3}), 1);
    sg_tensor *b = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){5}), 1);
    sg_tensor *b6 = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){6}), 1);
    sg_tensor *b64 = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){5}), 1);
    sg_tensor *frozen = sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){5});
    sg_tensor *good[2] = {a, b};
    /* a gradient that must survive the failed calls unchanged */
    sg_tensor *g = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){4, 3});
    sg_tensor_fill(g, 1.0);
    CHECK_STATUS(ctx, sg_backward_grad(a, g), SG_OK);
    int last = P - 1;

    expect_everywhere(d, ctx, sg_dist_reduce_grads(d, good, R == last ? 1 : 2), SG_ERR_STATE, good, 2);
    sg_tensor *shape[2] = {a, R == last ? b6 : b};
    int rc = sg_dist_reduce_grads(d, shape, 2);
    CHECK(strstr(sg_ctx_message(ctx), "parameter 1") != NULL);
    expect_everywhere(d, ctx, rc, SG_ERR_SHAPE, good, 2);
    sg_tensor *dtype[2] = {a, R == last ? b64 : b};
    expect_everywhere(d, ctx, sg_dist_reduce_grads(d, dtype, 2), SG_ERR_DTYPE, good, 2);
    sg_tensor *null[2] = {a, R == last ? NULL : b};
    expect_everywhere(d, ctx, sg_dist_reduce_grads(d, null, 2), SG_ERR_NULL, good, 2);
    sg_tensor *fro[2] = {a, R == 0 ? frozen : b};
    expect_everywhere(d, ctx, sg_dist_reduce_grads(d, fro, 2), SG_ERR_STATE, good, 2);
    expect_everywhere(d, ctx, sg_dist_reduce_grads(d, good, R == 0 ? -1 : 2), SG_ERR_ARG, good, 2);
    sg_tape_reset(ctx);

    /* the failed calls changed nothing; the good ones summed a's gradient over ranks */
    CHECK_STATUS(ctx, sg_backward_grad(a, g), SG_OK);
    rc = sg_dist_reduce_grads(d, (sg_tensor *[]){a, frozen}, 2);
    CHECK_STATUS(ctx, rc, SG_ERR_STATE);
    CHECK(sg_tensor_grad(a) == g);
    sg_ctx_clear_error(ctx);
    CHECK_STATUS(ctx, sg_dist_reduce_grads(d, good, 2), SG_OK);
    CHECK(sg_tensor_grad(a) != g && sg_tensor_get(sg_tensor_grad(a), 0) == 1.0); /* mean of ones */
    CHECK(sg_tensor_grad(b) == NULL);
    sg_dist_stats st;
    CHECK_STATUS(ctx, sg_dist_stats_get(d, &st), SG_OK);
    CHECK(st.n_params == 2 && st.reduces == 7);
    /* a's 12 elements in one bucket: all but this rank's slice go out in the
     * reduce-scatter, its slice's sums to each other rank in the allgather */
    int64_t slice = 12 * (R + 1) / P - 12 * R / P;
    CHECK(st.bytes_sent == (uint64_t)(P > 1 ? (12 - slice + slice * (P - 1)) * 4 : 0));
    CHECK(sg_dist_param_stats_get(d, 2, &(sg_dist_param_stats){0}) == SG_ERR_ARG);
    CHECK(sg_dist_new(ctx, MPI_COMM_WORLD, &(sg_dist_opts){2, 1, SG_DIST_AUTO, 0}) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    CHECK(sg_dist_reduce_grads(NULL, good, 2) == SG_ERR_NULL);
    sg_dist_free(NULL);
    sg_dist_free(d);
    sg_ctx_free(ctx);
}

TEST(timeout_setting)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    sg_tensor *a = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){3}), 1);
    CHECK(sg_dist_set_timeout(NULL, 1.0) == SG_ERR_NULL);
    CHECK_STATUS(ctx, sg_dist_set_timeout(d, 0.0), SG_ERR_ARG);
    CHECK_STATUS(ctx, sg_dist_set_timeout(d, -1.0), SG_ERR_ARG);
    CHECK_STATUS(ctx, sg_dist_set_timeout(d, NAN), SG_ERR_ARG);
    sg_ctx_clear_error(ctx);
    CHECK_STATUS(ctx, sg_dist_set_timeout(d, INFINITY), SG_OK);
    CHECK_STATUS(ctx, sg_dist_set_timeout(d, 30.0), SG_OK);
    CHECK_STATUS(ctx, sg_dist_reduce_grads(d, &a, 1), SG_OK);
    sg_dist_free(d);

    /* a bad SGRAD_DIST_TIMEOUT on the last rank alone: sg_dist_new fails on every rank */
    const char *was = getenv("SGRAD_DIST_TIMEOUT");
    char *saved = was ? strdup(was) : NULL;
    if (R == P - 1) setenv("SGRAD_DIST_TIMEOUT", P > 1 ? "soon" : "0", 1);
    CHECK(sg_dist_new(ctx, MPI_COMM_WORLD, NULL) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    CHECK(strstr(sg_ctx_message(ctx), "SGRAD_DIST_TIMEOUT") != NULL);
    sg_ctx_clear_error(ctx);
    if (saved) setenv("SGRAD_DIST_TIMEOUT", saved, 1);
    else unsetenv("SGRAD_DIST_TIMEOUT");
    free(saved);
    d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    CHECK(d != NULL);
    sg_dist_free(d);
    sg_ctx_free(ctx);
}

/* Rank 1 dies without a word mid-run; every other rank must hear it from its own
 * deadline (the script sets SGRAD_DIST_TIMEOUT): an SG_ERR_IO naming this rank, printed,
 * then exit 1, and a later call is refused at once. No MPI_Finalize: it would wait for
 * rank 1. */
static int die(void)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    sg_tensor *a = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){1000}), 1);
    if (!d || !a) return 2;
    for (int i = 0; i < 1000000; i++) {
        if (R == 1 && i == 20) raise(SIGKILL);
        int rc = sg_dist_reduce_grads(d, &a, 1);
        if (rc) {
            fprintf(stderr, "rank %d: sg_dist_reduce_grads returned %s: %s\n", R, sg_status_string(rc),
                    sg_ctx_message(ctx));
            char want[64];
            snprintf(want, sizeof want, "rank %d of %d: no answer", R, P);
            int named = rc == SG_ERR_IO && i >= 20 && strstr(sg_ctx_message(ctx), want) != NULL;
            int refused = sg_dist_reduce_grads(d, &a, 1) == SG_ERR_IO &&
                          strstr(sg_ctx_message(ctx), "earlier collective timed out") != NULL;
            if (!named || !refused) fprintf(stderr, "rank %d: wrong error (named %d, refused %d)\n", R, named, refused);
            sg_dist_free(d);
            sg_ctx_free(ctx);
            return named && refused ? 1 : 2;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (argc > 1 && !strcmp(argv[1], "die")) return die();
    return tu_mpi_run_all();
}
