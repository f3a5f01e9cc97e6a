/* word2vec in libsgrad_models (skip-gram and CBOW with negative sampling and/or
 * hierarchical softmax) on sgrad: the engine behind sg_w2v (sgrad_models.h) and the
 * program sgrad-w2v.
 *
 * Modules: options.c (the options, their checks), draw.c (the corpus's tokens into
 * batches of examples: sentences, windows, negatives, row-hit caps), step.c (one step:
 * the ops on a batch, the backward, the learning rate, the one-thread picker), merge.c
 * (ranks and replicas: shares of the corpus, the hot rows' plan, which merge is due),
 * setup.c (a run's tables, index tensors and optimizer), train.c (w2v_train: the loop),
 * replicas.c (-replicas: R trainers in threads), checkpoint.c (checkpoints and model
 * files), query.c (neighbours, analogies, the benchmark), classes.c (k-means), api.c (the
 * public functions). Clients of sgrad.h and sgrad_models.h; the trainer shares
 * models/common (reader, vocabulary, sampling).
 */
#ifndef SG_MODELS_W2V_H
#define SG_MODELS_W2V_H

#include "common/common.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define W2V_MAX_WINDOW SG_W2V_MAX_WINDOW /* -window and -negative: at most these */
#define W2V_MAX_NEGATIVE SG_W2V_MAX_NEGATIVE
#define W2V_MAX_SENTENCE 1000 /* longer lines are cut into sentences of this many words */
/* The most token ids (4 bytes each) the trainer keeps from its first epoch to replay in
 * the later ones instead of reading and looking up the corpus again: 256 MiB. */
#define W2V_TOKEN_CACHE_MAX ((int64_t)1 << 26)
/* The batches' row-hit caps are models/common's (tc_row_hit_cap). The same bound holds for
 * hierarchical softmax's inner-node rows (-hs 1): the root is on every path, so it caps a
 * batch at tc_row_hit_cap(W2V_HS_NODE_STEP_BOUND, alpha) examples; measured in
 * docs/word2vec.md ("Hierarchical softmax"). */
#define W2V_HS_NODE_STEP_BOUND TC_ROW_STEP_BOUND
/* Training stops as diverged once a step's loss per example exceeds this many times the
 * first step's (or is not finite). */
#define W2V_DIVERGED_FACTOR 10.0
/* Rows expected to be changed more than W2V_HOT_STEP_BOUND / (alpha (P - 2)) times per
 * rank between two full merges are merged more often (sg_w2v_merger's hot levels,
 * planned by w2v_plan_hot_merges): summed changes overshoot on rows that every rank
 * changes many times between syncs. Measured on Brown: docs/word2vec.md "Under mpirun". */
#define W2V_HOT_STEP_BOUND 0.8
#define W2V_MAX_HOT_LEVELS SG_W2V_MAX_HOT_LEVELS
/* Most entries of each per-step int64 index array, allocated up front (twice: the next
 * batch is drawn while a step runs): CBOW's context slots (batch * 2 * window), the
 * targets (batch * (negative + 1)) and, with -hs, the path entries (batch * the longest
 * Huffman path, checked once the tree is built); 2^26 entries are 512 MB. */
#define W2V_MAX_STEP_SLOTS ((int64_t)1 << 26)
/* Token ids a chunk source (sg_w2v_train_tokens) is asked for at a time. */
#define W2V_SOURCE_CHUNK 4096

typedef sg_w2v_merger w2v_parallel;
typedef sg_w2v_result w2v_result;

/* Token ids handed in by the caller (sg_w2v_train_tokens). */
typedef struct {
    sg_token_read_fn read;
    void *ud;
} w2v_source;

/* What decides a run (sg_w2v_opts without the callbacks' types), and how its corpus
 * arrives. */
