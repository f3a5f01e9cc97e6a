/* The library's status strings and events, the clock, and the public face of the shared
 * pieces: sg_vocab (over tc_vocab) and sg_lines (the corpus reader, line by line). Errors
 * are recorded by error.c.
 *
 * Invariants: an error is recorded once, where it is known, with the caller's path in
 * its message; nothing here prints. An INFO event is formatted only when its level is
 * wanted.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double tc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *sg_model_status_string(int status)
{
    return status == SG_STOPPED ? "stopped by the event callback" : sg_status_string(status);
}

int tc_emit(const tc_events *ev, const sg_event *e)
{
    return ev && ev->fn ? ev->fn(ev->ud, e) : 0;
}

void tc_info(const tc_events *ev, int level, const char *fmt, ...)
{
    if (!ev || !ev->fn || ev->verbose < level) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const sg_event e = {.kind = SG_EVENT_INFO, .level = level, .message = msg};
    ev->fn(ev->ud, &e);
}

/* ---- the public vocabulary */

sg_vocab *sg_vocab_new(void)
{
    sg_vocab *v = malloc(sizeof *v);
    if (v) tc_vocab_init(v);
    return v;
}

void sg_vocab_free(sg_vocab *v)
{
    if (!v) return;
    tc_vocab_free(v);
    free(v);
}

int sg_vocab_count_file(sg_vocab *v, const char *path, sg_model_error *err)
{
    if (!v || !path) return tc_fail(err, SG_ERR_NULL, "NULL vocabulary or path"), SG_ERR_NULL;
    if (tc_vocab_count_file(v, path) == 0) return SG_OK;
    const int status = errno == ENOMEM ? SG_ERR_NOMEM : SG_ERR_IO;
    tc_fail(err, status, "cannot read %s: %s", path, strerror(errno));
    return status;
}

/* Counts one token of len bytes (NULL: a sentence end), as a file holding it would be
 * counted: its hash and size with a space after each word, a newline after each sentence. */
static int add_token(sg_vocab *v, const char *token, size_t len, char *word)
{
    if (!token) {
        v->corpus_hash = tc_fnv1a_step(v->corpus_hash, '\n');
        v->corpus_bytes++;
        v->lines++;
        v->line_open = false;
        return 0;
    }
    v->corpus_hash = tc_fnv1a_step(tc_fnv1a(v->corpus_hash, token, len), ' ');
    v->corpus_bytes += (int64_t)len + 1;
    sg_word_as_read(token, word);
    if (!word[0]) return 0;
    v->total_tokens++;
    v->line_open = true;
    return tc_vocab_add(v, word, 1) < 0 ? -1 : 0;
}

static void start_counting(sg_vocab *v)
{
    if (v->total_tokens == 0 && v->lines == 0 && v->corpus_bytes == 0) v->corpus_hash = TC_FNV_OFFSET;
}

int sg_vocab_add_tokens(sg_vocab *v, const char *const *tokens, int64_t n, sg_model_error *err)
{
    if (!v || (n > 0 && !tokens)) return tc_fail(err, SG_ERR_NULL, "NULL vocabulary or tokens"), SG_ERR_NULL;
    start_counting(v);
    char word[TC_MAX_WORD];
    for (int64_t i = 0; i < n; i++)
        if (add_token(v, tokens[i], tokens[i] ? strlen(tokens[i]) : 0, word))
            return tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM;
    return SG_OK;
}

int tc_packed_check(const char *buf, int64_t len, const int64_t *lens, int64_t n, int64_t *count,
                    sg_model_error *err)
{
    if ((len > 0 && !buf) || (n > 0 && !lens)) return tc_fail(err, SG_ERR_NULL, "NULL buffer or lengths"), SG_ERR_NULL;
    int64_t tokens = 0;
    for (int64_t i = 0; i < n; i++) {
        /* each token takes at least its NUL: more than the buffer holds cannot be right,
         * and the bound keeps the sum from overflowing */
        if (lens[i] < 0 || lens[i] > len - tokens)
            return tc_fail(err, SG_ERR_ARG, "sentence %lld has %lld tokens, but the buffer holds at most %lld more",
                           (long long)i, (long long)lens[i], (long long)(len - tokens)),
                   SG_ERR_ARG;
        tokens += lens[i];
    }
    int64_t nuls = 0;
    for (const char *p = buf, *end = buf + len; p < end; p++) {
        p = memchr(p, '\0', (size_t)(end - p));
        if (!p) break;
        nuls++;
    }
    if (nuls != tokens || (len > 0 && buf[len - 1] != '\0'))
        return tc_fail(err, SG_ERR_ARG, "%lld tokens in the lengths but %lld NUL-terminated in the buffer (a token holds a NUL?)",
                       (long long)tokens, (long long)nuls),
               SG_ERR_ARG;
    *count = tokens;
    return SG_OK;
}

