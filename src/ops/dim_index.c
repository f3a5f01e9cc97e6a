/* Indexing along one dim with dense gradients: gather (torch.gather) and narrow. (The
 * gathers whose gradients are sparse, along dim 0 of a table, are in gather.c.)
 *
 * Invariants: every index is validated before anything is written. gather's backward is
 * a scatter-add into a zeroed gradient of x's shape without atomics: the index is cut into
 * boxes along a dim p other than `dim` (boxes write disjoint parts of x's gradient) and
 * each box is walked in flat index order, so each gradient element adds its terms in
 * ascending order of their coordinate along `dim`, whatever the boxes and the thread
 * count. narrow copies; its backward writes the gradient's narrowed range from the
 * incoming gradient and zeros around it, block by block. */
#include "ops/ops.h"

/* ---------------------------------------------------------------- gather */

/* A walk over a box of the index (its shape with dim p fixed for the backward): c is the
 * box coordinate, e the index's flat position, xo the offset into x without dim's term. */
typedef struct {
    int nd, dim;
    int64_t box[SG_MAX_DIMS], ist[SG_MAX_DIMS], xst[SG_MAX_DIMS];
} gather_geom;

typedef struct {
    int64_t c[SG_MAX_DIMS];
    int64_t e, xo;
} gather_pos;

/* The position of flat box element k, with the box's origin at index position e0 and x
 * offset x0. */
static gather_pos pos_at(const gather_geom *G, int64_t k, int64_t e0, int64_t x0)
{
    gather_pos p = {{0}, e0, x0};
    for (int d = G->nd - 1; d >= 0; d--) {
        p.c[d] = k % G->box[d];
        k /= G->box[d];
        p.e += p.c[d] * G->ist[d];
        if (d != G->dim) p.xo += p.c[d] * G->xst[d];
    }
    return p;
}

/* The next position in the box's row-major order (the box is never empty here). */
static inline void pos_next(const gather_geom *G, gather_pos *p)
{
    for (int d = G->nd - 1; d >= 0; d--) {
        const int64_t xs = d == G->dim ? 0 : G->xst[d];
        p->e += G->ist[d];
        p->xo += xs;
        if (++p->c[d] < G->box[d]) return;
        p->e -= p->c[d] * G->ist[d];
        p->xo -= p->c[d] * xs;
        p->c[d] = 0;
    }
}

typedef struct {
    gather_geom G;
    int part;           /* backward: the dim the boxes are cut along, -1: one box */
    const sg_tensor *idx;
    const void *src;    /* forward: x; backward: the incoming gradient */
    void *dst;          /* forward: out; backward: x's gradient (zeroed) */
    sg_dtype dtype;
} gather_job;

/* out[e] = x[xo + idx[e] * xst[dim]] for the flat index positions e in [lo, hi). */
static void gather_fwd(void *ud, int64_t lo, int64_t hi)
{
    const gather_job *J = ud;
    const gather_geom *G = &J->G;
    gather_pos p = pos_at(G, lo, 0, 0);
    const int64_t step = G->xst[G->dim];
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *x = J->src;
        T *y = J->dst;
        for (int64_t k = lo; k < hi; k++) {
            y[p.e] = x[p.xo + sg__idx_at(J->idx, p.e) * step];
            if (k + 1 < hi) pos_next(G, &p);
        }
    });
}

/* gx[xo + idx[e] * xst[dim]] += g[e] over boxes [lo, hi) (index slices along part). */
static void gather_bwd(void *ud, int64_t lo, int64_t hi)
{
    const gather_job *J = ud;
    const gather_geom *G = &J->G;
    const int64_t n = sg__prod(G->box, 0, G->nd), step = G->xst[G->dim];
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *g = J->src;
        T *gx = J->dst;
        for (int64_t b = lo; b < hi; b++) {
            const int64_t e0 = J->part < 0 ? 0 : b * G->ist[J->part];
            const int64_t x0 = J->part < 0 ? 0 : b * G->xst[J->part];
            gather_pos p = pos_at(G, 0, e0, x0);
            for (int64_t k = 0; k < n; k++) {
                gx[p.xo + sg__idx_at(J->idx, p.e) * step] += g[p.e];
                if (k + 1 < n) pos_next(G, &p);
            }
        }
    });
}

/* x's and idx's strides; the box is idx's shape. */
static void gather_geom_init(gather_geom *G, const sg_tensor *x, const sg_tensor *idx, int dim)
{
    G->nd = x->ndim;
    G->dim = dim;
    for (int d = 0; d < x->ndim; d++) {
        G->box[d] = idx->shape[d];
        G->ist[d] = sg__prod(idx->shape, d + 1, idx->ndim);
        G->xst[d] = sg__prod(x->shape, d + 1, x->ndim);
    }
}

/* iarg[0]: dim; saved[0]: the index. */
static int gather_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0], *idx = n->saved[0];
    sg_tensor *gx = sg__tmp_like(x, true);
    if (!gx) return sg__status_or_nomem(x->ctx);
    gather_job J = {.idx = idx, .src = gout->data, .dst = gx->data, .dtype = x->dtype, .part = -1};
    gather_geom_init(&J.G, x, idx, (int)n->iarg[0]);
    for (int d = 0; d < x->ndim; d++) /* the longest other dim cuts the most boxes */
        if (d != J.G.dim && (J.part < 0 || idx->shape[d] > idx->shape[J.part])) J.part = d;
    int64_t boxes = 1;
    if (J.part >= 0) {
        boxes = idx->shape[J.part];
        J.G.box[J.part] = 1;
    }
    if (idx->numel > 0)
        sg__parallel_for(x->ctx, boxes, sg__row_grain(idx->numel / boxes), gather_bwd, &J);
    return sg__accum_grad(x, gx, true);
}

