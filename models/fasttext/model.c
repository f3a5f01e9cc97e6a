/* The model file (classifier or word vectors) and the classifier's predictions.
 *
 * A model is one sgrad checkpoint (safetensors) holding the tensors
 *   input/words (W,dim) f32, input/bucket_rows (k) i64, input/bucket_values (k,dim) f32,
 *   output (labels or labels - 1, dim) f32, labels/counts (labels) i64   (classifier)
 *   output (W,dim) f32, words/counts (W) i64                            (vectors)
 * and metadata "fasttext.*": kind "supervised", "skipgram" or "cbow", the
 * hyperparameters, the words and the labels (each list joined by newlines, in row order;
 * vectors keep the corpus's labels, which their training ignores, as fastText does). The
 * bucket table is stored sparse:
 * bucket_rows are the buckets whose row is not all zeros, ascending, with their values.
 * Bucket rows start at zero and only training steps that use a bucket move its row, so
 * the rows left out are exactly zero and the load gives back the trained table.
 * A loaded model keeps the stored rows only: input is (W + k, dim); a bucket's row among
 * them is found through bucket_map (one int32 per bucket) or, where that map would be out
 * of proportion to the file, by binary search in bucket_rows.
 * The loader trusts no number of the metadata: the tensors it implies must fit in the
 * file before anything is allocated, and the training rules must hold.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fileno */
#endif
#include "ft.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FT_FORMAT "1"
/* A loaded model's bucket_map is made when it takes at most this many bytes or the file's
 * size, whichever is more (fastText's default 2M buckets: 8 MB); else lookups search
 * bucket_rows. A variable so that a test can send a small model down the search path. */
int64_t ft_bucket_map_floor = (int64_t)32 << 20;
#define N_TENSORS 5
static const char *const tensor_names[N_TENSORS] = {"input/words", "input/bucket_rows",
                                                    "input/bucket_values", "output",
                                                    "labels/counts"};
static const char *const vector_tensor_names[N_TENSORS] = {"input/words", "input/bucket_rows",
                                                           "input/bucket_values", "output",
                                                           "words/counts"};

/* words[0..n) joined by newlines into a new string. */
static char *join_words(char *const *words, int64_t n)
{
    size_t len = 1;
    for (int64_t i = 0; i < n; i++) len += strlen(words[i]) + 1;
    char *s = malloc(len), *p = s;
    if (!s) return NULL;
    for (int64_t i = 0; i < n; i++) {
        size_t l = strlen(words[i]);
        memcpy(p, words[i], l);
        p += l;
        if (i + 1 < n) *p++ = '\n';
    }
    *p = '\0';
    return s;
}

void ft_write_error(const sg_ctx *ctx, const char *path, sg_model_error *err)
{
    if (sg_ctx_status(ctx) == SG_ERR_IO) tc_fail(err, SG_ERR_IO, "%s", sg_ctx_message(ctx));
    else tc_fail(err, sg_ctx_status(ctx), "cannot write %s: %s", path, sg_ctx_message(ctx));
}

/* The nonzero bucket rows of m's input, ascending: *k of them; rows / rows_abs (when not
 * NULL) receive each one's bucket and its row in input. */
static void nonzero_buckets(const ft_model *m, int64_t *k, int64_t *rows, int64_t *rows_abs)
{
    const int64_t W = m->dict.words.size, Bk = m->dict.bucket, D = m->cfg.dim;
    const float *in = sg_tensor_f32(m->input);
    int64_t j = 0;
    for (int64_t b = 0; b < Bk; b++) {
        const float *r = in + (W + b) * D;
        for (int64_t d = 0; d < D; d++)
            if (r[d] != 0) {
                if (rows) rows[j] = b, rows_abs[j] = W + b;
                j++;
                break;
            }
    }
    *k = j;
}

