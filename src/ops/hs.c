/* sg_hs_loss: hierarchical softmax (word2vec's and fastText's) as one op: per example a
 * path of inner tree nodes, each a binary logistic decision with a 0/1 code.
 *
 * Invariants:
 * - Paths are CSR: example i owns entries [offsets[i], offsets[i+1]) of nodes and codes
 *   (the last example runs to P). Everything (nodes in range, codes 0/1, offsets) is
 *   checked before anything is written.
 * - The forward saves coef[e] = d loss / d (W[nodes[e]] . h_i) = sigmoid(s_e) - code_e (P)
 *   and, if h needs a gradient, hdir[i] = sum over i's entries of coef[e] W[nodes[e]]
 *   (B,D), so the backward reads W as the forward saw it.
 * - W's gradient is COO with exactly P rows, the path nodes (uncoalesced, indices borrowed
 *   from int64 nodes): a step touches only the rows on the batch's paths.
 * - Deterministic: examples are cut into fixed chunks (the grain policy), loss partials are
 *   summed per chunk and then over chunks in order.
 */
#include "ops/ops.h"

#include <math.h>

typedef struct {
    const sg_tensor *h, *W, *nodes, *codes, *offsets;
    sg_tensor *coef; /* (P) or NULL when no gradient is needed */
    sg_tensor *hdir; /* (B,D) or NULL when h needs no gradient */
    sg_tensor *out;  /* backward: h's gradient, or W's COO values (P,D) */
    double *partial; /* forward: one loss partial per chunk */
    double scale;    /* backward: the incoming gradient */
    int64_t B, P, D, grain;
} hs_job;

static int64_t hs_end(const hs_job *j, int64_t i)
{
    return i + 1 < j->B ? sg__idx_at(j->offsets, i + 1) : j->P;
}

/* loss_e = softplus(-z) with z = +s for code 1, -s for code 0: max(-z, 0) + log1p(exp(-|z|)) */
static void hs_forward_range(void *ud, int64_t lo, int64_t hi)
{
    hs_job *j = ud;
    const int64_t D = j->D;
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
            for (int64_t e = sg__idx_at(j->offsets, i); e < hs_end(j, i); e++) {
                const F *w = W + sg__idx_at(j->nodes, e) * D;
                F s = 0;
                for (int64_t d = 0; d < D; d++) s += w[d] * x[d];
                const bool one = sg__idx_at(j->codes, e) == 1;
                const double z = one ? (double)s : -(double)s;
                acc += (z < 0 ? -z : 0) + log1p(exp(-fabs(z)));
                const F ex = (F)exp(-fabs((double)s));
                const F sig = s >= 0 ? (F)1 / ((F)1 + ex) : ex / ((F)1 + ex);
                const F cf = one ? sig - (F)1 : sig;
                if (coef) coef[e] = cf;
                if (g)
                    for (int64_t d = 0; d < D; d++) g[d] += cf * w[d];
            }
        }
    });
    j->partial[lo / j->grain] = acc;
}

/* W's COO values (P,D): row e = scale * coef_e * h_i for the example i owning e */
static void hs_coo_values_range(void *ud, int64_t lo, int64_t hi)
{
    hs_job *j = ud;
    const int64_t D = j->D;
    SG__DISPATCH_FLOAT(j->h->dtype, F, {
        const F *h = j->h->data;
        const F *coef = j->coef->data;
        F *v = j->out->data;
        for (int64_t i = lo; i < hi; i++)
            for (int64_t e = sg__idx_at(j->offsets, i); e < hs_end(j, i); e++) {
                const F a = (F)(j->scale * (double)coef[e]);
                const F *x = h + i * D;
                F *o = v + e * D;
                for (int64_t d = 0; d < D; d++) o[d] = a * x[d];
            }
    });
}

static int hs_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *h = n->in[0], *W = n->in[1], *nodes = n->in[2], *offsets = n->in[3];
    sg_ctx *ctx = h->ctx;
    hs_job j = {.h = h, .W = W, .nodes = nodes, .offsets = offsets, .coef = n->saved[0],
                .hdir = n->saved[1], .scale = sg_tensor_get(gout, 0), .B = h->shape[0],
                .P = nodes->numel, .D = h->shape[1]};
    if (sg__wants_grad(W)) {
        int64_t vshape[2] = {j.P, j.D};
        sg_tensor *idx = sg__index_row_i64(nodes);
        j.out = sg__tmp(ctx, W->dtype, 2, vshape, false);
        if (!idx || !j.out) return sg__status_or_nomem(ctx);
        sg__parallel_for(ctx, j.B, sg__row_grain(j.D * (j.P / (j.B ? j.B : 1) + 1)),
                         hs_coo_values_range, &j);
        sg_tensor *gw = sg__coo_wrap(ctx, 2, W->shape, 1, idx, j.out, false);
        if (!gw) return sg__status_or_nomem(ctx);
        int rc = sg__accum_grad(W, gw, true);
        if (rc) return rc;
    }
    if (sg__wants_grad(h) && j.hdir) return sg__op_accum_scaled(h, j.hdir, j.scale);
    return SG_OK;
}

