/* sgrad-w2v: word2vec (skip-gram and CBOW with negative sampling and/or hierarchical
 * softmax) on sgrad.
 *
 * Modules: train.c (w2v_train: batches of examples through sgrad ops), query.c (nearest
 * neighbours, analogies, the analogy benchmark), classes.c (-classes: word2vec.c's
 * k-means over the vectors), main.c (command line); the corpus
 * reader, vocabulary, sampling tables, random numbers and progress line are the tools'
 * shared code (../common/common.h). Every module but main.c can be #included by a test.
 */
#ifndef SG_W2V_H
#define SG_W2V_H

#include "../common/common.h"
#include "sgrad.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define W2V_MAX_WINDOW 100   /* -window and -negative: at most these */
#define W2V_MAX_NEGATIVE 100
#define W2V_MAX_SENTENCE 1000 /* longer lines are cut into sentences of this many words */
/* The most token ids (4 bytes each) the trainer keeps from its first epoch to replay in
 * the later ones instead of reading and looking up the corpus again: 256 MiB. */
#define W2V_TOKEN_CACHE_MAX ((int64_t)1 << 26)
/* The batches' row-hit caps are tools/common's (tc_row_hit_cap). The same bound holds for
 * hierarchical softmax's inner-node rows (-hs 1): the root is on every path, so it caps a
 * batch at tc_row_hit_cap(W2V_HS_NODE_STEP_BOUND, alpha) examples; measured in
 * tools/w2v/README.md ("Hierarchical softmax"). */
#define W2V_HS_NODE_STEP_BOUND TC_ROW_STEP_BOUND
/* Training stops as diverged once a step's loss per example exceeds this many times the
 * first step's (or is not finite). */
#define W2V_DIVERGED_FACTOR 10.0

/* ---- training */
typedef enum { W2V_ENGINE_FUSED, W2V_ENGINE_GRAPH } w2v_engine;

typedef struct w2v_model w2v_model;
/* Several processes training one model (dist.c, under mpirun; NULL in w2v_config: one
 * process). Rank r trains on its share of the corpus, lines from byte
 * floor(r S / P) to floor((r + 1) S / P), each moved to the start of the next line, in
 * every epoch. Every sync_steps steps the ranks call sync (collective): each rank's
 * changes to the tables since the last sync are summed and added to the tables all ranks
 * held then, so every rank leaves it with the same tables and every example's update
 * counts once at its full learning rate. The first call, before any step, gives every
 * rank rank 0's tables. active: this rank is still in its epoch's share; *any_active
 * receives whether any rank is. 0, or -1 with a message printed to stderr (MPI failed or
 * out of memory: stop).
 *
 * Hot rows (3 ranks or more): summed changes overshoot on rows that every rank changes
 * many times between syncs (each rank's own steps already take such a row most of the
 * way, so P ranks' sum takes it about P times as far; 2 ranks only swing it about its
 * optimum). So the rows expected to be changed more than W2V_HOT_STEP_BOUND / (alpha (P -
 * 2)) times per rank between two merges are merged more often, in levels: level l (1 <= l <=
 * hot_levels) every hot_period[l] steps (sync_steps >> l; from sync_steps = 2^17 on,
 * 2^(16 - l), so that the finest level is every step), by merge_hot (collective), which merges the
 * first hot_in[l] rows of the input table, the first hot_out[l] of the output table (both
 * ordered by count) and the last hot_node[l] inner nodes (the root's end); a level's rows
 * include every finer level's. train.c plans the levels from the counts
 * (plan_hot_merges), the same on every rank. merge_hot's `active` and *any_active are
 * sync's (both implementations gather them at every hot merge). A
 * rank whose share is done, told that none is active, goes straight to the full merge:
 * no rank steps before it, and it merges every row a skipped hot merge would (each
 * changed row once, with the same sums), so the tables are the same. */
