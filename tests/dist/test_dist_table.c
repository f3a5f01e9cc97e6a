/* Sharded tables under mpirun (tests/test_dist.sh launches it with 2 and 4 ranks).
 *
 * Training: every rank trains its shard on its own batches; every rank also trains one
 * unsharded table alone, in a second context, on every rank's batch concatenated in rank
 * order, with the same loss and optimizer. After 100 steps each shard must equal its rows
 * of the unsharded table bit for bit (SGD with momentum and weight decay, Adagrad with
 * weight decay). Memory: a shard and its optimizer state take about R/P rows, measured
 * with sg_ctx_mem_stats against the unsharded table's. Bad input (an index out of range
 * on one rank, a rank with another dim) is an error on every rank, and the next call works.
 * Checkpoints: N steps, a save, a load into a fresh context (or, with `save DIR` and
 * `resume DIR`, a fresh job, as tests/test_dist.sh runs it) and M more steps equal N + M
 * steps bit for bit; a load with another rank count is refused on every rank with an
 * optimizer, and re-partitions the values without one.
 */
#define _POSIX_C_SOURCE 200809L /* testutil's scratch paths */
#include "mpi_testutil.h"

enum { ROWS = 37, DIM = 5, STEPS = 100 };
enum { OPT_SGD, OPT_ADAGRAD };

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

/* Rank r's batch at step t: its size (0 now and then on rank 1), rows with repeats. */
static int64_t batch_size(int t, int r) { return r == 1 && t % 7 == 3 ? 0 : 4 + (t + r) % 5; }
static int64_t batch_row(int t, int r, int64_t i)
{
    return (int64_t)(mix((uint64_t)(t * 1009 + r * 101 + i / 2)) % ROWS);
}

static sg_optim *make_opt(sg_ctx *ctx, int optk)
{
    if (optk == OPT_SGD) return sg_optim_sgd(ctx, &(sg_sgd_opts){0.05, 0.9, 0.0, 1e-2, 0});
    return sg_optim_adagrad(ctx, &(sg_adagrad_opts){0.1, 0.0, 1e-2, 0.1, 1e-10});
}

/* loss = sum(tanh(e) * T) + 0.05 sum(e * e), T from (t, rank, position): its gradient
 * row of each position depends on that row alone, so batching cannot change it. */
static int loss_backward(sg_ctx *ctx, sg_tensor *e, int t, int nranks, int one_rank)
{
    int64_t n = sg_tensor_dim(e, 0);
    sg_tensor *T = sg_tensor_new_tmp(ctx, SG_F32, 2, (int64_t[]){n, DIM});
    float *tv = sg_tensor_f32(T);
    int64_t k = 0;
    for (int r = 0; r < nranks; r++) {
        int rr = one_rank >= 0 ? one_rank : r;
        for (int64_t i = 0; i < batch_size(t, rr); i++, k++)
            for (int j = 0; j < DIM; j++) tv[k * DIM + j] = (float)unit((uint64_t)t, (uint64_t)(rr * 1000 + i), (uint64_t)j);
    }
    sg_tensor *loss = sg_add(sg_sum(sg_mul(sg_tanh(e), T)), sg_scale(sg_sum(sg_mul(e, e)), 0.05));
    return loss ? sg_backward(loss) : sg_ctx_status(ctx);
}

static float init_value(int64_t row, int64_t j) { return (float)(0.5 * unit(77, (uint64_t)row, (uint64_t)j)); }

