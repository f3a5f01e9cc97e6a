/* The optimizer object: construction, parameter registration, learning-rate schedules,
 * the step driver over the gradient store, flush, zero_grad, the NaN/Inf guard and the
 * fused-update hook (sg__optim_apply_rows, reached by fused ops through opt->rows). The
 * arithmetic of each kind lives in sgd.c, adagrad.c, adam.c; the state's accessors and
 * its checkpoint form in state_io.c.
 *
 * Invariants (besides optim.h's):
 * - A step or a fused update first does everything that can fail (learning rate, dense
 *   copies of gradients, row grouping, run-history capacity), for every parameter, and
 *   only then writes: on error nothing has changed.
 * - A step costs O(gradients in the store + rows they name): it never walks opt->params.
 * - A fused update is checked (sg__optim_check_rows) before it is applied: the tape runs
 *   every deferred update's check before any of them writes (autograd/tape.h).
 */
#include "optim/optim.h"

#include <math.h>

/* ---- learning rate */

static int lr_at(const sg_optim *opt, int64_t t, double *out)
{
    double lr = opt->lr;
    switch (opt->sched.kind) {
    case SG_LR_CONSTANT:
        break;
    case SG_LR_LINEAR: {
        int64_t k = t - 1 < opt->sched.steps ? t - 1 : opt->sched.steps;
        lr = opt->lr * (1.0 + (opt->sched.end_factor - 1.0) * (double)k / (double)opt->sched.steps);
        break;
    }
    case SG_LR_CALLBACK:
        lr = opt->sched.fn(opt->sched.ud, t, opt->lr);
        break;
    }
    if (!isfinite(lr) || lr < 0)
        return sg__failc(opt->ctx, SG_ERR_VALUE, "%s: learning rate of step %lld is %g",
                         opt->name, (long long)t, lr);
    *out = lr;
    return SG_OK;
}

int sg_optim_set_schedule(sg_optim *opt, const sg_lr_schedule *sched)
{
    if (!opt) return SG_ERR_NULL;
    sg_lr_schedule s = {SG_LR_CONSTANT, 0, 1.0, NULL, NULL};
    if (sched) s = *sched;
    switch (s.kind) {
    case SG_LR_CONSTANT:
        break;
    case SG_LR_LINEAR:
        if (s.steps <= 0 || !isfinite(s.end_factor) || s.end_factor < 0)
            return sg__failc(opt->ctx, SG_ERR_ARG,
                             "linear schedule: steps %lld must be > 0 and end_factor %g >= 0",
                             (long long)s.steps, s.end_factor);
        break;
    case SG_LR_CALLBACK:
        if (!s.fn) return sg__failc(opt->ctx, SG_ERR_NULL, "callback schedule: NULL function");
        break;
    default:
        return sg__failc(opt->ctx, SG_ERR_ARG, "unknown schedule kind %d", (int)s.kind);
    }
    opt->sched = s;
    return SG_OK;
}

int sg_optim_set_lr(sg_optim *opt, double base_lr)
{
    if (!opt) return SG_ERR_NULL;
    if (!sg__valid_lr(base_lr)) return sg__failc(opt->ctx, SG_ERR_ARG, "learning rate %g", base_lr);
    opt->lr = base_lr;
    return SG_OK;
}

double sg_optim_lr(const sg_optim *opt)
{
    double lr = 0;
    if (!opt || lr_at(opt, opt->t + 1, &lr)) return NAN;
    return lr;
}

int64_t sg_optim_steps(const sg_optim *opt) { return opt ? opt->t : -1; }

int sg_optim_set_steps(sg_optim *opt, int64_t steps)
{
    if (!opt) return SG_ERR_NULL;
    if (steps < 0) return sg__failc(opt->ctx, SG_ERR_ARG, "negative step count %lld", (long long)steps);
    opt->t = steps;
    return SG_OK;
}

/* ---- construction */

static bool optim_has_param(const sg_optim *opt, const sg_tensor *p);

static sg_optim *optim_new(sg_ctx *ctx, sg__optim_kind kind, const char *name,
                           const sg__optim_ops *ops, double lr)
{
    sg_optim *opt = sg__calloc(ctx, 1, sizeof *opt);
    if (!opt) return NULL;
    opt->rows = (sg__row_updater){sg__optim_check_rows, sg__optim_apply_rows, optim_has_param};
    opt->ctx = ctx;
    opt->next = ctx->optims;
    if (ctx->optims) ctx->optims->prev = opt;
    ctx->optims = opt;
    opt->kind = kind;
    opt->name = name;
    opt->ops = ops;
    opt->lr = lr;
    opt->sched = (sg_lr_schedule){SG_LR_CONSTANT, 0, 1.0, NULL, NULL};
    opt->pw_n = 0;
    return opt;
}

sg_optim *sg_optim_sgd(sg_ctx *ctx, const sg_sgd_opts *opts)
{
    if (!ctx) return NULL;
    sg_sgd_opts o = SG_SGD_OPTS_DEFAULT;
    if (opts) o = *opts;
    if (!sg__valid_lr(o.lr) || !(o.momentum >= 0) || !isfinite(o.momentum) ||
        !(o.weight_decay >= 0) || !isfinite(o.weight_decay) || !isfinite(o.dampening))
        return sg__fail(ctx, SG_ERR_ARG, "sgd: lr %g, momentum %g, weight_decay %g must be finite and >= 0",
                        o.lr, o.momentum, o.weight_decay);
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
        return sg__fail(ctx, SG_ERR_ARG, "sgd: nesterov needs momentum > 0 and dampening 0");
    sg_optim *opt = optim_new(ctx, SG__OPT_SGD, "sgd", &sg__sgd_ops, o.lr);
    if (opt) opt->o.sgd = o;
    return opt;
}