/* Every check of sg_hs_loss's integer inputs; records the error and returns false. */
static bool hs_check_paths(const char *op, const sg_tensor *W, const sg_tensor *nodes,
                           const sg_tensor *codes, const sg_tensor *offsets, int64_t B)
{
    sg_ctx *ctx = W->ctx;
    const sg_tensor *ints[3] = {nodes, codes, offsets};
    static const char *names[3] = {"nodes", "codes", "offsets"};
    for (int k = 0; k < 3; k++) {
        if (!sg__op_check_dense(op, ints[k])) return false;
        if (ints[k]->ctx != ctx) {
            sg__fail(ctx, SG_ERR_ARG, "%s: operands belong to different contexts", op);
            return false;
        }
        if (!sg__is_int(ints[k]->dtype)) {
            sg__fail(ctx, SG_ERR_DTYPE, "%s: %s are %s, i32 or i64 expected", op, names[k],
                     sg__dtype_name(ints[k]->dtype));
            return false;
        }
    }
    char sn[96], sc[96], so[96];
    const int64_t P = nodes->numel;
    if (nodes->ndim != 1 || codes->ndim != 1 || offsets->ndim != 1 || codes->numel != P ||
        offsets->numel != B) {
        sg__fail(ctx, SG_ERR_SHAPE,
                 "%s: nodes %s, codes %s, offsets %s; expected (P), (P), (B) with B = %lld", op,
                 sg__shape_str(nodes, sn, sizeof sn), sg__shape_str(codes, sc, sizeof sc),
                 sg__shape_str(offsets, so, sizeof so), (long long)B);
        return false;
    }
    if (B == 0 && P > 0) {
        sg__fail(ctx, SG_ERR_ARG, "%s: %lld path entries but no example", op, (long long)P);
        return false;
    }
    for (int64_t i = 0; i < B; i++) {
        const int64_t o = sg__idx_at(offsets, i), prev = i ? sg__idx_at(offsets, i - 1) : 0;
        if ((i == 0 && o != 0) || o < prev || o > P) {
            sg__fail(ctx, SG_ERR_ARG,
                     "%s: offsets[%lld] = %lld; offsets start at 0 and do not decrease up to "
                     "P = %lld", op, (long long)i, (long long)o, (long long)P);
            return false;
        }
    }
    const int64_t N = W->shape[0];
    for (int64_t e = 0; e < P; e++) {
        const int64_t r = sg__idx_at(nodes, e), c = sg__idx_at(codes, e);
        if (r < 0 || r >= N) {
            sg__fail(ctx, SG_ERR_INDEX, "%s: nodes[%lld] = %lld out of range [0, %lld)", op,
                     (long long)e, (long long)r, (long long)N);
            return false;
        }
        if (c != 0 && c != 1) {
            sg__fail(ctx, SG_ERR_VALUE, "%s: codes[%lld] = %lld; a code is 0 or 1", op,
                     (long long)e, (long long)c);
            return false;
        }
    }
    return true;
}

sg_tensor *sg_hs_loss(sg_tensor *h, sg_tensor *W, sg_tensor *nodes, sg_tensor *codes,
                      sg_tensor *offsets)
{
    static const char op[] = "sg_hs_loss";
    SG__CHECK_NOTNULL(h);
    SG__CHECK_NOTNULL(W);
    SG__CHECK_NOTNULL(nodes);
    SG__CHECK_NOTNULL(codes);
    SG__CHECK_NOTNULL(offsets);
    sg_ctx *ctx = h->ctx;
    if (!sg__op_check_float(op, h) || !sg__op_check_table(op, W) || !sg__op_check_pair(op, h, W))
        return NULL;
    char sh[96], sw[96];
    if (h->ndim != 2 || W->ndim != 2 || h->shape[1] != W->shape[1])
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: h %s, W %s; expected (B,D), (N,D)", op,
                        sg__shape_str(h, sh, sizeof sh), sg__shape_str(W, sw, sizeof sw));
    const int64_t B = h->shape[0], D = h->shape[1];
    if (!hs_check_paths(op, W, nodes, codes, offsets, B)) return NULL;
    sg__param_sync(W, nodes); /* only the path rows are read */

    sg_tensor *ins[4] = {h, W, nodes, offsets};
    const bool grad = sg__needs_grad(ctx, 4, ins);
    const int64_t P = nodes->numel;
    sg_tensor *out = sg__tmp(ctx, h->dtype, 0, NULL, false);
    /* an example costs about its path's length times D */
    const int64_t grain = sg__row_grain(D * (P / (B ? B : 1) + 1));
    const int64_t chunks = (B + grain - 1) / grain;
    double *partial = sg__arena_alloc(ctx, (size_t)(chunks > 0 ? chunks : 1) * sizeof *partial);
    int64_t cshape[1] = {P};
    sg_tensor *coef = grad ? sg__tmp(ctx, h->dtype, 1, cshape, false) : NULL;
    sg_tensor *hdir = grad && sg__wants_grad(h) ? sg__tmp_like(h, false) : NULL;
    if (!out || !partial || (grad && !coef) || (grad && sg__wants_grad(h) && !hdir))
        return NULL;

    hs_job j = {.h = h, .W = W, .nodes = nodes, .codes = codes, .offsets = offsets,
                .coef = coef, .hdir = hdir, .partial = partial, .B = B, .P = P, .D = D,
                .grain = grain};
    sg__parallel_for_dynamic(ctx, B, grain, hs_forward_range, &j);
    double loss = 0;
    for (int64_t c = 0; c < chunks; c++) loss += partial[c];
    SG__DISPATCH_FLOAT(out->dtype, F, { *(F *)out->data = (F)loss; });

    if (grad) {
        sg_node *n = sg__node_new(ctx, hs_backward, "hs_loss", out, 4, ins);
        if (!n) return NULL;
        n->saved[0] = coef;
        n->saved[1] = hdir;
    }
    return out;
}