static void sharded_case(int optk)
{
    sg_ctx *ctx = sg_ctx_new(NULL), *rctx = sg_ctx_new(NULL);
    sg_ctx_set_threads(ctx, 1 + R % 2); /* threads must not matter */
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    sg_dist_table *tab = sg_dist_table_new(d, SG_F32, ROWS, DIM);
    CHECK(tab != NULL);
    if (!tab) return;
    sg_tensor *shard = sg_dist_table_shard(tab);
    int64_t b, e;
    CHECK_STATUS(ctx, sg_dist_table_range(tab, R, &b, &e), SG_OK);
    CHECK(b == (int64_t)R * ROWS / P && e == (int64_t)(R + 1) * ROWS / P);
    CHECK(sg_tensor_dim(shard, 0) == e - b && sg_tensor_dim(shard, 1) == DIM);
    for (int64_t r = b; r < e; r++)
        for (int j = 0; j < DIM; j++) sg_tensor_f32(shard)[(r - b) * DIM + j] = init_value(r, j);
    sg_optim *opt = make_opt(ctx, optk);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, shard), SG_OK);

    sg_tensor *W = sg_tensor_new(rctx, SG_F32, 2, (int64_t[]){ROWS, DIM});
    for (int64_t r = 0; r < ROWS; r++)
        for (int j = 0; j < DIM; j++) sg_tensor_f32(W)[r * DIM + j] = init_value(r, j);
    sg_tensor_requires_grad(W, 1);
    sg_optim *ropt = make_opt(rctx, optk);
    sg_optim_add_param(ropt, W);

    int64_t remote = 0;
    for (int t = 0; t < STEPS; t++) {
        int64_t n = batch_size(t, R);
        sg_tensor *idx;
        if (t % 2) { /* int32 indices on odd steps */
            idx = sg_tensor_new_tmp(ctx, SG_I32, 1, (int64_t[]){n});
            for (int64_t i = 0; i < n; i++) ((int32_t *)sg_tensor_data(idx))[i] = (int32_t)batch_row(t, R, i);
        } else {
            idx = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){n});
            for (int64_t i = 0; i < n; i++) ((int64_t *)sg_tensor_data(idx))[i] = batch_row(t, R, i);
        }
        for (int64_t i = 0; i < n; i++) remote += batch_row(t, R, i) < b || batch_row(t, R, i) >= e;
        sg_tensor *out = sg_dist_table_lookup(tab, idx);
        CHECK(out != NULL && sg_tensor_get_requires_grad(out));
        if (!out) break;
        CHECK_STATUS(ctx, loss_backward(ctx, out, t, 1, R), SG_OK);
        CHECK_STATUS(ctx, sg_dist_table_backward(tab), SG_OK);
        CHECK(sg_tensor_layout(sg_tensor_grad(shard)) == SG_COO);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        sg_tape_reset(ctx);

        int64_t total = 0;
        for (int r = 0; r < P; r++) total += batch_size(t, r);
        sg_tensor *ridx = sg_tensor_new_tmp(rctx, SG_I64, 1, (int64_t[]){total});
        int64_t k = 0;
        for (int r = 0; r < P; r++)
            for (int64_t i = 0; i < batch_size(t, r); i++) ((int64_t *)sg_tensor_data(ridx))[k++] = batch_row(t, r, i);
        CHECK_STATUS(rctx, loss_backward(rctx, sg_embedding(W, ridx, NULL), t, P, -1), SG_OK);
        CHECK_STATUS(rctx, sg_optim_step(ropt), SG_OK);
        sg_tape_reset(rctx);
    }
    CHECK(remote > 0); /* rows did travel */
    sg_optim_flush(opt);
    sg_optim_flush(ropt);
    const float *sv = sg_tensor_f32(shard), *wv = sg_tensor_f32(W) + b * DIM;
    int same = !memcmp(sv, wv, (size_t)(e - b) * DIM * sizeof(float)), moved = 0;
    for (int64_t k = 0; k < (e - b) * DIM; k++) moved |= sv[k] != init_value(b + k / DIM, k % DIM);
    if (!same) fprintf(stderr, "  rank %d: optimizer %d: the shard differs from the unsharded table\n", R, optk);
    CHECK(same);
    CHECK(moved);
    sg_dist_table_stats st;
    CHECK_STATUS(ctx, sg_dist_table_stats_get(tab, &st), SG_OK);
    CHECK(st.lookups == STEPS && st.backwards == STEPS && st.rows_requested == batch_size(STEPS - 1, R));
    sg_dist_table_free(tab);
    sg_dist_free(d);
    sg_ctx_free(ctx);
    sg_ctx_free(rctx);
}

