/* The knowledge-graph embedding ops: sg_cdist, sg_rowdist, sg_complex_mul and
 * sg_ranking_loss. Values and gradients (f32 and f64) against plain loops in double
 * written here (the distances, C99 complex arithmetic, the losses' formulas), the softmax
 * loss against sg_cross_entropy on [pos | neg]; the zero-distance conventions; bitwise
 * determinism across 1, 2 and 3 threads and across the kernels' CPU variants; errors
 * (NULL, the usual status, the op named, no node recorded); the losses' internal sg__vexp
 * against exp. Gradchecks: test_gradcheck_ops.c. */
#include "ops/ops.h"
#include "testutil.h"

#include <complex.h>


static sg_ctx *new_ctx(int threads)
{
    sg_ctx_opts o = {.threads = threads, .seed = 41};
    return sg_ctx_new(&o);
}

#define RND(ctx, dt, lo, hi, ...) rnd(ctx, dt, lo, hi, SHAPE(__VA_ARGS__))

static void set_at(sg_tensor *t, int64_t i, double v)
{
    if (sg_tensor_dtype(t) == SG_F32) sg_tensor_f32(t)[i] = (float)v;
    else sg_tensor_f64(t)[i] = v;
}

/* Tolerance of a value of magnitude v computed in dtype dt. */
static double tol(sg_dtype dt, double v) { return (dt == SG_F32 ? 2e-5 : 1e-12) * (1 + fabs(v)); }

/* ---------------------------------------------------------------- references */

/* dist(x, y) of D values (rows read from tensors at offsets xo, yo). */
static double ref_dist(int kind, const sg_tensor *a, int64_t xo, const sg_tensor *b, int64_t yo, int64_t D)
{
    double s = 0;
    if (kind == SG_DIST_COMPLEX) {
        const int64_t K = D / 2;
        for (int64_t k = 0; k < K; k++)
            s += cabs((sg_tensor_get(a, xo + k) + I * sg_tensor_get(a, xo + K + k)) -
                      (sg_tensor_get(b, yo + k) + I * sg_tensor_get(b, yo + K + k)));
        return s;
    }
    for (int64_t d = 0; d < D; d++) {
        const double t = sg_tensor_get(a, xo + d) - sg_tensor_get(b, yo + d);
        s += kind == SG_DIST_L1 ? fabs(t) : t * t;
    }
    return kind == SG_DIST_L2 ? sqrt(s) : s;
}

/* out[0..D) += g * d dist(x, y) / dx (the conventions: 0 at a kink). */
static void ref_dgrad(int kind, const sg_tensor *a, int64_t xo, const sg_tensor *b, int64_t yo,
                      int64_t D, double g, double *out)
{
    const double dist = ref_dist(kind, a, xo, b, yo, D);
    const int64_t K = D / 2;
    for (int64_t d = 0; d < D; d++) {
        const double t = sg_tensor_get(a, xo + d) - sg_tensor_get(b, yo + d);
        if (kind == SG_DIST_L1) {
            out[d] += t > 0 ? g : t < 0 ? -g : 0;
        } else if (kind == SG_DIST_L2) {
            out[d] += dist > 0 ? g * t / dist : 0;
        } else {
            const int64_t k = d % K;
            const double mod = hypot(sg_tensor_get(a, xo + k) - sg_tensor_get(b, yo + k),
                                     sg_tensor_get(a, xo + K + k) - sg_tensor_get(b, yo + K + k));
            out[d] += mod > 0 ? g * t / mod : 0;
        }
    }
}

/* t's gradient against want[0..numel) within tol; a missing gradient counts as zeros. */
static void check_grad(sg_tensor *t, const double *want, sg_dtype dt)
{
    sg_tensor *g = sg_tensor_grad(t);
    for (int64_t i = 0; i < sg_tensor_numel(t); i++) {
        const double got = g ? sg_tensor_get(g, i) : 0;
        CHECK_NEAR(got, want[i], tol(dt, want[i]));
    }
}

/* ---------------------------------------------------------------- distances */

/* Makes a's row 1 equal b's row 2 (an L2 distance of 0), and complex term 0 of a's row 0
 * equal to b's row 0's (a term of modulus 0). */