/* idx: same rank as x, idx.size(d) <= x.size(d) for d != dim, entries in [0, x.size(dim)). */
static bool gather_check(const char *op, const sg_tensor *x, int d, const sg_tensor *idx)
{
    sg_ctx *ctx = x->ctx;
    char sx[96], si[96];
    if (idx->ctx != ctx) {
        sg__fail(ctx, SG_ERR_ARG, "%s: x and index belong to different contexts", op);
        return false;
    }
    bool fits = idx->ndim == x->ndim;
    for (int k = 0; fits && k < x->ndim; k++)
        fits = k == d || idx->shape[k] <= x->shape[k];
    if (!fits) {
        sg__fail(ctx, SG_ERR_SHAPE, "%s: index %s does not fit x %s along dim %d (same rank, "
                 "no larger in the other dims expected)", op, sg__shape_str(idx, si, sizeof si),
                 sg__shape_str(x, sx, sizeof sx), d);
        return false;
    }
    return sg__check_index(op, idx, x->shape[d]);
}

sg_tensor *sg_gather(sg_tensor *x, int dim, sg_tensor *index)
{
    if (!x || !index) return NULL;
    const char *op = "sg_gather";
    int d;
    if (!sg__op_check_float(op, x) || !sg__op_check_dim(op, x, dim, &d) ||
        !gather_check(op, x, d, index))
        return NULL;
    sg_tensor *out = sg__tmp(x->ctx, x->dtype, index->ndim, index->shape, false);
    if (!out) return NULL;
    gather_job J = {.idx = index, .src = x->data, .dst = out->data, .dtype = x->dtype, .part = -1};
    gather_geom_init(&J.G, x, index, d);
    sg__parallel_for(x->ctx, index->numel, SG__GRAIN, gather_fwd, &J);
    if (sg__needs_grad(x->ctx, 1, &x)) {
        sg_node *n = sg__node_new(x->ctx, gather_backward, op, out, 1, &x);
        if (!n) return NULL;
        n->saved[0] = index;
        n->iarg[0] = d;
    }
    return out;
}

/* ---------------------------------------------------------------- narrow */

/* x viewed as (outer, len, inner), the narrow as (outer, length, inner). Forward: the
 * range of each block out of x. Backward: each block of x's gradient gets zeros, the
 * incoming gradient's block, zeros. Work items are the outer blocks. */
typedef struct {
    int64_t len, inner, start, length;
    size_t elem;
    const char *src;
    char *dst;
    bool backward;
} narrow_job;

static void narrow_run(void *ud, int64_t lo, int64_t hi)
{
    const narrow_job *J = ud;
    const size_t full = (size_t)(J->len * J->inner) * J->elem;
    const size_t head = (size_t)(J->start * J->inner) * J->elem;
    const size_t part = (size_t)(J->length * J->inner) * J->elem;
    for (int64_t o = lo; o < hi; o++) {
        if (!J->backward) {
            if (part) memcpy(J->dst + (size_t)o * part, J->src + (size_t)o * full + head, part);
            continue;
        }
        char *g = J->dst + (size_t)o * full;
        memset(g, 0, head);
        if (part) memcpy(g + head, J->src + (size_t)o * part, part);
        memset(g + head + part, 0, full - head - part);
    }
}

/* iarg[0]: dim, iarg[1]: start, iarg[2]: length. */
static int narrow_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    sg_tensor *gx = sg__tmp_like(x, false);
    if (!gx) return sg__status_or_nomem(x->ctx);
    int64_t outer, len, inner;
    sg__op_split(x, (int)n->iarg[0], &outer, &len, &inner);
    narrow_job J = {len, inner, n->iarg[1], n->iarg[2], sg_dtype_size(x->dtype),
                    gout->data, gx->data, true};
    sg__parallel_for(x->ctx, outer, sg__row_grain(len * inner), narrow_run, &J);
    return sg__accum_grad(x, gx, true);
}

sg_tensor *sg_narrow(sg_tensor *x, int dim, int64_t start, int64_t length)
{
    SG__CHECK_NOTNULL(x);
    const char *op = "sg_narrow";
    int d;
    if (!sg__op_check_float(op, x) || !sg__op_check_dim(op, x, dim, &d)) return NULL;
    const int64_t size = x->shape[d], s = start < 0 ? start + size : start;
    if (s < 0 || s > size || length < 0 || length > size - s) {
        char sx[96];
        return sg__fail(x->ctx, SG_ERR_INDEX, "%s: start %lld, length %lld is not a range within "
                        "dim %d of %s", op, (long long)start, (long long)length, d,
                        sg__shape_str(x, sx, sizeof sx));
    }
    int64_t shape[SG_MAX_DIMS], outer, len, inner;
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = length;
    sg_tensor *out = sg__tmp(x->ctx, x->dtype, x->ndim, shape, false);
    if (!out) return NULL;
    sg__op_split(x, d, &outer, &len, &inner);
    narrow_job J = {len, inner, s, length, sg_dtype_size(x->dtype), x->data, out->data, false};
    sg__parallel_for(x->ctx, outer, sg__row_grain(length * inner), narrow_run, &J);
    if (sg__needs_grad(x->ctx, 1, &x)) {
        sg_node *n = sg__node_new(x->ctx, narrow_backward, op, out, 1, &x);
        if (!n) return NULL;
        n->iarg[0] = d;
        n->iarg[1] = s;
        n->iarg[2] = length;
    }
    return out;
}
