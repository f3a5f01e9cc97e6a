/* Gathers whose gradients are sparse: embedding, embedding_bag, index_select and slice.
 * Invariants: every index is validated and every allocation made before anything is
 * written (the max_norm renormalisation included); the gradient of a gathered-from tensor
 * is a COO tensor whose cost is O(rows gathered), never O(rows of the table). Where it can, a backward builds
 * that COO tensor from borrowed buffers: the index tensor (int64: no copy) and the
 * incoming gradient, which live until the tape is reset. A fused sum or mean bag builds no
 * rows at all: its optimizer sums each table row's gradient straight from the incoming
 * gradient's bag rows (bag_apply_fused). Index tensors saved by a node must
 * stay alive and unchanged until backward. The row loops defined through SG__HOT_CLONES
 * have a variant per CPU level picked at run time, all giving the same bits (core/core.h). */
#include "ops/ops.h"

#include <math.h>

static bool check_table(const char *op, const sg_tensor *W)
{
    if (W->layout != SG_DENSE) {
        sg__fail(W->ctx, SG_ERR_LAYOUT, "%s: the table must be dense", op);
        return false;
    }
    if (!sg__is_float(W->dtype)) {
        sg__fail(W->ctx, SG_ERR_DTYPE, "%s: the table must be f32 or f64", op);
        return false;
    }
    if (W->ndim != 2) {
        sg__fail(W->ctx, SG_ERR_SHAPE, "%s: the table must be 2-D (V,D), not %d-D", op, W->ndim);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- embedding */

/* The fused update of a gather (embedding, embedding_bag): W's rows named by g's indices
 * stepped by the node's optimizer (n->extra) with g's rows. */
static int gather_apply_fused(sg_node *n, sg_tensor *g)
{
    sg__fused_rows rows = {.idx = g->indices->data, .n = g->nnz, .g = g->values->data};
    return sg__fused_apply_rows(n->extra, n->in[0], &rows);
}

static int embedding_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *W = n->in[0], *idx = n->saved[0];
    sg_ctx *ctx = W->ctx;
    int64_t B = idx->numel, D = W->shape[1], pad = n->iarg[0], npad = 0;
    if (pad >= 0)
        for (int64_t b = 0; b < B; b++) npad += sg__idx_at(idx, b) == pad;
    int64_t nnz = B - npad;
    int64_t vshape[2] = {nnz, D};
    sg_tensor *ind, *val;
    if (npad == 0) { /* no copy: idx's buffer (int64) and gout's buffer */
        ind = sg__index_row_i64(idx);
        val = ind ? sg__view(ctx, W->dtype, 2, vshape, gout->data) : NULL;
    } else { /* padding rows contribute nothing: keep the other entries */
        int64_t ishape[2] = {1, nnz};
        ind = sg__tmp(ctx, SG_I64, 2, ishape, false);
        val = ind ? sg__tmp(ctx, W->dtype, 2, vshape, false) : NULL;
        if (val) {
            int64_t *oi = ind->data, k = 0;
            size_t rowbytes = (size_t)D * sg_dtype_size(W->dtype);
            for (int64_t b = 0; b < B; b++) {
                int64_t r = sg__idx_at(idx, b);
                if (r == pad) continue;
                oi[k] = r;
                memcpy((unsigned char *)val->data + (size_t)k * rowbytes,
                       (const unsigned char *)gout->data + (size_t)b * rowbytes, rowbytes);
                k++;
            }
        }
    }
    if (!val) return sg__status_or_nomem(ctx);
    sg_tensor *g = sg__coo_wrap(ctx, 2, W->shape, 1, ind, val, false);
    if (!g) return sg__status_or_nomem(ctx);
    /* Fused: W changes only after the whole backward, which other nodes may still need
     * W's current rows for. */
    if (n->extra) return sg__defer(n, gather_apply_fused, g);
    return sg__accum_grad(W, g, false);
}

/* Scales each row W[idx[b]] whose L2 norm exceeds max_norm to norm max_norm (as PyTorch:
 * by max_norm / (norm + 1e-7)). A row met twice is already within the bound. */
static void renorm_rows(sg_tensor *W, const sg_tensor *idx, double max_norm)
{
    int64_t D = W->shape[1];
    SG__DISPATCH_FLOAT(W->dtype, T, {
        T *w = W->data;
        for (int64_t b = 0; b < idx->numel; b++) {
            T *row = w + sg__idx_at(idx, b) * D;
            double s = 0;
            for (int64_t j = 0; j < D; j++) s += (double)row[j] * (double)row[j];
            double norm = sqrt(s);
            if (norm <= max_norm) continue;
            T c = (T)(max_norm / (norm + 1e-7));
            for (int64_t j = 0; j < D; j++) row[j] *= c;
        }
    });
}

/* Entries ahead at which a gather prefetches its source row (a large table's rows come
 * from memory; the prefetch overlaps those misses), and the most bytes of a row it
 * prefetches (the hardware streams the rest of a wide row). */
#define SG__GATHER_AHEAD 8
#define SG__GATHER_PREFETCH_MAX 1024

typedef struct {
    const sg_tensor *W, *idx;
    int64_t pad;
    sg_tensor *out;
} gather_job;

/* out[b] = W[idx[b]] (zeros where idx[b] == pad) for b in [lo, hi). */
SG__HOT_BODY void gather_rows__body(void *ud, int64_t lo, int64_t hi)
{
    const gather_job *job = ud;
    const sg_tensor *W = job->W, *idx = job->idx;
    const int64_t pad = job->pad;
    const int64_t D = W->shape[1];
    const size_t rowbytes = (size_t)D * sg_dtype_size(W->dtype);
    const size_t pfbytes = rowbytes < SG__GATHER_PREFETCH_MAX ? rowbytes : SG__GATHER_PREFETCH_MAX;
#define GATHER_LOOP(I)                                                                       \
    for (int64_t b = lo; b < hi; b++) {                                                      \
        if (b + SG__GATHER_AHEAD < hi)                                                       \
            sg__prefetch_row(w, (I)[b + SG__GATHER_AHEAD], rowbytes, pfbytes);               \
        int64_t r = (I)[b];                                                                  \
        T *restrict dst = y + b * D;                                                         \
        const T *restrict src = w + r * D;                                                   \
        if (r == pad)                                                                        \
            for (int64_t j = 0; j < D; j++) dst[j] = 0;                                      \
        else                                                                                 \
            for (int64_t j = 0; j < D; j++) dst[j] = src[j];                                 \
    }
    SG__DISPATCH_FLOAT(W->dtype, T, {
        const T *w = W->data;
        T *y = job->out->data;
        if (idx->dtype == SG_I64) {
            const int64_t *ix = idx->data;
            GATHER_LOOP(ix)
        } else {
            const int32_t *ix = idx->data;
            GATHER_LOOP(ix)
        }
    });
#undef GATHER_LOOP
}
SG__HOT_CLONES(gather_rows, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

sg_tensor *sg_embedding(sg_tensor *W, sg_tensor *idx, const sg_embedding_opts *opts)
{
    if (!W || !idx) return NULL;
    sg_ctx *ctx = W->ctx;
    sg_embedding_opts o = {-1, 0.0, NULL};
    if (opts) o = *opts;
    if (idx->ctx != ctx) return sg__fail(ctx, SG_ERR_ARG, "sg_embedding: tensors of different contexts");
    if (!check_table("sg_embedding", W)) return NULL;
    int64_t V = W->shape[0], D = W->shape[1];
    if (idx->ndim >= SG_MAX_DIMS)
        return sg__fail(ctx, SG_ERR_SHAPE, "sg_embedding: index tensor has %d dims (at most %d)", idx->ndim,
                        SG_MAX_DIMS - 1);
    if (o.padding_idx < -1 || o.padding_idx >= V)
        return sg__fail(ctx, SG_ERR_ARG, "sg_embedding: padding_idx %lld outside [0, %lld) and not -1",
                        (long long)o.padding_idx, (long long)V);
    if (!(o.max_norm >= 0) || isinf(o.max_norm))
        return sg__fail(ctx, SG_ERR_ARG, "sg_embedding: max_norm must be finite and >= 0");
    if (o.fused && !sg__fused_check("sg_embedding", o.fused, W)) return NULL;
    if (!sg__check_index("sg_embedding", idx, V)) return NULL;
    sg__param_sync(W, idx);
    int64_t shape[SG_MAX_DIMS];
    for (int d = 0; d < idx->ndim; d++) shape[d] = idx->shape[d];
    shape[idx->ndim] = D;
    sg_tensor *out = sg__tmp(ctx, W->dtype, idx->ndim + 1, shape, false);
    if (!out) return NULL;
    int64_t B = idx->numel, pad = o.padding_idx;
    /* The node comes before max_norm writes W: nothing can fail after the first write. */
    if (sg__needs_grad(ctx, 1, &W)) {
        sg_node *nd = sg__node_new(ctx, embedding_backward, "embedding", out, 1, &W);
        if (!nd) return NULL;
        nd->saved[0] = idx;
        nd->iarg[0] = pad;
        nd->extra = o.fused;
    }
    if (o.max_norm > 0) renorm_rows(W, idx, o.max_norm);

    gather_job job = {W, idx, pad, out};
    sg__parallel_for(ctx, B, sg__row_grain(D), gather_rows, &job);
    return out;
}

/* ---------------------------------------------------------------- embedding_bag */

/* Bag b covers entries [bag_start(b), bag_start(b + 1)) of idx (with include_last_offset,
 * offsets' last entry is N, so the rule holds for the last bag too). */
static int64_t bag_start(const sg_tensor *offsets, int64_t b, int64_t n)
{
    return b < offsets->numel ? sg__idx_at(offsets, b) : n;
}

/* Entries of [s, e) that are not padding. */
static int64_t bag_count(const sg_tensor *idx, int64_t pad, int64_t s, int64_t e)
{
    int64_t c = e - s;
    if (pad >= 0)
        for (int64_t i = s; i < e; i++) c -= sg__idx_at(idx, i) == pad;
    return c;
}

typedef struct {
    const sg_tensor *gout, *psw, *idx, *offsets, *argmax;
    sg_tensor *val;
    int mode;
    int64_t pad, D, N;
    bool divide; /* mean mode with the true gradient: a bag's rows get g / its count */
} bag_grad_job;

/* W's gradient rows of bags [lo, hi): entry i of bag b gets c * gout[b] (c: 1, the
 * entry's weight or 1 / the bag's count), or in max mode the elements it was the max of. */
SG__HOT_BODY void bag_grad_rows__body(void *ud, int64_t lo, int64_t hi)
{
    const bag_grad_job *jg = ud;
    const int64_t D = jg->D, N = jg->N;
    SG__DISPATCH_FLOAT(jg->val->dtype, T, {
        const T *g = jg->gout->data;
        const T *pw = jg->psw ? jg->psw->data : NULL;
        T *v = jg->val->data;
        for (int64_t b = lo; b < hi; b++) {
            const T *gb = g + b * D;
            if (jg->mode == SG_BAG_MAX) {
                const int64_t *am = (const int64_t *)jg->argmax->data + b * D;
                for (int64_t j = 0; j < D; j++)
                    if (am[j] >= 0) v[am[j] * D + j] = gb[j];
                continue;
            }
            int64_t s = bag_start(jg->offsets, b, N);
            int64_t e = bag_start(jg->offsets, b + 1, N);
            T inv = jg->divide ? (T)1 / (T)bag_count(jg->idx, jg->pad, s, e) : (T)1;
            for (int64_t i = s; i < e; i++) {
                T c = jg->divide ? inv : pw ? pw[i] : (T)1;
                for (int64_t j = 0; j < D; j++) v[i * D + j] = c * gb[j];
            }
        }
    });
}
SG__HOT_CLONES(bag_grad_rows, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* The fused update of a sum or mean bag without per-sample weights (B > 0, so that every
 * entry is in a bag): entry i's gradient row is its bag's row of x, the output gradient
 * (mean mode with the true gradient: already divided by each bag's count), so the
 * optimizer is given the rows gathered (sg__fused_rows: row k = x[xrow[k]]) and sums each
 * table row's entries straight from x, in entry order as the COO rows would be summed,
 * instead of N x D rows written out. Padding entries are left out. It runs twice (check,
 * then apply): its row lists are built in the step arena each time, O(N). */
static int bag_apply_fused(sg_node *n, sg_tensor *x)
{
    sg_tensor *W = n->in[0], *idx = n->saved[0];
    const sg_tensor *offsets = n->saved[1];
    sg_ctx *ctx = W->ctx;
    const int64_t pad = n->iarg[1], B = n->iarg[2], N = idx->numel;
    const bool copy = idx->dtype != SG_I64 || pad >= 0; /* else the rows are idx itself */
    size_t bytes = (size_t)(N > 0 ? N : 1) * sizeof(int64_t);
    int64_t *xrow = sg__arena_alloc(ctx, bytes);
    int64_t *rows = copy && xrow ? sg__arena_alloc(ctx, bytes) : NULL;
    if (!xrow || (copy && !rows)) return sg__status_or_nomem(ctx);
    int64_t k = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t e = bag_start(offsets, b + 1, N);
        for (int64_t i = bag_start(offsets, b, N); i < e; i++) {
            if (copy) {
                const int64_t r = sg__idx_at(idx, i);
                if (r == pad) continue;
                rows[k] = r;
            }
            xrow[k++] = b;
        }
    }
    sg__fused_rows r = {.idx = copy ? rows : idx->data, .n = k, .x = x->data, .xrow = xrow, .nx = B};
    return sg__fused_apply_rows(n->extra, W, &r);
}

typedef struct {
    const sg_tensor *gout, *idx, *offsets;
    sg_tensor *x;
    int64_t pad, D, N;
} bag_mean_job;

/* Rows [lo, hi) of x = gout divided by each bag's count (zeros for a bag of none). */
static void bag_mean_rows(void *ud, int64_t lo, int64_t hi)
{
    const bag_mean_job *jm = ud;
    const int64_t D = jm->D, N = jm->N;
    SG__DISPATCH_FLOAT(jm->x->dtype, T, {
        const T *g = jm->gout->data;
        T *x = jm->x->data;
        for (int64_t b = lo; b < hi; b++) {
            const int64_t s = bag_start(jm->offsets, b, N);
            const int64_t cnt = bag_count(jm->idx, jm->pad, s, bag_start(jm->offsets, b + 1, N));
            const T inv = cnt ? (T)1 / (T)cnt : (T)0; /* as bag_grad_rows: c * g in T */
            for (int64_t j = 0; j < D; j++) x[b * D + j] = inv * g[b * D + j];
        }
    });
}

/* Node: in W (and per-sample weights), saved[0] idx, saved[1] offsets or, in max mode,
 * the argmax (B,D) (entry of idx giving each output element, -1 for none); iarg mode,
 * padding_idx, B, the grad rule (sg_bag_grad); extra the fused optimizer or NULL. */
static int bag_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *W = n->in[0], *psw = n->n_in > 1 ? n->in[1] : NULL;
    sg_tensor *idx = n->saved[0];
    sg_ctx *ctx = W->ctx;
    const int mode = (int)n->iarg[0];
    const int64_t pad = n->iarg[1], B = n->iarg[2], N = idx->numel, D = W->shape[1];
    const sg_tensor *offsets = mode == SG_BAG_MAX ? NULL : n->saved[1];
    const sg_tensor *argmax = mode == SG_BAG_MAX ? n->saved[1] : NULL;
    const bool divide = mode == SG_BAG_MEAN && n->iarg[3] == SG_BAG_GRAD_TRUE;
    if (sg__wants_grad(W) && n->extra && mode != SG_BAG_MAX && !psw && B > 0) {
        /* fused, the rows gathered from the output gradient: no N x D rows */
        sg_tensor *x = gout;
        if (divide) {
            int64_t xshape[2] = {B, D};
            x = sg__tmp(ctx, W->dtype, 2, xshape, false);
            if (!x) return sg__status_or_nomem(ctx);
            bag_mean_job jm = {gout, idx, offsets, x, pad, D, N};
            sg__parallel_for(ctx, B, sg__row_grain(D), bag_mean_rows, &jm);
        }
        /* W changes only after the whole backward (other nodes may need its rows) */
        int rc = sg__defer(n, bag_apply_fused, x);
        if (rc) return rc;
    } else if (sg__wants_grad(W)) { /* one COO row per looked-up entry that is not padding: O(N D) */
        int64_t vshape[2] = {N, D};
        sg_tensor *val = sg__tmp(ctx, W->dtype, 2, vshape, mode == SG_BAG_MAX || B == 0);
        const int64_t npad = pad >= 0 ? N - bag_count(idx, pad, 0, N) : 0;
        int64_t ishape[2] = {1, N - npad};
        sg_tensor *ind = !val ? NULL : npad ? sg__tmp(ctx, SG_I64, 2, ishape, false) : sg__index_row_i64(idx);
        if (!ind) return sg__status_or_nomem(ctx);
        /* Each bag writes its own entries' rows: parallel over bags, the same bits for any
         * thread count. */
        bag_grad_job jg = {gout, psw, idx, offsets, argmax, val, mode, pad, D, N, divide};
        sg__parallel_for(ctx, B, sg__row_grain(B ? N * D / B + D : D), bag_grad_rows, &jg);
        SG__DISPATCH_FLOAT(W->dtype, T, {
            T *v = val->data;
            if (npad) { /* keep the entries that are not padding, in order */
                int64_t *oi = ind->data;
                int64_t k = 0;
                for (int64_t i = 0; i < N; i++) {
                    int64_t r = sg__idx_at(idx, i);
                    if (r == pad) continue;
                    oi[k] = r;
                    if (k != i) memcpy(v + k * D, v + i * D, (size_t)D * sizeof(T));
                    k++;
                }
            }
        });
        int64_t kshape[2] = {N - npad, D};
        sg_tensor *kept = npad ? sg__view(ctx, W->dtype, 2, kshape, val->data) : val;
        sg_tensor *gw = kept ? sg__coo_wrap(ctx, 2, W->shape, 1, ind, kept, false) : NULL;
        if (!gw) return sg__status_or_nomem(ctx);
        /* Fused: W changes only after the whole backward (this node's weights' gradient
         * and other nodes may still need W's current rows). */
        int rc = n->extra ? sg__defer(n, gather_apply_fused, gw) : sg__accum_grad(W, gw, false);
        if (rc) return rc;
    }
    if (sg__wants_grad(psw)) { /* d/dw_i = <gout[bag(i)], W[idx_i]>, 0 for padding */
        sg_tensor *gp = sg__tmp_like(psw, true);
        if (!gp) return sg__status_or_nomem(ctx);
        SG__DISPATCH_FLOAT(W->dtype, T, {
            const T *g = gout->data;
            const T *w = W->data;
            T *p = gp->data;
            for (int64_t b = 0; b < B; b++) {
                int64_t s = bag_start(offsets, b, N);
                int64_t e = bag_start(offsets, b + 1, N);
                for (int64_t i = s; i < e; i++) {
                    int64_t r = sg__idx_at(idx, i);
                    if (r == pad) continue;
                    const T *row = w + r * D;
                    T acc = 0;
                    for (int64_t j = 0; j < D; j++) acc += g[b * D + j] * row[j];
                    p[i] = acc;
                }
            }
        });
        int rc = sg__accum_grad(psw, gp, true);
        if (rc) return rc;
    }
    return SG_OK;
}

typedef struct {
    const sg_tensor *W, *idx, *offsets, *psw;
    int mode;
    int64_t pad;
    sg_tensor *out, *argmax;
} bag_job;

/* Rows looked up this many entries ahead are prefetched: a bag's rows are scattered over
 * a large table, and without it the loop waits on each one's cache miss in turn. */
#define SG__BAG_AHEAD 8
#define SG__BAG_PREFETCH_MAX 1024

/* Prefetches the row of entry i of idx when i < end (entries past the job's are not its).
 * A macro, not a function: GCC marks a function whose only effect is a prefetch as const
 * and drops the calls to it when it has not inlined it first. */
#define SG__BAG_PREFETCH(w, idx, i, end, rowbytes)                                         \
    do {                                                                                  \
        if ((i) < (end)) {                                                                \
            const char *p_ = (w) + (size_t)sg__idx_at((idx), (i)) * (rowbytes);            \
            size_t n_ = (rowbytes) < SG__BAG_PREFETCH_MAX ? (rowbytes)                     \
                                                          : SG__BAG_PREFETCH_MAX;         \
            SG__FOR_LINES(q_, p_, n_) SG__PREFETCH(q_);                                    \
        }                                                                                 \
    } while (0)

/* Sums bag b's rows (entries [s, e), padding left out) of a D == DC table into o, with the
 * sum kept in registers (DC a constant: the compiler unrolls it) and stored once. The same
 * bits as the general loop, which adds 1 * row[j] to o[j] starting from zero. */
#define SG__BAG_SUM_FIXED(T, DC, w, wbytes, idx, pad, s, e, end, rowbytes, o)                \
    do {                                                                                  \
        T acc_[DC];                                                                       \
        for (int j_ = 0; j_ < (DC); j_++) acc_[j_] = 0;                                   \
        for (int64_t i_ = (s); i_ < (e); i_++) {                                          \
            SG__BAG_PREFETCH(wbytes, idx, i_ + SG__BAG_AHEAD, end, rowbytes);             \
            const int64_t r_ = sg__idx_at(idx, i_);                                       \
            if (r_ == (pad)) continue;                                                    \
            const T *row_ = (w) + r_ * (DC);                                              \
            for (int j_ = 0; j_ < (DC); j_++) acc_[j_] += row_[j_];                       \
        }                                                                                 \
        for (int j_ = 0; j_ < (DC); j_++) (o)[j_] = acc_[j_];                             \
    } while (0)

/* Forward of bags [lo, hi): out rows (zeroed before), argmax (max mode) filled. */
SG__HOT_BODY void bag_forward__body(void *ud, int64_t lo, int64_t hi)
{
    const bag_job *jb = ud;
    const sg_tensor *idx = jb->idx;
    const int64_t N = idx->numel, D = jb->W->shape[1], pad = jb->pad;
    const int64_t end = bag_start(jb->offsets, hi, N); /* the job's last entry + 1 */
    const size_t rowbytes = (size_t)D * sg_dtype_size(jb->W->dtype);
    const char *wbytes = jb->W->data;
    SG__DISPATCH_FLOAT(jb->W->dtype, T, {
        const T *w = jb->W->data;
        const T *pw = jb->psw ? jb->psw->data : NULL;
        for (int64_t b = lo; b < hi; b++) {
            int64_t s = bag_start(jb->offsets, b, N);
            int64_t e = bag_start(jb->offsets, b + 1, N);
            T *o = (T *)jb->out->data + b * D;
            if (jb->mode == SG_BAG_MAX) {
                int64_t *am = (int64_t *)jb->argmax->data + b * D;
                for (int64_t j = 0; j < D; j++) am[j] = -1;
                for (int64_t i = s; i < e; i++) {
                    SG__BAG_PREFETCH(wbytes, idx, i + SG__BAG_AHEAD, end, rowbytes);
                    int64_t r = sg__idx_at(idx, i);
                    if (r == pad) continue;
                    const T *row = w + r * D;
                    for (int64_t j = 0; j < D; j++)
                        if (am[j] < 0 || row[j] > o[j]) {
                            o[j] = row[j];
                            am[j] = i;
                        }
                }
                continue;
            }
            if (!pw && D == 64) {
                SG__BAG_SUM_FIXED(T, 64, w, wbytes, idx, pad, s, e, end, rowbytes, o);
            } else if (!pw && D == 32) {
                SG__BAG_SUM_FIXED(T, 32, w, wbytes, idx, pad, s, e, end, rowbytes, o);
            } else if (!pw && D == 128) {
                SG__BAG_SUM_FIXED(T, 128, w, wbytes, idx, pad, s, e, end, rowbytes, o);
            } else {
                for (int64_t i = s; i < e; i++) {
                    SG__BAG_PREFETCH(wbytes, idx, i + SG__BAG_AHEAD, end, rowbytes);
                    int64_t r = sg__idx_at(idx, i);
                    if (r == pad) continue;
                    const T *row = w + r * D;
                    T c = pw ? pw[i] : (T)1;
                    for (int64_t j = 0; j < D; j++) o[j] += c * row[j];
                }
            }
            int64_t cnt = jb->mode == SG_BAG_MEAN ? bag_count(idx, pad, s, e) : 0;
            if (cnt > 0)
                for (int64_t j = 0; j < D; j++) o[j] /= (T)cnt;
        }
    });
}
SG__HOT_CLONES(bag_forward, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

sg_tensor *sg_embedding_bag(sg_tensor *W, sg_tensor *idx, sg_tensor *offsets,
                            const sg_embedding_bag_opts *opts)
{
    static const char op[] = "sg_embedding_bag";
    if (!W || !idx || !offsets) return NULL;
    sg_ctx *ctx = W->ctx;
    sg_embedding_bag_opts o = SG_EMBEDDING_BAG_OPTS_DEFAULT;
    if (opts) o = *opts;
    sg_tensor *psw = o.per_sample_weights;
    const sg_bag_mode mode = o.mode;
    if (idx->ctx != ctx || offsets->ctx != ctx || (psw && psw->ctx != ctx))
        return sg__fail(ctx, SG_ERR_ARG, "%s: tensors of different contexts", op);
    if (!check_table(op, W)) return NULL;
    if (mode != SG_BAG_SUM && mode != SG_BAG_MEAN && mode != SG_BAG_MAX)
        return sg__fail(ctx, SG_ERR_ARG, "%s: unknown mode %d", op, (int)mode);
    if (o.grad != SG_BAG_GRAD_TRUE && o.grad != SG_BAG_GRAD_WORD2VEC)
        return sg__fail(ctx, SG_ERR_ARG, "%s: unknown grad rule %d", op, (int)o.grad);
    if (o.grad == SG_BAG_GRAD_WORD2VEC && mode != SG_BAG_MEAN)
        return sg__fail(ctx, SG_ERR_ARG, "%s: SG_BAG_GRAD_WORD2VEC needs mode SG_BAG_MEAN", op);
    if (idx->ndim != 1 || offsets->ndim != 1)
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: idx and offsets must be 1-D", op);
    int64_t V = W->shape[0], D = W->shape[1], N = idx->numel;
    if (o.padding_idx < -1 || o.padding_idx >= V)
        return sg__fail(ctx, SG_ERR_ARG, "%s: padding_idx %lld outside [0, %lld) and not -1", op,
                        (long long)o.padding_idx, (long long)V);
    if (o.include_last_offset && offsets->numel < 1)
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: include_last_offset needs at least one offset", op);
    const int64_t B = offsets->numel - (o.include_last_offset ? 1 : 0);
    if (o.fused && !sg__fused_check(op, o.fused, W)) return NULL;
    if (!sg__check_index(op, idx, V)) return NULL;
    if (!sg__check_index("sg_embedding_bag (offsets)", offsets, N + 1)) return NULL;
    sg__param_sync(W, idx);
    if (offsets->numel > 0 && sg__idx_at(offsets, 0) != 0)
        return sg__fail(ctx, SG_ERR_ARG, "%s: offsets[0] must be 0", op);
    for (int64_t b = 1; b < offsets->numel; b++)
        if (sg__idx_at(offsets, b) < sg__idx_at(offsets, b - 1))
            return sg__fail(ctx, SG_ERR_ARG, "%s: offsets decrease at %lld", op, (long long)b);
    if (o.include_last_offset && sg__idx_at(offsets, B) != N)
        return sg__fail(ctx, SG_ERR_ARG, "%s: with include_last_offset the last offset must be %lld, not %lld",
                        op, (long long)N, (long long)sg__idx_at(offsets, B));
    if (psw) {
        if (mode != SG_BAG_SUM)
            return sg__fail(ctx, SG_ERR_ARG, "%s: per_sample_weights need mode SG_BAG_SUM", op);
        if (psw->layout != SG_DENSE || psw->dtype != W->dtype)
            return sg__fail(ctx, SG_ERR_DTYPE, "%s: per_sample_weights must be dense, of W's dtype", op);
        if (psw->ndim != 1 || psw->numel != N)
            return sg__fail(ctx, SG_ERR_SHAPE, "%s: per_sample_weights must have shape (%lld)", op,
                            (long long)N);
    }
    int64_t shape[2] = {B, D};
    sg_tensor *out = sg__tmp(ctx, W->dtype, 2, shape, true);
    sg_tensor *argmax = NULL;
    if (out && mode == SG_BAG_MAX) argmax = sg__tmp(ctx, SG_I64, 2, shape, false);
    if (!out || (mode == SG_BAG_MAX && !argmax)) return NULL;
    bag_job jb = {W, idx, offsets, psw, (int)mode, o.padding_idx, out, argmax};
    sg__parallel_for(ctx, B, sg__row_grain(B ? N * D / B + D : D), bag_forward, &jb);
    sg_tensor *in[2] = {W, psw};
    int n_in = psw ? 2 : 1;
    if (sg__needs_grad(ctx, n_in, in)) {
        sg_node *nd = sg__node_new(ctx, bag_backward, "embedding_bag", out, n_in, in);
        if (!nd) return NULL;
        nd->saved[0] = idx;
        nd->saved[1] = mode == SG_BAG_MAX ? argmax : offsets;
        nd->iarg[0] = mode;
        nd->iarg[1] = o.padding_idx;
        nd->iarg[2] = B;
        nd->iarg[3] = o.grad;
        nd->extra = o.fused;
    }
    return out;
}

/* ---------------------------------------------------------------- index_select */

static int index_select_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0], *idx = n->saved[0];
    sg_ctx *ctx = x->ctx;
    int dim = (int)n->iarg[0];
    if (dim == 0 && gout->layout == SG_DENSE) { /* rows idx, values gout: no copy for int64 */
        sg_tensor *ind = sg__index_row_i64(idx);
        sg_tensor *g = ind ? sg__coo_wrap(ctx, x->ndim, x->shape, 1, ind, gout, false) : NULL;
        return g ? sg__accum_grad(x, g, false) : sg__status_or_nomem(ctx);
    }
    if (dim == 0) { /* COO gout: map its leading index through idx */
        int64_t nnz = gout->nnz, ishape[2] = {gout->sparse_dim, nnz};
        sg_tensor *ind = sg__tmp(ctx, SG_I64, 2, ishape, false);
        if (!ind) return sg__status_or_nomem(ctx);
        int64_t *d = ind->data;
        const int64_t *s = gout->indices->data;
        for (int64_t e = 0; e < nnz; e++) d[e] = sg__idx_at(idx, s[e]);
        if (gout->sparse_dim > 1)
            memcpy(d + nnz, s + nnz, (size_t)((gout->sparse_dim - 1) * nnz) * sizeof *d);
        sg_tensor *g = sg__coo_wrap(ctx, x->ndim, x->shape, gout->sparse_dim, ind, gout->values, false);
        return g ? sg__accum_grad(x, g, false) : sg__status_or_nomem(ctx);
    }
    /* Another dim: a dense gradient, scattered per outer block in idx order. */
    sg_tensor *g = sg__tmp_like(x, true);
    if (!g) return sg__status_or_nomem(ctx);
    int64_t outer = sg__prod(x->shape, 0, dim), len = x->shape[dim], inner = sg__prod(x->shape, dim + 1, x->ndim);
    int64_t K = idx->numel;
    SG__DISPATCH_FLOAT(x->dtype, T, {
        const T *go = gout->data;
        T *gx = g->data;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < K; k++) {
                T *dst = gx + (o * len + sg__idx_at(idx, k)) * inner;
                const T *src = go + (o * K + k) * inner;
                for (int64_t j = 0; j < inner; j++) dst[j] += src[j];
            }
    });
    return sg__accum_grad(x, g, true);
}

