/* Model files and checkpoints of sgrad-kge: one safetensors file each (sg_checkpoint_save)
 * holding "entities" (E, dim) and "relations" (R', rdim) f32 and string metadata under
 * "kge.": the format, the options that decide the model's bits (kge.model, kge.dim,
 * kge.reciprocal, kge.margin, kge.opt.*), the training rows (kge.entities_train,
 * kge.relations_train) and the names in row order joined by newlines (kge.entity_names,
 * kge.relation_names; a name holds no newline). A checkpoint adds the optimizer's state
 * (sgrad's "optim/..." tensors), the run's position (kge.pos.*) and the FNV-1a hash of the
 * data (kge.data.fnv1a64, kge_data_hash): a resume is refused unless every option and the
 * data match, since anything else would not continue the same run. Numbers are written
 * with %.17g or as integers, which read back exactly.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define KGE_MODEL_FORMAT "sgrad-kge model 1"
#define KGE_CKPT_FORMAT "sgrad-kge checkpoint 1"
#define MAX_KEYS 40
#define VALUE_LEN 48

typedef struct {
    int n;
    const char *keys[MAX_KEYS];
    const char *values[MAX_KEYS]; /* into text, or a string owned elsewhere (names) */
    char text[MAX_KEYS][VALUE_LEN];
} meta_list;

static void put(meta_list *l, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(meta_list *l, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->text[l->n], VALUE_LEN, fmt, ap);
    va_end(ap);
    l->keys[l->n] = key;
    l->values[l->n] = l->text[l->n];
    l->n++;
}

uint64_t kge_data_hash(const sg_kge *m)
{
    uint64_t h = TC_FNV_OFFSET;
    const kg_dict *d[2] = {&m->ents, &m->rels};
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < kge_dict_size(d[k]); i++) {
            const char *s = kge_dict_name(d[k], i);
            h = tc_fnv1a(tc_fnv1a(h, s, strlen(s)), "\n", 1);
        }
        h = tc_fnv1a(h, "", 1);
    }
    for (int64_t i = 0; i < m->train.n; i++) {
        const int64_t x[3] = {m->train.h[i], m->train.r[i], m->train.t[i]};
        h = tc_fnv1a(h, x, sizeof x);
    }
    return h;
}

/* The options that decide a model's bits; the first entry is the format. */
static void identity(meta_list *l, const char *format, const sg_kge *m)
{
    const sg_kge_opts *o = &m->o;
    put(l, "kge.format", "%s", format);
    put(l, "kge.model", "%s", sg_kge_model_name(o->model));
    put(l, "kge.dim", "%d", o->dim);
    put(l, "kge.reciprocal", "%d", o->reciprocal);
    put(l, "kge.margin", "%.17g", o->margin);
    put(l, "kge.entities_train", "%" PRId64, m->ent_train);
    put(l, "kge.relations_train", "%" PRId64, m->rel_train);
    put(l, "kge.opt.epochs", "%d", o->epochs);
    put(l, "kge.opt.batch", "%" PRId64, o->batch);
    put(l, "kge.opt.chunk", "%" PRId64, o->chunk);
    put(l, "kge.opt.negs", "%" PRId64, o->negs);
    put(l, "kge.opt.chunk-negs", "%d", o->chunk_negs);
    put(l, "kge.opt.loss", "%s", sg_kge_loss_name(o->loss));
    put(l, "kge.opt.adv-temp", "%.17g", o->adv_temp);
    put(l, "kge.opt.reg", "%s", sg_kge_reg_name(o->reg));
    put(l, "kge.opt.reg-coef", "%.17g", o->reg_coef);
    put(l, "kge.opt.optim", "%s", sg_kge_optim_name(o->optim));
    put(l, "kge.opt.lr", "%.17g", o->lr);
    put(l, "kge.opt.init-scale", "%.17g", o->init_scale);
    put(l, "kge.opt.seed", "%" PRIu64, o->seed);
}

/* d's names joined by newlines (malloc'd), NULL when out of memory. */
static char *joined(const kg_dict *d)
{
    size_t len = 1;
    for (int64_t i = 0; i < kge_dict_size(d); i++) len += strlen(kge_dict_name(d, i)) + 1;
    char *s = malloc(len), *p = s;
    for (int64_t i = 0; s && i < kge_dict_size(d); i++) {
        const size_t n = strlen(kge_dict_name(d, i));
        memcpy(p, kge_dict_name(d, i), n);
        p += n;
        if (i + 1 < kge_dict_size(d)) *p++ = '\n';
    }
    if (s) *p = '\0';
    return s;
}

