/* Checkpoints (include/sgrad.h, "io: checkpoints"): parameters, optimizer state and the
 * context's generator in a safetensors file, written through the atomic writer (io.h) and
 * read back with a strict, bounded JSON reader.
 *
 * Invariants:
 * - The set of tensor names a checkpoint holds follows from the names given, the
 *   optimizer's kind, its options and its parameters (plan_entries), for save and load
 *   alike; a load matches the file against that set exactly.
 * - Loading reads the whole file into one buffer (its size bounds every allocation: the
 *   header's entries and strings are at most its length), validates everything, allocates
 *   what the commit needs, and only then writes (commit cannot fail).
 * - The checksum (FNV-1a 64, "sgrad.checksum") covers the whole file, its own 16 hex digits
 *   read as '0': the save builds the header with zero digits, hashes it and then the data
 *   by a first pass of the emitter the write pass runs again, and patches the digits in.
 *   Format 1 files (whose checksum covers the data section only) still load.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT_VERSION "2"      /* the checksum covers the whole file */
#define FORMAT_VERSION_DATA "1" /* read only: the checksum covers the data section */
#define MAX_HEADER ((uint64_t)1 << 30)

static bool host_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* ---- FNV-1a 64 */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

/* ---- the entries of a checkpoint */

typedef enum {
    SRC_PARAM,     /* a parameter (caught up for lazy SGD) */
    SRC_STATE,     /* optimizer state tensor `state` (momentum caught up for lazy SGD) */
    SRC_LAG_ROWS,  /* lazy SGD: the rows behind */
    SRC_LAG_PARAM, /* lazy SGD: their raw parameter rows */
    SRC_LAG_MOM,   /* lazy SGD: their raw momentum rows */
    SRC_RUN_START, /* lazy SGD: learning-rate runs */
    SRC_RUN_LR
} entry_src;

typedef struct {
    char *name; /* sg__malloc'd */
    entry_src src;
    sg_tensor *t;     /* the parameter (or state tensor for SRC_STATE) */
    sg__pstate *ps;   /* the optimizer's state of the parameter, NULL without */
    int state;        /* SRC_STATE: index in ps->state */
    sg_dtype dtype;
    int ndim;
    int64_t shape[SG_MAX_DIMS];
    int64_t lag; /* lagging rows of ps (the SRC_LAG_* first dimension) */
} entry;

typedef struct {
    entry *e;
    int64_t n, cap;
} entries;

static void entries_free(sg_ctx *ctx, entries *es)
{
    for (int64_t i = 0; i < es->n; i++) sg__free(ctx, es->e[i].name);
    sg__free(ctx, es->e);
    *es = (entries){NULL, 0, 0};
}