static sg_optim *adagrad_new(sg_ctx *ctx, const sg_adagrad_opts *opts, bool rowwise)
{
    if (!ctx) return NULL;
    const char *name = rowwise ? "rowwise_adagrad" : "adagrad";
    sg_adagrad_opts o = SG_ADAGRAD_OPTS_DEFAULT;
    if (opts) o = *opts;
    if (!sg__valid_lr(o.lr) || !(o.lr_decay >= 0) || !isfinite(o.lr_decay) || !(o.weight_decay >= 0) ||
        !isfinite(o.weight_decay) || !(o.initial_accumulator >= 0) ||
        !isfinite(o.initial_accumulator) || !(o.eps >= 0) || !isfinite(o.eps))
        return sg__fail(ctx, SG_ERR_ARG,
                        "%s: lr %g, lr_decay %g, weight_decay %g, initial_accumulator %g, eps %g "
                        "must be finite and >= 0",
                        name, o.lr, o.lr_decay, o.weight_decay, o.initial_accumulator, o.eps);
    sg_optim *opt = optim_new(ctx, rowwise ? SG__OPT_ROWWISE_ADAGRAD : SG__OPT_ADAGRAD, name,
                              rowwise ? &sg__rowwise_adagrad_ops : &sg__adagrad_ops, o.lr);
    if (opt) opt->o.adagrad = o;
    return opt;
}

sg_optim *sg_optim_adagrad(sg_ctx *ctx, const sg_adagrad_opts *opts)
{
    return adagrad_new(ctx, opts, false);
}

sg_optim *sg_optim_rowwise_adagrad(sg_ctx *ctx, const sg_adagrad_opts *opts)
{
    return adagrad_new(ctx, opts, true);
}

static sg_optim *adam_new(sg_ctx *ctx, const sg_adam_opts *opts, bool lazy)
{
    if (!ctx) return NULL;
    const char *name = lazy ? "lazy_adam" : "adam";
    sg_adam_opts o = SG_ADAM_OPTS_DEFAULT;
    if (opts) o = *opts;
    if (!sg__valid_lr(o.lr) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) ||
        !(o.eps >= 0) || !isfinite(o.eps) || !(o.weight_decay >= 0) || !isfinite(o.weight_decay))
        return sg__fail(ctx, SG_ERR_ARG,
                        "%s: lr %g >= 0, betas (%g, %g) in [0, 1), eps %g >= 0, weight_decay %g >= 0",
                        name, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
    sg_optim *opt = optim_new(ctx, lazy ? SG__OPT_LAZY_ADAM : SG__OPT_ADAM, name,
                              lazy ? &sg__lazy_adam_ops : &sg__adam_ops, o.lr);
    if (!opt) return NULL;
    opt->o.adam = o;
    if (lazy && sg__lazy_adam_tables(opt)) {
        sg_optim_free(opt);
        return NULL;
    }
    return opt;
}

sg_optim *sg_optim_adam(sg_ctx *ctx, const sg_adam_opts *opts) { return adam_new(ctx, opts, false); }

sg_optim *sg_optim_lazy_adam(sg_ctx *ctx, const sg_adam_opts *opts)
{
    return adam_new(ctx, opts, true);
}

static void pstate_free(sg_optim *opt, sg__pstate *ps)
{
    if (ps->param->optim_state == ps) ps->param->optim_state = NULL;
    for (int i = 0; i < ps->n_state; i++) {
        ps->state[i]->owner_frees = false;
        sg_tensor_free(ps->state[i]);
    }
    sg__free(opt->ctx, ps->runs);
    sg__free(opt->ctx, ps);
}

/* The release of the parameter lifetime seam (autograd/tape.h): param leaves its
 * optimizer's list, which keeps its order (the later parameters move down one index). */
static void param_release(sg_tensor *param)
{
    sg__pstate *ps = param->optim_state;
    sg_optim *opt = ps->opt;
    for (int64_t i = ps->index + 1; i < opt->n_params; i++) {
        opt->params[i - 1] = opt->params[i];
        opt->params[i - 1]->index = i - 1;
    }
    opt->n_params--;
    pstate_free(opt, ps);
}

/* The sync of the seam: rows (or all rows) brought to the parameter's step. */
static void param_sync(sg_tensor *param, const sg_tensor *rows)
{
    sg__pstate *ps = param->optim_state;
    sg_optim *opt = ps->opt;
    if (!ps->lagging || !opt->ops->flush) return;
    if (rows) opt->ops->sync_rows(opt, ps, rows);
    else opt->ops->flush(opt, ps);
}

static void optim_destroy(sg_optim *opt)
{
    for (int64_t i = 0; i < opt->n_params; i++) pstate_free(opt, opt->params[i]);
    sg__free(opt->ctx, opt->params);
    sg__free(opt->ctx, opt->slot);
    sg__free(opt->ctx, opt->beta_pow);
    sg__free(opt->ctx, opt);
}

/* ctx->release_optims: frees the optimizers whose sg_optim_free waited for the tape. */
static void release_optims(sg_ctx *ctx)
{
    while (ctx->optims_released) {
        sg_optim *opt = ctx->optims_released;
        ctx->optims_released = opt->next;
        optim_destroy(opt);
    }
}

void sg_optim_free(sg_optim *opt)
{
    if (!opt) return;
    sg_ctx *ctx = opt->ctx;
    if (opt->prev) opt->prev->next = opt->next;
    else if (ctx->optims == opt) ctx->optims = opt->next;
    if (opt->next) opt->next->prev = opt->prev;
    if (sg__tape_uses(ctx, opt)) { /* a fused op on the tape calls it in its backward */
        opt->prev = NULL;
        opt->next = ctx->optims_released;
        ctx->optims_released = opt;
        ctx->release_optims = release_optims;
        return;
    }
    optim_destroy(opt);
}

/* ---- parameters and state */

