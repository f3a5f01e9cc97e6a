/* fastText in libsgrad_models: the supervised text classifier and subword word vectors
 * (skip-gram, CBOW) on sgrad, the engine behind sg_ft (sgrad_models.h) and sgrad-fasttext.
 *
 * Modules: dict.c (labels and words of a training file, fastText's hashing of word and
 * character n-grams into buckets, a line to its input rows and labels), train.c (the
 * classifier: batches of examples through sg_embedding_bag, the output layer and the
 * loss, SGD), vectors.c (skip-gram and CBOW over subword bags, word vectors, the .vec
 * file, nn and analogy queries), model.c (the model file through sg_checkpoint_save /
 * _load, prediction), api.c (the public functions). Built on models/common.
 */
#ifndef SG_FT_H
#define SG_FT_H

#include "common/common.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define FT_EOS "</s>" /* fastText's end-of-line word: every newline adds one */
#define FT_MAX_LINE 1024 /* vectors: a line's first 1024 in-vocabulary tokens, as fastText */

/* Vectors' batched steps, as sgrad-w2v's (docs/word2vec.md "What differs: batched
 * steps"): a batch ends at -batch examples or once a row of either table is hit
 * tc_row_hit_cap(TC_ROW_STEP_BOUND, lr) times; CBOW's bag rows, which each get the whole
 * error of every bag they are in, at TC_CBOW_INPUT_STEP_BOUND. */
#define FT_VECTORS_BATCH 8192

typedef sg_ft_loss ft_loss;
#define FT_LOSS_SOFTMAX SG_FT_SOFTMAX
#define FT_LOSS_NS SG_FT_NS
#define FT_LOSS_HS SG_FT_HS
#define FT_LOSS_OVA SG_FT_OVA
const char *ft_loss_name(ft_loss l);
/* "softmax", "ns", "hs", "ova" or "one-vs-all"; false for anything else. */
bool ft_loss_parse(const char *s, ft_loss *out);

/* What a model is: the classifier or word vectors trained by skip-gram or CBOW. */
typedef sg_ft_kind ft_kind;
#define FT_SUPERVISED SG_FT_SUPERVISED
#define FT_SKIPGRAM SG_FT_SKIPGRAM
#define FT_CBOW SG_FT_CBOW
const char *ft_kind_name(ft_kind k); /* "supervised", "skipgram", "cbow" */

/* Hyperparameters: fastText's supervised defaults by ft_config_default, its skipgram and
 * cbow defaults by ft_config_default_vectors. */
typedef struct {
    ft_kind kind;
    const char *input, *output;
    const char *label; /* label prefix */
    int dim, epoch, word_ngrams, minn, maxn, neg, threads, batch;
    int64_t bucket, min_count, min_count_label;
    double lr;
    uint64_t seed;
    ft_loss loss;
    int verbose;
    int ws;          /* vectors: context window */
    double sample;   /* vectors: -t, the subsampling threshold */
    int lr_update_rate; /* vectors: accepted for fastText's command line; the rate falls every step */
    tc_events ev;       /* progress, INFO lines (verbose > 0), the stop request */
} ft_config;
void ft_config_default(ft_config *c);
void ft_config_default_vectors(ft_config *c, ft_kind kind);
/* Checks that need no file: -minn <= -maxn when -maxn > 0 (-maxn 0: no character
 * n-grams, whatever -minn), -bucket > 0 when word or character n-grams are asked for,
 * positive sizes. 0, or -1 with a message on err. */
int ft_config_check(const ft_config *c, sg_model_error *err);

/* ---- dictionary */
typedef struct {
    tc_vocab words;  /* frequency order; FT_EOS among them */
    tc_vocab labels; /* frequency order */
    const char *label_prefix;
    int64_t bucket; /* rows of the n-gram table; 0: none */
    int word_ngrams, minn, maxn;
    int64_t ntokens; /* word tokens read (FT_EOS included), before -minCount */
} ft_dict;

/* fastText's 32-bit FNV-1a of a token (each byte sign-extended first, as fastText does). */
uint32_t ft_hash(const char *s);
/* Counts the words and labels of path (every newline counts one FT_EOS), then drops words
 * seen fewer than min_count times and labels fewer than min_count_label times. Returns 0,
 * or -1 with a message on err (unreadable file, no token, no label left for the
 * classifier, no word left for vectors). */
