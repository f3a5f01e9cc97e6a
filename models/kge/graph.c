/* The TSV reader of knowledge-graph triples and its name dictionaries (kge.h).
 *
 * Invariants: the reader is a byte-at-a-time state machine over fixed-size reads, so a
 * line split across two reads parses as a whole one, and memory does not grow with a
 * line's length (at most KG_MAX_NAME bytes of each of the first three columns are kept;
 * longer ones are only counted). A line is judged when it ends, and only a good line
 * touches the dictionaries; on any error kg_read_tsv puts dictionaries and triples back
 * to their sizes at entry, which restores them because ids are handed out in order.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "kge.h"

#include "common/common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KG_READ_CHUNK ((size_t)1 << 16)

/* ---------------------------------------------------------------- dictionary */

/* FNV-1a 64, then a finalizer so that the low bits the table uses depend on every byte. */
static uint64_t kg_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

int kg_dict_init(kg_dict *d)
{
    memset(d, 0, sizeof *d);
    return 0;
}

void kg_dict_free(kg_dict *d)
{
    if (!d) return;
    for (int64_t i = 0; i < d->n; i++) free(d->names[i]);
    free(d->names);
    free(d->hashes);
    free(d->slots);
    memset(d, 0, sizeof *d);
}

/* The slot holding name, or the empty slot where it would go. */
static int64_t kg_dict_slot(const kg_dict *d, const char *name, size_t len, uint64_t h)
{
    for (int64_t s = (int64_t)(h & (uint64_t)d->mask);; s = (s + 1) & d->mask) {
        const int64_t id = d->slots[s];
        if (id < 0) return s;
        /* strncmp stops at the stored name's end: name[0, len) holds no NUL */
        if (d->hashes[id] == h && strncmp(d->names[id], name, len) == 0 && d->names[id][len] == '\0') return s;
    }
}

/* Fills slots[0, mask] with ids 0..n-1 (the slots hold nothing else). */
static void kg_dict_reindex(kg_dict *d)
{
    for (int64_t s = 0; s <= d->mask; s++) d->slots[s] = -1;
    for (int64_t id = 0; id < d->n; id++) {
        int64_t s = (int64_t)(d->hashes[id] & (uint64_t)d->mask);
        while (d->slots[s] >= 0) s = (s + 1) & d->mask;
        d->slots[s] = id;
    }
}

int64_t kg_dict_find(const kg_dict *d, const char *name, size_t len)
{
    if (!d->slots) return -1;
    return d->slots[kg_dict_slot(d, name, len, kg_hash(name, len))];
}

/* Room for one more name: arrays and a table at least twice the names. 0 or -1. */
static int kg_dict_reserve(kg_dict *d)
{
    if (d->n == d->cap) {
        const int64_t cap = d->cap ? 2 * d->cap : 64;
        char **names = realloc(d->names, (size_t)cap * sizeof *names);
        if (!names) return -1;
        d->names = names;
        uint64_t *hashes = realloc(d->hashes, (size_t)cap * sizeof *hashes);
        if (!hashes) return -1;
        d->hashes = hashes;
        d->cap = cap;
    }
    if (!d->slots || 2 * (d->n + 1) > d->mask + 1) {
        const int64_t size = d->slots ? 2 * (d->mask + 1) : 128;
        int64_t *slots = malloc((size_t)size * sizeof *slots);
        if (!slots) return -1;
        free(d->slots);
        d->slots = slots;
        d->mask = size - 1;
        kg_dict_reindex(d);
    }
    return 0;
}

int64_t kg_dict_add(kg_dict *d, const char *name, size_t len)
{
    const uint64_t h = kg_hash(name, len);
    if (d->slots) {
        const int64_t id = d->slots[kg_dict_slot(d, name, len, h)];
        if (id >= 0) return id;
    }
    char *copy = malloc(len + 1);
    if (!copy || kg_dict_reserve(d) != 0) {
        free(copy);
        return -1;
    }
    memcpy(copy, name, len);
    copy[len] = '\0';
    const int64_t id = d->n++;
    d->names[id] = copy;
    d->hashes[id] = h;
    d->slots[kg_dict_slot(d, name, len, h)] = id;
    return id;
}