TEST(sharded_table_equals_unsharded_after_100_steps)
{
    sharded_case(OPT_SGD);
    sharded_case(OPT_ADAGRAD);
}

/* Bytes a table of `rows` x dim f32 and its Adagrad state add to a context. */
static size_t table_bytes(sg_ctx *ctx, sg_tensor *t)
{
    size_t before = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_optim *opt = sg_optim_adagrad(ctx, NULL);
    sg_optim_add_param(opt, t);
    return sg_ctx_mem_stats(ctx).bytes_in_use - before;
}

TEST(a_shard_holds_about_rows_over_ranks)
{
    const int64_t rows = 20000, dim = 16;
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    size_t before = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_dist_table *tab = sg_dist_table_new(d, SG_F32, rows, dim);
    size_t shard = sg_ctx_mem_stats(ctx).bytes_in_use - before;
    shard += table_bytes(ctx, sg_dist_table_shard(tab));
    sg_ctx *whole_ctx = sg_ctx_new(NULL);
    size_t w0 = sg_ctx_mem_stats(whole_ctx).bytes_in_use;
    sg_tensor *W = sg_tensor_new(whole_ctx, SG_F32, 2, (int64_t[]){rows, dim});
    size_t whole = sg_ctx_mem_stats(whole_ctx).bytes_in_use - w0 + table_bytes(whole_ctx, W);
    int64_t b, e;
    sg_dist_table_range(tab, R, &b, &e);
    /* per row: values, Adagrad's sum, and the 8 bytes of grouping scratch an optimizer
     * that sums duplicate rows keeps per row of its largest parameter */
    size_t exact = (size_t)(e - b) * (dim * 4 * 2 + 8);
    if (R == 0) printf("     shard of %lld of %lld rows: %zu bytes with Adagrad state; the whole table: %zu\n",
                       (long long)(e - b), (long long)rows, shard, whole);
    CHECK(shard >= exact && shard <= exact + exact / 50 + 4096);
    CHECK(whole >= (size_t)rows * (dim * 8 + 8) && (double)shard / (double)whole < 1.0 / P + 0.02);
    sg_dist_table_free(tab);
    sg_dist_free(d);
    sg_ctx_free(ctx);
    sg_ctx_free(whole_ctx);
}

TEST(bad_input_is_an_error_on_every_rank)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    int last = P - 1;
    /* a rank with another dim, another dtype, a bad row count */
    CHECK(sg_dist_table_new(d, SG_F32, ROWS, R == last ? DIM + 1 : DIM) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(strstr(sg_ctx_message(ctx), "dim from 5 to 6") != NULL);
    sg_ctx_clear_error(ctx);
    CHECK(sg_dist_table_new(d, R == 0 ? SG_F64 : SG_F32, ROWS, DIM) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_DTYPE);
    sg_ctx_clear_error(ctx);
    CHECK(sg_dist_table_new(d, SG_F32, R == last ? 0 : ROWS, DIM) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    sg_ctx_clear_error(ctx);

    sg_dist_table *tab = sg_dist_table_new(d, SG_F32, ROWS, DIM);
    CHECK(tab != NULL);
    CHECK_STATUS(ctx, sg_dist_table_backward(tab), SG_ERR_STATE); /* no lookup yet */
    sg_ctx_clear_error(ctx);
    int64_t good[3] = {0, ROWS - 1, 5}, bad[3] = {0, ROWS, 5};
    sg_tensor *gi = sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){3}, good);
    sg_tensor *bi = sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){3}, bad);
    sg_tensor *fi = sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){3});
    CHECK(sg_dist_table_lookup(tab, R == last ? bi : gi) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    char want[64];
    snprintf(want, sizeof want, "rank %d", last);
    CHECK(strstr(sg_ctx_message(ctx), want) != NULL);
    sg_ctx_clear_error(ctx);
    CHECK_STATUS(ctx, sg_dist_table_backward(tab), SG_ERR_STATE); /* the failed lookup left none */
    sg_ctx_clear_error(ctx);
    CHECK(sg_dist_table_lookup(tab, R == 0 ? fi : gi) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_DTYPE);
    sg_ctx_clear_error(ctx);
    CHECK(sg_dist_table_lookup(tab, R == 0 ? NULL : gi) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_NULL);
    sg_ctx_clear_error(ctx);
    /* the next well-formed step works: every rank was still in step */
    sg_tensor *out = sg_dist_table_lookup(tab, gi);
    CHECK(out != NULL);
    CHECK_STATUS(ctx, sg_backward(sg_sum(out)), SG_OK);
    CHECK_STATUS(ctx, sg_dist_table_backward(tab), SG_OK);
    /* every rank asked for rows 0, ROWS - 1 and 5, each with gradient 1: the shard's
     * gradient holds P ones per element of each of those rows it owns */
    int64_t b, e;
    sg_dist_table_range(tab, R, &b, &e);
    sg_tensor *g = sg_tensor_grad(sg_dist_table_shard(tab));
    for (int k = 0; k < 3; k++)
        if (good[k] >= b && good[k] < e) CHECK(sg_tensor_get(g, (good[k] - b) * DIM) == (double)P);
    CHECK(sg_dist_table_lookup(NULL, gi) == NULL && sg_dist_table_backward(NULL) == SG_ERR_NULL);
    CHECK(sg_dist_table_range(tab, P, &b, &e) == SG_ERR_ARG);
    sg_tape_reset(ctx);
    sg_dist_table_free(tab);
    sg_dist_table_free(NULL);
    sg_dist_free(d);
    sg_ctx_free(ctx);
}


