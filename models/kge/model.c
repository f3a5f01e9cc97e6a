/* The tables of a model and the score path of every model, built from sgrad ops so that
 * training (on the tape) and ranking (grad disabled) score through the same code:
 * a query q = Q_t(h, r) or Q_h(r, t), then sim(q, e) for one row per query
 * (kge_score_rows) or for every query against shared candidates (kge_score_cross: a
 * matrix product for dot scores, sg_cdist for distances).
 *
 * Layouts: entity rows have dim reals; complex-valued rows (complex, rotate) hold K real
 * parts then K imaginary parts (dim = 2K). Relation rows: dim reals, or rotate's K phases,
 * turned into [cos theta | sin theta] before the complex product.
 */
#include "engine.h"

#include <math.h>
#include <string.h>

#define KGE_PI 3.14159265358979323846

void kge_tables_free(kge_tables *t)
{
    if (!t) return;
    sg_ctx_free(t->ctx);
    memset(t, 0, sizeof *t);
}

int kge_tables_alloc(kge_tables *t, const sg_kge_opts *o, int64_t n_ent, int64_t n_rel, int threads,
                     sg_model_error *e)
{
    memset(t, 0, sizeof *t);
    t->model = o->model;
    t->reciprocal = o->reciprocal != 0;
    t->n_ent = n_ent;
    t->n_rel = n_rel;
    t->dim = o->dim;
    t->rrows = t->reciprocal ? 2 * n_rel : n_rel;
    t->rdim = o->model == SG_KGE_ROTATE ? o->dim / 2 : o->dim;
    t->ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads, .seed = o->seed ? o->seed : 1});
    if (!t->ctx) return tc_fail(e, SG_ERR_NOMEM, "out of memory");
    const int64_t es[2] = {n_ent, t->dim}, rs[2] = {t->rrows, t->rdim};
    t->E = sg_tensor_requires_grad(sg_tensor_new(t->ctx, SG_F32, 2, es), 1);
    t->R = sg_tensor_requires_grad(sg_tensor_new(t->ctx, SG_F32, 2, rs), 1);
    if (!t->E || !t->R) {
        tc_fail_ctx(e, t->ctx, "cannot make the tables: ");
        kge_tables_free(t);
        return -1;
    }
    return 0;
}

/* x[0..n) uniform in [lo, hi) from stream r. */
static void fill_uniform(float *x, int64_t n, double lo, double hi, tc_rng *r)
{
    for (int64_t i = 0; i < n; i++) {
        const double u = (double)(tc_rng_next(r) >> 11) * 0x1.0p-53;
        x[i] = (float)(lo + (hi - lo) * u);
    }
}

int kge_tables_init(kge_tables *t, const sg_kge_opts *o, int64_t n_ent, int64_t n_rel, sg_model_error *e)
{
    if (kge_tables_alloc(t, o, n_ent, n_rel, o->threads, e)) return -1;
    tc_rng re = kge_stream(o->seed, KGE_STREAM_INIT, 0, 0, 0), rr = kge_stream(o->seed, KGE_STREAM_INIT, 1, 0, 0);
    const double s = kge_init_scale(o);
    fill_uniform(sg_tensor_f32(t->E), t->n_ent * t->dim, -s, s, &re);
    if (o->model == SG_KGE_ROTATE) fill_uniform(sg_tensor_f32(t->R), t->rrows * t->rdim, -KGE_PI, KGE_PI, &rr);
    else fill_uniform(sg_tensor_f32(t->R), t->rrows * t->rdim, -s, s, &rr);
    return 0;
}

sg_tensor *kge_index(sg_ctx *ctx, const int64_t *idx, int64_t n)
{
    sg_tensor *x = sg_tensor_new_tmp(ctx, SG_I64, 1, &n);
    if (x && n) memcpy(sg_tensor_data(x), idx, (size_t)n * sizeof *idx);
    return x;
}

/* Rotate's relation rows: phases (M,K) -> [cos | sin] (M,2K). sg_concat joins along dim
 * 0, so the halves are joined transposed. */
static sg_tensor *rotation(sg_tensor *theta)
{
    sg_tensor *halves[2] = {sg_transpose(sg_cos(theta), 0, 1), sg_transpose(sg_sin(theta), 0, 1)};
    if (!halves[0] || !halves[1]) return NULL;
    return sg_transpose(sg_concat(2, halves), 0, 1);
}

sg_tensor *kge_query(const kge_tables *t, sg_tensor *x, sg_tensor *r, bool head_side)
{
    switch (t->model) {
    case SG_KGE_TRANSE_L1:
    case SG_KGE_TRANSE_L2: return head_side ? sg_sub(x, r) : sg_add(x, r);
    case SG_KGE_DISTMULT: return sg_mul(x, r);
    case SG_KGE_COMPLEX: return sg_complex_mul(x, r, head_side);
    case SG_KGE_ROTATE: return sg_complex_mul(x, rotation(r), head_side);
    }
    return NULL;
}

/* The distance of a distance model's sim. */
static sg_dist_kind dist_kind(sg_kge_model m)
{
    return m == SG_KGE_TRANSE_L1 ? SG_DIST_L1 : m == SG_KGE_TRANSE_L2 ? SG_DIST_L2 : SG_DIST_COMPLEX;
}

sg_tensor *kge_score_rows(const kge_tables *t, sg_tensor *q, sg_tensor *e)
{
    if (!kge_is_distance(t->model)) return sg_rowdot(q, e);
    return sg_scale(sg_rowdist(q, e, dist_kind(t->model)), -1.0);
}

sg_tensor *kge_score_cross(const kge_tables *t, sg_tensor *q, sg_tensor *n, sg_tensor *et)
{
    if (!kge_is_distance(t->model)) return sg_matmul(q, et ? et : sg_transpose(n, 0, 1));
    return sg_scale(sg_cdist(q, n, dist_kind(t->model)), -1.0);
}

sg_tensor *kge_n3(const kge_tables *t, sg_tensor *x, bool entity)
{
    if (!entity && t->model == SG_KGE_ROTATE) return NULL; /* phases are not regularised */
    if (!kge_is_complex(t->model)) return sg_sum(sg_pow(sg_abs(x), 3.0));
    const int64_t K = t->dim / 2;
    sg_tensor *re = sg_narrow(x, 1, 0, K), *im = sg_narrow(x, 1, K, K);
    /* |x_k|^3 = (re^2 + im^2)^1.5, whose gradient is 0 where the modulus is */
    return sg_sum(sg_pow(sg_add(sg_mul(re, re), sg_mul(im, im)), 1.5));
}
