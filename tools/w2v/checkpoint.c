/* Checkpoints of sgrad-w2v: one safetensors file (sg_checkpoint_save) per save, holding
 * the tables ("W_in"; "W_out" with -negative > 0, "W_hs" with -hs 1), the SGD optimizer's
 * state, the current sentence
 * ("trainer/sentence", int32, W2V_MAX_SENTENCE entries of which w2v.sentence_len count)
 * and string metadata under "w2v.": the format, the training flags that decide the result,
 * the corpus's size and FNV-1a hash, and the trainer's position (w2v_position).
 *
 * A resumed run must train exactly as the uninterrupted one would have, so a checkpoint
 * is accepted only with the same training flags (-threads, -binary and the output paths
 * may differ: with -hogwild 0 they do not change the vectors) and a corpus of the same
 * size and hash, and the same vocabulary (its FNV-1a hash over words and counts, which
 * -read-vocab could change). Numbers are written with %.17g or as integers, which read
 * back exactly. Keys added after the first checkpoints were written (-hs, the vocabulary
 * hash) read, when missing, as what those checkpoints were made with.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "w2v.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define W2V_CKPT_FORMAT "sgrad-w2v 1"
#define MAX_KEYS 32
#define VALUE_LEN 40

typedef struct {
    int n;
    const char *keys[MAX_KEYS];
    char values[MAX_KEYS][VALUE_LEN];
    const char *if_missing[MAX_KEYS]; /* a key absent from older checkpoints: the value it
                                         had there, "" for any; NULL: the key is required */
} meta_list;