#define W2V_HOT_STEP_BOUND 0.8 /* measured on Brown: tools/w2v/README.md "Under mpirun" */
#define W2V_MAX_HOT_LEVELS 16
typedef struct w2v_parallel w2v_parallel;
struct w2v_parallel {
    int rank, ranks;
    int64_t sync_steps;
    int (*sync)(w2v_parallel *p, const w2v_model *m, bool active, bool *any_active);
    int hot_levels;
    int64_t hot_period[W2V_MAX_HOT_LEVELS + 1]; /* level l's merges, every hot_period[l] steps */
    int64_t hot_in[W2V_MAX_HOT_LEVELS + 1], hot_out[W2V_MAX_HOT_LEVELS + 1], hot_node[W2V_MAX_HOT_LEVELS + 1];
    int (*merge_hot)(w2v_parallel *p, const w2v_model *m, int level, bool active, bool *any_active);
    /* Rows of in, out and hs that this rank's steps changed since they were last merged
     * (1), which the trainer marks as each step starts, or NULL: every row is merged
     * (dist.c). A row no rank changed equals the merges' base everywhere, so leaving it
     * out changes no bit. */
    uint8_t *dirty[3];
    int threads; /* the threads all ranks or replicas run on together, for per-thread
                    rates (0: ranks x this rank's) */
    void *impl; /* dist.c's or replicas.c's state */
};

/* The rows [*lo, *hi) of a table (k: 0 in, 1 out, 2 hs, of `rows` rows) that hot level
 * `level` merges (level 0: all). */
static inline void w2v_hot_rows(const w2v_parallel *p, int level, int k, int64_t rows, int64_t *lo, int64_t *hi)
{
    const int64_t hot = level == 0 ? rows : k == 0 ? p->hot_in[level] : k == 1 ? p->hot_out[level] : p->hot_node[level];
    *lo = k == 2 ? rows - hot : 0; /* inner nodes: the last, at the root's end */
    *hi = k == 2 ? rows : hot;
}

typedef struct {
    const char *train;
    const char *output; /* the vectors file (main.c requires one before training) */
    int size, window, negative, iter, threads, cbow, binary, hogwild;
    int hs;      /* -hs 1: hierarchical softmax over the Huffman tree of the counts (with
                    -negative > 0 both losses are added, as word2vec.c does) */
    int classes; /* -classes K > 0: write K k-means classes to -output instead of vectors */
    int debug;   /* -debug: 0 errors only, 1 progress and summaries (default), 2 more */
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
    const char *save_vocab;   /* -save-vocab: the vocabulary as `word count` lines, or NULL */
    const char *read_vocab;   /* -read-vocab: take the vocabulary from this file, or NULL */
    int64_t sync_every;       /* -sync-every: steps between the ranks' syncs under mpirun */
    double dist_timeout;      /* -dist-timeout: seconds a rank waits in a collective under
                                 mpirun; 0: SGRAD_DIST_TIMEOUT, else 300 (dist.c) */
    w2v_parallel *par;        /* under mpirun with 2+ ranks (dist.c) or one replica of
                                 -replicas (replicas.c), else NULL */
    int replicas;             /* -replicas R: R copies of the model merged as ranks are
                                 (replicas.c); 1: one model */
    int64_t token_cache;      /* the most token codes (newline marks included) of a record
                                 of the corpus: the vocabulary pass's (corpus_codes) or the
                                 first epoch's, replayed instead of reading the file (train.c;
                                 W2V_TOKEN_CACHE_MAX by default, 0 none; none with
                                 checkpoints) */
    const tc_codes *corpus_codes; /* the vocabulary pass's record of the corpus (main.c;
                                 under -replicas, w2v_replicas_train gives each replica its
                                 share's part, w2v_share_records), which every epoch replays
                                 when w2v_replays_corpus; NULL: read the corpus */
    int64_t prefetch_min;     /* the drawing prefetches its lookups by word once the noise
                                 table has more bytes than this (TC_NOISE_PREFETCH_MIN;
                                 tests set 0 to run that path on a small corpus) */
} w2v_config;
/* Fills word2vec.c's defaults (alpha: 0.025, or 0.05 once cbow is known: < 0 means
 * "pick by mode"). */
void w2v_config_default(w2v_config *c);
/* Whether a run of cfg replays the vocabulary pass's record of the corpus (corpus_codes)
 * in every epoch: one model, or -replicas (each its share's part), not under mpirun; no
 * -checkpoint/-resume (a position is the reader's byte offset), no -read-vocab (that pass
 * counts no words). */
bool w2v_replays_corpus(const w2v_config *cfg);
/* The shares of `ranks` replicas (w2v_parallel's lines) in `all`, the vocabulary pass's
 * record of the corpus at path (whose counting gave v): share[r] views replica r's codes
 * in all (owning nothing). A share starts a line and every newline is one TC_CODE_EOL, so
 * it starts after as many marks as the corpus has newlines before its first byte, counted
 * in one pass over the file. 0, or -1 with errno set (ESTALE: the file's size, hash or
 * newlines no longer match v and the record). */