static void plant_zeros(sg_tensor *a, sg_tensor *b, int64_t D)
{
    for (int64_t d = 0; d < D; d++) set_at(a, D + d, sg_tensor_get(b, 2 * D + d));
    set_at(a, 0, sg_tensor_get(b, 0));
    set_at(a, D / 2, sg_tensor_get(b, D / 2));
}

static void cdist_case(sg_dtype dt, int kind, int64_t M, int64_t N, int64_t D)
{
    sg_ctx *ctx = new_ctx(2);
    sg_tensor *a = RND(ctx, dt, -1, 1, M, D), *b = RND(ctx, dt, -1, 1, N, D);
    plant_zeros(a, b, D);
    sg_tensor *y = sg_cdist(a, b, (sg_dist_kind)kind);
    CHECK(y && sg_tensor_ndim(y) == 2 && sg_tensor_shape(y)[0] == M && sg_tensor_shape(y)[1] == N);
    if (!y) return;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const double want = ref_dist(kind, a, m * D, b, n * D, D);
            CHECK_NEAR(sg_tensor_get(y, m * N + n), want, tol(dt, want));
        }
    if (kind == SG_DIST_L2) CHECK(sg_tensor_get(y, N + 2) == 0);
    sg_tensor *g = RND(ctx, dt, -1, 1, M, N);
    CHECK_STATUS(ctx, sg_backward_grad(y, g), SG_OK);
    double *ga = calloc((size_t)(M * D), sizeof *ga), *gb = calloc((size_t)(N * D), sizeof *gb);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const double gv = sg_tensor_get(g, m * N + n);
            ref_dgrad(kind, a, m * D, b, n * D, D, gv, ga + m * D);
            ref_dgrad(kind, b, n * D, a, m * D, D, gv, gb + n * D);
        }
    check_grad(a, ga, dt);
    check_grad(b, gb, dt);
    free(ga);
    free(gb);
    sg_ctx_free(ctx);
}

/* Shapes that leave remainders after the lanes (16) and after the pairs (4), and more
 * rows than one cache block holds. */
TEST(cdist_values_and_gradients_against_loops)
{
    for (int dti = 0; dti < 2; dti++)
        for (int kind = SG_DIST_L1; kind <= SG_DIST_COMPLEX; kind++) {
            const sg_dtype dt = dti ? SG_F64 : SG_F32;
            const int64_t D = kind == SG_DIST_COMPLEX ? 38 : 37;
            cdist_case(dt, kind, 5, 7, D);
            cdist_case(dt, kind, 3, 4, 4);
            cdist_case(dt, kind, 9, 1100, 70); /* several cache blocks */
        }
}

TEST(cdist_of_one_tensor_with_itself)
{
    sg_ctx *ctx = new_ctx(1);
    for (int kind = SG_DIST_L1; kind <= SG_DIST_COMPLEX; kind++) {
        const int64_t M = 6, D = 10;
        sg_tensor *x = RND(ctx, SG_F64, -1, 1, M, D);
        sg_tensor *y = sg_cdist(x, x, (sg_dist_kind)kind);
        sg_tensor *g = RND(ctx, SG_F64, -1, 1, M, M);
        CHECK_STATUS(ctx, sg_backward_grad(y, g), SG_OK);
        double want[60] = {0};
        for (int64_t m = 0; m < M; m++) {
            CHECK(sg_tensor_get(y, m * M + m) == 0);
            for (int64_t n = 0; n < M; n++) {
                ref_dgrad(kind, x, m * D, x, n * D, D, sg_tensor_get(g, m * M + n), want + m * D);
                ref_dgrad(kind, x, n * D, x, m * D, D, sg_tensor_get(g, m * M + n), want + n * D);
            }
        }
        check_grad(x, want, SG_F64);
        sg_tape_reset(ctx);
        sg_tensor_free(x);
        sg_tensor_free(g);
    }
    sg_ctx_free(ctx);
}

