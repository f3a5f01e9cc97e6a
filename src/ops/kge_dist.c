/* sg_cdist, sg_rowdist and sg_complex_mul: the distances and complex products of the
 * knowledge-graph embedding models (TransE, RotatE, ComplEx).
 *
 * Invariants:
 * - One pair's distance is always computed the same way: term i goes to lane i % KGE_LANES
 *   and the lanes are added in a fixed tree (as rowdot), so a value depends neither on the
 *   thread count, nor on which tile or how many pairs at once computed it, nor on the CPU
 *   variant running the kernel (SG__HOT_CLONES, core/core.h). The loops over D are
 *   branch-free (selects only) so that they vectorise.
 * - Gradients: row p of an operand's gradient is the sum over its partners q, in ascending
 *   q, of g(p,q) * d dist(p,q) / d row p, each row written by one thread (no atomics), so
 *   any thread count and any blocking give the same bits. Where an L2 distance or a complex
 *   term's modulus is 0 the term adds exactly 0.
 * - Backwards recompute the differences from the inputs (which, as for every op, stay
 *   unchanged until the backward) and read the saved output for L2 only.
 */
#include "ops/ops.h"

#include <tgmath.h>

#define KGE_LANES 16 /* the tree below is written for 16 */
#define KGE_PAIRS 4  /* partner rows a forward pass takes at once (shares the row's loads) */
/* Bytes of partner rows one block holds, kept in cache while a tile's rows pass over it. */
#define KGE_BLOCK_BYTES ((int64_t)64 << 10)
/* Most rows of the gradient (or of the output) one chunk takes. */
#define KGE_ROWS 16

/* The typed kernels, written once for float (suffix f) and double (d). `kind` is a literal
 * at every call after inlining, so no branch on it stays in the loops. */