/* Saves m's tables (and opt) with l's metadata plus the names to path. 0, or -1. */
static int save_file(const sg_kge *m, const char *path, const char *what, meta_list *l, sg_optim *opt,
                     sg_model_error *e)
{
    char *en = joined(&m->ents), *rn = joined(&m->rels);
    l->keys[l->n] = "kge.entity_names", l->values[l->n++] = en;
    l->keys[l->n] = "kge.relation_names", l->values[l->n++] = rn;
    /* a rank's checkpoint holds the replicated relation table alone (the shards have
     * their own files) */
    const bool ranked = m->dist && m->dist->ranks > 1 && opt;
    sg_tensor *t[2] = {ranked ? m->tb.R : m->tb.E, m->tb.R};
    const char *names[2] = {ranked ? "relations" : "entities", "relations"};
    const sg_checkpoint_meta meta = {l->n, l->keys, l->values};
    int rc = en && rn ? sg_checkpoint_save(m->tb.ctx, path, t, ranked ? 1 : 2, names, opt, &meta) : SG_ERR_NOMEM;
    free(en);
    free(rn);
    if (rc == SG_ERR_NOMEM && !sg_ctx_status(m->tb.ctx))
        return tc_fail(e, SG_ERR_NOMEM, "cannot write %s %s: out of memory", what, path);
    if (rc)
        return tc_fail(e, sg_ctx_status(m->tb.ctx), "cannot write %s %s: %s (any previous %s is unchanged)", what,
                       path, sg_ctx_message(m->tb.ctx), path);
    return 0;
}

int kge_model_save(const sg_kge *m, const char *path, sg_model_error *e)
{
    meta_list l = {0};
    identity(&l, KGE_MODEL_FORMAT, m);
    return save_file(m, path, "model", &l, NULL, e);
}

int kge_checkpoint_save(const sg_kge *m, sg_optim *opt, const kge_position *p, sg_model_error *e)
{
    meta_list l = {0};
    identity(&l, KGE_CKPT_FORMAT, m);
    put(&l, "kge.data.fnv1a64", "%016" PRIx64, kge_data_hash(m));
    put(&l, "kge.pos.epoch", "%d", p->epoch);
    put(&l, "kge.pos.batch", "%" PRId64, p->batch);
    put(&l, "kge.pos.steps", "%" PRId64, p->steps);
    put(&l, "kge.pos.epoch_loss", "%.17g", p->epoch_loss);
    put(&l, "kge.pos.epoch_queries", "%" PRId64, p->epoch_queries);
    if (m->dist && m->dist->ranks > 1) put(&l, "kge.ranks", "%d", m->dist->ranks);
    return save_file(m, m->o.checkpoint, "checkpoint", &l, opt, e);
}

static bool get_i64(const sg_checkpoint_meta *meta, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = sg_checkpoint_meta_get(meta, key);
    char *end;
    errno = 0;
    const long long x = s && *s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || errno || *end || x < lo || x > hi) return false;
    *out = x;
    return true;
}

/* An unsigned decimal (no sign: strtoull would wrap "-1"), all 64 bits. */
static bool get_u64(const sg_checkpoint_meta *meta, const char *key, uint64_t *out)
{
    const char *s = sg_checkpoint_meta_get(meta, key);
    char *end;
    errno = 0;
    const unsigned long long x = s && *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
    if (!s || *s < '0' || *s > '9' || errno || *end) return false;
    *out = x;
    return true;
}

static bool get_f64(const sg_checkpoint_meta *meta, const char *key, double *out)
{
    const char *s = sg_checkpoint_meta_get(meta, key);
    char *end;
    errno = 0;
    const double x = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || errno || *end) return false;
    *out = x;
    return true;
}

/* The first identity key of want that got does not match, said in *e; 0 when all do. */
static int compare_identity(const char *path, const meta_list *want, const sg_checkpoint_meta *got,
                            sg_model_error *e)
{
    for (int i = 0; i < want->n; i++) {
        const char *have = sg_checkpoint_meta_get(got, want->keys[i]);
        if (have && !strcmp(have, want->values[i])) continue;
        const char *k = want->keys[i] + 4;
        if (i == 0)
            return tc_fail(e, SG_ERR_FORMAT, "cannot resume from %s: not a sgrad-kge checkpoint (format %s)", path,
                           have ? have : "missing");
        if (!strncmp(k, "opt.", 4) || !strcmp(k, "model") || !strcmp(k, "dim") || !strcmp(k, "reciprocal") ||
            !strcmp(k, "margin"))
            return tc_fail(e, SG_ERR_STATE, "cannot resume from %s: it was made with -%s %s, this run has -%s %s; "
                                            "resume with the options of the first run",
                           path, k + (k[0] == 'o' && k[1] == 'p' ? 4 : 0), have ? have : "(missing)",
                           k + (k[0] == 'o' && k[1] == 'p' ? 4 : 0), want->values[i]);
        return tc_fail(e, SG_ERR_STATE, "cannot resume from %s: it was made from other data (%s %s, these files "
                                        "give %s)", path, k, have ? have : "(missing)", want->values[i]);
    }
    return 0;
}