int sg_vocab_add_packed(sg_vocab *v, const char *buf, int64_t len, const int64_t *lens, int64_t n, sg_model_error *err)
{
    if (!v) return tc_fail(err, SG_ERR_NULL, "NULL vocabulary"), SG_ERR_NULL;
    int64_t tokens;
    const int rc = tc_packed_check(buf, len, lens, n, &tokens, err);
    if (rc) return rc;
    start_counting(v);
    char word[TC_MAX_WORD];
    const char *p = buf;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t k = 0; k < lens[i]; k++) {
            const size_t tl = strlen(p);
            if (add_token(v, p, tl, word)) return tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM;
            p += tl + 1;
        }
        add_token(v, NULL, 0, word);
    }
    return SG_OK;
}

int sg_vocab_read(sg_vocab *v, const char *path, sg_model_error *err)
{
    char why[160];
    if (!v || !path) return tc_fail(err, SG_ERR_NULL, "NULL vocabulary or path"), SG_ERR_NULL;
    if (tc_vocab_read(v, path, why, sizeof why) == 0) return SG_OK;
    const int status = !strncmp(why, "line ", 5) ? SG_ERR_FORMAT : SG_ERR_IO;
    tc_fail(err, status, "cannot read %s: %s", path, why);
    return status;
}

int sg_vocab_finalize(sg_vocab *v, int64_t min_count, sg_model_error *err)
{
    if (!v) return tc_fail(err, SG_ERR_NULL, "NULL vocabulary"), SG_ERR_NULL;
    if (tc_vocab_finalize(v, min_count)) return tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM;
    return SG_OK;
}

int sg_vocab_save(const sg_vocab *v, const char *path, sg_model_error *err)
{
    if (!v || !path) return tc_fail(err, SG_ERR_NULL, "NULL vocabulary or path"), SG_ERR_NULL;
    if (tc_vocab_save(v, path) == 0) return SG_OK;
    tc_fail(err, SG_ERR_IO, "cannot write %s: %s", path, tc_out_strerror(errno));
    return SG_ERR_IO;
}

int64_t sg_vocab_size(const sg_vocab *v) { return v ? v->size : 0; }
const char *sg_vocab_word(const sg_vocab *v, int64_t i) { return v && i >= 0 && i < v->size ? v->words[i] : NULL; }
int64_t sg_vocab_count(const sg_vocab *v, int64_t i) { return v && i >= 0 && i < v->size ? v->counts[i] : -1; }
int64_t sg_vocab_find(const sg_vocab *v, const char *word) { return v && word ? tc_vocab_find(v, word) : -1; }
int64_t sg_vocab_tokens(const sg_vocab *v) { return v ? v->total_tokens : 0; }
int64_t sg_vocab_lines(const sg_vocab *v) { return v ? v->lines : 0; }
int64_t sg_vocab_kept_tokens(const sg_vocab *v) { return v ? v->train_words : 0; }
uint64_t sg_vocab_corpus_hash(const sg_vocab *v) { return v ? v->corpus_hash : 0; }

/* ---- the public line reader */

struct sg_lines {
    tc_lines l;
};

sg_lines *sg_lines_open(const char *path, sg_model_error *err)
{
    sg_lines *l = path ? malloc(sizeof *l) : NULL;
    if (!path) tc_fail(err, SG_ERR_NULL, "NULL path");
    else if (!l) tc_fail(err, SG_ERR_NOMEM, "out of memory");
    else if (tc_lines_open(&l->l, path)) {
        tc_fail(err, SG_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        free(l);
        l = NULL;
    }
    return l;
}

int sg_lines_next(sg_lines *l, char ***tokens, int64_t *n, bool *eol)
{
    const int rc = tc_lines_next(&l->l);
    if (rc < 0) return -SG_ERR_NOMEM;
    if (rc == 0 && ferror(l->l.rd.f)) return -SG_ERR_IO;
    *tokens = l->l.tok;
    *n = l->l.n;
    *eol = l->l.eol;
    return rc;
}

void sg_lines_close(sg_lines *l)
{
    if (!l) return;
    tc_lines_close(&l->l);
    free(l);
}

void sg_word_as_read(const char *token, char *word)
{
    size_t n = 0;
    while (n < TC_MAX_WORD - 1 && token[n]) n++;
    if (token[n]) n = tc_utf8_cut(token, n, (unsigned char)token[n]);
    memcpy(word, token, n);
    word[n] = '\0';
}