#define KGE_DEFINE(T, S)                                                                  \
    /* term i of dist(x, y); COMPLEX: the modulus of complex term i, K = D / 2 */         \
    SG__HOT_BODY T kge_term_##S(int kind, const T *x, const T *y, int64_t i, int64_t K)   \
    {                                                                                     \
        const T t = x[i] - y[i];                                                          \
        if (kind == SG_DIST_L1) return fabs(t);                                           \
        if (kind == SG_DIST_L2) return t * t;                                             \
        const T u = x[i + K] - y[i + K];                                                  \
        return sqrt(t * t + u * u);                                                       \
    }                                                                                     \
    /* Lanes a[0..KGE_LANES) of one pair added in the fixed tree: the distance */         \
    SG__HOT_BODY T kge_finish_##S(int kind, T *a)                                         \
    {                                                                                     \
        for (int k = 0; k < 8; k++) a[k] += a[k + 8];                                     \
        for (int k = 0; k < 4; k++) a[k] += a[k + 4];                                     \
        for (int k = 0; k < 2; k++) a[k] += a[k + 2];                                     \
        return kind == SG_DIST_L2 ? sqrt(a[0] + a[1]) : a[0] + a[1];                      \
    }                                                                                     \
    /* out[r] = dist(x, y + r ys) for r < R, R 1 or KGE_PAIRS (a literal): one loop over  \
     * the lanes updates every pair's lane, so x is loaded once for all of them */        \
    SG__HOT_BODY void kge_dist_##S(int kind, int R, const T *x, const T *y, int64_t ys,   \
                                   int64_t D, T *out)                                     \
    {                                                                                     \
        const int64_t K = D / 2, len = kind == SG_DIST_COMPLEX ? K : D;                   \
        /* pairs 1..3 formed only when they exist: y + ys is past the end at R 1 */       \
        const int64_t yo = R > 1 ? ys : 0;                                                \
        const T *y0 = y, *y1 = y + yo, *y2 = y + 2 * yo, *y3 = y + 3 * yo;                \
        T a0[KGE_LANES] = {0}, a1[KGE_LANES] = {0}, a2[KGE_LANES] = {0}, a3[KGE_LANES] = {0}; \
        int64_t i = 0;                                                                    \
        for (; i + KGE_LANES <= len; i += KGE_LANES)                                      \
            for (int k = 0; k < KGE_LANES; k++) {                                         \
                a0[k] += kge_term_##S(kind, x, y0, i + k, K);                             \
                if (R == 1) continue;                                                     \
                a1[k] += kge_term_##S(kind, x, y1, i + k, K);                             \
                a2[k] += kge_term_##S(kind, x, y2, i + k, K);                             \
                a3[k] += kge_term_##S(kind, x, y3, i + k, K);                             \
            }                                                                             \
        for (int k = 0; i + k < len; k++) {                                               \
            a0[k] += kge_term_##S(kind, x, y0, i + k, K);                                 \
            if (R == 1) continue;                                                         \
            a1[k] += kge_term_##S(kind, x, y1, i + k, K);                                 \
            a2[k] += kge_term_##S(kind, x, y2, i + k, K);                                 \
            a3[k] += kge_term_##S(kind, x, y3, i + k, K);                                 \
        }                                                                                 \
        out[0] = kge_finish_##S(kind, a0);                                                \
        if (R == 1) return;                                                               \
        out[1] = kge_finish_##S(kind, a1);                                                \
        out[2] = kge_finish_##S(kind, a2);                                                \
        out[3] = kge_finish_##S(kind, a3);                                                \
    }                                                                                     \
    /* g * d dist(x, y) / dx_i for L1, g sign(x_i - y_i) (0 at 0), and L2, c (x_i - y_i)  \
     * with c = g / dist (0 where dist is 0) */                                           \
    SG__HOT_BODY T kge_dterm_##S(int kind, const T *x, const T *y, T c, int64_t i)        \
    {                                                                                     \
        const T t = x[i] - y[i];                                                          \
        if (kind == SG_DIST_L1) return t > 0 ? c : t < 0 ? -c : (T)0;                     \
        return c * t;                                                                     \
    }                                                                                     \
    /* COMPLEX: g (x_k - y_k) / |x_k - y_k| for complex term k (0 where the modulus is 0; \
     * the selects keep the division branch-free) added to *re and *im */                \
    SG__HOT_BODY void kge_cterm_##S(const T *x, const T *y, T g, int64_t k, int64_t K,     \
                                    T *re, T *im)                                         \
    {                                                                                     \
        const T t = x[k] - y[k], u = x[k + K] - y[k + K];                                 \
        const T r = sqrt(t * t + u * u);                                                  \
        const T s = (r > 0 ? g : (T)0) / (r > 0 ? r : (T)1);                              \
        *re += s * t;                                                                     \
        *im += s * u;                                                                     \
    }                                                                                     \
    /* gx += sum over r < R of the gradient terms of pair (x, y + r ys) with incoming     \
     * gradient g[r] (and distance dist[r]), added in order r = 0, 1, ... at each element \
     * (so R pairs at once give the bits of R single pairs in turn); R 1 or KGE_PAIRS */   \
    SG__HOT_BODY void kge_grad_##S(int kind, int R, const T *restrict x,                  \
                                   const T *restrict y, int64_t ys, const T *g,           \
                                   const T *dist, int64_t D, T *restrict gx)              \
    {                                                                                     \
        /* pairs 1..3 formed only when they exist: y + ys is past the end at R 1 */       \
        const int64_t yo = R > 1 ? ys : 0;                                                \
        const T *y0 = y, *y1 = y + yo, *y2 = y + 2 * yo, *y3 = y + 3 * yo;                \
        if (kind == SG_DIST_COMPLEX) {                                                    \
            const int64_t K = D / 2;                                                      \
            T *gre = gx, *gim = gx + K;                                                   \
            for (int64_t k = 0; k < K; k++) {                                             \
                T re = gre[k], im = gim[k];                                               \
                kge_cterm_##S(x, y0, g[0], k, K, &re, &im);                               \
                if (R > 1) {                                                              \
                    kge_cterm_##S(x, y1, g[1], k, K, &re, &im);                           \
                    kge_cterm_##S(x, y2, g[2], k, K, &re, &im);                           \
                    kge_cterm_##S(x, y3, g[3], k, K, &re, &im);                           \
                }                                                                         \
                gre[k] = re;                                                              \
                gim[k] = im;                                                              \
            }                                                                             \
            return;                                                                       \
        }                                                                                 \
        T c[KGE_PAIRS];                                                                   \
        for (int r = 0; r < R; r++)                                                       \
            c[r] = kind == SG_DIST_L1 ? g[r] : dist[r] > 0 ? g[r] / dist[r] : (T)0;        \
        for (int64_t i = 0; i < D; i++) {                                                 \
            T v = gx[i] + kge_dterm_##S(kind, x, y0, c[0], i);                            \
            if (R > 1) {                                                                  \
                v += kge_dterm_##S(kind, x, y1, c[1], i);                                 \
                v += kge_dterm_##S(kind, x, y2, c[2], i);                                 \
                v += kge_dterm_##S(kind, x, y3, c[3], i);                                 \
            }                                                                             \
            gx[i] = v;                                                                    \
        }                                                                                 \
    }
