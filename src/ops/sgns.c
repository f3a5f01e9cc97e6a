/* sg_sgns_loss: word2vec's negative-sampling objective as one op, forward and backward,
 * with an optional fused plain-SGD update of the output table.
 *
 * Invariants:
 * - The forward checks every target before it writes anything. When a gradient will be
 *   needed it saves coef[i,j] = d loss / d (W[t_ij] . h_i) (B,T) and, if h needs one,
 *   hdir[i] = sum_j coef[i,j] W[t_ij] (B,D) while the rows are in cache: h's gradient is
 *   the incoming gradient times hdir, taken at the forward's point.
 * - The backward writes W only after everything it reads from W was read (in the
 *   forward), so W's update is the gradient at the forward's point too.
 * - Deterministic mode: examples are split into fixed chunks (SGNS_GRAIN), the loss is
 *   summed per chunk then over chunks in order; the fused update gives each thread a
 *   fixed share of the rows (by a hash of the row) and applies each row's contributions
 *   in entry order, so results are bitwise identical for any thread count.
 * - Hogwild mode (nondeterministic context, fused update): chunks of examples update
 *   their rows in parallel without locks; a row hit from two threads at once may lose an
 *   update, as in word2vec.c. With one thread it equals deterministic mode.
 */
#include "ops/ops.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define SGNS_GRAIN 64 /* examples per chunk */

#define SGNS_EXP(x) _Generic((x), float: expf, default: exp)(x)

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
    sg_tensor *hdir; /* (B,D) or NULL when h needs no gradient */
    sg_tensor *out;  /* backward: h's gradient, or W's COO values (B*T,D) */
    double *partial; /* forward: one loss partial per chunk */
    double scale;    /* backward: the incoming gradient */
    double lr_scale; /* backward, fused: -lr * incoming gradient */
    int64_t B, T, D;
} sgns_job;

/* loss_i = sum_j softplus(-+s_ij) = sum_j max(-+s_ij, 0) + log prod_j (1 + exp(-|s_ij|)):
 * one log per example; the product is kept below 2^1000 by flushing it into the sum. */
static void sgns_forward_range(void *ud, int64_t lo, int64_t hi)
{
    sgns_job *j = ud;
    const int64_t T = j->T, D = j->D;
    double acc = 0;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *h = j->h->data;
        const F *W = j->W->data;
        F *coef = j->coef ? j->coef->data : NULL;
        F *hdir = j->hdir ? j->hdir->data : NULL;
        for (int64_t i = lo; i < hi; i++) {
            const F *x = h + i * D;
            F *g = hdir ? hdir + i * D : NULL;
            if (g)
                for (int64_t d = 0; d < D; d++) g[d] = 0;
            double prod = 1;
            for (int64_t c = 0; c < T; c++) {
                const F *w = W + sg__idx_at(j->tg, i * T + c) * D;
                F s = 0;
                SGNS_SIMD_SUM(s)
                for (int64_t d = 0; d < D; d++) s += w[d] * x[d];
                const F e = SGNS_EXP(s < 0 ? s : -s); /* exp(-|s|) */
                const F sig = s >= 0 ? (F)1 / ((F)1 + e) : e / ((F)1 + e); /* sigmoid(s) */
                prod *= 1 + (double)e;
                if (prod > 1e300) {
                    acc += log(prod);
                    prod = 1;
                }
                F cf;
                if (c == 0) { /* -log sigmoid(s) */
                    acc += s < 0 ? -(double)s : 0;
                    cf = sig - (F)1;
                } else { /* -log sigmoid(-s) */
                    acc += s > 0 ? (double)s : 0;
                    cf = sig;
                }
                if (coef) coef[i * T + c] = cf;
                if (g)
                    for (int64_t d = 0; d < D; d++) g[d] += cf * w[d];
            }
            acc += log(prod);
        }
    });
    j->partial[lo / SGNS_GRAIN] = acc;
}

/* out = scale * hdir */
static void sgns_scale_range(void *ud, int64_t lo, int64_t hi)
{
    sgns_job *j = ud;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *src = j->hdir->data;
        F *dst = j->out->data;
        const F a = (F)j->scale;
        for (int64_t k = lo * j->D; k < hi * j->D; k++) dst[k] = a * src[k];
    });
}

