/* sg_sgns_loss: word2vec's negative-sampling objective as one op, forward and backward,
 * with an optional fused optimizer update of the output table.
 *
 * Invariants:
 * - The forward checks every target before it writes anything. When a gradient will be
 *   needed it saves coef[i,j] = d loss / d (W[t_ij] . h_i) (B,T) and, if h needs one,
 *   hdir[i] = sum_j coef[i,j] W[t_ij] (B,D) while the rows are in cache: h's gradient is
 *   the incoming gradient times hdir, taken at the forward's point.
 * - W's gradient rows are g * coef[e] * h[e / T]; fused, they go to the optimizer's row
 *   kernel in that factored form (sg__fused_rows), deferred until the whole backward has
 *   run. The update writes W only after everything read from W was read (in the forward),
 *   so it is the gradient at the forward's point too; h must lie outside W's memory.
 * - Latency: the forward prefetches the output row of the target SG__SGNS_AHEAD entries
 *   ahead, and the fused SGD update (the optimizer's kernel) does the same for the rows it
 *   writes; prefetches change no result.
 * - Deterministic: examples are split into fixed chunks (the grain policy), the loss is
 *   summed per chunk then over chunks in order, so it is bitwise the same for any thread
 *   count; the fused update's determinism is the optimizer's (plain SGD: any thread count
 *   gives the same bits; Hogwild-style with a nondeterministic context). Its kernels have a
 *   variant per CPU level (SG__HOT_CLONES, core/core.h) and the dot product keeps 16 lanes
 *   (SGNS_DOT), so every variant, and a -march=native build, gives the same bits too.
 */
#include "ops/ops.h"

#include <math.h>

#define SGNS_EXP(x) _Generic((x), float: expf, default: exp)(x)

/* The dot product w . x of D terms: term d goes to lane d % SGNS_LANES, and the lanes are
 * added in a fixed tree, so the compiler vectorises it (16 floats are four SSE, two AVX2
 * or one AVX-512 register) and the result is the same bits at every vector width, hence
 * in every CPU variant of the kernel (SG__HOT_CLONES) and in a -march=native build. (An
 * `omp simd` reduction, used before, summed in as many lanes as the width it was
 * compiled for: the portable and the native build differed in the last bits.) */
#define SGNS_LANES 16 /* the tree below is written for 16 */
#define SGNS_DOT(F, w, x, D, out)                                                 \
    do {                                                                         \
        F acc_[SGNS_LANES] = {0};                                                \
        int64_t d_ = 0;                                                          \
        for (; d_ + SGNS_LANES <= (D); d_ += SGNS_LANES)                          \
            for (int k_ = 0; k_ < SGNS_LANES; k_++) acc_[k_] += (w)[d_ + k_] * (x)[d_ + k_]; \
        for (int k_ = 0; d_ + k_ < (D); k_++) acc_[k_] += (w)[d_ + k_] * (x)[d_ + k_];   \
        for (int k_ = 0; k_ < 8; k_++) acc_[k_] += acc_[k_ + 8];                 \
        for (int k_ = 0; k_ < 4; k_++) acc_[k_] += acc_[k_ + 4];                 \
        for (int k_ = 0; k_ < 2; k_++) acc_[k_] += acc_[k_ + 2];                 \
        (out) = acc_[0] + acc_[1];                                               \
    } while (0)

/* Target entries ahead at which the forward prefetches the output row it will read (a
 * large vocabulary's rows come from memory; the prefetches overlap those misses), and the
 * most bytes of a row it prefetches (the hardware streams the rest of a wide row). */
#define SG__SGNS_AHEAD 8
#define SG__SGNS_PREFETCH_MAX 1024

typedef struct {
    const sg_tensor *h, *W, *tg;
    sg_tensor *coef; /* (B,T) or NULL when no gradient is needed */
    sg_tensor *hdir; /* (B,D) or NULL when h needs no gradient */
    sg_tensor *out;  /* backward: h's gradient, or W's COO values (B*T,D) */
    double *partial; /* forward: one loss partial per chunk of `grain` examples */
    double scale;    /* backward: the incoming gradient */
    int64_t B, T, D, grain;
} sgns_job;

