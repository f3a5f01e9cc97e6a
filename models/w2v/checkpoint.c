/* Checkpoints and model files of word2vec: one safetensors file (sg_checkpoint_save) per
 * save. A checkpoint holds the tables ("W_in"; "W_out" with -negative > 0, "W_hs" with
 * -hs 1), the SGD optimizer's state, the current sentence ("trainer/sentence", int32,
 * W2V_MAX_SENTENCE entries of which w2v.sentence_len count) and string metadata under
 * "w2v.": the format, the training flags that decide the result, the corpus's size and
 * FNV-1a hash, the trainer's position (w2v_position), and the vocabulary (its words
 * joined by newlines in "w2v.vocab.words", their counts in "w2v.vocab.counts"), so that
 * a resume and a load need no corpus to rebuild it. A model file (sg_w2v_save) holds the
 * tables, the flags and the vocabulary, no optimizer and no position, but the trainer's
 * random stream where its training ended ("w2v.rng") and the corpus's tokens and lines:
 * a loaded model trains on (continued training) bitwise as the saved one would have.
 *
 * A resumed run must train exactly as the uninterrupted one would have, so a checkpoint
 * is accepted only with the same training flags (-threads, -binary and the output paths
 * may differ: with -hogwild 0 they do not change the vectors) and a corpus of the same
 * size and hash, and the same vocabulary (its FNV-1a hash over words and counts, which
 * -read-vocab could change). Numbers are written with %.17g or as integers, which read
 * back exactly. Keys added after the first checkpoints were written (-hs, the vocabulary
 * hash, the vocabulary itself) read, when missing, as what those checkpoints were made
 * with (a checkpoint without its vocabulary is resumed with the corpus's).
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
#define W2V_MODEL_FORMAT "sgrad-w2v model 1"
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
static void identity(meta_list *l, const char *format, const w2v_config *cfg, const tc_vocab *v)
{
    const double alpha = w2v_alpha(cfg);
    put(l, "w2v.format", "%s", format);
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
    put(l, "w2v.flag.-engine", "%s", cfg->engine == SG_W2V_GRAPH ? "graph" : "fused");
    put(l, "w2v.flag.-hs", "%d", cfg->hs);
    l->if_missing[l->n - 1] = "0";
    put(l, "w2v.corpus.bytes", "%" PRId64, v->corpus_bytes);
    put(l, "w2v.corpus.fnv1a64", "%016" PRIx64, v->corpus_hash);
    put(l, "w2v.vocab.size", "%" PRId64, v->size);
    put(l, "w2v.vocab.fnv1a64", "%016" PRIx64, vocab_hash(v));
    /* missing: counted from this corpus (the same vocabulary), unless this one was read */
    l->if_missing[l->n - 1] = cfg->vocab_given ? NULL : "";
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

/* The vocabulary as two strings: words joined by newlines, counts likewise (malloc'd). */
static int vocab_strings(const tc_vocab *v, char **words, char **counts)
{
    size_t wl = 1, cl = 1;
    for (int64_t i = 0; i < v->size; i++) wl += strlen(v->words[i]) + 1, cl += 21;
    char *w = *words = malloc(wl), *c = *counts = malloc(cl);
    if (!w || !c) return -1;
    *w = *c = '\0';
    for (int64_t i = 0; i < v->size; i++) {
        const size_t n = strlen(v->words[i]);
        memcpy(w, v->words[i], n);
        w += n;
        c += snprintf(c, 22, "%" PRId64, v->counts[i]);
        if (i + 1 < v->size) *w++ = '\n', *c++ = '\n';
        *w = *c = '\0';
    }
    return 0;
}

/* Saves tables (and the sentence tensor sen, when not NULL) with l's metadata plus the
 * vocabulary to path; 0, or -1 with the reason. */