static char *join(sg_ctx *ctx, const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = b ? strlen(b) : 0, lc = c ? strlen(c) : 0;
    char *s = sg__malloc(ctx, la + lb + lc + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    if (lb) memcpy(s + la, b, lb);
    if (lc) memcpy(s + la + lb, c, lc);
    s[la + lb + lc] = '\0';
    return s;
}

static int add_entry(sg_ctx *ctx, entries *es, entry e, const char *name, const char *a,
                     const char *b)
{
    entry *g = sg__grow(ctx, es->e, &es->cap, es->n, sizeof *g, 16);
    if (!g) return SG_ERR_NOMEM;
    es->e = g;
    e.name = join(ctx, name, a, b);
    if (!e.name) return SG_ERR_NOMEM;
    es->e[es->n++] = e;
    return SG_OK;
}

static bool is_lazy_sgd(const sg__pstate *ps) { return ps && ps->last; }

static int64_t lagging_rows(const sg__pstate *ps)
{
    int64_t k = 0;
    if (is_lazy_sgd(ps))
        for (int64_t r = 0; r < ps->rows; r++) k += ps->last[r] < *ps->step;
    return k;
}

/* The entries for params and optim's state, in file order. The first dimension of the
 * lazy-SGD entries (rows behind, learning-rate runs) is the optimizer's now: a save writes
 * it, a load takes the file's instead (match). */
static int plan_entries(sg_ctx *ctx, sg_tensor *const *params, int64_t n, const char *const *names,
                        sg_optim *optim, entries *es)
{
    *es = (entries){NULL, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        sg_tensor *p = params[i];
        sg__pstate *ps = optim && p->optim_state && ((sg__pstate *)p->optim_state)->opt == optim
                             ? p->optim_state
                             : NULL;
        entry e = {NULL, SRC_PARAM, p, ps, 0, p->dtype, p->ndim, {0}, 0};
        memcpy(e.shape, p->shape, sizeof e.shape);
        int rc = add_entry(ctx, es, e, names[i], NULL, NULL);
        for (int s = 0; !rc && ps && s < ps->n_state; s++) {
            sg_tensor *st = ps->state[s];
            entry se = {NULL, SRC_STATE, st, ps, s, st->dtype, st->ndim, {0}, 0};
            memcpy(se.shape, st->shape, sizeof se.shape);
            rc = add_entry(ctx, es, se, "optim/", names[i], NULL);
            if (!rc) { /* append "/<state>" */
                char *full = join(ctx, es->e[es->n - 1].name, "/", ps->state_name[s]);
                if (!full) rc = SG_ERR_NOMEM;
                else {
                    sg__free(ctx, es->e[es->n - 1].name);
                    es->e[es->n - 1].name = full;
                }
            }
        }
        if (!rc && is_lazy_sgd(ps)) {
            int64_t lag = lagging_rows(ps);
            entry le = {NULL, SRC_LAG_ROWS, p, ps, 0, SG_I64, 1, {lag}, lag};
            char *pre = join(ctx, "optim/", names[i], "/");
            if (!pre) rc = SG_ERR_NOMEM;
            if (!rc) rc = add_entry(ctx, es, le, pre, "lagging_rows", NULL);
            entry lp = {NULL, SRC_LAG_PARAM, p, ps, 0, p->dtype, p->ndim, {0}, lag};
            memcpy(lp.shape, p->shape, sizeof lp.shape);
            if (p->ndim == 0) lp.ndim = 1;
            lp.shape[0] = lag;
            if (!rc) rc = add_entry(ctx, es, lp, pre, "lagging_param", NULL);
            if (!rc && optim->o.sgd.momentum != 0) {
                lp.src = SRC_LAG_MOM;
                rc = add_entry(ctx, es, lp, pre, "lagging_momentum_buffer", NULL);
            }
            entry rs = {NULL, SRC_RUN_START, p, ps, 0, SG_I64, 1, {ps->n_runs}, lag};
            if (!rc) rc = add_entry(ctx, es, rs, pre, "lr_run_start", NULL);
            rs.src = SRC_RUN_LR;
            rs.dtype = SG_F64;
            if (!rc) rc = add_entry(ctx, es, rs, pre, "lr_run_lr", NULL);
            sg__free(ctx, pre);
        }
        if (rc) {
            entries_free(ctx, es);
            return sg__failc(ctx, rc, "checkpoint: out of memory");
        }
    }
    return SG_OK;
}

static int64_t entry_numel(const entry *e) { return sg__numel(e->ndim, e->shape); }

/* ---- the data section: one emitter for the checksum pass (o NULL) and the write pass */

typedef struct {
    sg__out *o; /* NULL: hash only */
    uint64_t h;
    uint64_t bytes;
} sink;

static int put(sink *k, const void *p, size_t n)
{
    k->bytes += n;
    if (!k->o) {
        k->h = fnv1a(k->h, p, n);
        return SG_OK;
    }
    return sg__out_write(k->o, p, n);
}

/* Writes entry e's bytes; rowbuf holds two rows of the parameter. */
static int emit(sg_optim *optim, const entry *e, sink *k, unsigned char *rowbuf)
{
    sg__pstate *ps = e->ps;
    size_t es = sg_dtype_size(e->dtype);
    bool lazy = is_lazy_sgd(ps);
    int rc = SG_OK;
    bool whole = e->src == SRC_PARAM || e->src == SRC_STATE;
    bool caught_up = lazy && (e->src == SRC_PARAM ||
                              (e->src == SRC_STATE && !strcmp(ps->state_name[e->state], "momentum_buffer")));
    if (whole && !caught_up) return put(k, e->t->data, (size_t)entry_numel(e) * es);
    size_t rowbytes = (size_t)ps->width * sg_dtype_size(ps->param->dtype);
    unsigned char *w = rowbuf, *v = rowbuf + rowbytes;
    switch (e->src) {
    case SRC_PARAM:
    case SRC_STATE: /* the momentum buffer */
        for (int64_t r = 0; r < ps->rows && !rc; r++) {
            if (ps->last[r] >= *ps->step) {
                const char *base = e->t->data;
                rc = put(k, base + (size_t)r * rowbytes, rowbytes);
                continue;
            }
            sg__sgd_row_current(optim, ps, r, w, v);
            rc = put(k, e->src == SRC_PARAM ? w : v, rowbytes);
        }
        return rc;
    case SRC_LAG_ROWS:
    case SRC_LAG_PARAM:
    case SRC_LAG_MOM: {
        const char *base = e->src == SRC_LAG_MOM ? ps->state[1]->data : ps->param->data;
        for (int64_t r = 0; r < ps->rows && !rc; r++) {
            if (ps->last[r] >= *ps->step) continue;
            rc = e->src == SRC_LAG_ROWS ? put(k, &r, sizeof r)
                                        : put(k, base + (size_t)r * rowbytes, rowbytes);
        }
        return rc;
    }
    case SRC_RUN_START:
    case SRC_RUN_LR:
        for (int64_t i = 0; i < ps->n_runs && !rc; i++)
            rc = e->src == SRC_RUN_START ? put(k, &ps->runs[i].start, sizeof(int64_t))
                                         : put(k, &ps->runs[i].lr, sizeof(double));
        return rc;
    }
    return rc;
}

/* ---- JSON output */

typedef struct {
    sg_ctx *ctx;
    char *s;
    size_t n, cap;
    bool nomem;
} strbuf;

static void sb_put(strbuf *b, const char *p, size_t n)
{
    if (b->nomem) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *s = sg__malloc(b->ctx, cap);
        if (!s) {
            b->nomem = true;
            return;
        }
        if (b->n) memcpy(s, b->s, b->n);
        sg__free(b->ctx, b->s);
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(strbuf *b, const char *p) { sb_put(b, p, strlen(p)); }

static void sb_json_string(strbuf *b, const char *p)
{
    sb_put(b, "\"", 1);
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static void sb_kv(strbuf *b, bool *first, const char *key, const char *value)
{
    if (!*first) sb_put(b, ",", 1);
    *first = false;
    sb_json_string(b, key);
    sb_put(b, ":", 1);
    sb_json_string(b, value);
}

static const char *dtype_name(sg_dtype d)
{
    switch (d) {
    case SG_F32: return "F32";
    case SG_F64: return "F64";
    case SG_I32: return "I32";
    case SG_I64: return "I64";
    default: return "?";
    }
}

/* ---- the library's metadata */

typedef struct {
    const char *key;
    double value;
} field;

/* The hyperparameters that must agree between a saved and a loading optimizer (the base
 * learning rate is restored instead). Returns the count (at most 6). */
static int optim_fields(const sg_optim *o, field f[6])
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

static void sb_meta_double(strbuf *b, bool *first, const char *key, double v)
{
    char num[40];
    snprintf(num, sizeof num, "%.17g", v);
    sb_kv(b, first, key, num);
}

/* ---- argument checks shared by save and load */

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Non-NULL, unique strings (sorted copy of the pointers); `what` names them. */
static int check_unique(sg_ctx *ctx, const char *const *s, int64_t n, const char *what)
{
    if (n == 0) return SG_OK;
    const char **sorted = sg__malloc(ctx, (size_t)n * sizeof *sorted);
    if (!sorted) return SG_ERR_NOMEM;
    memcpy(sorted, s, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str_ptr);
    int rc = SG_OK;
    for (int64_t i = 1; i < n && !rc; i++)
        if (!strcmp(sorted[i - 1], sorted[i]))
            rc = sg__failc(ctx, SG_ERR_ARG, "checkpoint: duplicate %s \"%s\"", what, sorted[i]);
    sg__free(ctx, sorted);
    return rc;
}

static int check_args(sg_ctx *ctx, const char *path, sg_tensor *const *params, int64_t n,
                      const char *const *names, const sg_optim *optim)
{
    if (!path) return sg__failc(ctx, SG_ERR_NULL, "checkpoint: NULL path");
    if (n < 0) return sg__failc(ctx, SG_ERR_ARG, "checkpoint: %lld tensors", (long long)n);
    if (n > 0 && (!params || !names))
        return sg__failc(ctx, SG_ERR_NULL, "checkpoint: NULL tensor or name list");
    if (!host_little_endian())
        return sg__failc(ctx, SG_ERR_STATE, "checkpoint: big-endian hosts are not supported");
    for (int64_t i = 0; i < n; i++) {
        if (!params[i] || !names[i])
            return sg__failc(ctx, SG_ERR_NULL, "checkpoint: tensor or name %lld is NULL", (long long)i);
        const char *nm = names[i];
        if (!*nm || !strcmp(nm, "__metadata__") || !strncmp(nm, "optim/", 6))
            return sg__failc(ctx, SG_ERR_ARG,
                             "checkpoint: name \"%s\" (%lld) is empty, \"__metadata__\" or starts with \"optim/\"",
                             nm, (long long)i);
        if (params[i]->ctx != ctx)
            return sg__failc(ctx, SG_ERR_ARG, "checkpoint: tensor \"%s\" belongs to another context", nm);
        if (params[i]->layout != SG_DENSE)
            return sg__failc(ctx, SG_ERR_LAYOUT, "checkpoint: tensor \"%s\" is not dense", nm);
    }
    int rc = check_unique(ctx, names, n, "name");
    if (rc) return rc;
    if (optim) {
        if (optim->ctx != ctx) return sg__failc(ctx, SG_ERR_ARG, "checkpoint: optimizer of another context");
        for (int64_t j = 0; j < optim->n_params; j++) {
            const sg_tensor *p = optim->params[j]->param;
            int64_t i = 0;
            while (i < n && params[i] != p) i++;
            if (i == n)
                return sg__failc(ctx, SG_ERR_ARG,
                                 "checkpoint: parameter %lld of the optimizer is not among the tensors",
                                 (long long)j);
        }
        /* a tensor listed twice would get its state twice */
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = i + 1; params[i]->optim_state && k < n; k++)
                if (params[i] == params[k])
                    return sg__failc(ctx, SG_ERR_ARG, "checkpoint: tensor \"%s\" listed twice", names[i]);
    }
    return SG_OK;
}

static int check_meta_keys(sg_ctx *ctx, const sg_checkpoint_meta *meta)
{
    if (!meta || meta->n == 0) return SG_OK;
    if (meta->n < 0 || !meta->keys || !meta->values)
        return sg__failc(ctx, SG_ERR_ARG, "checkpoint: malformed metadata");
    for (int64_t i = 0; i < meta->n; i++) {
        if (!meta->keys[i] || !meta->values[i])
            return sg__failc(ctx, SG_ERR_NULL, "checkpoint: metadata pair %lld is NULL", (long long)i);
        if (!*meta->keys[i] || !strncmp(meta->keys[i], "sgrad.", 6))
            return sg__failc(ctx, SG_ERR_ARG, "checkpoint: metadata key \"%s\" is empty or reserved (\"sgrad.\")",
                             meta->keys[i]);
    }
    return check_unique(ctx, meta->keys, meta->n, "metadata key");
}

/* ---- save */

/* The header with the checksum's 16 hex digits "0"; *digits_at gets their offset in b. */
static void header_json(strbuf *b, const entries *es, sg_ctx *ctx, const sg_optim *optim,
                        const sg_checkpoint_meta *meta, size_t *digits_at)
{
    char num[80];
    sb_str(b, "{\"__metadata__\":{");
    bool first = true;
    sb_kv(b, &first, "sgrad.format", FORMAT_VERSION);
    sb_kv(b, &first, "sgrad.checksum", "fnv1a64:0000000000000000");
    *digits_at = b->n - 17; /* before the closing quote */
    snprintf(num, sizeof num, "%016llx%016llx%016llx%016llx", (unsigned long long)ctx->rng[0],
             (unsigned long long)ctx->rng[1], (unsigned long long)ctx->rng[2],
             (unsigned long long)ctx->rng[3]);
    sb_kv(b, &first, "sgrad.rng", num);
    if (optim) {
        sb_kv(b, &first, "sgrad.optim", optim->name);
        snprintf(num, sizeof num, "%lld", (long long)optim->t);
        sb_kv(b, &first, "sgrad.optim.steps", num);
        sb_meta_double(b, &first, "sgrad.optim.lr", optim->lr);
        field f[6];
        int nf = optim_fields(optim, f);
        for (int i = 0; i < nf; i++) {
            char key[64];
            snprintf(key, sizeof key, "sgrad.optim.%s", f[i].key);
            sb_meta_double(b, &first, key, f[i].value);
        }
        sb_kv(b, &first, "sgrad.optim.schedule", sched_name(optim->sched.kind));
        if (optim->sched.kind == SG_LR_LINEAR) {
            snprintf(num, sizeof num, "%lld", (long long)optim->sched.steps);
            sb_kv(b, &first, "sgrad.optim.schedule.steps", num);
            sb_meta_double(b, &first, "sgrad.optim.schedule.end_factor", optim->sched.end_factor);
        }
    }
    for (int64_t i = 0; meta && i < meta->n; i++) sb_kv(b, &first, meta->keys[i], meta->values[i]);
    sb_str(b, "}");
    uint64_t off = 0;
    for (int64_t i = 0; i < es->n; i++) {
        const entry *e = &es->e[i];
        uint64_t bytes = (uint64_t)entry_numel(e) * sg_dtype_size(e->dtype);
        sb_str(b, ",");
        sb_json_string(b, e->name);
        snprintf(num, sizeof num, ":{\"dtype\":\"%s\",\"shape\":[", dtype_name(e->dtype));
        sb_str(b, num);
        for (int d = 0; d < e->ndim; d++) {
            snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)e->shape[d]);
            sb_str(b, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + bytes));
        sb_str(b, num);
        off += bytes;
    }
    sb_str(b, "}");
    while (b->n % 8 && !b->nomem) sb_put(b, " ", 1); /* the data starts at 8 + n: 8-byte aligned */
}