sg_tensor *sg__optim_state_new(sg_optim *opt, sg__pstate *ps, const char *name,
                               sg_dtype dtype, int ndim, const int64_t *shape, double fill)
{
    if (ps->n_state == SG__OPTIM_MAX_STATE)
        return sg__fail(opt->ctx, SG_ERR_STATE, "%s: too many state tensors", opt->name);
    sg_tensor *t = sg_tensor_new(opt->ctx, dtype, ndim, shape);
    if (!t) return NULL;
    if (fill != 0) sg_tensor_fill(t, fill);
    t->owner_frees = true;
    ps->state[ps->n_state] = t;
    ps->state_name[ps->n_state++] = name;
    return t;
}

/* Grows opt->slot to at least `rows` entries, all -1 (no grouping's stamp). */
static int slot_reserve(sg_optim *opt, int64_t rows)
{
    if (rows <= opt->slot_len) return SG_OK;
    int64_t *s = sg__malloc(opt->ctx, (size_t)rows * sizeof *s);
    if (!s) return SG_ERR_NOMEM;
    for (int64_t i = 0; i < rows; i++) s[i] = -1;
    sg__free(opt->ctx, opt->slot);
    opt->slot = s;
    opt->slot_len = rows;
    return SG_OK;
}

int sg_optim_add_param(sg_optim *opt, sg_tensor *p)
{
    if (!opt) return SG_ERR_NULL;
    sg_ctx *ctx = opt->ctx;
    if (!p) return sg__failc(ctx, SG_ERR_NULL, "%s: NULL parameter", opt->name);
    if (p->ctx != ctx) return sg__failc(ctx, SG_ERR_ARG, "%s: parameter of another context", opt->name);
    if (p->layout != SG_DENSE)
        return sg__failc(ctx, SG_ERR_LAYOUT, "%s: parameters must be dense", opt->name);
    if (!sg__is_float(p->dtype))
        return sg__failc(ctx, SG_ERR_DTYPE, "%s: parameters must be f32 or f64", opt->name);
    if (!p->persistent || !(p->owns_data || p->borrows_data))
        return sg__failc(ctx, SG_ERR_ARG, "%s: parameters must be persistent tensors", opt->name);
    if (p->optim_state)
        return sg__failc(ctx, SG_ERR_STATE, "%s: tensor is already a parameter of an optimizer",
                         opt->name);
    sg__pstate **grown = sg__grow(ctx, opt->params, &opt->cap_params, opt->n_params, sizeof *grown, 16);
    if (!grown) return SG_ERR_NOMEM;
    opt->params = grown;
    sg__pstate *ps = sg__calloc(ctx, 1, sizeof *ps);
    if (!ps) return SG_ERR_NOMEM;
    ps->owner.release = param_release;
    ps->owner.sync = param_sync;
    ps->opt = opt;
    ps->param = p;
    ps->rows = p->ndim ? p->shape[0] : 1;
    ps->width = ps->rows ? p->numel / ps->rows : 0;
    sg_tensor *st = sg__optim_state_new(opt, ps, "step", SG_I64, 0, NULL, 0);
    int rc = st ? opt->ops->init(opt, ps) : ctx->status;
    if (!rc && opt->ops->needs_groups(opt)) rc = slot_reserve(opt, ps->rows);
    if (rc) {
        pstate_free(opt, ps);
        return rc;
    }
    ps->step = st->data;
    ps->index = opt->n_params;
    opt->params[opt->n_params++] = ps;
    p->optim_state = ps;
    return SG_OK;
}

int64_t sg_optim_param_count(const sg_optim *opt) { return opt ? opt->n_params : -1; }

sg_tensor *sg_optim_param(const sg_optim *opt, int64_t i)
{
    if (!opt || i < 0 || i >= opt->n_params) return NULL;
    return opt->params[i]->param;
}

static bool optim_has_param(const sg_optim *opt, const sg_tensor *p)
{
    return sg__optim_state_of(opt, p) != NULL;
}

int sg_optim_zero_grad(sg_optim *opt)
{
    if (!opt) return SG_ERR_NULL;
    sg_ctx *ctx = opt->ctx;
    int64_t kept = 0;
    for (int64_t i = 0; i < ctx->store_len; i++) { /* one pass, the others keep their order */
        sg_tensor *p = ctx->store[i];
        if (!sg__optim_state_of(opt, p)) {
            ctx->store[kept++] = p;
            continue;
        }
        p->grad = NULL;
        p->grad_owned = false;
        p->rows_unique_lb = 0;
        p->in_store = false;
    }
    ctx->store_len = kept;
    return SG_OK;
}

/* ---- planning: everything a parameter's update needs, allocated before any write */

/* Plans a step keeps on the stack (more come from the step arena). */
#define SG__OPTIM_STACK_PLANS 16

typedef struct {
    sg__pstate *ps;
    const void *g; /* dense: (numel); rows: (.., width) */
    bool dense;
    sg__rowgroups rg;
    const sg__fused_rows *factored; /* linear SGD on factored fused rows, else NULL */
    sg__factored_buckets buckets;   /* factored: its entries by owner part */
} plan;

#define SG__GROUP_AHEAD 16

/* The first pass of row grouping: entry i of idx[0..n) joins group grp[i], the groups
 * numbered in order of first appearance (rows[k]: group k's row, off[k + 1]: its size);
 * returns the number of groups. Two ways to find a row's group, the same answer: */

/* ... through opt->slot, a word per row of the largest parameter: slot[r] holds this
 * grouping's stamp (epoch << SG__SLOT_GROUP_BITS | group) once r has been met, and
 * anything else (-1, an older grouping's stamp) means "not met yet", so nothing restores
 * it after (the slot is reset only when the epochs wrap around, every 2^23 groupings). */