sg_tensor *sg_index_select(sg_tensor *x, int dim, sg_tensor *idx)
{
    if (!x || !idx) return NULL;
    sg_ctx *ctx = x->ctx;
    if (idx->ctx != ctx) return sg__fail(ctx, SG_ERR_ARG, "sg_index_select: tensors of different contexts");
    if (x->layout != SG_DENSE) return sg__fail(ctx, SG_ERR_LAYOUT, "sg_index_select: dense x needed");
    if (!sg__is_float(x->dtype)) return sg__fail(ctx, SG_ERR_DTYPE, "sg_index_select: float x needed");
    int d = dim < 0 ? dim + x->ndim : dim;
    if (d < 0 || d >= x->ndim)
        return sg__fail(ctx, SG_ERR_ARG, "sg_index_select: dim %d out of range for %d-D x", dim, x->ndim);
    if (idx->ndim != 1) return sg__fail(ctx, SG_ERR_SHAPE, "sg_index_select: idx must be 1-D");
    if (!sg__check_index("sg_index_select", idx, x->shape[d])) return NULL;
    sg__param_sync(x, d == 0 ? idx : NULL);
    int64_t shape[SG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    int64_t K = idx->numel;
    shape[d] = K;
    sg_tensor *out = sg__tmp(ctx, x->dtype, x->ndim, shape, false);
    if (!out) return NULL;
    int64_t outer = sg__prod(x->shape, 0, d), len = x->shape[d], inner = sg__prod(x->shape, d + 1, x->ndim);
    size_t bytes = (size_t)inner * sg_dtype_size(x->dtype);
    const unsigned char *src = x->data;
    unsigned char *dst = out->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < K; k++)
            memcpy(dst + (size_t)(o * K + k) * bytes, src + (size_t)(o * len + sg__idx_at(idx, k)) * bytes, bytes);
    if (sg__needs_grad(ctx, 1, &x)) {
        sg_node *nd = sg__node_new(ctx, index_select_backward, "index_select", out, 1, &x);
        if (!nd) return NULL;
        nd->saved[0] = idx;
        nd->iarg[0] = d;
        nd->accepts_sparse_gout = d == 0;
    }
    return out;
}