TEST(rowdist_values_and_gradients_against_loops)
{
    for (int dti = 0; dti < 2; dti++)
        for (int kind = SG_DIST_L1; kind <= SG_DIST_COMPLEX; kind++) {
            const sg_dtype dt = dti ? SG_F64 : SG_F32;
            sg_ctx *ctx = new_ctx(2);
            const int64_t M = 300, D = kind == SG_DIST_COMPLEX ? 38 : 37;
            sg_tensor *a = RND(ctx, dt, -1, 1, M, D), *b = RND(ctx, dt, -1, 1, M, D);
            plant_zeros(a, b, D); /* row 1 unchanged: rowdist pairs row 1 with row 1 */
            for (int64_t d = 0; d < D; d++) set_at(a, 2 * D + d, sg_tensor_get(b, 2 * D + d));
            sg_tensor *y = sg_rowdist(a, b, (sg_dist_kind)kind);
            CHECK(y && sg_tensor_ndim(y) == 1 && sg_tensor_shape(y)[0] == M);
            if (!y) continue;
            CHECK(sg_tensor_get(y, 2) == 0);
            sg_tensor *g = RND(ctx, dt, -1, 1, M);
            CHECK_STATUS(ctx, sg_backward_grad(y, g), SG_OK);
            double *ga = calloc((size_t)(M * D), sizeof *ga), *gb = calloc((size_t)(M * D), sizeof *gb);
            for (int64_t m = 0; m < M; m++) {
                const double want = ref_dist(kind, a, m * D, b, m * D, D);
                CHECK_NEAR(sg_tensor_get(y, m), want, tol(dt, want));
                ref_dgrad(kind, a, m * D, b, m * D, D, sg_tensor_get(g, m), ga + m * D);
                ref_dgrad(kind, b, m * D, a, m * D, D, sg_tensor_get(g, m), gb + m * D);
            }
            check_grad(a, ga, dt);
            check_grad(b, gb, dt);
            free(ga);
            free(gb);
            sg_ctx_free(ctx);
        }
}

/* ---------------------------------------------------------------- complex_mul */

static double complex cplx(const sg_tensor *t, int64_t row, int64_t k, int64_t K)
{
    return sg_tensor_get(t, row * 2 * K + k) + I * sg_tensor_get(t, row * 2 * K + K + k);
}

/* Values against C99 complex products; gradients against the real-pair derivatives
 * (dL/dre + i dL/dim): a's is g conj(b'), b's is g conj(a), conjugated when conj_b. */
TEST(complex_mul_against_c99_complex)
{
    for (int dti = 0; dti < 2; dti++)
        for (int cj = 0; cj < 2; cj++) {
            const sg_dtype dt = dti ? SG_F64 : SG_F32;
            sg_ctx *ctx = new_ctx(2);
            const int64_t M = 50, K = 21;
            sg_tensor *a = RND(ctx, dt, -1, 1, M, 2 * K), *b = RND(ctx, dt, -1, 1, M, 2 * K);
            sg_tensor *y = sg_complex_mul(a, b, cj);
            sg_tensor *g = RND(ctx, dt, -1, 1, M, 2 * K);
            CHECK(y != NULL);
            CHECK_STATUS(ctx, sg_backward_grad(y, g), SG_OK);
            double *ga = calloc((size_t)(M * 2 * K), sizeof *ga), *gb = calloc((size_t)(M * 2 * K), sizeof *gb);
            for (int64_t m = 0; m < M; m++)
                for (int64_t k = 0; k < K; k++) {
                    const double complex x = cplx(a, m, k, K), z = cplx(b, m, k, K), gc = cplx(g, m, k, K);
                    const double complex zb = cj ? conj(z) : z, want = x * zb;
                    CHECK_NEAR(sg_tensor_get(y, m * 2 * K + k), creal(want), tol(dt, 1));
                    CHECK_NEAR(sg_tensor_get(y, m * 2 * K + K + k), cimag(want), tol(dt, 1));
                    const double complex da = gc * conj(zb), db = cj ? conj(gc * conj(x)) : gc * conj(x);
                    ga[m * 2 * K + k] = creal(da), ga[m * 2 * K + K + k] = cimag(da);
                    gb[m * 2 * K + k] = creal(db), gb[m * 2 * K + K + k] = cimag(db);
                }
            check_grad(a, ga, dt);
            check_grad(b, gb, dt);
            free(ga);
            free(gb);
            sg_ctx_free(ctx);
        }
}

/* ---------------------------------------------------------------- ranking_loss */