typedef struct {
    const char *train;    /* the corpus file; NULL: tokens from `source` */
    const w2v_source *source;
    int size, window, negative, iter, threads, cbow, hogwild;
    int hs;               /* hierarchical softmax over the Huffman tree of the counts (with
                             negative > 0 both losses are added, as word2vec.c does) */
    int64_t min_count;
    int64_t batch;        /* (input, target) examples per step, at most */
    double sample, alpha; /* alpha <= 0: by mode (w2v_alpha) */
    uint64_t seed;
    sg_w2v_engine engine;
    const char *checkpoint; /* written every save_every steps (0: each epoch's end) and at the end */
    int64_t save_every;
    const char *resume;   /* a checkpoint to continue from, or NULL */
    bool vocab_given;     /* the words and counts came from elsewhere than counting train */
    int64_t sync_every;   /* steps between the merges of ranks or replicas */
    w2v_parallel *par;    /* ranks (the program's MPI) or one replica of -replicas, or NULL */
    int replicas;         /* R copies of the model merged as ranks are (replicas.c); 1: one */
    int64_t token_cache;  /* the most token codes (newline marks included) of a record of the
                             corpus kept to replay: the vocabulary pass's (corpus_codes) or
                             the first epoch's (0: none; none with checkpoints) */
    bool more;            /* continued training: the model handed to w2v_train holds trained
                             tables (on their context), which the run trains on from, its
                             random stream starting at the model's rng; one model, no
                             checkpoint or resume */
    int64_t epoch_words;  /* corpus tokens per epoch that the learning rate falls over
                             (0: the vocabulary's total_tokens) */
    const tc_codes *corpus_codes; /* the vocabulary pass's record of the corpus (under
                             -replicas, each replica's share of it, w2v_share_records),
                             which every epoch replays when w2v_replays_corpus; NULL: read */
    int64_t prefetch_min; /* the drawing prefetches its lookups by word once the noise table
                             has more bytes than this (tests set 0 to run that path) */
    tc_events ev;         /* progress, log records, INFO lines; the stop request */
} w2v_config;

/* sgrad_models.h's defaults as a config (alpha < 0: by mode). */
void w2v_config_default(w2v_config *c);
/* The starting learning rate: alpha, or 0.025 for skip-gram and 0.05 for CBOW. */
double w2v_alpha(const w2v_config *c);
/* 0 when cfg can train (ranges, per-step arrays within W2V_MAX_STEP_SLOTS); otherwise -1
 * with the reason (naming the flags) in *e, SG_ERR_ARG. */
int w2v_config_check(const w2v_config *cfg, sg_model_error *e);
/* A vocabulary that can train (2 words or more): 0, or -1 with the reason. */
int w2v_vocab_check(const tc_vocab *v, sg_model_error *e);
/* Whether a run of cfg replays the vocabulary pass's record of the corpus (corpus_codes)
 * in every epoch: one model, or -replicas (each its share's part), not under ranks; no
 * checkpoint or resume (a position is the reader's byte offset), no vocabulary given
 * (that pass counts no words). */
bool w2v_replays_corpus(const w2v_config *cfg);

/* A trained model: the context owns the tables. */
typedef struct {
    sg_ctx *ctx;
    sg_tensor *in;  /* (V,D) f32: the word vectors */
    sg_tensor *out; /* (V,D) f32: negative sampling's output vectors; NULL with negative 0 */
    sg_tensor *hs;  /* (V-1,D) f32: hierarchical softmax's inner nodes (word2vec.c's syn1,
                       row k the k-th merge of tc_huffman); NULL without hs */
    uint64_t rng;   /* the trainer's random stream where the tables' last training ended
                       (drawn through the corpus's end, or to a stop): a continued run
                       draws on from it, so its draws differ from the first run's */
} w2v_model;
void w2v_model_free(w2v_model *m);
/* The tables as sg_w2v_merger's callbacks take them: in, out, hs. */
static inline void w2v_model_tables(const w2v_model *m, sg_tensor **t)
{
    t[0] = m->in;
    t[1] = m->out;
    t[2] = m->hs;
}

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
/* Writes a checkpoint of the run (the tables as "W_in", "W_out", "W_hs", the optimizer, the
 * position, the training flags, the corpus's size and hash, and the vocabulary) to path
 * atomically. 0, or -1 with the reason (path then holds its previous content). */
int w2v_checkpoint_save(const char *path, const w2v_config *cfg, const tc_vocab *v,
                        const w2v_model *m, sg_optim *opt, const w2v_position *pos, sg_model_error *e);
/* 0 when path is a sgrad-w2v checkpoint made with cfg's training flags from the corpus v
 * was counted from; otherwise -1 with the difference. */