/* ---------------------------------------------------------------- slice */

static int slice_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    sg_ctx *ctx = x->ctx;
    int64_t start = n->iarg[0];
    int sd = gout->layout == SG_COO ? gout->sparse_dim : 1;
    int64_t nnz = gout->layout == SG_COO ? gout->nnz : gout->shape[0];
    int64_t ishape[2] = {sd, nnz};
    sg_tensor *ind = sg__tmp(ctx, SG_I64, 2, ishape, false);
    if (!ind) return sg__status_or_nomem(ctx);
    int64_t *d = ind->data;
    sg_tensor *val = gout;
    bool coalesced = true;
    if (gout->layout == SG_COO) { /* shift the leading index by start */
        memcpy(d, gout->indices->data, (size_t)(sd * nnz) * sizeof *d);
        for (int64_t e = 0; e < nnz; e++) d[e] += start;
        val = gout->values;
        coalesced = gout->coalesced;
    } else {
        for (int64_t e = 0; e < nnz; e++) d[e] = start + e;
    }
    sg_tensor *g = sg__coo_wrap(ctx, x->ndim, x->shape, sd, ind, val, coalesced);
    return g ? sg__accum_grad(x, g, false) : sg__status_or_nomem(ctx);
}

sg_tensor *sg_slice(sg_tensor *x, int64_t start, int64_t end)
{
    if (!x) return NULL;
    sg_ctx *ctx = x->ctx;
    if (x->layout != SG_DENSE) return sg__fail(ctx, SG_ERR_LAYOUT, "sg_slice: dense x needed");
    if (x->ndim < 1) return sg__fail(ctx, SG_ERR_SHAPE, "sg_slice: x must have at least one dim");
    if (start < 0 || start > end || end > x->shape[0])
        return sg__fail(ctx, SG_ERR_INDEX, "sg_slice: [%lld, %lld) is not a range within [0, %lld]",
                        (long long)start, (long long)end, (long long)x->shape[0]);
    sg__param_sync(x, NULL); /* a view: its rows are read later, by any op */
    int64_t shape[SG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[0] = end - start;
    size_t rowbytes = (size_t)sg__prod(x->shape, 1, x->ndim) * sg_dtype_size(x->dtype);
    sg_tensor *out = sg__view(ctx, x->dtype, x->ndim, shape, (unsigned char *)x->data + (size_t)start * rowbytes);
    if (!out) return NULL;
    if (sg__needs_grad(ctx, 1, &x)) {
        sg_node *nd = sg__node_new(ctx, slice_backward, "slice", out, 1, &x);
        if (!nd) return NULL;
        nd->iarg[0] = start;
        nd->accepts_sparse_gout = true;
    }
    return out;
}