static int save_file(const char *path, const char *what, const w2v_model *m, sg_tensor *sen, sg_optim *opt,
                     const meta_list *l, const tc_vocab *v, sg_model_error *e)
{
    sg_tensor *t[4];
    const char *names[4];
    const int n = model_tables(m, t, names);
    if (sen) t[n] = sen, names[n] = "trainer/sentence";
    char *words = NULL, *counts = NULL;
    const char *keys[MAX_KEYS + 2], *values[MAX_KEYS + 2];
    for (int i = 0; i < l->n; i++) keys[i] = l->keys[i], values[i] = l->values[i];
    keys[l->n] = "w2v.vocab.words", keys[l->n + 1] = "w2v.vocab.counts";
    int rc = vocab_strings(v, &words, &counts) ? SG_ERR_NOMEM : SG_OK;
    values[l->n] = words, values[l->n + 1] = counts;
    const sg_checkpoint_meta meta = {l->n + 2, keys, values};
    if (!rc) rc = sg_checkpoint_save(m->ctx, path, t, n + (sen != NULL), names, opt, &meta);
    free(words);
    free(counts);
    if (rc == SG_ERR_NOMEM && !sg_ctx_status(m->ctx))
        return tc_fail(e, SG_ERR_NOMEM, "cannot write %s %s: out of memory", what, path);
    if (rc)
        return tc_fail(e, sg_ctx_status(m->ctx), "cannot write %s %s: %s (any previous %s is unchanged)", what, path,
                       sg_ctx_message(m->ctx), path);
    return 0;
}

int w2v_checkpoint_save(const char *path, const w2v_config *cfg, const tc_vocab *v, const w2v_model *m,
                        sg_optim *opt, const w2v_position *pos, sg_model_error *e)
{
    meta_list l = {0};
    identity(&l, W2V_CKPT_FORMAT, cfg, v);
    position_meta(&l, pos);
    sg_tensor *sen = sentence_tensor(m->ctx, pos);
    const int rc = sen ? save_file(path, "checkpoint", m, sen, opt, &l, v, e)
                       : tc_fail_ctx(e, m->ctx, "cannot write checkpoint: ");
    sg_tensor_free(sen);
    return rc;
}

int w2v_model_save(const char *path, const w2v_config *cfg, const tc_vocab *v, const w2v_model *m,
                   sg_model_error *e)
{
    meta_list l = {0};
    identity(&l, W2V_MODEL_FORMAT, cfg, v);
    /* what a continued training of the loaded model needs to go on as this one would:
     * the random stream and the corpus's counts (its learning rate falls over them) */
    put(&l, "w2v.rng", "%" PRIu64, m->rng);
    put(&l, "w2v.corpus.tokens", "%" PRId64, v->total_tokens);
    put(&l, "w2v.corpus.lines", "%" PRId64, v->lines);
    return save_file(path, "model", m, NULL, NULL, &l, v, e);
}

/* The first key of want that got does not match, said in *e; 0 when all match. */
static int compare_identity(const char *path, const meta_list *want, const sg_checkpoint_meta *got,
                            const w2v_config *cfg, sg_model_error *e)
{
    for (int i = 0; i < want->n; i++) {
        const char *have = sg_checkpoint_meta_get(got, want->keys[i]);
        if (!have && want->if_missing[i]) {
            if (!*want->if_missing[i]) continue;
            have = want->if_missing[i];
        }
        if (have && !strcmp(have, want->values[i])) continue;
        if (i == 0)
            return tc_fail(e, SG_ERR_FORMAT, "cannot resume from %s: not a sgrad-w2v checkpoint (format %s)", path,
                           have ? have : "missing");
        if (!strncmp(want->keys[i], "w2v.flag.", 9))
            return tc_fail(e, SG_ERR_STATE, "cannot resume from %s: it was made with %s %s, this run has %s %s; "
                                            "resume with the training flags of the first run",
                           path, want->keys[i] + 9, have ? have : "(missing)", want->keys[i] + 9, want->values[i]);
        if (!strncmp(want->keys[i], "w2v.vocab.", 10))
            return tc_fail(e, SG_ERR_STATE, "cannot resume from %s: it was made with another vocabulary (%s %s, "
                                            "this run's has %s)",
                           path, want->keys[i] + 4, have ? have : "(missing)", want->values[i]);
        return tc_fail(e, SG_ERR_STATE, "cannot resume from %s: it was made from another corpus (%s %s, -train %s "
                                        "has %s)", path, want->keys[i] + 4, have ? have : "(missing)",
                       cfg->train ? cfg->train : "(tokens)", want->values[i]);
    }
    return 0;
}

