/* Accuracy of the softmax family and the logit losses at large logits (around 1e2, 1e4 and
 * 1e6 in f32, 1e12 in f64): values and gradients against long double computations that
 * never subtract a rounded log-sum-exp (each log-probability is -log(sum exp(x_j - x_k)),
 * exact differences of the stored values), and against closed forms. Agreement is required
 * to a few units of the dtype's rounding, relative to the exact value; a log-sum-exp
 * formed as max + log(sum) and then subtracted misses that by ulp(max)/2. */
#include "testutil.h"

#include <float.h>

#define NC 4 /* classes per row */
#define NR 4 /* rows */

/* Offsets from the large logit L, exact in f32 at L = 1e6 (ulp 1/16): ties, spreads up to
 * 3, the maximum in every column. */
static const double offsets[NR][NC] = {
    {0, 0, 0, 0},
    {0, -1, -2, -3},
    {-0.5, 0, -1.25, -2.75},
    {-3, -0.25, 0, -0.75},
};
static const int64_t row_target[NR] = {0, 3, 1, 2};

typedef struct {
    sg_dtype dtype;
    double L;
} scale_case;

static const scale_case cases[] = {
    {SG_F32, 1e2}, {SG_F32, -1e2}, {SG_F32, 1e4}, {SG_F32, -1e4},
    {SG_F32, 1e6}, {SG_F32, -1e6}, {SG_F64, 1e12}, {SG_F64, -1e12},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static double eps_of(sg_dtype dt) { return dt == SG_F32 ? FLT_EPSILON : DBL_EPSILON; }

/* |got - want| within ulps units of the dtype's epsilon relative to |want| (a floor at the
 * smallest normal number for exact zeros). Prints the case on failure. */
static int close_to(double got, long double want, double ulps, sg_dtype dt, const char *what,
                    double L, int i)
{
    double floor_ = dt == SG_F32 ? FLT_MIN : DBL_MIN;
    long double tol = (long double)ulps * eps_of(dt) * fabsl(want) + floor_;
    if (fabsl((long double)got - want) <= tol) return 1;
    fprintf(stderr, "  %s L=%g [%d]: got %.17g, exact %.17Lg (%.2Lg eps)\n", what, L, i, got,
            want, fabsl((long double)got - want) / (eps_of(dt) * fabsl(want)));
    return 0;
}
#define CLOSE(got, want, ulps, dt, what, L, i) CHECK(close_to(got, want, ulps, dt, what, L, i))

/* The (NR,NC) logits L + offsets, rounded to dtype (the references use the stored values). */
static sg_tensor *logits(sg_ctx *ctx, const scale_case *c, int transpose)
{
    int64_t shape[2] = {NR, NC};
    sg_tensor *t = sg_tensor_new(ctx, c->dtype, 2, shape);
    for (int i = 0; i < NR; i++)
        for (int j = 0; j < NC; j++) {
            double v = c->L + offsets[i][j];
            int64_t k = transpose ? j * NR + i : i * NC + j;
            if (c->dtype == SG_F32) sg_tensor_f32(t)[k] = (float)v;
            else sg_tensor_f64(t)[k] = v;
        }
    return sg_tensor_requires_grad(t, 1);
}

/* Row i of the logits as long double (exactly the stored values). */
static void row_ld(sg_tensor *x, int i, long double *v)
{
    for (int j = 0; j < NC; j++) v[j] = (long double)sg_tensor_get(x, i * NC + j);
}

/* log p_k = -log(sum_j exp(x_j - x_k)): the differences are exact in long double. */
static long double log_prob(const long double *v, int k)
{
    long double s = 0;
    for (int j = 0; j < NC; j++) s += expl(v[j] - v[k]);
    return -logl(s);
}
static long double prob(const long double *v, int k)
{
    long double s = 0;
    for (int j = 0; j < NC; j++) s += expl(v[j] - v[k]);
    return 1 / s;
}

TEST(log_softmax_of_two_equal_f32_logits_is_minus_log_2)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    float v[2] = {1e4f, 1e4f};
    sg_tensor *y = sg_log_softmax(sg_tensor_from_data(ctx, SG_F32, 1, (int64_t[]){2}, v), 0);
    CHECK(y != NULL);
    for (int i = 0; y && i < 2; i++)
        CLOSE(sg_tensor_get(y, i), -logl(2.0L), 1, SG_F32, "log_softmax", 1e4, i);
    sg_ctx_free(ctx);
}