int sg_checkpoint_save(sg_ctx *ctx, const char *path, sg_tensor *const *params, int64_t n_params,
                       const char *const *names, sg_optim *optim, const sg_checkpoint_meta *meta)
{
    if (!ctx) return SG_ERR_NULL;
    int rc = check_args(ctx, path, params, n_params, names, optim);
    if (!rc) rc = check_meta_keys(ctx, meta);
    if (rc) return rc;
    entries es;
    rc = plan_entries(ctx, params, n_params, names, optim, &es);
    if (rc) return rc;
    size_t rowmax = 0;
    for (int64_t i = 0; i < es.n; i++)
        if (is_lazy_sgd(es.e[i].ps)) {
            size_t rb = (size_t)es.e[i].ps->width * sg_dtype_size(es.e[i].dtype);
            if (rb > rowmax) rowmax = rb;
        }
    unsigned char *rowbuf = sg__malloc(ctx, 2 * rowmax + 16);
    strbuf hb = {ctx, NULL, 0, 0, false};
    if (!rowbuf) rc = SG_ERR_NOMEM;
    size_t digits_at = 0;
    if (!rc) {
        header_json(&hb, &es, ctx, optim, meta, &digits_at);
        if (hb.nomem) rc = sg__failc(ctx, SG_ERR_NOMEM, "checkpoint: out of memory");
    }
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)hb.n >> (8 * i));
    if (!rc) { /* the checksum: length, header (zero digits), data */
        sink hash = {NULL, fnv1a(fnv1a(FNV_OFFSET, len, 8), hb.s, hb.n), 0};
        for (int64_t i = 0; i < es.n && !rc; i++) rc = emit(optim, &es.e[i], &hash, rowbuf);
        char digits[17];
        snprintf(digits, sizeof digits, "%016llx", (unsigned long long)hash.h);
        memcpy(hb.s + digits_at, digits, 16);
    }
    sg__out o;
    if (!rc) rc = sg__out_open(ctx, path, &o);
    if (!rc) {
        sink out = {&o, 0, 0};
        rc = sg__out_write(&o, len, 8);
        if (!rc) rc = sg__out_write(&o, hb.s, hb.n);
        for (int64_t i = 0; i < es.n && !rc; i++) rc = emit(optim, &es.e[i], &out, rowbuf);
        if (rc) sg__out_abort(&o);
        else rc = sg__out_commit(&o);
    }
    sg__free(ctx, hb.s);
    sg__free(ctx, rowbuf);
    entries_free(ctx, &es);
    return rc;
}