/* The hyperparameters as the file's metadata strings (num holds the numbers). */
enum { N_KEYS = 21 };
static void model_meta(const ft_model *m, int64_t k, const char *words, const char *labels, char num[16][32],
                       const char **keys, const char **vals)
{
    const ft_config *c = &m->cfg;
    static const char *const names[N_KEYS] = {
        "fasttext.kind", "fasttext.format", "fasttext.dim", "fasttext.wordNgrams", "fasttext.bucket",
        "fasttext.minn", "fasttext.maxn", "fasttext.neg", "fasttext.lr", "fasttext.epoch", "fasttext.minCount",
        "fasttext.minCountLabel", "fasttext.seed", "fasttext.batch", "fasttext.bucket_rows", "fasttext.loss",
        "fasttext.label", "fasttext.words", "fasttext.labels", "fasttext.ws", "fasttext.t"};
    snprintf(num[0], 32, "%d", c->dim);
    snprintf(num[1], 32, "%d", c->word_ngrams);
    snprintf(num[2], 32, "%lld", (long long)m->dict.bucket);
    snprintf(num[3], 32, "%d", c->minn);
    snprintf(num[4], 32, "%d", c->maxn);
    snprintf(num[5], 32, "%d", c->neg);
    snprintf(num[6], 32, "%.17g", c->lr);
    snprintf(num[7], 32, "%d", c->epoch);
    snprintf(num[8], 32, "%lld", (long long)c->min_count);
    snprintf(num[9], 32, "%lld", (long long)c->min_count_label);
    snprintf(num[10], 32, "%llu", (unsigned long long)c->seed);
    snprintf(num[11], 32, "%d", c->batch);
    snprintf(num[12], 32, "%lld", (long long)k);
    snprintf(num[13], 32, "%d", c->ws);
    snprintf(num[14], 32, "%.17g", c->sample);
    const char *v[N_KEYS] = {ft_kind_name(c->kind), FT_FORMAT, num[0], num[1], num[2], num[3], num[4], num[5],
                             num[6], num[7], num[8], num[9], num[10], num[11], num[12],
                             ft_loss_name(c->loss), c->label, words, labels, num[13], num[14]};
    for (int i = 0; i < N_KEYS; i++) keys[i] = names[i], vals[i] = v[i];
}

int ft_model_save(const ft_model *m, const char *path, sg_model_error *err)
{
    sg_ctx *ctx = m->ctx;
    const bool vectors = m->cfg.kind != FT_SUPERVISED;
    const int64_t W = m->dict.words.size, C = m->dict.labels.size;
    int64_t k = 0;
    nonzero_buckets(m, &k, NULL, NULL);
    char num[16][32], *words = join_words(m->dict.words.words, W), *labels = join_words(m->dict.labels.words, C);
    sg_tensor *rows = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){k});
    sg_tensor *rows_abs = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){k});
    sg_tensor *counts = vectors ? sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){W}, m->dict.words.counts)
                                : sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){C}, m->dict.labels.counts);
    int rc = -1;
    if (!words || !labels || !rows || !rows_abs || !counts) {
        tc_fail(err, SG_ERR_NOMEM, "out of memory saving %s", path);
    } else {
        nonzero_buckets(m, &k, sg_tensor_data(rows), sg_tensor_data(rows_abs));
        const int was = sg_set_grad_enabled(ctx, 0);
        sg_tensor *params[N_TENSORS] = {sg_slice(m->input, 0, W), rows, sg_index_select(m->input, 0, rows_abs),
                                        m->output, counts};
        sg_set_grad_enabled(ctx, was);
        const char *keys[N_KEYS], *vals[N_KEYS];
        model_meta(m, k, words, labels, num, keys, vals);
        const sg_checkpoint_meta meta = {N_KEYS, keys, vals};
        rc = sg_checkpoint_save(ctx, path, params, N_TENSORS, vectors ? vector_tensor_names : tensor_names, NULL,
                                &meta);
        if (rc) ft_write_error(ctx, path, err);
    }
    sg_tape_reset(ctx);
    sg_tensor_free(rows);
    sg_tensor_free(rows_abs);
    sg_tensor_free(counts);
    free(words);
    free(labels);
    return rc ? -1 : 0;
}

/* ---- load */