/* Forward along either dim (the strided path too) and log_softmax's backward. */
TEST(softmax_and_log_softmax_at_large_logits)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    for (int ci = 0; ci < N_CASES; ci++) {
        const scale_case *c = &cases[ci];
        for (int transpose = 0; transpose < 2; transpose++) {
            sg_tensor *x = logits(ctx, c, 0);
            sg_tensor *xt = transpose ? logits(ctx, c, 1) : x; /* (NC,NR): dim 0 */
            const int dim = transpose ? 0 : 1;
            sg_tensor *p = sg_softmax(xt, dim), *lp = sg_log_softmax(xt, dim);
            CHECK(p && lp);
            for (int i = 0; p && lp && i < NR; i++) {
                long double v[NC];
                row_ld(x, i, v);
                for (int k = 0; k < NC; k++) {
                    int64_t at = transpose ? k * NR + i : i * NC + k;
                    CLOSE(sg_tensor_get(lp, at), log_prob(v, k), 2 * NC, c->dtype, "log_softmax", c->L, i * NC + k);
                    CLOSE(sg_tensor_get(p, at), prob(v, k), 2 * NC, c->dtype, "softmax", c->L, i * NC + k);
                }
            }
            sg_tape_reset(ctx);
        }
        /* backward: dx = g - p * sum(g) with g of mixed signs */
        sg_tensor *x = logits(ctx, c, 0);
        sg_tensor *g = sg_tensor_new_tmp(ctx, c->dtype, 2, (int64_t[]){NR, NC});
        for (int k = 0; k < NR * NC; k++) {
            double gv = (k % 3) - 0.75 * (k % 2);
            if (c->dtype == SG_F32) sg_tensor_f32(g)[k] = (float)gv;
            else sg_tensor_f64(g)[k] = gv;
        }
        CHECK_STATUS(ctx, sg_backward_grad(sg_log_softmax(x, 1), g), SG_OK);
        sg_tensor *dx = sg_tensor_grad(x);
        CHECK(dx != NULL);
        for (int i = 0; dx && i < NR; i++) {
            long double v[NC], gs = 0;
            row_ld(x, i, v);
            for (int k = 0; k < NC; k++) gs += sg_tensor_get(g, i * NC + k);
            for (int k = 0; k < NC; k++) {
                long double want = sg_tensor_get(g, i * NC + k) - prob(v, k) * gs;
                /* absolute: the exact value may cancel to 0 */
                CHECK(fabsl(sg_tensor_get(dx, i * NC + k) - want) <= 4 * NC * eps_of(c->dtype) * (1 + fabsl(gs)));
            }
        }
        sg_tape_reset(ctx);
    }
    sg_ctx_free(ctx);
}

/* loss = mean_i -log p[i, t_i]; d loss / d x[i,c] = (p[i,c] - [c == t_i]) / NR, whose rows
 * sum to 0. */
TEST(cross_entropy_value_and_gradient_at_large_logits)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    for (int ci = 0; ci < N_CASES; ci++) {
        const scale_case *c = &cases[ci];
        const double eps = eps_of(c->dtype);
        sg_tensor *x = logits(ctx, c, 0);
        sg_tensor *t = sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){NR}, row_target);
        sg_tensor *loss = sg_cross_entropy(x, t);
        long double want = 0;
        for (int i = 0; i < NR; i++) {
            long double v[NC];
            row_ld(x, i, v);
            want -= log_prob(v, (int)row_target[i]) / NR;
        }
        CHECK(loss != NULL);
        if (loss) CLOSE(sg_tensor_get(loss, 0), want, 2 * NC, c->dtype, "cross_entropy", c->L, 0);
        CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
        sg_tensor *dx = sg_tensor_grad(x);
        CHECK(dx != NULL);
        for (int i = 0; dx && i < NR; i++) {
            long double v[NC], sum = 0, sum_abs = 0;
            row_ld(x, i, v);
            for (int k = 0; k < NC; k++) {
                double d = sg_tensor_get(dx, i * NC + k);
                long double w = (prob(v, k) - (k == row_target[i])) / NR;
                CLOSE(d, w, 2 * NC, c->dtype, "cross_entropy grad", c->L, i * NC + k);
                sum += d;
                sum_abs += fabs(d);
            }
            CHECK(fabsl(sum) <= 2 * NC * eps * sum_abs);
        }
        sg_tape_reset(ctx);
    }
    sg_ctx_free(ctx);
}

/* The reported case: [[1e4,1e4],[1e4,1e4-1]], targets [0,1]: loss (log 2 + 1 + log(1 +
 * e^-1)) / 2 = 1.00320435; and a confident prediction whose loss log1p(e^-20) is far below
 * f32's epsilon, with its gradient -sigmoid(-20) at the target. */