static int64_t group_by_slot(sg_optim *opt, const int64_t *idx, int64_t n, int64_t *rows, int64_t *off,
                             int64_t *grp)
{
    if (opt->slot_epoch == SG__SLOT_EPOCH_MAX) { /* wrapped: no stamp may look current */
        for (int64_t r = 0; r < opt->slot_len; r++) opt->slot[r] = -1;
        opt->slot_epoch = 0;
    }
    const int64_t epoch = ++opt->slot_epoch, mask = ((int64_t)1 << SG__SLOT_GROUP_BITS) - 1;
    const int64_t stamp = epoch << SG__SLOT_GROUP_BITS;
    int64_t *slot = opt->slot, u = 0;
    for (int64_t i = 0; i < n; i++) {
        /* slot is large (8 MB for 1e6 rows): fetch the words of the rows ahead, or each
         * lookup waits on memory */
        if (i + SG__GROUP_AHEAD < n) SG__PREFETCH_W(slot + idx[i + SG__GROUP_AHEAD]);
        const int64_t r = idx[i], st = slot[r];
        if ((int64_t)((uint64_t)st >> SG__SLOT_GROUP_BITS) != epoch) { /* -1: 2^24 - 1, no epoch */
            slot[r] = stamp | u;
            rows[u] = r;
            grp[i] = u;
            off[++u] = 1;
        } else {
            grp[i] = st & mask;
            off[(st & mask) + 1]++;
        }
    }
    return u;
}

/* ... or through tab, an open-addressing table of 2^bits >= 2n words (row << 32 | group,
 * all ones: empty; linear probing from a Fibonacci hash of the row), for rows and groups
 * below 2^32: when it is much smaller than opt->slot it stays in cache where the slot's
 * words, one per row of a large table, come from memory (a table of 1e6 rows, an update of
 * 4e4 entries: 1 MB against 8 MB; grouping took a third less time). */
static int64_t group_by_hash(uint64_t *tab, int bits, const int64_t *idx, int64_t n, int64_t *rows,
                             int64_t *off, int64_t *grp)
{
#define SG__ROW_HASH(r) (((uint64_t)(r) * 0x9E3779B97F4A7C15ull) >> (64 - bits))
    const uint64_t hmask = ((uint64_t)1 << bits) - 1;
    memset(tab, 0xff, (size_t)((uint64_t)1 << bits) * sizeof *tab);
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i + SG__GROUP_AHEAD < n) SG__PREFETCH_W(tab + SG__ROW_HASH(idx[i + SG__GROUP_AHEAD]));
        const uint64_t r = (uint64_t)idx[i];
        for (uint64_t h = SG__ROW_HASH(r);; h = (h + 1) & hmask) {
            const uint64_t e = tab[h];
            if (e == UINT64_MAX) {
                tab[h] = r << 32 | (uint64_t)u;
                rows[u] = (int64_t)r;
                grp[i] = u;
                off[++u] = 1;
                break;
            }
            if (e >> 32 == r) {
                const int64_t g = (int64_t)(e & UINT32_MAX);
                grp[i] = g;
                off[g + 1]++;
                break;
            }
        }
    }
#undef SG__ROW_HASH
    return u;
}

/* Groups gradient rows idx[0..n) by row in order of first appearance (O(n), no sort),
 * through opt->slot or a hash table (above). The occurrence lists name gradient rows:
 * entry i's is row i, or with xrow (gathered rows, sg__fused_rows) row xrow[i] of x; with
 * xrow they are always given (off, occ set), since group i is then not gradient row i
 * even when no row repeats. */
static int group_rows(sg_optim *opt, const int64_t *idx, int64_t n, const int64_t *xrow,
                      sg__rowgroups *rg)
{
    sg_ctx *ctx = opt->ctx;
    if (n >= (int64_t)1 << SG__SLOT_GROUP_BITS) /* 2^40 entries: no arena holds their lists */
        return sg__failc(ctx, SG_ERR_NOMEM, "%s: %lld gradient rows in one update", opt->name, (long long)n);
    int bits = 4;
    while (((int64_t)1 << bits) < 2 * n) bits++;
    const bool hash = opt->slot_len < UINT32_MAX && n < INT32_MAX && ((int64_t)2 << bits) < opt->slot_len;
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(int64_t);
    int64_t *rows = sg__arena_alloc(ctx, bytes);
    int64_t *off = sg__arena_alloc(ctx, bytes + sizeof(int64_t));
    int64_t *occ = sg__arena_alloc(ctx, bytes);
    int64_t *grp = sg__arena_alloc(ctx, bytes);
    uint64_t *tab = hash && grp ? sg__arena_alloc(ctx, ((size_t)1 << bits) * sizeof *tab) : NULL;
    if (!rows || !off || !occ || !grp || (hash && !tab)) return ctx->status ? ctx->status : SG_ERR_NOMEM;
    const int64_t u = hash ? group_by_hash(tab, bits, idx, n, rows, off, grp)
                           : group_by_slot(opt, idx, n, rows, off, grp);
    *rg = (sg__rowgroups){u, rows, NULL, NULL, true};
    if (u < n) { /* duplicates: occurrence lists in index order */
        off[0] = 0;
        for (int64_t k = 0; k < u; k++) off[k + 1] += off[k];
        if (xrow)
            for (int64_t i = 0; i < n; i++) occ[off[grp[i]]++] = xrow[i]; /* off: cursors */
        else
            for (int64_t i = 0; i < n; i++) occ[off[grp[i]]++] = i;
        /* off[k] now holds the end of group k: shift back to starts */
        for (int64_t k = u; k > 0; k--) off[k] = off[k - 1];
        off[0] = 0;
        rg->off = off;
        rg->occ = occ;
    } else if (xrow) { /* one occurrence per group, group k being entry k */
        for (int64_t k = 0; k <= u; k++) off[k] = k;
        rg->off = off;
        rg->occ = xrow;
    }
    return SG_OK;
}

