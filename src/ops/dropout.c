/* Dropout: zeros each element with probability p and scales the kept ones by 1/(1-p).
 *
 * Invariants: the mask is counter-based. A call with 0 < p < 1 draws one 64-bit key from
 * the context's generator (sg_rand_u64, so it advances by exactly one draw) and element i
 * is kept when u(key, i) >= p, u a uniform double in [0, 1) from a hash of (key, i); so the
 * mask depends on the seed and the call sequence only, never on the thread count or the
 * chunking. The node keeps the key, not the mask: the backward recomputes the same mask
 * (no memory per element). p == 1 draws nothing and keeps nothing (u < 1); training == 0
 * or p == 0 draws nothing and returns x itself. */
#include "ops/ops.h"

#include <math.h>

/* u(key, i) in [0, 1): splitmix64's finaliser of key + (i + 1) * golden gamma. */
static inline double dropout_u(uint64_t key, int64_t i)
{
    uint64_t z = key + ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* dst[i] = src[i] * scale where kept, else 0 (src: x forward, the incoming gradient
 * backward: the same mask). */
typedef struct {
    sg_dtype dtype;
    uint64_t key;
    double p, scale;
    const void *src;
    void *dst;
} dropout_job;

static void dropout_run(void *ud, int64_t lo, int64_t hi)
{
    const dropout_job *J = ud;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *s = J->src;
        T *d = J->dst;
        const T scale = (T)J->scale;
        for (int64_t i = lo; i < hi; i++) d[i] = dropout_u(J->key, i) >= J->p ? s[i] * scale : (T)0;
    });
}

static void dropout_apply(const sg_tensor *like, uint64_t key, double p, const void *src, void *dst)
{
    dropout_job J = {like->dtype, key, p, 1.0 / (1.0 - p), src, dst};
    sg__parallel_for(like->ctx, like->numel, SG__GRAIN, dropout_run, &J);
}

/* iarg[0]: the key; scalar[0]: p. */
static int dropout_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    sg_tensor *dx = sg__tmp_like(x, false);
    if (!dx) return sg__status_or_nomem(x->ctx);
    dropout_apply(x, (uint64_t)n->iarg[0], n->scalar[0], gout->data, dx->data);
    return sg__accum_grad(x, dx, true);
}

sg_tensor *sg_dropout(sg_tensor *x, double p, int training)
{
    SG__CHECK_NOTNULL(x);
    const char *op = "sg_dropout";
    if (!sg__op_check_float(op, x)) return NULL;
    if (!(p >= 0 && p <= 1)) return sg__fail(x->ctx, SG_ERR_ARG, "%s: p = %g outside [0, 1]", op, p);
    if (!training || p == 0) return x;
    sg_tensor *out = sg__tmp_like(x, false);
    if (!out) return NULL;
    const uint64_t key = p < 1 ? sg_rand_u64(x->ctx) : 0;
    dropout_apply(x, key, p, x->data, out->data);
    if (sg__needs_grad(x->ctx, 1, &x)) {
        sg_node *n = sg__node_new(x->ctx, dropout_backward, op, out, 1, &x);
        if (!n) return NULL;
        n->iarg[0] = (int64_t)key;
        n->scalar[0] = p;
    }
    return out;
}
