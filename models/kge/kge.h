/* The knowledge graph as sgrad-kge's engine (engine.h) reads it: the TSV reader and the
 * name dictionaries (graph.c), and the filter index of known triples (filter.c); prefix
 * kg_. Clients of sgrad.h and sgrad_models.h only (the fuzz target compiles these two
 * files alone).
 *
 * Invariants: a dictionary's ids are 0..n-1 in first-appearance order and never change
 * once given; names are 1..KG_MAX_NAME-1 bytes without TAB, CR, LF or NUL. A read either
 * adds every triple of its file or changes nothing.
 */
#ifndef SG_MODELS_KGE_KGE_H
#define SG_MODELS_KGE_KGE_H

#include "sgrad_models.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ================================================================ the reader (graph.c) */

#define KG_MAX_NAME 256 /* a name is at most KG_MAX_NAME - 1 bytes */

/* Names <-> ids. names[i] is a NUL-terminated copy owned by the dictionary; the index is
 * an open-addressing table of ids (-1: empty), its size a power of two at least twice n. */
typedef struct {
    char **names;
    uint64_t *hashes; /* hashes[i]: the hash of names[i] */
    int64_t n, cap;
    int64_t *slots;
    int64_t mask; /* slot count - 1 */
} kg_dict;

/* An empty dictionary; 0, or -1 when out of memory. */
int kg_dict_init(kg_dict *d);
/* Frees everything d holds (d NULL or zeroed: nothing) and zeroes it. */
void kg_dict_free(kg_dict *d);
/* The id of name[0, len) (no NUL inside), or -1 when absent. */
int64_t kg_dict_find(const kg_dict *d, const char *name, size_t len);
/* The id of name[0, len): the existing one, or the next, n, after adding a copy; -1 when
 * out of memory (d unchanged). */
int64_t kg_dict_add(kg_dict *d, const char *name, size_t len);
/* Drops the names of ids >= n (n <= d->n): d as it was when it held n names. */
void kg_dict_truncate(kg_dict *d, int64_t n);

/* Triples by column: triple i is (h[i], r[i], t[i]). A zeroed struct is empty. */
typedef struct {
    int64_t *h, *r, *t;
    int64_t n, cap;
} kg_triples;
/* Appends (h, r, t); 0, or -1 when out of memory (x unchanged). */
int kg_triples_push(kg_triples *x, int64_t h, int64_t r, int64_t t);
/* Frees the arrays and zeroes x (NULL: nothing). */
void kg_triples_free(kg_triples *x);

/* Reads path, a file of `head<TAB>relation<TAB>tail` lines ended by "\n" or "\r\n" (the
 * last line may have no end), appending its triples to out in file order, entity names
 * to ents and relation names to rels (new names get the next ids). Returns 0, or -1 with
 * err set (NULL: not reported), and then ents, rels and out hold what they held before:
 *   SG_ERR_IO      "cannot read PATH: <strerror>"
 *   SG_ERR_FORMAT  "PATH:LINE: expected 3 tab-separated columns (head, relation, tail),
 *                  found N", "PATH:LINE: empty line", "PATH:LINE: empty entity name
 *                  (head)" (tail, "empty relation name"), "PATH:LINE: name longer than
 *                  255 bytes (column C)", "PATH:LINE: NUL byte in a name (column C)",
 *                  "PATH:LINE: carriage return inside a name (column C)", "PATH: no
 *                  triples" (an empty file)
 *   SG_ERR_NOMEM   "PATH: out of memory"
 * The first bad line is the one named; a line's column count is judged before its names. */
int kg_read_tsv(const char *path, kg_dict *ents, kg_dict *rels, kg_triples *out, sg_model_error *err);
/* kg_read_tsv reading chunk bytes at a time (chunk >= 1): for tests, which check that
 * lines split across reads parse alike. */
int kg_read_tsv_chunked(const char *path, kg_dict *ents, kg_dict *rels, kg_triples *out, size_t chunk,
                        sg_model_error *err);

/* ================================================================ the filter (filter.c) */

/* The distinct known triples of some sets, indexed both ways: by head, the (relation,
 * tail) pairs sorted; by tail, the (relation, head) pairs sorted. So the known tails of
 * (h, r) and the known heads of (r, t) are each one sorted, duplicate-free run, found by
 * a binary search. Memory: 2 (n_ent + 1) + 4 m int64s for m distinct triples. */
typedef struct {
    int64_t n_ent, n_rel, m;
    int64_t *by_head_off, *by_head_rel, *by_head_tail; /* head h's pairs: [off[h], off[h+1]) */
    int64_t *by_tail_off, *by_tail_rel, *by_tail_head;
} kg_filter;

/* Indexes the triples of sets[0..nsets) (NULL entries skipped), ids h, t in [0, n_ent)
 * and r in [0, n_rel). Returns 0, SG_ERR_INDEX (an id out of range), SG_ERR_ARG (a
 * negative count, sets NULL) or SG_ERR_NOMEM; f is left empty (freeable) on error. */
int kg_filter_build(kg_filter *f, const kg_triples *const *sets, int nsets, int64_t n_ent, int64_t n_rel);
/* Frees f's arrays and zeroes it (NULL or zeroed: nothing). */
void kg_filter_free(kg_filter *f);
/* The known tails of (h, r), ascending: *tails[0, *n) (borrowed from f); none (n 0) for
 * ids out of range. */
void kg_filter_tails(const kg_filter *f, int64_t h, int64_t r, const int64_t **tails, int64_t *n);
/* The known heads of (r, t), ascending, as kg_filter_tails. */
void kg_filter_heads(const kg_filter *f, int64_t r, int64_t t, const int64_t **heads, int64_t *n);
/* Whether (h, r, t) is one of the indexed triples. */
bool kg_filter_known(const kg_filter *f, int64_t h, int64_t r, int64_t t);

#endif
