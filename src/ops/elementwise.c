/* Binary elementwise ops with numpy broadcasting (add, sub, mul, div, maximum, minimum),
 * scale, and the broadcasting rule (sg__bcast, ops.h) that sg_where shares.
 *
 * Invariants: both operands are dense with one dtype (COO + COO addition is handed to
 * sparse_ops.c; a COO operand added to a dense one is densified first); the output has the
 * broadcast shape. maximum and minimum return a NaN operand and split the gradient of a
 * tie half and half, as PyTorch does. A backward reduces an input's gradient over the dims the input was
 * stretched along by summing in output order on one thread, and writes it elementwise in
 * parallel when the input was not stretched, so the result never depends on the thread
 * count. bin_fwd and bin_grad have a variant per CPU level picked at run time
 * (SG__HOT_CLONES, core/core.h); each element takes the same operations in every one. */
#include "ops/ops.h"

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_MAX, BIN_MIN } bin_kind;
static const char *const bin_names[] = {"sg_add", "sg_sub",     "sg_mul",
                                        "sg_div", "sg_maximum", "sg_minimum"};

/* Broadcasting (ops.h): the output shape padded to 4 dims and the operands' strides. */
bool sg__bcast_init(sg__bcast *bc, int n, sg_tensor *const *in)
{
    int nd = 0;
    for (int k = 0; k < n; k++) nd = in[k]->ndim > nd ? in[k]->ndim : nd;
    bc->ndim = nd;
    for (int p = 0; p < 4; p++) {
        int q = p - (4 - nd); /* output dim, < 0 in the padding */
        bc->d[p] = 1;
        for (int k = 0; k < n; k++) {
            int qk = q - (nd - in[k]->ndim);
            int64_t size = qk >= 0 ? in[k]->shape[qk] : 1;
            if (size != 1 && bc->d[p] != 1 && size != bc->d[p]) return false;
            if (size != 1) bc->d[p] = size;
            bc->st[k][p] = size != 1 ? sg__prod(in[k]->shape, qk + 1, in[k]->ndim) : 0;
        }
        if (q >= 0) bc->shape[q] = bc->d[p];
    }
    bc->numel = bc->d[0] * bc->d[1] * bc->d[2] * bc->d[3];
    bool stretched = false;
    for (int k = 0; k < n; k++) stretched |= in[k]->numel != bc->numel;
    if (!stretched) { /* one flat row */
        for (int p = 0; p < 3; p++) {
            bc->d[p] = 1;
            for (int k = 0; k < n; k++) bc->st[k][p] = 0;
        }
        bc->d[3] = bc->numel;
        for (int k = 0; k < n; k++) bc->st[k][3] = 1;
    }
    return true;
}

bool sg__bcast_full(const sg__bcast *bc, const sg_tensor *t)
{
    /* shapes, not element counts: with an empty output every operand has as many */
    if (t->ndim != bc->ndim) return false;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] != bc->shape[i]) return false;
    return true;
}

/* How the backward writes its buffer: ACCUM adds operand `which`'s terms (a broadcast
 * operand's elements receive several); SET writes them (the operand has the output's shape,
 * one term per element, so the buffer needs no zeroing); SET_BOTH writes operand 0's term
 * plus operand 1's (op(x, x): the whole gradient of x in one pass). */
typedef enum { BIN_GRAD_ACCUM, BIN_GRAD_SET, BIN_GRAD_SET_BOTH } bin_grad_mode;

typedef struct {
    const sg__bcast *bc;
    sg_dtype dtype;
    bin_kind kind;
    const void *a, *b;
    const void *g; /* backward: gradient of the output (one element when g_uniform) */
    void *dst;     /* forward: the output; backward: gradient of operand `which` */
    int which;
    bin_grad_mode mode; /* backward only */
    bool g_uniform;     /* backward: every element of the output's gradient is g[0] */
} bin_job;

/* Walks flat output elements [lo, hi) row by row: x, y point at the operands' elements of
 * row r, columns [j0, j1); sa, sb are the operands' last-dim strides. */
#define BIN_WALK(lo, hi, BODY)                                                   \
    for (int64_t e_ = (lo); e_ < (hi);) {                                        \
        int64_t r = e_ / n3;                                                     \
        int64_t j0 = e_ % n3;                                                    \
        int64_t j1 = n3 - j0 < (hi) - e_ ? n3 : j0 + ((hi) - e_);                \
        BODY                                                                     \
        e_ += j1 - j0;                                                           \
    }

