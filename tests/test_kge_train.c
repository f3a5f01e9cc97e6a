/* sgrad-kge's trainer on a tiny graph with planted structure (relation r1 the inverse of
 * r0, r2 symmetric): the loss falls, validation ranks the held-out inverse triples well,
 * every model gives bitwise the same tables for 1 and 2 threads, and a run stopped by the
 * event callback and resumed from its checkpoint ends bitwise where an uninterrupted run
 * ends; a resume with other options is refused before training; a diverged run fails with
 * finite tables; a failed second training call keeps the model. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "sgrad_kge.h"

#include <math.h>

enum { NE = 40 };

static char tr[256], va[256];

static void remove_files(void)
{
    remove(tr);
    remove(va);
}

/* Pairs (a, b): a r0 b and b r1 a in training, except that the r1 triple of every 5th
 * pair is held out for validation; r2 symmetric on other pairs. */
static void make_graph(void)
{
    if (tr[0]) return;
    snprintf(tr, sizeof tr, "%s", tu_tmp_path("kge_train_tr.tsv"));
    snprintf(va, sizeof va, "%s", tu_tmp_path("kge_train_va.tsv"));
    atexit(remove_files);
    FILE *f = fopen(tr, "w"), *g = fopen(va, "w");
    for (int i = 0; i < 120; i++) {
        const int a = (int)(tu_rand() % NE), b = (int)(tu_rand() % NE);
        if (a == b) continue;
        fprintf(f, "e%d\tr0\te%d\n", a, b);
        fprintf(i % 5 ? f : g, "e%d\tr1\te%d\n", b, a);
        fprintf(f, "e%d\tr2\te%d\ne%d\tr2\te%d\n", (a + 7) % NE, (b + 3) % NE, (b + 3) % NE, (a + 7) % NE);
    }
    fclose(f);
    fclose(g);
}

typedef struct {
    double first, last;
    int epochs;
    int64_t stop_at; /* stop once this many steps are done (0: never) */
} watch;

static int on_event(void *ud, const sg_event *e)
{
    watch *w = ud;
    if (e->kind == SG_EVENT_EPOCH) {
        if (w->epochs++ == 0) w->first = e->loss;
        w->last = e->loss;
    }
    return e->kind == SG_EVENT_STEP && w->stop_at && e->steps >= w->stop_at;
}

static sg_kge_opts small_opts(sg_kge_model model)
{
    sg_kge_opts o = sg_kge_opts_default(model);
    o.dim = 16, o.epochs = 4, o.batch = 64, o.chunk = 32, o.negs = 16, o.verbose = 0;
    return o;
}

/* Trains o; the model (NULL on failure) and the watch. */
static sg_kge *train(sg_kge_opts o, watch *w, int *status, sg_kge_result *res)
{
    o.on_event = on_event;
    o.event_ud = w;
    sg_model_error err;
    sg_kge *m = sg_kge_new(&o, &err);
    *status = m ? sg_kge_train_files(m, tr, va, NULL, res, &err) : -1;
    if (*status && *status != SG_STOPPED) printf("  training: %s\n", err.message);
    return m;
}

static bool same_tables(sg_kge *a, sg_kge *b)
{
    for (int k = 0; k < 2; k++) {
        int64_t ra, ca, rb, cb;
        const float *x = sg_kge_table(a, k, &ra, &ca), *y = sg_kge_table(b, k, &rb, &cb);
        if (!x || !y || ra != rb || ca != cb || memcmp(x, y, (size_t)(ra * ca) * sizeof *x)) return false;
    }
    return true;
}

TEST(loss_falls_and_inverse_is_learnt)
{
    make_graph();
    sg_kge_opts o = small_opts(SG_KGE_COMPLEX);
    o.epochs = 30, o.eval_every = 30, o.max_eval = 0, o.dim = 32;
    watch w = {0};
    sg_kge_result res;
    int st;
    sg_kge *m = train(o, &w, &st, &res);
    CHECK(st == SG_OK && w.epochs == 30);
    printf("  complex: loss %.4f -> %.4f, validation mrr %.3f (random: about %.3f)\n", w.first, w.last,
           res.valid_mrr, 4.6 / NE);
    CHECK(w.last < 0.9 * w.first);
    CHECK(res.valid_mrr > 0.3);
    sg_kge_free(m);
}

/* Every model trained with o at 1 and at 2 threads: bitwise the same tables and loss. The
 * sizes are large enough to split over 2 threads (the score matrices of a chunk: 256
 * queries by 256 + 256 rows of 64 floats, far above sgrad's per-thread grain). */
