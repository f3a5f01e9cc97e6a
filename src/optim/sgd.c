/* SGD with momentum, dampening, Nesterov and L2 weight decay; dense and sparse paths.
 *
 * Without momentum and weight decay the update is linear: a sparse gradient is applied as
 * it comes (duplicates in index order), with no grouping.
 *
 * With either, SGD is "exact lazy". For a row whose gradient is zero at a step, each
 * element's (w, v) follows a linear recurrence x' = M(lr, c) x with
 *     v' = c wd w + mu v                       (c = 1 at the first step, 1 - dampening after)
 *     w' = w - lr v'                           (plain momentum)
 *     w' = w - lr (wd w + mu v')               (Nesterov)
 *     w' = (1 - lr wd) w                       (no momentum: v is absent)
 * A row remembers the parameter step it was last brought to (last[r]); when it is touched
 * at step s, the product of M over the skipped steps last[r]+1 .. s-1, each with its own
 * learning rate, is applied first, then step s with its gradient. The product is formed in
 * double from the parameter's learning-rate runs (one run per change of the learning
 * rate): a run of k equal steps costs O(log k) 2x2 products, through a table of M^(2^j)
 * for the current learning rate. Invariant: last[r] <= *ps->step for every row, with
 * equality for every row unless ps->lagging; the runs cover every step after the oldest
 * last[r] (steps before the first run, possible only for state restored without a flush,
 * take the first run's learning rate).
 * The kernels defined through SG__HOT_CLONES have a variant per CPU level (SSE2, AVX2,
 * AVX-512) picked at run time; all of them give the same bits (src/core/core.h).
 */
#include "optim/optim.h"

static bool sgd_lazy(const sg_optim *opt)
{
    return opt->o.sgd.momentum != 0 || opt->o.sgd.weight_decay != 0;
}

static bool sgd_needs_groups(const sg_optim *opt) { return sgd_lazy(opt); }

static int sgd_init(sg_optim *opt, sg__pstate *ps)
{
    sg_tensor *p = ps->param;
    if (opt->o.sgd.momentum != 0 &&
        !sg__optim_state_new(opt, ps, "momentum_buffer", p->dtype, p->ndim, p->shape, 0))
        return opt->ctx->status;
    if (sgd_lazy(opt)) {
        sg_tensor *last = sg__optim_state_new(opt, ps, "last_step", SG_I64, 1, &ps->rows, 0);
        if (!last) return opt->ctx->status;
        ps->last = last->data;
    }
    return SG_OK;
}

/* ---- the zero-gradient step as a 2x2 matrix (row-major) on (w, v) */

static void step_matrix(const sg_sgd_opts *o, double lr, double c, double M[4])
{
    double mu = o->momentum, wd = o->weight_decay;
    if (mu == 0) {
        M[0] = 1 - lr * wd;
        M[1] = M[2] = M[3] = 0;
        return;
    }
    M[2] = c * wd;
    M[3] = mu;
    if (o->nesterov) {
        M[0] = 1 - lr * wd * (1 + mu * c);
        M[1] = -lr * mu * mu;
    } else {
        M[0] = 1 - lr * c * wd;
        M[1] = -lr * mu;
    }
}

static void mat_mul(const double A[4], const double B[4], double C[4])
{
    double c0 = A[0] * B[0] + A[1] * B[2], c1 = A[0] * B[1] + A[1] * B[3];
    double c2 = A[2] * B[0] + A[3] * B[2], c3 = A[2] * B[1] + A[3] * B[3];
    C[0] = c0;
    C[1] = c1;
    C[2] = c2;
    C[3] = c3;
}

void sg__sgd_prepare(sg_optim *opt, double lr)
{
    if (!sgd_lazy(opt) || (opt->pw_n && opt->pw_lr == lr)) return;
    step_matrix(&opt->o.sgd, lr, 1 - opt->o.sgd.dampening, opt->pw[0]);
    for (int j = 1; j < 63; j++) mat_mul(opt->pw[j - 1], opt->pw[j - 1], opt->pw[j]);
    opt->pw_lr = lr;
    opt->pw_n = 63;
}