int w2v_checkpoint_check(const char *path, const w2v_config *cfg, const tc_vocab *v, sg_model_error *e)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    if (!ctx) return tc_fail(e, SG_ERR_NOMEM, "out of memory");
    sg_checkpoint_meta got = {0, NULL, NULL};
    int rc = 0;
    if (sg_checkpoint_read_meta(ctx, path, &got)) {
        rc = tc_fail(e, sg_ctx_status(ctx), "cannot resume from %s: %s", path, sg_ctx_message(ctx));
    } else {
        meta_list want = {0};
        identity(&want, W2V_CKPT_FORMAT, cfg, v);
        rc = compare_identity(path, &want, &got, cfg, e);
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

int w2v_checkpoint_load(const char *path, const w2v_config *cfg, const tc_vocab *v, const w2v_model *m,
                        sg_optim *opt, w2v_position *pos, sg_model_error *e)
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
        rc = tc_fail(e, sg_ctx_status(m->ctx), "cannot resume from %s: %s", path, sg_ctx_message(m->ctx));
    } else if (!parse_position(&meta, sg_tensor_data(sen), cfg, v, sg_optim_steps(opt), pos)) {
        rc = tc_fail(e, SG_ERR_FORMAT, "cannot resume from %s: its trainer position (w2v.* metadata) is missing or "
                                       "out of range", path);
    }
    sg_checkpoint_meta_free(m->ctx, &meta);
    sg_tensor_free(sen);
    return rc ? -1 : 0;
}

/* ---- the vocabulary and tables of a file, without a corpus */

/* The vocabulary in meta into an empty v: 1, 0 when meta holds none, -1 when it is bad. */
static int vocab_of_meta(const sg_checkpoint_meta *meta, tc_vocab *v)
{
    const char *words = sg_checkpoint_meta_get(meta, "w2v.vocab.words");
    const char *counts = sg_checkpoint_meta_get(meta, "w2v.vocab.counts");
    if (!words && !counts) return 0;
    if (!words || !counts) return -1;
    char word[TC_MAX_WORD];
    for (const char *w = words, *c = counts; *w || *c;) {
        const size_t l = strcspn(w, "\n");
        char *end;
        errno = 0;
        const long long k = strtoll(c, &end, 10);
        if (l == 0 || l >= TC_MAX_WORD || errno || end == c || k < 0 || (*end && *end != '\n')) return -1;
        memcpy(word, w, l);
        word[l] = '\0';
        if (tc_vocab_find(v, word) >= 0 || tc_vocab_add(v, word, k) < 0) return -1;
        v->train_words += k;
        w += l + (w[l] == '\n');
        c = end + (*end == '\n');
        if (!*w != !*c) return -1; /* one list ended before the other */
    }
    return 1;
}

/* A file's metadata (read with ctx): 0, or -1 with the reason naming path. */
static int read_meta(sg_ctx *ctx, const char *path, sg_checkpoint_meta *meta, sg_model_error *e)
{
    if (!sg_checkpoint_read_meta(ctx, path, meta)) return 0;
    const int status = sg_ctx_status(ctx);
    if (status == SG_ERR_IO) return tc_fail(e, status, "%s", sg_ctx_message(ctx)); /* it names path */
    return tc_fail(e, status, "cannot load %s: %s", path, sg_ctx_message(ctx));
}

int w2v_checkpoint_vocab(const char *path, tc_vocab *v, sg_model_error *e)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    if (!ctx) return tc_fail(e, SG_ERR_NOMEM, "out of memory");
    sg_checkpoint_meta meta = {0, NULL, NULL};
    int rc = read_meta(ctx, path, &meta, e);
    if (!rc && (rc = vocab_of_meta(&meta, v)) < 0)
        rc = tc_fail(e, SG_ERR_FORMAT, "%s: damaged vocabulary (w2v.vocab.words and w2v.vocab.counts)", path);
    sg_checkpoint_meta_free(ctx, &meta);
    sg_ctx_free(ctx);
    return rc;
}

