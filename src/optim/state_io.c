/* An optimizer's state, in and out: the public accessors (sg_optim_state, the lazy-SGD
 * learning-rate history) and the optimizer's side of a checkpoint (optim/state_io.h): the
 * entries of each parameter's state in the file, their bytes, the optimizer's metadata,
 * and the checks and installation of a load. The one place outside the kernels that knows
 * the state's layout; src/io reaches it only through state_io.h.
 *
 * Invariants (besides state_io.h's):
 * - A parameter's entries are its state tensors in ps->state order, then, for exact lazy
 *   SGD, "lagging_rows", "lagging_param", "lagging_momentum_buffer" (with momentum only),
 *   "lr_run_start", "lr_run_lr" (entry_kind gives which is which; nothing indexes them by
 *   position elsewhere).
 * - The lagging entries list, ascending, the rows with last_step < step; their raw values
 *   are the rows as stored, while the parameter and momentum entries hold every row caught
 *   up. A load writes the caught-up values, then the raw rows back over them, and restores
 *   last_step and the runs, so the optimizer continues as if never stopped.
 */
#include "optim/optim.h"
#include "optim/state_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- public accessors */

int sg_optim_state_count(const sg_optim *opt, const sg_tensor *param)
{
    if (!opt) return -1;
    sg__pstate *ps = sg__optim_state_of(opt, param);
    return ps ? ps->n_state : 0;
}

sg_tensor *sg_optim_state(const sg_optim *opt, const sg_tensor *param, int i, const char **name)
{
    sg__pstate *ps = sg__optim_state_of(opt, param);
    if (!ps || i < 0 || i >= ps->n_state) return NULL;
    if (name) *name = ps->state_name[i];
    return ps->state[i];
}

int64_t sg_optim_lr_runs(const sg_optim *opt, const sg_tensor *param, int64_t *start, double *lr,
                         int64_t cap)
{
    if (!opt) return -1;
    sg__pstate *ps = sg__optim_state_of(opt, param);
    if (!ps) {
        sg__failc(opt->ctx, SG_ERR_STATE, "%s: lr_runs of a tensor that is not one of its parameters",
                  opt->name);
        return -1;
    }
    if (!sg__is_lazy_sgd(ps)) return 0;
    for (int64_t i = 0; i < ps->n_runs && i < cap; i++) {
        start[i] = ps->runs[i].start;
        lr[i] = ps->runs[i].lr;
    }
    return ps->n_runs;
}

