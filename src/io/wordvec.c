/* Word vectors in word2vec's text and binary formats (sg_wordvec_*).
 *
 * Invariants: an sg_wordvec owns one character buffer holding every word NUL-terminated
 * (offsets[i] is word i's start), a persistent (V,D) f32 tensor, and an open-addressing
 * hash table of row numbers (capacity a power of two, at least 2V, -1 = empty slot).
 * Words are unique. All memory comes from the context's allocator and is given back by
 * sg_wordvec_free, which must run before sg_ctx_free.
 * One contract for both directions: a file holds V >= 0 distinct words of 1..4095 bytes
 * without whitespace or NUL, D in 1..2^20, finite f32 values, and nothing after the V-th
 * record but whitespace. The writer refuses (before opening the file) any table the reader
 * would refuse, and writes through the atomic writer (io/io.h), so a failed or killed
 * write leaves the previous file. The reader gives back exactly the f32 values written.
 * Reading trusts the header's V only as far as the file can back it: a regular file too
 * short for V records fails before anything is allocated, and the rows, offsets and hash
 * table grow with the records read, from about 1 MiB of vectors; a pipe cannot be
 * rewound, so its format must be given, not detected.
 */
#include "io/io.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct sg_wordvec {
    sg_ctx *ctx;
    int64_t count, dim;
    char *chars;
    size_t chars_cap;
    int64_t *offsets;
    sg_tensor *vectors;
    int64_t *slots;
    int64_t n_slots;
};

#define WV_MAX_WORD 4096     /* words are shorter than this, in bytes */
#define WV_MAX_DIM (1 << 20) /* the largest D */

static bool is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static uint64_t hash_word(const char *w)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *w; w++) h = (h ^ (unsigned char)*w) * 1099511628211ull;
    return h;
}

static bool host_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static void swap4(void *p)
{
    unsigned char *b = p, t = b[0];
    b[0] = b[3];
    b[3] = t;
    t = b[1];
    b[1] = b[2];
    b[2] = t;
}

/* ---- writing */

/* True when every words[0..V) is distinct (NOMEM recorded and false if the check cannot
 * allocate; *dup then stays -1). *dup gets the later row of the first repeat found. */
static bool words_unique(sg_ctx *ctx, const char *const *words, int64_t V, int64_t *dup)
{
    *dup = -1;
    int64_t n = 16;
    while (n < 2 * V) n *= 2;
    int64_t *slots = sg__malloc(ctx, (size_t)n * sizeof *slots);
    if (!slots) return false;
    for (int64_t s = 0; s < n; s++) slots[s] = -1;
    const uint64_t mask = (uint64_t)n - 1;
    for (int64_t i = 0; i < V && *dup < 0; i++)
        for (uint64_t s = hash_word(words[i]) & mask;; s = (s + 1) & mask) {
            if (slots[s] < 0) {
                slots[s] = i;
                break;
            }
            if (strcmp(words[slots[s]], words[i]) == 0) {
                *dup = i;
                break;
            }
        }
    sg__free(ctx, slots);
    return *dup < 0;
}

static float table_value(const sg_tensor *table, int64_t i)
{
    return table->dtype == SG_F32 ? ((const float *)table->data)[i]
                                  : (float)((const double *)table->data)[i];
}

