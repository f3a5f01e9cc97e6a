/* The query module of libsgrad_models (models/w2v/query.c, through sg_w2v_evaluate): nearest neighbours with k = 0 write
 * nothing, a query of subnormal values gives finite cosines, and the analogy benchmark
 * scores every covered question whatever the vectors' dimension (answers worked out by
 * hand from vectors built on basis directions). */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <unistd.h>

#include "w2v/w2v.h"

TEST(nearest_with_k_zero_finds_nothing_and_writes_nothing)
{
    const float unit[3 * 2] = {1, 0, 0, 1, 0.6f, 0.8f};
    const float q[2] = {1, 0};
    int64_t best[4] = {-7, -7, -7, -7};
    float sims[4] = {-7, -7, -7, -7};
    CHECK(w2v_nearest(unit, 3, 2, q, NULL, 0, 0, best + 1, sims + 1) == 0);
    CHECK(w2v_nearest(unit, 3, 2, q, NULL, 0, -3, best + 1, sims + 1) == 0);
    for (int i = 0; i < 4; i++) CHECK(best[i] == -7 && sims[i] == -7);
    /* and k = 1 still answers: row 0 itself, then row 2 when row 0 is excluded */
    CHECK(w2v_nearest(unit, 3, 2, q, NULL, 0, 1, best, NULL) == 1 && best[0] == 0);
    const int64_t ex = 0;
    CHECK(w2v_nearest(unit, 3, 2, q, &ex, 1, 1, best, NULL) == 1 && best[0] == 2);
}

TEST(nearest_with_a_tiny_query_gives_finite_cosines)
{
    /* query (1e-45, 0), a subnormal float: its direction is e1, so the cosines with the
     * rows e1, e2 and the zero row are 1, 0 and 0 (1 / its norm overflows a float) */
    const float unit[3 * 2] = {1, 0, 0, 1, 0, 0};
    const float q[2] = {1e-45f, 0};
    int64_t best[3];
    float sims[3];
    CHECK(w2v_nearest(unit, 3, 2, q, NULL, 0, 3, best, sims) == 3);
    CHECK(best[0] == 0 && fabsf(sims[0] - 1) < 1e-6f);
    CHECK(sims[1] == 0 && sims[2] == 0);
}

TEST(evaluate_scores_questions_of_any_dimension)
{
    /* D = 1100, beyond any fixed query buffer. Words on basis directions e_k (k spread
     * past 1024): a = e_1030, b = e_3, c = e_1090, d = (b - a + c) / sqrt(3),
     * e = e_500. For "a b c ?", 3CosAdd gives d (cosine 1); e scores 0. So of the
     * questions "a b c d" and "a b c e", one is right; "a b c zzz" is not covered. */
    enum { D = 1100 };
    const int dir[5][3] = {{1030, -1, -1}, {3, -1, -1}, {1090, -1, -1}, {3, 1090, 1030}, {500, -1, -1}};
    const char *words[5] = {"a", "b", "c", "d", "e"};
    char vpath[256], qpath[256];
    snprintf(vpath, sizeof vpath, "/tmp/sgrad_test_w2v_query_vec_%d", (int)getpid());
    snprintf(qpath, sizeof qpath, "/tmp/sgrad_test_w2v_query_q_%d", (int)getpid());
    FILE *f = fopen(vpath, "w");
    fprintf(f, "5 %d\n", D);
    for (int w = 0; w < 5; w++) {
        fputs(words[w], f);
        for (int k = 0; k < D; k++) {
            double v = 0;
            if (k == dir[w][0] || k == dir[w][1]) v = 1;
            if (k == dir[w][2]) v = -1; /* d = e_3 + e_1090 - e_1030 */
            fprintf(f, " %g", v);
        }
        fputc('\n', f);
    }
    fclose(f);
    f = fopen(qpath, "w");
    fputs(": one section\na b c d\nA B C E\na b c zzz\n", f);
    fclose(f);
    sg_w2v *m = sg_w2v_load_vectors(vpath, -1, NULL);
    CHECK(m != NULL);
    sg_w2v_eval res;
    CHECK(sg_w2v_evaluate(m, qpath, 0, &res, NULL) == SG_OK);
    CHECK(res.questions == 3);
    CHECK(res.covered == 2);
    CHECK(res.correct == 1);
    CHECK(res.n_sections == 1 && res.sections[0].total == 3 && res.sections[0].covered == 2);
    sg_w2v_eval_free(&res);
    sg_w2v_free(m);
    remove(vpath);
    remove(qpath);
}

TEST_MAIN()