/* sg_optim_set_lr_runs' checks of the runs and of last_step; *behind: a row is behind. */
static int check_runs(const sg_optim *opt, const sg__pstate *ps, const int64_t *start, const double *lr,
                      int64_t n, bool *behind)
{
    sg_ctx *ctx = opt->ctx;
    if (n < 0 || (n > 0 && (!start || !lr)))
        return sg__failc(ctx, SG_ERR_ARG, "%s: set_lr_runs: %lld runs", opt->name, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (start[i] < 1 || (i && start[i] <= start[i - 1]) || !sg__valid_lr(lr[i]))
            return sg__failc(ctx, SG_ERR_ARG,
                             "%s: set_lr_runs: run %lld (start %lld, lr %g) out of order or range",
                             opt->name, (long long)i, (long long)start[i], lr[i]);
    const int64_t s = *ps->step;
    *behind = false;
    for (int64_t r = 0; r < ps->rows; r++) {
        if (ps->last[r] < 0 || ps->last[r] > s)
            return sg__failc(ctx, SG_ERR_ARG, "%s: last_step[%lld] = %lld is outside [0, step %lld]",
                             opt->name, (long long)r, (long long)ps->last[r], (long long)s);
        *behind |= ps->last[r] < s;
    }
    if (*behind && n == 0)
        return sg__failc(ctx, SG_ERR_ARG, "%s: rows are behind but no learning-rate runs were given",
                         opt->name);
    return SG_OK;
}

int sg_optim_set_lr_runs(sg_optim *opt, sg_tensor *param, const int64_t *start, const double *lr,
                         int64_t n)
{
    if (!opt) return SG_ERR_NULL;
    sg_ctx *ctx = opt->ctx;
    sg__pstate *ps = sg__optim_state_of(opt, param);
    if (!ps)
        return sg__failc(ctx, SG_ERR_STATE, "%s: set_lr_runs of a tensor that is not one of its parameters",
                         opt->name);
    if (!sg__is_lazy_sgd(ps)) {
        if (n == 0) return SG_OK;
        return sg__failc(ctx, SG_ERR_STATE, "%s: this optimizer keeps no learning-rate history", opt->name);
    }
    bool behind = false;
    int rc = check_runs(opt, ps, start, lr, n, &behind);
    if (rc) return rc;
    sg__lr_run *runs = NULL;
    if (n > 0) {
        runs = sg__malloc(ctx, (size_t)n * sizeof *runs);
        if (!runs) return SG_ERR_NOMEM;
        for (int64_t i = 0; i < n; i++) runs[i] = (sg__lr_run){start[i], lr[i]};
    }
    sg__free(ctx, ps->runs);
    ps->runs = runs;
    ps->n_runs = ps->cap_runs = n;
    ps->lagging = behind;
    return SG_OK;
}

/* ---- a parameter's entries in a checkpoint */

typedef enum { E_STATE, E_LAG_ROWS, E_LAG_PARAM, E_LAG_MOM, E_RUN_START, E_RUN_LR } entry_kind;

/* Exact lazy SGD with a momentum buffer (whose rows lag with the parameter's). */
static bool lag_momentum(const sg__pstate *ps)
{
    return sg__is_lazy_sgd(ps) && ps->opt->kind == SG__OPT_SGD && ps->opt->o.sgd.momentum != 0;
}

static int entry_count(const sg__pstate *ps)
{
    return ps->n_state + (!sg__is_lazy_sgd(ps) ? 0 : lag_momentum(ps) ? 5 : 4);
}

static entry_kind kind_of(const sg__pstate *ps, int i)
{
    if (i < ps->n_state) return E_STATE;
    int j = i - ps->n_state; /* rows, param, [momentum], run starts, run learning rates */
    if (j >= 2 && !lag_momentum(ps)) j++;
    return (entry_kind)(E_LAG_ROWS + j);
}

/* The index of ps's entry of kind k (not E_STATE), -1 if it has none. */
static int entry_of(const sg__pstate *ps, entry_kind k)
{
    for (int i = ps->n_state; i < entry_count(ps); i++)
        if (kind_of(ps, i) == k) return i;
    return -1;
}

/* The state tensor named name, NULL if ps has none. */
static sg_tensor *state_named(const sg__pstate *ps, const char *name)
{
    for (int s = 0; s < ps->n_state; s++)
        if (!strcmp(ps->state_name[s], name)) return ps->state[s];
    return NULL;
}

static sg_tensor *momentum_of(const sg__pstate *ps) { return state_named(ps, "momentum_buffer"); }

static size_t row_bytes(const sg__pstate *ps)
{
    return (size_t)ps->width * sg_dtype_size(ps->param->dtype);
}

static size_t tensor_bytes(const sg_tensor *t)
{
    return (size_t)sg__numel(t->ndim, t->shape) * sg_dtype_size(t->dtype);
}

static bool row_behind(const sg__pstate *ps, int64_t r) { return ps->last[r] < *ps->step; }

static int64_t lagging_rows(const sg__pstate *ps)
{
    int64_t k = 0;
    for (int64_t r = 0; r < ps->rows; r++) k += row_behind(ps, r);
    return k;
}

static sg__ckpt_entry entry_at(const sg__pstate *ps, int i, int64_t lag)
{
    const entry_kind k = kind_of(ps, i);
    const sg_tensor *t = k == E_STATE ? ps->state[i] : ps->param;
    sg__ckpt_entry e = {k == E_STATE ? ps->state_name[i] : NULL, t->dtype, t->ndim, {0}, k != E_STATE};
    memcpy(e.shape, t->shape, sizeof e.shape);
    switch (k) {
    case E_STATE: break;
    case E_LAG_ROWS: return (sg__ckpt_entry){"lagging_rows", SG_I64, 1, {lag}, true};
    case E_LAG_PARAM:
    case E_LAG_MOM: /* the rows behind, raw: (lag, the parameter's other dimensions) */
        e.name = k == E_LAG_PARAM ? "lagging_param" : "lagging_momentum_buffer";
        if (e.ndim == 0) e.ndim = 1;
        e.shape[0] = lag;
        break;
    case E_RUN_START: return (sg__ckpt_entry){"lr_run_start", SG_I64, 1, {ps->n_runs}, true};
    case E_RUN_LR: return (sg__ckpt_entry){"lr_run_lr", SG_F64, 1, {ps->n_runs}, true};
    }
    return e;
}

int sg__optim_ckpt_entries(const sg_optim *opt, const sg_tensor *param,
                           sg__ckpt_entry e[SG__CKPT_MAX_ENTRIES])
{
    const sg__pstate *ps = sg__optim_state_of(opt, param);
    if (!ps) return 0;
    const int n = entry_count(ps);
    const int64_t lag = sg__is_lazy_sgd(ps) ? lagging_rows(ps) : 0;
    for (int i = 0; i < n; i++) e[i] = entry_at(ps, i, lag);
    return n;
}

/* ---- checks shared by save and load, and the metadata */

int sg__optim_ckpt_check(sg_ctx *ctx, const sg_optim *opt, sg_tensor *const *params, int64_t n,
                         const char *const *names)
{
    if (opt->ctx != ctx) return sg__failc(ctx, SG_ERR_ARG, "checkpoint: optimizer of another context");
    for (int64_t j = 0; j < opt->n_params; j++) {
        const sg_tensor *p = opt->params[j]->param;
        int64_t i = 0;
        while (i < n && params[i] != p) i++;
        if (i == n)
            return sg__failc(ctx, SG_ERR_ARG,
                             "checkpoint: parameter %lld of the optimizer is not among the tensors", (long long)j);
    }
    /* a tensor listed twice would get its state twice */
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = i + 1; params[i]->optim_state && k < n; k++)
            if (params[i] == params[k])
                return sg__failc(ctx, SG_ERR_ARG, "checkpoint: tensor \"%s\" listed twice", names[i]);
    return SG_OK;
}