KGE_DEFINE(float, f)
KGE_DEFINE(double, d)
#define KGE_DIST(kind, R, x, ...) \
    _Generic((x), const float *: kge_dist_f, default: kge_dist_d)(kind, R, x, __VA_ARGS__)
#define KGE_GRAD(kind, R, x, ...) \
    _Generic((x), const float *: kge_grad_f, default: kge_grad_d)(kind, R, x, __VA_ARGS__)

/* Forward: out (M,N) from a (M,D), b (N,D), over tiles of rb rows by nb columns (item t:
 * row block t / tiles_n, column block t % tiles_n).
 * Backward: the gradient (np,D) of operand p (rows `a`) against partners q (rows `b`,
 * nq of them): pair (p,q)'s incoming gradient is g[p sp + q sq], its distance dist[same].
 * diag (rowdist): each row's one partner is q = p, at g[p]. */
typedef struct {
    sg_dtype dtype;
    int kind;
    int64_t M, N, D;
    int64_t rb, nb, tiles_n;
    const void *a, *b;
    void *out;
    const void *g, *dist;
    int64_t sp, sq, nq;
    bool diag;
} dist_job;

SG__HOT_BODY void cdist_fwd_kind(const dist_job *J, const int kind, int64_t lo, int64_t hi)
{
    const int64_t N = J->N, D = J->D;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *A = J->a;
        const T *B = J->b;
        T *O = J->out;
        for (int64_t t = lo; t < hi; t++) {
            const int64_t m0 = t / J->tiles_n * J->rb;
            const int64_t n0 = t % J->tiles_n * J->nb;
            const int64_t m1 = m0 + J->rb < J->M ? m0 + J->rb : J->M;
            const int64_t n1 = n0 + J->nb < N ? n0 + J->nb : N;
            for (int64_t m = m0; m < m1; m++) {
                const T *x = A + m * D;
                T *o = O + m * N;
                int64_t n = n0;
                for (; n + KGE_PAIRS <= n1; n += KGE_PAIRS)
                    KGE_DIST(kind, KGE_PAIRS, x, B + n * D, D, D, o + n);
                for (; n < n1; n++) KGE_DIST(kind, 1, x, B + n * D, D, D, o + n);
            }
        }
    });
}

SG__HOT_BODY void cdist_fwd__body(void *ud, int64_t lo, int64_t hi)
{
    const dist_job *J = ud;
    switch (J->kind) {
    case SG_DIST_L1: cdist_fwd_kind(J, SG_DIST_L1, lo, hi); break;
    case SG_DIST_L2: cdist_fwd_kind(J, SG_DIST_L2, lo, hi); break;
    default: cdist_fwd_kind(J, SG_DIST_COMPLEX, lo, hi); break;
    }
}
SG__HOT_CLONES(cdist_fwd, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* Rows [lo, hi) of the gradient; the partners in blocks of nb rows, each block passed by
 * every row of the chunk while it is in cache (ascending q for every row all the same). */
SG__HOT_BODY void dist_bwd_kind(const dist_job *J, const int kind, int64_t lo, int64_t hi)
{
    const int64_t D = J->D, nq = J->nq, nb = J->nb;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *P = J->a;
        const T *Q = J->b;
        const T *G = J->g;
        const T *dist = J->dist;
        T *O = J->out;
        for (int64_t i = lo * D; i < hi * D; i++) O[i] = 0;
        if (J->diag) {
            for (int64_t p = lo; p < hi; p++)
                KGE_GRAD(kind, 1, P + p * D, Q + p * D, D, G + p, dist + p, D, O + p * D);
        } else {
            const int64_t sp = J->sp;
            const int64_t sq = J->sq;
            for (int64_t q0 = 0; q0 < nq; q0 += nb) {
                const int64_t q1 = q0 + nb < nq ? q0 + nb : nq;
                for (int64_t p = lo; p < hi; p++) {
                    int64_t q = q0;
                    for (; q + KGE_PAIRS <= q1; q += KGE_PAIRS) {
                        T gq[KGE_PAIRS];
                        T dq[KGE_PAIRS];
                        for (int r = 0; r < KGE_PAIRS; r++) {
                            gq[r] = G[p * sp + (q + r) * sq];
                            dq[r] = dist[p * sp + (q + r) * sq];
                        }
                        KGE_GRAD(kind, KGE_PAIRS, P + p * D, Q + q * D, D, gq, dq, D, O + p * D);
                    }
                    for (; q < q1; q++)
                        KGE_GRAD(kind, 1, P + p * D, Q + q * D, D, G + p * sp + q * sq,
                                 dist + p * sp + q * sq, D, O + p * D);
                }
            }
        }
    });
}