static double softplus_ref(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double sigmoid_ref(double x) { return 1 / (1 + exp(-x)); }

/* Row m's loss under o by the spec's formulas, and its gradients into dp, dn[0..N). */
static double ref_rank_row(const sg_rank_loss_opts *o, double p, const double *v, int64_t N,
                           int64_t skip, double *dp, double *dn)
{
    double loss = 0, cnt = 0, Z = 0, mx = -INFINITY;
    for (int64_t j = 0; j < N; j++)
        if (j != skip) cnt += 1, mx = fmax(mx, o->adv_temp * v[j]);
    for (int64_t j = 0; j < N; j++)
        if (j != skip) Z += exp(o->adv_temp * v[j] - mx);
    double lse_max = p, s = 0;
    for (int64_t j = 0; j < N; j++)
        if (j != skip) lse_max = fmax(lse_max, v[j]);
    s = exp(p - lse_max);
    for (int64_t j = 0; j < N; j++)
        if (j != skip) s += exp(v[j] - lse_max);
    switch (o->kind) {
    case SG_RANK_SOFTMAX: loss = lse_max + log(s) - p, *dp = exp(p - lse_max) / s - 1; break;
    case SG_RANK_LOGISTIC: loss = softplus_ref(-p), *dp = -sigmoid_ref(-p); break;
    case SG_RANK_MARGIN: *dp = 0; break;
    default: loss = softplus_ref(-(o->margin + p)), *dp = -sigmoid_ref(-(o->margin + p)); break;
    }
    for (int64_t j = 0; j < N; j++) {
        dn[j] = 0;
        if (j == skip) continue;
        const double w = exp(o->adv_temp * v[j] - mx) / Z, h = o->margin - p + v[j];
        switch (o->kind) {
        case SG_RANK_SOFTMAX: dn[j] = exp(v[j] - lse_max) / s; break;
        case SG_RANK_LOGISTIC: loss += softplus_ref(v[j]) / cnt, dn[j] = sigmoid_ref(v[j]) / cnt; break;
        case SG_RANK_MARGIN:
            if (h > 0) loss += h, dn[j] = 1, *dp -= 1;
            break;
        default:
            loss += w * softplus_ref(v[j] + o->margin), dn[j] = w * sigmoid_ref(v[j] + o->margin);
            break;
        }
    }
    return loss;
}

static void ranking_case(sg_dtype dt, const sg_rank_loss_opts *o, int64_t M, int64_t N)
{
    sg_ctx *ctx = new_ctx(3);
    sg_tensor *pos = RND(ctx, dt, -3, 3, M), *neg = RND(ctx, dt, -3, 3, M, N);
    sg_tensor *L = sg_ranking_loss(pos, neg, o);
    CHECK(L && sg_tensor_ndim(L) == 0);
    CHECK_STATUS(ctx, sg_backward(sg_scale(L, 1.5)), SG_OK);
    double want = 0, *v = calloc((size_t)N + 1, sizeof *v);
    double *gp = calloc((size_t)M + 1, sizeof *gp), *gn = calloc((size_t)(M * N) + 1, sizeof *gn);
    for (int64_t m = 0; m < M; m++) {
        for (int64_t j = 0; j < N; j++) v[j] = sg_tensor_get(neg, m * N + j);
        want += ref_rank_row(o, sg_tensor_get(pos, m), v, N, o->skip_offset >= 0 ? o->skip_offset + m : -1,
                             gp + m, gn + m * N);
        gp[m] *= 1.5;
        for (int64_t j = 0; j < N; j++) gn[m * N + j] *= 1.5;
    }
    CHECK_NEAR(sg_tensor_get(L, 0), want, tol(dt, want));
    check_grad(pos, gp, dt);
    check_grad(neg, gn, dt);
    free(v);
    free(gp);
    free(gn);
    sg_ctx_free(ctx);
}

TEST(ranking_loss_against_formulas)
{
    for (int dti = 0; dti < 2; dti++)
        for (int kind = SG_RANK_SOFTMAX; kind <= SG_RANK_SELFADV; kind++)
            for (int64_t skip = -1; skip <= 4; skip += 5) {
                const sg_dtype dt = dti ? SG_F64 : SG_F32;
                sg_rank_loss_opts o = {(sg_rank_loss_kind)kind, 1.5, 0.8, skip};
                ranking_case(dt, &o, 7, 12);
                ranking_case(dt, &o, 130, 300); /* several chunks of rows */
                o.adv_temp = 0;
                o.margin = -0.5;
                ranking_case(dt, &o, 3, 11);
            }
}

/* Mean cross-entropy over rows of [pos | neg] with target column 0, times M, is the
 * softmax loss; its gradients, through concat and transposes, are the same too. */
TEST(ranking_softmax_is_cross_entropy_of_the_concatenation)
{
    sg_ctx *ctx = new_ctx(2);
    const int64_t M = 9, N = 17;
    sg_tensor *pos = RND(ctx, SG_F64, -30, 30, M), *neg = RND(ctx, SG_F64, -30, 30, M, N);
    sg_tensor *zeros = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){M});
    sg_tensor_fill(zeros, 0);
    sg_tensor *L = sg_ranking_loss(pos, neg, NULL); /* the defaults: softmax, nothing masked */
    CHECK_STATUS(ctx, sg_backward(L), SG_OK);
    double l = sg_tensor_get(L, 0), gp[9], gn[9 * 17];
    for (int64_t i = 0; i < M; i++) gp[i] = sg_tensor_get(sg_tensor_grad(pos), i);
    for (int64_t i = 0; i < M * N; i++) gn[i] = sg_tensor_get(sg_tensor_grad(neg), i);
    sg_tape_reset(ctx);
    sg_tensor *cols = sg_concat(2, (sg_tensor *[]){sg_reshape(pos, 2, (int64_t[]){1, M}), sg_transpose(neg, 0, 1)});
    sg_tensor *ce = sg_scale(sg_cross_entropy(sg_transpose(cols, 0, 1), zeros), (double)M);
    CHECK_STATUS(ctx, sg_backward(ce), SG_OK);
    CHECK_NEAR(l, sg_tensor_get(ce, 0), 1e-12 * (1 + fabs(l)));
    for (int64_t i = 0; i < M; i++) CHECK_NEAR(gp[i], sg_tensor_get(sg_tensor_grad(pos), i), 1e-12);
    for (int64_t i = 0; i < M * N; i++) CHECK_NEAR(gn[i], sg_tensor_get(sg_tensor_grad(neg), i), 1e-12);
    sg_ctx_free(ctx);
}