/* ---- strict, bounded JSON reader for a safetensors header */

typedef struct {
    char *name;
    sg_dtype dtype;
    int ndim;
    int64_t shape[SG_MAX_DIMS];
    uint64_t begin, end;
    bool used;
} ftensor;

typedef struct {
    sg_ctx *ctx;
    const unsigned char *file; /* the whole file (file_size bytes) */
    uint64_t file_size;
    const char *start, *p, *end; /* the header; p: its unread part */
    const char *sum_token;       /* the raw JSON string of "sgrad.checksum", quotes included */
    size_t sum_token_len;
    char *strings;       /* decoded strings, each NUL-terminated (at most the header's size) */
    size_t str_used;
    ftensor *t;
    int64_t nt, cap_t;
    struct kv {
        char *key, *value;
    } * m;
    int64_t nm, cap_m;
    int rc;
} reader;

static int bad(reader *r, const char *what)
{
    if (!r->rc)
        r->rc = sg__failc(r->ctx, SG_ERR_FORMAT, "checkpoint header: %s (at byte %lld of the header)",
                          what, (long long)(r->p - r->start));
    return r->rc;
}

static void ws(reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static bool eat(reader *r, char c)
{
    ws(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return true;
    }
    return false;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* A JSON string, decoded to UTF-8 into r->strings (never longer than its encoding). */
static char *read_string(reader *r)
{
    if (!eat(r, '"')) return bad(r, "expected a string"), NULL;
    char *out = r->strings + r->str_used, *o = out;
    while (1) {
        if (r->p >= r->end) return bad(r, "unterminated string"), NULL;
        unsigned char c = (unsigned char)*r->p++;
        if (c == '"') break;
        if (c < 0x20) return bad(r, "control character in a string"), NULL;
        if (c != '\\') {
            *o++ = (char)c;
            continue;
        }
        if (r->p >= r->end) return bad(r, "unterminated escape"), NULL;
        char e = *r->p++;
        const char *simple = "\"\\/bfnrt", *val = "\"\\/\b\f\n\r\t";
        const char *k = strchr(simple, e);
        if (e && k) {
            *o++ = val[k - simple];
            continue;
        }
        unsigned u;
        if (e != 'u' || r->end - r->p < 4 || hex4(r->p, &u)) return bad(r, "bad escape"), NULL;
        r->p += 4;
        if (u >= 0xD800 && u < 0xDC00) { /* a surrogate pair */
            unsigned lo;
            if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' || hex4(r->p + 2, &lo) ||
                lo < 0xDC00 || lo >= 0xE000)
                return bad(r, "unpaired surrogate"), NULL;
            r->p += 6;
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        } else if (u >= 0xDC00 && u < 0xE000) {
            return bad(r, "unpaired surrogate"), NULL;
        }
        if (u == 0) return bad(r, "NUL in a string"), NULL;
        if (u < 0x80) *o++ = (char)u;
        else if (u < 0x800) {
            *o++ = (char)(0xC0 | (u >> 6));
            *o++ = (char)(0x80 | (u & 0x3F));
        } else if (u < 0x10000) {
            *o++ = (char)(0xE0 | (u >> 12));
            *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
            *o++ = (char)(0x80 | (u & 0x3F));
        } else {
            *o++ = (char)(0xF0 | (u >> 18));
            *o++ = (char)(0x80 | ((u >> 12) & 0x3F));
            *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
            *o++ = (char)(0x80 | (u & 0x3F));
        }
    }
    *o++ = '\0';
    r->str_used += (size_t)(o - out);
    return out;
}

/* A non-negative integer below 2^63, digits only, no leading zero. */
static int read_uint(reader *r, uint64_t *out)
{
    ws(r);
    const char *s = r->p;
    uint64_t v = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        unsigned d = (unsigned)(*r->p - '0');
        if (v > (((uint64_t)1 << 63) - 1 - d) / 10) return bad(r, "integer too large");
        v = v * 10 + d;
        r->p++;
    }
    if (r->p == s) return bad(r, "expected a non-negative integer");
    if (r->p - s > 1 && *s == '0') return bad(r, "integer with a leading zero");
    if (r->p < r->end && (*r->p == '.' || *r->p == 'e' || *r->p == 'E'))
        return bad(r, "integer expected, not a fraction");
    *out = v;
    return SG_OK;
}

/* [int, ...] with at most `max` elements; *n gets the count. */
static int read_uint_array(reader *r, uint64_t *vals, int max, int *n, const char *what)
{
    *n = 0;
    if (!eat(r, '[')) return bad(r, what);
    if (eat(r, ']')) return SG_OK;
    do {
        if (*n == max) return bad(r, what);
        if (read_uint(r, &vals[(*n)++])) return r->rc;
    } while (eat(r, ','));
    if (!eat(r, ']')) return bad(r, what);
    return SG_OK;
}