TEST(cross_entropy_closed_forms)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    float v[4] = {1e4f, 1e4f, 1e4f, 1e4f - 1};
    sg_tensor *x = sg_tensor_requires_grad(sg_tensor_from_data(ctx, SG_F32, 2, (int64_t[]){2, 2}, v), 1);
    sg_tensor *t = sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){2}, (int64_t[]){0, 1});
    sg_tensor *loss = sg_cross_entropy(x, t);
    const long double want = (logl(2.0L) + 1 + log1pl(expl(-1.0L))) / 2;
    CHECK(loss != NULL);
    if (loss) CLOSE(sg_tensor_get(loss, 0), want, 2, SG_F32, "cross_entropy", 1e4, 0);
    CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
    sg_tensor *g = sg_tensor_grad(x);
    const long double s1 = 1 / (1 + expl(-1.0L)); /* p of the larger logit in row 1 */
    const long double gw[4] = {-0.25L, 0.25L, s1 / 2, -s1 / 2}; /* row 1: (p - [0, 1]) / 2 */
    for (int k = 0; g && k < 4; k++) CLOSE(sg_tensor_get(g, k), gw[k], 4, SG_F32, "grad", 1e4, k);
    for (int i = 0; g && i < 2; i++) { /* rows sum to 0 */
        double a = sg_tensor_get(g, 2 * i), b = sg_tensor_get(g, 2 * i + 1);
        CHECK(fabs(a + b) <= 2 * FLT_EPSILON * (fabs(a) + fabs(b)));
    }
    sg_tape_reset(ctx);

    for (int dt = 0; dt < 2; dt++) {
        const sg_dtype dtype = dt ? SG_F64 : SG_F32;
        const double L = dt ? 1e12 : 1e6, gap = dt ? 40 : 20;
        double cv[2] = {L, L - gap};
        sg_tensor *c = sg_tensor_new(ctx, dtype, 2, (int64_t[]){1, 2});
        for (int k = 0; k < 2; k++) {
            if (dt) sg_tensor_f64(c)[k] = cv[k];
            else sg_tensor_f32(c)[k] = (float)cv[k];
        }
        sg_tensor_requires_grad(c, 1);
        sg_tensor *l = sg_cross_entropy(c, sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){1}, (int64_t[]){0}));
        CHECK(l != NULL);
        if (l) CLOSE(sg_tensor_get(l, 0), log1pl(expl(-(long double)gap)), 4, dtype, "confident", L, 0);
        CHECK_STATUS(ctx, sg_backward(l), SG_OK);
        sg_tensor *gc = sg_tensor_grad(c);
        const long double sig = 1 / (1 + expl((long double)gap)); /* sigmoid(-gap) */
        CHECK(gc != NULL);
        if (gc) CLOSE(sg_tensor_get(gc, 0), -sig, 4, dtype, "confident grad", L, 0);
        if (gc) CLOSE(sg_tensor_get(gc, 1), sig, 4, dtype, "confident grad", L, 1);
        sg_tape_reset(ctx);
    }
    sg_ctx_free(ctx);
}

/* One element at a time (a mean would hide a single term's error): loss max(x,0) - x*t +
 * log(1 + e^-|x|), gradient sigmoid(x) - t, both in long double. */
TEST(bce_with_logits_at_large_logits)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const double tv[] = {0, 0.25, 0.999, 1};
    for (int ci = 0; ci < N_CASES + 2; ci++) {
        /* two more cases: |x| = 20 in f32, where sigmoid(x) rounds to 1 */
        const scale_case c = ci < N_CASES ? cases[ci] : (scale_case){SG_F32, ci == N_CASES ? 20 : -20};
        for (int k = 0; k < 4; k++) {
            sg_tensor *x = sg_tensor_new(ctx, c.dtype, 0, NULL), *t = sg_tensor_new(ctx, c.dtype, 0, NULL);
            sg_tensor_fill(x, c.L);
            sg_tensor_fill(t, tv[k]);
            sg_tensor_requires_grad(x, 1);
            const long double xv = sg_tensor_get(x, 0), tk = sg_tensor_get(t, 0);
            const long double want = (xv > 0 ? xv : 0) - xv * tk + log1pl(expl(-fabsl(xv)));
            const long double sig = 1 / (1 + expl(-xv));
            sg_tensor *loss = sg_bce_with_logits(x, t);
            CHECK(loss != NULL);
            if (loss) CLOSE(sg_tensor_get(loss, 0), want, 4, c.dtype, "bce", c.L, k);
            CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
            sg_tensor *g = sg_tensor_grad(x);
            CHECK(g != NULL);
            if (g) CLOSE(sg_tensor_get(g, 0), sig - tk, 4, c.dtype, "bce grad", c.L, k);
            sg_tape_reset(ctx);
            sg_tensor_free(x);
            sg_tensor_free(t);
        }
    }
    sg_ctx_free(ctx);
}

TEST_MAIN()