SG__HOT_BODY void dist_bwd__body(void *ud, int64_t lo, int64_t hi)
{
    const dist_job *J = ud;
    switch (J->kind) {
    case SG_DIST_L1: dist_bwd_kind(J, SG_DIST_L1, lo, hi); break;
    case SG_DIST_L2: dist_bwd_kind(J, SG_DIST_L2, lo, hi); break;
    default: dist_bwd_kind(J, SG_DIST_COMPLEX, lo, hi); break;
    }
}
SG__HOT_CLONES(dist_bwd, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* Partner rows per cache block for rows of D elements of dtype (at least KGE_PAIRS). */
static int64_t block_rows(sg_dtype dtype, int64_t D)
{
    const int64_t row = D * (int64_t)sg_dtype_size(dtype);
    const int64_t nb = row > 0 ? KGE_BLOCK_BYTES / row : KGE_BLOCK_BYTES;
    return nb < KGE_PAIRS ? KGE_PAIRS : nb;
}

/* Rows per chunk of a pass over `rows` rows that each cost `work` elements: one chunk for
 * a small pass, else at most KGE_ROWS and few enough for every thread to get some. Any cut
 * gives the same results (see the invariants), so this may follow the thread count. */
static int64_t chunk_rows(const sg_ctx *ctx, int64_t rows, int64_t work)
{
    if (rows * work <= SG__GRAIN) return rows > 0 ? rows : 1;
    const int64_t per = (rows + 4 * (int64_t)sg__threads(ctx) - 1) / (4 * (int64_t)sg__threads(ctx));
    return per < 1 ? 1 : per > KGE_ROWS ? KGE_ROWS : per;
}

/* Runs the backward of operand k of a recorded cdist (k = 0: a, rows against b) or rowdist
 * (diag) and hands the gradient to it. */
static int dist_grad_of(sg_node *n, sg_tensor *gout, int k, bool diag)
{
    sg_tensor *x = n->in[k], *other = n->in[1 - k];
    sg_ctx *ctx = x->ctx;
    sg_tensor *gx = sg__tmp_like(x, false);
    if (!gx) return sg__status_or_nomem(ctx);
    const int64_t rows = x->shape[0], D = x->shape[1], nq = diag ? 1 : other->shape[0];
    const int64_t N = n->in[1]->shape[0];
    dist_job J = {.dtype = x->dtype, .kind = (int)n->iarg[0], .D = D, .nb = block_rows(x->dtype, D),
                  .a = x->data, .b = other->data, .out = gx->data, .g = gout->data,
                  .dist = n->saved[0]->data, .sp = k == 0 ? N : 1, .sq = k == 0 ? 1 : N,
                  .nq = nq, .diag = diag};
    sg__parallel_for(ctx, rows, chunk_rows(ctx, rows, nq * D), dist_bwd, &J);
    return sg__accum_grad(x, gx, true);
}

/* iarg[0]: the kind; saved[0]: the output. */
static int cdist_backward(sg_node *n, sg_tensor *gout)
{
    for (int k = 0; k < 2; k++) {
        if (!sg__wants_grad(n->in[k])) continue;
        int rc = dist_grad_of(n, gout, k, false);
        if (rc != SG_OK) return rc;
    }
    return SG_OK;
}

static int rowdist_backward(sg_node *n, sg_tensor *gout)
{
    for (int k = 0; k < 2; k++) {
        if (!sg__wants_grad(n->in[k])) continue;
        int rc = dist_grad_of(n, gout, k, true);
        if (rc != SG_OK) return rc;
    }
    return SG_OK;
}

/* The checks cdist and rowdist share: two dense float 2-D operands of one dtype and
 * width (D even for COMPLEX), a valid kind; rowdist (same_rows) also equal row counts. */
static bool dist_check(const char *op, sg_tensor *a, sg_tensor *b, sg_dist_kind kind, bool same_rows)
{
    if (!sg__op_check_pair(op, a, b) || !sg__op_check_float(op, a) || !sg__op_check_float(op, b))
        return false;
    if ((unsigned)kind > (unsigned)SG_DIST_COMPLEX) {
        sg__fail(a->ctx, SG_ERR_ARG, "%s: distance kind %d (SG_DIST_L1, _L2 or _COMPLEX expected)",
                 op, (int)kind);
        return false;
    }
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[1] ||
        (same_rows && a->shape[0] != b->shape[0]) ||
        (kind == SG_DIST_COMPLEX && a->shape[1] % 2 != 0)) {
        char sa[96], sb[96];
        sg__fail(a->ctx, SG_ERR_SHAPE, "%s: shapes %s and %s; expected %s%s", op,
                 sg__shape_str(a, sa, sizeof sa), sg__shape_str(b, sb, sizeof sb),
                 same_rows ? "(M,D) and (M,D)" : "(M,D) and (N,D)",
                 kind == SG_DIST_COMPLEX ? " with D even (real | imaginary halves)" : "");
        return false;
    }
    return true;
}