/* loss_i = sum_j softplus(-+s_ij) = sum_j max(-+s_ij, 0) + log prod_j (1 + exp(-|s_ij|)):
 * one log per example; the product is kept below 2^1000 by flushing it into the sum. */
SG__HOT_BODY void sgns_forward_range__body(void *ud, int64_t lo, int64_t hi)
{
    sgns_job *j = ud;
    const int64_t T = j->T, D = j->D, end = hi * T;
    const size_t rowbytes = (size_t)D * sg_dtype_size(j->W->dtype);
    const size_t pfbytes = rowbytes < SG__SGNS_PREFETCH_MAX ? rowbytes : SG__SGNS_PREFETCH_MAX;
    for (int64_t e = lo * T; e < end && e < lo * T + SG__SGNS_AHEAD; e++)
        sg__prefetch_row(j->W->data, sg__idx_at(j->tg, e), rowbytes, pfbytes);
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
                const int64_t ahead = i * T + c + SG__SGNS_AHEAD;
                if (ahead < end) sg__prefetch_row(W, sg__idx_at(j->tg, ahead), rowbytes, pfbytes);
                const F *w = W + sg__idx_at(j->tg, i * T + c) * D;
                F s;
                SGNS_DOT(F, w, x, D, s);
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
    j->partial[lo / j->grain] = acc;
}
SG__HOT_CLONES(sgns_forward_range, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* W's COO values (B*T, D): row e = scale * coef_e * h_{e / T} */
SG__HOT_BODY void sgns_coo_values_range__body(void *ud, int64_t lo, int64_t hi)
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
SG__HOT_CLONES(sgns_coo_values_range, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* W's COO gradient: indices (1, B*T) are the targets (a view for int64 targets). */
static sg_tensor *sgns_coo_grad(sgns_job *j)
{
    sg_ctx *ctx = j->W->ctx;
    const int64_t n = j->B * j->T;
    int64_t vshape[2] = {n, j->D};
    sg_tensor *idx = sg__index_row_i64(j->tg);
    j->out = sg__tmp(ctx, j->W->dtype, 2, vshape, false);
    if (!idx || !j->out) return NULL;
    sg__parallel_for(ctx, j->B, sg__row_grain(j->T * j->D), sgns_coo_values_range, j);
    return sg__coo_wrap(ctx, 2, j->W->shape, 1, idx, j->out, false);
}

/* The job of a recorded node for an incoming loss gradient g. */
static sgns_job sgns_job_of(sg_node *n, double g)
{
    sg_tensor *h = n->in[0], *W = n->in[1], *tg = n->in[2];
    return (sgns_job){.h = h, .W = W, .tg = tg, .coef = n->saved[0], .hdir = n->saved[1],
                      .scale = g, .B = h->shape[0], .T = tg->shape[1], .D = h->shape[1]};
}

/* The fused update of W by the node's optimizer (n->extra), deferred until the whole
 * backward has run (sg__defer), so that other nodes' backwards read W as the forward saw
 * it and a failed backward leaves W unchanged. */
static int sgns_apply_fused(sg_node *n, sg_tensor *gout)
{
    sg_tensor *h = n->in[0], *W = n->in[1], *tg = n->in[2];
    sg_tensor *idx = sg__index_row_i64(tg); /* int64 targets: a view */
    if (!idx) return sg__status_or_nomem(W->ctx);
    sg__fused_rows rows = {.idx = idx->data, .n = tg->numel, .x = h->data,
                           .coef = n->saved[0]->data, .per = tg->shape[1],
                           .scale = sg_tensor_get(gout, 0)};
    return sg__fused_apply_rows(n->extra, W, &rows);
}

static int sgns_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *h = n->in[0], *W = n->in[1];
    sg_ctx *ctx = h->ctx;
    const double g = sg_tensor_get(gout, 0);
    sgns_job j = sgns_job_of(n, g);
    if (n->extra) {
        int rc = sg__defer(n, sgns_apply_fused, gout);
        if (rc) return rc;
    } else if (sg__wants_grad(W)) {
        sg_tensor *gw = sgns_coo_grad(&j);
        if (!gw) return sg__status_or_nomem(ctx);
        int rc = sg__accum_grad(W, gw, true);
        if (rc) return rc;
    }
    if (sg__wants_grad(h) && j.hdir) return sg__op_accum_scaled(h, j.hdir, g);
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
    if (!sg__op_check_float(op, h) || !sg__op_check_table(op, W) ||
        !sg__op_check_pair(op, h, W) || !sg__op_check_dense(op, targets))
        return NULL;
    if (targets->ctx != ctx)
        return sg__fail(ctx, SG_ERR_ARG, "%s: operands belong to different contexts", op);
    if (!sg__is_int(targets->dtype))
        return sg__fail(ctx, SG_ERR_DTYPE, "%s: targets are %s, i32 or i64 expected", op,
                        sg__dtype_name(targets->dtype));
    char sh[96], sw[96], st[96];
    if (h->ndim != 2 || W->ndim != 2 || targets->ndim != 2 || h->shape[1] != W->shape[1] ||
        targets->shape[0] != h->shape[0] || targets->shape[1] < 1)
        return sg__fail(ctx, SG_ERR_SHAPE,
                        "%s: h %s, W %s, targets %s; expected (B,D), (V,D), (B,T) with T >= 1",
                        op, sg__shape_str(h, sh, sizeof sh), sg__shape_str(W, sw, sizeof sw),
                        sg__shape_str(targets, st, sizeof st));
    sg_optim *fused = opts ? opts->fused : NULL;
    if (fused && !sg__fused_check(op, fused, W)) return NULL;
    /* The update writes W while it reads h: h must not be W's memory. */
    const size_t esz = sg_dtype_size(W->dtype);
    const char *hb = h->data, *wb = W->data;
    if (fused && hb < wb + (size_t)W->numel * esz && wb < hb + (size_t)h->numel * esz)
        return sg__fail(ctx, SG_ERR_ARG, "%s: a fused update needs h outside W's memory", op);
    const int64_t B = h->shape[0], T = targets->shape[1], V = W->shape[0];
    for (int64_t e = 0; e < B * T; e++) {
        int64_t r = sg__idx_at(targets, e);
        if (r < 0 || r >= V)
            return sg__fail(ctx, SG_ERR_INDEX,
                            "%s: targets[%lld][%lld] = %lld out of range [0, %lld)", op,
                            (long long)(e / T), (long long)(e % T), (long long)r, (long long)V);
    }
    sg__param_sync(W, targets);

    sg_tensor *ins[3] = {h, W, targets};
    const bool grad = sg__needs_grad(ctx, 3, ins);
    sg_tensor *out = sg__tmp(ctx, h->dtype, 0, NULL, false);
    const int64_t grain = sg__row_grain(T * h->shape[1]);
    const int64_t chunks = (B + grain - 1) / grain;
    double *partial = sg__arena_alloc(ctx, (size_t)(chunks > 0 ? chunks : 1) * sizeof *partial);
    int64_t cshape[2] = {B, T};
    sg_tensor *coef = grad ? sg__tmp(ctx, h->dtype, 2, cshape, false) : NULL;
    sg_tensor *hdir = grad && sg__wants_grad(h) ? sg__tmp_like(h, false) : NULL;
    if (!out || !partial || (grad && !coef) || (grad && sg__wants_grad(h) && !hdir))
        return NULL;

    sgns_job j = {.h = h, .W = W, .tg = targets, .coef = coef, .hdir = hdir,
                  .partial = partial, .B = B, .T = T, .D = h->shape[1], .grain = grain};
    sg__parallel_for_dynamic(ctx, B, grain, sgns_forward_range, &j);
    double loss = 0;
    for (int64_t c = 0; c < chunks; c++) loss += partial[c];
    SG__DISPATCH_FLOAT(out->dtype, F, { *(F *)out->data = (F)loss; });

    if (grad) {
        sg_node *n = sg__node_new(ctx, sgns_backward, "sgns_loss", out, 3, ins);
        if (!n) return NULL;
        n->saved[0] = coef;
        n->saved[1] = hdir;
        n->extra = fused;
    }
    return out;
}