/* Applies EXPR (of xv, yv) to columns [j0, j1) of row r, unit-stride loop when possible. */
#define BIN_ROW(EXPR)                                                            \
    do {                                                                         \
        const T *x = A + sg__bcast_row_off(bc, 0, r);                            \
        const T *y = B + sg__bcast_row_off(bc, 1, r);                            \
        T *o = O + r * n3;                                                       \
        if (sa == 1 && sb == 1) {                                                \
            for (int64_t j = j0; j < j1; j++) {                                  \
                T xv = x[j];                                                     \
                T yv = y[j];                                                     \
                o[j] = EXPR;                                                     \
            }                                                                    \
        } else {                                                                 \
            for (int64_t j = j0; j < j1; j++) {                                  \
                T xv = x[j * sa];                                                \
                T yv = y[j * sb];                                                \
                o[j] = EXPR;                                                     \
            }                                                                    \
        }                                                                        \
    } while (0);

SG__HOT_BODY void bin_fwd__body(void *ud, int64_t lo, int64_t hi)
{
    const bin_job *J = ud;
    const sg__bcast *bc = J->bc;
    const int64_t n3 = bc->d[3], sa = bc->st[0][3], sb = bc->st[1][3];
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *A = J->a;
        const T *B = J->b;
        T *O = J->dst;
        switch (J->kind) {
        case BIN_ADD: BIN_WALK(lo, hi, BIN_ROW(xv + yv)) break;
        case BIN_SUB: BIN_WALK(lo, hi, BIN_ROW(xv - yv)) break;
        case BIN_MUL: BIN_WALK(lo, hi, BIN_ROW(xv * yv)) break;
        case BIN_DIV: BIN_WALK(lo, hi, BIN_ROW(xv / yv)) break;
        case BIN_MAX: BIN_WALK(lo, hi, BIN_ROW(xv > yv || xv != xv ? xv : yv)) break;
        case BIN_MIN: BIN_WALK(lo, hi, BIN_ROW(xv < yv || xv != xv ? xv : yv)) break;
        }
    });
}
SG__HOT_CLONES(bin_fwd, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* One column loop of the backward: dst OP EXPR (of gv, xv, yv) with GV, XV, YV, DST the
 * column j's gradient, operands and destination. */
#define BIN_GRAD_COLS(OP, EXPR, GV, XV, YV, DST)                                 \
    for (int64_t j = j0; j < j1; j++) {                                          \
        T gv = GV;                                                               \
        T xv = XV;                                                               \
        T yv = YV;                                                               \
        (void)xv;                                                                \
        (void)yv;                                                                \
        DST OP EXPR;                                                             \
    }

/* dst[operand `which`'s element] OP EXPR (of gv, xv, yv) for columns [j0, j1) of row r;
 * a uniform gradient is one value gu (no pass over a filled tensor). */
#define BIN_GRAD_ROW_OP(OP, EXPR)                                                \
    do {                                                                         \
        const T *x = A + sg__bcast_row_off(bc, 0, r);                            \
        const T *y = B + sg__bcast_row_off(bc, 1, r);                            \
        T *dr = D + sg__bcast_row_off(bc, J->which, r);                          \
        if (J->g_uniform) {                                                      \
            if (sa == 1 && sb == 1 && sd == 1)                                   \
                BIN_GRAD_COLS(OP, EXPR, gu, x[j], y[j], dr[j])                   \
            else                                                                 \
                BIN_GRAD_COLS(OP, EXPR, gu, x[j * sa], y[j * sb], dr[j * sd])    \
        } else {                                                                 \
            const T *gr = G + r * n3;                                            \
            if (sa == 1 && sb == 1 && sd == 1)                                   \
                BIN_GRAD_COLS(OP, EXPR, gr[j], x[j], y[j], dr[j])                \
            else                                                                 \
                BIN_GRAD_COLS(OP, EXPR, gr[j], x[j * sa], y[j * sb], dr[j * sd]) \
        }                                                                        \
    } while (0);

/* The gradient terms of operand 0 (E0) and operand 1 (E1), walked in the job's mode. */
#define BIN_GRAD_TERMS(E0, E1)                                                   \
    switch (J->mode) {                                                           \
    case BIN_GRAD_ACCUM:                                                         \
        if (J->which == 0) BIN_WALK(lo, hi, BIN_GRAD_ROW_OP(+=, E0))             \
        else BIN_WALK(lo, hi, BIN_GRAD_ROW_OP(+=, E1))                           \
        break;                                                                   \
    case BIN_GRAD_SET:                                                           \
        if (J->which == 0) BIN_WALK(lo, hi, BIN_GRAD_ROW_OP(=, E0))              \
        else BIN_WALK(lo, hi, BIN_GRAD_ROW_OP(=, E1))                            \
        break;                                                                   \
    case BIN_GRAD_SET_BOTH: BIN_WALK(lo, hi, BIN_GRAD_ROW_OP(=, (E0) + (E1))) break; \
    }

SG__HOT_BODY void bin_grad__body(void *ud, int64_t lo, int64_t hi)
{
    const bin_job *J = ud;
    const sg__bcast *bc = J->bc;
    const int64_t n3 = bc->d[3], sa = bc->st[0][3], sb = bc->st[1][3];
    const int64_t sd = bc->st[J->which][3];
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *A = J->a;
        const T *B = J->b;
        const T *G = J->g;
        const T gu = J->g_uniform ? G[0] : (T)0;
        const T zero = 0;
        T *D = J->dst;
        switch (J->kind) {
        case BIN_ADD: BIN_GRAD_TERMS(gv, gv) break;
        case BIN_SUB: BIN_GRAD_TERMS(gv, -gv) break;
        case BIN_MUL: BIN_GRAD_TERMS(gv * yv, gv * xv) break;
        case BIN_DIV: BIN_GRAD_TERMS(gv / yv, -gv * xv / (yv * yv)) break;
        /* PyTorch's rule: the gradient, halved at a tie, masked to 0 where the operand
         * loses (neither loses when one is NaN) */
        case BIN_MAX: BIN_GRAD_TERMS((xv < yv ? zero : xv == yv ? gv / 2 : gv),
                                     (xv > yv ? zero : xv == yv ? gv / 2 : gv)) break;
        case BIN_MIN: BIN_GRAD_TERMS((xv > yv ? zero : xv == yv ? gv / 2 : gv),
                                     (xv < yv ? zero : xv == yv ? gv / 2 : gv)) break;
        }
    });
}
SG__HOT_CLONES(bin_grad, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* Gradient of operand `which` (its own shape) from gout; NULL on NOMEM. With `both` (the
 * two operands are one tensor) the buffer receives operand 0's terms plus operand 1's: the
 * whole gradient of that tensor in one buffer. An operand of the output's shape gets one
 * term per element, written in one parallel pass; a broadcast one sums its terms on one
 * thread, in output order (so the sum does not depend on the thread count). */
static sg_tensor *bin_input_grad(sg_node *n, const sg__bcast *bc, const sg_tensor *gout, int which,
                                 bool both)
{
    sg_tensor *x = n->in[which];
    const bool full = sg__bcast_full(bc, x);
    sg_tensor *g = sg__tmp_like(x, !full);
    if (!g) return NULL;
    bin_job J = {bc, gout->dtype, (bin_kind)n->iarg[0], n->in[0]->data, n->in[1]->data,
                 gout->data, g->data, which, BIN_GRAD_ACCUM, gout->uniform};
    if (full) {
        J.mode = both ? BIN_GRAD_SET_BOTH : BIN_GRAD_SET;
        sg__parallel_for(x->ctx, bc->numel, SG__GRAIN, bin_grad, &J);
        return g;
    }
    for (int k = both ? 0 : which; k <= which; k++) {
        J.which = k;
        bin_grad(&J, 0, bc->numel);
    }
    return g;
}

static int bin_backward(sg_node *n, sg_tensor *gout)
{
    sg__bcast bc;
    sg__bcast_init(&bc, 2, n->in);
    bin_kind kind = (bin_kind)n->iarg[0];
    if (n->in[0] == n->in[1]) { /* op(x, x): one buffer, one accumulation */
        sg_tensor *x = n->in[0];
        if (!sg__wants_grad(x)) return SG_OK;
        sg_tensor *g = bin_input_grad(n, &bc, gout, 1, true);
        return g ? sg__accum_grad(x, g, true) : sg__status_or_nomem(x->ctx);
    }
    for (int k = 0; k < 2; k++) {
        sg_tensor *x = n->in[k];
        if (!sg__wants_grad(x)) continue;
        if (sg__bcast_full(&bc, x) && (kind == BIN_ADD || (kind == BIN_SUB && k == 0))) {
            int rc = sg__accum_grad(x, gout, false);
            if (rc != SG_OK) return rc;
            continue;
        }
        sg_tensor *g = bin_input_grad(n, &bc, gout, k, false);
        if (!g) return sg__status_or_nomem(x->ctx);
        int rc = sg__accum_grad(x, g, true);
        if (rc != SG_OK) return rc;
    }
    return SG_OK;
}

static sg_tensor *binary(bin_kind kind, sg_tensor *a, sg_tensor *b)
{
    SG__CHECK_NOTNULL(a);
    SG__CHECK_NOTNULL(b);
    const char *op = bin_names[kind];
    if (kind == BIN_ADD && a->layout == SG_COO && b->layout == SG_COO)
        return sg__sparse_add(a, b); /* COO + COO stays COO (a concatenation) */
    if (kind == BIN_ADD && (a->layout == SG_COO || b->layout == SG_COO)) {
        /* With a dense operand the sum is dense: add the COO operand's dense form. */
        if (a->layout == SG_COO) a = sg_to_dense(a);
        if (b->layout == SG_COO) b = sg_to_dense(b);
        SG__CHECK_NOTNULL(a);
        SG__CHECK_NOTNULL(b);
    }
    if (!sg__op_check_pair(op, a, b) || !sg__op_check_float(op, a) || !sg__op_check_float(op, b))
        return NULL;
    sg_ctx *ctx = a->ctx;
    sg__bcast bc;
    if (!sg__bcast_init(&bc, 2, (sg_tensor *[]){a, b})) {
        char sa[96], sb[96];
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", op,
                        sg__shape_str(a, sa, sizeof sa), sg__shape_str(b, sb, sizeof sb));
    }
    sg_tensor *out = sg__tmp(ctx, a->dtype, bc.ndim, bc.shape, false);
    if (!out) return NULL;
    bin_job J = {&bc, a->dtype, kind, a->data, b->data, NULL, out->data, 0, BIN_GRAD_ACCUM, false};
    sg__parallel_for(ctx, bc.numel, SG__GRAIN, bin_fwd, &J);
    sg_tensor *in[2] = {a, b};
    if (sg__needs_grad(ctx, 2, in)) {
        sg_node *n = sg__node_new(ctx, bin_backward, op, out, 2, in);
        if (!n) return NULL;
        n->iarg[0] = kind;
        n->accepts_uniform_gout = true;
    }
    return out;
}

