/* Filtered ranking: each triple's tail query Q_t(h, r) and head query Q_h(r, t) (with
 * reciprocal relations Q_t(t, r + R)) scored against every entity, in blocks of
 * KGE_EVAL_BLOCK queries through the model's score path (kge_score_cross: one matrix
 * product against the transposed entity table for dot scores, sg_cdist for distances),
 * with gradients off. A query's rank is 1 + #(score > s_true) + #(score == s_true)/2 over
 * the other entities, the filter's known answers (sorted, distinct) left out; a NaN true
 * score ranks last. The counts of a block's queries run in parallel, each query's into
 * its own slot, and the metrics are summed in triple order: the same bits for any thread
 * count.
 */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The rank of s[truth] among s[0..n) with the sorted known answers filt[0..nf) (ids past
 * n are names the model has no row for) left out. */
static double rank_of(const float *s, int64_t n, int64_t truth, const int64_t *filt, int64_t nf)
{
    const float st = s[truth];
    if (isnan(st)) return (double)n;
    int64_t gt = 0, eq = 0;
    for (int64_t e = 0; e < n; e++) {
        gt += s[e] > st;
        eq += s[e] == st;
    }
    eq -= 1; /* the true entity itself */
    for (int64_t j = 0; j < nf; j++) {
        const int64_t e = filt[j];
        if (e == truth || e >= n) continue;
        gt -= s[e] > st;
        eq -= s[e] == st;
    }
    return 1.0 + (double)gt + 0.5 * (double)eq;
}

/* The transposed entity table (dim, n_ent), persistent, for dot scores; NULL otherwise or
 * on error (then *failed). */
static sg_tensor *entities_t(const kge_tables *t, bool *failed)
{
    *failed = false;
    if (kge_is_distance(t->model)) return NULL;
    const int64_t shape[2] = {t->dim, t->n_ent};
    sg_tensor *et = sg_tensor_new(t->ctx, SG_F32, 2, shape);
    if (!et) return *failed = true, NULL;
    const float *E = sg_tensor_f32(t->E);
    float *o = sg_tensor_f32(et);
    for (int64_t i = 0; i < t->n_ent; i++)
        for (int64_t d = 0; d < t->dim; d++) o[d * t->n_ent + i] = E[i * t->dim + d];
    return et;
}

/* One side of triples [lo, lo + B): queries, scores, ranks into ranks[2 i + side]. */
static int rank_block(const kge_tables *t, sg_tensor *et, const int64_t *h, const int64_t *r, const int64_t *tl,
                      int64_t lo, int64_t B, int side, const kg_filter *f, double *ranks)
{
    int64_t xs[KGE_EVAL_BLOCK], rs[KGE_EVAL_BLOCK];
    const bool recip_head = side == 1 && t->reciprocal;
    for (int64_t i = 0; i < B; i++) {
        xs[i] = side == 0 ? h[lo + i] : tl[lo + i];
        rs[i] = r[lo + i] + (recip_head ? t->n_rel : 0);
    }
    sg_tensor *x = sg_embedding(t->E, kge_index(t->ctx, xs, B), NULL);
    sg_tensor *rr = sg_embedding(t->R, kge_index(t->ctx, rs, B), NULL);
    sg_tensor *S = kge_score_cross(t, kge_query(t, x, rr, side == 1 && !t->reciprocal), t->E, et);
    const float *s = sg_tensor_f32(S);
    if (!s) return -1;
    const int64_t n = t->n_ent;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(sg_ctx_threads(t->ctx))
#endif
    for (int64_t i = 0; i < B; i++) {
        const int64_t *filt = NULL, j = lo + i;
        int64_t nf = 0;
        if (f && side == 0) kg_filter_tails(f, h[j], r[j], &filt, &nf);
        if (f && side == 1) kg_filter_heads(f, r[j], tl[j], &filt, &nf);
        ranks[2 * j + side] = rank_of(s + i * n, n, side == 0 ? tl[j] : h[j], filt, nf);
    }
    return 0;
}

int kge_rank_triples(const kge_tables *t, const int64_t *h, const int64_t *r, const int64_t *tl, int64_t n,
                     const kg_filter *f, double *ranks, sg_model_error *e)
{
    bool failed;
    sg_tensor *et = entities_t(t, &failed);
    const int was = sg_set_grad_enabled(t->ctx, 0);
    int rc = failed ? -1 : 0;
    for (int64_t lo = 0; !rc && lo < n; lo += KGE_EVAL_BLOCK) {
        const int64_t B = n - lo < KGE_EVAL_BLOCK ? n - lo : KGE_EVAL_BLOCK;
        for (int side = 0; !rc && side < 2; side++) {
            rc = rank_block(t, et, h, r, tl, lo, B, side, f, ranks);
            sg_tape_reset(t->ctx);
        }
    }
    sg_set_grad_enabled(t->ctx, was);
    sg_tensor_free(et);
    return rc ? tc_fail_ctx(e, t->ctx, "ranking failed: ") : 0;
}

void kge_metrics_of(const double *ranks, int64_t n, sg_kge_metrics *m)
{
    double rr = 0, mr = 0;
    int64_t h1 = 0, h3 = 0, h10 = 0;
    for (int64_t i = 0; i < 2 * n; i++) {
        rr += 1.0 / ranks[i];
        mr += ranks[i];
        h1 += ranks[i] <= 1;
        h3 += ranks[i] <= 3;
        h10 += ranks[i] <= 10;
    }
    const double k = n > 0 ? 2.0 * (double)n : NAN;
    m->mrr = rr / k;
    m->mr = mr / k;
    m->hits1 = (double)h1 / k;
    m->hits3 = (double)h3 / k;
    m->hits10 = (double)h10 / k;
    m->count = n;
}