static void put(meta_list *l, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void put(meta_list *l, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    l->keys[l->n] = key;
    vsnprintf(l->values[l->n], VALUE_LEN, fmt, ap);
    va_end(ap);
    l->if_missing[l->n] = NULL;
    l->n++;
}

/* The FNV-1a 64 hash of the vocabulary: each word and its count, in order. */
static uint64_t vocab_hash(const tc_vocab *v)
{
    uint64_t h = TC_FNV_OFFSET;
    char count[24];
    for (int64_t i = 0; i < v->size; i++) {
        const int n = snprintf(count, sizeof count, " %" PRId64 "\n", v->counts[i]);
        h = tc_fnv1a(h, v->words[i], strlen(v->words[i]));
        h = tc_fnv1a(h, count, (size_t)n);
    }
    return h;
}

/* What decides the result of a run: the flags by their command-line names, then the
 * corpus. The first entry is the format. */
static void identity(meta_list *l, const w2v_config *cfg, const tc_vocab *v)
{
    const double alpha = cfg->alpha > 0 ? cfg->alpha : (cfg->cbow ? 0.05 : 0.025);
    put(l, "w2v.format", "%s", W2V_CKPT_FORMAT);
    put(l, "w2v.flag.-size", "%d", cfg->size);
    put(l, "w2v.flag.-window", "%d", cfg->window);
    put(l, "w2v.flag.-negative", "%d", cfg->negative);
    put(l, "w2v.flag.-iter", "%d", cfg->iter);
    put(l, "w2v.flag.-cbow", "%d", cfg->cbow);
    put(l, "w2v.flag.-min-count", "%" PRId64, cfg->min_count);
    put(l, "w2v.flag.-sample", "%.17g", cfg->sample);
    put(l, "w2v.flag.-alpha", "%.17g", alpha);
    put(l, "w2v.flag.-seed", "%" PRIu64, cfg->seed);
    put(l, "w2v.flag.-batch", "%" PRId64, cfg->batch);
    put(l, "w2v.flag.-hogwild", "%d", cfg->hogwild);
    put(l, "w2v.flag.-engine", "%s", cfg->engine == W2V_ENGINE_GRAPH ? "graph" : "fused");
    put(l, "w2v.flag.-hs", "%d", cfg->hs);
    l->if_missing[l->n - 1] = "0";
    put(l, "w2v.corpus.bytes", "%" PRId64, v->corpus_bytes);
    put(l, "w2v.corpus.fnv1a64", "%016" PRIx64, v->corpus_hash);
    put(l, "w2v.vocab.size", "%" PRId64, v->size);
    put(l, "w2v.vocab.fnv1a64", "%016" PRIx64, vocab_hash(v));
    /* missing: counted from this corpus (the same vocabulary), unless this one was read */
    l->if_missing[l->n - 1] = cfg->read_vocab ? NULL : "";
}

/* The model's tables and their names in the file: W_in, then W_out and W_hs if trained. */
static int model_tables(const w2v_model *m, sg_tensor **t, const char **names)
{
    int n = 0;
    t[n] = m->in, names[n++] = "W_in";
    if (m->out) t[n] = m->out, names[n++] = "W_out";
    if (m->hs) t[n] = m->hs, names[n++] = "W_hs";
    return n;
}

static void position_meta(meta_list *l, const w2v_position *p)
{
    put(l, "w2v.epoch", "%d", p->epoch);
    put(l, "w2v.offset", "%" PRId64, p->offset);
    put(l, "w2v.epoch_done", "%d", p->epoch_done ? 1 : 0);
    put(l, "w2v.rng", "%" PRIu64, p->rng);
    put(l, "w2v.tokens", "%" PRId64, p->tokens);
    put(l, "w2v.sentence_len", "%d", (int)p->len);
    put(l, "w2v.sentence_pos", "%d", (int)p->pos);
    put(l, "w2v.steps", "%" PRId64, p->steps);
    put(l, "w2v.examples", "%" PRId64, p->examples);
    put(l, "w2v.start_loss", "%.17g", p->start_loss);
    put(l, "w2v.epoch_loss", "%.17g", p->epoch_loss);
    put(l, "w2v.epoch_examples", "%" PRId64, p->epoch_examples);
}

static sg_tensor *sentence_tensor(sg_ctx *ctx, const w2v_position *p)
{
    const int64_t shape[1] = {W2V_MAX_SENTENCE};
    return sg_tensor_from_data(ctx, SG_I32, 1, shape, p->sentence);
}

int w2v_checkpoint_save(const char *path, const w2v_config *cfg, const tc_vocab *v,
                        const w2v_model *m, sg_optim *opt, const w2v_position *pos, FILE *err)
{
    meta_list l = {0};
    identity(&l, cfg, v);
    position_meta(&l, pos);
    sg_tensor *sen = sentence_tensor(m->ctx, pos);
    sg_tensor *t[4];
    const char *names[4];
    const int n = model_tables(m, t, names);
    t[n] = sen, names[n] = "trainer/sentence";
    const char *values[MAX_KEYS];
    for (int i = 0; i < l.n; i++) values[i] = l.values[i];
    const sg_checkpoint_meta meta = {l.n, l.keys, values};
    int rc = sen ? sg_checkpoint_save(m->ctx, path, t, n + 1, names, opt, &meta) : sg_ctx_status(m->ctx);
    sg_tensor_free(sen);
    if (rc) {
        fprintf(err, "sgrad-w2v: cannot write checkpoint %s: %s (any previous %s is unchanged)\n", path,
                sg_ctx_message(m->ctx), path);
        return -1;
    }
    return 0;
}

int w2v_checkpoint_check(const char *path, const w2v_config *cfg, const tc_vocab *v, FILE *err)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    if (!ctx) {
        fprintf(err, "sgrad-w2v: out of memory\n");
        return -1;
    }
    sg_checkpoint_meta got = {0, NULL, NULL};
    int rc = 0;
    if (sg_checkpoint_read_meta(ctx, path, &got)) {
        fprintf(err, "sgrad-w2v: cannot resume from %s: %s\n", path, sg_ctx_message(ctx));
        rc = -1;
    }
    meta_list want = {0};
    identity(&want, cfg, v);
    for (int i = 0; i < want.n && !rc; i++) {
        const char *have = sg_checkpoint_meta_get(&got, want.keys[i]);
        if (!have && want.if_missing[i]) {
            if (!*want.if_missing[i]) continue;
            have = want.if_missing[i];
        }
        if (have && !strcmp(have, want.values[i])) continue;
        rc = -1;
        if (i == 0)
            fprintf(err, "sgrad-w2v: cannot resume from %s: not a sgrad-w2v checkpoint (format %s)\n",
                    path, have ? have : "missing");
        else if (!strncmp(want.keys[i], "w2v.flag.", 9))
            fprintf(err, "sgrad-w2v: cannot resume from %s: it was made with %s %s, this run has %s %s; "
                         "resume with the training flags of the first run\n",
                    path, want.keys[i] + 9, have ? have : "(missing)", want.keys[i] + 9, want.values[i]);
        else if (!strncmp(want.keys[i], "w2v.vocab.", 10))
            fprintf(err, "sgrad-w2v: cannot resume from %s: it was made with another vocabulary (%s "
                         "%s, this run's has %s)\n",
                    path, want.keys[i] + 4, have ? have : "(missing)", want.values[i]);
        else
            fprintf(err, "sgrad-w2v: cannot resume from %s: it was made from another corpus (%s %s, "
                         "-train %s has %s)\n",
                    path, want.keys[i] + 4, have ? have : "(missing)", cfg->train, want.values[i]);
    }
    sg_checkpoint_meta_free(ctx, &got);
    sg_ctx_free(ctx);
    return rc;
}