typedef struct {
    const char *key;
    double value;
} field;

/* The hyperparameters that must agree between a saved and a loading optimizer (the base
 * learning rate is restored instead). Returns the count (at most 5). */
static int optim_fields(const sg_optim *o, field f[5])
{
    switch (o->kind) {
    case SG__OPT_SGD:
        f[0] = (field){"momentum", o->o.sgd.momentum};
        f[1] = (field){"dampening", o->o.sgd.dampening};
        f[2] = (field){"weight_decay", o->o.sgd.weight_decay};
        f[3] = (field){"nesterov", o->o.sgd.nesterov};
        return 4;
    case SG__OPT_ADAGRAD:
    case SG__OPT_ROWWISE_ADAGRAD:
        f[0] = (field){"lr_decay", o->o.adagrad.lr_decay};
        f[1] = (field){"weight_decay", o->o.adagrad.weight_decay};
        f[2] = (field){"initial_accumulator", o->o.adagrad.initial_accumulator};
        f[3] = (field){"eps", o->o.adagrad.eps};
        return 4;
    case SG__OPT_ADAM:
    case SG__OPT_LAZY_ADAM:
        f[0] = (field){"beta1", o->o.adam.beta1};
        f[1] = (field){"beta2", o->o.adam.beta2};
        f[2] = (field){"eps", o->o.adam.eps};
        f[3] = (field){"weight_decay", o->o.adam.weight_decay};
        f[4] = (field){"decoupled", o->o.adam.decoupled};
        return 5;
    }
    return 0;
}