/* Steps [t0, t1) of the sharded training above (SGD, momentum and weight decay). */
static void train_steps(sg_ctx *ctx, sg_dist_table *tab, sg_optim *opt, int t0, int t1)
{
    for (int t = t0; t < t1; t++) {
        int64_t n = batch_size(t, R);
        sg_tensor *idx = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){n});
        for (int64_t i = 0; i < n; i++) ((int64_t *)sg_tensor_data(idx))[i] = batch_row(t, R, i);
        sg_tensor *out = sg_dist_table_lookup(tab, idx);
        CHECK_STATUS(ctx, out ? loss_backward(ctx, out, t, 1, R) : sg_ctx_status(ctx), SG_OK);
        CHECK_STATUS(ctx, sg_dist_table_backward(tab), SG_OK);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        sg_tape_reset(ctx);
    }
}

typedef struct {
    sg_ctx *ctx;
    sg_dist *d;
    sg_dist_table *tab;
    sg_optim *opt;
} sharded;

static sharded sharded_new(MPI_Comm comm, int64_t dim)
{
    sharded s = {sg_ctx_new(NULL), NULL, NULL, NULL};
    s.d = sg_dist_new(s.ctx, comm, NULL);
    s.tab = sg_dist_table_new(s.d, SG_F32, ROWS, dim);
    s.opt = make_opt(s.ctx, OPT_SGD);
    if (!s.tab) return s;
    int64_t b, e;
    sg_dist_table_range(s.tab, sg_dist_rank(s.d), &b, &e);
    sg_tensor *shard = sg_dist_table_shard(s.tab);
    for (int64_t r = b; r < e; r++)
        for (int j = 0; j < dim; j++) sg_tensor_f32(shard)[(r - b) * dim + j] = init_value(r, j);
    sg_optim_add_param(s.opt, shard);
    return s;
}

static void sharded_free(sharded *s)
{
    sg_dist_table_free(s->tab);
    sg_dist_free(s->d);
    sg_ctx_free(s->ctx);
}

static int same_shard(sharded *a, sharded *b)
{
    sg_optim_flush(a->opt);
    sg_optim_flush(b->opt);
    sg_tensor *x = sg_dist_table_shard(a->tab), *y = sg_dist_table_shard(b->tab);
    return !memcmp(sg_tensor_data(x), sg_tensor_data(y), (size_t)sg_tensor_numel(x) * sizeof(float));
}

