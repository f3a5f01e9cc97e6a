/* sg_sgns_loss: word2vec's negative-sampling objective as one op, forward and backward,
 * with an optional fused plain-SGD update of the output table.
 *
 * Invariants:
 * - The forward checks every target before it writes anything, and saves
 *   coef[i,j] = d loss / d (W[t_ij] . h_i) as a (B,T) tensor of h's dtype.
 * - The backward computes h's whole gradient from W before any row of W is written, so
 *   both gradients are taken at the forward's point (except in Hogwild mode).
 * - Deterministic mode: examples are split into fixed chunks (SGNS_GRAIN) and partial
 *   losses summed in chunk order; the fused update gives each thread the rows r with
 *   r % threads == its number and applies every row's contributions in entry order, so
 *   results are bitwise identical for any thread count.
 * - Hogwild mode (nondeterministic context, fused update): examples run in parallel and
 *   each updates the rows it touches at once, without locks; a row hit from two threads
 *   may lose an update, as in word2vec.c.
 */
#include "ops.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define SGNS_GRAIN 64 /* examples per chunk */

/* exp and log1p for the loop's float type */
#define SGNS_EXP(x) _Generic((x), float: expf, default: exp)(x)
#define SGNS_LOG1P(x) _Generic((x), float: log1pf, default: log1p)(x)

/* A dot product's reduction may be vectorised: its order is fixed at compile time. */
#ifdef _OPENMP
#define SGNS_PRAGMA(x) _Pragma(#x)
#define SGNS_SIMD_SUM(v) SGNS_PRAGMA(omp simd reduction(+ : v))
#else
#define SGNS_SIMD_SUM(v)
#endif

typedef struct {
    const sg_tensor *h, *W, *tg;
    sg_tensor *coef; /* (B,T) or NULL when no gradient is needed */
    sg_tensor *gh;   /* backward: h's gradient (B,D) or NULL */
    double *partial; /* forward: one loss partial per chunk */
    double scale;    /* backward: d loss (the incoming gradient); fused: times -lr */
    double lr_scale; /* backward, fused Hogwild: -lr * incoming gradient */
    int64_t B, T, D;
} sgns_job;

static void sgns_forward_range(void *ud, int64_t lo, int64_t hi)
{
    sgns_job *j = ud;
    const int64_t T = j->T, D = j->D;
    double acc = 0;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *h = j->h->data;
        const F *W = j->W->data;
        F *coef = j->coef ? j->coef->data : NULL;
        for (int64_t i = lo; i < hi; i++) {
            const F *hi_ = h + i * D;
            for (int64_t c = 0; c < T; c++) {
                const F *w = W + sg__idx_at(j->tg, i * T + c) * D;
                F s = 0;
                SGNS_SIMD_SUM(s)
                for (int64_t d = 0; d < D; d++) s += w[d] * hi_[d];
                /* e = exp(-|s|): sigmoid(|s|) = 1/(1+e), softplus(+-s) = max(+-s,0) + log1p(e) */
                F e = SGNS_EXP(s < 0 ? s : -s);
                F sig = s >= 0 ? (F)1 / ((F)1 + e) : e / ((F)1 + e); /* sigmoid(s) */
                F l1p = SGNS_LOG1P(e);
                if (c == 0) { /* -log sigmoid(s) = softplus(-s) */
                    acc += (double)((s < 0 ? -s : 0) + l1p);
                    if (coef) coef[i * T + c] = sig - (F)1;
                } else { /* -log sigmoid(-s) = softplus(s) */
                    acc += (double)((s > 0 ? s : 0) + l1p);
                    if (coef) coef[i * T + c] = sig;
                }
            }
        }
    });
    j->partial[lo / SGNS_GRAIN] = acc;
}

/* gh_i = scale * sum_c coef_ic W[t_ic] */
static void sgns_grad_h_range(void *ud, int64_t lo, int64_t hi)
{
    sgns_job *j = ud;
    const int64_t T = j->T, D = j->D;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *W = j->W->data;
        const F *coef = j->coef->data;
        F *gh = j->gh->data;
        for (int64_t i = lo; i < hi; i++) {
            F *g = gh + i * D;
            for (int64_t d = 0; d < D; d++) g[d] = 0;
            for (int64_t c = 0; c < T; c++) {
                const F *w = W + sg__idx_at(j->tg, i * T + c) * D;
                const F a = (F)(j->scale * (double)coef[i * T + c]);
                for (int64_t d = 0; d < D; d++) g[d] += a * w[d];
            }
        }
    });
}