int w2v_checkpoint_check(const char *path, const w2v_config *cfg, const tc_vocab *v, sg_model_error *e);
/* Restores the tables, the optimizer (set up as for a fresh run) and the position from a
 * checkpoint that passed w2v_checkpoint_check. 0, or -1 with the reason. */
int w2v_checkpoint_load(const char *path, const w2v_config *cfg, const tc_vocab *v,
                        const w2v_model *m, sg_optim *opt, w2v_position *pos, sg_model_error *e);
/* The vocabulary a checkpoint or model file holds (words and counts, in order) into an
 * empty v: 1 when it holds one, 0 when it holds none (a checkpoint written before they
 * did), -1 with the reason. */
int w2v_checkpoint_vocab(const char *path, tc_vocab *v, sg_model_error *e);
/* A model file: the tables and the vocabulary of a trained model with the options that
 * shaped it (no optimizer, no position). 0 or -1. */
int w2v_model_save(const char *path, const w2v_config *cfg, const tc_vocab *v, const w2v_model *m,
                   sg_model_error *e);
/* Reads a model file or a checkpoint: its options into *cfg (size, negative, hs, cbow),
 * its vocabulary into v (empty), its tables into a new context of `threads` (0: all).
 * 0, or -1 with the reason naming path. */
int w2v_model_load(const char *path, int threads, w2v_config *cfg, tc_vocab *v, w2v_model *m, sg_model_error *e);

/* ---- training (train.c) */
/* Trains on cfg's corpus with vocabulary v (finalized). Events go to cfg->ev. Returns 0;
 * SG_STOPPED (the callback asked; the model is that of the last step); or -1 with the
 * reason: res->refused when the resume checkpoint cannot be loaded (before training),
 * divergence, no training example at all, a failed step. The model is left in *m (free
 * with w2v_model_free) when m is not NULL. With cfg->more, *m holds the tables to train
 * on, and stays the caller's whatever the outcome (at the last step done on a failure). */
int w2v_train(const w2v_config *cfg, const tc_vocab *v, w2v_result *res, w2v_model *m, sg_model_error *e);

/* -replicas R (cfg->replicas >= 2, one process): R trainers (w2v_train with 1 thread), on
 * R shares of the corpus, each in its own thread with at most `threads` (at least 1)
 * computing at once, merged every cfg->sync_every steps as ranks are (sg_w2v_merger). The
 * vectors depend on R, not on `threads`. res and *m: replica 0's (every replica ends with
 * the same tables). 0, SG_STOPPED, or -1 with the reason. */
int w2v_replicas_train(const w2v_config *cfg, const tc_vocab *v, int threads, w2v_result *res, w2v_model *m,
                       sg_model_error *e);
/* The shares of `ranks` replicas (sg_w2v_merger's lines) in `all`, the vocabulary pass's
 * record of the corpus at path (whose counting gave v): share[r] views replica r's codes
 * in all (owning nothing). A share starts a line and every newline is one TC_CODE_EOL, so
 * it starts after as many marks as the corpus has newlines before its first byte, counted
 * in one pass over the file. 0, or -1 with errno set (ESTALE: the file's size, hash or
 * newlines no longer match v and the record). */
int w2v_share_records(const char *path, const tc_vocab *v, const tc_codes *all, int ranks, tc_codes *share);
/* Rank `rank` of `ranks`'s share of the corpus: bytes [*begin, *end), whole lines (see
 * sg_w2v_merger). 0, or -1 (errno set). */
int w2v_corpus_share(const char *path, int rank, int ranks, int64_t *begin, int64_t *end);