static bool meta_int(const sg_checkpoint_meta *meta, const char *key, int64_t lo, int64_t hi,
                     int64_t *out)
{
    const char *s = sg_checkpoint_meta_get(meta, key);
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* A newline-joined list into v, in order (counts n, n-1, ... keep it through finalize). */
static int vocab_of_list(tc_vocab *v, const char *list, int64_t *n_out)
{
    tc_vocab_init(v);
    int64_t n = 0;
    if (*list) {
        n = 1;
        for (const char *p = list; *p; p++) n += *p == '\n';
    }
    char word[TC_MAX_WORD];
    const char *p = list;
    for (int64_t i = 0; i < n; i++) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 0 || l >= TC_MAX_WORD) return -1;
        memcpy(word, p, l);
        word[l] = '\0';
        if (tc_vocab_add(v, word, n - i) < 0) return -1;
        p += l + 1;
    }
    if (v->size != n || tc_vocab_finalize(v, 1)) return -1; /* a repeated word */
    *n_out = n;
    return 0;
}

/* Adds rows x cols elements of elem bytes to *bytes; false once the sum passes limit. */
static bool add_bytes(int64_t *bytes, int64_t rows, int64_t cols, int64_t elem, int64_t limit)
{
    if (rows > (limit - *bytes) / (cols * elem)) return false;
    *bytes += rows * cols * elem;
    return true;
}