void kg_dict_truncate(kg_dict *d, int64_t n)
{
    if (n < 0 || n >= d->n) return;
    for (int64_t i = n; i < d->n; i++) free(d->names[i]);
    d->n = n;
    kg_dict_reindex(d);
}

/* ---------------------------------------------------------------- triples */

int kg_triples_push(kg_triples *x, int64_t h, int64_t r, int64_t t)
{
    if (x->n == x->cap) {
        const int64_t cap = x->cap ? 2 * x->cap : 1024;
        int64_t **col[3] = {&x->h, &x->r, &x->t};
        for (int k = 0; k < 3; k++) { /* a moved column is kept even when a later one fails */
            int64_t *p = realloc(*col[k], (size_t)cap * sizeof *p);
            if (!p) return -1;
            *col[k] = p;
        }
        x->cap = cap;
    }
    x->h[x->n] = h;
    x->r[x->n] = r;
    x->t[x->n] = t;
    x->n++;
    return 0;
}

void kg_triples_free(kg_triples *x)
{
    if (!x) return;
    free(x->h);
    free(x->r);
    free(x->t);
    memset(x, 0, sizeof *x);
}

/* ---------------------------------------------------------------- the reader */

/* One line under way. Columns are counted past 3; names beyond 3 are not kept. */
typedef struct {
    const char *path;
    kg_dict *ents, *rels;
    kg_triples *out;
    sg_model_error *err;
    int64_t line;   /* 1-based number of the line under way */
    int64_t col;    /* tabs seen on it */
    bool any;       /* it has a byte besides a CR that may end it */
    bool cr;        /* its last byte was a CR, not yet known to end it */
    int nul_col, cr_col; /* first column (0-based) holding a NUL / a stray CR; -1: none */
    size_t len[3];  /* bytes of columns 0..2 (they may pass KG_MAX_NAME - 1) */
    char name[3][KG_MAX_NAME];
} kg_reader;


static void kg_line_reset(kg_reader *rd)
{
    rd->col = 0;
    rd->any = rd->cr = false;
    rd->nul_col = rd->cr_col = -1;
    rd->len[0] = rd->len[1] = rd->len[2] = 0;
}

/* The first fault of the ended line (0: none), in the order kge.h gives. */
static int kg_line_check(const kg_reader *rd)
{
    static const char *const empty[3] = {"empty entity name (head)", "empty relation name",
                                         "empty entity name (tail)"};
    sg_model_error *e = rd->err;
    const char *p = rd->path;
    const int64_t ln = rd->line;
    if (!rd->any) return tc_fail(e, SG_ERR_FORMAT, "%s:%" PRId64 ": empty line", p, ln);
    if (rd->col != 2)
        return tc_fail(e, SG_ERR_FORMAT,
                       "%s:%" PRId64 ": expected 3 tab-separated columns (head, relation, tail), found %" PRId64, p,
                       ln, rd->col + 1);
    if (rd->nul_col >= 0)
        return tc_fail(e, SG_ERR_FORMAT, "%s:%" PRId64 ": NUL byte in a name (column %d)", p, ln, rd->nul_col + 1);
    if (rd->cr_col >= 0)
        return tc_fail(e, SG_ERR_FORMAT, "%s:%" PRId64 ": carriage return inside a name (column %d)", p, ln,
                       rd->cr_col + 1);
    for (int c = 0; c < 3; c++) {
        if (rd->len[c] == 0) return tc_fail(e, SG_ERR_FORMAT, "%s:%" PRId64 ": %s", p, ln, empty[c]);
        if (rd->len[c] >= KG_MAX_NAME)
            return tc_fail(e, SG_ERR_FORMAT, "%s:%" PRId64 ": name longer than %d bytes (column %d)", p, ln,
                           KG_MAX_NAME - 1, c + 1);
    }
    return 0;
}

