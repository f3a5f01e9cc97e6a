/* sgrad-w2v: word2vec (skip-gram and CBOW with negative sampling) on sgrad.
 *
 * Modules (one prefix each): vocab.c (w2v_vocab_*: counting, min-count, frequency order,
 * the corpus reader), sampling.c (w2v_rng_*, subsampling thresholds, the unigram^0.75
 * noise distribution), train.c (w2v_train: batches of examples through sgrad ops),
 * query.c (nearest neighbours, analogies, the analogy benchmark), progress.c, main.c
 * (command line). Every module but main.c can be #included by a test.
 */
#ifndef SG_W2V_H
#define SG_W2V_H

#include "sgrad.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define W2V_MAX_WORD 100     /* longer words are cut to W2V_MAX_WORD - 1 bytes */
#define W2V_MAX_SENTENCE 1000 /* longer lines are cut into sentences of this many words */
/* A batch ends once a table row occurs in it w2v_row_hit_cap(bound, alpha) times: a step
 * sums the updates of a row, so the summed step is bounded by about alpha * cap single
 * steps. The bound is W2V_ROW_STEP_BOUND (skip-gram's default 0.025 x 256 hits), and
 * W2V_CBOW_INPUT_STEP_BOUND for CBOW's context rows, which get each bag's undivided error
 * (word2vec.c's rule), so that one hit is a whole step and the bags' errors are alike (see
 * tools/w2v/README.md "What differs: batched steps"); the cap is at most W2V_MAX_ROW_HITS
 * and at least 1. */
#define W2V_MAX_ROW_HITS 256
#define W2V_ROW_STEP_BOUND 6.4
#define W2V_CBOW_INPUT_STEP_BOUND 3.2
int w2v_row_hit_cap(double bound, double alpha);
/* Training stops as diverged once a step's loss per example exceeds this many times the
 * first step's (or is not finite). */
#define W2V_DIVERGED_FACTOR 10.0

