/* where(cond, x, y): elementwise selection by a 0/1 mask, the three operands broadcast
 * together (sg__bcast, ops.h).
 *
 * Invariants: x and y are dense float of one dtype; cond is dense of any dtype and holds
 * only 0 and 1, checked (in parallel, then the first offender found serially for the
 * message) before anything is allocated. cond gets no gradient and is kept on the node
 * (saved[0]) for the backward. A backward writes an operand of the output's shape
 * elementwise in parallel and sums a broadcast operand's terms in output order on one
 * thread, so the result never depends on the thread count. */
#include "ops/ops.h"

/* cond's element i as a double: exactly 0 or 1 only where the element is 0 or 1. */
static inline double cond_at(sg_dtype dt, const void *c, int64_t i)
{
    switch (dt) {
    case SG_F32: return ((const float *)c)[i];
    case SG_F64: return ((const double *)c)[i];
    case SG_I32: return ((const int32_t *)c)[i];
    default: return (double)((const int64_t *)c)[i];
    }
}

/* True when cond (ud) holds a value other than 0 and 1 in [lo, hi). */
static bool cond_has_bad(void *ud, int64_t lo, int64_t hi)
{
    const sg_tensor *c = ud;
    for (int64_t i = lo; i < hi; i++) {
        double v = cond_at(c->dtype, c->data, i);
        if (v != 0 && v != 1) return true;
    }
    return false;
}

/* Forward (g NULL): dst = cond ? x : y over the output. Backward: dst = the gradient of
 * operand `which` (1: x, 2: y), whose terms are g where cond selects it (pick: 1 for x, 0
 * for y, -1 for both: where(cond, x, x)), set when the operand fills the output, else
 * added into a zeroed buffer. g_step 0: a uniform gradient, every element g[0]. */
typedef struct {
    const sg__bcast *bc;
    sg_dtype dtype, cdtype;
    const void *c, *x, *y, *g;
    void *dst;
    int which, pick;
    bool accum;
    int64_t g_step;
} where_job;

/* Walks output elements [lo, hi) row by row: e the flat output index, oc/o1/o2 the
 * operands' element offsets (cond, x, y), od the destination's (operand `which` in the
 * backward). */
#define WHERE_WALK(BODY)                                                         \
    for (int64_t e = lo; e < hi;) {                                              \
        const int64_t r = e / n3;                                                \
        int64_t j = e % n3;                                                      \
        const int64_t j1 = n3 - j < hi - e ? n3 : j + (hi - e);                  \
        const int64_t bc_ = sg__bcast_row_off(bc, 0, r);                         \
        const int64_t b1_ = sg__bcast_row_off(bc, 1, r);                         \
        const int64_t b2_ = sg__bcast_row_off(bc, 2, r);                         \
        const int64_t bd_ = sg__bcast_row_off(bc, J->which, r);                  \
        for (; j < j1; j++, e++) {                                               \
            const int64_t oc = bc_ + j * bc->st[0][3];                           \
            const int64_t o1 = b1_ + j * bc->st[1][3];                           \
            const int64_t o2 = b2_ + j * bc->st[2][3];                           \
            const int64_t od = bd_ + j * bc->st[J->which][3];                    \
            (void)o1, (void)o2, (void)od;                                        \
            BODY                                                                 \
        }                                                                        \
    }

static void where_run(void *ud, int64_t lo, int64_t hi)
{
    const where_job *J = ud;
    const sg__bcast *bc = J->bc;
    const int64_t n3 = bc->d[3];
    SG__DISPATCH_FLOAT(J->dtype, T, {
        T *d = J->dst;
        if (!J->g) {
            const T *X = J->x;
            const T *Y = J->y;
            WHERE_WALK(d[e] = cond_at(J->cdtype, J->c, oc) != 0 ? X[o1] : Y[o2];)
        } else {
            const T *G = J->g;
            const T zero = 0;
            WHERE_WALK({
                const bool sel = cond_at(J->cdtype, J->c, oc) != 0;
                const T t = J->pick < 0 || sel == (J->pick == 1) ? G[e * J->g_step] : zero;
                if (J->accum) d[od] += t;
                else d[od] = t;
            })
        }
    });
}