/* Hogwild: per example, h's gradient from the current rows, then the rows' update. */
static void sgns_hogwild_range(void *ud, int64_t lo, int64_t hi)
{
    sgns_job *j = ud;
    const int64_t T = j->T, D = j->D;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *h = j->h->data;
        const F *coef = j->coef->data;
        F *W = j->W->data;
        F *gh = j->gh ? j->gh->data : NULL;
        for (int64_t i = lo; i < hi; i++) {
            const F *hi_ = h + i * D;
            F *g = gh ? gh + i * D : NULL;
            if (g)
                for (int64_t d = 0; d < D; d++) g[d] = 0;
            for (int64_t c = 0; c < T; c++) {
                F *w = W + sg__idx_at(j->tg, i * T + c) * D;
                const F cf = coef[i * T + c];
                if (g) {
                    const F a = (F)(j->scale * (double)cf);
                    for (int64_t d = 0; d < D; d++) g[d] += a * w[d];
                }
                const F u = (F)(j->lr_scale * (double)cf);
                for (int64_t d = 0; d < D; d++) w[d] += u * hi_[d];
            }
        }
    });
}

/* Deterministic fused update: thread `part` of `parts` applies, in entry order, the
 * entries whose row r has r % parts == part. */
static void sgns_fused_rows(const sgns_job *j, int part, int parts)
{
    const int64_t n = j->B * j->T, D = j->D;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *h = j->h->data;
        const F *coef = j->coef->data;
        F *W = j->W->data;
        for (int64_t e = 0; e < n; e++) {
            int64_t r = sg__idx_at(j->tg, e);
            if (parts > 1 && r % parts != part) continue;
            F *w = W + r * D;
            const F *x = h + (e / j->T) * D;
            const F u = (F)(j->lr_scale * (double)coef[e]);
            for (int64_t d = 0; d < D; d++) w[d] += u * x[d];
        }
    });
}

/* values (B*T, D): row e = scale * coef_e * h_{e / T} */
static void sgns_coo_values_range(void *ud, int64_t lo, int64_t hi)
{
    sgns_job *j = ud;
    const int64_t T = j->T, D = j->D;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *h = j->h->data;
        const F *coef = j->coef->data;
        F *v = j->gh->data; /* reused as the values buffer */
        for (int64_t i = lo; i < hi; i++)
            for (int64_t c = 0; c < T; c++) {
                const F a = (F)(j->scale * (double)coef[i * T + c]);
                const F *x = h + i * D;
                F *o = v + (i * T + c) * D;
                for (int64_t d = 0; d < D; d++) o[d] = a * x[d];
            }
    });
}

/* W's COO gradient: indices (1, B*T) are the targets (a view for int64 targets). */
static sg_tensor *sgns_coo_grad(sgns_job *j)
{
    sg_ctx *ctx = j->W->ctx;
    const int64_t n = j->B * j->T;
    int64_t ishape[2] = {1, n}, vshape[2] = {n, j->D};
    sg_tensor *idx;
    if (j->tg->dtype == SG_I64) {
        idx = sg__view(ctx, SG_I64, 2, ishape, j->tg->data);
    } else {
        idx = sg__tmp(ctx, SG_I64, 2, ishape, false);
        if (idx) {
            int64_t *o = idx->data;
            for (int64_t e = 0; e < n; e++) o[e] = sg__idx_at(j->tg, e);
        }
    }
    sg_tensor *vals = sg__tmp(ctx, j->W->dtype, 2, vshape, false);
    if (!idx || !vals) return NULL;
    j->gh = vals;
    sg__op_parallel(ctx, j->B, SGNS_GRAIN, sgns_coo_values_range, j);
    return sg__coo_wrap(ctx, 2, j->W->shape, 1, idx, vals, false);
}

static int sgns_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *h = n->in[0], *W = n->in[1], *tg = n->in[2];
    sg_ctx *ctx = h->ctx;
    const double g = sg_tensor_get(gout, 0);
    const double lr = n->scalar[0];
    sgns_job j = {.h = h, .W = W, .tg = tg, .coef = n->saved[0], .scale = g,
                  .lr_scale = -lr * g, .B = h->shape[0], .T = tg->shape[1], .D = h->shape[1]};
    const bool fused = lr > 0 && W->requires_grad;
    sg_tensor *gh = NULL;
    if (sg__wants_grad(h)) {
        gh = sg__tmp_like(h, false);
        if (!gh) return sg__op_status(ctx);
        j.gh = gh;
    }
    if (fused && ctx->nondeterministic) {
        sg__op_parallel(ctx, j.B, SGNS_GRAIN, sgns_hogwild_range, &j);
    } else {
        if (gh) sg__op_parallel(ctx, j.B, SGNS_GRAIN, sgns_grad_h_range, &j);
        if (fused) {
            int parts = sg__threads(ctx);
            if (parts > 1 && j.B * j.T >= 4 * SGNS_GRAIN) {
#ifdef _OPENMP
#pragma omp parallel num_threads(parts)
                sgns_fused_rows(&j, omp_get_thread_num(), omp_get_num_threads());
#else
                sgns_fused_rows(&j, 0, 1);
#endif
            } else {
                sgns_fused_rows(&j, 0, 1);
            }
        } else if (sg__wants_grad(W)) {
            sgns_job jc = j;
            sg_tensor *gw = sgns_coo_grad(&jc);
            if (!gw) return sg__op_status(ctx);
            int rc = sg__accum_grad(W, gw, true);
            if (rc) return rc;
        }
    }
    if (gh) return sg__accum_grad(h, gh, true);
    return SG_OK;
}