/* ---- random numbers: splitmix64, one stream per trainer (deterministic per seed) */
typedef struct {
    uint64_t s;
} w2v_rng;
static inline uint64_t w2v_rng_next(w2v_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [0, n) for n < 2^32 (multiply-shift, no modulo bias worth mentioning). */
static inline uint32_t w2v_rng_below(w2v_rng *r, uint32_t n)
{
    return (uint32_t)(((w2v_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* ---- corpus reader: whitespace-separated words; a newline ends a sentence */
typedef struct {
    FILE *f;
    unsigned char *buf;
    size_t len, pos;
    bool eof;
    int64_t buf_start; /* file offset of buf[0] */
    bool hashing;      /* set after open: keep hash, the FNV-1a 64 of the bytes read so far */
    uint64_t hash;
} w2v_reader;
int w2v_reader_open(w2v_reader *r, const char *path); /* 0 or -1 (errno set) */
void w2v_reader_close(w2v_reader *r);
/* Bytes consumed so far: where a reader opened and moved there by w2v_reader_seek goes on
 * with the same tokens. */
static inline int64_t w2v_reader_offset(const w2v_reader *r) { return r->buf_start + (int64_t)r->pos; }
/* Moves an open reader to offset (from w2v_reader_offset); 0 or -1 (errno set). The hash
 * then covers only what is read after it. */
int w2v_reader_seek(w2v_reader *r, int64_t offset);
typedef enum { W2V_TOK_EOF = 0, W2V_TOK_WORD = 1, W2V_TOK_EOL = 2 } w2v_tok;
/* Next token into word (W2V_MAX_WORD bytes, NUL-terminated). */
w2v_tok w2v_reader_next(w2v_reader *r, char *word);

/* ---- vocabulary */
typedef struct {
    int64_t size;     /* words */
    char **words;     /* words[i]: most frequent first, ties in byte order */
    int64_t *counts;  /* counts[i] */
    int64_t train_words; /* sum of counts of the kept words */
    int64_t total_tokens; /* every token of the corpus, kept or not */
    int64_t lines;
    int64_t corpus_bytes;  /* the counted file's size and FNV-1a 64 hash: what a checkpoint */
    uint64_t corpus_hash;  /* records of the corpus it was trained on */
    /* private: hash of word -> index, open addressing */
    int64_t *slots;
    int64_t n_slots, cap;
} w2v_vocab;
void w2v_vocab_init(w2v_vocab *v);
void w2v_vocab_free(w2v_vocab *v);
/* Adds one occurrence of word; returns its index or -1 on out of memory. */
int64_t w2v_vocab_add(w2v_vocab *v, const char *word, int64_t count);
int64_t w2v_vocab_find(const w2v_vocab *v, const char *word); /* -1 if absent */
/* Drops words with count < min_count, sorts (count descending, then bytes ascending),
 * rebuilds the index and sets train_words. 0 or -1 (out of memory). */
int w2v_vocab_finalize(w2v_vocab *v, int64_t min_count);
/* Counts every word of a file (tokens and lines included). 0 or -1 (errno set). */
int w2v_vocab_count_file(w2v_vocab *v, const char *path);

/* ---- sampling tables */
/* Frequent-word subsampling as in word2vec.c: word w with count c is kept with
 * probability min(1, (sqrt(c / (sample * N)) + 1) * sample * N / c), N = train_words;
 * sample <= 0 keeps every word. */
double w2v_keep_prob(int64_t count, double sample, int64_t train_words);
/* keep[i] as a 32-bit threshold: keep when a uniform 32-bit draw is below it. */
uint64_t *w2v_keep_table(const w2v_vocab *v, double sample);

/* Noise distribution P(i) = counts[i]^power / sum_j counts[j]^power as an alias table
 * (Vose): O(V) memory, exact up to 2^-32 per entry, O(1) per draw. */
typedef struct {
    int64_t n;
    uint32_t *threshold; /* keep i with probability threshold[i] / 2^32, */
    int32_t *alias;      /* else take alias[i] */
} w2v_noise;
int w2v_noise_init(w2v_noise *t, const int64_t *counts, int64_t n, double power);
void w2v_noise_free(w2v_noise *t);
static inline int32_t w2v_noise_draw(const w2v_noise *t, w2v_rng *r)
{
    uint64_t x = w2v_rng_next(r);
    uint32_t i = (uint32_t)(((x >> 32) * (uint64_t)t->n) >> 32);
    return (uint32_t)x < t->threshold[i] ? (int32_t)i : t->alias[i];
}
/* Probability of drawing i, recomputed from the table (for tests). */
double w2v_noise_prob(const w2v_noise *t, int64_t i);

/* ---- training */
typedef enum { W2V_ENGINE_FUSED, W2V_ENGINE_GRAPH } w2v_engine;

typedef struct {
    const char *train;
    const char *output; /* the vectors file (main.c requires one before training) */
    int size, window, negative, iter, threads, cbow, binary, hogwild, verbose;
    int64_t min_count;
    int64_t batch; /* (input, target) examples per step */
    double sample, alpha;
    uint64_t seed;
    w2v_engine engine;
    const char *save_context; /* -save-context: the output vectors file, or NULL */
    const char *checkpoint;   /* -checkpoint: written every save_every steps and at the end */
    int64_t save_every;       /* -save-every: steps between checkpoints; 0: each epoch's end */
    const char *resume;       /* -resume: a checkpoint to continue from, or NULL */
    const char *log;          /* -log: JSON lines of training progress, or NULL */
} w2v_config;
/* Fills word2vec.c's defaults (alpha: 0.025, or 0.05 once cbow is known: < 0 means
 * "pick by mode"). */
void w2v_config_default(w2v_config *c);

typedef struct {
    double seconds;        /* training wall time (after the vocabulary is built) */
    double words_per_sec_thread; /* corpus tokens * epochs / seconds / threads */
    double final_loss;     /* mean loss per example over the last epoch */
    int64_t examples;      /* examples trained on, all epochs */
    int64_t steps;         /* sgrad steps (batches), all epochs */
    int64_t vocab_size;
} w2v_result;

/* A trained model: the context owns both tables. */
typedef struct {
    sg_ctx *ctx;
    sg_tensor *in;  /* (V,D) f32: the word vectors */
    sg_tensor *out; /* (V,D) f32: the output (context) vectors */
} w2v_model;

/* Most entries of each per-step int64 index array, allocated up front (twice: the next
 * batch is drawn while a step runs): CBOW's context slots (batch * 2 * window) and the
 * targets (batch * (negative + 1)); 2^26 entries are 512 MB. */
#define W2V_MAX_STEP_SLOTS ((int64_t)1 << 26)
/* 0 when cfg's per-step arrays fit W2V_MAX_STEP_SLOTS; otherwise -1 with a message naming
 * the flags printed to err. */
int w2v_config_check(const w2v_config *cfg, FILE *err);
/* Checks before any work that the corpus is a regular file (it is read once per epoch,
 * which a pipe or stdin cannot be), that -resume names a readable file, and that every
 * output (-output, -save-context, -checkpoint, -log) can be written: its directory exists
 * and is writable, the path is not a directory or other non-regular file, no two outputs
 * are the same path. 0, or -1 with a message printed to err. Write-time errors (a full
 * disk) remain possible; vectors and checkpoints are written atomically, so they leave an
 * old file intact. */
int w2v_check_paths(const w2v_config *cfg, FILE *err);

/* ---- checkpoints (checkpoint.c): the trainer's position between two steps, taken before
 * the next batch is drawn; with the tables and the optimizer it decides the rest of a run */
typedef struct {
    int epoch;           /* the epoch under way; cfg->iter once training is over */
    int64_t offset;      /* corpus bytes consumed in this epoch */
    bool epoch_done;     /* the reader has met the corpus's end in this epoch */
    uint64_t rng;        /* the trainer's random stream */
    int64_t tokens;      /* corpus tokens read, all epochs */
    int32_t sentence[W2V_MAX_SENTENCE]; /* the current sentence: len words, pos the next */
    int32_t len, pos;
    int64_t steps, examples;   /* all epochs */
    double start_loss;         /* the first step's loss per example (divergence check) */
    double epoch_loss;         /* this epoch's loss sum and examples so far */
    int64_t epoch_examples;
} w2v_position;
/* Writes a checkpoint of the run (the tables as "W_in" and "W_out", the optimizer, the
 * position, the training flags and the corpus's size and hash) to path atomically. 0, or
 * -1 with a message printed to err (path then holds its previous content). */
int w2v_checkpoint_save(const char *path, const w2v_config *cfg, const w2v_vocab *v,
                        const w2v_model *m, sg_optim *opt, const w2v_position *pos, FILE *err);
/* 0 when path is a sgrad-w2v checkpoint made with cfg's training flags from the corpus v
 * was counted from; otherwise -1 with a message printed to err naming the difference. */
int w2v_checkpoint_check(const char *path, const w2v_config *cfg, const w2v_vocab *v, FILE *err);
/* Restores the tables, the optimizer (set up as for a fresh run) and the position from a
 * checkpoint that passed w2v_checkpoint_check. 0, or -1 with a message printed to err. */
int w2v_checkpoint_load(const char *path, const w2v_config *cfg, const w2v_vocab *v,
                        const w2v_model *m, sg_optim *opt, w2v_position *pos, FILE *err);

/* Trains on cfg->train with vocabulary v (finalized). Progress goes to `log` (NULL:
 * silent). Returns 0, or -1 with a message printed to stderr: divergence, no training
 * example at all (nothing would be learnt), a failed step. The model is left in *m
 * (free with w2v_model_free) when m is not NULL. */
int w2v_train(const w2v_config *cfg, const w2v_vocab *v, FILE *log, w2v_result *res,
              w2v_model *m);
void w2v_model_free(w2v_model *m);

/* ---- progress line */
typedef struct {
    FILE *f;
    bool tty;
    double start, last_print;
    int threads;
} w2v_progress;
double w2v_now(void); /* seconds, monotonic */
void w2v_progress_init(w2v_progress *p, FILE *f, int threads);
/* done/total in words; loss: mean per example since the previous call. Prints when due
 * (each 0.2 s on a terminal, redrawn in place; each 5 s otherwise) or when force. */
void w2v_progress_update(w2v_progress *p, int64_t done, int64_t total, double lr,
                         double loss, bool force);

/* ---- -log: training progress as JSON lines, one record per 1/200 of the words and one
 * at the end: {"epoch", "words", "total_words", "progress", "steps", "lr", "loss" (mean
 * per example since the previous record; null if none), "words_per_sec_thread" (since the
 * previous record), "elapsed_s"} */
typedef struct {
    FILE *f; /* NULL: no log */
    int threads;
    double start, last_time;
    int64_t last_words, next_words;
    double loss;
    int64_t n;
} w2v_log;
void w2v_log_init(w2v_log *l, FILE *f, int threads);
/* Adds a step's loss (the sum over its n examples) at `words` of `total` read; writes a
 * record when due or when force. */
void w2v_log_update(w2v_log *l, int epoch, int64_t words, int64_t total, int64_t steps, double lr,
                    double loss_sum, int64_t n, bool force);

/* ---- queries on a vectors file */
/* Top-k rows by cosine with row q (q excluded); sims may be NULL. Returns how many. */
int w2v_nearest(const float *unit, int64_t V, int64_t D, const float *query,
                const int64_t *exclude, int n_exclude, int k, int64_t *best, float *sims);
/* Rows of vec normalised to unit length into a new malloc'd array (zero rows stay 0). */
float *w2v_unit_rows(sg_tensor *vec);
int w2v_cmd_neighbors(sg_ctx *ctx, const char *path, const char *words, int k, FILE *out);
int w2v_cmd_analogy(sg_ctx *ctx, const char *path, const char *a, const char *b,
                    const char *c, FILE *out);
/* Analogy benchmark: 3CosAdd over the `restrict` most frequent words (file order);
 * questions lowercased; prints per-section and total accuracy over covered questions. */
typedef struct {
    int64_t questions, covered, correct;
} w2v_eval;
int w2v_cmd_evaluate(sg_ctx *ctx, const char *path, const char *questions, int64_t restrict_,
                     FILE *out, w2v_eval *res);

#endif