sg_tensor *sg_cdist(sg_tensor *a, sg_tensor *b, sg_dist_kind kind)
{
    static const char op[] = "sg_cdist";
    SG__CHECK_NOTNULL(a);
    SG__CHECK_NOTNULL(b);
    if (!dist_check(op, a, b, kind, false)) return NULL;
    sg_ctx *ctx = a->ctx;
    const int64_t M = a->shape[0], N = b->shape[0], D = a->shape[1];
    sg_tensor *out = sg__tmp(ctx, a->dtype, 2, (int64_t[]){M, N}, false);
    if (!out) return NULL;
    dist_job J = {.dtype = a->dtype, .kind = (int)kind, .M = M, .N = N, .D = D,
                  .nb = block_rows(a->dtype, D), .a = a->data, .b = b->data, .out = out->data};
    J.rb = chunk_rows(ctx, M, N * D);
    J.tiles_n = N > 0 ? (N + J.nb - 1) / J.nb : 1;
    const int64_t tiles = (M + J.rb - 1) / J.rb * J.tiles_n;
    const int64_t tile_work = J.rb * J.nb * (D > 0 ? D : 1);
    sg__parallel_for(ctx, tiles, tile_work >= SG__GRAIN ? 1 : SG__GRAIN / tile_work, cdist_fwd, &J);
    sg_tensor *in[2] = {a, b};
    if (sg__needs_grad(ctx, 2, in)) {
        sg_node *n = sg__node_new(ctx, cdist_backward, op, out, 2, in);
        if (!n) return NULL;
        n->saved[0] = out;
        n->iarg[0] = kind;
    }
    return out;
}

/* rowdist's forward: rows [lo, hi), each against its own partner row. */
static void rowdist_rows(void *ud, int64_t lo, int64_t hi)
{
    const dist_job *J = ud;
    const int64_t D = J->D;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *A = J->a;
        const T *B = J->b;
        T *O = J->out;
        for (int64_t m = lo; m < hi; m++) {
            switch (J->kind) {
            case SG_DIST_L1: KGE_DIST(SG_DIST_L1, 1, A + m * D, B + m * D, D, D, O + m); break;
            case SG_DIST_L2: KGE_DIST(SG_DIST_L2, 1, A + m * D, B + m * D, D, D, O + m); break;
            default: KGE_DIST(SG_DIST_COMPLEX, 1, A + m * D, B + m * D, D, D, O + m); break;
            }
        }
    });
}