/* ---- the trainer's state (draw.c, step.c, setup.c, train.c; tests look inside) */
typedef struct {
    const w2v_config *cfg;
    const tc_vocab *v;
    uint64_t *keep;
    tc_noise noise;
    /* The noise table is past cfg->prefetch_min bytes: the drawing's lookups by word
     * (noise columns, row hit counts, subsampling thresholds) leave the caches, and are
     * prefetched ahead of their use */
    bool prefetch_draws;
    tc_rng rng;
    tc_reader rd;
    int64_t share_end; /* with cfg->par, the epoch ends at this offset (its share's end) */
    bool epoch_done;
    int64_t tokens; /* corpus tokens read, all epochs */
    /* The share as token codes (tc_codes: a word's id, TC_CODE_OOV or TC_CODE_EOL) that
     * the epochs replay instead of reading the corpus: the same tokens in the same order,
     * so the same draws. Either the vocabulary pass's record of the share (cfg->corpus_codes,
     * every epoch), or `rec`, this trainer's record of its first epoch, for the later
     * ones. rec.code NULL: not kept (checkpoints need the reader's byte offsets, or the
     * share had more than cfg->token_cache tokens). */
    tc_codes rec;
    const tc_codes *replay; /* NULL: read the corpus (or the source) */
    int64_t at_tok;
    /* a chunk of ids from cfg->source: src_buf[src_at..src_n) to take */
    int32_t *src_buf;
    int64_t src_at, src_n;
    bool src_failed; /* it returned an error or an id out of range */
    /* the current sentence (kept words only) */
    int32_t sen[W2V_MAX_SENTENCE];
    int len, pos;
    /* one batch, drawn into index set `set` (persistent int64 tensors of capacity cap) */
    int64_t cap;     /* examples */
    int64_t n;       /* examples in the batch */
    int set;
    sg_tensor *input_t[2], *offset_t[2], *target_t[2];
    int64_t *input;  /* skip-gram: (n); CBOW: the bags' words, flat */
    int64_t n_input;
    int64_t *offset; /* CBOW: start of each bag in input (n) */
    int64_t *target; /* (n, 1 + negative) */
    /* -hs: each example's path to the root (the centre word's in tree) */
    tc_huffman tree;
    sg_tensor *node_t[2], *code_t[2], *path_t[2];
    int64_t *node;   /* inner nodes of all paths, flat (n_node) */
    int32_t *code;   /* their codes (n_node) */
    int64_t *path;   /* start of each example's path in node (n) */
    int64_t n_node;
    /* times each row of the input / output / inner-node table occurs in the batch (0
     * between batches); 16 bits hold it (a batch ends within one centre word's examples of
     * a row reaching its cap, at most TC_MAX_ROW_HITS) and halve what a large vocabulary's
     * counts take in cache */
    uint16_t *hits_in, *hits_out, *hits_node;
    int32_t row_cap;    /* tc_row_hit_cap of the starting learning rate */
    int32_t in_row_cap; /* the same for the input table (CBOW's context rows: lower) */
    int32_t node_cap;   /* the same for the inner nodes (bounds the batch: the root) */
    uint8_t *dirty[3];  /* cfg->par's (sg_w2v_merger), or NULL */
} w2v_trainer;

/* draw.c */
/* Reads the next sentence: kept in-vocabulary words, at most W2V_MAX_SENTENCE. */
void w2v_next_sentence(w2v_trainer *t);
/* Fills the batch from the corpus; t->n == 0 means the epoch is over. */
void w2v_fill_batch(w2v_trainer *t);
/* The trainer's part of a position: where the next batch will be drawn from. */
void w2v_take_position(const w2v_trainer *t, int epoch, w2v_position *p);
/* The position at the start of epoch `epoch` (the end of the one before). */
void w2v_epoch_start_position(const w2v_trainer *t, int epoch, w2v_position *p);

/* step.c */
/* The learning-rate schedule's record: the words read before step `step`'s batch. */
typedef struct {
    int64_t step, words, total;
} w2v_lr_record;
/* word2vec.c's linear decay: alpha (1 - words / (total + 1)), at least alpha * 1e-4. */
double w2v_lr_decay(double alpha, int64_t words, int64_t total);
/* The optimizer's callback schedule over a w2v_lr_record (ud). */
double w2v_lr_schedule(void *ud, int64_t step, double base_lr);
/* The forward half of a step on the current batch: the loss tensor (on the tape), or NULL
 * with the context's error. */
sg_tensor *w2v_step_forward(w2v_trainer *t, w2v_model *m, sg_optim *opt);
/* The backward half: gradients, the fused update and the optimizer step; the context's
 * status. It reads the current index set only, so the next batch may be drawn meanwhile. */
int w2v_step_backward(sg_ctx *ctx, sg_tensor *loss, sg_optim *opt);