/* Room for one more learning-rate run in ps's history. */
static int runs_reserve(sg_optim *opt, sg__pstate *ps)
{
    if (ps->n_runs < ps->cap_runs) return SG_OK;
    int64_t cap = ps->cap_runs ? 2 * ps->cap_runs : 4;
    sg__lr_run *r = sg__malloc(opt->ctx, (size_t)cap * sizeof *r);
    if (!r) return SG_ERR_NOMEM;
    if (ps->n_runs) memcpy(r, ps->runs, (size_t)ps->n_runs * sizeof *r);
    sg__free(opt->ctx, ps->runs);
    ps->runs = r;
    ps->cap_runs = cap;
    return SG_OK;
}

/* The plan of a row update of ps: gradient rows g (n, width) for rows idx, or, xrow given,
 * gathered rows (row i is g's row xrow[i]; only for kinds that group rows). */
static int plan_rows(sg_optim *opt, sg__pstate *ps, const int64_t *idx, int64_t n,
                     const void *g, bool coalesced, const int64_t *xrow, plan *pl)
{
    *pl = (plan){ps, g, false, {n, idx, NULL, NULL, coalesced}, NULL, {1, NULL, NULL}};
    int rc = SG_OK;
    if (!coalesced && opt->ops->needs_groups(opt)) rc = group_rows(opt, idx, n, xrow, &pl->rg);
    if (!rc && sg__is_lazy_sgd(ps)) rc = runs_reserve(opt, ps);
    return rc;
}

/* A COO gradient with sparse_dim > 1 as row-sparse: coalesced first (sorted, so a row's
 * entries are adjacent, and unique), then one dense row per distinct row holding its
 * entries' blocks at their places. *n_out rows, unique and ascending. Time and step-arena
 * memory O(nnz + distinct rows x width), however many entries share a row. */
static int rows_of_coo(sg__pstate *ps, sg_tensor *grad, const int64_t **idx_out,
                       const void **g_out, int64_t *n_out)
{
    sg_ctx *ctx = grad->ctx;
    sg_tensor *c = sg_coalesce(grad);
    if (!c) return ctx->status;
    int64_t n = c->nnz, sd = c->sparse_dim, u = 0;
    int64_t block = sg__prod(c->shape, (int)sd, c->ndim); /* elements per entry */
    const int64_t *ind = c->indices->data; /* row 0: the rows */
    for (int64_t i = 0; i < n; i++) u += i == 0 || ind[i] != ind[i - 1];
    int64_t gshape[2] = {u, ps->width};
    int64_t *rows = sg__arena_alloc(ctx, (size_t)(u ? u : 1) * sizeof *rows);
    sg_tensor *g = rows ? sg__tmp(ctx, grad->dtype, 2, gshape, true) : NULL;
    if (!g) return ctx->status;
    size_t es = sg_dtype_size(grad->dtype);
    for (int64_t i = 0, k = -1; i < n; i++) {
        if (i == 0 || ind[i] != ind[i - 1]) rows[++k] = ind[i];
        int64_t pos = 0;
        for (int64_t d = 1; d < sd; d++) pos = pos * c->shape[d] + ind[d * n + i];
        memcpy((char *)g->data + (size_t)(k * ps->width + pos * block) * es,
               (const char *)c->values->data + (size_t)(i * block) * es, (size_t)block * es);
    }
    *idx_out = rows;
    *g_out = g->data;
    *n_out = u;
    return SG_OK;
}

static int plan_grad(sg_optim *opt, sg__pstate *ps, sg_tensor *grad, plan *pl)
{
    sg_ctx *ctx = opt->ctx;
    if (grad->dtype != ps->param->dtype || !sg__same_shape(grad, ps->param))
        return sg__failc(ctx, SG_ERR_STATE, "%s: gradient does not match its parameter", opt->name);
    if (grad->layout == SG_COO && opt->kind == SG__OPT_ADAM) { /* dense Adam steps every element */
        grad = sg__densify(grad);
        if (!grad) return ctx->status;
    }
    if (grad->layout == SG_DENSE) {
        if (opt->ops->dense) *pl = (plan){ps, grad->data, true, {0, NULL, NULL, NULL, true}, NULL, {1, NULL, NULL}};
        else *pl = (plan){ps, grad->data, false, {ps->rows, NULL, NULL, NULL, true}, NULL, {1, NULL, NULL}};
        return sg__is_lazy_sgd(ps) ? runs_reserve(opt, ps) : SG_OK;
    }
    const int64_t *idx = grad->indices->data;
    const void *g = grad->values->data;
    int64_t n = grad->nnz;
    bool coalesced = grad->coalesced;
    if (grad->sparse_dim > 1) {
        int rc = rows_of_coo(ps, grad, &idx, &g, &n);
        if (rc) return rc;
        coalesced = true;
    }
    return plan_rows(opt, ps, idx, n, g, coalesced, NULL, pl);
}

static void apply_plan(sg_optim *opt, plan *pl, double lr)
{
    sg__pstate *ps = pl->ps;
    int64_t s = ++*ps->step;
    if (sg__is_lazy_sgd(ps) && (ps->n_runs == 0 || ps->runs[ps->n_runs - 1].lr != lr))
        ps->runs[ps->n_runs++] = (sg__lr_run){s, lr};
    if (pl->factored) sg__sgd_rows_factored(opt, ps, pl->factored, &pl->buckets, lr);
    else if (pl->dense) opt->ops->dense(opt, ps, pl->g, s, lr);
    else opt->ops->rows(opt, ps, &pl->rg, pl->g, s, lr);
}

/* ---- the NaN/Inf guard */

int sg_optim_set_check_finite(sg_optim *opt, int on)
{
    if (!opt) return SG_ERR_NULL;
    opt->check_finite = on != 0;
    return SG_OK;
}