int sg_wordvec_write(const char *path, const sg_tensor *table, const char *const *words,
                     int binary)
{
    if (!table) return SG_ERR_NULL;
    sg_ctx *ctx = table->ctx;
    if (!path || !words) return sg__failc(ctx, SG_ERR_NULL, "sg_wordvec_write: NULL path or words");
    if (table->layout != SG_DENSE)
        return sg__failc(ctx, SG_ERR_LAYOUT, "sg_wordvec_write: table must be dense");
    if (!sg__is_float(table->dtype))
        return sg__failc(ctx, SG_ERR_DTYPE, "sg_wordvec_write: table must be f32 or f64");
    if (table->ndim != 2)
        return sg__failc(ctx, SG_ERR_SHAPE, "sg_wordvec_write: table must be (V,D), has %d dims",
                         table->ndim);
    const int64_t V = table->shape[0], D = table->shape[1];
    if (D < 1 || D > WV_MAX_DIM)
        return sg__failc(ctx, SG_ERR_SHAPE, "sg_wordvec_write: D is %lld, must be 1..%d",
                         (long long)D, WV_MAX_DIM);
    for (int64_t i = 0; i < V; i++) {
        const char *w = words[i];
        if (!w || !*w)
            return sg__failc(ctx, SG_ERR_ARG, "sg_wordvec_write: word %lld is NULL or empty",
                             (long long)i);
        size_t len = 0;
        for (const char *p = w; *p; p++, len++)
            if (is_space((unsigned char)*p))
                return sg__failc(ctx, SG_ERR_ARG,
                                 "sg_wordvec_write: word %lld (\"%s\") contains whitespace",
                                 (long long)i, w);
        if (len >= WV_MAX_WORD)
            return sg__failc(ctx, SG_ERR_ARG, "sg_wordvec_write: word %lld is %zu bytes, "
                                              "longer than %d", (long long)i, len, WV_MAX_WORD - 1);
    }
    int64_t dup;
    if (!words_unique(ctx, words, V, &dup)) {
        if (dup < 0) return sg__status_or_nomem(ctx);
        return sg__failc(ctx, SG_ERR_ARG, "sg_wordvec_write: word %lld (\"%s\") repeats an "
                                          "earlier word", (long long)dup, words[dup]);
    }
    for (int64_t i = 0; i < V * D; i++)
        if (!isfinite(table_value(table, i)))
            return sg__failc(ctx, SG_ERR_ARG, "sg_wordvec_write: value %lld of word %lld "
                                              "(\"%s\") is not a finite f32", (long long)(i % D),
                             (long long)(i / D), words[i / D]);
    sg__out o;
    int rc = sg__out_open(ctx, path, &o);
    if (rc) return rc;
    const bool swap = !host_little_endian();
    /* binary rows of f32 on a little-endian host are the file's bytes already: one write
     * a row instead of one a value (at 1M x 100 those calls were most of the writing) */
    const float *rows = binary && !swap && table->dtype == SG_F32 ? table->data : NULL;
    char num[64];
    int k = snprintf(num, sizeof num, "%lld %lld\n", (long long)V, (long long)D);
    rc = sg__out_write(&o, num, (size_t)k);
    for (int64_t i = 0; !rc && i < V; i++) {
        rc = sg__out_write(&o, words[i], strlen(words[i]));
        if (binary && !rc) rc = sg__out_write(&o, " ", 1);
        if (rows && !rc) rc = sg__out_write(&o, rows + i * D, (size_t)D * sizeof *rows);
        for (int64_t d = 0; !rows && !rc && d < D; d++) {
            float v = table_value(table, i * D + d);
            if (binary) {
                if (swap) swap4(&v);
                rc = sg__out_write(&o, &v, sizeof v);
            } else {
                k = snprintf(num, sizeof num, " %.9g", (double)v);
                rc = sg__out_write(&o, num, (size_t)k);
            }
        }
        if (!rc) rc = sg__out_write(&o, "\n", 1);
    }
    if (rc) {
        sg__out_abort(&o);
        return rc;
    }
    return sg__out_commit(&o);
}

/* ---- the word store */

void sg_wordvec_free(sg_wordvec *wv)
{
    if (!wv) return;
    sg_ctx *ctx = wv->ctx;
    sg__free(ctx, wv->chars);
    sg__free(ctx, wv->offsets);
    sg__free(ctx, wv->slots);
    if (wv->vectors) wv->vectors->owner_frees = false;
    sg_tensor_free(wv->vectors);
    sg__free(ctx, wv);
}

