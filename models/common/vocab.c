/* Corpus reader and vocabulary of the sgrad programs.
 *
 * Invariants: a token is a maximal run of bytes other than space, newline, DEL and the
 * other control bytes (NUL included), cut to TC_MAX_WORD - 1 bytes (fewer when the cut
 * would split a UTF-8 character: that character goes whole); a newline is a sentence end
 * (TC_TOK_EOL).
 * The vocabulary's hash maps each word to its index; after tc_vocab_finalize the words
 * are in frequency order (count descending, ties by bytes ascending, so the order does not
 * depend on the corpus order) and every count is >= min_count.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fseeko */
#endif
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TC_READ_BUF (1 << 20)

int tc_reader_open(tc_reader *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->f = fopen(path, "rb");
    if (!r->f) return -1;
    r->buf = malloc(TC_READ_BUF);
    if (!r->buf) {
        fclose(r->f);
        r->f = NULL;
        errno = ENOMEM;
        return -1;
    }
    r->hash = TC_FNV_OFFSET;
    return 0;
}

void tc_reader_close(tc_reader *r)
{
    if (r->f) fclose(r->f);
    free(r->buf);
    memset(r, 0, sizeof *r);
}

int tc_reader_seek(tc_reader *r, int64_t offset)
{
    if (offset < 0 || fseeko(r->f, (off_t)offset, SEEK_SET) != 0) {
        if (offset < 0) errno = EINVAL;
        return -1;
    }
    r->buf_start = offset;
    r->len = r->pos = 0;
    r->eof = false;
    return 0;
}

static int reader_getc(tc_reader *r)
{
    if (r->pos == r->len) {
        if (r->eof) return EOF;
        r->buf_start += (int64_t)r->len;
        r->len = fread(r->buf, 1, TC_READ_BUF, r->f);
        r->pos = 0;
        if (r->hashing) r->hash = tc_fnv1a(r->hash, r->buf, r->len);
        if (r->len == 0) {
            r->eof = true;
            return EOF;
        }
    }
    return r->buf[r->pos++];
}

/* Space and every control byte but the newline (NUL, tab, CR, DEL, ...): none can be part
 * of a word, so no word is empty or holds a byte the vectors file cannot. */

/* Where to cut word[0..n) when next, its first dropped byte, continues a UTF-8 character
 * begun in the kept bytes: before that character's lead byte, so a valid UTF-8 corpus gives
 * valid UTF-8 words (gensim refuses a vectors file that is not). Otherwise n: bytes that
 * are not UTF-8 anyway are cut where they are. */
size_t tc_utf8_cut(const char *word, size_t n, int next)
{
    if ((next & 0xc0) != 0x80) return n; /* not a continuation byte: no character cut */
    size_t lead = n;
    while (lead > 0 && n - lead < 3 && ((unsigned char)word[lead - 1] & 0xc0) == 0x80) lead--;
    if (lead == 0) return n;
    const unsigned char b = (unsigned char)word[--lead];
    const size_t len = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    return len > n - lead ? lead : n;
}

tc_tok tc_reader_next(tc_reader *r, char *word)
{
    int c;
    do c = reader_getc(r);
    while (tc_is_blank(c));
    if (c == EOF) return TC_TOK_EOF;
    if (c == '\n') return TC_TOK_EOL;
    size_t n = 0;
    bool cut = false;
    while (c != EOF && c != '\n' && !tc_is_blank(c)) {
        if (!cut && n < TC_MAX_WORD - 1) {
            word[n++] = (char)c;
        } else if (!cut) {
            cut = true;
            n = tc_utf8_cut(word, n, c);
        }
        c = reader_getc(r);
    }
    word[n] = '\0';
    if (c == '\n') r->pos--; /* the newline is the next token */
    return TC_TOK_WORD;
}

/* ---- lines of tokens */

int tc_lines_open(tc_lines *l, const char *path)
{
    memset(l, 0, sizeof *l);
    if (!strcmp(path, "-")) {
        /* the reader takes a path: stdin by its name */
        return tc_reader_open(&l->rd, "/dev/stdin");
    }
    return tc_reader_open(&l->rd, path);
}

void tc_lines_close(tc_lines *l)
{
    for (int64_t i = 0; i < l->cap; i++) free(l->tok[i]);
    free(l->tok);
    tc_reader_close(&l->rd);
    memset(l, 0, sizeof *l);
}

