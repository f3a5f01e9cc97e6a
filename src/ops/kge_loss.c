/* sg_ranking_loss: the fused ranking losses of knowledge-graph embedding training (one
 * chunk's positive scores against its negatives), forward and backward.
 *
 * Invariants: each row's loss and its gradient are computed together, in double, by one
 * thread, into a per-row term and (when a gradient is needed) the saved directions
 * d loss / d pos (M) and d loss / d neg (M,N) in the inputs' dtype; the loss is the sum of
 * the terms in row order on one thread, so it is bitwise the same for any thread count.
 * The backward scales the saved directions by the incoming gradient. Stable forms:
 * log-sum-exp around the row maximum, softplus(x) = max(x,0) + log1p(exp(-|x|)), sigmoid
 * per sign. The masked entry (skip_offset >= 0) is skipped everywhere and gets 0. */
#include "ops/ops.h"

#include <math.h>
#include <string.h>

typedef struct {
    sg_rank_loss_kind kind;
    double margin, temp;
    bool f32;
    int64_t N, skip;
    const void *pos, *neg;
    void *dpos, *dneg; /* NULL when that input needs no gradient */
    double *term;
} rank_job;

static double ld(const void *p, bool f32, int64_t i)
{
    return f32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static void st(void *p, bool f32, int64_t i, double v)
{
    if (f32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
}

static double softplus(double x) { return fmax(x, 0) + log1p(exp(-fabs(x))); }
static double sigmoid(double x)
{
    const double e = exp(-fabs(x));
    return x >= 0 ? 1 / (1 + e) : e / (1 + e);
}

/* One row: its negatives v[j] for j < N but the masked column `skip` (-1: none). Each kind
 * returns the row's loss, sets *dp = d loss / d pos and, when dn is not NULL, writes
 * d loss / d neg[j] (0 at the masked column). Rows go through blocks of ROW_BLOCK doubles
 * on the stack: exponentials by sg__vexp, the rest elementwise; sums run over j in order. */
typedef struct {
    const rank_job *J;
    const void *v;
    void *dn;
    int64_t skip;
} rank_row;

#define ROW_BLOCK 256

static double row_neg(const rank_row *r, int64_t j) { return ld(r->v, r->J->f32, j); }

/* b[k] = a * v[j0 + k] + c for k < n. */
static void row_affine(const rank_row *r, int64_t j0, int64_t n, double a, double c, double *b)
{
    if (r->J->f32) {
        const float *v = (const float *)r->v + j0;
        for (int64_t k = 0; k < n; k++) b[k] = a * (double)v[k] + c;
    } else {
        const double *v = (const double *)r->v + j0;
        for (int64_t k = 0; k < n; k++) b[k] = a * v[k] + c;
    }
}

/* dn[j0 + k] = b[k] for k < n, 0 at the masked column. */
static void row_store(const rank_row *r, int64_t j0, int64_t n, const double *b)
{
    if (r->J->f32) {
        float *d = (float *)r->dn + j0;
        for (int64_t k = 0; k < n; k++) d[k] = (float)b[k];
    } else {
        memcpy((double *)r->dn + j0, b, (size_t)n * sizeof *b);
    }
    if (r->skip >= j0 && r->skip < j0 + n) st(r->dn, r->J->f32, r->skip, 0);
}

/* max over j in [lo, hi) of a * v[j] (-inf when empty), in 8 lanes so that it vectorises;
 * a maximum is exact, so the lanes change nothing but the speed. */
#define MAX_LANES 8
static double range_max(const rank_row *r, double a, int64_t lo, int64_t hi)
{
    double lane[MAX_LANES], m = -INFINITY;
    for (int l = 0; l < MAX_LANES; l++) lane[l] = -INFINITY;
    int64_t j = lo;
    if (r->J->f32) {
        const float *v = r->v;
        for (; j + MAX_LANES <= hi; j += MAX_LANES)
            for (int l = 0; l < MAX_LANES; l++) {
                const double x = a * (double)v[j + l];
                lane[l] = x > lane[l] ? x : lane[l];
            }
        for (; j < hi; j++) m = a * (double)v[j] > m ? a * (double)v[j] : m;
    } else {
        const double *v = r->v;
        for (; j + MAX_LANES <= hi; j += MAX_LANES)
            for (int l = 0; l < MAX_LANES; l++) lane[l] = a * v[j + l] > lane[l] ? a * v[j + l] : lane[l];
        for (; j < hi; j++) m = a * v[j] > m ? a * v[j] : m;
    }
    for (int l = 0; l < MAX_LANES; l++) m = lane[l] > m ? lane[l] : m;
    return m;
}

/* max over unmasked j of a * v[j] (-inf when none). */
static double row_max(const rank_row *r, double a)
{
    if (r->skip < 0) return range_max(r, a, 0, r->J->N);
    return fmax(range_max(r, a, 0, r->skip), range_max(r, a, r->skip + 1, r->J->N));
}

/* dn[j] /= s for every j. */
static void row_div(const rank_row *r, double s)
{
    const int64_t N = r->J->N;
    if (r->J->f32) {
        float *d = r->dn;
        for (int64_t j = 0; j < N; j++) d[j] = (float)((double)d[j] / s);
    } else {
        double *d = r->dn;
        for (int64_t j = 0; j < N; j++) d[j] /= s;
    }
}

/* b[k] = exp(a * v[j0 + k] - m), 0 at the masked column. */
static void row_exp(const rank_row *r, int64_t j0, int64_t n, double a, double m, double *b)
{
    row_affine(r, j0, n, a, -m, b);
    sg__vexp(b, n);
    if (r->skip >= j0 && r->skip < j0 + n) b[r->skip - j0] = 0;
}

/* u[k] = exp(-|x_k|) for x_k = v[j0 + k] + c, x[k] = x_k: what softplus and sigmoid of
 * x_k take (softplus(x) = max(x,0) + log1p(u), sigmoid(x) = 1/(1+u) or u/(1+u)). */
static void row_soft(const rank_row *r, int64_t j0, int64_t n, double c, double *x, double *u)
{
    row_affine(r, j0, n, 1, c, x);
    for (int64_t k = 0; k < n; k++) u[k] = -fabs(x[k]);
    sg__vexp(u, n);
}
static double soft_plus(double x, double u) { return fmax(x, 0) + log1p(u); }
static double soft_sigmoid(double x, double u) { return x >= 0 ? 1 / (1 + u) : u / (1 + u); }

/* logsumexp(p, v.) - p = log(e^(p-m) + sum_j e^(v_j-m)) + (m - p); when p is the maximum,
 * log1p of the negatives' sum, so a confident row keeps its small loss exactly. */
static double row_softmax(const rank_row *r, double p, double *dp)
{
    const int64_t N = r->J->N;
    const double m = fmax(p, row_max(r, 1));
    double b[ROW_BLOCK], sn = 0;
    for (int64_t j0 = 0; j0 < N; j0 += ROW_BLOCK) {
        const int64_t n = N - j0 < ROW_BLOCK ? N - j0 : ROW_BLOCK;
        row_exp(r, j0, n, 1, m, b);
        for (int64_t k = 0; k < n; k++) sn += b[k];
        if (r->dn) row_store(r, j0, n, b); /* e_j now, e_j / s below */
    }
    const double s = exp(p - m) + sn;
    *dp = -(sn / s); /* softmax_p - 1 without the cancellation */
    if (r->dn) row_div(r, s);
    return p >= m ? log1p(sn) : log(s) + (m - p);
}

static double row_logistic(const rank_row *r, double p, double *dp)
{
    const int64_t N = r->J->N, cnt = N - (r->skip >= 0);
    double x[ROW_BLOCK], u[ROW_BLOCK], sum = 0;
    for (int64_t j0 = 0; j0 < N; j0 += ROW_BLOCK) {
        const int64_t n = N - j0 < ROW_BLOCK ? N - j0 : ROW_BLOCK;
        row_soft(r, j0, n, 0, x, u);
        for (int64_t k = 0; k < n; k++)
            if (j0 + k != r->skip) sum += soft_plus(x[k], u[k]);
        for (int64_t k = 0; r->dn && k < n; k++) x[k] = soft_sigmoid(x[k], u[k]) / (double)cnt;
        if (r->dn) row_store(r, j0, n, x);
    }
    *dp = -sigmoid(-p);
    return softplus(-p) + (cnt > 0 ? sum / (double)cnt : 0);
}

static double row_margin(const rank_row *r, double p, double *dp)
{
    const int64_t N = r->J->N;
    const double base = r->J->margin - p;
    double sum = 0, active = 0;
    for (int64_t j = 0; j < N; j++) {
        const double v = j == r->skip ? 0 : base + row_neg(r, j);
        if (v > 0) sum += v, active += 1;
        if (r->dn) st(r->dn, r->J->f32, j, v > 0 ? 1 : 0);
    }
    *dp = -active;
    return sum;
}

/* Weights w_j = e_j / Z, e_j = exp(t v_j - max_j t v_j), constants of the gradient; the
 * first pass leaves e_j * sigmoid(v_j + margin) in dn, the second divides it by Z. */
static double row_selfadv(const rank_row *r, double p, double *dp)
{
    const int64_t N = r->J->N;
    const double t = r->J->temp, mg = r->J->margin, m = row_max(r, t);
    double e[ROW_BLOCK], x[ROW_BLOCK], u[ROW_BLOCK], Z = 0, wsum = 0;
    for (int64_t j0 = 0; j0 < N; j0 += ROW_BLOCK) {
        const int64_t n = N - j0 < ROW_BLOCK ? N - j0 : ROW_BLOCK;
        row_exp(r, j0, n, t, m, e);
        row_soft(r, j0, n, mg, x, u);
        for (int64_t k = 0; k < n; k++) {
            Z += e[k];
            if (e[k] != 0) wsum += e[k] * soft_plus(x[k], u[k]);
        }
        for (int64_t k = 0; r->dn && k < n; k++) x[k] = e[k] * soft_sigmoid(x[k], u[k]);
        if (r->dn) row_store(r, j0, n, x);
    }
    *dp = -sigmoid(-(mg + p));
    if (r->dn && Z > 0) row_div(r, Z);
    return softplus(-(mg + p)) + (Z > 0 ? wsum / Z : 0);
}

static void rank_rows(void *ud, int64_t lo, int64_t hi)
{
    const rank_job *J = ud;
    const size_t esz = J->f32 ? sizeof(float) : sizeof(double);
    for (int64_t i = lo; i < hi; i++) {
        rank_row r = {J, (const char *)J->neg + (size_t)(i * J->N) * esz,
                      J->dneg ? (char *)J->dneg + (size_t)(i * J->N) * esz : NULL,
                      J->skip >= 0 ? J->skip + i : -1};
        const double p = ld(J->pos, J->f32, i);
        double dp = 0;
        switch (J->kind) {
        case SG_RANK_SOFTMAX: J->term[i] = row_softmax(&r, p, &dp); break;
        case SG_RANK_LOGISTIC: J->term[i] = row_logistic(&r, p, &dp); break;
        case SG_RANK_MARGIN: J->term[i] = row_margin(&r, p, &dp); break;
        default: J->term[i] = row_selfadv(&r, p, &dp); break;
        }
        if (J->dpos) st(J->dpos, J->f32, i, dp);
    }
}

/* saved[0], saved[1]: the directions of pos and neg (NULL for one that needs none). */
static int rank_backward(sg_node *n, sg_tensor *gout)
{
    const double g = sg_tensor_get(gout, 0);
    for (int k = 0; k < 2; k++) {
        if (!sg__wants_grad(n->in[k]) || !n->saved[k]) continue;
        int rc = sg__op_accum_scaled(n->in[k], n->saved[k], g);
        if (rc != SG_OK) return rc;
    }
    return SG_OK;
}

/* Checks of everything but the operands' layouts and dtypes. */
static bool rank_check(const char *op, sg_tensor *pos, sg_tensor *neg, const sg_rank_loss_opts *o)
{
    sg_ctx *ctx = pos->ctx;
    char sp[96], sn[96];
    if (pos->ndim != 1 || neg->ndim != 2 || neg->shape[0] != pos->shape[0]) {
        sg__fail(ctx, SG_ERR_SHAPE, "%s: pos %s and neg %s; expected (M) and (M,N)", op,
                 sg__shape_str(pos, sp, sizeof sp), sg__shape_str(neg, sn, sizeof sn));
        return false;
    }
    if ((unsigned)o->kind > (unsigned)SG_RANK_SELFADV) {
        sg__fail(ctx, SG_ERR_ARG, "%s: loss kind %d (SG_RANK_SOFTMAX .. SG_RANK_SELFADV expected)",
                 op, (int)o->kind);
        return false;
    }
    if (!isfinite(o->margin) || !isfinite(o->adv_temp)) {
        sg__fail(ctx, SG_ERR_ARG, "%s: margin %g and adv_temp %g must be finite", op, o->margin,
                 o->adv_temp);
        return false;
    }
    const int64_t M = pos->shape[0], N = neg->shape[1];
    if (o->skip_offset < -1 || (o->skip_offset >= 0 && o->skip_offset > N - M)) {
        sg__fail(ctx, SG_ERR_ARG, "%s: skip_offset %lld for neg %s; -1, or 0 .. N - M = %lld", op,
                 (long long)o->skip_offset, sg__shape_str(neg, sn, sizeof sn), (long long)(N - M));
        return false;
    }
    return true;
}

sg_tensor *sg_ranking_loss(sg_tensor *pos, sg_tensor *neg, const sg_rank_loss_opts *o)
{
    static const char op[] = "sg_ranking_loss";
    static const sg_rank_loss_opts defaults = SG_RANK_LOSS_OPTS_DEFAULT;
    SG__CHECK_NOTNULL(pos);
    SG__CHECK_NOTNULL(neg);
    if (!o) o = &defaults;
    if (!sg__op_check_pair(op, pos, neg) || !sg__op_check_float(op, pos) ||
        !sg__op_check_float(op, neg) || !rank_check(op, pos, neg, o))
        return NULL;
    sg_ctx *ctx = pos->ctx;
    const int64_t M = pos->shape[0], N = neg->shape[1];
    sg_tensor *in[2] = {pos, neg};
    const bool grad = sg__needs_grad(ctx, 2, in);
    sg_tensor *out = sg__tmp(ctx, pos->dtype, 0, NULL, false);
    double *term = sg__arena_alloc(ctx, (size_t)(M > 0 ? M : 1) * sizeof *term);
    sg_tensor *dpos = grad && sg__wants_grad(pos) ? sg__tmp_like(pos, false) : NULL;
    sg_tensor *dneg = grad && sg__wants_grad(neg) ? sg__tmp_like(neg, false) : NULL;
    if (!out || !term || (grad && sg__wants_grad(pos) && !dpos) ||
        (grad && sg__wants_grad(neg) && !dneg))
        return NULL;
    rank_job J = {o->kind, o->margin, o->adv_temp, pos->dtype == SG_F32, N, o->skip_offset,
                  pos->data, neg->data, dpos ? dpos->data : NULL, dneg ? dneg->data : NULL, term};
    sg__parallel_for(ctx, M, sg__row_grain(N > 0 ? 4 * N : 1), rank_rows, &J);
    double loss = 0;
    for (int64_t i = 0; i < M; i++) loss += term[i];
    SG__DISPATCH_FLOAT(out->dtype, F, { *(F *)out->data = (F)loss; });
    if (grad) {
        sg_node *n = sg__node_new(ctx, rank_backward, op, out, 2, in);
        if (!n) return NULL;
        n->saved[0] = dpos;
        n->saved[1] = dneg;
    }
    return out;
}