/* Stable forms: huge scores give finite losses; a confident softmax row keeps its tiny
 * loss; rows without negatives add their positive term alone. */
TEST(ranking_loss_extremes)
{
    sg_ctx *ctx = new_ctx(1);
    sg_tensor *pos = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){2}, (double[]){1e4, -1e4});
    sg_tensor *neg = sg_tensor_from_data(ctx, SG_F64, 2, (int64_t[]){2, 2}, (double[]){-1e4, 0, 1e4, 5});
    for (int kind = SG_RANK_SOFTMAX; kind <= SG_RANK_SELFADV; kind++) {
        sg_rank_loss_opts o = {(sg_rank_loss_kind)kind, 1, 1, -1};
        CHECK(isfinite(sg_tensor_get(sg_ranking_loss(pos, neg, &o), 0)));
    }
    sg_tensor *p1 = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){1}, (double[]){40});
    sg_tensor *n1 = sg_tensor_from_data(ctx, SG_F64, 2, (int64_t[]){1, 1}, (double[]){0});
    CHECK_NEAR(sg_tensor_get(sg_ranking_loss(p1, n1, NULL), 0), exp(-40), 1e-30);
    sg_tensor *n0 = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){1, 0});
    const double want[4] = {0, softplus_ref(-40), 0, softplus_ref(-41)};
    for (int kind = SG_RANK_SOFTMAX; kind <= SG_RANK_SELFADV; kind++) {
        sg_rank_loss_opts o = {(sg_rank_loss_kind)kind, 1, 1, -1};
        CHECK_NEAR(sg_tensor_get(sg_ranking_loss(p1, n0, &o), 0), want[kind], 1e-30);
        o.skip_offset = 0; /* the one negative masked */
        CHECK_NEAR(sg_tensor_get(sg_ranking_loss(p1, n1, &o), 0), want[kind], 1e-30);
    }
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- determinism */

/* Every output and gradient of the four ops on a context of `threads` threads, appended
 * as bytes to out; returns the length. Sizes give several chunks of rows and tiles. */