/* One thread or all, step by step (step.c: why and how). */
#define W2V_PICK_PERIOD 512
#define W2V_PICK_TRIAL 8
#define W2V_PICK_SETTLE 2
#define W2V_PICK_CUT_AFTER (W2V_PICK_SETTLE + 1)
#define W2V_PICK_CUT 1.5
typedef struct {
    int64_t step;        /* steps recorded */
    double secs[2];      /* this period's trial: [0] all threads, [1] one */
    int64_t examples[2];
    bool one;            /* the rest of the period on one thread */
    double one_rate;     /* seconds per example of the last one-thread half; 0: none yet */
    bool last_one;       /* the mode of the last step recorded (a run starts on all) */
    int settled;         /* steps run in that mode since the last change, at most
                            W2V_PICK_SETTLE: the next step is timed when it is that */
} w2v_pick;
bool w2v_pick_one(const w2v_pick *p);
void w2v_pick_record(w2v_pick *p, bool one, double secs, int64_t examples);

/* merge.c */
/* With 3+ ranks or replicas: the hot rows' merges planned from the counts (levels, rows).
 * 0, or -1 out of memory. */
int w2v_plan_hot_merges(const w2v_trainer *t, w2v_parallel *par, double alpha);
/* The merge due after the t-th step since the last full one: 0 full, l >= 1 hot level l,
 * -1 none. */
int w2v_merge_due(const w2v_parallel *par, int64_t t);
/* The first t' > t at which w2v_merge_due gives a merge. */
int64_t w2v_next_merge(const w2v_parallel *par, int64_t t);

/* setup.c: a run's trainer tables, index tensors, model tables (new, or with cfg->more
 * m's own, checked against cfg and v) and optimizer; 0 or -1. */
int w2v_trainer_setup(w2v_trainer *t, const w2v_config *cfg, const tc_vocab *v, w2v_model *m,
                      sg_model_error *e);
int w2v_model_setup(w2v_trainer *t, w2v_model *m, sg_optim **opt, w2v_lr_record *lr, sg_model_error *e);
/* Frees the run's index tensors (on the model's context, which outlives the run). */
void w2v_trainer_free_tensors(w2v_trainer *t);
void w2v_trainer_free(w2v_trainer *t);

/* ---- -classes (classes.c) */
#define W2V_KMEANS_ITERS 10 /* word2vec.c's */
/* word2vec.c's k-means of the V rows of vec (V,D) into K >= 1 classes: cl (V) receives
 * each word's class in [0,K). An INFO line (level 2) per iteration. 0, or -1 out of memory. */
int w2v_kmeans(const float *vec, int64_t V, int64_t D, int K, int iters, int threads, int32_t *cl,
               const tc_events *ev);
/* Writes `word class` lines (word2vec.c's -classes output) to path atomically. 0, or -1
 * (errno set; path unchanged). */
int w2v_classes_write(const char *path, char *const *words, const int32_t *cl, int64_t V);

/* ---- queries (query.c) */
/* Top-k rows by cosine with query (rows in exclude left out); sims may be NULL. */
int w2v_nearest(const float *unit, int64_t V, int64_t D, const float *query, const int64_t *exclude,
                int n_exclude, int k, int64_t *best, float *sims);
/* Rows of vec normalised to unit length into a new malloc'd array (zero rows stay 0). */
float *w2v_unit_rows(sg_tensor *vec);
/* The analogy benchmark over rows [0, R) of unit (R,D), whose words word(i) gives. */
int w2v_evaluate(const float *unit, int64_t R, int64_t D, const char *(*word)(const void *, int64_t),
                 const void *words, const char *qpath, sg_w2v_eval *ev, sg_model_error *e);

/* ---- the public handle (api.c) */
struct sg_w2v {
    w2v_config cfg;
    char *checkpoint, *resume; /* cfg's, owned */
    sg_w2v_merger *merger;
    tc_vocab vocab;
    bool has_vocab;
    tc_codes codes;   /* the vocabulary pass's record of the corpus, replayed by the epochs */
    char *corpus;     /* the corpus the vocabulary was counted from (owned), or NULL */
    w2v_model model;  /* ctx NULL until trained or loaded */
    sg_wordvec *wv;   /* a vectors file loaded for queries, or NULL */
    float *unit;      /* the word vectors at unit length, made by the first query */
};

/* Test hooks of replicas.c (tests/test_w2v_train.c). */
extern int64_t w2v_rep_merges_run, w2v_rep_full_merges_run;
extern bool w2v_rep_hot_report_active, w2v_rep_merge_every_row;

#endif
