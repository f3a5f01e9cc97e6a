/* sgrad-kge's filtered evaluator (sg_kge_evaluate) against a brute-force ranking written
 * here from the definitions (scores in double from the model's rows, every entity
 * compared with the true one, the filter as a plain list of triples): on a small random
 * graph with rows on a half-integer grid, so every score is exact in float and in double
 * and the duplicated rows tie exactly; both sides, filtered and raw, every model, with
 * and without reciprocal relations. Also: a planted perfect TransE model ranks every
 * test triple first, and names outside the training file count as unseen or unknown. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "kge/engine.h"

enum { NE = 40, NR = 3, NTRAIN = 300, NTEST = 60, DIM = 8 };

typedef struct {
    int h, r, t;
} triple;
static triple train[NTRAIN], test[NTEST];

static void write_tsv(const char *path, const triple *x, int n, const char *extra)
{
    FILE *f = fopen(path, "w");
    for (int i = 0; i < n; i++) fprintf(f, "e%d\tr%d\te%d\n", x[i].h, x[i].r, x[i].t);
    if (extra) fputs(extra, f);
    fclose(f);
}

/* The graph: every entity and relation in the first triples (so rows are e0..e39 in
 * order), test triples partly repeating training ones (filtering matters). */
static void make_graph(const char *train_path, const char *test_path)
{
    for (int i = 0; i < NTRAIN; i++) {
        train[i] = (triple){(int)(tu_rand() % NE), (int)(tu_rand() % NR), (int)(tu_rand() % NE)};
        if (i < NE) train[i].h = i, train[i].t = (i + 1) % NE;
        if (i < NR) train[i].r = i;
    }
    for (int i = 0; i < NTEST; i++) {
        test[i] = i % 3 == 0 ? train[tu_rand() % NTRAIN]
                             : (triple){(int)(tu_rand() % NE), (int)(tu_rand() % NR), (int)(tu_rand() % NE)};
        if (i % 5 == 1) test[i].t = test[i - 1].t, test[i].r = test[i - 1].r; /* shared answers */
    }
    write_tsv(train_path, train, NTRAIN, NULL);
    write_tsv(test_path, test, NTEST, NULL);
}

/* A model of `model` on the training file with rows on the half-integer grid, rows 2k+1
 * copies of rows 2k for k < 5 (exact ties); rotate's phases 0 and imaginary parts 0 (the
 * rotation by 1 is exact). */
static sg_kge *grid_model(sg_kge_model model, int reciprocal, const char *train_path)
{
    sg_kge_opts o = sg_kge_opts_default(model);
    o.dim = DIM, o.reciprocal = reciprocal, o.threads = 2;
    sg_kge *m = sg_kge_new(&o, NULL);
    if (!m || kge_prepare(m, train_path, NULL, NULL, NULL)) return sg_kge_free(m), NULL;
    int64_t rows, cols;
    float *E = sg_kge_table(m, 0, &rows, &cols);
    for (int64_t i = 0; i < rows * cols; i++) E[i] = (float)((int)(tu_rand() % 5) - 2) * 0.5f;
    for (int64_t i = 1; i < 10; i += 2) memcpy(E + i * cols, E + (i - 1) * cols, (size_t)cols * sizeof *E);
    if (model == SG_KGE_ROTATE)
        for (int64_t i = 0; i < rows; i++) memset(E + i * cols + cols / 2, 0, (size_t)(cols / 2) * sizeof *E);
    float *R = sg_kge_table(m, 1, &rows, &cols);
    for (int64_t i = 0; i < rows * cols; i++)
        R[i] = model == SG_KGE_ROTATE ? 0.0f : (float)((int)(tu_rand() % 5) - 2) * 0.5f;
    return m;
}

/* ---- the brute force: scores in double from the definitions */

