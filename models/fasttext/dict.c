/* The classifier's dictionary: words and labels of a training file with their counts, and
 * fastText's mapping of a line to input rows.
 *
 * Invariants: a token starting with the label prefix is a label, every other token a word;
 * each newline adds one FT_EOS word (as fastText reads a newline). Input rows 0..W-1 are
 * the words (frequency order), W + b the n-gram bucket b < bucket. Word n-grams hash as
 * fastText does: h = hash(w_i) (sign-extended to 64 bits), then h = h * 116049371 +
 * hash(w_j) for each following word, bucket h mod bucket; character n-grams of "<word>"
 * (lengths minn..maxn, in UTF-8 characters; single characters at the word's ends left
 * out) go to hash(ngram) mod bucket. Only the hashing matches fastText, not its
 * arithmetic order, so tables of equal content differ only in row initialisation.
 */
#include "ft.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *ft_loss_name(ft_loss l)
{
    static const char *names[] = {"softmax", "ns", "hs", "ova"};
    return names[l];
}

bool ft_loss_parse(const char *s, ft_loss *out)
{
    if (!strcmp(s, "softmax")) *out = FT_LOSS_SOFTMAX;
    else if (!strcmp(s, "ns")) *out = FT_LOSS_NS;
    else if (!strcmp(s, "hs")) *out = FT_LOSS_HS;
    else if (!strcmp(s, "ova") || !strcmp(s, "one-vs-all")) *out = FT_LOSS_OVA;
    else return false;
    return true;
}

const char *ft_kind_name(ft_kind k)
{
    static const char *names[] = {"supervised", "skipgram", "cbow"};
    return names[k];
}

void ft_config_default(ft_config *c)
{
    *c = (ft_config){.kind = FT_SUPERVISED, .label = "__label__", .dim = 100, .epoch = 5,
                     .word_ngrams = 1, .minn = 0, .maxn = 0, .neg = 5, .threads = 1,
                     .batch = 1, .bucket = 2000000, .min_count = 1, .min_count_label = 0,
                     .lr = 0.1, .seed = 0, .loss = FT_LOSS_SOFTMAX, .verbose = 2, .ws = 5,
                     .sample = 1e-4, .lr_update_rate = 100};
}

void ft_config_default_vectors(ft_config *c, ft_kind kind)
{
    ft_config_default(c);
    c->kind = kind;
    c->minn = 3;
    c->maxn = 6;
    c->min_count = 5;
    c->lr = 0.05;
    c->loss = FT_LOSS_NS;
    c->batch = FT_VECTORS_BATCH;
}

int ft_config_check(const ft_config *c, sg_model_error *err)
{
    /* -maxn 0 turns character n-grams off whatever -minn says, as in fastText */
    if (c->maxn > 0 && c->minn > c->maxn) {
        tc_fail(err, SG_ERR_ARG, "-minn %d > -maxn %d: no character n-gram length fits",
                c->minn, c->maxn);
        return -1;
    }
    if (c->bucket == 0 && (c->word_ngrams > 1 || c->maxn > 0)) {
        tc_fail(err, SG_ERR_ARG, "-bucket 0 leaves no row for the %s n-grams that %s "
                     "asks for (fastText divides by zero here); give -bucket > 0\n",
                c->word_ngrams > 1 ? "word" : "character",
                c->word_ngrams > 1 ? "-wordNgrams > 1" : "-maxn > 0");
        return -1;
    }
    if (c->kind != FT_SUPERVISED && c->loss != FT_LOSS_NS) {
        tc_fail(err, SG_ERR_ARG, "%s trains with -loss ns only (not %s)",
                ft_kind_name(c->kind), ft_loss_name(c->loss));
        return -1;
    }
    if (!c->label || !*c->label) {
        tc_fail(err, SG_ERR_ARG, "-label needs a non-empty prefix");
        return -1;
    }
    return 0;
}

uint32_t ft_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (uint32_t)(int32_t)(int8_t)*s;
        h *= 16777619u;
    }
    return h;
}

static bool is_label(const ft_dict *d, const char *t)
{
    return !strncmp(t, d->label_prefix, strlen(d->label_prefix));
}

void ft_dict_free(ft_dict *d)
{
    tc_vocab_free(&d->words);
    tc_vocab_free(&d->labels);
}