static const char *sched_name(sg_lr_kind k)
{
    return k == SG_LR_LINEAR ? "linear" : k == SG_LR_CALLBACK ? "callback" : "constant";
}

/* "sgrad.optim" with suffix (NULL: none) as key, value as given. */
static void kv_text(sg__ckpt_kv *kv, const char *suffix, const char *value)
{
    snprintf(kv->key, sizeof kv->key, "sgrad.optim%s%s", suffix ? "." : "", suffix ? suffix : "");
    snprintf(kv->value, sizeof kv->value, "%s", value);
}

static void kv_double(sg__ckpt_kv *kv, const char *suffix, double v)
{
    char num[40];
    snprintf(num, sizeof num, "%.17g", v);
    kv_text(kv, suffix, num);
}

static void kv_int(sg__ckpt_kv *kv, const char *suffix, int64_t v)
{
    char num[40];
    snprintf(num, sizeof num, "%lld", (long long)v);
    kv_text(kv, suffix, num);
}

int sg__optim_ckpt_meta(const sg_optim *opt, sg__ckpt_kv kv[SG__CKPT_MAX_META])
{
    int n = 0;
    kv_text(&kv[n++], NULL, opt->name);
    kv_int(&kv[n++], "steps", opt->t);
    kv_double(&kv[n++], "lr", opt->lr);
    field f[5];
    const int nf = optim_fields(opt, f);
    for (int i = 0; i < nf; i++) kv_double(&kv[n++], f[i].key, f[i].value);
    kv_text(&kv[n++], "schedule", sched_name(opt->sched.kind));
    if (opt->sched.kind == SG_LR_LINEAR) {
        kv_int(&kv[n++], "schedule.steps", opt->sched.steps);
        kv_double(&kv[n++], "schedule.end_factor", opt->sched.end_factor);
    }
    return n;
}

/* ---- save: the bytes of an entry */

/* The parameter's rows (momentum: its momentum buffer's), each caught up to the
 * parameter's step; scratch holds two rows. */
static int write_current_rows(const sg_optim *opt, const sg__pstate *ps, bool momentum, sg__ckpt_put put,
                              void *sink, unsigned char *scratch)
{
    const size_t rowbytes = row_bytes(ps);
    unsigned char *w = scratch, *v = scratch + rowbytes;
    const char *base = (momentum ? momentum_of(ps) : ps->param)->data;
    int rc = SG_OK;
    for (int64_t r = 0; r < ps->rows && !rc; r++) {
        if (!row_behind(ps, r)) {
            rc = put(sink, base + (size_t)r * rowbytes, rowbytes);
            continue;
        }
        sg__sgd_row_current(opt, ps, r, w, v);
        rc = put(sink, momentum ? v : w, rowbytes);
    }
    return rc;
}

/* The rows behind (E_LAG_ROWS), or their raw parameter or momentum values. */
static int write_lagging(const sg__pstate *ps, entry_kind k, sg__ckpt_put put, void *sink)
{
    const size_t rowbytes = row_bytes(ps);
    const char *base = (k == E_LAG_MOM ? momentum_of(ps) : ps->param)->data;
    int rc = SG_OK;
    for (int64_t r = 0; r < ps->rows && !rc; r++) {
        if (!row_behind(ps, r)) continue;
        rc = k == E_LAG_ROWS ? put(sink, &r, sizeof r) : put(sink, base + (size_t)r * rowbytes, rowbytes);
    }
    return rc;
}

static int write_runs(const sg__pstate *ps, entry_kind k, sg__ckpt_put put, void *sink)
{
    int rc = SG_OK;
    for (int64_t i = 0; i < ps->n_runs && !rc; i++)
        rc = k == E_RUN_START ? put(sink, &ps->runs[i].start, sizeof(int64_t))
                              : put(sink, &ps->runs[i].lr, sizeof(double));
    return rc;
}