static bool all_finite(sg_tensor *t)
{
    const float *v = sg_tensor_f32(t);
    for (int64_t i = 0, n = sg_tensor_numel(t); i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

/* What a load has read so far: the file's size, its metadata, the sizes it gives. */
typedef struct {
    const char *path;
    bool vectors;
    int64_t file_bytes;
    sg_checkpoint_meta meta;
    int64_t dim, bucket, k, W, C, n_out, n_counts;
    sg_tensor *t[N_TENSORS];
    sg_model_error *err;
} ft_load;

/* The file's size (which bounds every tensor the metadata may ask for) and its metadata. */
static int load_meta(ft_model *m, ft_load *l)
{
    FILE *f = fopen(l->path, "rb");
    struct stat st;
    int open_errno = !f ? errno : fstat(fileno(f), &st) ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (f) fclose(f);
    if (open_errno) return tc_fail(l->err, SG_ERR_IO, "cannot load the model %s: %s", l->path, strerror(open_errno));
    l->file_bytes = st.st_size;
    if (!sg_checkpoint_read_meta(m->ctx, l->path, &l->meta)) return 0;
    const int status = sg_ctx_status(m->ctx);
    if (status == SG_ERR_NOMEM) return tc_fail(l->err, SG_ERR_NOMEM, "out of memory loading %s", l->path);
    return tc_fail(l->err, SG_ERR_FORMAT, "cannot load the model %s: %s%s", l->path,
                   status == SG_ERR_IO ? "" : "not a sgrad-fasttext model: ", sg_ctx_message(m->ctx));
}

/* The kind (the one wanted) and the format. */
static int load_kind(ft_model *m, ft_load *l)
{
    const char *kind = sg_checkpoint_meta_get(&l->meta, "fasttext.kind");
    const char *format = sg_checkpoint_meta_get(&l->meta, "fasttext.format");
    if (!kind || !(!strcmp(kind, "supervised") || !strcmp(kind, "skipgram") || !strcmp(kind, "cbow")))
        return tc_fail(l->err, SG_ERR_FORMAT, "%s is a sgrad checkpoint but not a sgrad-fasttext model (no "
                                              "fasttext.kind \"supervised\", \"skipgram\" or \"cbow\" in its metadata)",
                       l->path);
    m->cfg.kind = !strcmp(kind, "supervised") ? FT_SUPERVISED : !strcmp(kind, "skipgram") ? FT_SKIPGRAM : FT_CBOW;
    if (l->vectors != (m->cfg.kind != FT_SUPERVISED))
        return tc_fail(l->err, SG_ERR_ARG, "%s is a %s model; this verb needs %s", l->path,
                       l->vectors ? "classifier (supervised)" : "word-vector (skipgram or cbow)",
                       l->vectors ? "word vectors (a skipgram or cbow model)" : "a classifier (a supervised model)");
    if (!format || strcmp(format, FT_FORMAT))
        return tc_fail(l->err, SG_ERR_FORMAT, "%s: model format %s, this program reads %s", l->path,
                       format ? format : "(none)", FT_FORMAT);
    return 0;
}

/* The hyperparameters and the word and label lists, held to the training rules and to
 * the file's size. */
static int load_hyper(ft_model *m, ft_load *l)
{
    const sg_checkpoint_meta *meta = &l->meta;
    ft_config *c = &m->cfg;
    int64_t ngr, minn, maxn, neg;
    const char *loss = sg_checkpoint_meta_get(meta, "fasttext.loss");
    const char *label = sg_checkpoint_meta_get(meta, "fasttext.label");
    const char *words = sg_checkpoint_meta_get(meta, "fasttext.words");
    const char *labels = sg_checkpoint_meta_get(meta, "fasttext.labels");
    const char *why = NULL;
    if (!meta_int(meta, "fasttext.dim", 1, 1 << 20, &l->dim) || !meta_int(meta, "fasttext.wordNgrams", 1, 1 << 20, &ngr) ||
        !meta_int(meta, "fasttext.bucket", 0, INT32_MAX, &l->bucket) ||
        !meta_int(meta, "fasttext.minn", 0, TC_MAX_WORD, &minn) || !meta_int(meta, "fasttext.maxn", 0, TC_MAX_WORD, &maxn) ||
        !meta_int(meta, "fasttext.neg", 0, 1 << 20, &neg) ||
        !meta_int(meta, "fasttext.bucket_rows", 0, l->bucket, &l->k) || !loss || !ft_loss_parse(loss, &c->loss) ||
        !label || !*label || !words || !labels)
        why = "missing or bad hyperparameters";
    /* the rules ft_config_check puts on the flags (the hashing divides by bucket) */
    else if (l->bucket == 0 && (ngr > 1 || maxn > 0)) why = "fasttext.bucket 0 with word or character n-grams";
    else if (maxn > 0 && minn > maxn) why = "fasttext.minn > fasttext.maxn";
    else if (l->vectors && c->loss != FT_LOSS_NS) why = "word vectors with a loss other than ns";
    /* a vector model keeps the corpus's labels (training ignores them) */
    else if (vocab_of_list(&m->dict.words, words, &l->W) || vocab_of_list(&m->dict.labels, labels, &l->C) ||
             (l->vectors ? l->W < 1 : l->C < 1))
        why = "bad word or label list";
    if (why) return tc_fail(l->err, SG_ERR_FORMAT, "%s: corrupt model metadata (%s)", l->path, why);
    c->dim = (int)l->dim, c->word_ngrams = (int)ngr, c->minn = (int)minn, c->maxn = (int)maxn, c->neg = (int)neg;
    m->dict.bucket = l->bucket;
    m->dict.word_ngrams = c->word_ngrams, m->dict.minn = c->minn, m->dict.maxn = c->maxn;
    if (!(m->label_copy = malloc(strlen(label) + 1))) return tc_fail(l->err, SG_ERR_NOMEM, "out of memory loading %s", l->path);
    c->label = strcpy(m->label_copy, label);
    m->dict.label_prefix = c->label;
    return 0;
}

/* The tensors the metadata implies, once they fit the file, read and checked. */
static int load_tensors(ft_model *m, ft_load *l)
{
    const int64_t dim = l->dim, k = l->k, W = l->W, C = l->C, n_out = l->n_out, n_counts = l->n_counts;
    int64_t bytes = 0, fb = l->file_bytes;
    if (!add_bytes(&bytes, W, dim, 4, fb) || !add_bytes(&bytes, k, 1, 8, fb) || !add_bytes(&bytes, k, dim, 4, fb) ||
        !add_bytes(&bytes, n_out, dim, 4, fb) || !add_bytes(&bytes, n_counts, 1, 8, fb))
        return tc_fail(l->err, SG_ERR_FORMAT, "%s: corrupt model metadata (dim %lld, %lld words, %lld labels and "
                                              "%lld bucket rows need more bytes than the file's %lld)",
                       l->path, (long long)dim, (long long)W, (long long)C, (long long)k, (long long)fb);
    l->t[0] = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W, dim});
    l->t[1] = sg_tensor_new(m->ctx, SG_I64, 1, (int64_t[]){k});
    l->t[2] = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){k, dim});
    l->t[3] = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){n_out, dim});
    l->t[4] = sg_tensor_new(m->ctx, SG_I64, 1, (int64_t[]){n_counts});
    for (int i = 0; i < N_TENSORS; i++)
        if (!l->t[i]) return tc_fail(l->err, SG_ERR_NOMEM, "out of memory loading %s", l->path);
    const char *const *names = l->vectors ? vector_tensor_names : tensor_names;
    if (sg_checkpoint_load(m->ctx, l->path, l->t, N_TENSORS, names, NULL, NULL))
        return tc_fail(l->err, sg_ctx_status(m->ctx), "cannot load the model %s: %s", l->path, sg_ctx_message(m->ctx));
    for (int i = 0; i < N_TENSORS; i++)
        if (sg_tensor_dtype(l->t[i]) == SG_F32 && !all_finite(l->t[i]))
            return tc_fail(l->err, SG_ERR_FORMAT, "%s: corrupt model (%s holds a value that is not finite)", l->path,
                           names[i]);
    const int64_t *rows = sg_tensor_data(l->t[1]);
    for (int64_t i = 0; i < k; i++)
        if (rows[i] < 0 || rows[i] >= l->bucket || (i && rows[i] <= rows[i - 1]))
            return tc_fail(l->err, SG_ERR_FORMAT, "%s: corrupt model (bucket row %lld)", l->path, (long long)i);
    return 0;
}