int ft_ids_push(ft_ids *a, int64_t x)
{
    if (a->n == a->cap) {
        int64_t cap = a->cap ? 2 * a->cap : 64;
        int64_t *v = realloc(a->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

void ft_ids_free(ft_ids *a)
{
    free(a->v);
    *a = (ft_ids){0};
}

int ft_dict_build(ft_dict *d, const ft_config *c, sg_model_error *err)
{
    memset(d, 0, sizeof *d);
    d->label_prefix = c->label;
    d->word_ngrams = c->word_ngrams;
    d->minn = c->minn;
    d->maxn = c->maxn;
    d->bucket = c->word_ngrams > 1 || c->maxn > 0 ? c->bucket : 0;
    tc_vocab_init(&d->words);
    tc_vocab_init(&d->labels);
    tc_lines l;
    if (tc_lines_open(&l, c->input)) {
        tc_fail(err, SG_ERR_IO, "cannot read -input %s: %s", c->input, strerror(errno));
        return -1;
    }
    int rc, tokens = 0;
    while ((rc = tc_lines_next(&l)) > 0) {
        for (int64_t i = 0; i < l.n && rc > 0; i++) {
            const bool label = is_label(d, l.tok[i]);
            if (tc_vocab_add(label ? &d->labels : &d->words, l.tok[i], 1) < 0) rc = -1;
            d->ntokens += !label;
            tokens = 1;
        }
        if (rc > 0 && l.eol && tc_vocab_add(&d->words, FT_EOS, 1) < 0) rc = -1;
        d->ntokens += l.eol;
        if (rc < 0) break;
    }
    bool io_error = ferror(l.rd.f) != 0;
    tc_lines_close(&l);
    if (rc < 0 || io_error) {
        tc_fail(err, rc < 0 ? SG_ERR_NOMEM : SG_ERR_IO, "%s reading -input %s", rc < 0 ? "out of memory" : "error",
                c->input);
        goto fail;
    }
    if (!tokens) {
        tc_fail(err, SG_ERR_ARG, "-input %s holds no token (empty file?)", c->input);
        goto fail;
    }
    const int64_t labels_seen = d->labels.size;
    if (tc_vocab_finalize(&d->words, c->min_count) || tc_vocab_finalize(&d->labels, c->min_count_label)) {
        tc_fail(err, SG_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (c->kind != FT_SUPERVISED) {
        if (d->words.size > 0) return 0;
        tc_fail(err, SG_ERR_ARG, "no word of -input %s is seen -minCount %lld times",
                c->input, (long long)c->min_count);
        goto fail;
    }
    if (labels_seen == 0) {
        tc_fail(err, SG_ERR_ARG, "-input %s has no label (no token starts with -label "
                     "'%s')", c->input, c->label);
        goto fail;
    }
    if (d->labels.size == 0) {
        tc_fail(err, SG_ERR_ARG, "every one of the %lld labels of -input %s is seen fewer "
                     "than -minCountLabel %lld times", (long long)labels_seen, c->input,
                (long long)c->min_count_label);
        goto fail;
    }
    if (d->labels.size < labels_seen)
        tc_info(&c->ev, 1, "%lld of %lld labels dropped (seen fewer than "
                     "-minCountLabel %lld times)", (long long)(labels_seen - d->labels.size),
                (long long)labels_seen, (long long)c->min_count_label);
    return 0;
fail:
    ft_dict_free(d);
    return -1;
}

/* Character n-grams of "<word>" into rows (fastText's computeSubwords). */
static int push_char_ngrams(const ft_dict *d, const char *word, ft_ids *rows)
{
    char w[TC_MAX_WORD + 2], ng[TC_MAX_WORD + 2];
    const size_t len = strlen(word) + 2;
    w[0] = '<';
    memcpy(w + 1, word, len - 2);
    w[len - 1] = '>';
    w[len] = '\0';
    const int64_t W = d->words.size;
    for (size_t i = 0; i < len; i++) {
        if ((w[i] & 0xC0) == 0x80) continue; /* inside a UTF-8 character */
        size_t j = i, k = 0;
        for (int n = 1; j < len && n <= d->maxn; n++) {
            ng[k++] = w[j++];
            while (j < len && (w[j] & 0xC0) == 0x80) ng[k++] = w[j++];
            if (n >= d->minn && !(n == 1 && (i == 0 || j == len))) {
                ng[k] = '\0';
                if (ft_ids_push(rows, W + (int64_t)(ft_hash(ng) % (uint32_t)d->bucket))) return -1;
            }
        }
    }
    return 0;
}

int ft_dict_word_rows(const ft_dict *d, const char *word, ft_ids *rows)
{
    int64_t id = tc_vocab_find(&d->words, word);
    if (id >= 0 && ft_ids_push(rows, id)) return -1;
    if (d->maxn > 0 && strcmp(word, FT_EOS) && push_char_ngrams(d, word, rows)) return -1;
    return 0;
}

/* One word token: its rows, its hash for word n-grams. */
static int push_word(const ft_dict *d, const char *t, ft_ids *rows, ft_ids *hashes)
{
    if (ft_dict_word_rows(d, t, rows)) return -1;
    return ft_ids_push(hashes, (int64_t)(int32_t)ft_hash(t));
}

int ft_dict_line(const ft_dict *d, char **tokens, int64_t n_tokens, bool eol, ft_ids *rows,
                 ft_ids *labels, int64_t *n_words)
{
    ft_ids hashes = {0};
    int rc = 0;
    *n_words = 0;
    for (int64_t i = 0; i < n_tokens && !rc; i++) {
        if (is_label(d, tokens[i])) {
            int64_t id = tc_vocab_find(&d->labels, tokens[i]);
            if (id >= 0) rc = ft_ids_push(labels, id);
            continue;
        }
        (*n_words)++;
        rc = push_word(d, tokens[i], rows, &hashes);
    }
    if (!rc && eol) rc = push_word(d, FT_EOS, rows, &hashes);
    const int64_t W = d->words.size;
    for (int64_t i = 0; i < hashes.n && !rc; i++) {
        uint64_t h = (uint64_t)hashes.v[i];
        for (int64_t j = i + 1; j < hashes.n && j < i + d->word_ngrams && !rc; j++) {
            h = h * 116049371u + (uint64_t)hashes.v[j];
            rc = ft_ids_push(rows, W + (int64_t)(h % (uint64_t)d->bucket));
        }
    }
    ft_ids_free(&hashes);
    return rc;
}