static int read_metadata(reader *r)
{
    ws(r);
    if (r->end - r->p >= 4 && !memcmp(r->p, "null", 4)) {
        r->p += 4;
        return SG_OK;
    }
    if (!eat(r, '{')) return bad(r, "__metadata__ is not an object");
    if (eat(r, '}')) return SG_OK;
    do {
        char *k = read_string(r);
        if (!k || !eat(r, ':')) return bad(r, "expected ':' in __metadata__");
        ws(r);
        const char *token = r->p;
        char *v = read_string(r);
        if (!v) return r->rc;
        if (!strcmp(k, "sgrad.checksum")) {
            r->sum_token = token;
            r->sum_token_len = (size_t)(r->p - token);
        }
        for (int64_t i = 0; i < r->nm; i++)
            if (!strcmp(r->m[i].key, k)) return bad(r, "duplicate key in __metadata__");
        struct kv *g = sg__grow(r->ctx, r->m, &r->cap_m, r->nm, sizeof *g, 16);
        if (!g) return r->rc = SG_ERR_NOMEM;
        r->m = g;
        r->m[r->nm++] = (struct kv){k, v};
    } while (eat(r, ','));
    if (!eat(r, '}')) return bad(r, "expected '}' after __metadata__");
    return SG_OK;
}

static int read_tensor(reader *r, char *name)
{
    ftensor t = {name, SG_DTYPE_INVALID, -1, {0}, 0, 0, false};
    bool have_dtype = false, have_offsets = false;
    if (!eat(r, '{')) return bad(r, "a tensor is not an object");
    do {
        char *k = read_string(r);
        if (!k || !eat(r, ':')) return bad(r, "expected ':' in a tensor");
        if (!strcmp(k, "dtype") && !have_dtype) {
            char *d = read_string(r);
            if (!d) return r->rc;
            t.dtype = !strcmp(d, "F32") ? SG_F32 : !strcmp(d, "F64") ? SG_F64
                    : !strcmp(d, "I32") ? SG_I32 : !strcmp(d, "I64") ? SG_I64 : SG_DTYPE_INVALID;
            if (t.dtype == SG_DTYPE_INVALID) return bad(r, "unsupported dtype (F32, F64, I32, I64)");
            have_dtype = true;
        } else if (!strcmp(k, "shape") && t.ndim < 0) {
            uint64_t dims[SG_MAX_DIMS];
            if (read_uint_array(r, dims, SG_MAX_DIMS, &t.ndim, "shape of at most 4 dimensions expected"))
                return r->rc;
            for (int d = 0; d < t.ndim; d++) t.shape[d] = (int64_t)dims[d];
        } else if (!strcmp(k, "data_offsets") && !have_offsets) {
            uint64_t off[2];
            int n;
            if (read_uint_array(r, off, 2, &n, "data_offsets [begin, end] expected")) return r->rc;
            if (n != 2 || off[0] > off[1]) return bad(r, "data_offsets [begin, end] expected");
            t.begin = off[0];
            t.end = off[1];
            have_offsets = true;
        } else {
            return bad(r, "unknown or repeated key in a tensor");
        }
    } while (eat(r, ','));
    if (!eat(r, '}')) return bad(r, "expected '}' after a tensor");
    if (!have_dtype || t.ndim < 0 || !have_offsets) return bad(r, "a tensor lacks dtype, shape or data_offsets");
    /* the byte count must follow from dtype and shape, without overflow */
    uint64_t bytes = sg_dtype_size(t.dtype);
    for (int d = 0; d < t.ndim; d++) {
        uint64_t s = (uint64_t)t.shape[d];
        if (s && bytes > (((uint64_t)1 << 62) / s)) return bad(r, "tensor size overflows");
        bytes *= s;
    }
    if (bytes != t.end - t.begin) return bad(r, "data_offsets disagree with dtype and shape");
    ftensor *g = sg__grow(r->ctx, r->t, &r->cap_t, r->nt, sizeof *g, 16);
    if (!g) return r->rc = SG_ERR_NOMEM;
    r->t = g;
    r->t[r->nt++] = t;
    return SG_OK;
}

static int read_header(reader *r)
{
    bool have_meta = false;
    if (!eat(r, '{')) return bad(r, "the header is not a JSON object");
    if (!eat(r, '}')) {
        do {
            char *k = read_string(r);
            if (!k || !eat(r, ':')) return bad(r, "expected ':'");
            if (!strcmp(k, "__metadata__")) {
                if (have_meta) return bad(r, "two __metadata__");
                have_meta = true;
                if (read_metadata(r)) return r->rc;
            } else if (read_tensor(r, k)) {
                return r->rc;
            }
        } while (eat(r, ','));
        if (!eat(r, '}')) return bad(r, "expected '}' at the end of the header");
    }
    ws(r);
    if (r->p != r->end) return bad(r, "bytes after the header's object");
    return SG_OK;
}

/* ---- load */

static int cmp_begin(const void *a, const void *b)
{
    const ftensor *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const ftensor *)a)->name, ((const ftensor *)b)->name);
}