int w2v_share_records(const char *path, const tc_vocab *v, const tc_codes *all, int ranks, tc_codes *share);

typedef struct {
    double seconds;        /* training wall time (after the vocabulary is built) */
    double words_per_sec_thread; /* corpus tokens * epochs / seconds / threads (with ranks
                                    or replicas: all of theirs over all their threads) */
    int64_t tokens;        /* corpus tokens this process's trainer read since it started
                              (or resumed); -replicas: the replicas' sum */
    double final_loss;     /* mean loss per example over the last epoch */
    int64_t examples;      /* examples trained on, all epochs */
    int64_t steps;         /* sgrad steps (batches), all epochs */
    int64_t vocab_size;
    /* wall seconds in each part of the steps (-debug 2 prints them): the forward; the
     * backward with the optimizer step; drawing batches (on 2+ threads the next batch is
     * drawn while the backward runs: `overlapped` is that part's wall time, the longer
     * of the two); the merges under mpirun */
    double t_forward, t_backward, t_draw, t_overlapped, t_sync;
    int64_t merges; /* under mpirun or -replicas: this rank's merges, the first included */
    int64_t steps_one_thread; /* with 2+ threads: steps run on one thread (w2v_pick) */
    int epochs_replayed;      /* epochs whose tokens came from the first one's record */
} w2v_result;

/* A trained model: the context owns the tables. */
struct w2v_model {
    sg_ctx *ctx;
    sg_tensor *in;  /* (V,D) f32: the word vectors */
    sg_tensor *out; /* (V,D) f32: negative sampling's output (context) vectors; NULL with
                       -negative 0 */
    sg_tensor *hs;  /* (V-1,D) f32: hierarchical softmax's inner-node vectors (word2vec.c's
                       syn1, row k the k-th merge of tc_huffman); NULL without -hs */
};

/* Most entries of each per-step int64 index array, allocated up front (twice: the next
 * batch is drawn while a step runs): CBOW's context slots (batch * 2 * window), the
 * targets (batch * (negative + 1)) and, with -hs, the path entries (batch * the longest
 * Huffman path, checked once the tree is built); 2^26 entries are 512 MB. */
#define W2V_MAX_STEP_SLOTS ((int64_t)1 << 26)
/* 0 when cfg's per-step arrays fit W2V_MAX_STEP_SLOTS; otherwise -1 with a message naming
 * the flags printed to err. */
int w2v_config_check(const w2v_config *cfg, FILE *err);
/* Checks before any work that the corpus is a regular file (it is read once per epoch,
 * which a pipe or stdin cannot be), that -resume and -read-vocab name readable files, and
 * that every output (-output, -save-context, -checkpoint, -log, -save-vocab) can be
 * written: its directory exists
 * and is writable, the path is not a directory or other non-regular file, and no output
 * is the same file (by identity, however spelt) as an input or another output, except
 * -checkpoint as -resume's file. 0, or -1 with a message printed to err. Write-time errors (a full
 * disk) remain possible; vectors and checkpoints are written atomically, so they leave an
 * old file intact. */
int w2v_check_paths(const w2v_config *cfg, FILE *err);
/* A vocabulary that can train (2 words or more): 0, or -1 with a message. Checked before
 * any output is written. */
int w2v_vocab_check(const tc_vocab *v, FILE *err);

/* ---- under mpirun (dist.c, linked only with SGRAD_MPI; main.c calls it under
 * W2V_WITH_MPI) */
/* MPI_Init, then with 2+ ranks: checks that every rank got the same arguments, refuses
 * -checkpoint and -resume and sets cfg->par = *par (main.c then lets rank 0 alone print
 * and write files). *par is NULL with one rank. 0, or -1 with a message on every rank.
 * Every collective of dist.c waits at most cfg->dist_timeout for the other ranks; past
 * it the rank prints that a rank has died or stopped and the call fails (-1). */
int w2v_dist_start(int *argc, char ***argv, w2v_config *cfg, w2v_parallel **par);
/* Collective over par's ranks (MPI_COMM_WORLD for par NULL): 0 when every rank has ok and
 * rank 0's hash; otherwise -1 with a message naming `what` and the ranks, on every rank. */
int w2v_dist_agree(w2v_parallel *par, bool ok, uint64_t hash, const char *what);