enum { N_STEPS = 9, M_STEPS = 8 };

/* A path every rank shares (rank 0's scratch name). */
static void shared_path(char *path, const char *name)
{
    if (R == 0) snprintf(path, 256, "%s", tu_tmp_path(name));
    MPI_Bcast(path, 256, MPI_CHAR, 0, MPI_COMM_WORLD);
}

static void remove_shard(const char *path, int rank, int ranks)
{
    char f[300];
    snprintf(f, sizeof f, "%s.%d-of-%d", path, rank, ranks);
    remove(f);
}

TEST(checkpoint_per_shard_resumes_exactly)
{
    char path[256];
    shared_path(path, "dtab");
    sharded a = sharded_new(MPI_COMM_WORLD, DIM);
    train_steps(a.ctx, a.tab, a.opt, 0, N_STEPS);
    CHECK_STATUS(a.ctx, sg_dist_table_save(a.tab, path, a.opt), SG_OK);
    char mine[300];
    snprintf(mine, sizeof mine, "%s.%d-of-%d", path, R, P);
    sg_checkpoint_meta meta = {0};
    CHECK_STATUS(a.ctx, sg_checkpoint_read_meta(a.ctx, mine, &meta), SG_OK);
    int64_t b, e;
    sg_dist_table_range(a.tab, R, &b, &e);
    const char *rb = sg_checkpoint_meta_get(&meta, "sgrad_dist.row_begin");
    CHECK(rb && atoll(rb) == b);
    sg_checkpoint_meta_free(a.ctx, &meta);
    train_steps(a.ctx, a.tab, a.opt, N_STEPS, N_STEPS + M_STEPS);

    sharded r = sharded_new(MPI_COMM_WORLD, DIM);
    CHECK_STATUS(r.ctx, sg_dist_table_load(r.tab, path, r.opt), SG_OK);
    CHECK(sg_optim_steps(r.opt) == N_STEPS);
    train_steps(r.ctx, r.tab, r.opt, N_STEPS, N_STEPS + M_STEPS);
    CHECK(same_shard(&a, &r));

    /* a table of another dim: refused everywhere, the shard untouched */
    sharded w = sharded_new(MPI_COMM_WORLD, DIM + 1);
    CHECK_STATUS(w.ctx, sg_dist_table_load(w.tab, path, w.opt), SG_ERR_STATE);
    CHECK(sg_tensor_f32(sg_dist_table_shard(w.tab))[0] == init_value(b, 0) && sg_optim_steps(w.opt) == 0);
    sharded_free(&w);

    /* saved by a sub-communicator of ceil(P / 2) ranks, loaded by all P: with an optimizer
     * refused on every rank (nothing changed), without one re-partitioned */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, R % 2 == 0 ? 0 : MPI_UNDEFINED, R, &half);
    char hpath[256];
    shared_path(hpath, "dtab_half");
    int Q = (P + 1) / 2;
    if (half != MPI_COMM_NULL) {
        sharded h = sharded_new(half, DIM);
        int64_t hb, he;
        sg_dist_table_range(h.tab, sg_dist_rank(h.d), &hb, &he);
        for (int64_t row = hb; row < he; row++)
            for (int j = 0; j < DIM; j++)
                sg_tensor_f32(sg_dist_table_shard(h.tab))[(row - hb) * DIM + j] = init_value(row + 1000, j);
        CHECK_STATUS(h.ctx, sg_dist_table_save(h.tab, hpath, h.opt), SG_OK);
        sharded_free(&h);
        MPI_Comm_free(&half);
    }
    sharded f = sharded_new(MPI_COMM_WORLD, DIM);
    CHECK_STATUS(f.ctx, sg_dist_table_load(f.tab, hpath, f.opt), SG_ERR_STATE);
    char want[64];
    snprintf(want, sizeof want, "saved by %d ranks", Q);
    CHECK(strstr(sg_ctx_message(f.ctx), want) != NULL);
    CHECK(sg_tensor_f32(sg_dist_table_shard(f.tab))[0] == init_value(b, 0));
    sg_ctx_clear_error(f.ctx);
    /* without an optimizer the values are re-partitioned: every row is the saved one */
    CHECK_STATUS(f.ctx, sg_dist_table_load(f.tab, hpath, NULL), SG_OK);
    int rows_ok = 1;
    for (int64_t row = b; row < e; row++)
        for (int j = 0; j < DIM; j++)
            rows_ok &= sg_tensor_f32(sg_dist_table_shard(f.tab))[(row - b) * DIM + j] == init_value(row + 1000, j);
    CHECK(rows_ok);
    sharded_free(&f);

    /* saved by all P ranks, loaded without an optimizer by the ceil(P / 2) even ranks: each
     * reads the two (or one) old shards its rows span */
    char wpath[256];
    shared_path(wpath, "dtab_whole");
    sharded w2 = sharded_new(MPI_COMM_WORLD, DIM);
    for (int64_t row = b; row < e; row++)
        for (int j = 0; j < DIM; j++)
            sg_tensor_f32(sg_dist_table_shard(w2.tab))[(row - b) * DIM + j] = init_value(row + 2000, j);
    CHECK_STATUS(w2.ctx, sg_dist_table_save(w2.tab, wpath, w2.opt), SG_OK);
    sharded_free(&w2);
    MPI_Comm_split(MPI_COMM_WORLD, R % 2 == 0 ? 0 : MPI_UNDEFINED, R, &half);
    if (half != MPI_COMM_NULL) {
        sharded h = sharded_new(half, DIM);
        CHECK_STATUS(h.ctx, sg_dist_table_load(h.tab, wpath, NULL), SG_OK);
        int64_t hb, he;
        sg_dist_table_range(h.tab, sg_dist_rank(h.d), &hb, &he);
        int whole_ok = 1;
        for (int64_t row = hb; row < he; row++)
            for (int j = 0; j < DIM; j++)
                whole_ok &= sg_tensor_f32(sg_dist_table_shard(h.tab))[(row - hb) * DIM + j] == init_value(row + 2000, j);
        CHECK(whole_ok);
        sharded_free(&h);
        MPI_Comm_free(&half);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    remove_shard(wpath, R, P);
    if (R % 2 == 0) remove_shard(hpath, R / 2, Q);
    remove_shard(path, R, P);
    sharded_free(&a);
    sharded_free(&r);
}

