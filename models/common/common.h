/* What the trainers of libsgrad_models share (models/w2v, models/fasttext; the programs
 * use its file helpers too); prefix tc_ (the corpus, its tokens and counts).
 *
 * Modules: vocab.c (the corpus reader; the vocabulary: counting, min-count, frequency
 * order), sampling.c (subsampling thresholds, the noise distribution of negative
 * sampling, the batches' row-hit caps), huffman.c (the Huffman tree of hierarchical
 * softmax), outfile.c (output files: resolved and replaced as the library's writers do),
 * util.c (errors, events, the clock, the public vocabulary and line reader). Random
 * numbers are inline here. Clients of the public sgrad.h and sgrad_models.h only.
 */
#ifndef SG_MODELS_COMMON_H
#define SG_MODELS_COMMON_H

#include "sgrad_models.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define TC_MAX_WORD SG_MAX_WORD /* longer words are cut to TC_MAX_WORD - 1 bytes, or fewer: not
                               inside a UTF-8 character */
/* ---- random numbers: splitmix64, one stream per trainer (deterministic per seed) */
typedef struct {
    uint64_t s;
} tc_rng;
static inline uint64_t tc_rng_next(tc_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Moves r past its next k outputs without computing them (its state is a counter). */
static inline void tc_rng_skip(tc_rng *r, uint64_t k)
{
    r->s += k * 0x9e3779b97f4a7c15ull;
}
/* Uniform in [0, n) for n < 2^32 (multiply-shift, no modulo bias worth mentioning). */
static inline uint32_t tc_rng_below(tc_rng *r, uint32_t n)
{
    return (uint32_t)(((tc_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* FNV-1a 64: the corpus's hash (tc_vocab.corpus_hash), the vocabulary's word hash, and
 * sgrad-w2v's checks that ranks and checkpoints agree. */
#define TC_FNV_OFFSET 1469598103934665603ull
static inline uint64_t tc_fnv1a_step(uint64_t h, unsigned char byte) { return (h ^ byte) * 1099511628211ull; }
/* n bytes, continuing from h (TC_FNV_OFFSET to begin). */
static inline uint64_t tc_fnv1a(uint64_t h, const void *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) h = tc_fnv1a_step(h, ((const unsigned char *)bytes)[i]);
    return h;
}

/* ---- corpus reader: whitespace-separated words; a newline ends a sentence */
/* What separates words besides the newline: space, every other control byte, DEL. */
static inline bool tc_is_blank(int c) { return c == ' ' || (c >= 0 && c < 0x20 && c != '\n') || c == 0x7f; }
typedef struct {
    FILE *f;
    unsigned char *buf;
    size_t len, pos;
    bool eof;
    int64_t buf_start; /* file offset of buf[0] */
    bool hashing;      /* set after open: keep hash, the FNV-1a 64 of the bytes read so far */
    uint64_t hash;
} tc_reader;
int tc_reader_open(tc_reader *r, const char *path); /* 0 or -1 (errno set) */
void tc_reader_close(tc_reader *r);
/* Bytes consumed so far: where a reader opened and moved there by tc_reader_seek goes on
 * with the same tokens. */
static inline int64_t tc_reader_offset(const tc_reader *r) { return r->buf_start + (int64_t)r->pos; }
/* Moves an open reader to offset (from tc_reader_offset); 0 or -1 (errno set). The hash
 * then covers only what is read after it. */
int tc_reader_seek(tc_reader *r, int64_t offset);
typedef enum { TC_TOK_EOF = 0, TC_TOK_WORD = 1, TC_TOK_EOL = 2 } tc_tok;
/* Next token into word (TC_MAX_WORD bytes, NUL-terminated). */
tc_tok tc_reader_next(tc_reader *r, char *word);
/* The reader's cut of an over-long word[0..n) whose first dropped byte is next: n, or
 * fewer so that no UTF-8 character is split (programs cut query words the same way). */
size_t tc_utf8_cut(const char *word, size_t n, int next);

/* Lines of a file (or stdin for "-") as token arrays (the public sg_lines). */
typedef struct {
    tc_reader rd;
    char **tok;
    int64_t n, cap;
    bool eol;
} tc_lines;
int tc_lines_open(tc_lines *l, const char *path); /* 0 or -1 (errno set) */
/* The next line into l->tok[0..l->n) and l->eol; false at the end of the file. A line of
 * no token that is the last one (no newline) ends the file. -1 on out of memory. */
int tc_lines_next(tc_lines *l);
void tc_lines_close(tc_lines *l);

/* ---- vocabulary (the public sg_vocab) */
typedef struct sg_vocab {
    int64_t size;     /* words */
    char **words;     /* words[i]: most frequent first, ties in byte order */
    int64_t *counts;  /* counts[i] */
    int64_t train_words; /* sum of counts of the kept words */
    int64_t total_tokens; /* every token of the corpus, kept or not */
    int64_t lines;
    int64_t corpus_bytes;  /* the counted file's size and FNV-1a 64 hash: what a checkpoint */
    uint64_t corpus_hash;  /* records of the corpus it was trained on */
    /* private: hash of word -> index, open addressing; a slot holds the hash's high 32
     * bits over the index (below 2^31), so a probe of another word is mostly rejected
     * without reading its string; all bits set when free */
    uint64_t *slots;
    int64_t n_slots, cap;
    struct tc_chars *chars; /* private: the words' bytes, packed in blocks (vocab.c) */
    bool line_open;         /* private: tokens handed in since the last sentence end */
} tc_vocab;
void tc_vocab_init(tc_vocab *v);
void tc_vocab_free(tc_vocab *v);
/* Adds count occurrences of word; returns its index, or -1 when out of memory (or past
 * 2^31 - 1 words, the most an index table slot holds). */
int64_t tc_vocab_add(tc_vocab *v, const char *word, int64_t count);
int64_t tc_vocab_find(const tc_vocab *v, const char *word); /* -1 if absent */
/* Drops words with count < min_count, sorts (count descending, then bytes ascending),
 * rebuilds the index and sets train_words. 0 or -1 (out of memory). */
int tc_vocab_finalize(tc_vocab *v, int64_t min_count);
/* Counts every word of a file (tokens and lines included). 0 or -1 (errno set). */
int tc_vocab_count_file(tc_vocab *v, const char *path);
/* The counted file as token codes, in its order: a word's index (after
 * tc_vocab_finalize_codes, its final id or TC_CODE_OOV), or TC_CODE_EOL for a newline.
 * Kept while it has at most `max` codes (newline marks included); past that, or when it
 * cannot grow, `code` is freed and NULL and `dropped` set. A trainer replays it instead
 * of reading and looking up the file again. */
enum { TC_CODE_OOV = -1, TC_CODE_EOL = -2 };
typedef struct {
    int32_t *code;
    int64_t n, cap, max;
    bool dropped;
} tc_codes;
/* Starts an empty record of at most max codes (none when max <= 0 or without memory). */
void tc_codes_start(tc_codes *codes, int64_t max);
/* Appends c to a kept record; past its max, or when it cannot grow, drops it. */
void tc_codes_push(tc_codes *codes, int32_t c);
/* tc_vocab_count_file that also records the file into codes (tc_codes_start first). */
int tc_vocab_count_file_codes(tc_vocab *v, const char *path, tc_codes *codes);
/* tc_vocab_finalize that also turns codes' word indices into the final ids (TC_CODE_OOV
 * for a dropped word); without memory for that, the record is dropped, not the vocabulary. */
int tc_vocab_finalize_codes(tc_vocab *v, int64_t min_count, tc_codes *codes);
/* Frees the record's codes (n and cap back to 0; max and dropped stay). */
void tc_codes_free(tc_codes *codes);
/* Reads a file as tc_vocab_count_file does but leaves the words alone: only the tokens,
 * lines, size and hash are set (for a vocabulary read from elsewhere). 0 or -1 (errno). */
int tc_vocab_scan_file(tc_vocab *v, const char *path);
/* Adds the words of a vocabulary file (word2vec.c's -save-vocab format: one `word count`
 * line per word, a word and a decimal count >= 0 separated by spaces or tabs) to an empty
 * v; finalize it after. 0, or -1 with the reason (a line number and what is wrong: an
 * empty, over-long (>= TC_MAX_WORD bytes), control-byte or duplicate word, a bad count,
 * counts summing past 2^62) or the read error in why[0..why_len). */
int tc_vocab_read(tc_vocab *v, const char *path, char *why, size_t why_len);
/* Writes v as `word count` lines in its order to path atomically (tc_outfile). 0 or -1
 * (errno set; path unchanged). */
int tc_vocab_save(const tc_vocab *v, const char *path);

/* ---- sampling tables */
/* Frequent-word subsampling as in word2vec.c: word w with count c is kept with
 * probability min(1, (sqrt(c / (sample * N)) + 1) * sample * N / c), N = train_words;
 * sample <= 0 keeps every word. */
double tc_keep_prob(int64_t count, double sample, int64_t train_words);
/* keep[i] as a 32-bit threshold: keep when a uniform 32-bit draw is below it. */
uint64_t *tc_keep_table(const tc_vocab *v, double sample);

/* Noise distribution P(i) = counts[i]^power / sum_j counts[j]^power as an alias table
 * (Vose): O(V) memory, exact up to 2^-32 per entry, O(1) per draw. */
typedef struct {
    uint32_t threshold; /* keep column i with probability threshold / 2^32, */
    int32_t alias;      /* else take alias */
} tc_noise_col;
typedef struct {
    int64_t n;
    tc_noise_col *col; /* one array: a draw reads one cache line, not two (large V) */
} tc_noise;
int tc_noise_init(tc_noise *t, const int64_t *counts, int64_t n, double power);
void tc_noise_free(tc_noise *t);
static inline uint32_t tc_noise_column(const tc_noise *t, uint64_t x)
{
    return (uint32_t)(((x >> 32) * (uint64_t)t->n) >> 32);
}
static inline int32_t tc_noise_draw(const tc_noise *t, tc_rng *r)
{
    uint64_t x = tc_rng_next(r);
    uint32_t i = tc_noise_column(t, x);
    const tc_noise_col c = t->col[i];
    return (uint32_t)x < c.threshold ? (int32_t)i : c.alias;
}
/* A table past this many bytes is left by the caches between draws (a 1M-word
 * vocabulary's is 8 MB), so its columns are worth prefetching. */
#define TC_NOISE_PREFETCH_MIN ((int64_t)1 << 21)
/* Hints that *p will soon be read (tc_prefetch) or written (tc_prefetch_w); nothing
 * where the compiler has no prefetch. */
static inline void tc_prefetch(const void *p)
{
#if defined(__GNUC__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
}
static inline void tc_prefetch_w(const void *p)
{
#if defined(__GNUC__)
    __builtin_prefetch(p, 1);
#else
    (void)p;
#endif
}
/* Prefetches the columns that the next `count` draws from r would read (r is not
 * advanced), so that those loads overlap instead of each draw waiting on its own: the
 * draws of one centre word's windows come one after another. A draw that comes later than
 * counted (after another use of r) only finds its column uncached. */
static inline void tc_noise_prefetch(const tc_noise *t, const tc_rng *r, int count)
{
    tc_rng peek = *r;
    for (int k = 0; k < count; k++) tc_prefetch(&t->col[tc_noise_column(t, tc_rng_next(&peek))]);
}
/* Probability of drawing i, recomputed from the table (for tests). */
double tc_noise_prob(const tc_noise *t, int64_t i);

/* ---- the clock, errors, events (util.c) */
double tc_now(void); /* seconds, monotonic */
/* Records status and the formatted message in *e (NULL: nowhere); returns -1. */
int tc_fail(sg_model_error *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The message of sgrad's last error on ctx, recorded in *e with its status; returns -1. */
int tc_fail_ctx(sg_model_error *e, const sg_ctx *ctx, const char *prefix);
/* Whether buf (len bytes) holds exactly the tokens of n packed sentences of lens[i]
 * tokens, each NUL-terminated (sg_vocab_add_packed): SG_OK with their count in *tokens,
 * or the error recorded. */
int tc_packed_check(const char *buf, int64_t len, const int64_t *lens, int64_t n, int64_t *tokens,
                    sg_model_error *err);
/* Clears *e (status SG_OK, message ""). */
void tc_ok(sg_model_error *e);
/* Where a trainer's events go: fn(ud, event), INFO ones up to level verbose. */
typedef struct {
    sg_event_fn fn;
    void *ud;
    int verbose;
} tc_events;
/* Sends e; returns the callback's answer (nonzero: stop), 0 without a callback. */
int tc_emit(const tc_events *ev, const sg_event *e);
/* An INFO event of `level` with the formatted message, when ev->verbose >= level. */
void tc_info(const tc_events *ev, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- output files (outfile.c), resolved and replaced as the library's writers do theirs:
 * a symlink is followed and its target replaced; only a regular file is replaced, and it
 * keeps its permission bits; a replacement is renamed into place only once complete. */
/* path with its symlinks followed (it may not exist yet): malloc'd, or NULL (errno set). */
char *tc_follow_links(const char *path);
/* errno values of the functions below for an output that cannot be replaced: a file that
 * is not regular (not a directory: EISDIR), and a path whose links do not lead to the file
 * it names (a /proc link to a deleted file). They are beyond the system's own values, so
 * no system error is mistaken for them; tc_out_strerror says each in words (and any other
 * errno as strerror). */
#define TC_ENOTREG 4097
#define TC_ENOTHERE 4098
const char *tc_out_strerror(int err);

/* A path's identities: the file it names, if it exists, and its directory entry (the
 * directory's device and inode, and the final name, after links are followed), which an
 * output not yet written has too. Two paths name the same file when either matches:
 * "o.txt", "./o.txt" and "$PWD/o.txt" do, and so do a link and its target, even one not
 * yet written. */
typedef struct {
    bool exists;
    dev_t dev, dir_dev;
    ino_t ino, dir_ino;
    char *target;     /* the path, links followed (malloc'd) */
    const char *name; /* its final component, within target; NULL: no entry known */
} tc_path_id;
/* 0, or -1 (errno set) when the path names no file and its links or directory cannot be
 * examined; release id->target with free either way. */
int tc_path_identify(const char *path, tc_path_id *id);
bool tc_path_same(const tc_path_id *a, const tc_path_id *b);
/* The same directory entry only: two hard links are two entries, each replaced by a
 * rename of its own. */
bool tc_path_same_entry(const tc_path_id *a, const tc_path_id *b);

/* atomic text output: a temporary file beside the destination, renamed over it on commit */
typedef struct {
    FILE *f; /* write here between open and commit/abort */
    char *path, *tmp;
} tc_outfile;
/* 0, or -1 (errno set) when path's target is not a regular file or no temporary file can
 * be made beside it. */
int tc_outfile_open(tc_outfile *o, const char *path);
/* Flushes, fsyncs and renames the file over path, then fsyncs the directory. 0, or -1
 * (errno set; the temporary file removed, path unchanged). Releases o either way. */
int tc_outfile_commit(tc_outfile *o);
/* Removes the temporary file; path unchanged. */
void tc_outfile_abort(tc_outfile *o);

/* several files replaced together: each is written whole to staged[i], beside its
 * destination, by a writer that itself replaces staged[i] atomically; only when all are
 * written are they renamed over their destinations. */
#define TC_STAGED_MAX 2
typedef struct {
    int n, failed;                  /* failed: the file an error came from */
    int renamed;                    /* how many are in place (tc_staged_commit) */
    char *dest[TC_STAGED_MAX];      /* the destinations, links followed */
    char *staged[TC_STAGED_MAX];    /* write here (empty files until then) */
    int mode[TC_STAGED_MAX];        /* the old files' permission bits, -1 where none */
} tc_staged;
/* Makes the n (<= TC_STAGED_MAX) staged files. 0, or -1 (errno set, s->failed the path's
 * index, nothing left behind). */
int tc_staged_open(tc_staged *s, const char *const *paths, int n);
/* Gives the staged files their old files' modes and renames them into place, in order.
 * 0, or -1 (errno set, s->failed the index): the staged files are removed either way, and
 * only a rename failing after an earlier one succeeded leaves the set half replaced. */
int tc_staged_commit(tc_staged *s);
/* Removes the staged files; the destinations unchanged. */
void tc_staged_abort(tc_staged *s);

/* The helpers of outfile.c that the programs' checks (tools/common) use: where an output
 * goes (its file's stat in *st and *exists, *dest its links followed), and the
 * directory part of a path (malloc'd). */
#include <sys/stat.h>
int tc_resolve_output(const char *path, char **dest, struct stat *st, bool *exists);
char *tc_dir_of(const char *path);

/* ---- batched steps (sampling.c): a batch ends once a table row occurs in it
 * tc_row_hit_cap(bound, lr) times. A step sums the updates of a row, so its summed step is
 * about lr * cap single steps. TC_ROW_STEP_BOUND is skip-gram's (word2vec.c's default
 * 0.025 x 256 hits); TC_CBOW_INPUT_STEP_BOUND is for CBOW's context rows, which get each
 * bag's undivided error (word2vec.c's rule), so one hit is a whole step and the bags'
 * errors are alike (docs/word2vec.md "What differs: batched steps"). The cap is at
 * most TC_MAX_ROW_HITS and at least 1. */
#define TC_MAX_ROW_HITS 256
#define TC_ROW_STEP_BOUND 6.4
#define TC_CBOW_INPUT_STEP_BOUND 3.2
int tc_row_hit_cap(double bound, double lr);

/* ---- Huffman tree of hierarchical softmax (word2vec's and fastText's construction) */
/* Over n >= 1 leaves with counts in non-increasing order (a finalized vocabulary's): the
 * two lightest of the unmerged leaves and inner nodes merge into the next inner node
 * (inner node k is the k-th merge, 0 <= k < n - 1; the root is n - 2), a leaf winning a
 * tie only when strictly lighter. Leaf c's path is entries [offsets[c], offsets[c+1]) of
 * nodes and codes, from its parent up to the root; a code is 1 where the path goes
 * through the second node merged. */
typedef struct {
    int64_t n;        /* leaves */
    int64_t *offsets; /* (n + 1) */
    int64_t *nodes;   /* inner node of each path entry */
    int64_t *codes;   /* 0/1 */
} tc_huffman;
/* 0, or -1 for n < 1, counts not non-increasing, negative or summing past INT64_MAX, or
 * out of memory. */
int tc_huffman_build(tc_huffman *t, const int64_t *counts, int64_t n);
void tc_huffman_free(tc_huffman *t);

#endif