size_t sg__optim_ckpt_scratch(const sg_optim *opt, const sg_tensor *param)
{
    const sg__pstate *ps = sg__optim_state_of(opt, param);
    return ps && sg__is_lazy_sgd(ps) ? 2 * row_bytes(ps) : 0;
}

int sg__optim_ckpt_write(const sg_optim *opt, const sg_tensor *param, int i, sg__ckpt_put put,
                         void *sink, void *scratch)
{
    const sg__pstate *ps = sg__optim_state_of(opt, param);
    const entry_kind k = i < 0 ? E_STATE : kind_of(ps, i);
    if (k == E_STATE) {
        const sg_tensor *t = i < 0 ? ps->param : ps->state[i];
        const bool caught_up = sg__is_lazy_sgd(ps) && (i < 0 || t == momentum_of(ps));
        if (!caught_up) return put(sink, t->data, tensor_bytes(t));
        return write_current_rows(opt, ps, i >= 0, put, sink, scratch);
    }
    if (k == E_RUN_START || k == E_RUN_LR) return write_runs(ps, k, put, sink);
    return write_lagging(ps, k, put, sink);
}

/* ---- load */

/* What a load installs into one parameter's state. */
typedef struct {
    sg__pstate *ps;
    const unsigned char *state[SG__OPTIM_MAX_STATE]; /* the file's bytes of each state tensor */
    const unsigned char *lag_rows, *lag_param, *lag_mom;
    int64_t lag;
    sg__lr_run *runs; /* sg__malloc'd; the commit installs them */
    int64_t n_runs;
} pending;

struct sg__ckpt_load {
    sg_optim *opt;
    int64_t steps;
    double lr;
    sg_lr_schedule sched;
    int64_t n; /* parameters prepared, at most opt->n_params */
    pending p[];
};

static int64_t rd_i64(const unsigned char *p, int64_t i)
{
    int64_t v;
    memcpy(&v, p + 8 * i, 8);
    return v;
}

static double rd_f64(const unsigned char *p, int64_t i)
{
    double v;
    memcpy(&v, p + 8 * i, 8);
    return v;
}

static int parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < 0) return -1;
    *out = v;
    return 0;
}

static int parse_f64(const char *s, double *out)
{
    if (!s || !*s) return -1;
    char *end;
    double v = strtod(s, &end);
    if (*end) return -1;
    *out = v;
    return 0;
}

/* The file's hyperparameters equal optim's. */
static int check_fields(sg_ctx *ctx, const sg_optim *optim, sg__ckpt_lookup get, const void *ud)
{
    field f[5];
    const int nf = optim_fields(optim, f);
    for (int i = 0; i < nf; i++) {
        char key[64];
        double v;
        snprintf(key, sizeof key, "sgrad.optim.%s", f[i].key);
        if (parse_f64(get(ud, key), &v)) return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad %s", key);
        if (v != f[i].value)
            return sg__failc(ctx, SG_ERR_STATE, "checkpoint: %s %.17g, the optimizer has %.17g", f[i].key, v,
                             f[i].value);
    }
    return SG_OK;
}

/* The file's schedule, as optim will have it (a callback stays optim's own). */
static int read_schedule(sg_ctx *ctx, const sg_optim *optim, sg__ckpt_lookup get, const void *ud,
                         sg_lr_schedule *sched)
{
    const char *s = get(ud, "sgrad.optim.schedule");
    *sched = optim->sched;
    if (s && !strcmp(s, "constant")) {
        *sched = (sg_lr_schedule){SG_LR_CONSTANT, 0, 1.0, NULL, NULL};
    } else if (s && !strcmp(s, "linear")) {
        int64_t n;
        double end;
        if (parse_i64(get(ud, "sgrad.optim.schedule.steps"), &n) || n <= 0 ||
            parse_f64(get(ud, "sgrad.optim.schedule.end_factor"), &end) || !isfinite(end) || end < 0)
            return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad linear schedule");
        *sched = (sg_lr_schedule){SG_LR_LINEAR, n, end, NULL, NULL};
    } else if (s && !strcmp(s, "callback")) {
        if (optim->sched.kind != SG_LR_CALLBACK)
            return sg__failc(ctx, SG_ERR_STATE,
                             "checkpoint has a callback schedule: set one on the optimizer before loading");
    } else {
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad sgrad.optim.schedule");
    }
    return SG_OK;
}