/* Hogwild: the examples of [lo, hi) update their rows in place, in order. */
static void sgns_hogwild_range(void *ud, int64_t lo, int64_t hi)
{
    sgns_job *j = ud;
    const int64_t T = j->T, D = j->D;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *h = j->h->data;
        const F *coef = j->coef->data;
        F *W = j->W->data;
        for (int64_t i = lo; i < hi; i++)
            for (int64_t e = i * T; e < (i + 1) * T; e++) {
                F *w = W + sg__idx_at(j->tg, e) * D;
                const F *x = h + i * D;
                const F u = (F)(j->lr_scale * (double)coef[e]);
                for (int64_t d = 0; d < D; d++) w[d] += u * x[d];
            }
    });
}

/* The part (of `parts`) that owns row r in the deterministic fused update: a
 * multiplicative hash, so that the frequent rows (low numbers in word2vec's tables) are
 * spread over the parts and no division sits in the loop. */
static inline uint32_t sgns_part(int64_t r, uint32_t parts)
{
    return (uint32_t)(((uint64_t)((uint32_t)r * 2654435761u) * parts) >> 32);
}

/* Deterministic fused update: part `part` of `parts` applies, in entry order, the
 * entries whose row it owns. */
static void sgns_fused_rows(const sgns_job *j, int part, int parts)
{
    const int64_t T = j->T, D = j->D;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *h = j->h->data;
        const F *coef = j->coef->data;
        F *W = j->W->data;
        for (int64_t i = 0; i < j->B; i++)
            for (int64_t e = i * T; e < (i + 1) * T; e++) {
                int64_t r = sg__idx_at(j->tg, e);
                if (parts > 1 && sgns_part(r, (uint32_t)parts) != (uint32_t)part) continue;
                F *w = W + r * D;
                const F *x = h + i * D;
                const F u = (F)(j->lr_scale * (double)coef[e]);
                for (int64_t d = 0; d < D; d++) w[d] += u * x[d];
            }
    });
}

/* W's COO values (B*T, D): row e = scale * coef_e * h_{e / T} */
static void sgns_coo_values_range(void *ud, int64_t lo, int64_t hi)
{
    sgns_job *j = ud;
    const int64_t T = j->T, D = j->D;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *h = j->h->data;
        const F *coef = j->coef->data;
        F *v = j->out->data;
        for (int64_t i = lo; i < hi; i++)
            for (int64_t e = i * T; e < (i + 1) * T; e++) {
                const F a = (F)(j->scale * (double)coef[e]);
                const F *x = h + i * D;
                F *o = v + e * D;
                for (int64_t d = 0; d < D; d++) o[d] = a * x[d];
            }
    });
}

/* W's COO gradient: indices (1, B*T) are the targets (a view for int64 targets). */
static sg_tensor *sgns_coo_grad(sgns_job *j)
{
    sg_ctx *ctx = j->W->ctx;
    const int64_t n = j->B * j->T;
    int64_t vshape[2] = {n, j->D};
    sg_tensor *idx = sg__index_row_i64(j->tg);
    j->out = sg__tmp(ctx, j->W->dtype, 2, vshape, false);
    if (!idx || !j->out) return NULL;
    sg__parallel_for(ctx, j->B, SGNS_GRAIN, sgns_coo_values_range, j);
    return sg__coo_wrap(ctx, 2, j->W->shape, 1, idx, j->out, false);
}

/* The job of a recorded node for an incoming loss gradient g. */
static sgns_job sgns_job_of(sg_node *n, double g)
{
    sg_tensor *h = n->in[0], *W = n->in[1], *tg = n->in[2];
    return (sgns_job){.h = h, .W = W, .tg = tg, .coef = n->saved[0], .hdir = n->saved[1],
                      .scale = g, .lr_scale = -n->scalar[0] * g, .B = h->shape[0],
                      .T = tg->shape[1], .D = h->shape[1]};
}

/* The fused SGD update of W, deferred until the whole backward has run (sg__defer), so
 * that other nodes' backwards read W as the forward saw it and a failed backward leaves
 * W unchanged. */
static int sgns_apply_fused(sg_node *n, sg_tensor *gout)
{
    sg_ctx *ctx = n->out->ctx;
    sgns_job j = sgns_job_of(n, sg_tensor_get(gout, 0));
    const int parts = sg__threads(ctx);
    if (ctx->nondeterministic) {
        sg__parallel_for(ctx, j.B, SGNS_GRAIN, sgns_hogwild_range, &j);
    } else if (parts > 1 && j.B * j.T >= 4 * SGNS_GRAIN) {
#ifdef _OPENMP
#pragma omp parallel num_threads(parts)
        sgns_fused_rows(&j, omp_get_thread_num(), omp_get_num_threads());
#else
        sgns_fused_rows(&j, 0, 1);
#endif
    } else {
        sgns_fused_rows(&j, 0, 1);
    }
    return SG_OK;
}