/* The rank count of a checkpoint (kge.ranks; absent: 1 process) against this run's: its
 * parts (shards, or one whole table) only fit a run of the same count. 0, or -1. */
static int compare_ranks(const char *path, const sg_checkpoint_meta *got, int ranks, sg_model_error *e)
{
    int64_t made = 1;
    if (sg_checkpoint_meta_get(got, "kge.ranks") && !get_i64(got, "kge.ranks", 2, INT32_MAX, &made))
        return tc_fail(e, SG_ERR_FORMAT, "cannot resume from %s: its kge.ranks is out of range", path);
    if (made == ranks) return 0;
    char was[64] = "one process", is[64] = "one process";
    if (made > 1) snprintf(was, sizeof was, "%d ranks (mpirun -np %d)", (int)made, (int)made);
    if (ranks > 1) snprintf(is, sizeof is, "%d ranks", ranks);
    return tc_fail(e, SG_ERR_STATE, "cannot resume from %s: it was written by %s, this run is %s; resume with the "
                                    "rank count that wrote it", path, was, is);
}

/* The position in meta, each field in its range. */
static bool parse_position(const sg_checkpoint_meta *meta, const sg_kge *m, int64_t steps, kge_position *p)
{
    int64_t epoch;
    const int64_t batches = (m->train.n + m->o.batch - 1) / m->o.batch;
    memset(p, 0, sizeof *p);
    if (!get_i64(meta, "kge.pos.epoch", 0, m->o.epochs, &epoch) ||
        !get_i64(meta, "kge.pos.batch", 0, batches, &p->batch) ||
        !get_i64(meta, "kge.pos.steps", steps, steps, &p->steps) ||
        !get_f64(meta, "kge.pos.epoch_loss", &p->epoch_loss) ||
        !get_i64(meta, "kge.pos.epoch_queries", 0, INT64_MAX, &p->epoch_queries))
        return false;
    p->epoch = (int)epoch;
    return true;
}

int kge_checkpoint_resume(sg_kge *m, sg_optim *opt, kge_position *p, sg_model_error *e)
{
    const char *path = m->o.resume;
    sg_ctx *ctx = m->tb.ctx;
    sg_checkpoint_meta got = {0, NULL, NULL};
    meta_list want = {0};
    identity(&want, KGE_CKPT_FORMAT, m);
    put(&want, "kge.data.fnv1a64", "%016" PRIx64, kge_data_hash(m));
    int rc = sg_checkpoint_read_meta(ctx, path, &got)
                 ? tc_fail(e, sg_ctx_status(ctx), "cannot resume from %s: %s", path, sg_ctx_message(ctx))
                 : compare_identity(path, &want, &got, e);
    if (!rc) rc = compare_ranks(path, &got, m->dist ? m->dist->ranks : 1, e);
    sg_checkpoint_meta_free(ctx, &got);
    const bool ranked = m->dist && m->dist->ranks > 1;
    sg_tensor *t[2] = {ranked ? m->tb.R : m->tb.E, m->tb.R};
    const char *names[2] = {ranked ? "relations" : "entities", "relations"};
    if (!rc && sg_checkpoint_load(ctx, path, t, ranked ? 1 : 2, names, opt, &got))
        rc = tc_fail(e, sg_ctx_status(ctx), "cannot resume from %s: %s", path, sg_ctx_message(ctx));
    else if (!rc && !parse_position(&got, m, sg_optim_steps(opt), p))
        rc = tc_fail(e, SG_ERR_FORMAT, "cannot resume from %s: its position (kge.pos.*) is missing or out of range",
                     path);
    sg_checkpoint_meta_free(ctx, &got);
    return rc;
}

/* ---- loading */

/* The newline-joined names s into the empty dictionary d. 0, or -1 (a duplicate or empty
 * name, no memory). */
static int names_of(const char *s, kg_dict *d)
{
    if (!s || kg_dict_init(d)) return -1;
    while (*s) {
        const size_t n = strcspn(s, "\n");
        if (n == 0 || n >= KG_MAX_NAME || kg_dict_find(d, s, n) >= 0 || kg_dict_add(d, s, n) < 0) return -1;
        s += n + (s[n] == '\n');
    }
    return 0;
}

/* The training options of a file (kge.opt.*) into o where present and valid: they
 * describe the model (sg_kge_options) and go into a file it is saved to again. */