/* Validates the optimizer's metadata against optim (kind, options, schedule). */
static int check_meta(const sg_optim *optim, sg__ckpt_lookup get, const void *ud, sg__ckpt_load *l)
{
    sg_ctx *ctx = optim->ctx;
    const char *kind = get(ud, "sgrad.optim");
    if (!kind) return sg__failc(ctx, SG_ERR_STATE, "checkpoint holds no optimizer state");
    if (strcmp(kind, optim->name))
        return sg__failc(ctx, SG_ERR_STATE, "checkpoint is of a %s optimizer, not %s", kind, optim->name);
    if (parse_i64(get(ud, "sgrad.optim.steps"), &l->steps))
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad sgrad.optim.steps");
    if (parse_f64(get(ud, "sgrad.optim.lr"), &l->lr) || !sg__valid_lr(l->lr))
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad sgrad.optim.lr");
    int rc = check_fields(ctx, optim, get, ud);
    return rc ? rc : read_schedule(ctx, optim, get, ud, &l->sched);
}

int sg__optim_ckpt_load_begin(sg_optim *opt, sg__ckpt_lookup meta, const void *ud, sg__ckpt_load **out)
{
    *out = NULL;
    sg__ckpt_load head = {opt, 0, 0, {SG_LR_CONSTANT, 0, 1.0, NULL, NULL}, 0};
    int rc = check_meta(opt, meta, ud, &head);
    if (rc) return rc;
    sg__ckpt_load *l = sg__malloc(opt->ctx, sizeof *l + (size_t)opt->n_params * sizeof(pending));
    if (!l) return sg__failc(opt->ctx, SG_ERR_NOMEM, "checkpoint: out of memory");
    *l = head;
    *out = l;
    return SG_OK;
}

/* A state tensor's counts within range: "step" within the optimizer's steps, "last_step"
 * and "row_step" within the parameter's step (`step`, the file's). */
static int check_state(const sg__ckpt_load *l, const sg__pstate *ps, int i, const sg__ckpt_bytes *in,
                       int64_t step)
{
    sg_ctx *ctx = l->opt->ctx;
    const char *sn = ps->state_name[i];
    const unsigned char *d = in[i].data;
    if (!strcmp(sn, "step") && (rd_i64(d, 0) < 0 || rd_i64(d, 0) > l->steps))
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: %s beyond the optimizer's steps", in[i].name);
    if (strcmp(sn, "last_step") && strcmp(sn, "row_step")) return SG_OK;
    for (int64_t k = 0; k < ps->state[i]->numel; k++)
        if (rd_i64(d, k) < 0 || rd_i64(d, k) > step)
            return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: %s[%lld] outside [0, step]", in[i].name,
                             (long long)k);
    return SG_OK;
}

/* Exact lazy SGD's entries: sizes that agree, rows ascending and in range, valid runs
 * (copied into p->runs). */