static int sgns_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *h = n->in[0], *W = n->in[1];
    sg_ctx *ctx = h->ctx;
    const double g = sg_tensor_get(gout, 0);
    sgns_job j = sgns_job_of(n, g);
    if (n->scalar[0] > 0 && W->requires_grad) {
        int rc = sg__defer(n, sgns_apply_fused, gout);
        if (rc) return rc;
    } else if (sg__wants_grad(W)) {
        sg_tensor *gw = sgns_coo_grad(&j);
        if (!gw) return sg__status_or_nomem(ctx);
        int rc = sg__accum_grad(W, gw, true);
        if (rc) return rc;
    }
    if (sg__wants_grad(h) && j.hdir) {
        if (g == 1.0) return sg__accum_grad(h, j.hdir, false);
        j.out = sg__tmp_like(h, false);
        if (!j.out) return sg__status_or_nomem(ctx);
        sg__parallel_for(ctx, j.B, SGNS_GRAIN, sgns_scale_range, &j);
        return sg__accum_grad(h, j.out, true);
    }
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
    if (targets->ctx != ctx)
        return sg__fail(ctx, SG_ERR_ARG, "%s: operands belong to different contexts", op);
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
    /* The fused update writes W in place instead of giving it a gradient: W must be the
     * tensor that owns the gradient. */
    if (lr > 0 && (W->node || !W->requires_grad))
        return sg__fail(ctx, SG_ERR_ARG, "%s: a fused update needs W to be a leaf that requires grad",
                        op);
    /* ... and h must not be W's memory, which the update writes while it reads h. */
    const size_t esz = sg_dtype_size(W->dtype);
    const char *hb = h->data, *wb = W->data;
    if (lr > 0 && hb < wb + (size_t)W->numel * esz && wb < hb + (size_t)h->numel * esz)
        return sg__fail(ctx, SG_ERR_ARG, "%s: a fused update needs h outside W's memory", op);
    const int64_t B = h->shape[0], T = targets->shape[1], V = W->shape[0];
    for (int64_t e = 0; e < B * T; e++) {
        int64_t r = sg__idx_at(targets, e);
        if (r < 0 || r >= V)
            return sg__fail(ctx, SG_ERR_INDEX,
                            "%s: targets[%lld][%lld] = %lld out of range [0, %lld)", op,
                            (long long)(e / T), (long long)(e % T), (long long)r, (long long)V);
    }

    sg_tensor *ins[3] = {h, W, targets};
    const bool grad = sg__needs_grad(ctx, 3, ins);
    sg_tensor *out = sg__tmp(ctx, h->dtype, 0, NULL, false);
    const int64_t chunks = (B + SGNS_GRAIN - 1) / SGNS_GRAIN;
    double *partial = sg__arena_alloc(ctx, (size_t)(chunks > 0 ? chunks : 1) * sizeof *partial);
    int64_t cshape[2] = {B, T};
    sg_tensor *coef = grad ? sg__tmp(ctx, h->dtype, 2, cshape, false) : NULL;
    sg_tensor *hdir = grad && sg__wants_grad(h) ? sg__tmp_like(h, false) : NULL;
    if (!out || !partial || (grad && !coef) || (grad && sg__wants_grad(h) && !hdir))
        return NULL;

    sgns_job j = {.h = h, .W = W, .tg = targets, .coef = coef, .hdir = hdir,
                  .partial = partial, .B = B, .T = T, .D = h->shape[1]};
    sg__parallel_for(ctx, B, SGNS_GRAIN, sgns_forward_range, &j);
    double loss = 0;
    for (int64_t c = 0; c < chunks; c++) loss += partial[c];
    SG__DISPATCH_FLOAT(out->dtype, F, { *(F *)out->data = (F)loss; });

    if (grad) {
        sg_node *n = sg__node_new(ctx, sgns_backward, "sgns_loss", out, 3, ins);
        if (!n) return NULL;
        n->saved[0] = coef;
        n->saved[1] = hdir;
        n->scalar[0] = lr;
    }
    return out;
}