static const char *meta_of(const reader *r, const char *key)
{
    for (int64_t i = 0; i < r->nm; i++)
        if (!strcmp(r->m[i].key, key)) return r->m[i].value;
    return NULL;
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

static ftensor *find_tensor(reader *r, const char *name)
{
    ftensor key = {(char *)name, SG_DTYPE_INVALID, 0, {0}, 0, 0, false};
    return r->nt ? bsearch(&key, r->t, (size_t)r->nt, sizeof *r->t, cmp_name) : NULL; /* r->t NULL: none */
}

/* Reads path whole: *buf (size *n). */
static int slurp(sg_ctx *ctx, const char *path, unsigned char **buf, uint64_t *n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sg__failc(ctx, SG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sg__failc(ctx, SG_ERR_IO, "cannot read %s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8 || size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint %s: %llu bytes, too short for a header",
                         path, (unsigned long long)size);
    }
    unsigned char *b = sg__malloc(ctx, (size_t)size);
    if (!b) {
        close(fd);
        return SG_ERR_NOMEM;
    }
    uint64_t got = 0;
    while (got < size) {
        ssize_t k = read(fd, b + got, (size_t)(size - got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int err = k < 0 ? errno : EIO;
            close(fd);
            sg__free(ctx, b);
            return sg__failc(ctx, SG_ERR_IO, "cannot read %s: %s", path, strerror(err));
        }
        got += (uint64_t)k;
    }
    close(fd);
    *buf = b;
    *n = size;
    return SG_OK;
}

/* The file's tensor for entry e: present, same dtype and shape. */
static int match(sg_ctx *ctx, reader *r, const entry *e, bool size_from_file, ftensor **out)
{
    ftensor *f = find_tensor(r, e->name);
    if (!f) return sg__failc(ctx, SG_ERR_STATE, "checkpoint has no tensor \"%s\"", e->name);
    if (f->dtype != e->dtype)
        return sg__failc(ctx, SG_ERR_DTYPE, "checkpoint tensor \"%s\" is %s, not %s", e->name,
                         dtype_name(f->dtype), dtype_name(e->dtype));
    bool same = f->ndim == e->ndim;
    for (int d = 0; same && d < e->ndim; d++)
        same = f->shape[d] == e->shape[d] || (d == 0 && size_from_file);
    if (!same) return sg__failc(ctx, SG_ERR_SHAPE, "checkpoint tensor \"%s\" has another shape", e->name);
    f->used = true;
    *out = f;
    return SG_OK;
}

/* What the commit writes for one lazy-SGD parameter. */
typedef struct {
    sg__pstate *ps;
    const unsigned char *lag_rows, *lag_param, *lag_mom; /* in the file's buffer */
    int64_t lag;
    sg__lr_run *runs; /* sg__malloc'd; installed by the commit */
    int64_t n_runs;
} lazy_restore;

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

/* Validates the optimizer's metadata against optim (kind, options, schedule). */
static int check_optim_meta(sg_ctx *ctx, reader *r, const sg_optim *optim, int64_t *steps,
                            double *lr, sg_lr_schedule *sched)
{
    const char *kind = meta_of(r, "sgrad.optim");
    if (!kind) return sg__failc(ctx, SG_ERR_STATE, "checkpoint holds no optimizer state");
    if (strcmp(kind, optim->name))
        return sg__failc(ctx, SG_ERR_STATE, "checkpoint is of a %s optimizer, not %s", kind, optim->name);
    if (parse_i64(meta_of(r, "sgrad.optim.steps"), steps))
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad sgrad.optim.steps");
    if (parse_f64(meta_of(r, "sgrad.optim.lr"), lr) || !isfinite(*lr) || *lr < 0)
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad sgrad.optim.lr");
    field f[6];
    int nf = optim_fields(optim, f);
    for (int i = 0; i < nf; i++) {
        char key[64];
        double v;
        snprintf(key, sizeof key, "sgrad.optim.%s", f[i].key);
        if (parse_f64(meta_of(r, key), &v)) return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad %s", key);
        if (v != f[i].value)
            return sg__failc(ctx, SG_ERR_STATE, "checkpoint: %s %.17g, the optimizer has %.17g", f[i].key, v,
                             f[i].value);
    }
    const char *s = meta_of(r, "sgrad.optim.schedule");
    *sched = optim->sched;
    if (s && !strcmp(s, "constant")) {
        *sched = (sg_lr_schedule){SG_LR_CONSTANT, 0, 1.0, NULL, NULL};
    } else if (s && !strcmp(s, "linear")) {
        int64_t n;
        double end;
        if (parse_i64(meta_of(r, "sgrad.optim.schedule.steps"), &n) || n <= 0 ||
            parse_f64(meta_of(r, "sgrad.optim.schedule.end_factor"), &end) || !isfinite(end) || end < 0)
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

static int parse_rng(const char *s, uint64_t rng[4])
{
    if (!s || strlen(s) != 64) return -1;
    for (int w = 0; w < 4; w++) {
        uint64_t v = 0;
        for (int i = 0; i < 16; i++) {
            char c = s[16 * w + i];
            unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
            if (d == 16) return -1;
            v = v << 4 | d;
        }
        rng[w] = v;
    }
    return rng[0] | rng[1] | rng[2] | rng[3] ? 0 : -1; /* xoshiro's state is never all zero */
}

/* Checks what every load needs, whatever it restores: the offsets tile the data section,
 * the format version is known and its checksum matches, the RNG state parses (into rng),
 * no name repeats. Leaves r's tensors sorted by name. */
static int verify(sg_ctx *ctx, reader *r, const unsigned char *data, uint64_t data_len, uint64_t rng[4])
{
    /* offsets: sorted by begin they must tile [0, data_len) exactly (a header of no
     * tensors has r->t NULL, which qsort must not get) */
    if (r->nt > 1) qsort(r->t, (size_t)r->nt, sizeof *r->t, cmp_begin);
    uint64_t at = 0;
    for (int64_t i = 0; i < r->nt; i++) {
        if (r->t[i].begin != at)
            return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: tensor \"%s\" at byte %llu %s", r->t[i].name,
                             (unsigned long long)r->t[i].begin, r->t[i].begin < at ? "overlaps another" : "leaves a gap");
        at = r->t[i].end;
    }
    if (at != data_len)
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: tensors cover %llu bytes of a data section of %llu",
                         (unsigned long long)at, (unsigned long long)data_len);
    const char *ver = meta_of(r, "sgrad.format");
    bool whole_file = ver && !strcmp(ver, FORMAT_VERSION);
    if (!whole_file && (!ver || strcmp(ver, FORMAT_VERSION_DATA)))
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: format version %s (this library reads %s and %s)",
                         ver ? ver : "missing", FORMAT_VERSION_DATA, FORMAT_VERSION);
    const char *sum = meta_of(r, "sgrad.checksum");
    if (!sum) return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: checksum missing");
    uint64_t h = FNV_OFFSET;
    if (!whole_file) {
        h = fnv1a(h, data, (size_t)data_len);
    } else {
        /* exactly "fnv1a64:" and 16 characters, no escapes: its digits read as '0' */
        if (r->sum_token_len != 26 || memcmp(r->sum_token, "\"fnv1a64:", 9))
            return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: checksum %s is not fnv1a64: and 16 hex digits", sum);
        size_t digits = (size_t)((const unsigned char *)r->sum_token + 9 - r->file);
        char zeros[16];
        memset(zeros, '0', sizeof zeros);
        h = fnv1a(h, r->file, digits);
        h = fnv1a(h, zeros, sizeof zeros);
        h = fnv1a(h, r->file + digits + 16, (size_t)(r->file_size - digits - 16));
    }
    char want[40];
    snprintf(want, sizeof want, "fnv1a64:%016llx", (unsigned long long)h);
    if (strcmp(sum, want))
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: checksum %s, the %s gives %s", sum,
                         whole_file ? "file" : "data", want);
    if (parse_rng(meta_of(r, "sgrad.rng"), rng)) return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad sgrad.rng");
    if (r->nt > 1) qsort(r->t, (size_t)r->nt, sizeof *r->t, cmp_name);
    for (int64_t i = 1; i < r->nt; i++)
        if (!strcmp(r->t[i - 1].name, r->t[i].name))
            return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: tensor \"%s\" appears twice", r->t[i].name);
    return SG_OK;
}