/* (broadcast of a and b) -> elementwise a + b; both COO: COO concatenation. */
sg_tensor *sg_add(sg_tensor *a, sg_tensor *b) { return binary(BIN_ADD, a, b); }
sg_tensor *sg_sub(sg_tensor *a, sg_tensor *b) { return binary(BIN_SUB, a, b); }
sg_tensor *sg_mul(sg_tensor *a, sg_tensor *b) { return binary(BIN_MUL, a, b); }
sg_tensor *sg_div(sg_tensor *a, sg_tensor *b) { return binary(BIN_DIV, a, b); }
sg_tensor *sg_maximum(sg_tensor *a, sg_tensor *b) { return binary(BIN_MAX, a, b); }
sg_tensor *sg_minimum(sg_tensor *a, sg_tensor *b) { return binary(BIN_MIN, a, b); }

/* ---------------------------------------------------------------- scale */

static int scale_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *g;
    if (gout->uniform) { /* stays uniform; the product rounded as sg__op_scaled rounds it */
        double v = 0;
        SG__DISPATCH_FLOAT(gout->dtype, T, { v = (double)(*(const T *)gout->data * (T)n->scalar[0]); });
        g = sg__tmp_uniform(gout, v);
    } else {
        g = sg__op_scaled(gout, n->scalar[0]);
    }
    if (!g) return sg__status_or_nomem(gout->ctx);
    return sg__accum_grad(n->in[0], g, true);
}

/* a * s for dense a (any shape); COO a gives a COO result (values scaled). */
sg_tensor *sg_scale(sg_tensor *a, double s)
{
    SG__CHECK_NOTNULL(a);
    if (a->layout == SG_COO) return sg__sparse_scale(a, s);
    if (!sg__op_check_float("sg_scale", a)) return NULL;
    sg_tensor *out = sg__op_scaled(a, s);
    if (!out) return NULL;
    if (sg__needs_grad(a->ctx, 1, &a)) {
        sg_node *n = sg__node_new(a->ctx, scale_backward, "sg_scale", out, 1, &a);
        if (!n) return NULL;
        n->scalar[0] = s;
        n->accepts_uniform_gout = true;
    }
    return out;
}