/* The counts (non-increasing, summing below 2^63: the hs tree's weights), the tree, and
 * the loaded input: the word rows, then the stored bucket rows with their map. */
static int load_model(ft_model *m, ft_load *l)
{
    const int64_t dim = l->dim, k = l->k, W = l->W, *rows = sg_tensor_data(l->t[1]), *counts = sg_tensor_data(l->t[4]);
    tc_vocab *counted = l->vectors ? &m->dict.words : &m->dict.labels;
    int64_t sum = 0;
    for (int64_t i = 0; i < l->n_counts; i++) {
        if (counts[i] < 0 || (i && counts[i] > counts[i - 1]) || counts[i] > INT64_MAX - sum)
            return tc_fail(l->err, SG_ERR_FORMAT, "%s: corrupt model (%s counts: negative, rising or summing past "
                                                  "2^63 - 1)", l->path, l->vectors ? "word" : "label");
        sum += counts[i];
        counted->counts[i] = counts[i];
    }
    if (m->cfg.loss == FT_LOSS_HS && !l->vectors && tc_huffman_build(&m->tree, counts, l->C)) goto nomem;
    m->input = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W + k, dim});
    m->bucket_rows = malloc((size_t)(k ? k : 1) * sizeof *m->bucket_rows);
    /* the map, one int32 a bucket, only where it is in proportion to the file */
    const bool map = l->bucket * (int64_t)sizeof *m->bucket_map <=
                     (l->file_bytes > ft_bucket_map_floor ? l->file_bytes : ft_bucket_map_floor);
    if (map) m->bucket_map = malloc((size_t)(l->bucket ? l->bucket : 1) * sizeof *m->bucket_map);
    if (!m->input || !m->bucket_rows || (map && !m->bucket_map)) goto nomem;
    memcpy(sg_tensor_data(m->input), sg_tensor_data(l->t[0]), (size_t)(W * dim) * sizeof(float));
    memcpy(sg_tensor_f32(m->input) + W * dim, sg_tensor_data(l->t[2]), (size_t)(k * dim) * sizeof(float));
    if (k) memcpy(m->bucket_rows, rows, (size_t)k * sizeof *rows);
    m->n_bucket_rows = k;
    for (int64_t b = 0; map && b < l->bucket; b++) m->bucket_map[b] = -1;
    for (int64_t i = 0; map && i < k; i++) m->bucket_map[rows[i]] = (int32_t)i;
    m->loaded = true;
    m->output = l->t[3];
    l->t[3] = NULL;
    return 0;
nomem:
    return tc_fail(l->err, SG_ERR_NOMEM, "out of memory loading %s", l->path);
}