/* The user metadata (keys not starting "sgrad.") as one sg__malloc'd block: n pointers to
 * keys, n to values, a NULL, then the strings. NULL on out of memory. */
static char **user_meta_alloc(sg_ctx *ctx, const reader *r, int64_t *n_out)
{
    int64_t nu = 0;
    size_t ubytes = 0;
    for (int64_t i = 0; i < r->nm; i++)
        if (strncmp(r->m[i].key, "sgrad.", 6)) {
            nu++;
            ubytes += strlen(r->m[i].key) + strlen(r->m[i].value) + 2;
        }
    *n_out = nu;
    return sg__malloc(ctx, (size_t)(2 * nu + 1) * sizeof(char *) + ubytes);
}

/* Fills a block from user_meta_alloc into *meta_out (cannot fail). */
static void user_meta_fill(const reader *r, char **mk, int64_t nu, sg_checkpoint_meta *meta_out)
{
    char **mv = mk + nu;
    char *s = (char *)(mk + 2 * nu + 1);
    int64_t j = 0;
    for (int64_t i = 0; i < r->nm; i++) {
        if (!strncmp(r->m[i].key, "sgrad.", 6)) continue;
        size_t lk = strlen(r->m[i].key) + 1, lv = strlen(r->m[i].value) + 1;
        memcpy(s, r->m[i].key, lk);
        mk[j] = s;
        s += lk;
        memcpy(s, r->m[i].value, lv);
        mv[j++] = s;
        s += lv;
    }
    *meta_out = (sg_checkpoint_meta){nu, (const char *const *)mk, (const char *const *)mv};
}

static int restore(sg_ctx *ctx, reader *r, const unsigned char *data, uint64_t data_len,
                   sg_tensor *const *params, int64_t n_params, const char *const *names,
                   sg_optim *optim, sg_checkpoint_meta *meta_out)
{
    uint64_t rng[4];
    int rc = verify(ctx, r, data, data_len, rng);
    if (rc) return rc;
    int64_t steps = 0;
    double lr = 0;
    sg_lr_schedule sched;
    rc = optim ? check_optim_meta(ctx, r, optim, &steps, &lr, &sched) : SG_OK;
    if (rc) return rc;
    entries es;
    rc = plan_entries(ctx, params, n_params, names, optim, &es);
    if (rc) return rc;
    ftensor **src = sg__calloc(ctx, (size_t)(es.n ? es.n : 1), sizeof *src);
    lazy_restore *lz = sg__calloc(ctx, (size_t)(n_params ? n_params : 1), sizeof *lz);
    int64_t nlz = 0;
    char **mk = NULL;
    if (!src || !lz) rc = SG_ERR_NOMEM;
    for (int64_t i = 0; i < es.n && !rc; i++) {
        const entry *e = &es.e[i];
        bool from_file = e->src >= SRC_LAG_ROWS; /* sizes the file decides */
        rc = match(ctx, r, e, from_file, &src[i]);
    }
    /* anything left over is an error, except optimizer state when optim is NULL */
    for (int64_t i = 0; i < r->nt && !rc; i++)
        if (!r->t[i].used && (optim || strncmp(r->t[i].name, "optim/", 6)))
            rc = sg__failc(ctx, SG_ERR_STATE, "checkpoint tensor \"%s\" is not among the names given",
                           r->t[i].name);
    /* optimizer state ranges */
    for (int64_t i = 0; i < es.n && !rc; i++) {
        const entry *e = &es.e[i];
        const ftensor *f = src[i];
        const unsigned char *d = data + f->begin;
        sg__pstate *ps = e->ps;
        if (e->src == SRC_STATE) {
            const char *sn = ps->state_name[e->state];
            int64_t n = entry_numel(e);
            if (!strcmp(sn, "step") && (rd_i64(d, 0) < 0 || rd_i64(d, 0) > steps))
                rc = sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: %s beyond the optimizer's steps", e->name);
            if (!strcmp(sn, "last_step") || !strcmp(sn, "row_step")) {
                int64_t s = 0;
                for (int k = 0; k < ps->n_state; k++)
                    if (!strcmp(ps->state_name[k], "step")) {
                        const ftensor *fs = find_tensor(r, es.e[i - e->state + k].name);
                        s = fs ? rd_i64(data + fs->begin, 0) : 0;
                    }
                for (int64_t k = 0; k < n && !rc; k++)
                    if (rd_i64(d, k) < 0 || rd_i64(d, k) > s)
                        rc = sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: %s[%lld] outside [0, step]", e->name,
                                       (long long)k);
            }
        } else if (e->src == SRC_LAG_ROWS) {
            lazy_restore *l = &lz[nlz++];
            const ftensor *fp = src[i + 1], *fm = e->ps->opt->o.sgd.momentum != 0 ? src[i + 2] : NULL;
            const ftensor *fr = src[i + (fm ? 3 : 2)], *fl = src[i + (fm ? 4 : 3)];
            l->ps = ps;
            l->lag = f->shape[0];
            l->lag_rows = d;
            l->lag_param = data + fp->begin;
            l->lag_mom = fm ? data + fm->begin : NULL;
            l->n_runs = fr->shape[0];
            if (fp->shape[0] != l->lag || (fm && fm->shape[0] != l->lag) || fl->shape[0] != l->n_runs ||
                l->lag > ps->rows)
                rc = sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: the lazy state of %s disagrees in size", e->name);
            for (int64_t k = 0; k < l->lag && !rc; k++) {
                int64_t row = rd_i64(d, k);
                if (row < 0 || row >= ps->rows || (k && row <= rd_i64(d, k - 1)))
                    rc = sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: %s not ascending rows in range", e->name);
            }
            const unsigned char *rs = data + fr->begin, *rl = data + fl->begin;
            for (int64_t k = 0; k < l->n_runs && !rc; k++) {
                double v = rd_f64(rl, k);
                if (rd_i64(rs, k) < 1 || (k && rd_i64(rs, k) <= rd_i64(rs, k - 1)) || !isfinite(v) || v < 0)
                    rc = sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad learning-rate runs in %s", e->name);
            }
            if (!rc && l->n_runs) {
                l->runs = sg__malloc(ctx, (size_t)l->n_runs * sizeof *l->runs);
                if (!l->runs) rc = SG_ERR_NOMEM;
                for (int64_t k = 0; k < l->n_runs && !rc; k++)
                    l->runs[k] = (sg__lr_run){rd_i64(rs, k), rd_f64(rl, k)};
            }
        }
    }
    int64_t nu = 0;
    if (!rc && meta_out) {
        mk = user_meta_alloc(ctx, r, &nu);
        if (!mk) rc = SG_ERR_NOMEM;
    }
    if (rc) {
        for (int64_t i = 0; i < nlz; i++) sg__free(ctx, lz[i].runs);
        sg__free(ctx, lz);
        sg__free(ctx, src);
        entries_free(ctx, &es);
        return rc == SG_ERR_NOMEM ? sg__failc(ctx, rc, "checkpoint: out of memory") : rc;
    }

    /* ---- commit: nothing below fails */
    for (int64_t i = 0; i < es.n; i++) {
        const entry *e = &es.e[i];
        if (e->src == SRC_PARAM || e->src == SRC_STATE)
            memcpy(e->t->data, data + src[i]->begin, (size_t)(src[i]->end - src[i]->begin));
    }
    for (int64_t i = 0; i < nlz; i++) {
        lazy_restore *l = &lz[i];
        sg__pstate *ps = l->ps;
        size_t rowbytes = (size_t)ps->width * sg_dtype_size(ps->param->dtype);
        for (int64_t k = 0; k < l->lag; k++) {
            int64_t row = rd_i64(l->lag_rows, k);
            memcpy((char *)ps->param->data + (size_t)row * rowbytes, l->lag_param + (size_t)k * rowbytes, rowbytes);
            if (l->lag_mom)
                memcpy((char *)ps->state[1]->data + (size_t)row * rowbytes, l->lag_mom + (size_t)k * rowbytes,
                       rowbytes);
        }
        sg__free(ctx, ps->runs);
        ps->runs = l->runs;
        ps->n_runs = ps->cap_runs = l->n_runs;
        ps->lagging = l->lag > 0;
    }
    if (optim) {
        optim->t = steps;
        optim->lr = lr;
        optim->sched = sched;
    }
    memcpy(ctx->rng, rng, sizeof rng);
    if (meta_out) user_meta_fill(r, mk, nu, meta_out);
    sg__free(ctx, lz);
    sg__free(ctx, src);
    entries_free(ctx, &es);
    return SG_OK;
}