/* Judges the line that just ended and adds its triple. 0 or -1 (err set). */
static int kg_line_end(kg_reader *rd)
{
    if (kg_line_check(rd) != 0) return -1;
    const int64_t h = kg_dict_add(rd->ents, rd->name[0], rd->len[0]);
    const int64_t r = h < 0 ? -1 : kg_dict_add(rd->rels, rd->name[1], rd->len[1]);
    const int64_t t = r < 0 ? -1 : kg_dict_add(rd->ents, rd->name[2], rd->len[2]);
    if (t < 0 || kg_triples_push(rd->out, h, r, t) != 0)
        return tc_fail(rd->err, SG_ERR_NOMEM, "%s: out of memory", rd->path);
    rd->line++;
    kg_line_reset(rd);
    return 0;
}

/* A byte that is neither a line end nor a tab: part of column col's name. */
static void kg_name_byte(kg_reader *rd, unsigned char c)
{
    rd->any = true;
    if (rd->col >= 3) return;
    const int col = (int)rd->col;
    if (c == '\0' && rd->nul_col < 0) rd->nul_col = col;
    if (c == '\r' && rd->cr_col < 0) rd->cr_col = col;
    if (rd->len[col] < KG_MAX_NAME - 1) rd->name[col][rd->len[col]] = (char)c;
    rd->len[col]++;
}

/* Feeds buf[0, n). 0 or -1 (err set). */
static int kg_feed(kg_reader *rd, const unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = buf[i];
        if (rd->cr && c != '\n') kg_name_byte(rd, '\r'); /* the CR did not end the line */
        rd->cr = false;
        if (c == '\n') {
            if (kg_line_end(rd) != 0) return -1;
        } else if (c == '\r') {
            rd->cr = true; /* a line end, or a name byte once the next byte says so */
        } else if (c == '\t') {
            rd->col++;
            rd->any = true;
        } else {
            kg_name_byte(rd, c);
        }
    }
    return 0;
}

/* The whole file through kg_feed, then its last line if it has no end. 0 or -1. */
static int kg_read_all(kg_reader *rd, FILE *f, size_t chunk)
{
    unsigned char *buf = malloc(chunk);
    if (!buf) return tc_fail(rd->err, SG_ERR_NOMEM, "%s: out of memory", rd->path);
    int rc = 0;
    for (;;) {
        const size_t got = fread(buf, 1, chunk, f);
        if (got > 0 && kg_feed(rd, buf, got) != 0) {
            rc = -1;
            break;
        }
        if (got < chunk) {
            if (ferror(f)) rc = tc_fail(rd->err, SG_ERR_IO, "cannot read %s: %s", rd->path, strerror(errno));
            break;
        }
    }
    free(buf);
    if (rc != 0) return rc;
    if (rd->cr) kg_name_byte(rd, '\r'); /* a CR at the end of the file ends no line */
    if (rd->any && kg_line_end(rd) != 0) return -1;
    if (rd->line == 1) return tc_fail(rd->err, SG_ERR_FORMAT, "%s: no triples", rd->path);
    return 0;
}

int kg_read_tsv_chunked(const char *path, kg_dict *ents, kg_dict *rels, kg_triples *out, size_t chunk,
                        sg_model_error *err)
{
    if (!path || !ents || !rels || !out || chunk == 0)
        return tc_fail(err, SG_ERR_NULL, "kg_read_tsv: NULL argument or zero chunk");
    const int64_t n_ents = ents->n, n_rels = rels->n, n_out = out->n;
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return tc_fail(err, SG_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    kg_reader *rd = calloc(1, sizeof *rd);
    if (!rd) {
        fclose(f);
        return tc_fail(err, SG_ERR_NOMEM, "%s: out of memory", path);
    }
    rd->path = path;
    rd->ents = ents;
    rd->rels = rels;
    rd->out = out;
    rd->err = err;
    rd->line = 1;
    kg_line_reset(rd);
    const int rc = kg_read_all(rd, f, chunk);
    free(rd);
    fclose(f);
    if (rc != 0) {
        kg_dict_truncate(ents, n_ents);
        kg_dict_truncate(rels, n_rels);
        out->n = n_out;
        return -1;
    }
    if (err) {
        err->status = SG_OK;
        err->message[0] = '\0';
    }
    return 0;
}

int kg_read_tsv(const char *path, kg_dict *ents, kg_dict *rels, kg_triples *out, sg_model_error *err)
{
    return kg_read_tsv_chunked(path, ents, rels, out, KG_READ_CHUNK, err);
}