static size_t run_all(int threads, unsigned char *out, size_t cap)
{
    sg_ctx *ctx = new_ctx(threads);
    size_t n = 0;
#define KEEP(t)                                                                          \
    do {                                                                                 \
        sg_tensor *k_ = (t);                                                             \
        size_t b_ = k_ ? (size_t)sg_tensor_numel(k_) * sg_dtype_size(sg_tensor_dtype(k_)) : 0; \
        CHECK(k_ != NULL && n + b_ <= cap);                                              \
        if (k_ && n + b_ <= cap) memcpy(out + n, sg_tensor_data(k_), b_), n += b_;       \
    } while (0)
    for (int kind = SG_DIST_L1; kind <= SG_DIST_COMPLEX; kind++) {
        sg_tensor *a = RND(ctx, SG_F32, -1, 1, 70, 40), *b = RND(ctx, SG_F32, -1, 1, 90, 40);
        sg_tensor *y = sg_cdist(a, b, (sg_dist_kind)kind), *r = sg_rowdist(a, sg_narrow(b, 0, 0, 70), (sg_dist_kind)kind);
        sg_tensor *c = sg_complex_mul(a, sg_narrow(b, 0, 5, 70), kind == 1);
        KEEP(y);
        KEEP(r);
        KEEP(c);
        CHECK_STATUS(ctx, sg_backward(sg_add(sg_add(sg_sum(sg_mul(y, y)), sg_sum(sg_exp(r))), sg_sum(sg_mul(c, c)))), SG_OK);
        KEEP(sg_tensor_grad(a));
        KEEP(sg_tensor_grad(b));
        sg_tape_reset(ctx);
    }
    for (int kind = SG_RANK_SOFTMAX; kind <= SG_RANK_SELFADV; kind++) {
        sg_tensor *pos = RND(ctx, SG_F32, -3, 3, 300), *neg = RND(ctx, SG_F32, -3, 3, 300, 310);
        sg_rank_loss_opts o = {(sg_rank_loss_kind)kind, 2, 0.5, 10};
        sg_tensor *L = sg_ranking_loss(pos, neg, &o);
        KEEP(L);
        CHECK_STATUS(ctx, sg_backward(L), SG_OK);
        KEEP(sg_tensor_grad(pos));
        KEEP(sg_tensor_grad(neg));
        sg_tape_reset(ctx);
    }
#undef KEEP
    sg_ctx_free(ctx);
    return n;
}

TEST(bitwise_the_same_on_1_2_3_threads)
{
    const size_t cap = (size_t)8 << 20;
    unsigned char *ref = malloc(cap), *got = malloc(cap);
    const size_t n = run_all(1, ref, cap);
    CHECK(n > 0);
    for (int threads = 2; threads <= 3; threads++) {
        CHECK(run_all(threads, got, cap) == n);
        CHECK(memcmp(ref, got, n) == 0);
    }
    free(ref);
    free(got);
}

/* The cdist kernels have a variant per CPU level (SG__HOT_CLONES): each gives the base
 * level's bits. */
TEST(bitwise_the_same_at_every_kernel_level)
{
    const size_t cap = (size_t)8 << 20;
    unsigned char *ref = malloc(cap), *got = malloc(cap);
    CHECK(sg__kernels_force(SG__KERNELS_BASE));
    const size_t n = run_all(2, ref, cap);
    for (int level = SG__KERNELS_BASE + 1; level < SG__KERNELS_LEVELS; level++) {
        if (!sg__kernels_has(level)) continue;
        CHECK(sg__kernels_force(level));
        CHECK(run_all(2, got, cap) == n);
        CHECK(memcmp(ref, got, n) == 0);
    }
    sg__kernels_force(-1);
    free(ref);
    free(got);
}

/* ---------------------------------------------------------------- errors */

/* expr must fail with `code`, name `what` in the message and record no node. */
#define EXPECT_FAIL(ctx, expr, code, what)                                       \
    do {                                                                         \
        int64_t nodes_ = sg_tape_nodes(ctx);                                     \
        sg_ctx_clear_error(ctx);                                                 \
        sg_tensor *r_ = (expr);                                                  \
        CHECK(r_ == NULL);                                                       \
        CHECK_STATUS(ctx, sg_ctx_status(ctx), code);                             \
        if (!strstr(sg_ctx_message(ctx), what)) {                                \
            fprintf(stderr, "  line %d: message '%s' does not name %s\n", __LINE__, \
                    sg_ctx_message(ctx), what);                                  \
            tu_failures++;                                                       \
        }                                                                        \
        CHECK(sg_tape_nodes(ctx) == nodes_);                                     \
        sg_ctx_clear_error(ctx);                                                 \
    } while (0)