int ft_dict_build(ft_dict *d, const ft_config *c, sg_model_error *err);
void ft_dict_free(ft_dict *d);

/* A growing int64 array. */
typedef struct {
    int64_t *v;
    int64_t n, cap;
} ft_ids;
int ft_ids_push(ft_ids *a, int64_t x); /* 0 or -1 (out of memory) */
void ft_ids_free(ft_ids *a);

/* A word's input rows, appended to rows: its own row if it is in the vocabulary, then
 * with -maxn > 0 its character n-gram buckets (words.size + bucket id; none for FT_EOS),
 * as fastText's getSubwords. 0 or -1 (out of memory). */
int ft_dict_word_rows(const ft_dict *d, const char *word, ft_ids *rows);

/* A line's tokens (without the newline) to its input rows, appended to rows: in-vocabulary
 * words, their character n-gram buckets (words.size + bucket id) with -maxn > 0, the
 * n-gram buckets of out-of-vocabulary words, then the word n-grams (2..word_ngrams, over
 * every word token, in- or out-of-vocabulary); and its known labels, appended to labels.
 * eol: the line ended with a newline (FT_EOS is then its last word). *n_words gets the
 * number of word tokens (labels and FT_EOS not counted). 0 or -1 (out of memory). */
int ft_dict_line(const ft_dict *d, char **tokens, int64_t n_tokens, bool eol, ft_ids *rows,
                 ft_ids *labels, int64_t *n_words);

/* ---- model */
typedef struct {
    ft_config cfg;
    ft_dict dict;
    sg_ctx *ctx;
    sg_tensor *input;  /* (words + bucket, dim) f32: word rows, then n-gram bucket rows */
    sg_tensor *output; /* (labels, dim) f32, or (labels - 1, dim) for hs: inner nodes;
                          vectors: (words, dim), the context rows */
    tc_huffman tree;   /* hs only */
    /* a loaded model (model.c): input holds the words and the stored bucket rows only,
     * those of buckets bucket_rows[0..n_bucket_rows) (ascending); bucket_map[b] is bucket
     * b's row among them (-1: a zero row), or NULL where such a map would be out of
     * proportion to the file (then a binary search in bucket_rows) */
    bool loaded;
    int64_t *bucket_rows, n_bucket_rows;
    int32_t *bucket_map;
    char *label_copy; /* owns cfg.label */
    float *unit;      /* the vocabulary's vectors at unit length (ft_nearest), or NULL */
} ft_model;
void ft_model_free(ft_model *m);

typedef sg_ft_result ft_train_result; /* examples per epoch, lines skipped, steps, time, loss */

/* Trains a model on cfg->input (dictionary built here). Events to cfg->ev. 0, SG_STOPPED
 * (the model of the last step), or -1 with the reason. */
int ft_train(const ft_config *cfg, ft_model *m, ft_train_result *res, sg_model_error *err);

/* Parsed examples: example i has rows [row_off[i], row_off[i+1]), labels
 * [lab_off[i], lab_off[i+1]) and n_words[i] word tokens (words in all). */
typedef struct {
    ft_ids rows, row_off, labels, lab_off, n_words;
    int64_t words;
} ft_examples;
void ft_examples_free(ft_examples *e);

/* One SGD step on examples [first, first + n) of ex: for each, the mean of its input
 * rows, the output layer, the loss; target labels drawn with rng (softmax, ns, hs: one of
 * the example's labels; ova: all). Returns the loss (summed over the examples) or NaN
 * with the reason in *err. The input table's update touches only the batch's rows. */
double ft_step(ft_model *m, sg_optim *opt, const ft_examples *ex, int64_t first, int64_t n, tc_rng *rng,
               const tc_noise *noise, sg_model_error *err);

/* Writes m to path (atomically) / reads a model written so. Load errors (a file that
 * cannot be read, not a sgrad-fasttext model, a model of the other kind than vectors asks
 * for (true: skipgram or cbow; false: the classifier), truncated or corrupt: metadata
 * breaking the training rules or implying tensors larger than the file, weights that are
 * not finite, counts summing past INT64_MAX) print a message naming path to err. Memory
 * stays in proportion to the file's size. */