typedef struct {
    sg_dtype dtype;
    const void *v;
} finite_job;

/* The scans below read the n values of v (bit patterns of type IT) into SCAN_LANES
 * independent accumulators, lane k taking values k, k + SCAN_LANES, ..., so that the
 * vector units do not wait on one chain (one chain ran at about a cycle per value); STEP
 * folds pattern b into lane[k]. */
#define SCAN_LANES 16
#define LANE_SCAN(IT, STEP)                                                   \
    do {                                                                      \
        const unsigned char *p = v;                                           \
        int64_t i = 0;                                                        \
        for (; i + SCAN_LANES <= n; i += SCAN_LANES)                          \
            for (int k = 0; k < SCAN_LANES; k++) {                            \
                IT b;                                                         \
                memcpy(&b, p + sizeof(IT) * (size_t)(i + k), sizeof b);       \
                STEP;                                                         \
            }                                                                 \
        for (int k = 0; i + k < n; k++) {                                     \
            IT b;                                                             \
            memcpy(&b, p + sizeof(IT) * (size_t)(i + k), sizeof b);           \
            STEP;                                                             \
        }                                                                     \
    } while (0)

/* The largest |v[i]| of n values; *finite false when one of them is NaN or infinite.
 * Works on the bit patterns (sign cleared, the largest pattern is the largest magnitude,
 * infinities and NaNs lie above every finite one), so it is an integer max that
 * vectorises. The patterns are signed integers, never negative once the sign is
 * cleared: x86-64's baseline vector set has a signed 32-bit compare but no unsigned one
 * (1.4x faster on 1 MB of floats). */
#define AMAX_BITS(IT, MASK)                                                   \
    do {                                                                      \
        IT lane[SCAN_LANES] = {0};                                            \
        LANE_SCAN(IT, b &= (MASK); lane[k] = b > lane[k] ? b : lane[k]);      \
        for (int k = 1; k < SCAN_LANES; k++) lane[0] = lane[k] > lane[0] ? lane[k] : lane[0]; \
        m = lane[0];                                                          \
    } while (0)

/* Both scans have a variant per CPU level (SG__HOT_CLONES, core/core.h); integer work,
 * so every variant gives the same answer. */
SG__HOT_BODY void amax_scan__body(sg_dtype dtype, const void *v, int64_t n, double *amax, bool *finite)
{
    if (dtype == SG_F32) {
        int32_t m;
        AMAX_BITS(int32_t, INT32_MAX);
        *finite = m < 0x7f800000;
        float f;
        memcpy(&f, &m, 4);
        *amax = f;
        return;
    }
    int64_t m;
    AMAX_BITS(int64_t, INT64_MAX);
    *finite = m < 0x7ff0000000000000ll;
    double d;
    memcpy(&d, &m, 8);
    *amax = d;
}
SG__HOT_CLONES(amax_scan, (sg_dtype dtype, const void *v, int64_t n, double *amax, bool *finite),
               (dtype, v, n, amax, finite))
#undef AMAX_BITS

static double abs_max_bits(sg_dtype dtype, const void *v, int64_t n, bool *finite)
{
    double amax;
    amax_scan(dtype, v, n, &amax, finite);
    return amax;
}

/* Whether some of the n values is NaN or infinite (its exponent bits all ones): an OR of
 * compares, cheaper than the largest magnitude when only finiteness is asked. */
#define ANY_NONFINITE(UT, EXP)                                                \
    do {                                                                      \
        UT lane[SCAN_LANES] = {0};                                            \
        LANE_SCAN(UT, lane[k] |= (UT)((b & (EXP)) == (EXP)));                 \
        for (int k = 0; k < SCAN_LANES; k++) any |= lane[k] != 0;             \
    } while (0)

SG__HOT_BODY void nonfinite_scan__body(sg_dtype dtype, const void *v, int64_t n, bool *out)
{
    bool any = false;
    if (dtype == SG_F32) ANY_NONFINITE(uint32_t, 0x7f800000u);
    else ANY_NONFINITE(uint64_t, 0x7ff0000000000000ull);
    *out = any;
}
SG__HOT_CLONES(nonfinite_scan, (sg_dtype dtype, const void *v, int64_t n, bool *out), (dtype, v, n, out))
#undef ANY_NONFINITE

static bool any_nonfinite(sg_dtype dtype, const void *v, int64_t n)
{
    bool any;
    nonfinite_scan(dtype, v, n, &any);
    return any;
}
#undef LANE_SCAN
#undef SCAN_LANES

static bool chunk_not_finite(void *ud, int64_t lo, int64_t hi)
{
    const finite_job *j = ud;
    return any_nonfinite(j->dtype, (const unsigned char *)j->v + (size_t)lo * sg_dtype_size(j->dtype), hi - lo);
}

/* The first element of v (n of dtype) that is NaN or infinite, or -1: a parallel scan,
 * then a serial one to name the element only when there is one. */
static int64_t first_not_finite(sg_ctx *ctx, sg_dtype dtype, const void *v, int64_t n)
{
    finite_job j = {dtype, v};
    if (!sg__parallel_any(ctx, n, SG__GRAIN, chunk_not_finite, &j)) return -1;
    for (int64_t i = 0; i < n; i++)
        if (chunk_not_finite(&j, i, i + 1)) return i;
    return -1;
}

/* SG_ERR_VALUE naming ps when its gradient grad (dense or COO) holds a non-finite value. */
static int check_grad_finite(sg_optim *opt, const sg__pstate *ps, const sg_tensor *grad)
{
    const sg_tensor *v = grad->layout == SG_COO ? grad->values : grad;
    int64_t bad = first_not_finite(opt->ctx, v->dtype, v->data, v->numel);
    if (bad < 0) return SG_OK;
    return sg__failc(opt->ctx, SG_ERR_VALUE,
                     "%s: gradient of parameter %lld is not finite (%s value %lld is %g); step refused",
                     opt->name, (long long)ps->index, grad->layout == SG_COO ? "COO" : "dense",
                     (long long)bad, sg__dense_at(v, bad));
}