TEST(same_bits_for_1_and_2_threads)
{
    make_graph();
    for (int model = SG_KGE_TRANSE_L1; model <= SG_KGE_ROTATE; model++) {
        sg_kge_opts o = small_opts((sg_kge_model)model);
        o.dim = 64, o.epochs = 2, o.batch = 512, o.chunk = 256, o.negs = 256, o.chunk_negs = 1;
        watch w1 = {0}, w2 = {0};
        int s1, s2;
        sg_kge_result res;
        o.threads = 1;
        sg_kge *a = train(o, &w1, &s1, &res);
        o.threads = 2;
        sg_kge *b = train(o, &w2, &s2, &res);
        CHECK(s1 == SG_OK && s2 == SG_OK && res.train_edges > 256);
        CHECK(same_tables(a, b));
        CHECK(w1.last == w2.last);
        sg_kge_free(a);
        sg_kge_free(b);
    }
}

/* True when both tables of m exist and hold finite values only. */
static bool tables_finite(sg_kge *m)
{
    for (int k = 0; k < 2; k++) {
        int64_t rows, cols;
        const float *x = sg_kge_table(m, k, &rows, &cols);
        if (!x) return false;
        for (int64_t i = 0; i < rows * cols; i++)
            if (!isfinite(x[i])) return false;
    }
    return true;
}

/* SGD at the largest -lr diverges: the call fails naming the step, the tables stay those
 * of the last finite step. */
TEST(diverged_run_fails_and_keeps_finite_tables)
{
    make_graph();
    sg_kge_opts o = small_opts(SG_KGE_DISTMULT);
    o.optim = SG_KGE_SGD, o.lr = 1e3, o.epochs = 200, o.reg_coef = 0;
    o.on_event = NULL;
    sg_model_error err;
    sg_kge *m = sg_kge_new(&o, &err);
    const int st = m ? sg_kge_train_files(m, tr, va, NULL, NULL, &err) : -1;
    printf("  status %d: %s\n", st, err.message);
    CHECK(st == SG_ERR_VALUE && strstr(err.message, "training diverged at epoch") && strstr(err.message, "-lr"));
    CHECK(tables_finite(m));
    sg_kge_free(m);
}

/* A second sg_kge_train_files whose files cannot be read (missing, malformed) fails and
 * leaves the trained model as it was. */
TEST(failed_retrain_keeps_the_model)
{
    make_graph();
    const char *bad = tu_tmp_path("kge_train_bad.tsv");
    FILE *f = fopen(bad, "w");
    fprintf(f, "a\tr\tb\nb\tr\n");
    fclose(f);
    watch w = {0};
    int st;
    sg_kge_result res;
    sg_kge *m = train(small_opts(SG_KGE_DISTMULT), &w, &st, &res);
    sg_kge *ref = train(small_opts(SG_KGE_DISTMULT), &w, &st, &res);
    sg_model_error err;
    CHECK(st == SG_OK && same_tables(m, ref));
    CHECK(sg_kge_train_files(m, "/nonexistent/kge.tsv", NULL, NULL, NULL, &err) == SG_ERR_IO);
    CHECK(sg_kge_train_files(m, tr, bad, NULL, NULL, &err) == SG_ERR_FORMAT);
    CHECK(same_tables(m, ref) && sg_kge_entities(m) == sg_kge_entities(ref));
    CHECK(!strcmp(sg_kge_entity_name(m, 3), sg_kge_entity_name(ref, 3)));
    sg_kge_free(m);
    sg_kge_free(ref);
    remove(bad);
}

/* A fake transport of 2 ranks for one process (rank 0 alone): the shard a plain tensor,
 * the exchanges no-ops (a sum over one rank), and the lookup failing as a rank's local
 * failure would. */
static sg_tensor *fake_shard;

static sg_tensor *fake_table(sg_kge_dist *d, sg_ctx *ctx, int64_t rows, int64_t dim, int64_t *begin,
                             int64_t *end, sg_model_error *err)
{
    (void)d, (void)err;
    *begin = 0, *end = rows / 2;
    const int64_t shape[2] = {*end, dim};
    return fake_shard = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, shape), 1);
}

static sg_tensor *fake_lookup(sg_kge_dist *d, sg_tensor *idx, sg_model_error *err)
{
    (void)d, (void)idx;
    snprintf(err->message, sizeof err->message, "the fake lookup fails");
    err->status = SG_ERR_NOMEM;
    return NULL;
}

static int fake_backward(sg_kge_dist *d, sg_model_error *err) { return (void)d, (void)err, 0; }
static int fake_reduce(sg_kge_dist *d, sg_tensor *rel, sg_model_error *err) { return (void)d, (void)rel, (void)err, 0; }
static int fake_sum(sg_kge_dist *d, double *x, int n, sg_model_error *err)
{
    return (void)d, (void)x, (void)n, (void)err, 0;
}
static int fake_gather(sg_kge_dist *d, float *full, sg_model_error *err) { return (void)d, (void)full, (void)err, 0; }