int ft_model_save(const ft_model *m, const char *path, sg_model_error *err);
/* The message of a failed write of path recorded on ctx, printed once: the library's I/O
 * messages name the file already. */
void ft_write_error(const sg_ctx *ctx, const char *path, sg_model_error *err);
int ft_model_load(ft_model *m, const char *path, int threads, bool vectors, sg_model_error *err);

/* The mean of input rows `rows` (indices as ft_dict_word_rows gives them) into h (dim);
 * the zero vector for no row. Works on a trained and on a loaded model (whose left-out
 * bucket rows are zero). */
void ft_input_mean(const ft_model *m, const ft_ids *rows, double *h);

/* Scores of every label for one line's input rows, as fastText ranks and reports them:
 * log(p + FT_LOG_EPS) with p the softmax or (ns, ova) the label's sigmoid, or for hs the
 * sum over the label's tree path of log(q + FT_LOG_EPS), q each node's sigmoid or its
 * complement; fastText prints exp(score) as the probability. 0 or -1 (out of memory). */
#define FT_LOG_EPS 1e-5
int ft_predict_scores(ft_model *m, const ft_ids *rows, double *score);

/* ---- word vectors (vectors.c) */
/* Trains skip-gram or CBOW (cfg->kind) on cfg->input: every word's input is the mean of
 * its word row and its character n-gram rows. Events to cfg->ev. 0, SG_STOPPED, or -1
 * with the reason. */
int ft_train_vectors(const ft_config *cfg, ft_model *m, ft_train_result *res, sg_model_error *err);
/* A word's vector into v (dim): the mean of its rows (ft_dict_word_rows), so built from
 * its n-grams alone for a word never seen; zero when it has no row. 0 or -1 (memory). */
int ft_word_vector(const ft_model *m, const char *word, float *v);
/* Every vocabulary word's vector, in vocabulary order, as word2vec text (sg_wordvec_write:
 * atomic). 0, or -1 with a message on err. */
int ft_write_vec(const ft_model *m, const char *path, sg_model_error *err);
/* The k words nearest by cosine to query (dim), skipping the words in ban[0..n_ban)
 * (vocabulary indices), most similar first, into best / sim; returns how many. The
 * vocabulary's vectors are computed once into *table (NULL at first; free it). */
extern int64_t ft_bucket_map_floor; /* model.c: the bucket map's size floor (tests lower it) */
int64_t ft_nearest(const ft_model *m, float **table, const float *query, int64_t k,
                   const int64_t *ban, int n_ban, int64_t *best, double *sim);

/* The vectors' trainer (vectors.c; a test steps it by hand). */
typedef struct {
    const ft_config *cfg;
    ft_model *m;
    ft_ids sub_off, sub_rows; /* word w's rows: sub_rows[sub_off[w] .. sub_off[w + 1]) */
    uint64_t *keep;           /* keep word w when a 32-bit draw is below keep[w] */
    tc_noise noise;
    tc_rng rng;
    tc_reader rd;
    bool epoch_done;
    int64_t tokens; /* in-vocabulary tokens read, all epochs (fastText's tokenCount) */
    int32_t sen[FT_MAX_LINE];
    int len, pos;
    /* the batch: bags (rows, offsets), skipgram's bag of each example, targets (n, T) */
    ft_ids bag_rows, bag_off, rep, targets;
    int64_t n;
    int32_t *hits_in, *hits_out;
    int32_t in_cap, out_cap;
    /* the run: the optimizer, the epochs' words, the loss, the errors */
    sg_optim *opt;
    int64_t total;
    double t0, epoch_loss;
    int64_t epoch_n;
    bool stop;
    sg_model_error *err;
} vec_trainer;
/* Every vocabulary word's rows, and the sampling tables. 0 or -1 (out of memory). */
int ft_vec_tables(vec_trainer *t);
/* The next batch; t->n == 0 at the end of the epoch. 0 or -1 (out of memory). */
int ft_vec_fill_batch(vec_trainer *t);
/* One SGD step on the batch: the loss summed over its examples, or NaN with the reason. */
double ft_vec_step(vec_trainer *t, sg_optim *opt);
void ft_vec_trainer_free(vec_trainer *t);

/* Every line of the input with a known label and a word becomes an example (train.c). */
int ft_read_examples(const ft_model *m, ft_examples *ex, ft_train_result *res);

#endif