/* P = M(lr)^k * P for the steady (c = 1 - dampening) matrix. */
static void apply_power(const sg_optim *opt, double lr, int64_t k, double P[4])
{
    if (opt->pw_n && opt->pw_lr == lr) {
        for (int j = 0; k; j++, k >>= 1)
            if (k & 1) mat_mul(opt->pw[j], P, P);
        return;
    }
    double B[4];
    step_matrix(&opt->o.sgd, lr, 1 - opt->o.sgd.dampening, B);
    for (; k; k >>= 1) {
        if (k & 1) mat_mul(B, P, P);
        if (k > 1) mat_mul(B, B, B);
    }
}

/* P = product of the zero-gradient steps a..b of ps (latest on the left). */
static void catchup_matrix(const sg_optim *opt, const sg__pstate *ps, int64_t a, int64_t b,
                           double P[4])
{
    P[0] = P[3] = 1;
    P[1] = P[2] = 0;
    if (a > b || ps->n_runs == 0) return;
    const sg__lr_run *runs = ps->runs;
    int64_t nr = ps->n_runs, lo = 0, hi = nr - 1, ri = 0;
    while (lo <= hi) { /* last run starting at or before a */
        int64_t mid = lo + (hi - lo) / 2;
        if (runs[mid].start <= a) {
            ri = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    const sg_sgd_opts *o = &opt->o.sgd;
    for (int64_t x = a; x <= b; ri++) {
        double lr = runs[ri].lr;
        int64_t y = ri + 1 < nr && runs[ri + 1].start - 1 < b ? runs[ri + 1].start - 1 : b;
        if (x == 1 && o->dampening != 0 && o->momentum != 0) { /* undamped first step */
            double M1[4];
            step_matrix(o, lr, 1, M1);
            mat_mul(M1, P, P);
            x = 2;
        }
        if (x <= y) apply_power(opt, lr, y - x + 1, P);
        x = y + 1;
    }
}

/* ---- kernels */

/* Brings the row at wr_ (and its momentum row vr_, NULL without momentum), last brought to
 * step `from`, to step `to` (zero gradients), in place. */
#define SGD_CATCHUP_ROW_AT(T, opt, ps, wr_, vr_, from, to)                                 \
    do {                                                                                   \
        int64_t a_ = (from) + 1;                                                           \
        if (a_ <= (to)) {                                                                  \
            double P[4];                                                                   \
            catchup_matrix(opt, ps, a_, to, P);                                            \
            if (vr_) {                                                                     \
                for (int64_t j = 0; j < (ps)->width; j++) {                                \
                    double w0 = (wr_)[j], v0 = (vr_)[j];                                   \
                    (wr_)[j] = (T)(P[0] * w0 + P[1] * v0);                                 \
                    (vr_)[j] = (T)(P[2] * w0 + P[3] * v0);                                 \
                }                                                                          \
            } else {                                                                       \
                for (int64_t j = 0; j < (ps)->width; j++) (wr_)[j] = (T)(P[0] * (wr_)[j]); \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* Brings row r of w (and v) from last[r] to step `to`, in place. */
#define SGD_CATCHUP_ROW(T, opt, ps, w, v, r, to)                                           \
    do {                                                                                   \
        T *rw_ = (w) + (r) * (ps)->width;                                                  \
        T *rv_ = (v) ? (v) + (r) * (ps)->width : NULL;                                     \
        SGD_CATCHUP_ROW_AT(T, opt, ps, rw_, rv_, (ps)->last[r], to);                       \
    } while (0)

/* One step of elements [0, len) with gradient gp: the dense optimizer's arithmetic. */
#define SGD_ELEMS(T, w, v, gp, len, lr, wd, mu, c, nesterov)                              \
    do {                                                                                   \
        for (int64_t j = 0; j < (len); j++) {                                              \
            T g_ = (gp)[j] + (T)(wd) * (w)[j];                                             \
            if (v) {                                                                       \
                T v_ = (T)(mu) * (v)[j] + (T)(c) * g_;                                     \
                (v)[j] = v_;                                                               \
                g_ = (nesterov) ? g_ + (T)(mu) * v_ : v_;                                  \
            }                                                                              \
            (w)[j] -= (T)(lr) * g_;                                                        \
        }                                                                                  \
    } while (0)

/* The part (of `parts`) that owns row r in a deterministic row update: a multiplicative
 * hash, so that the frequent rows (low numbers in word2vec's tables) are spread over the
 * parts, with no division. */
static inline uint32_t row_part(int64_t r, uint32_t parts)
{
    return (uint32_t)(((uint64_t)((uint32_t)r * 2654435761u) * parts) >> 32);
}

/* Linear SGD: w[row of group i] -= lr * g[i] for the groups in order, by `parts` parts;
 * groups may repeat a row, so part p walks every group and updates the rows it owns
 * (row_part), each in group order: the same bits for any number of parts. Contiguous
 * ranges of rows gave the first part nearly all of a word2vec table's updates. */
typedef struct {
    const sg__optim_job *job;
    uint32_t parts;
} sgd_linear_job;

SG__HOT_BODY void sgd_linear_parts__body(void *vj, int64_t lo, int64_t hi)
{
    const sgd_linear_job *lj = vj;
    const sg__optim_job *job = lj->job;
    const sg__rowgroups *rg = job->rg;
    const sg__pstate *ps = job->ps;
    const uint32_t parts = lj->parts;
    const int64_t n = rg->n, width = ps->width;
    const size_t rowbytes = (size_t)width * sg_dtype_size(ps->param->dtype);
    SG__DISPATCH_FLOAT(ps->param->dtype, T, {
        T *w = ps->param->data;
        const T *gg = job->g;
        const T a = (T)-job->lr;
        for (int64_t p = lo; p < hi; p++) {
            for (int64_t i = 0; i < n; i++) {
                if (i + SG__OPTIM_AHEAD < n) {
                    const int64_t ra = sg__group_row(rg, i + SG__OPTIM_AHEAD);
                    if (parts == 1 || row_part(ra, parts) == (uint32_t)p)
                        sg__optim_prefetch(w, ra, rowbytes);
                }
                const int64_t r = sg__group_row(rg, i);
                if (parts > 1 && row_part(r, parts) != (uint32_t)p) continue;
                T *wr = w + r * width;
                const T *gr = gg + i * width;
                for (int64_t j = 0; j < width; j++) wr[j] += a * gr[j];
            }
        }
    });
}
SG__HOT_CLONES(sgd_linear_parts, (void *vj, int64_t lo, int64_t hi), (vj, lo, hi))

/* ---- linear update on factored rows (fused sgns): w[idx[k]] += (T)(a * coef[k]) * x[k / per]
 * with a = -lr * scale, examples (groups of `per` entries sharing an x row) in order;
 * deterministic on several threads, part p updates the rows it owns, walking its bucket
 * (sg__sgd_factored_buckets) instead of every entry. */

typedef struct {
    const sg__fused_rows *r;
    const sg__factored_buckets *b;
    void *w;
    sg_dtype dtype;
    int64_t width;
    double a;
} factored_job;

/* Parts: one per thread, each with at least a grain of the work; 1 in Hogwild mode. As
 * tasks of the caller's region, SG__TASK_PARTS per thread, so that a thread that joins
 * late still finds parts to take. The parts own disjoint rows and each applies its rows'
 * entries in entry order, so their number changes no result. */
#define SG__TASK_PARTS 4
static int64_t factored_parts(sg_ctx *ctx, const sg__fused_rows *r, int64_t width)
{
    if (ctx->nondeterministic) return 1;
    int64_t parts = r->n * width / SG__GRAIN, threads = sg__threads(ctx);
    if (sg__in_caller_region()) threads *= SG__TASK_PARTS;
    return parts > threads ? threads : parts < 1 ? 1 : parts;
}

int sg__sgd_factored_buckets(sg_optim *opt, const sg__fused_rows *r, int64_t width,
                             sg__factored_buckets *b)
{
    sg_ctx *ctx = opt->ctx;
    const int64_t parts = factored_parts(ctx, r, width), n = r->n, *idx = r->idx;
    *b = (sg__factored_buckets){1, NULL, NULL};
    if (parts <= 1) return SG_OK;
    int64_t *start = sg__arena_alloc(ctx, (size_t)(parts + 1) * sizeof *start);
    int64_t *order = sg__arena_alloc(ctx, (size_t)n * sizeof *order);
    int64_t *cursor = sg__arena_alloc(ctx, (size_t)parts * sizeof *cursor);
    if (!start || !order || !cursor) return ctx->status ? ctx->status : SG_ERR_NOMEM;
    for (int64_t p = 0; p < parts; p++) cursor[p] = 0;
    for (int64_t e = 0; e < n; e++) cursor[row_part(idx[e], (uint32_t)parts)]++;
    start[0] = 0;
    for (int64_t p = 0; p < parts; p++) {
        start[p + 1] = start[p] + cursor[p];
        cursor[p] = start[p];
    }
    for (int64_t e = 0; e < n; e++) order[cursor[row_part(idx[e], (uint32_t)parts)]++] = e;
    *b = (sg__factored_buckets){parts, order, start};
    return SG_OK;
}

/* Examples [lo, hi), every entry: one thread alone, or Hogwild-style. The row of the
 * entry SG__OPTIM_AHEAD entries on is prefetched for writing. */
SG__HOT_BODY void factored_examples__body(const factored_job *j, int64_t lo, int64_t hi)
{
    const int64_t per = j->r->per, width = j->width, *idx = j->r->idx, end = hi * per;
    const size_t rowbytes = (size_t)width * sg_dtype_size(j->dtype);
    for (int64_t e = lo * per; e < end && e < lo * per + SG__OPTIM_AHEAD; e++)
        sg__optim_prefetch(j->w, idx[e], rowbytes);
    SG__DISPATCH_FLOAT(j->dtype, T, {
        const T *x = j->r->x;
        const T *coef = j->r->coef;
        T *w = j->w;
        for (int64_t i = lo; i < hi; i++) {
            const T *restrict xi = x + i * width;
            for (int64_t e = i * per; e < (i + 1) * per; e++) {
                if (e + SG__OPTIM_AHEAD < end) sg__optim_prefetch(w, idx[e + SG__OPTIM_AHEAD], rowbytes);
                T *restrict wr = w + idx[e] * width;
                const T u = (T)(j->a * (double)coef[e]);
                for (int64_t d = 0; d < width; d++) wr[d] += u * xi[d];
            }
        }
    });
}
SG__HOT_CLONES(factored_examples, (const factored_job *j, int64_t lo, int64_t hi), (j, lo, hi))

/* Deterministic: parts [lo, hi), each walking only its bucket (its entries in order). */
SG__HOT_BODY void factored_parts_range__body(void *ud, int64_t lo, int64_t hi)
{
    const factored_job *j = ud;
    const int64_t per = j->r->per, width = j->width, *idx = j->r->idx, *order = j->b->order;
    const size_t rowbytes = (size_t)width * sg_dtype_size(j->dtype);
    SG__DISPATCH_FLOAT(j->dtype, T, {
        const T *x = j->r->x;
        const T *coef = j->r->coef;
        T *w = j->w;
        for (int64_t p = lo; p < hi; p++) {
            const int64_t first = j->b->start[p];
            const int64_t end = j->b->start[p + 1];
            for (int64_t k = first; k < end && k < first + SG__OPTIM_AHEAD; k++)
                sg__optim_prefetch(w, idx[order[k]], rowbytes);
            for (int64_t k = first; k < end; k++) {
                if (k + SG__OPTIM_AHEAD < end)
                    sg__optim_prefetch(w, idx[order[k + SG__OPTIM_AHEAD]], rowbytes);
                const int64_t e = order[k];
                const T *restrict xi = x + (e / per) * width;
                T *restrict wr = w + idx[e] * width;
                const T u = (T)(j->a * (double)coef[e]);
                for (int64_t d = 0; d < width; d++) wr[d] += u * xi[d];
            }
        }
    });
}
SG__HOT_CLONES(factored_parts_range, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* Hogwild: examples [lo, hi) update their rows without owning them. */
static void factored_hogwild_range(void *ud, int64_t lo, int64_t hi)
{
    factored_examples(ud, lo, hi);
}

void sg__sgd_rows_factored(sg_optim *opt, sg__pstate *ps, const sg__fused_rows *r,
                           const sg__factored_buckets *b, double lr)
{
    sg_ctx *ctx = opt->ctx;
    const int64_t width = ps->width, examples = r->n / r->per;
    factored_job j = {r, b, ps->param->data, ps->param->dtype, width, -lr * r->scale};
    if (ctx->nondeterministic)
        sg__parallel_for(ctx, examples, sg__row_grain(r->per * width), factored_hogwild_range, &j);
    else if (b->parts > 1)
        sg__parallel_for(ctx, b->parts, 1, factored_parts_range, &j);
    else
        factored_examples(&j, 0, examples);
}

/* Groups [lo, hi) of an exact lazy step: each row catches up to step s - 1, then steps. */
SG__HOT_BODY void sgd_lazy_range__body(void *vj, int64_t lo, int64_t hi)
{
    const sg__optim_job *job = vj;
    const sg_optim *opt = job->opt;
    const sg_sgd_opts *o = &opt->o.sgd;
    const sg__rowgroups *rg = job->rg;
    const sg__pstate *ps = job->ps;
    int64_t n = rg->n, width = ps->width, s = job->s;
    double lr = job->lr, mu = o->momentum, wd = o->weight_decay, c = s == 1 ? 1 : 1 - o->dampening;
    int nesterov = o->nesterov;
    int64_t *last = ps->last;
    size_t rowbytes = (size_t)width * sg_dtype_size(ps->param->dtype);
    SG__DISPATCH_FLOAT(ps->param->dtype, T, {
        T *w = ps->param->data;
        T *v = mu != 0 ? ps->state[1]->data : NULL;
        const T *gg = job->g;
        for (int64_t i = lo; i < hi; i++) {
            if (i + SG__OPTIM_AHEAD < n) {
                int64_t ra = sg__group_row(rg, i + SG__OPTIM_AHEAD);
                sg__optim_prefetch(w, ra, rowbytes);
                sg__optim_prefetch(v, ra, rowbytes);
                sg__optim_prefetch(last, ra, sizeof *last);
            }
            int64_t r = sg__group_row(rg, i);
            SGD_CATCHUP_ROW(T, opt, ps, w, v, r, s - 1);
            T buf[SG__OPTIM_CHUNK];
            for (int64_t c0 = 0; c0 < width; c0 += SG__OPTIM_CHUNK) {
                int64_t len = width - c0 < SG__OPTIM_CHUNK ? width - c0 : SG__OPTIM_CHUNK;
                const T *gp = SG__GROUP_SUM(T)(rg, i, gg, width, c0, len, buf);
                T *wr = w + r * width + c0;
                T *vr = v ? v + r * width + c0 : NULL;
                SGD_ELEMS(T, wr, vr, gp, len, lr, wd, mu, c, nesterov);
            }
            last[r] = s;
        }
    });
}
SG__HOT_CLONES(sgd_lazy_range, (void *vj, int64_t lo, int64_t hi), (vj, lo, hi))

static void sgd_rows(sg_optim *opt, sg__pstate *ps, const sg__rowgroups *rg, const void *g,
                     int64_t s, double lr)
{
    sg__optim_job job = {opt, ps, rg, g, s, lr};
    if (!ps->last) { /* linear: groups may repeat a row, so each part owns its rows */
        const int parts = sg__parallel_threads(opt->ctx, rg->n * ps->width, SG__GRAIN);
        sgd_linear_job lj = {&job, (uint32_t)parts};
        sg__parallel_for(opt->ctx, parts, 1, sgd_linear_parts, &lj); /* one part: inline */
        return;
    }
    sg__parallel_for(opt->ctx, rg->n, sg__row_grain(ps->width), sgd_lazy_range, &job);
    if (!rg->rows || (rg->unique && rg->n == ps->rows)) { /* every row is at step s */
        ps->lagging = false;
        ps->n_runs = 0;
    } else {
        ps->lagging = true;
    }
}

void sg__sgd_row_current(const sg_optim *opt, const sg__pstate *ps, int64_t r, void *w, void *v)
{
    const int64_t width = ps->width;
    const bool momentum = opt->o.sgd.momentum != 0;
    const size_t rowbytes = (size_t)width * sg_dtype_size(ps->param->dtype);
    memcpy(w, (const char *)ps->param->data + (size_t)r * rowbytes, rowbytes);
    if (momentum) memcpy(v, (const char *)ps->state[1]->data + (size_t)r * rowbytes, rowbytes);
    SG__DISPATCH_FLOAT(ps->param->dtype, T, {
        T *wr = w;
        T *vr = momentum ? v : NULL;
        SGD_CATCHUP_ROW_AT(T, opt, ps, wr, vr, ps->last[r], *ps->step);
    });
}

/* Elements [lo, hi) of a plain SGD step. */
SG__HOT_BODY void sgd_dense_range__body(void *vj, int64_t lo, int64_t hi)
{
    const sg__optim_job *job = vj;
    SG__DISPATCH_FLOAT(job->ps->param->dtype, T, {
        T *w = job->ps->param->data;
        const T *gg = job->g;
        T a = (T)-job->lr;
        for (int64_t i = lo; i < hi; i++) w[i] += a * gg[i];
    });
}
SG__HOT_CLONES(sgd_dense_range, (void *vj, int64_t lo, int64_t hi), (vj, lo, hi))

static void sgd_dense(sg_optim *opt, sg__pstate *ps, const void *g, int64_t s, double lr)
{
    if (ps->last) { /* rows behind catch up on the way */
        sg__rowgroups all = {ps->rows, NULL, NULL, NULL, true};
        sgd_rows(opt, ps, &all, g, s, lr);
        return;
    }
    sg__optim_job job = {opt, ps, NULL, g, s, lr};
    sg__parallel_for(opt->ctx, ps->param->numel, SG__GRAIN, sgd_dense_range, &job);
}

/* Rows [lo, hi) brought to the parameter's step. */
SG__HOT_BODY void sgd_flush_range__body(void *vj, int64_t lo, int64_t hi)
{
    const sg__optim_job *job = vj;
    const sg__pstate *ps = job->ps;
    int64_t s = *ps->step, *last = ps->last;
    SG__DISPATCH_FLOAT(ps->param->dtype, T, {
        T *w = ps->param->data;
        T *v = job->opt->o.sgd.momentum != 0 ? ps->state[1]->data : NULL;
        for (int64_t r = lo; r < hi; r++) {
            SGD_CATCHUP_ROW(T, job->opt, ps, w, v, r, s);
            last[r] = s;
        }
    });
}
SG__HOT_CLONES(sgd_flush_range, (void *vj, int64_t lo, int64_t hi), (vj, lo, hi))

static void sgd_flush(sg_optim *opt, sg__pstate *ps)
{
    if (!ps->last) return;
    if (ps->n_runs) sg__sgd_prepare(opt, ps->runs[ps->n_runs - 1].lr);
    sg__optim_job job = {opt, ps, NULL, NULL, *ps->step, 0};
    sg__parallel_for(opt->ctx, ps->rows, sg__row_grain(ps->width), sgd_flush_range, &job);
    ps->lagging = false;
    ps->n_runs = 0;
}

/* The rows an op is about to read, brought to the parameter's step (serially: rows may
 * repeat, and the op reading them has not started). ps stays lagging: other rows may be. */
static void sgd_sync_rows(sg_optim *opt, sg__pstate *ps, const sg_tensor *rows)
{
    if (!ps->last) return;
    if (ps->n_runs) sg__sgd_prepare(opt, ps->runs[ps->n_runs - 1].lr);
    const int64_t s = *ps->step, n = rows->numel;
    int64_t *last = ps->last;
    SG__DISPATCH_FLOAT(ps->param->dtype, T, {
        T *w = ps->param->data;
        T *v = opt->o.sgd.momentum != 0 ? ps->state[1]->data : NULL;
        for (int64_t i = 0; i < n; i++) {
            int64_t r = sg__idx_at(rows, i);
            if (r < 0 || r >= ps->rows || last[r] == s) continue;
            SGD_CATCHUP_ROW(T, opt, ps, w, v, r, s);
            last[r] = s;
        }
    });
}

const sg__optim_ops sg__sgd_ops = {sgd_init, sgd_dense, sgd_rows, sgd_flush, sgd_sync_rows, sgd_needs_groups};