static bool get_i64(const sg_checkpoint_meta *meta, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = sg_checkpoint_meta_get(meta, key);
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || x < lo || x > hi) return false;
    *out = x;
    return true;
}

static bool get_u64(const sg_checkpoint_meta *meta, const char *key, uint64_t *out)
{
    const char *s = sg_checkpoint_meta_get(meta, key);
    if (!s || !*s || *s == '-') return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = x;
    return true;
}

static bool get_f64(const sg_checkpoint_meta *meta, const char *key, double *out)
{
    const char *s = sg_checkpoint_meta_get(meta, key);
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || *end) return false;
    *out = x;
    return true;
}

/* The position from the metadata and the sentence tensor, every field in its range. */
static bool parse_position(const sg_checkpoint_meta *meta, const int32_t *sentence, const w2v_config *cfg,
                           const tc_vocab *v, int64_t optim_steps, w2v_position *p)
{
    int64_t epoch, done, len, pos;
    memset(p, 0, sizeof *p);
    if (!get_i64(meta, "w2v.epoch", 0, cfg->iter, &epoch) ||
        !get_i64(meta, "w2v.offset", 0, v->corpus_bytes, &p->offset) ||
        !get_i64(meta, "w2v.epoch_done", 0, 1, &done) || !get_u64(meta, "w2v.rng", &p->rng) ||
        !get_i64(meta, "w2v.tokens", 0, (int64_t)cfg->iter * v->total_tokens, &p->tokens) ||
        !get_i64(meta, "w2v.sentence_len", 0, W2V_MAX_SENTENCE, &len) ||
        !get_i64(meta, "w2v.sentence_pos", 0, len, &pos) ||
        !get_i64(meta, "w2v.steps", optim_steps, optim_steps, &p->steps) ||
        !get_i64(meta, "w2v.examples", 0, INT64_MAX, &p->examples) ||
        !get_f64(meta, "w2v.start_loss", &p->start_loss) || !get_f64(meta, "w2v.epoch_loss", &p->epoch_loss) ||
        !get_i64(meta, "w2v.epoch_examples", 0, p->examples, &p->epoch_examples))
        return false;
    p->epoch = (int)epoch;
    p->epoch_done = done != 0;
    p->len = (int32_t)len;
    p->pos = (int32_t)pos;
    for (int i = 0; i < W2V_MAX_SENTENCE; i++) {
        if (i < len && (sentence[i] < 0 || sentence[i] >= v->size)) return false;
        p->sentence[i] = i < len ? sentence[i] : 0;
    }
    return true;
}

int w2v_checkpoint_load(const char *path, const w2v_config *cfg, const tc_vocab *v,
                        const w2v_model *m, sg_optim *opt, w2v_position *pos, FILE *err)
{
    w2v_position zero;
    memset(&zero, 0, sizeof zero);
    sg_tensor *sen = sentence_tensor(m->ctx, &zero);
    sg_tensor *t[4];
    const char *names[4];
    const int n = model_tables(m, t, names);
    t[n] = sen, names[n] = "trainer/sentence";
    sg_checkpoint_meta meta = {0, NULL, NULL};
    int rc = sen ? sg_checkpoint_load(m->ctx, path, t, n + 1, names, opt, &meta) : sg_ctx_status(m->ctx);
    if (rc) {
        fprintf(err, "sgrad-w2v: cannot resume from %s: %s\n", path, sg_ctx_message(m->ctx));
    } else if (!parse_position(&meta, sg_tensor_data(sen), cfg, v, sg_optim_steps(opt), pos)) {
        fprintf(err, "sgrad-w2v: cannot resume from %s: its trainer position (w2v.* metadata) is "
                     "missing or out of range\n", path);
        rc = -1;
    }
    sg_checkpoint_meta_free(m->ctx, &meta);
    sg_tensor_free(sen);
    return rc ? -1 : 0;
}