int64_t sg_wordvec_count(const sg_wordvec *wv) { return wv ? wv->count : -1; }
int64_t sg_wordvec_dim(const sg_wordvec *wv) { return wv ? wv->dim : -1; }
sg_tensor *sg_wordvec_vectors(const sg_wordvec *wv) { return wv ? wv->vectors : NULL; }

const char *sg_wordvec_word(const sg_wordvec *wv, int64_t i)
{
    if (!wv || i < 0 || i >= wv->count) return NULL;
    return wv->chars + wv->offsets[i];
}

int64_t sg_wordvec_find(const sg_wordvec *wv, const char *word)
{
    if (!wv || !word || wv->n_slots == 0) return -1;
    const uint64_t mask = (uint64_t)wv->n_slots - 1;
    for (uint64_t s = hash_word(word) & mask;; s = (s + 1) & mask) {
        int64_t r = wv->slots[s];
        if (r < 0) return -1;
        if (strcmp(wv->chars + wv->offsets[r], word) == 0) return r;
    }
}

/* Inserts row r (its word already stored); false if the word is already present. */
static bool insert_word(sg_wordvec *wv, int64_t r)
{
    const uint64_t mask = (uint64_t)wv->n_slots - 1;
    const char *w = wv->chars + wv->offsets[r];
    for (uint64_t s = hash_word(w) & mask;; s = (s + 1) & mask) {
        int64_t o = wv->slots[s];
        if (o < 0) {
            wv->slots[s] = r;
            return true;
        }
        if (strcmp(wv->chars + wv->offsets[o], w) == 0) return false;
    }
}

/* Room for `cap` rows (vectors, offsets, a hash table of at least 2 cap slots), keeping
 * the first `have` rows, whose words are re-hashed. False (NOMEM recorded) on failure,
 * with wv unchanged. */
static bool reserve_rows(sg_wordvec *wv, int64_t cap, int64_t have)
{
    sg_ctx *ctx = wv->ctx;
    int64_t slots = 16;
    while (slots < 2 * cap) slots *= 2;
    int64_t shape[2] = {cap, wv->dim};
    sg_tensor *vec = sg_tensor_new(ctx, SG_F32, 2, shape);
    int64_t *off = sg__malloc(ctx, (size_t)(cap > 0 ? cap : 1) * sizeof *off);
    int64_t *sl = sg__malloc(ctx, (size_t)slots * sizeof *sl);
    if (!vec || !off || !sl) {
        sg_tensor_free(vec);
        sg__free(ctx, off);
        sg__free(ctx, sl);
        return false;
    }
    if (have > 0) {
        memcpy(vec->data, wv->vectors->data, (size_t)(have * wv->dim) * sizeof(float));
        memcpy(off, wv->offsets, (size_t)have * sizeof *off);
    }
    sg_tensor_free(wv->vectors);
    sg__free(ctx, wv->offsets);
    sg__free(ctx, wv->slots);
    wv->vectors = vec;
    wv->offsets = off;
    wv->slots = sl;
    wv->n_slots = slots;
    for (int64_t s = 0; s < slots; s++) sl[s] = -1;
    for (int64_t r = 0; r < have; r++) (void)insert_word(wv, r);
    return true;
}

/* Bytes left in f from the current position, or -1 if that cannot be known (a pipe). */
static long long bytes_left(FILE *f)
{
    long pos = ftell(f);
    if (pos < 0 || fseek(f, 0, SEEK_END) != 0) return -1;
    long end = ftell(f);
    if (fseek(f, pos, SEEK_SET) != 0 || end < pos) return -1;
    return (long long)end - pos;
}