/* -replicas R (cfg->replicas >= 2, one process): R trainers (w2v_train with 1 thread), on
 * R shares of the corpus, each in its own thread with at most `threads` (at least 1)
 * computing at once, merged every cfg->sync_every steps as ranks are (w2v_parallel). The vectors
 * depend on R, not on `threads`. res and *m: replica 0's (every replica ends with the same
 * tables). 0, or -1 with a message. */
int w2v_replicas_train(const w2v_config *cfg, const tc_vocab *v, FILE *log, int threads, w2v_result *res,
                       w2v_model *m);
/* Ends the whole job after this rank failed where the others may wait (MPI_Abort). */
void w2v_dist_abort(w2v_parallel *par);
/* Frees par (NULL: none) and finalizes MPI if w2v_dist_start initialised it; after a
 * collective timed out, ends the job with MPI_Abort instead (MPI_Finalize would wait for
 * the missing rank). */
void w2v_dist_end(w2v_parallel *par);

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
int w2v_checkpoint_save(const char *path, const w2v_config *cfg, const tc_vocab *v,
                        const w2v_model *m, sg_optim *opt, const w2v_position *pos, FILE *err);
/* 0 when path is a sgrad-w2v checkpoint made with cfg's training flags from the corpus v
 * was counted from; otherwise -1 with a message printed to err naming the difference. */
int w2v_checkpoint_check(const char *path, const w2v_config *cfg, const tc_vocab *v, FILE *err);
/* Restores the tables, the optimizer (set up as for a fresh run) and the position from a
 * checkpoint that passed w2v_checkpoint_check. 0, or -1 with a message printed to err. */
int w2v_checkpoint_load(const char *path, const w2v_config *cfg, const tc_vocab *v,
                        const w2v_model *m, sg_optim *opt, w2v_position *pos, FILE *err);

/* Trains on cfg->train with vocabulary v (finalized). Progress goes to `log` (NULL:
 * silent). Returns 0, 2 with a message printed to stderr when the -resume checkpoint
 * cannot be loaded (refused before training), or -1 with a message: divergence, no
 * training example at all (nothing would be learnt), a failed step. The model is left in *m
 * (free with w2v_model_free) when m is not NULL. */
int w2v_train(const w2v_config *cfg, const tc_vocab *v, FILE *log, w2v_result *res,
              w2v_model *m);
void w2v_model_free(w2v_model *m);

/* ---- -classes (classes.c) */
#define W2V_KMEANS_ITERS 10 /* word2vec.c's */
/* word2vec.c's k-means of the V rows of vec (V,D) into K >= 1 classes: cl (V) receives
 * each word's class in [0,K). Per iteration a line (words that changed class) goes to log
 * unless it is NULL. 0, or -1 on out of memory. */
int w2v_kmeans(const float *vec, int64_t V, int64_t D, int K, int iters, int threads,
               int32_t *cl, FILE *log);
/* Writes `word class` lines (word2vec.c's -classes output) to path atomically. 0, or -1
 * (errno set; path unchanged). */
int w2v_classes_write(const char *path, char *const *words, const int32_t *cl, int64_t V);

/* ---- queries on a vectors file */
/* Top-k rows by cosine with row q (q excluded); sims may be NULL. Returns how many. */
int w2v_nearest(const float *unit, int64_t V, int64_t D, const float *query,
                const int64_t *exclude, int n_exclude, int k, int64_t *best, float *sims);
/* Rows of vec normalised to unit length into a new malloc'd array (zero rows stay 0). */
float *w2v_unit_rows(sg_tensor *vec);
/* The query modes; binary: the vectors file's format, as sg_wordvec_read's (-1: told apart,
 * not on a pipe). */
int w2v_cmd_neighbors(sg_ctx *ctx, const char *path, int binary, const char *words, int k,
                      FILE *out);
int w2v_cmd_analogy(sg_ctx *ctx, const char *path, int binary, const char *a, const char *b,
                    const char *c, FILE *out);
/* Analogy benchmark: 3CosAdd over the `restrict` most frequent words (file order), words
 * compared with ASCII case folded (a word's first row stands for its case variants, none
 * of which is an answer); lines that are not 4 words are skipped (counted on stderr);
 * prints per-section and total accuracy over covered questions. -1 (message printed) on a
 * read error or no memory. */
typedef struct {
    int64_t questions, covered, correct;
} w2v_eval;
int w2v_cmd_evaluate(sg_ctx *ctx, const char *path, int binary, const char *qpath,
                     int64_t restrict_, FILE *out, w2v_eval *res);

#endif