/* True when every factored row (T)(scale * coef[k]) * x[k / per] is surely finite: coef
 * and x are finite and the largest |scale * coef| times the largest |x| stays below the
 * dtype's largest value. O(n + rows of x * width), not O(n * width); false only means
 * "check every element". */
static bool factored_surely_finite(sg_dtype dtype, int64_t width, const sg__fused_rows *r)
{
    bool coef_ok, x_ok;
    double cmax = abs_max_bits(dtype, r->coef, r->n, &coef_ok);
    double xmax = abs_max_bits(dtype, r->x, (r->n / r->per) * width, &x_ok);
    double limit = dtype == SG_F32 ? 3.4e38 : 1.7e308;
    double amax = cmax * (r->scale < 0 ? -r->scale : r->scale);
    return coef_ok && x_ok && isfinite(amax) && amax * xmax < limit * 0.5;
}

/* The same for fused gradient rows r of ps: given rows, or gathered or factored rows as
 * expand_rows writes them (row k = x[xrow[k]], or (T)(scale * coef[k]) * x[k / per]),
 * checked without writing them. */
static int check_rows_finite(sg_optim *opt, const sg__pstate *ps, const sg__fused_rows *r)
{
    const int64_t width = ps->width;
    int64_t bad = -1;
    double value = 0;
    if (r->g) {
        bad = first_not_finite(opt->ctx, ps->param->dtype, r->g, r->n * width);
        if (bad >= 0) {
            SG__DISPATCH_FLOAT(ps->param->dtype, T, { value = ((const T *)r->g)[bad]; });
        }
    } else if (r->xrow) { /* x at once; only if some value of it is not finite, the rows in
                           * order (x's rows that no entry names do not count) */
        if (first_not_finite(opt->ctx, ps->param->dtype, r->x, r->nx * width) >= 0) {
            SG__DISPATCH_FLOAT(ps->param->dtype, T, {
                const T *x = r->x;
                for (int64_t k = 0; k < r->n && bad < 0; k++) {
                    const T *xr = x + r->xrow[k] * width;
                    for (int64_t j = 0; j < width; j++)
                        if (!isfinite(xr[j])) {
                            bad = k * width + j;
                            value = xr[j];
                            break;
                        }
                }
            });
        }
    } else if (!factored_surely_finite(ps->param->dtype, width, r)) {
        SG__DISPATCH_FLOAT(ps->param->dtype, T, {
            const T *x = r->x;
            const T *coef = r->coef;
            for (int64_t k = 0; k < r->n && bad < 0; k++) {
                const T a = (T)(r->scale * (double)coef[k]);
                const T *xr = x + (k / r->per) * width;
                bool row_bad = false;
                for (int64_t j = 0; j < width; j++) row_bad |= !isfinite(a * xr[j]);
                if (!row_bad) continue;
                for (int64_t j = 0; j < width && bad < 0; j++)
                    if (!isfinite(a * xr[j])) {
                        bad = k * width + j;
                        value = a * xr[j];
                    }
            }
        });
    }
    if (bad < 0) return SG_OK;
    return sg__failc(opt->ctx, SG_ERR_VALUE,
                     "%s: fused gradient of parameter %lld is not finite (row %lld of the update, "
                     "element %lld, is %g); update refused",
                     opt->name, (long long)ps->index, (long long)(bad / (width ? width : 1)),
                     (long long)(bad % (width ? width : 1)), value);
}

/* ---- step, flush, fused update */

int sg_optim_step(sg_optim *opt)
{
    if (!opt) return SG_ERR_NULL;
    sg_ctx *ctx = opt->ctx;
    double lr = 0;
    int rc = lr_at(opt, opt->t + 1, &lr);
    if (rc) return rc;
    /* One pass over the gradient store (O(gradients), not O(parameters)); plans has room
     * for every entry, of which those without a gradient or of another optimizer are
     * skipped. A few plans live on the stack: steps taken without a tape reset in between
     * then do not grow the step arena (each growth faults fresh pages in). */
    const int64_t cnt = sg_grads_count(ctx);
    opt->visited = 0;
    plan few[SG__OPTIM_STACK_PLANS];
    plan *plans = cnt <= SG__OPTIM_STACK_PLANS ? few : sg__arena_alloc(ctx, (size_t)cnt * sizeof *plans);
    if (!plans) return ctx->status;
    int64_t n = 0;
    for (int64_t i = 0; i < cnt; i++) {
        sg_tensor *p = sg_grads_param(ctx, i);
        opt->visited++;
        if (!p->grad || !sg__optim_state_of(opt, p)) continue;
        if (opt->check_finite && (rc = check_grad_finite(opt, p->optim_state, p->grad))) return rc;
        rc = plan_grad(opt, p->optim_state, p->grad, &plans[n++]);
        if (rc) return rc;
    }
    if (opt->kind == SG__OPT_SGD) sg__sgd_prepare(opt, lr);
    for (int64_t k = 0; k < n; k++) apply_plan(opt, &plans[k], lr);
    opt->t++;
    return SG_OK;
}

int sg_optim_flush(sg_optim *opt)
{
    if (!opt) return SG_ERR_NULL;
    if (!opt->ops->flush) return SG_OK;
    for (int64_t i = 0; i < opt->n_params; i++) {
        sg__pstate *ps = opt->params[i];
        if (ps->lagging) opt->ops->flush(opt, ps);
    }
    return SG_OK;
}