int tc_lines_next(tc_lines *l)
{
    l->n = 0;
    l->eol = false;
    for (;;) {
        if (l->n == l->cap) {
            int64_t cap = l->cap ? 2 * l->cap : 256;
            char **t = realloc(l->tok, (size_t)cap * sizeof *t);
            if (!t) return -1;
            l->tok = t;
            for (int64_t i = l->cap; i < cap; i++) l->tok[i] = NULL;
            for (int64_t i = l->cap; i < cap; i++)
                if (!(l->tok[i] = malloc(TC_MAX_WORD))) {
                    l->cap = i;
                    return -1;
                }
            l->cap = cap;
        }
        tc_tok k = tc_reader_next(&l->rd, l->tok[l->n]);
        if (k == TC_TOK_EOF) return l->n > 0;
        if (k == TC_TOK_EOL) {
            l->eol = true;
            return 1;
        }
        l->n++;
    }
}

/* ---- vocabulary */

static uint64_t hash_str(const char *w)
{
    uint64_t h = TC_FNV_OFFSET;
    for (; *w; w++) h = tc_fnv1a_step(h, (unsigned char)*w);
    return h;
}

/* The words' bytes, NUL-terminated one after another in blocks, instead of a malloc a
 * word: at a 1M-word vocabulary those took a call for each new word, a few tenths of a
 * second to free, and they scattered the words over the heap. After the sort, the kept
 * words are packed again in the vocabulary's order, so the frequent words share cache
 * lines and a pass in that order (writing the vectors) reads memory in order. */
struct tc_chars {
    struct tc_chars *next;
    size_t used, cap;
    char bytes[];
};
#define TC_CHARS_BLOCK ((size_t)1 << 20)

static void free_chars(struct tc_chars *b)
{
    while (b) {
        struct tc_chars *next = b->next;
        free(b);
        b = next;
    }
}

/* A copy of word (len bytes) in v's blocks; NULL when out of memory. */
static char *keep_word(tc_vocab *v, const char *word, size_t len)
{
    struct tc_chars *b = v->chars;
    if (!b || b->cap - b->used < len + 1) {
        const size_t cap = len + 1 > TC_CHARS_BLOCK ? len + 1 : TC_CHARS_BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = v->chars;
        b->used = 0;
        b->cap = cap;
        v->chars = b;
    }
    char *w = b->bytes + b->used;
    memcpy(w, word, len + 1);
    b->used += len + 1;
    return w;
}

void tc_vocab_init(tc_vocab *v) { memset(v, 0, sizeof *v); }