/* Reads path and parses its header into r (whose buffers the caller frees with
 * reader_free); *buf holds the file. */
static int open_file(sg_ctx *ctx, const char *path, reader *r, unsigned char **buf, uint64_t *size)
{
    *r = (reader){.ctx = ctx, .rc = SG_OK};
    *buf = NULL;
    int rc = slurp(ctx, path, buf, size);
    if (rc) return rc;
    r->file = *buf;
    r->file_size = *size;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)(*buf)[i] << (8 * i);
    if (hlen > *size - 8 || hlen > MAX_HEADER || hlen < 2)
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint %s: header of %llu bytes in a file of %llu", path,
                         (unsigned long long)hlen, (unsigned long long)*size);
    r->start = r->p = (const char *)*buf + 8;
    r->end = r->p + hlen;
    r->strings = sg__malloc(ctx, (size_t)hlen);
    return r->strings ? read_header(r) : SG_ERR_NOMEM;
}

static void reader_free(reader *r, unsigned char *buf)
{
    sg__free(r->ctx, r->strings);
    sg__free(r->ctx, r->t);
    sg__free(r->ctx, r->m);
    sg__free(r->ctx, buf);
}

/* The data section of a file (size bytes in buf) whose header open_file parsed. */
static const unsigned char *data_of(const unsigned char *buf, uint64_t size, uint64_t *data_len)
{
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)buf[i] << (8 * i);
    *data_len = size - 8 - hlen;
    return buf + 8 + hlen;
}

int sg_checkpoint_load(sg_ctx *ctx, const char *path, sg_tensor *const *params, int64_t n_params,
                       const char *const *names, sg_optim *optim, sg_checkpoint_meta *meta_out)
{
    if (!ctx) return SG_ERR_NULL;
    int rc = check_args(ctx, path, params, n_params, names, optim);
    if (rc) return rc;
    reader r;
    unsigned char *buf;
    uint64_t size = 0, data_len = 0;
    rc = open_file(ctx, path, &r, &buf, &size);
    if (!rc) {
        const unsigned char *data = data_of(buf, size, &data_len);
        rc = restore(ctx, &r, data, data_len, params, n_params, names, optim, meta_out);
    }
    reader_free(&r, buf);
    return rc;
}

int sg_checkpoint_read_meta(sg_ctx *ctx, const char *path, sg_checkpoint_meta *meta_out)
{
    if (!ctx) return SG_ERR_NULL;
    if (!path || !meta_out) return sg__failc(ctx, SG_ERR_NULL, "checkpoint: NULL path or metadata");
    if (!host_little_endian())
        return sg__failc(ctx, SG_ERR_STATE, "checkpoint: big-endian hosts are not supported");
    reader r;
    unsigned char *buf;
    uint64_t size = 0, data_len = 0, rng[4];
    int rc = open_file(ctx, path, &r, &buf, &size);
    if (!rc) {
        const unsigned char *data = data_of(buf, size, &data_len);
        rc = verify(ctx, &r, data, data_len, rng);
    }
    if (!rc) {
        int64_t nu = 0;
        char **mk = user_meta_alloc(ctx, &r, &nu);
        if (mk) user_meta_fill(&r, mk, nu, meta_out);
        else rc = sg__failc(ctx, SG_ERR_NOMEM, "checkpoint: out of memory");
    }
    reader_free(&r, buf);
    return rc;
}

const char *sg_checkpoint_meta_get(const sg_checkpoint_meta *meta, const char *key)
{
    if (!meta || !key) return NULL;
    for (int64_t i = 0; i < meta->n; i++)
        if (!strcmp(meta->keys[i], key)) return meta->values[i];
    return NULL;
}

void sg_checkpoint_meta_free(sg_ctx *ctx, sg_checkpoint_meta *meta)
{
    if (!meta) return;
    if (ctx) sg__free(ctx, (void *)meta->keys);
    *meta = (sg_checkpoint_meta){0, NULL, NULL};
}
