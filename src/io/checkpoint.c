/* Checkpoints (include/sgrad.h, "io: checkpoints"): save, load and its commit. Parameters,
 * optimizer state and the context's generator go into a safetensors file (io/safetensors.h)
 * through the atomic writer (io.h). What a parameter's optimizer state is in the file (its
 * entries, their bytes, the optimizer's metadata, the checks of a load) is the optimizer's
 * to say (optim/state_io.h); this file only names, places, matches and copies.
 *
 * Invariants:
 * - The set of tensor names a checkpoint holds follows from the names given and, through
 *   the optimizer, from its kind, options and parameters (plan_entries), for save and load
 *   alike; a load matches the file against that set exactly.
 * - Loading reads the whole file into one buffer (its size bounds every allocation),
 *   validates everything, allocates what the commit needs, and only then writes (commit
 *   cannot fail).
 * - The save builds the header with a checksum of zero digits, hashes it and then the data
 *   by a first pass of the emitter that the write pass runs again, and patches the digits
 *   in (safetensors.h says what the checksum covers).
 */
#define _POSIX_C_SOURCE 200809L
#include "io/safetensors.h"

#include <stdio.h>
#include <stdlib.h>

static bool host_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* ---- the entries of a checkpoint */

typedef struct {
    char *name;       /* sg__malloc'd */
    sg_tensor *param; /* the tensor given, or the parameter whose state this is */
    int opt_entry;    /* -1: param's own values; else its optimizer entry (state_io.h) */
    int n_opt;        /* for opt_entry -1: how many optimizer entries of param follow */
    sg__ckpt_entry e; /* dtype, shape, size_from_file (name: the optimizer's, unused) */
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

/* a, b, c, d concatenated (NULLs skipped), sg__malloc'd. */
static char *join(sg_ctx *ctx, const char *a, const char *b, const char *c, const char *d)
{
    const char *part[4] = {a, b, c, d};
    size_t len = 0;
    for (int i = 0; i < 4; i++) len += part[i] ? strlen(part[i]) : 0;
    char *s = sg__malloc(ctx, len + 1);
    if (!s) return NULL;
    size_t at = 0;
    for (int i = 0; i < 4; i++)
        if (part[i]) {
            size_t k = strlen(part[i]);
            memcpy(s + at, part[i], k);
            at += k;
        }
    s[at] = '\0';
    return s;
}

static int add_entry(sg_ctx *ctx, entries *es, entry e)
{
    entry *g = e.name ? sg__grow(ctx, es->e, &es->cap, es->n, sizeof *g, 16) : NULL;
    if (!g) {
        sg__free(ctx, e.name);
        return SG_ERR_NOMEM;
    }
    es->e = g;
    es->e[es->n++] = e;
    return SG_OK;
}

/* params[i] under its name, then (with optim) its optimizer state's entries. */
static int plan_param(sg_ctx *ctx, sg_tensor *p, const char *name, sg_optim *optim, entries *es)
{
    sg__ckpt_entry oe[SG__CKPT_MAX_ENTRIES];
    const int k = optim ? sg__optim_ckpt_entries(optim, p, oe) : 0;
    entry pe = {join(ctx, name, NULL, NULL, NULL), p, -1, k, {NULL, p->dtype, p->ndim, {0}, false}};
    memcpy(pe.e.shape, p->shape, sizeof pe.e.shape);
    int rc = add_entry(ctx, es, pe);
    for (int s = 0; s < k && !rc; s++)
        rc = add_entry(ctx, es, (entry){join(ctx, "optim/", name, "/", oe[s].name), p, s, 0, oe[s]});
    return rc;
}

/* The entries for params and optim's state, in file order. */
static int plan_entries(sg_ctx *ctx, sg_tensor *const *params, int64_t n, const char *const *names,
                        sg_optim *optim, entries *es)
{
    *es = (entries){NULL, 0, 0};
    for (int64_t i = 0; i < n; i++)
        if (plan_param(ctx, params[i], names[i], optim, es)) {
            entries_free(ctx, es);
            return sg__failc(ctx, SG_ERR_NOMEM, "checkpoint: out of memory");
        }
    return SG_OK;
}

/* ---- the data section: one emitter for the checksum pass (o NULL) and the write pass */

typedef struct {
    sg__out *o; /* NULL: hash only */
    uint64_t h;
} sink;

static int put(void *sk, const void *p, size_t n)
{
    sink *k = sk;
    if (!k->o) {
        k->h = sg__fnv1a(k->h, p, n);
        return SG_OK;
    }
    return sg__out_write(k->o, p, n);
}

/* Writes entry e's bytes: a tensor's own, or through the optimizer for its parameters. */
static int emit(const sg_optim *optim, const entry *e, sink *k, void *scratch)
{
    if (e->opt_entry >= 0 || e->n_opt > 0)
        return sg__optim_ckpt_write(optim, e->param, e->opt_entry, put, k, scratch);
    return put(k, e->param->data, (size_t)sg__numel(e->e.ndim, e->e.shape) * sg_dtype_size(e->e.dtype));
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
    return optim ? sg__optim_ckpt_check(ctx, optim, params, n, names) : SG_OK;
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

/* The header with the checksum's 16 hex digits "0" (w, freed by the caller). */
static int header(sg__st_writer *w, const entries *es, sg_ctx *ctx, const sg_optim *optim,
                  const sg_checkpoint_meta *meta)
{
    char rng[80];
    sg__st_begin(w, ctx);
    snprintf(rng, sizeof rng, "%016llx%016llx%016llx%016llx", (unsigned long long)ctx->rng[0],
             (unsigned long long)ctx->rng[1], (unsigned long long)ctx->rng[2],
             (unsigned long long)ctx->rng[3]);
    sg__st_meta(w, "sgrad.rng", rng);
    if (optim) {
        sg__ckpt_kv kv[SG__CKPT_MAX_META];
        const int n = sg__optim_ckpt_meta(optim, kv);
        for (int i = 0; i < n; i++) sg__st_meta(w, kv[i].key, kv[i].value);
    }
    for (int64_t i = 0; meta && i < meta->n; i++) sg__st_meta(w, meta->keys[i], meta->values[i]);
    for (int64_t i = 0; i < es->n; i++)
        sg__st_tensor(w, es->e[i].name, es->e[i].e.dtype, es->e[i].e.ndim, es->e[i].e.shape);
    return sg__st_end(w);
}

/* Scratch for the optimizer's writer: the most any parameter needs (and a little). */
static void *scratch_alloc(sg_ctx *ctx, const entries *es, const sg_optim *optim)
{
    size_t most = 0;
    for (int64_t i = 0; optim && i < es->n; i++)
        if (es->e[i].n_opt > 0) {
            size_t b = sg__optim_ckpt_scratch(optim, es->e[i].param);
            if (b > most) most = b;
        }
    return sg__malloc(ctx, most + 16);
}

/* Patches the checksum into w: of the length, the header (zero digits) and the data. */
static int checksum(sg__st_writer *w, const entries *es, const sg_optim *optim, void *scratch)
{
    unsigned char len[8];
    sg__st_le64(len, w->n);
    sink hash = {NULL, sg__fnv1a(sg__fnv1a(SG__FNV_OFFSET, len, 8), w->s, w->n)};
    int rc = SG_OK;
    for (int64_t i = 0; i < es->n && !rc; i++) rc = emit(optim, &es->e[i], &hash, scratch);
    if (!rc) sg__st_set_checksum(w, hash.h);
    return rc;
}

static int write_file(sg_ctx *ctx, const char *path, const sg__st_writer *w, const entries *es,
                      const sg_optim *optim, void *scratch)
{
    sg__out o;
    int rc = sg__out_open(ctx, path, &o);
    if (rc) return rc;
    unsigned char len[8];
    sg__st_le64(len, w->n);
    sink out = {&o, 0};
    rc = sg__out_write(&o, len, 8);
    if (!rc) rc = sg__out_write(&o, w->s, w->n);
    for (int64_t i = 0; i < es->n && !rc; i++) rc = emit(optim, &es->e[i], &out, scratch);
    if (rc) {
        sg__out_abort(&o);
        return rc;
    }
    return sg__out_commit(&o);
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
    void *scratch = scratch_alloc(ctx, &es, optim);
    sg__st_writer w = {ctx, NULL, 0, 0, false, true, true, 0, 0};
    rc = scratch ? header(&w, &es, ctx, optim, meta)
                 : sg__failc(ctx, SG_ERR_NOMEM, "checkpoint: out of memory");
    if (!rc) rc = checksum(&w, &es, optim, scratch);
    if (!rc) rc = write_file(ctx, path, &w, &es, optim, scratch);
    sg__st_writer_free(&w);
    sg__free(ctx, scratch);
    entries_free(ctx, &es);
    return rc;
}

/* ---- load */

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

/* Checks what every load needs, whatever it restores: the file's layout and checksum
 * (sg__st_verify), the RNG state (into rng), no name twice. Leaves f's tensors sorted by
 * name. */
static int verify(sg_ctx *ctx, sg__st_file *f, uint64_t rng[4])
{
    int rc = sg__st_verify(f);
    if (rc) return rc;
    if (parse_rng(sg__st_meta_get(f, "sgrad.rng"), rng))
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint: bad sgrad.rng");
    return sg__st_sort_names(f);
}

/* The user metadata (keys not starting "sgrad.") as one sg__malloc'd block: n pointers to
 * keys, n to values, a NULL, then the strings. NULL on out of memory. */
static char **user_meta_alloc(sg_ctx *ctx, const sg__st_file *r, int64_t *n_out)
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
static void user_meta_fill(const sg__st_file *r, char **mk, int64_t nu, sg_checkpoint_meta *meta_out)
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

/* The file's tensor for entry e: present, same dtype and shape (the first dimension the
 * file's when e says so). */
static int match(sg_ctx *ctx, sg__st_file *f, const entry *e, sg__st_tensor_info **out)
{
    sg__st_tensor_info *t = sg__st_find(f, e->name);
    if (!t) return sg__failc(ctx, SG_ERR_STATE, "checkpoint has no tensor \"%s\"", e->name);
    if (t->dtype != e->e.dtype)
        return sg__failc(ctx, SG_ERR_DTYPE, "checkpoint tensor \"%s\" is %s, not %s", e->name,
                         sg__st_dtype_name(t->dtype), sg__st_dtype_name(e->e.dtype));
    bool same = t->ndim == e->e.ndim;
    for (int d = 0; same && d < e->e.ndim; d++)
        same = t->shape[d] == e->e.shape[d] || (d == 0 && e->e.size_from_file);
    if (!same) return sg__failc(ctx, SG_ERR_SHAPE, "checkpoint tensor \"%s\" has another shape", e->name);
    t->used = true;
    *out = t;
    return SG_OK;
}

/* Every entry matched into src; then nothing left over, except optimizer state when optim
 * is NULL. */
static int match_all(sg_ctx *ctx, sg__st_file *f, const entries *es, const sg_optim *optim,
                     sg__st_tensor_info **src)
{
    int rc = SG_OK;
    for (int64_t i = 0; i < es->n && !rc; i++) rc = match(ctx, f, &es->e[i], &src[i]);
    for (int64_t i = 0; i < f->nt && !rc; i++)
        if (!f->t[i].used && (optim || strncmp(f->t[i].name, "optim/", 6)))
            rc = sg__failc(ctx, SG_ERR_STATE, "checkpoint tensor \"%s\" is not among the names given",
                           f->t[i].name);
    return rc;
}

static const char *lookup(const void *f, const char *key) { return sg__st_meta_get(f, key); }

/* Hands each parameter's optimizer entries, as the file has them, to the optimizer's
 * checks (which prepare what its commit installs). */
static int prepare_optim(sg__ckpt_load *ol, const sg__st_file *f, const entries *es,
                         sg__st_tensor_info *const *src)
{
    int rc = SG_OK;
    for (int64_t i = 0; i < es->n && !rc; i++) {
        const entry *e = &es->e[i];
        if (e->opt_entry >= 0 || e->n_opt == 0) continue;
        sg__ckpt_bytes in[SG__CKPT_MAX_ENTRIES];
        for (int s = 0; s < e->n_opt; s++) {
            const sg__st_tensor_info *t = src[i + 1 + s];
            in[s] = (sg__ckpt_bytes){f->data + t->begin, t->ndim ? t->shape[0] : 1, es->e[i + 1 + s].name};
        }
        rc = sg__optim_ckpt_load_param(ol, e->param, in);
    }
    return rc;
}

/* Writes everything: the tensors' values, then the optimizer's state over them, the
 * generator, the user metadata. Cannot fail. */
static void commit(sg_ctx *ctx, const sg__st_file *f, const entries *es, sg__st_tensor_info *const *src,
                   sg__ckpt_load *ol, const uint64_t rng[4], char **mk, int64_t nu,
                   sg_checkpoint_meta *meta_out)
{
    for (int64_t i = 0; i < es->n; i++)
        if (es->e[i].opt_entry < 0)
            memcpy(es->e[i].param->data, f->data + src[i]->begin, (size_t)(src[i]->end - src[i]->begin));
    if (ol) sg__optim_ckpt_load_commit(ol);
    memcpy(ctx->rng, rng, 4 * sizeof *rng);
    if (meta_out) user_meta_fill(f, mk, nu, meta_out);
}

static int restore(sg_ctx *ctx, sg__st_file *f, sg_tensor *const *params, int64_t n_params,
                   const char *const *names, sg_optim *optim, sg_checkpoint_meta *meta_out)
{
    uint64_t rng[4];
    int rc = verify(ctx, f, rng);
    sg__ckpt_load *ol = NULL;
    if (!rc && optim) rc = sg__optim_ckpt_load_begin(optim, lookup, f, &ol);
    if (rc) return rc;
    entries es;
    rc = plan_entries(ctx, params, n_params, names, optim, &es);
    if (rc) {
        sg__optim_ckpt_load_abort(ol);
        return rc;
    }
    sg__st_tensor_info **src = sg__calloc(ctx, (size_t)(es.n ? es.n : 1), sizeof *src);
    char **mk = NULL;
    int64_t nu = 0;
    rc = src ? match_all(ctx, f, &es, optim, src) : SG_ERR_NOMEM;
    if (!rc && ol) rc = prepare_optim(ol, f, &es, src);
    if (!rc && meta_out && !(mk = user_meta_alloc(ctx, f, &nu))) rc = SG_ERR_NOMEM;
    if (!rc) commit(ctx, f, &es, src, ol, rng, mk, nu, meta_out);
    else sg__optim_ckpt_load_abort(ol);
    sg__free(ctx, src);
    entries_free(ctx, &es);
    return rc == SG_ERR_NOMEM ? sg__failc(ctx, rc, "checkpoint: out of memory") : rc;
}

int sg_checkpoint_load(sg_ctx *ctx, const char *path, sg_tensor *const *params, int64_t n_params,
                       const char *const *names, sg_optim *optim, sg_checkpoint_meta *meta_out)
{
    if (!ctx) return SG_ERR_NULL;
    int rc = check_args(ctx, path, params, n_params, names, optim);
    if (rc) return rc;
    sg__st_file f;
    rc = sg__st_open(ctx, path, &f);
    if (!rc) rc = restore(ctx, &f, params, n_params, names, optim, meta_out);
    sg__st_close(&f);
    return rc;
}

int sg_checkpoint_read_meta(sg_ctx *ctx, const char *path, sg_checkpoint_meta *meta_out)
{
    if (!ctx) return SG_ERR_NULL;
    if (!path || !meta_out) return sg__failc(ctx, SG_ERR_NULL, "checkpoint: NULL path or metadata");
    if (!host_little_endian())
        return sg__failc(ctx, SG_ERR_STATE, "checkpoint: big-endian hosts are not supported");
    sg__st_file f;
    uint64_t rng[4];
    int rc = sg__st_open(ctx, path, &f);
    if (!rc) rc = verify(ctx, &f, rng);
    if (!rc) {
        int64_t nu = 0;
        char **mk = user_meta_alloc(ctx, &f, &nu);
        if (mk) user_meta_fill(&f, mk, nu, meta_out);
        else rc = sg__failc(ctx, SG_ERR_NOMEM, "checkpoint: out of memory");
    }
    sg__st_close(&f);
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