static double score(sg_kge *m, sg_kge_model model, int reciprocal, int x, int r, int e, bool head)
{
    int64_t rows, D, rd;
    const float *E = sg_kge_table(m, 0, &rows, &D), *R = sg_kge_table(m, 1, &rows, &rd);
    if (head && reciprocal) r += NR, head = false;
    const float *a = E + x * D, *b = E + e * D, *w = R + r * rd;
    double s = 0;
    const int K = (int)D / 2;
    for (int k = 0; k < (kge_is_complex(model) ? K : (int)D); k++) {
        if (model == SG_KGE_TRANSE_L1) s -= fabs(a[k] + (head ? -w[k] : w[k]) - b[k]);
        if (model == SG_KGE_TRANSE_L2) s += pow(a[k] + (head ? -w[k] : w[k]) - b[k], 2);
        if (model == SG_KGE_DISTMULT) s += (double)a[k] * w[k] * b[k];
        if (model == SG_KGE_COMPLEX || model == SG_KGE_ROTATE) {
            const double wr = model == SG_KGE_ROTATE ? cos(w[k]) : w[k];
            const double wi = (model == SG_KGE_ROTATE ? sin(w[k]) : w[K + k]) * (head ? -1 : 1);
            const double qr = a[k] * wr - a[K + k] * wi, qi = a[k] * wi + a[K + k] * wr;
            if (model == SG_KGE_COMPLEX) s += qr * b[k] + qi * b[K + k];
            else s -= sqrt((qr - b[k]) * (qr - b[k]) + (qi - b[K + k]) * (qi - b[K + k]));
        }
    }
    return model == SG_KGE_TRANSE_L2 ? -sqrt(s) : s;
}

static bool known(const triple *x, int n, int h, int r, int t)
{
    for (int i = 0; i < n; i++)
        if (x[i].h == h && x[i].r == r && x[i].t == t) return true;
    return false;
}

/* Filtered (by train and test) or raw metrics by brute force. */
static void brute(sg_kge *m, sg_kge_model model, int reciprocal, bool filtered, sg_kge_metrics *out)
{
    double rr = 0, mr = 0, h1 = 0, h3 = 0, h10 = 0;
    for (int i = 0; i < NTEST; i++)
        for (int side = 0; side < 2; side++) {
            const triple q = test[i];
            const int x = side ? q.t : q.h, truth = side ? q.h : q.t;
            const double st = score(m, model, reciprocal, x, q.r, truth, side);
            double rank = 1;
            for (int e = 0; e < NE; e++) {
                const int h = side ? e : q.h, t = side ? q.t : e;
                if (e == truth || (filtered && (known(train, NTRAIN, h, q.r, t) || known(test, NTEST, h, q.r, t))))
                    continue;
                const double s = score(m, model, reciprocal, x, q.r, e, side);
                rank += s > st ? 1.0 : s == st ? 0.5 : 0.0;
            }
            rr += 1 / rank, mr += rank, h1 += rank <= 1, h3 += rank <= 3, h10 += rank <= 10;
        }
    *out = (sg_kge_metrics){rr / (2 * NTEST), h1 / (2 * NTEST), h3 / (2 * NTEST), h10 / (2 * NTEST), mr / (2 * NTEST),
                            NTEST, 0, 0};
}

static void check_model(sg_kge_model model, int reciprocal)
{
    const char *tr = tu_tmp_path("kge_eval_train.tsv"), *te = tu_tmp_path("kge_eval_test.tsv");
    make_graph(tr, te);
    sg_kge *m = grid_model(model, reciprocal, tr);
    CHECK(m != NULL);
    if (!m) return;
    for (int filtered = 0; filtered < 2; filtered++) {
        const char *filters[2] = {tr, te};
        sg_kge_metrics got, want;
        sg_model_error err;
        CHECK(sg_kge_evaluate(m, te, filters, filtered ? 2 : 0, &got, &err) == SG_OK);
        brute(m, model, reciprocal, filtered, &want);
        if (fabs(got.mrr - want.mrr) > 1e-12 || fabs(got.mr - want.mr) > 1e-9)
            printf("  %s reciprocal %d filtered %d: mrr %.9f mr %.6f, brute force %.9f %.6f\n",
                   sg_kge_model_name(model), reciprocal, filtered, got.mrr, got.mr, want.mrr, want.mr);
        CHECK_NEAR(got.mrr, want.mrr, 1e-12);
        CHECK_NEAR(got.mr, want.mr, 1e-9);
        CHECK_NEAR(got.hits1, want.hits1, 1e-12);
        CHECK_NEAR(got.hits3, want.hits3, 1e-12);
        CHECK_NEAR(got.hits10, want.hits10, 1e-12);
        CHECK(got.count == NTEST && got.unseen == 0 && got.unknown == 0);
    }
    sg_kge_free(m);
    remove(tr);
    remove(te);
}