static int prepare_lazy(sg_ctx *ctx, const sg__pstate *ps, const sg__ckpt_bytes *in, pending *p)
{
    const sg__ckpt_bytes *rows = &in[entry_of(ps, E_LAG_ROWS)], *par = &in[entry_of(ps, E_LAG_PARAM)];
    const sg__ckpt_bytes *st = &in[entry_of(ps, E_RUN_START)], *lr = &in[entry_of(ps, E_RUN_LR)];
    const int im = entry_of(ps, E_LAG_MOM);
    p->lag = rows->len0;
    p->lag_rows = rows->data;
    p->lag_param = par->data;
    p->lag_mom = im >= 0 ? in[im].data : NULL;
    p->n_runs = st->len0;
    if (par->len0 != p->lag || (im >= 0 && in[im].len0 != p->lag) || lr->len0 != p->n_runs ||
        p->lag > ps->rows)
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: the lazy state of %s disagrees in size",
                         rows->name);
    for (int64_t k = 0; k < p->lag; k++) {
        int64_t row = rd_i64(rows->data, k);
        if (row < 0 || row >= ps->rows || (k && row <= rd_i64(rows->data, k - 1)))
            return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: %s not ascending rows in range", rows->name);
    }
    for (int64_t k = 0; k < p->n_runs; k++) {
        int64_t s = rd_i64(st->data, k);
        if (s < 1 || (k && s <= rd_i64(st->data, k - 1)) || !sg__valid_lr(rd_f64(lr->data, k)))
            return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad learning-rate runs in %s", rows->name);
    }
    if (!p->n_runs) return SG_OK;
    p->runs = sg__malloc(ctx, (size_t)p->n_runs * sizeof *p->runs);
    if (!p->runs) return sg__failc(ctx, SG_ERR_NOMEM, "checkpoint: out of memory");
    for (int64_t k = 0; k < p->n_runs; k++)
        p->runs[k] = (sg__lr_run){rd_i64(st->data, k), rd_f64(lr->data, k)};
    return SG_OK;
}

int sg__optim_ckpt_load_param(sg__ckpt_load *l, sg_tensor *param, const sg__ckpt_bytes *in)
{
    sg__pstate *ps = sg__optim_state_of(l->opt, param);
    pending *p = &l->p[l->n++];
    *p = (pending){ps, {NULL}, NULL, NULL, NULL, 0, NULL, 0};
    int64_t step = 0; /* the file's step of param */
    for (int i = 0; i < ps->n_state; i++)
        if (!strcmp(ps->state_name[i], "step")) step = rd_i64(in[i].data, 0);
    int rc = SG_OK;
    for (int i = 0; i < ps->n_state && !rc; i++) {
        p->state[i] = in[i].data;
        rc = check_state(l, ps, i, in, step);
    }
    return rc || !sg__is_lazy_sgd(ps) ? rc : prepare_lazy(l->opt->ctx, ps, in, p);
}

/* Writes p's state: the state tensors, then the raw rows that were behind over the
 * caught-up values, and the runs. */
static void install(sg_ctx *ctx, pending *p)
{
    sg__pstate *ps = p->ps;
    for (int s = 0; s < ps->n_state; s++)
        memcpy(ps->state[s]->data, p->state[s], tensor_bytes(ps->state[s]));
    if (!sg__is_lazy_sgd(ps)) return;
    const size_t rowbytes = row_bytes(ps);
    sg_tensor *mom = momentum_of(ps);
    for (int64_t k = 0; k < p->lag; k++) {
        const size_t at = (size_t)rd_i64(p->lag_rows, k) * rowbytes;
        memcpy((char *)ps->param->data + at, p->lag_param + (size_t)k * rowbytes, rowbytes);
        if (p->lag_mom) memcpy((char *)mom->data + at, p->lag_mom + (size_t)k * rowbytes, rowbytes);
    }
    sg__free(ctx, ps->runs);
    ps->runs = p->runs;
    ps->n_runs = ps->cap_runs = p->n_runs;
    ps->lagging = p->lag > 0;
}

void sg__optim_ckpt_load_commit(sg__ckpt_load *l)
{
    sg_optim *opt = l->opt;
    for (int64_t i = 0; i < l->n; i++) install(opt->ctx, &l->p[i]);
    opt->t = l->steps;
    opt->lr = l->lr;
    opt->sched = l->sched;
    sg__free(opt->ctx, l);
}

void sg__optim_ckpt_load_abort(sg__ckpt_load *l)
{
    if (!l) return;
    for (int64_t i = 0; i < l->n; i++) sg__free(l->opt->ctx, l->p[i].runs);
    sg__free(l->opt->ctx, l);
}