sg_tensor *sg_sgns_loss(sg_tensor *h, sg_tensor *W, sg_tensor *targets,
                        const sg_sgns_opts *opts)
{
    static const char op[] = "sg_sgns_loss";
    SG__CHECK_NOTNULL(h);
    SG__CHECK_NOTNULL(W);
    SG__CHECK_NOTNULL(targets);
    sg_ctx *ctx = h->ctx;
    if (!sg__op_check_float(op, h) || !sg__op_check_float(op, W) ||
        !sg__op_check_pair(op, h, W) || !sg__op_check_dense(op, targets))
        return NULL;
    if (targets->ctx != ctx) return sg__fail(ctx, SG_ERR_ARG, "%s: operands belong to different contexts", op);
    if (!sg__is_int(targets->dtype))
        return sg__fail(ctx, SG_ERR_DTYPE, "%s: targets are %s, i32 or i64 expected", op,
                        sg__op_dtype_name(targets->dtype));
    char sh[96], sw[96], st[96];
    if (h->ndim != 2 || W->ndim != 2 || targets->ndim != 2 || h->shape[1] != W->shape[1] ||
        targets->shape[0] != h->shape[0] || targets->shape[1] < 1)
        return sg__fail(ctx, SG_ERR_SHAPE,
                        "%s: h %s, W %s, targets %s; expected (B,D), (V,D), (B,T) with T >= 1",
                        op, sg__shape_str(h, sh, sizeof sh), sg__shape_str(W, sw, sizeof sw),
                        sg__shape_str(targets, st, sizeof st));
    double lr = opts ? opts->fused_sgd_lr : 0;
    if (!(lr >= 0) || isinf(lr))
        return sg__fail(ctx, SG_ERR_VALUE, "%s: fused_sgd_lr = %g must be finite and >= 0", op, lr);
    const int64_t B = h->shape[0], T = targets->shape[1], V = W->shape[0];
    for (int64_t e = 0; e < B * T; e++) {
        int64_t r = sg__idx_at(targets, e);
        if (r < 0 || r >= V)
            return sg__fail(ctx, SG_ERR_INDEX, "%s: targets[%lld][%lld] = %lld out of range [0, %lld)",
                            op, (long long)(e / T), (long long)(e % T), (long long)r, (long long)V);
    }

    sg_tensor *ins[3] = {h, W, targets};
    const bool grad = sg__needs_grad(ctx, 3, ins);
    sg_tensor *out = sg__tmp(ctx, h->dtype, 0, NULL, false);
    const int64_t chunks = (B + SGNS_GRAIN - 1) / SGNS_GRAIN;
    double *partial = sg__arena_alloc(ctx, (size_t)(chunks > 0 ? chunks : 1) * sizeof *partial);
    int64_t cshape[2] = {B, T};
    sg_tensor *coef = grad ? sg__tmp(ctx, h->dtype, 2, cshape, false) : NULL;
    if (!out || !partial || (grad && !coef)) return NULL;

    sgns_job j = {.h = h, .W = W, .tg = targets, .coef = coef, .partial = partial,
                  .B = B, .T = T, .D = h->shape[1]};
    sg__op_parallel(ctx, B, SGNS_GRAIN, sgns_forward_range, &j);
    double loss = 0;
    for (int64_t c = 0; c < chunks; c++) loss += partial[c];
    SG__DISPATCH_FLOAT(out->dtype, F, { *(F *)out->data = (F)loss; });

    if (grad) {
        sg_node *n = sg__node_new(ctx, sgns_backward, "sgns_loss", out, 3, ins);
        if (!n) return NULL;
        n->saved[0] = coef;
        n->scalar[0] = lr;
    }
    return out;
}