static void fake_release(sg_kge_dist *d)
{
    (void)d;
    sg_tensor_free(fake_shard);
    fake_shard = NULL;
}

/* A ranked run that fails leaves an empty model: saving, evaluating and the tables fail
 * cleanly (no whole entity table to read). */
TEST(failed_ranked_run_leaves_an_empty_model)
{
    make_graph();
    sg_kge_dist d = {.rank = 0, .ranks = 2, .table = fake_table, .lookup = fake_lookup, .backward = fake_backward,
                     .reduce = fake_reduce, .sum = fake_sum, .gather = fake_gather, .release = fake_release};
    sg_kge_opts o = small_opts(SG_KGE_DISTMULT);
    sg_model_error err;
    sg_kge *m = sg_kge_new(&o, &err);
    CHECK(m != NULL);
    if (!m) return;
    sg_kge_set_dist(m, &d);
    CHECK(sg_kge_train_files(m, tr, va, NULL, NULL, &err) != SG_OK && strstr(err.message, "fake lookup"));
    int64_t rows, cols;
    CHECK(sg_kge_table(m, 0, &rows, &cols) == NULL && sg_kge_entities(m) == 0);
    CHECK(sg_kge_save(m, tu_tmp_path("kge_train_never"), &err) == SG_ERR_STATE && strstr(err.message, "no trained"));
    sg_kge_metrics met;
    CHECK(sg_kge_evaluate(m, va, NULL, 0, &met, &err) == SG_ERR_STATE);
    CHECK(sg_kge_export(m, "/tmp", &err) == SG_ERR_STATE);
    sg_kge_free(m);
}

/* Run (model, optimizer) stopped after 5 steps with a checkpoint every 2, resumed: the
 * same bits as without the stop. */
static void check_resume(sg_kge_model model, sg_kge_optim optim)
{
    make_graph();
    const char *ck = tu_tmp_path("kge_train_ckpt");
    sg_kge_opts o = small_opts(model);
    o.optim = optim;
    watch w = {0};
    int st;
    sg_kge_result res;
    sg_kge *full = train(o, &w, &st, &res);
    const int64_t steps = res.steps;
    CHECK(st == SG_OK && steps > 5);
    o.checkpoint = ck, o.save_every = 2;
    watch stop = {.stop_at = 5};
    sg_kge *part = train(o, &stop, &st, &res);
    CHECK(st == SG_STOPPED && res.steps == 5);
    o.resume = ck;
    watch w2 = {0};
    sg_kge *resumed = train(o, &w2, &st, &res);
    CHECK(st == SG_OK && !res.refused && res.steps == steps - 4); /* from the checkpoint of step 4 */
    CHECK(same_tables(full, resumed));
    o.lr *= 2; /* another run: refused before training */
    sg_kge *other = train(o, &w2, &st, &res);
    CHECK(st == SG_ERR_STATE && res.refused);
    sg_kge_free(full);
    sg_kge_free(part);
    sg_kge_free(resumed);
    sg_kge_free(other);
    remove(ck);
}

TEST(resume_is_bitwise_complex_adagrad) { check_resume(SG_KGE_COMPLEX, SG_KGE_ADAGRAD); }
TEST(resume_is_bitwise_rotate_lazy_adam) { check_resume(SG_KGE_ROTATE, SG_KGE_LAZY_ADAM); }
TEST(resume_is_bitwise_transe_rowwise_adagrad) { check_resume(SG_KGE_TRANSE_L2, SG_KGE_ROWWISE_ADAGRAD); }

TEST(model_file_round_trip)
{
    make_graph();
    const char *path = tu_tmp_path("kge_train_model");
    watch w = {0};
    int st;
    sg_kge_result res;
    sg_kge *m = train(small_opts(SG_KGE_DISTMULT), &w, &st, &res);
    sg_model_error err;
    CHECK(st == SG_OK && sg_kge_save(m, path, &err) == SG_OK);
    sg_kge *l = sg_kge_load(path, 1, &err);
    CHECK(l != NULL && same_tables(m, l));
    CHECK(sg_kge_entities(l) == sg_kge_entities(m) && sg_kge_relations(l) == 3);
    CHECK(sg_kge_entities_train(l) == sg_kge_entities_train(m));
    CHECK(l && !strcmp(sg_kge_entity_name(l, 5), sg_kge_entity_name(m, 5)));
    CHECK(sg_kge_load("/nonexistent/kge.model", 1, &err) == NULL && err.status == SG_ERR_IO);
    sg_kge_free(m);
    sg_kge_free(l);
    remove(path);
}

TEST_MAIN()