int ft_model_load(ft_model *m, const char *path, int threads, bool vectors, sg_model_error *err)
{
    memset(m, 0, sizeof *m);
    ft_config_default(&m->cfg);
    sg_ctx_opts co = {.threads = threads};
    if (!(m->ctx = sg_ctx_new(&co))) return tc_fail(err, SG_ERR_NOMEM, "out of memory");
    ft_load l = {.path = path, .vectors = vectors, .meta = {0, NULL, NULL}, .err = err};
    int rc = load_meta(m, &l) || load_kind(m, &l) || load_hyper(m, &l) ? -1 : 0;
    if (!rc) {
        l.n_out = vectors ? l.W : m->cfg.loss == FT_LOSS_HS ? l.C - 1 : l.C;
        l.n_counts = vectors ? l.W : l.C;
        rc = load_tensors(m, &l) || load_model(m, &l) ? -1 : 0;
    }
    for (int i = 0; i < N_TENSORS; i++) sg_tensor_free(l.t[i]);
    sg_checkpoint_meta_free(m->ctx, &l.meta);
    if (rc) ft_model_free(m);
    return rc;
}

/* ---- prediction */

/* Bucket b's row among a loaded model's stored ones, or -1 (a zero row). */
static int64_t stored_bucket_row(const ft_model *m, int64_t b)
{
    if (m->bucket_map) return m->bucket_map[b];
    int64_t lo = 0, hi = m->n_bucket_rows; /* bucket_rows is ascending */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (m->bucket_rows[mid] < b) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->n_bucket_rows && m->bucket_rows[lo] == b ? lo : -1;
}

void ft_input_mean(const ft_model *m, const ft_ids *rows, double *h)
{
    const int64_t D = m->cfg.dim, W = m->dict.words.size;
    const float *in = sg_tensor_f32(m->input);
    for (int64_t d = 0; d < D; d++) h[d] = 0;
    for (int64_t i = 0; i < rows->n; i++) {
        int64_t r = rows->v[i];
        if (r >= W && m->loaded) {
            const int64_t k = stored_bucket_row(m, r - W);
            if (k < 0) continue; /* a zero row: counted by the mean, adds nothing */
            r = W + k;
        }
        for (int64_t d = 0; d < D; d++) h[d] += in[r * D + d];
    }
    for (int64_t d = 0; d < D && rows->n; d++) h[d] /= (double)rows->n;
}

int ft_predict_scores(ft_model *m, const ft_ids *rows, double *score)
{
    const int64_t D = m->cfg.dim, C = m->dict.labels.size;
    const float *out = sg_tensor_f32(m->output);
    const int64_t n_out = sg_tensor_dim(m->output, 0);
    double *h = malloc((size_t)D * sizeof *h), *s = malloc((size_t)(n_out ? n_out : 1) * sizeof *s);
    if (!h || !s) {
        free(h);
        free(s);
        return -1;
    }
    ft_input_mean(m, rows, h);
    for (int64_t j = 0; j < n_out; j++) {
        double a = 0;
        for (int64_t d = 0; d < D; d++) a += (double)out[j * D + d] * h[d];
        s[j] = a;
    }
    if (m->cfg.loss == FT_LOSS_SOFTMAX) {
        double mx = s[0], z = 0;
        for (int64_t j = 1; j < C; j++) mx = s[j] > mx ? s[j] : mx;
        for (int64_t j = 0; j < C; j++) z += exp(s[j] - mx);
        for (int64_t j = 0; j < C; j++) score[j] = log(exp(s[j] - mx) / z + FT_LOG_EPS);
    } else if (m->cfg.loss == FT_LOSS_HS) {
        for (int64_t c = 0; c < C; c++) {
            double l = 0;
            for (int64_t e = m->tree.offsets[c]; e < m->tree.offsets[c + 1]; e++) {
                const double sig = 1 / (1 + exp(-s[m->tree.nodes[e]]));
                l += log((m->tree.codes[e] ? sig : 1 - sig) + FT_LOG_EPS);
            }
            score[c] = l;
        }
    } else {
        for (int64_t j = 0; j < C; j++) score[j] = log(1 / (1 + exp(-s[j])) + FT_LOG_EPS);
    }
    free(h);
    free(s);
    return 0;
}