void tc_vocab_free(tc_vocab *v)
{
    free_chars(v->chars);
    free(v->words);
    free(v->counts);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

#define TC_VOCAB_EMPTY UINT64_MAX
#define TAG_MASK 0xffffffff00000000ull

static uint64_t slot_of(uint64_t hash, int64_t i) { return (hash & TAG_MASK) | (uint64_t)i; }
static int64_t slot_index(uint64_t slot) { return (int64_t)(slot & 0xffffffffu); }

static int rehash(tc_vocab *v, int64_t n_slots)
{
    uint64_t *s = malloc((size_t)n_slots * sizeof *s);
    if (!s) return -1;
    for (int64_t i = 0; i < n_slots; i++) s[i] = TC_VOCAB_EMPTY;
    const uint64_t mask = (uint64_t)n_slots - 1;
    for (int64_t i = 0; i < v->size; i++) {
        const uint64_t h = hash_str(v->words[i]);
        uint64_t k = h & mask;
        while (s[k] != TC_VOCAB_EMPTY) k = (k + 1) & mask;
        s[k] = slot_of(h, i);
    }
    free(v->slots);
    v->slots = s;
    v->n_slots = n_slots;
    return 0;
}

/* The slot of word (hash h): where it is, or the free slot where it would go. */
static uint64_t probe(const tc_vocab *v, const char *word, uint64_t h)
{
    const uint64_t mask = (uint64_t)v->n_slots - 1;
    uint64_t k = h & mask;
    for (;; k = (k + 1) & mask) {
        const uint64_t s = v->slots[k];
        if (s == TC_VOCAB_EMPTY ||
            ((s & TAG_MASK) == (h & TAG_MASK) && strcmp(v->words[slot_index(s)], word) == 0))
            return k;
    }
}

int64_t tc_vocab_find(const tc_vocab *v, const char *word)
{
    if (v->n_slots == 0) return -1;
    const uint64_t s = v->slots[probe(v, word, hash_str(word))];
    return s == TC_VOCAB_EMPTY ? -1 : slot_index(s);
}

/* tc_vocab_add with the word's hash_str already known */
static int64_t add_hashed(tc_vocab *v, const char *word, uint64_t h, int64_t count)
{
    if (v->n_slots == 0 && rehash(v, 1024)) return -1;
    const uint64_t k = probe(v, word, h);
    if (v->slots[k] != TC_VOCAB_EMPTY) {
        v->counts[slot_index(v->slots[k])] += count;
        return slot_index(v->slots[k]);
    }
    if (v->size >= INT32_MAX) return -1; /* an index must fit a slot's low 32 bits */
    if (v->size == v->cap) {
        int64_t cap = v->cap ? 2 * v->cap : 1024;
        char **w = realloc(v->words, (size_t)cap * sizeof *w);
        if (!w) return -1;
        v->words = w;
        int64_t *c = realloc(v->counts, (size_t)cap * sizeof *c);
        if (!c) return -1;
        v->counts = c;
        v->cap = cap;
    }
    char *copy = keep_word(v, word, strlen(word));
    if (!copy) return -1;
    int64_t i = v->size++;
    v->words[i] = copy;
    v->counts[i] = count;
    v->slots[k] = slot_of(h, i);
    if (2 * v->size > v->n_slots && rehash(v, 2 * v->n_slots)) return -1;
    return i;
}

int64_t tc_vocab_add(tc_vocab *v, const char *word, int64_t count)
{
    return add_hashed(v, word, hash_str(word), count);
}

/* Hints for a lookup of hash h that comes later: the hash slot (stage 0); then, from the
 * slot, where a word with h's tag keeps its pointer and count (1) and its bytes (2).
 * Each stage reads what the one before fetched, so they are spaced tokens apart. */
static void prefetch_lookup(const tc_vocab *v, uint64_t h, int stage)
{
    if (v->n_slots == 0) return;
    const uint64_t mask = (uint64_t)v->n_slots - 1;
    uint64_t k = h & mask;
    if (stage == 0) {
        tc_prefetch(&v->slots[k]);
        return;
    }
    /* along the probe's path, at most to the end of its block of 8 slots */
    for (; v->slots[k] != TC_VOCAB_EMPTY && (v->slots[k] & TAG_MASK) != (h & TAG_MASK); k = (k + 1) & mask)
        if ((k + 1) % 8 == 0) return;
    if (v->slots[k] == TC_VOCAB_EMPTY) return;
    const int64_t i = slot_index(v->slots[k]);
    if (stage == 1) {
        tc_prefetch(&v->words[i]);
        tc_prefetch_w(&v->counts[i]);
    } else {
        tc_prefetch(v->words[i]);
    }
}

typedef struct {
    char *word;
    int64_t count;
    int64_t index; /* before the sort */
    uint64_t prefix; /* word_prefix: most ties are settled without reading the word */
} tc_entry;

/* The word's first 8 bytes, big-endian, zeros past its end: two prefixes compare as the
 * words do (strcmp's unsigned bytes) unless they are equal. At a 1M-word vocabulary most
 * words share their count with many others, and comparing their bytes (a cache miss
 * each) took most of the sort. */
static uint64_t word_prefix(const char *w)
{
    uint64_t p = 0;
    for (int k = 0; k < 8; k++) {
        p <<= 8;
        if (*w) p |= (unsigned char)*w++;
    }
    return p;
}

static int entry_cmp(const void *a, const void *b)
{
    const tc_entry *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    if (x->prefix != y->prefix) return x->prefix < y->prefix ? -1 : 1;
    return strcmp(x->word, y->word);
}

int tc_vocab_finalize(tc_vocab *v, int64_t min_count) { return tc_vocab_finalize_codes(v, min_count, NULL); }

int tc_vocab_finalize_codes(tc_vocab *v, int64_t min_count, tc_codes *codes)
{
    tc_entry *e = malloc((size_t)(v->size ? v->size : 1) * sizeof *e);
    if (!e) return -1;
    int32_t *id = codes && codes->code ? malloc((size_t)(v->size ? v->size : 1) * sizeof *id) : NULL;
    if (codes && codes->code && !id) { /* the record is only a shortcut */
        tc_codes_free(codes);
        codes->dropped = true;
    }
    const bool remap = id != NULL;
    int64_t n = 0;
    size_t kept_bytes = 0;
    for (int64_t i = 0; i < v->size; i++) {
        if (remap) id[i] = TC_CODE_OOV;
        if (v->counts[i] >= min_count) {
            e[n].word = v->words[i];
            e[n].index = i;
            e[n].prefix = word_prefix(v->words[i]);
            e[n++].count = v->counts[i];
            kept_bytes += strlen(v->words[i]) + 1;
        }
    }
    qsort(e, (size_t)n, sizeof *e, entry_cmp);
    /* the kept words packed again, in order; without memory for it they stay where they are */
    struct tc_chars *packed = n ? malloc(sizeof *packed + kept_bytes) : NULL;
    if (packed) {
        packed->next = NULL;
        packed->used = 0;
        packed->cap = kept_bytes;
        for (int64_t i = 0; i < n; i++) {
            const size_t len = strlen(e[i].word) + 1;
            memcpy(packed->bytes + packed->used, e[i].word, len);
            e[i].word = packed->bytes + packed->used;
            packed->used += len;
        }
        free_chars(v->chars);
        v->chars = packed;
    }
    v->train_words = 0;
    for (int64_t i = 0; i < n; i++) {
        v->words[i] = e[i].word;
        v->counts[i] = e[i].count;
        v->train_words += e[i].count;
        if (remap) id[e[i].index] = (int32_t)i; /* indices are below 2^31 (tc_vocab_add) */
    }
    for (int64_t k = 0; remap && k < codes->n; k++)
        if (codes->code[k] >= 0) codes->code[k] = id[codes->code[k]];
    free(id);
    free(e);
    v->size = n;
    int64_t slots = 1024;
    while (slots < 2 * n) slots *= 2;
    return rehash(v, slots);
}

void tc_codes_free(tc_codes *codes)
{
    free(codes->code);
    codes->code = NULL;
    codes->n = codes->cap = 0;
}

void tc_codes_start(tc_codes *codes, int64_t max)
{
    const int64_t first = (int64_t)1 << 16; /* then doubling, up to max */
    codes->n = 0;
    codes->max = max;
    codes->dropped = false;
    codes->cap = max < first ? max : first;
    codes->code = codes->cap > 0 ? malloc((size_t)codes->cap * sizeof *codes->code) : NULL;
    if (!codes->code) codes->cap = 0;
}

void tc_codes_push(tc_codes *codes, int32_t c)
{
    if (!codes || !codes->code) return;
    if (codes->n == codes->cap) {
        int64_t cap = 2 * codes->cap;
        if (cap > codes->max) cap = codes->max;
        int32_t *g = codes->n < cap ? realloc(codes->code, (size_t)cap * sizeof *g) : NULL;
        if (!g) {
            tc_codes_free(codes);
            codes->dropped = true;
            return;
        }
        codes->code = g;
        codes->cap = cap;
    }
    codes->code[codes->n++] = c;
}

/* A token is looked up LOOKUP_AHEAD tokens after it is read. At a 1M-word vocabulary
 * nearly every lookup missed the cache four times (the slot, the word's pointer and
 * count, its bytes), one after the other; waiting, a token has these fetched in stages
 * (prefetch_lookup) while the tokens before it are read and looked up. The lookups stay
 * in corpus order, so every index and count is that of adding each token as it comes. */
#define LOOKUP_AHEAD 16 /* a power of 2 */
#define LOOKUP_ENTRY_AT 8 /* tokens before its lookup: the slot is read, the entry fetched */
#define LOOKUP_BYTES_AT 4 /* the entry is read, the bytes fetched */

typedef struct {
    tc_tok tok;
    uint64_t hash;
    char word[TC_MAX_WORD];
} pending_token;

typedef struct {
    tc_vocab *v;
    tc_codes *codes;
    bool add_words, line_open;
} scan_state;

static int take_token(scan_state *s, const pending_token *p)
{
    tc_vocab *v = s->v;
    if (p->tok == TC_TOK_EOL) {
        v->lines++;
        s->line_open = false;
        tc_codes_push(s->codes, TC_CODE_EOL);
        return 0;
    }
    s->line_open = true;
    v->total_tokens++;
    const int64_t i = s->add_words ? add_hashed(v, p->word, p->hash, 1) : 0;
    if (i < 0) return -1;
    tc_codes_push(s->codes, (int32_t)i);
    return 0;
}

/* Hints stage `stage` of prefetch_lookup for token j of the queue, if it is a word. */
static void prefetch_queued(const tc_vocab *v, const pending_token *q, int64_t j, int stage)
{
    if (j >= 0 && q[j % LOOKUP_AHEAD].tok == TC_TOK_WORD) prefetch_lookup(v, q[j % LOOKUP_AHEAD].hash, stage);
}

/* Reads every token of path, adding each word to v when add_words (and then recording
 * its index into codes when not NULL); the tokens, lines, size and hash always. */
static int scan_file(tc_vocab *v, const char *path, bool add_words, tc_codes *codes)
{
    scan_state s = {v, add_words ? codes : NULL, add_words, false}; /* no indices without words */
    tc_reader r;
    if (tc_reader_open(&r, path)) return -1;
    r.hashing = true;
    pending_token q[LOOKUP_AHEAD]; /* token j: q[j % LOOKUP_AHEAD], taken before j + LOOKUP_AHEAD is read */
    int64_t read = 0, taken = 0;
    int rc = 0;
    for (;;) {
        if (read - taken == LOOKUP_AHEAD && (rc = take_token(&s, &q[taken++ % LOOKUP_AHEAD]))) break;
        pending_token *p = &q[read % LOOKUP_AHEAD];
        if ((p->tok = tc_reader_next(&r, p->word)) == TC_TOK_EOF) break;
        read++;
        if (!add_words) continue;
        if (p->tok == TC_TOK_WORD) {
            p->hash = hash_str(p->word);
            prefetch_lookup(v, p->hash, 0);
        }
        prefetch_queued(v, q, read - 1 - (LOOKUP_AHEAD - LOOKUP_ENTRY_AT), 1);
        prefetch_queued(v, q, read - 1 - (LOOKUP_AHEAD - LOOKUP_BYTES_AT), 2);
    }
    while (!rc && taken < read) rc = take_token(&s, &q[taken++ % LOOKUP_AHEAD]);
    if (rc) {
        tc_reader_close(&r);
        errno = ENOMEM;
        return -1;
    }
    if (s.line_open) v->lines++;
    v->corpus_bytes = tc_reader_offset(&r);
    v->corpus_hash = r.hash;
    int err = ferror(r.f);
    tc_reader_close(&r);
    if (err) {
        errno = EIO;
        return -1;
    }
    return 0;
}

int tc_vocab_count_file(tc_vocab *v, const char *path) { return scan_file(v, path, true, NULL); }

int tc_vocab_count_file_codes(tc_vocab *v, const char *path, tc_codes *codes)
{
    return scan_file(v, path, true, codes);
}

int tc_vocab_scan_file(tc_vocab *v, const char *path) { return scan_file(v, path, false, NULL); }

#define TC_MAX_TOTAL_COUNT ((int64_t)1 << 62)

int tc_vocab_read(tc_vocab *v, const char *path, char *why, size_t why_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_len, "%s", strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0, total = 0;
    const char *bad = NULL;
    while (!bad && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        size_t w = 0;
        while (w < (size_t)len && line[w] != ' ' && line[w] != '\t') w++;
        size_t c = w;
        while (c < (size_t)len && (line[c] == ' ' || line[c] == '\t')) c++;
        int64_t count = 0;
        bool too_big = false;
        size_t d = c;
        for (; d < (size_t)len && line[d] >= '0' && line[d] <= '9'; d++) {
            const int digit = line[d] - '0';
            if (count > (TC_MAX_TOTAL_COUNT - digit) / 10) too_big = true;
            else count = count * 10 + digit;
        }
        if (w == 0) bad = "empty word";
        else if (w >= TC_MAX_WORD) bad = "word longer than the corpus reader's words";
        for (size_t k = 0; !bad && k < w; k++)
            if (tc_is_blank((unsigned char)line[k])) bad = "a control byte in the word";
        if (bad) break;
        line[w] = '\0';
        if (d == c || d != (size_t)len) bad = "bad count (not a decimal integer >= 0)";
        else if (too_big) bad = "count above 2^62";
        else if (count > TC_MAX_TOTAL_COUNT - total) bad = "counts add up to more than 2^62";
        else if (tc_vocab_find(v, line) >= 0) bad = "duplicate word";
        else if (tc_vocab_add(v, line, count) < 0) bad = "out of memory";
        else total += count;
    }
    int read_error = ferror(f);
    free(line);
    fclose(f);
    if (bad) snprintf(why, why_len, "line %lld: %s", (long long)lineno, bad);
    else if (read_error) snprintf(why, why_len, "%s", strerror(EIO));
    return bad || read_error ? -1 : 0;
}