static void training_options(const sg_checkpoint_meta *meta, sg_kge_opts *o)
{
    int64_t x;
    double v;
    if (get_i64(meta, "kge.opt.epochs", 1, 1000000, &x)) o->epochs = (int)x;
    if (get_i64(meta, "kge.opt.batch", 1, 1 << 24, &x)) o->batch = x;
    if (get_i64(meta, "kge.opt.chunk", 1, 1 << 24, &x)) o->chunk = x;
    if (get_i64(meta, "kge.opt.negs", 0, 1 << 20, &x)) o->negs = x;
    if (get_i64(meta, "kge.opt.chunk-negs", 0, 1, &x)) o->chunk_negs = (int)x;
    get_u64(meta, "kge.opt.seed", &o->seed);
    if (get_f64(meta, "kge.opt.adv-temp", &v)) o->adv_temp = v;
    if (get_f64(meta, "kge.opt.reg-coef", &v)) o->reg_coef = v;
    if (get_f64(meta, "kge.opt.lr", &v)) o->lr = v;
    if (get_f64(meta, "kge.opt.init-scale", &v)) o->init_scale = v;
    sg_kge_loss_parse(sg_checkpoint_meta_get(meta, "kge.opt.loss"), &o->loss);
    sg_kge_reg_parse(sg_checkpoint_meta_get(meta, "kge.opt.reg"), &o->reg);
    sg_kge_optim_parse(sg_checkpoint_meta_get(meta, "kge.opt.optim"), &o->optim);
}

/* The options and names of a file's metadata into m. 0, or -1 with the reason. */
static int model_of_meta(sg_kge *m, const char *path, const sg_checkpoint_meta *meta, sg_model_error *e)
{
    const char *format = sg_checkpoint_meta_get(meta, "kge.format");
    if (!format || (strcmp(format, KGE_MODEL_FORMAT) && strcmp(format, KGE_CKPT_FORMAT)))
        return tc_fail(e, SG_ERR_FORMAT, "%s is not a sgrad-kge model or checkpoint (format %s)", path,
                       format ? format : "missing");
    int64_t ranks = 1; /* a ranked checkpoint's file holds the relations alone (the shards hold E) */
    if (sg_checkpoint_meta_get(meta, "kge.ranks") && get_i64(meta, "kge.ranks", 2, INT32_MAX, &ranks))
        return tc_fail(e, SG_ERR_FORMAT, "%s is a checkpoint of a %d-rank run: resume it with mpirun -np %d, or use "
                                         "the -output model", path, (int)ranks, (int)ranks);
    sg_kge_opts *o = &m->o;
    int64_t dim, recip, et, rt;
    if (sg_kge_model_parse(sg_checkpoint_meta_get(meta, "kge.model"), &o->model) ||
        !get_i64(meta, "kge.dim", 1, 1 << 16, &dim) || !get_i64(meta, "kge.reciprocal", 0, 1, &recip) ||
        !get_f64(meta, "kge.margin", &o->margin) || !get_i64(meta, "kge.entities_train", 0, INT64_MAX, &et) ||
        !get_i64(meta, "kge.relations_train", 0, INT64_MAX, &rt) ||
        (kge_is_complex(o->model) && dim % 2) || names_of(sg_checkpoint_meta_get(meta, "kge.entity_names"), &m->ents) ||
        names_of(sg_checkpoint_meta_get(meta, "kge.relation_names"), &m->rels) || et > m->ents.n || rt > m->rels.n)
        return tc_fail(e, SG_ERR_FORMAT, "%s: damaged model (its kge.* metadata is missing or out of range)", path);
    training_options(meta, o);
    o->dim = (int)dim;
    o->reciprocal = (int)recip;
    m->ent_train = et;
    m->rel_train = rt;
    return 0;
}

int kge_model_load(sg_kge *m, const char *path, int threads, sg_model_error *e)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    if (!ctx) return tc_fail(e, SG_ERR_NOMEM, "out of memory");
    sg_checkpoint_meta meta = {0, NULL, NULL};
    int rc = 0;
    if (sg_checkpoint_read_meta(ctx, path, &meta))
        rc = sg_ctx_status(ctx) == SG_ERR_IO ? tc_fail(e, SG_ERR_IO, "%s", sg_ctx_message(ctx))
                                             : tc_fail(e, sg_ctx_status(ctx), "cannot load %s: %s", path,
                                                       sg_ctx_message(ctx));
    else
        rc = model_of_meta(m, path, &meta, e);
    sg_checkpoint_meta_free(ctx, &meta);
    sg_ctx_free(ctx);
    if (rc || kge_tables_alloc(&m->tb, &m->o, m->ents.n, m->rels.n, threads, e)) return -1;
    sg_tensor *t[2] = {m->tb.E, m->tb.R};
    const char *names[2] = {"entities", "relations"};
    if (sg_checkpoint_load(m->tb.ctx, path, t, 2, names, NULL, NULL))
        return tc_fail(e, sg_ctx_status(m->tb.ctx), "cannot load %s: %s", path, sg_ctx_message(m->tb.ctx));
    return 0;
}