TEST(errors)
{
    sg_ctx *ctx = new_ctx(1), *other = new_ctx(1);
    sg_tensor *a = RND(ctx, SG_F64, -1, 1, 3, 4), *b = RND(ctx, SG_F64, -1, 1, 5, 4);
    sg_tensor *f = RND(ctx, SG_F32, -1, 1, 3, 4), *odd = RND(ctx, SG_F64, -1, 1, 3, 5);
    sg_tensor *v = RND(ctx, SG_F64, -1, 1, 4), *i = sg_tensor_new(ctx, SG_I64, 2, (int64_t[]){3, 4});
    sg_tensor *c = sg_coo_new(ctx, SG_F64, 2, (int64_t[]){3, 4}, 2, 1, (int64_t[]){0, 1}, (double[]){1});
    sg_tensor *x = RND(other, SG_F64, -1, 1, 3, 4);
    sg_tensor_fill(i, 0);
    (void)sg_cdist(a, b, SG_DIST_L2); /* a node on the tape: failures leave it alone */
    EXPECT_FAIL(ctx, sg_cdist(a, f, SG_DIST_L1), SG_ERR_DTYPE, "sg_cdist");
    EXPECT_FAIL(ctx, sg_cdist(a, i, SG_DIST_L1), SG_ERR_DTYPE, "sg_cdist");
    EXPECT_FAIL(ctx, sg_cdist(a, odd, SG_DIST_L1), SG_ERR_SHAPE, "(3,5)");
    EXPECT_FAIL(ctx, sg_cdist(a, v, SG_DIST_L1), SG_ERR_SHAPE, "sg_cdist");
    EXPECT_FAIL(ctx, sg_cdist(odd, odd, SG_DIST_COMPLEX), SG_ERR_SHAPE, "even");
    EXPECT_FAIL(ctx, sg_cdist(a, b, (sg_dist_kind)3), SG_ERR_ARG, "kind");
    EXPECT_FAIL(ctx, sg_cdist(a, c, SG_DIST_L2), SG_ERR_LAYOUT, "sg_cdist");
    EXPECT_FAIL(ctx, sg_cdist(a, x, SG_DIST_L2), SG_ERR_ARG, "contexts");
    EXPECT_FAIL(ctx, sg_cdist(a, NULL, SG_DIST_L2), SG_OK, "");
    EXPECT_FAIL(ctx, sg_rowdist(a, b, SG_DIST_L2), SG_ERR_SHAPE, "sg_rowdist");
    EXPECT_FAIL(ctx, sg_rowdist(a, f, SG_DIST_L2), SG_ERR_DTYPE, "sg_rowdist");
    EXPECT_FAIL(ctx, sg_rowdist(odd, odd, SG_DIST_COMPLEX), SG_ERR_SHAPE, "even");
    EXPECT_FAIL(ctx, sg_rowdist(a, a, (sg_dist_kind)-1), SG_ERR_ARG, "kind");
    EXPECT_FAIL(ctx, sg_complex_mul(a, b, false), SG_ERR_SHAPE, "sg_complex_mul");
    EXPECT_FAIL(ctx, sg_complex_mul(odd, odd, true), SG_ERR_SHAPE, "(3,5)");
    EXPECT_FAIL(ctx, sg_complex_mul(a, f, false), SG_ERR_DTYPE, "sg_complex_mul");
    EXPECT_FAIL(ctx, sg_complex_mul(c, a, false), SG_ERR_LAYOUT, "sg_complex_mul");
    sg_tensor *pos = RND(ctx, SG_F64, -1, 1, 3);
    sg_rank_loss_opts o = SG_RANK_LOSS_OPTS_DEFAULT;
    EXPECT_FAIL(ctx, sg_ranking_loss(v, a, &o), SG_ERR_SHAPE, "sg_ranking_loss");
    EXPECT_FAIL(ctx, sg_ranking_loss(a, a, &o), SG_ERR_SHAPE, "sg_ranking_loss");
    EXPECT_FAIL(ctx, sg_ranking_loss(pos, f, &o), SG_ERR_DTYPE, "sg_ranking_loss");
    EXPECT_FAIL(ctx, sg_ranking_loss(pos, c, &o), SG_ERR_LAYOUT, "sg_ranking_loss");
    o.skip_offset = 2; /* 2 + 3 > 4 */
    EXPECT_FAIL(ctx, sg_ranking_loss(pos, a, &o), SG_ERR_ARG, "skip_offset");
    o.skip_offset = -2;
    EXPECT_FAIL(ctx, sg_ranking_loss(pos, a, &o), SG_ERR_ARG, "skip_offset");
    o.skip_offset = 1;
    CHECK(sg_ranking_loss(pos, a, &o) != NULL); /* 1 + 3 <= 4: the last column masked last */
    o.kind = (sg_rank_loss_kind)4;
    EXPECT_FAIL(ctx, sg_ranking_loss(pos, a, &o), SG_ERR_ARG, "kind");
    o.kind = SG_RANK_MARGIN;
    o.margin = NAN;
    EXPECT_FAIL(ctx, sg_ranking_loss(pos, a, &o), SG_ERR_ARG, "margin");
    sg_ctx_free(ctx);
    sg_ctx_free(other);
}