TEST(evaluator_matches_brute_force_distmult) { check_model(SG_KGE_DISTMULT, 0); }
TEST(evaluator_matches_brute_force_complex) { check_model(SG_KGE_COMPLEX, 0); }
TEST(evaluator_matches_brute_force_complex_reciprocal) { check_model(SG_KGE_COMPLEX, 1); }
TEST(evaluator_matches_brute_force_transe_l1) { check_model(SG_KGE_TRANSE_L1, 0); }
TEST(evaluator_matches_brute_force_transe_l2) { check_model(SG_KGE_TRANSE_L2, 1); }
TEST(evaluator_matches_brute_force_rotate) { check_model(SG_KGE_ROTATE, 0); }

/* TransE with e_i = (i, 0, ...) and r_j = (j + 1, 0, ...) on triples (i, j, i + j + 1):
 * h + r == t exactly, every other entity farther: every rank is 1. A valid-only entity
 * makes a test triple unseen; a name outside every file, unknown. */
TEST(planted_transe_ranks_first)
{
    const char *tr = tu_tmp_path("kge_plant_train.tsv"), *va = tu_tmp_path("kge_plant_valid.tsv"),
               *te = tu_tmp_path("kge_plant_test.tsv");
    FILE *f = fopen(tr, "w"), *g = fopen(te, "w");
    for (int i = 0; i < 30; i++)
        for (int j = 0; j < 3; j++) fprintf(i % 4 != 1 ? f : g, "e%d\tr%d\te%d\n", i, j, i + j + 1);
    for (int i = 30; i < 34; i++) fprintf(f, "e%d\tr0\te%d\n", i, i + 1);
    fprintf(g, "e34\tr1\te36\ne3\tr1\tnowhere\n");
    fclose(f);
    fclose(g);
    tu_write_bytes(va, "e34\tr1\te36\n", strlen("e34\tr1\te36\n"));
    sg_kge_opts o = sg_kge_opts_default(SG_KGE_TRANSE_L1);
    o.dim = 4;
    sg_kge *m = sg_kge_new(&o, NULL);
    CHECK(m && kge_prepare(m, tr, va, NULL, NULL) == 0);
    int64_t rows, cols, rrows, rcols;
    float *E = sg_kge_table(m, 0, &rows, &cols), *R = sg_kge_table(m, 1, &rrows, &rcols);
    memset(E, 0, (size_t)(rows * cols) * sizeof *E);
    memset(R, 0, (size_t)(rrows * rcols) * sizeof *R);
    for (int64_t i = 0; i < rows; i++) E[i * cols] = (float)atoi(sg_kge_entity_name(m, i) + 1);
    for (int64_t j = 0; j < rrows; j++) R[j * rcols] = (float)(atoi(sg_kge_relation_name(m, j) + 1) + 1);
    sg_kge_metrics got;
    CHECK(sg_kge_evaluate(m, te, NULL, 0, &got, NULL) == SG_OK);
    printf("  planted: mrr %g mr %g count %lld unseen %lld unknown %lld\n", got.mrr, got.mr, (long long)got.count,
           (long long)got.unseen, (long long)got.unknown);
    CHECK(got.mrr == 1.0 && got.hits1 == 1.0 && got.mr == 1.0);
    CHECK(got.count == 8 * 3 + 1 && got.unseen == 1 && got.unknown == 1);
    CHECK(sg_kge_entities(m) == 36 && sg_kge_find_entity(m, "nowhere") < 0); /* the evaluation added no row */
    sg_kge_free(m);
    remove(tr);
    remove(va);
    remove(te);
}

TEST_MAIN()