/* The options a file's tables need: -size, -negative, -hs, -cbow (flags in meta). */
static int options_of_meta(const sg_checkpoint_meta *meta, w2v_config *cfg)
{
    int64_t size, negative, hs = 0, cbow;
    if (!get_i64(meta, "w2v.flag.-size", 1, 1 << 20, &size) ||
        !get_i64(meta, "w2v.flag.-negative", 0, W2V_MAX_NEGATIVE, &negative) ||
        !get_i64(meta, "w2v.flag.-cbow", 0, 1, &cbow) ||
        (sg_checkpoint_meta_get(meta, "w2v.flag.-hs") && !get_i64(meta, "w2v.flag.-hs", 0, 1, &hs)) ||
        (negative == 0 && !hs))
        return -1;
    cfg->size = (int)size;
    cfg->negative = (int)negative;
    cfg->hs = (int)hs;
    cfg->cbow = (int)cbow;
    return 0;
}

/* An optional key: true when absent (*out unchanged) or in [lo, hi]. */
static bool opt_i64(const sg_checkpoint_meta *meta, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    return !sg_checkpoint_meta_get(meta, key) || get_i64(meta, key, lo, hi, out);
}

static bool opt_f64(const sg_checkpoint_meta *meta, const char *key, double lo, double hi, double *out)
{
    double x = *out;
    if (sg_checkpoint_meta_get(meta, key) && (!get_f64(meta, key, &x) || !(x >= lo && x <= hi))) return false;
    *out = x;
    return true;
}

/* The other training flags a file records (a continued training of the loaded model
 * trains with them; a flag a file lacks keeps its default); -1 for one out of range. */
static int training_options_of_meta(const sg_checkpoint_meta *meta, w2v_config *cfg)
{
    int64_t window = cfg->window, iter = cfg->iter, min_count = cfg->min_count, batch = cfg->batch,
            hogwild = cfg->hogwild;
    double sample = cfg->sample, alpha = w2v_alpha(cfg);
    uint64_t seed = cfg->seed;
    const char *engine = sg_checkpoint_meta_get(meta, "w2v.flag.-engine");
    if (!opt_i64(meta, "w2v.flag.-window", 1, W2V_MAX_WINDOW, &window) ||
        !opt_i64(meta, "w2v.flag.-iter", 1, INT32_MAX, &iter) ||
        !opt_i64(meta, "w2v.flag.-min-count", 1, INT64_MAX, &min_count) ||
        !opt_i64(meta, "w2v.flag.-batch", 1, INT64_MAX, &batch) || !opt_i64(meta, "w2v.flag.-hogwild", 0, 1, &hogwild) ||
        !opt_f64(meta, "w2v.flag.-sample", 0, 1, &sample) || !opt_f64(meta, "w2v.flag.-alpha", 1e-300, 10, &alpha) ||
        (sg_checkpoint_meta_get(meta, "w2v.flag.-seed") && !get_u64(meta, "w2v.flag.-seed", &seed)) ||
        (engine && strcmp(engine, "fused") && strcmp(engine, "graph")))
        return -1;
    cfg->window = (int)window, cfg->iter = (int)iter, cfg->min_count = min_count, cfg->batch = batch;
    cfg->hogwild = (int)hogwild, cfg->sample = sample, cfg->alpha = alpha, cfg->seed = seed;
    if (engine) cfg->engine = strcmp(engine, "graph") ? SG_W2V_FUSED : SG_W2V_GRAPH;
    return 0;
}

/* The corpus's counts and the random stream a file records (absent: none counted, and
 * the seed's stream), for a continued training of the loaded model; -1 for one damaged. */
static int state_of_meta(const sg_checkpoint_meta *meta, const w2v_config *cfg, tc_vocab *v, w2v_model *m)
{
    int64_t bytes = 0;
    uint64_t hash = 0;
    const char *h = sg_checkpoint_meta_get(meta, "w2v.corpus.fnv1a64");
    char *end = NULL;
    if (h) hash = strtoull(h, &end, 16);
    m->rng = cfg->seed;
    if (!opt_i64(meta, "w2v.corpus.tokens", 0, INT64_MAX, &v->total_tokens) ||
        !opt_i64(meta, "w2v.corpus.lines", 0, INT64_MAX, &v->lines) ||
        !opt_i64(meta, "w2v.corpus.bytes", 0, INT64_MAX, &bytes) || (h && (!*h || *end)) ||
        (sg_checkpoint_meta_get(meta, "w2v.rng") && !get_u64(meta, "w2v.rng", &m->rng)))
        return -1;
    v->corpus_bytes = bytes;
    v->corpus_hash = hash;
    return 0;
}