/* `save DIR`: N steps and a save; `resume DIR`: a load, M steps, and the comparison with
 * N + M steps in this job (so the load runs in processes that never trained). */
static int save_or_resume(const char *mode, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/table", dir);
    sharded a = sharded_new(MPI_COMM_WORLD, DIM);
    int ok = 1;
    if (!strcmp(mode, "save")) {
        train_steps(a.ctx, a.tab, a.opt, 0, N_STEPS);
        ok = sg_dist_table_save(a.tab, path, a.opt) == SG_OK;
    } else {
        ok = sg_dist_table_load(a.tab, path, a.opt) == SG_OK;
        if (!ok) fprintf(stderr, "rank %d: %s\n", R, sg_ctx_message(a.ctx));
        train_steps(a.ctx, a.tab, a.opt, N_STEPS, N_STEPS + M_STEPS);
        sharded s = sharded_new(MPI_COMM_WORLD, DIM);
        train_steps(s.ctx, s.tab, s.opt, 0, N_STEPS + M_STEPS);
        ok = ok && same_shard(&a, &s) && !tu_failures;
        if (!ok) fprintf(stderr, "rank %d: the resumed shard differs from %d steps without a stop\n", R,
                         N_STEPS + M_STEPS);
        sharded_free(&s);
    }
    sharded_free(&a);
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (R == 0) printf("test_dist_table %s: %s\n", mode, all ? "ok" : "FAILED");
    MPI_Finalize();
    return all ? 0 : 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (argc > 2) return save_or_resume(argv[1], argv[2]);
    return tu_mpi_run_all();
}