/* Factored rows written out, row k = (T)(scale * coef[k]) * x[k / per] (the values an
 * unfused sgns gives its table's COO gradient), for the kinds without a factored kernel;
 * or gathered rows, row k = x[xrow[k]], for linear SGD (which applies rows as given). */
static const void *expand_rows(sg_ctx *ctx, sg_dtype dtype, int64_t width, const sg__fused_rows *r)
{
    size_t bytes = (size_t)(r->n > 0 ? r->n * width : 1) * sg_dtype_size(dtype);
    void *buf = sg__arena_alloc(ctx, bytes);
    if (!buf) return NULL;
    if (r->xrow) {
        const size_t rowbytes = (size_t)width * sg_dtype_size(dtype);
        for (int64_t k = 0; k < r->n; k++)
            memcpy((char *)buf + (size_t)k * rowbytes, (const char *)r->x + (size_t)r->xrow[k] * rowbytes,
                   rowbytes);
        return buf;
    }
    SG__DISPATCH_FLOAT(dtype, T, {
        const T *x = r->x;
        const T *coef = r->coef;
        T *o = buf;
        for (int64_t k = 0; k < r->n; k++) {
            const T a = (T)(r->scale * (double)coef[k]);
            const T *xr = x + (k / r->per) * width;
            for (int64_t j = 0; j < width; j++) o[k * width + j] = a * xr[j];
        }
    });
    return buf;
}

/* The checks of a fused update that need no allocation: W is opt's (*ps_out), r is well
 * formed, its rows in range, the learning rate valid (*lr). */
static int fused_validate(sg_optim *opt, sg_tensor *W, const sg__fused_rows *r, sg__pstate **ps_out,
                          double *lr)
{
    if (!opt || !W || !r) return SG_ERR_NULL;
    sg_ctx *ctx = opt->ctx;
    sg__pstate *ps = sg__optim_state_of(opt, W);
    if (!ps)
        return sg__failc(ctx, SG_ERR_STATE, "%s: fused update of a tensor that is not one of its parameters",
                         opt->name);
    const int64_t n = r->n, *idx = r->idx, *xrow = r->g ? NULL : r->xrow;
    const bool factored = !r->g && !xrow;
    if (n < 0 || (n > 0 && (!idx || (factored ? !r->x || !r->coef || r->per < 1 || n % r->per
                                              : xrow ? !r->x || r->nx < 1 : false))))
        return sg__failc(ctx, SG_ERR_ARG, "%s: fused update of %lld malformed rows", opt->name, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= ps->rows)
            return sg__failc(ctx, SG_ERR_INDEX, "%s: fused update of row %lld of %lld", opt->name,
                             (long long)idx[i], (long long)ps->rows);
    if (xrow)
        for (int64_t i = 0; i < n; i++)
            if (xrow[i] < 0 || xrow[i] >= r->nx)
                return sg__failc(ctx, SG_ERR_ARG, "%s: fused update of %lld malformed rows", opt->name,
                                 (long long)n);
    *ps_out = ps;
    return lr_at(opt, opt->t + 1, lr);
}

int sg__optim_check_rows(sg_optim *opt, sg_tensor *W, const sg__fused_rows *r)
{
    sg__pstate *ps = NULL;
    double lr = 0;
    int rc = fused_validate(opt, W, r, &ps, &lr);
    if (!rc && opt->check_finite && r->n > 0) rc = check_rows_finite(opt, ps, r);
    return rc;
}

int sg__optim_apply_rows(sg_optim *opt, sg_tensor *W, const sg__fused_rows *r)
{
    sg__pstate *ps = NULL;
    double lr = 0;
    int rc = fused_validate(opt, W, r, &ps, &lr);
    if (rc) return rc;
    sg_ctx *ctx = opt->ctx;
    const int64_t n = r->n, *idx = r->idx;
    const bool gathered = !r->g && r->xrow, factored = !r->g && !gathered;
    const bool linear_sgd = opt->kind == SG__OPT_SGD && !sg__is_lazy_sgd(ps);
    const void *g = r->g;
    /* Factored rows: linear SGD has a kernel for them, the other kinds get them written
     * out. Gathered rows: the kinds that group rows sum each row's from x directly (the
     * group's occurrences name x's rows), dense Adam scatters them from x, and linear SGD,
     * which applies rows as given, gets them written out. */
    if (n > 0 && ((factored && !linear_sgd) || (gathered && linear_sgd))) {
        g = expand_rows(ctx, W->dtype, ps->width, r);
        if (!g) return ctx->status ? ctx->status : SG_ERR_NOMEM;
    }
    const int64_t *xrow = gathered && !g ? r->xrow : NULL;
    plan pl;
    if (opt->kind == SG__OPT_ADAM) { /* dense Adam: the rows scattered into a dense gradient */
        sg_tensor *d = sg__tmp_like(W, true);
        if (!d) return ctx->status;
        SG__DISPATCH_FLOAT(W->dtype, T, {
            T *dd = d->data;
            const T *gg = xrow ? r->x : g;
            for (int64_t i = 0; i < n; i++) {
                const T *gi = gg + (xrow ? xrow[i] : i) * ps->width;
                for (int64_t j = 0; j < ps->width; j++) dd[idx[i] * ps->width + j] += gi[j];
            }
        });
        pl = (plan){ps, d->data, true, {0, NULL, NULL, NULL, true}, NULL, {1, NULL, NULL}};
    } else {
        rc = plan_rows(opt, ps, idx, n, xrow ? r->x : g, false, xrow, &pl);
        if (rc) return rc;
        if (factored && !g) {
            pl.factored = r;
            rc = sg__sgd_factored_buckets(opt, r, ps->width, &pl.buckets);
            if (rc) return rc;
        }
    }
    if (opt->kind == SG__OPT_SGD) sg__sgd_prepare(opt, lr);
    apply_plan(opt, &pl, lr);
    return SG_OK;
}