TEST(empty_operands)
{
    sg_ctx *ctx = new_ctx(2);
    sg_tensor *a = RND(ctx, SG_F32, -1, 1, 0, 6), *b = RND(ctx, SG_F32, -1, 1, 4, 6);
    sg_tensor *y = sg_cdist(a, b, SG_DIST_L2), *z = sg_cdist(b, a, SG_DIST_COMPLEX);
    CHECK(y && sg_tensor_shape(y)[0] == 0 && sg_tensor_shape(y)[1] == 4);
    CHECK(z && sg_tensor_shape(z)[0] == 4 && sg_tensor_shape(z)[1] == 0);
    CHECK_STATUS(ctx, sg_backward(sg_add(sg_sum(y), sg_sum(z))), SG_OK);
    sg_tensor *g = sg_tensor_grad(b);
    for (int64_t k = 0; g && k < 24; k++) CHECK(sg_tensor_get(g, k) == 0);
    sg_tensor *w = RND(ctx, SG_F32, -1, 1, 3, 0);
    sg_tensor *d = sg_cdist(w, w, SG_DIST_L2);
    CHECK(d && sg_tensor_get(d, 4) == 0);
    sg_tensor *L = sg_ranking_loss(RND(ctx, SG_F32, -1, 1, 0), RND(ctx, SG_F32, -1, 1, 0, 3), NULL);
    CHECK(L && sg_tensor_get(L, 0) == 0);
    sg_ctx_free(ctx);
}

/* Distance in ulps of two finite positive doubles (their bit patterns are ordered). */
static int64_t ulps_apart(double a, double b)
{
    int64_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x > y ? x - y : y - x;
}

/* sg__vexp against libm's exp on a grid of [-745, 710] (step 1/1024, every result normal):
 * within 4 ulps on [-708, 709], the documented clamps outside (exp(-708) below -708,
 * exp(709) above 709, -inf and +inf included), NaN stays NaN. */
TEST(vexp_is_exp_within_4_ulps_and_clamps)
{
    enum { N = 1455 * 1024 + 1 };
    double *x = malloc(N * sizeof *x);
    CHECK(x != NULL);
    if (!x) return;
    for (int64_t i = 0; i < N; i++) x[i] = -745.0 + (double)i / 1024.0;
    sg__vexp(x, N);
    int64_t worst = 0, bad = 0;
    for (int64_t i = 0; i < N; i++) {
        const double v = -745.0 + (double)i / 1024.0, c = v < -708.0 ? -708.0 : v > 709.0 ? 709.0 : v;
        const int64_t u = isnormal(x[i]) && x[i] > 0 ? ulps_apart(x[i], exp(c)) : INT64_MAX;
        if (u > worst) worst = u;
        if (u > 4 && bad++ < 5) printf("  vexp(%.17g) = %.17g, exp gives %.17g\n", v, x[i], exp(c));
    }
    printf("  vexp: worst %lld ulps over %d points\n", (long long)worst, N);
    CHECK(bad == 0);
    double s[5] = {NAN, -INFINITY, INFINITY, -708.0, 709.0};
    sg__vexp(s, 5);
    CHECK(isnan(s[0]));
    CHECK(s[1] == s[3] && ulps_apart(s[1], exp(-708.0)) <= 4);
    CHECK(s[2] == s[4] && ulps_apart(s[2], exp(709.0)) <= 4);
    free(x);
}

TEST_MAIN()