/* Appends a word (len bytes) to the character buffer, growing it geometrically. */
static bool push_word(sg_wordvec *wv, int64_t r, const char *w, size_t len, size_t *used)
{
    if (*used + len + 1 > wv->chars_cap) {
        size_t cap = wv->chars_cap ? wv->chars_cap : 4096;
        while (*used + len + 1 > cap) cap *= 2;
        char *n = sg__malloc(wv->ctx, cap);
        if (!n) return false;
        if (wv->chars) {
            memcpy(n, wv->chars, *used);
            sg__free(wv->ctx, wv->chars);
        }
        wv->chars = n;
        wv->chars_cap = cap;
    }
    memcpy(wv->chars + *used, w, len);
    wv->chars[*used + len] = '\0';
    wv->offsets[r] = (int64_t)*used;
    *used += len + 1;
    return true;
}

/* ---- reading */

/* Reads one whitespace-delimited token (leading whitespace skipped) into buf; returns its
 * length, 0 at end of file, -1 if longer than cap - 1, or -2 if it holds a NUL byte (no
 * C string could name it, and the writer cannot write one). *term gets the character
 * that ended it (EOF or the whitespace, which is consumed). */
static long read_token(FILE *f, char *buf, size_t cap, int *term)
{
    int c;
    do c = getc(f);
    while (c != EOF && is_space(c));
    size_t n = 0;
    while (c != EOF && !is_space(c)) {
        if (n + 1 >= cap) return -1;
        if (c == '\0') return -2;
        buf[n++] = (char)c;
        c = getc(f);
    }
    buf[n] = '\0';
    *term = c;
    return (long)n;
}

/* True when the line after the header is "word v1 ... vD" with D numbers, i.e. text.
 * f must be seekable: the record is read and f is put back where it was. */
static bool looks_like_text(FILE *f, int64_t D)
{
    long start = ftell(f);
    char tok[WV_MAX_WORD];
    int term = 0;
    bool text = read_token(f, tok, sizeof tok, &term) > 0 && term != '\n';
    for (int64_t d = 0; text && d < D; d++) {
        long n = read_token(f, tok, sizeof tok, &term);
        char *end;
        if (n <= 0) {
            text = false;
            break;
        }
        (void)strtod(tok, &end);
        text = *end == '\0' && (d + 1 < D ? term != '\n' : (term == '\n' || term == EOF ||
                                                            term == ' ' || term == '\r'));
    }
    fseek(f, start, SEEK_SET);
    return text;
}