static int where_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *cond = n->saved[0];
    sg_tensor *in3[3] = {cond, n->in[0], n->in[1]};
    sg__bcast bc;
    sg__bcast_init(&bc, 3, in3);
    const bool same = n->in[0] == n->in[1];
    for (int k = 1; k <= (same ? 1 : 2); k++) {
        sg_tensor *x = in3[k];
        if (!sg__wants_grad(x)) continue;
        const bool full = sg__bcast_full(&bc, x);
        sg_tensor *g = sg__tmp_like(x, !full);
        if (!g) return sg__status_or_nomem(x->ctx);
        where_job J = {.bc = &bc, .dtype = gout->dtype, .cdtype = cond->dtype, .c = cond->data,
                       .g = gout->data, .dst = g->data, .which = k, .pick = same ? -1 : k == 1,
                       .accum = !full, .g_step = gout->uniform ? 0 : 1};
        if (full) sg__parallel_for(x->ctx, bc.numel, SG__GRAIN, where_run, &J);
        else where_run(&J, 0, bc.numel);
        int rc = sg__accum_grad(x, g, true);
        if (rc != SG_OK) return rc;
    }
    return SG_OK;
}

/* The first element of cond other than 0 and 1 (-1 if none): a parallel test, then a
 * serial search only when one exists. */
static int64_t cond_first_bad(sg_tensor *cond)
{
    if (!sg__parallel_any(cond->ctx, cond->numel, SG__GRAIN, cond_has_bad, cond)) return -1;
    int64_t i = 0;
    while (!cond_has_bad(cond, i, i + 1)) i++;
    return i;
}

sg_tensor *sg_where(sg_tensor *cond, sg_tensor *x, sg_tensor *y)
{
    SG__CHECK_NOTNULL(cond);
    SG__CHECK_NOTNULL(x);
    SG__CHECK_NOTNULL(y);
    const char *op = "sg_where";
    if (!sg__op_check_pair(op, x, y) || !sg__op_check_float(op, x) || !sg__op_check_float(op, y))
        return NULL;
    sg_ctx *ctx = x->ctx;
    if (cond->ctx != ctx)
        return sg__fail(ctx, SG_ERR_ARG, "%s: operands belong to different contexts", op);
    if (!sg__op_check_dense(op, cond)) return NULL;
    sg_tensor *in3[3] = {cond, x, y};
    sg__bcast bc;
    char sc[96], sx[96], sy[96];
    if (!sg__bcast_init(&bc, 3, in3))
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: shapes %s, %s and %s do not broadcast", op,
                        sg__shape_str(cond, sc, sizeof sc), sg__shape_str(x, sx, sizeof sx),
                        sg__shape_str(y, sy, sizeof sy));
    const int64_t bad = cond_first_bad(cond);
    if (bad >= 0)
        return sg__fail(ctx, SG_ERR_VALUE, "%s: cond %s (%s) holds %.17g at [%lld], 0 or 1 expected",
                        op, sg__shape_str(cond, sc, sizeof sc), sg__dtype_name(cond->dtype),
                        cond_at(cond->dtype, cond->data, bad), (long long)bad);
    sg_tensor *out = sg__tmp(ctx, x->dtype, bc.ndim, bc.shape, false);
    if (!out) return NULL;
    where_job J = {.bc = &bc, .dtype = x->dtype, .cdtype = cond->dtype, .c = cond->data,
                   .x = x->data, .y = y->data, .dst = out->data};
    sg__parallel_for(ctx, bc.numel, SG__GRAIN, where_run, &J);
    if (sg__needs_grad(ctx, 2, in3 + 1)) {
        sg_node *n = sg__node_new(ctx, where_backward, op, out, 2, in3 + 1);
        if (!n) return NULL;
        n->saved[0] = cond; /* no gradient; read by the backward */
        n->accepts_uniform_gout = true;
    }
    return out;
}