sg_tensor *sg_rowdist(sg_tensor *a, sg_tensor *b, sg_dist_kind kind)
{
    static const char op[] = "sg_rowdist";
    SG__CHECK_NOTNULL(a);
    SG__CHECK_NOTNULL(b);
    if (!dist_check(op, a, b, kind, true)) return NULL;
    sg_ctx *ctx = a->ctx;
    const int64_t M = a->shape[0], D = a->shape[1];
    sg_tensor *out = sg__tmp(ctx, a->dtype, 1, (int64_t[]){M}, false);
    if (!out) return NULL;
    dist_job J = {.dtype = a->dtype, .kind = (int)kind, .M = M, .D = D, .a = a->data,
                  .b = b->data, .out = out->data};
    sg__parallel_for(ctx, M, sg__row_grain(D), rowdist_rows, &J);
    sg_tensor *in[2] = {a, b};
    if (sg__needs_grad(ctx, 2, in)) {
        sg_node *n = sg__node_new(ctx, rowdist_backward, op, out, 2, in);
        if (!n) return NULL;
        n->saved[0] = out;
        n->iarg[0] = kind;
    }
    return out;
}

/* ---------------------------------------------------------------- complex_mul */

/* out = x * y, or x * conj(y) when conj, row by row over rows of 2K (real | imaginary). */
typedef struct {
    sg_dtype dtype;
    int64_t K;
    const void *x, *y;
    void *out;
    bool conj;
} cmul_job;

static void cmul_rows(void *ud, int64_t lo, int64_t hi)
{
    const cmul_job *J = ud;
    const int64_t K = J->K;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T s = J->conj ? (T)-1 : (T)1;
        for (int64_t m = lo; m < hi; m++) {
            const T *x = (const T *)J->x + m * 2 * K;
            const T *y = (const T *)J->y + m * 2 * K;
            T *o = (T *)J->out + m * 2 * K;
            for (int64_t k = 0; k < K; k++) {
                const T yi = s * y[k + K];
                o[k] = x[k] * y[k] - x[k + K] * yi;
                o[k + K] = x[k] * yi + x[k + K] * y[k];
            }
        }
    });
}

/* Runs cmul_rows into a new tensor of x's shape; NULL when out of memory. */
static sg_tensor *cmul_run(const sg_tensor *x, const sg_tensor *y, bool conj)
{
    sg_tensor *out = sg__tmp_like(x, false);
    if (!out) return NULL;
    cmul_job J = {x->dtype, x->shape[1] / 2, x->data, y->data, out->data, conj};
    sg__parallel_for(x->ctx, x->shape[0], sg__row_grain(x->shape[1]), cmul_rows, &J);
    return out;
}

/* out = a * b' with b' = b or conj(b) (iarg[0]): a's gradient g * conj(b'), which is
 * cmul(g, b, !conj); b's gradient g * conj(a) (cmul(g, a, true)), or with conj its
 * conjugate, conj(g) * a = cmul(a, g, true). */
static int cmul_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *a = n->in[0], *b = n->in[1];
    const bool conj = n->iarg[0] != 0;
    if (sg__wants_grad(a)) {
        sg_tensor *ga = cmul_run(gout, b, !conj);
        if (!ga) return sg__status_or_nomem(a->ctx);
        int rc = sg__accum_grad(a, ga, true);
        if (rc != SG_OK) return rc;
    }
    if (sg__wants_grad(b)) {
        sg_tensor *gb = conj ? cmul_run(a, gout, true) : cmul_run(gout, a, true);
        if (!gb) return sg__status_or_nomem(b->ctx);
        return sg__accum_grad(b, gb, true);
    }
    return SG_OK;
}

sg_tensor *sg_complex_mul(sg_tensor *a, sg_tensor *b, bool conj_b)
{
    static const char op[] = "sg_complex_mul";
    SG__CHECK_NOTNULL(a);
    SG__CHECK_NOTNULL(b);
    if (!sg__op_check_pair(op, a, b) || !sg__op_check_float(op, a) || !sg__op_check_float(op, b))
        return NULL;
    if (a->ndim != 2 || !sg__same_shape(a, b) || a->shape[1] % 2 != 0) {
        char sa[96], sb[96];
        return sg__fail(a->ctx, SG_ERR_SHAPE,
                        "%s: shapes %s and %s; expected two (M,2K) (real | imaginary halves)", op,
                        sg__shape_str(a, sa, sizeof sa), sg__shape_str(b, sb, sizeof sb));
    }
    sg_tensor *out = cmul_run(a, b, conj_b);
    if (!out) return NULL;
    sg_tensor *in[2] = {a, b};
    if (sg__needs_grad(a->ctx, 2, in)) {
        sg_node *n = sg__node_new(a->ctx, cmul_backward, op, out, 2, in);
        if (!n) return NULL;
        n->iarg[0] = conj_b;
    }
    return out;
}