sg_wordvec *sg_wordvec_read(sg_ctx *ctx, const char *path, int binary)
{
    if (!ctx) return NULL;
    if (!path) return sg__fail(ctx, SG_ERR_NULL, "sg_wordvec_read: NULL path");
    FILE *f = fopen(path, "rb");
    if (!f) return sg__fail(ctx, SG_ERR_IO, "sg_wordvec_read: cannot open %s: %s", path, strerror(errno));
    long long V = -1, D = -1;
    int c;
    if (fscanf(f, "%lld %lld", &V, &D) != 2 || V < 0 || D < 1 || D > WV_MAX_DIM ||
        (V > 0 && V > INT64_MAX / D / 8)) {
        fclose(f);
        return sg__fail(ctx, SG_ERR_FORMAT, "sg_wordvec_read: %s: bad header (want \"V D\")", path);
    }
    do c = getc(f);
    while (c == ' ' || c == '\t' || c == '\r');
    if (c != '\n') {
        fclose(f);
        return sg__fail(ctx, SG_ERR_FORMAT, "sg_wordvec_read: %s: junk after the header", path);
    }
    if (binary < 0 && V > 0) {
        /* Telling the formats apart reads the first record and rewinds to it, which a
         * stream that cannot seek (a pipe) does not allow: refuse before consuming it. */
        long pos = ftell(f);
        if (pos < 0 || fseek(f, pos, SEEK_SET) != 0) {
            fclose(f);
            return sg__fail(ctx, SG_ERR_ARG,
                            "sg_wordvec_read: %s cannot be rewound (a pipe?), so its format "
                            "cannot be detected: pass binary 0 (text) or 1 (binary)", path);
        }
        binary = !looks_like_text(f, D);
    }
    if (binary < 0) binary = 0;
    /* The fewest bytes V records take: binary "w" ' ' 4D bytes each; text "w" then
     * " x" per value, and a newline between records. */
    long long left = bytes_left(f);
    long long least = V == 0 ? 0 : binary ? V * (2 + 4 * D) : V * (2 + 2 * D) - 1;
    if (left >= 0 && left < least) {
        fclose(f);
        return sg__fail(ctx, SG_ERR_FORMAT,
                        "sg_wordvec_read: %s: the header's %lld words of %lld values need at "
                        "least %lld bytes, the file has %lld after the header",
                        path, V, D, least, left);
    }

    sg_wordvec *wv = sg__calloc(ctx, 1, sizeof *wv);
    if (!wv) {
        fclose(f);
        return NULL;
    }
    wv->ctx = ctx;
    wv->dim = D;
    /* Room starts at about 1 MiB of vectors (at least one row) and grows geometrically
     * as records arrive, so neither a header nor a file's size alone (a sparse file of
     * holes is large and holds nothing) can make the reader allocate much more than the
     * records it has read. */
    int64_t cap = ((int64_t)1 << 20) / (4 * D);
    if (cap < 1) cap = 1;
    if (cap > V) cap = V;
    if (!reserve_rows(wv, cap, 0)) {
        sg_wordvec_free(wv);
        fclose(f);
        return NULL;
    }

    const bool swap = !host_little_endian();
    char tok[WV_MAX_WORD];
    size_t used = 0;
    const char *why = NULL;
    int64_t r = 0;
    for (; r < V; r++) { /* on error r is the bad record */
        int term = 0;
        long n = read_token(f, tok, sizeof tok, &term);
        if (n > 0 && r == cap) {
            cap = cap > V / 2 ? V : 2 * cap;
            if (!reserve_rows(wv, cap, r)) {
                why = "out of memory";
                break;
            }
        }
        if (n <= 0) {
            why = n == -1 ? "word too long" : n == -2 ? "word holds a NUL byte" : "file ends early";
            break;
        }
        if (!push_word(wv, r, tok, (size_t)n, &used)) {
            why = "out of memory";
            break;
        }
        if (!insert_word(wv, r)) {
            why = "duplicate word";
            break;
        }
        float *row = (float *)wv->vectors->data + r * D;
        if (binary) {
            if (term != ' ') {
                why = "no space after the word";
                break;
            }
            if (fread(row, sizeof(float), (size_t)D, f) != (size_t)D) {
                why = "file ends inside a vector";
                break;
            }
            for (int64_t d = 0; d < D; d++) {
                if (swap) swap4(&row[d]);
                if (!isfinite(row[d])) why = "value is not finite";
            }
        } else {
            for (int64_t d = 0; d < D && !why; d++) {
                if (term == '\n' || term == EOF) {
                    why = "line has too few values";
                    break;
                }
                char *end;
                if (read_token(f, tok, sizeof tok, &term) <= 0) {
                    why = "line has too few values";
                    break;
                }
                row[d] = strtof(tok, &end);
                if (*end != '\0' || !isfinite(row[d])) why = "value is not a finite number";
            }
            while (!why && term != '\n' && term != EOF) {
                term = getc(f);
                if (term != '\n' && term != EOF && !is_space(term))
                    why = "line has too many values";
            }
        }
        if (why) break;
    }
    if (!why) { /* only whitespace may follow the V-th record */
        do c = getc(f);
        while (c != EOF && is_space(c));
        if (c != EOF) why = "data after the header's last record";
    }
    fclose(f);
    if (why) {
        if (strcmp(why, "out of memory") == 0) {
            sg_wordvec_free(wv);
            return NULL;
        }
        sg_wordvec_free(wv);
        return sg__fail(ctx, SG_ERR_FORMAT, "sg_wordvec_read: %s: record %lld: %s", path,
                        (long long)r + 1, why);
    }
    wv->count = V;
    wv->vectors->owner_frees = true;
    return wv;
}