/* m's tables for cfg and v on a new context; loads them from path (a checkpoint's
 * sentence tensor read and dropped). */
static int load_tables(const char *path, int threads, bool checkpoint, const w2v_config *cfg, const tc_vocab *v,
                       w2v_model *m, sg_model_error *e)
{
    const sg_ctx_opts co = {.threads = threads, .nondeterministic = cfg->hogwild, .seed = cfg->seed ? cfg->seed : 42};
    if (!(m->ctx = sg_ctx_new(&co))) return tc_fail(e, SG_ERR_NOMEM, "out of memory");
    const int64_t shape[2] = {v->size, cfg->size}, s_hs[2] = {v->size - 1, cfg->size};
    m->in = sg_tensor_new(m->ctx, SG_F32, 2, shape);
    if (cfg->negative > 0) m->out = sg_tensor_new(m->ctx, SG_F32, 2, shape);
    if (cfg->hs) m->hs = sg_tensor_new(m->ctx, SG_F32, 2, s_hs);
    w2v_position zero;
    memset(&zero, 0, sizeof zero);
    sg_tensor *sen = checkpoint ? sentence_tensor(m->ctx, &zero) : NULL;
    sg_tensor *t[4];
    const char *names[4];
    const int n = model_tables(m, t, names);
    if (sen) t[n] = sen, names[n] = "trainer/sentence";
    int rc = 0;
    if (!m->in || (cfg->negative > 0 && !m->out) || (cfg->hs && !m->hs) || (checkpoint && !sen))
        rc = tc_fail(e, SG_ERR_NOMEM, "out of memory loading %s", path);
    else if (sg_checkpoint_load(m->ctx, path, t, n + checkpoint, names, NULL, NULL))
        rc = tc_fail(e, sg_ctx_status(m->ctx), "cannot load %s: %s", path, sg_ctx_message(m->ctx));
    sg_tensor_free(sen);
    return rc;
}

int w2v_model_load(const char *path, int threads, w2v_config *cfg, tc_vocab *v, w2v_model *m, sg_model_error *e)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    if (!ctx) return tc_fail(e, SG_ERR_NOMEM, "out of memory");
    sg_checkpoint_meta meta = {0, NULL, NULL};
    int rc = read_meta(ctx, path, &meta, e);
    const char *format = rc ? NULL : sg_checkpoint_meta_get(&meta, "w2v.format");
    const bool checkpoint = format && !strcmp(format, W2V_CKPT_FORMAT);
    int has_vocab = 0;
    if (!rc && !checkpoint && !(format && !strcmp(format, W2V_MODEL_FORMAT)))
        rc = tc_fail(e, SG_ERR_FORMAT, "%s is not a sgrad-w2v model or checkpoint (format %s)", path,
                     format ? format : "missing");
    else if (!rc && (options_of_meta(&meta, cfg) || training_options_of_meta(&meta, cfg)))
        rc = tc_fail(e, SG_ERR_FORMAT, "%s: damaged model (its w2v.flag.* metadata is missing or out of range)", path);
    else if (!rc && (has_vocab = vocab_of_meta(&meta, v)) <= 0)
        rc = tc_fail(e, SG_ERR_FORMAT, has_vocab ? "%s: damaged vocabulary (w2v.vocab.words and w2v.vocab.counts)"
                                                 : "%s holds no vocabulary (a checkpoint written before they did: "
                                                   "resume it with its corpus to write one)", path);
    else if (!rc && v->size < 2)
        rc = tc_fail(e, SG_ERR_FORMAT, "%s: damaged vocabulary (%lld words)", path, (long long)v->size);
    else if (!rc && state_of_meta(&meta, cfg, v, m))
        rc = tc_fail(e, SG_ERR_FORMAT, "%s: damaged model (its w2v.corpus.* or w2v.rng metadata)", path);
    sg_checkpoint_meta_free(ctx, &meta);
    sg_ctx_free(ctx);
    return rc ? rc : load_tables(path, threads, checkpoint, cfg, v, m, e);
}
