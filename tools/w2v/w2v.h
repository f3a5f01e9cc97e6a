/* sgrad-w2v: word2vec (skip-gram and CBOW with negative sampling) on sgrad.
 *
 * Modules: train.c (w2v_train: batches of examples through sgrad ops), query.c (nearest
 * neighbours, analogies, the analogy benchmark), main.c (command line); the corpus
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

#define W2V_MAX_SENTENCE 1000 /* longer lines are cut into sentences of this many words */
/* A batch ends once a table row occurs in it w2v_row_hit_cap(alpha) times: a step sums the
 * updates of a row, so the summed step is bounded by about alpha * cap single steps. The
 * bound is W2V_ROW_STEP_BOUND (skip-gram's default 0.025 x 256 hits); the cap is at most
 * W2V_MAX_ROW_HITS and at least 1. */
#define W2V_MAX_ROW_HITS 256
#define W2V_ROW_STEP_BOUND 6.4
int w2v_row_hit_cap(double alpha);
/* Training stops as diverged once a step's loss per example exceeds this many times the
 * first step's (or is not finite). */
#define W2V_DIVERGED_FACTOR 10.0

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
 * which a pipe or stdin cannot be) and that the output can be written: its directory
 * exists and is writable, the path is not a directory or other non-regular file. 0, or -1
 * with a message printed to err. Write-time errors (a full disk) remain possible; the
 * vectors are written atomically, so they leave an old file intact. */
int w2v_check_paths(const w2v_config *cfg, FILE *err);

/* Trains on cfg->train with vocabulary v (finalized). Progress goes to `log` (NULL:
 * silent). Returns 0, or -1 with a message printed to stderr: divergence, no training
 * example at all (nothing would be learnt), a failed step. The model is left in *m
 * (free with w2v_model_free) when m is not NULL. */
int w2v_train(const w2v_config *cfg, const tc_vocab *v, FILE *log, w2v_result *res,
              w2v_model *m);
void w2v_model_free(w2v_model *m);

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
