/* sgrad_models: the trainers built on sgrad, as a library (libsgrad_models): word2vec
 * (skip-gram and CBOW with negative sampling and/or hierarchical softmax) and fastText
 * (the supervised classifier, subword skip-gram and CBOW). The programs sgrad-w2v and
 * sgrad-fasttext are flag parsers and printers over this header; a binding (Python) calls
 * the same functions and gets bitwise the same models for the same options.
 *
 * Sections: errors, events (progress, log records, stopping), corpus lines, vocabulary,
 * word2vec (options, training, checkpoints, model files, queries), fastText.
 *
 * Conventions:
 * - Handles (sg_vocab, sg_w2v, sg_ft, sg_lines) are opaque; each *_free(NULL) is a no-op.
 *   A handle may be used by one thread at a time; different handles are independent.
 * - A function that can fail returns SG_OK (0) or an error status (sgrad.h's SG_ERR_
 *   codes, or SG_STOPPED) and, when err is not NULL, fills *err with that status and a
 *   message; a function returning a handle returns NULL on failure. Messages name the
 *   caller's paths ("cannot read corpus.txt: No such file or directory"). The library
 *   never prints and never exits: text for a person comes through the event callback.
 * - Training runs in the calling thread (plus the context's worker threads) until done:
 *   a binding releases its interpreter lock around the call, and the event callback
 *   (called from that thread) may ask to stop.
 * - Determinism: with hogwild 0 the model is bitwise the same for any thread count, and
 *   the same for a file and for the same tokens handed in as ids.
 */
#ifndef SGRAD_MODELS_H
#define SGRAD_MODELS_H

#include "sgrad.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/* The status of a run that the event callback stopped (beyond sgrad.h's codes). */
#define SG_STOPPED 100

typedef struct {
    int status;         /* SG_OK, an SG_ERR_ code or SG_STOPPED */
    char message[1024]; /* what happened, "" for SG_OK */
} sg_model_error;

/* sg_status_string, and "stopped by the event callback" for SG_STOPPED. */
SG_API const char *sg_model_status_string(int status);

/* ---------------------------------------------------------------- events */

typedef enum {
    SG_EVENT_STEP,  /* a training step is done (every field but message) */
    SG_EVENT_EPOCH, /* an epoch is done: loss is its mean per example */
    SG_EVENT_SAVE,  /* a checkpoint is about to be written (flush a log that it covers) */
    SG_EVENT_END,   /* training is over: words_done, steps */
    SG_EVENT_INFO   /* a line for a person (message), of verbosity `level` (1 or 2) */
} sg_event_kind;

typedef struct {
    sg_event_kind kind;
    int epoch, epochs;  /* the epoch under way (1-based) of `epochs` */
    int64_t words;      /* STEP: words read through this step's batch (the next step's
                           learning rate is theirs); END: the words this call read */
    int64_t words_done; /* words read so far; with ranks or replicas, all of theirs */
    int64_t total_words; /* epochs x the corpus's words */
    int64_t steps;      /* steps so far, all epochs (a resumed run counts the checkpoint's) */
    int64_t examples;   /* STEP: this step's; EPOCH: the epoch's */
    double loss;        /* STEP: summed over its examples; EPOCH: mean per example */
    double lr;          /* the step's learning rate */
    double elapsed_s;   /* since training started */
    int threads;        /* the threads training runs on (all ranks' or replicas') */
    int level;          /* INFO: 1 summaries, 2 details */
    const char *message; /* INFO */
    double valid_mrr;   /* sgrad-kge's EPOCH and END: the validation MRR of that epoch's
                           (END: the last) ranking, -1 when none ran; 0 for the others */
} sg_event;

/* Called from the training thread; a nonzero return asks to stop: the run ends at the
 * next step boundary (under -replicas, the next full merge) with the model consistent,
 * and the training call returns SG_STOPPED. */
typedef int (*sg_event_fn)(void *ud, const sg_event *e);

/* ---------------------------------------------------------------- corpus lines */

/* A corpus is bytes: a token is a maximal run of bytes other than space, newline, DEL
 * and the other control bytes, cut to SG_MAX_WORD - 1 bytes (fewer rather than split a
 * UTF-8 character); a newline ends a sentence (a line). */
#define SG_MAX_WORD 100

typedef struct sg_lines sg_lines;
/* Opens path ("-": stdin) for reading line by line. NULL with SG_ERR_IO naming path. */
SG_API sg_lines *sg_lines_open(const char *path, sg_model_error *err);
/* The next line's tokens: *tokens (owned by l, valid until the next call), *n of them, *eol
 * whether a newline ended it. 1, 0 at the end, or minus an error status (-SG_ERR_NOMEM,
 * -SG_ERR_IO: a read error, at the end). */
SG_API int sg_lines_next(sg_lines *l, char ***tokens, int64_t *n, bool *eol);
SG_API void sg_lines_close(sg_lines *l);
/* token as the reader would cut it into word (SG_MAX_WORD bytes). */
SG_API void sg_word_as_read(const char *token, char *word);

/* ---------------------------------------------------------------- vocabulary */

typedef struct sg_vocab sg_vocab;
SG_API sg_vocab *sg_vocab_new(void);
SG_API void sg_vocab_free(sg_vocab *v);
/* Counts every token of a file (and its lines, size and hash). */
SG_API int sg_vocab_count_file(sg_vocab *v, const char *path, sg_model_error *err);
/* Counts a chunk of tokens handed in by the caller: tokens[i] a word (cut as the reader
 * cuts), or NULL for a sentence end. Chunks add up. */
SG_API int sg_vocab_add_tokens(sg_vocab *v, const char *const *tokens, int64_t n, sg_model_error *err);
/* The same for n whole sentences packed in one buffer (what a binding builds cheaply):
 * sentence i has lens[i] tokens, and buf holds all the tokens in order, each followed by
 * a NUL byte (len bytes in all). SG_ERR_ARG, nothing counted, when the NULs do not match
 * the lengths (a token holding a NUL). */
SG_API int sg_vocab_add_packed(sg_vocab *v, const char *buf, int64_t len, const int64_t *lens, int64_t n,
                               sg_model_error *err);
/* Adds the words of a `word count` file (word2vec.c's -save-vocab format); errors name
 * the line. */
SG_API int sg_vocab_read(sg_vocab *v, const char *path, sg_model_error *err);
/* Drops words seen fewer than min_count times and sorts the rest: most frequent first,
 * ties in byte order (so the order does not depend on the corpus's). */
SG_API int sg_vocab_finalize(sg_vocab *v, int64_t min_count, sg_model_error *err);
/* Writes `word count` lines in order, atomically. */
SG_API int sg_vocab_save(const sg_vocab *v, const char *path, sg_model_error *err);
SG_API int64_t sg_vocab_size(const sg_vocab *v);
SG_API const char *sg_vocab_word(const sg_vocab *v, int64_t i);  /* NULL out of range */
SG_API int64_t sg_vocab_count(const sg_vocab *v, int64_t i);     /* -1 out of range */
SG_API int64_t sg_vocab_find(const sg_vocab *v, const char *word); /* -1: absent */
SG_API int64_t sg_vocab_tokens(const sg_vocab *v); /* every token counted, kept or not */
SG_API int64_t sg_vocab_lines(const sg_vocab *v);
SG_API int64_t sg_vocab_kept_tokens(const sg_vocab *v); /* the counts of the words kept, summed */
/* The FNV-1a 64 hash of the counted corpus's bytes (of the tokens handed in: each word
 * followed by a space, each sentence end a newline): what a checkpoint records. */
SG_API uint64_t sg_vocab_corpus_hash(const sg_vocab *v);

/* ---------------------------------------------------------------- word2vec */

typedef enum { SG_W2V_FUSED, SG_W2V_GRAPH } sg_w2v_engine;
#define SG_W2V_MAX_WINDOW 100   /* window and negative: at most these */
#define SG_W2V_MAX_NEGATIVE 100

/* Several trainers merging their tables (sgrad-w2v's MPI ranks, tools/w2v/dist.c; the
 * library's -replicas): rank r of `ranks` trains on bytes [r S / P, (r + 1) S / P) of the
 * corpus, each moved to the next line's start, every epoch; every sync_steps steps sync
 * (collective) sums each rank's changes since the last sync into the tables all held
 * then (the first call, before any step, gives every rank rank 0's tables). With 3+ ranks
 * the rows the trainer plans as hot (hot_levels levels; level l every hot_period[l]
 * steps: the first hot_in[l] input rows, hot_out[l] output rows, the last hot_node[l]
 * inner nodes; sg_w2v_hot_rows) are merged in between by merge_hot. tables: in, out
 * (NULL without negative sampling), hs (NULL without it). active: this rank is still in
 * its share of the epoch; *any_active: whether any is. dirty[k]: rows of table k this
 * rank changed since their last merge, which the trainer marks (NULL: merge every row).
 * 0, or -1 (the merger reports its own error). */
#define SG_W2V_MAX_HOT_LEVELS 16
typedef struct sg_w2v_merger sg_w2v_merger;
struct sg_w2v_merger {
    int rank, ranks;
    int64_t sync_steps;
    int (*sync)(sg_w2v_merger *p, sg_tensor *const *tables, bool active, bool *any_active);
    int hot_levels; /* set by the trainer */
    int64_t hot_period[SG_W2V_MAX_HOT_LEVELS + 1];
    int64_t hot_in[SG_W2V_MAX_HOT_LEVELS + 1], hot_out[SG_W2V_MAX_HOT_LEVELS + 1],
        hot_node[SG_W2V_MAX_HOT_LEVELS + 1];
    int (*merge_hot)(sg_w2v_merger *p, sg_tensor *const *tables, int level, bool active, bool *any_active);
    uint8_t *dirty[3];
    int threads;    /* the threads of all ranks together, for per-thread rates (0: ranks x this one's) */
    bool want_stop; /* set by the trainer: its event callback asked to stop */
    bool stop;      /* set by sync: some rank wants to stop, so every rank stops after it */
    void *impl;
};
/* Rows [*lo, *hi) of table k (0 in, 1 out, 2 hs) of `rows` rows that hot level `level`
 * merges (level 0: all). */
SG_API void sg_w2v_hot_rows(const sg_w2v_merger *p, int level, int k, int64_t rows, int64_t *lo, int64_t *hi);

/* Options: word2vec.c's flags and defaults (sgrad-w2v -help names them). */
typedef struct {
    int size, window, negative, hs, iter, threads, cbow, hogwild, replicas;
    int64_t min_count, batch, sync_every, save_every, token_cache;
    double sample, alpha; /* alpha <= 0: 0.025 for skip-gram, 0.05 for CBOW */
    uint64_t seed;
    sg_w2v_engine engine;
    const char *checkpoint; /* written every save_every steps (0: each epoch's end) and at the end */
    const char *resume;     /* a checkpoint to continue from */
    int verbose;            /* INFO events up to this level (0 none) */
    sg_event_fn on_event;
    void *event_ud;
    sg_w2v_merger *merger; /* NULL: one process */
    int64_t prefetch_min;  /* drawing prefetches past this noise-table size (bytes) */
    int64_t epoch_words;   /* the corpus's tokens per epoch, over which the learning rate
                              falls (0: the vocabulary's count of its corpus): for training
                              on another corpus than the one counted */
} sg_w2v_opts;
SG_API sg_w2v_opts sg_w2v_opts_default(void);

typedef struct {
    double seconds;              /* training wall time */
    double words_per_sec_thread; /* over all ranks' or replicas' threads (threads) */
    int threads;
    int64_t tokens;              /* corpus tokens read by this call's trainers */
    double final_loss;           /* mean loss per example over the last epoch */
    int64_t examples, steps, vocab_size;
    double t_forward, t_backward, t_draw, t_overlapped, t_sync; /* seconds in the steps' parts */
    int64_t merges, steps_one_thread;
    int epochs_replayed;         /* epochs that replayed token ids instead of the file */
    bool refused;                /* the resume checkpoint was refused before training */
} sg_w2v_result;

typedef struct sg_w2v sg_w2v;
/* A model to train with opts (checked here: SG_ERR_ARG naming the option). */
SG_API sg_w2v *sg_w2v_new(const sg_w2v_opts *opts, sg_model_error *err);
SG_API void sg_w2v_free(sg_w2v *m);
/* The options m trains with: sg_w2v_new's (or the last set), or those a loaded model file
 * recorded (its training flags; threads as loaded; no callback). The strings are m's,
 * valid until the options change. */
SG_API sg_w2v_opts sg_w2v_options(const sg_w2v *m);
/* Replaces the options of m's coming calls (checked as sg_w2v_new does), e.g. the event
 * callback of a loaded model, or the epochs, alpha and epoch_words of a continued
 * training. While m holds tables, size, hs and whether negative is 0 are theirs
 * (SG_ERR_ARG). min_count applies at the next sg_w2v_build_vocab. */
SG_API int sg_w2v_set_options(sg_w2v *m, const sg_w2v_opts *opts, sg_model_error *err);
/* The vocabulary: counted from corpus (given NULL), or given's words and counts (with
 * corpus, read once for its size and hash; NULL: tokens handed in), then min_count
 * applied. With opts.resume naming a checkpoint that holds its vocabulary, that one is
 * taken and the corpus only read for its size and hash. Tables m held are dropped (the
 * next training starts afresh). */
SG_API int sg_w2v_build_vocab(sg_w2v *m, const char *corpus, const sg_vocab *given, sg_model_error *err);
SG_API const sg_vocab *sg_w2v_vocab(const sg_w2v *m);
/* Whether opts.resume can be resumed by this model (flags, corpus, vocabulary). */
SG_API int sg_w2v_check_resume(const sg_w2v *m, sg_model_error *err);
/* Continued training (gensim's train() called again): a training call on a model that
 * holds tables, trained by an earlier call (stopped or not) or read by sg_w2v_load, trains
 * those tables on instead of starting afresh. The vocabulary stays (tokens outside it are
 * skipped, as always); the learning rate falls again from alpha over the call's opts.iter
 * epochs of opts.epoch_words tokens (0: the vocabulary's count); the random stream goes on
 * from where the tables' last training left it, which a model file records, so a model
 * saved and loaded trains on bitwise as the one saved would have (a file without that
 * record continues from opts.seed's stream). One model: opts.replicas 1, no merger, no
 * checkpoint or resume (SG_ERR_ARG; save the model between calls instead). A failed
 * continued call leaves the tables at its last step. The first call on a model is
 * unchanged by any of this. */
/* Trains on corpus (read each epoch, or replayed from the vocabulary pass's record). */
SG_API int sg_w2v_train_file(sg_w2v *m, const char *corpus, sg_w2v_result *res, sg_model_error *err);
/* Token ids handed in by the caller, in chunks: read fills ids[0..cap) and returns how
 * many (a vocabulary index, SG_W2V_OOV for a token outside it, SG_W2V_EOS for a sentence
 * end), 0 at the end of the corpus (the next call starts the next epoch), < 0 to fail
 * (SG_ERR_ARG, as for an id out of range). The epochs after the first may replay the
 * first one's ids (opts.token_cache) instead of calling again; either way the model is
 * bitwise that of training on a file holding those tokens with the same vocabulary. One
 * model (no replicas or merger), no checkpoints (a position is a file offset). */
#define SG_W2V_OOV (-1)
#define SG_W2V_EOS (-2)
typedef int64_t (*sg_token_read_fn)(void *ud, int32_t *ids, int64_t cap);
SG_API int sg_w2v_train_tokens(sg_w2v *m, sg_token_read_fn read, void *ud, sg_w2v_result *res,
                               sg_model_error *err);
/* A model file (a safetensors checkpoint: tables, vocabulary with counts, options, the
 * random stream and the corpus's token and line counts), read back by sg_w2v_load with
 * those options (threads: the given count, 0 all), which also reads a training checkpoint
 * (-checkpoint; it records no corpus token count: continue it with opts.epoch_words):
 * neither needs the corpus. */
SG_API int sg_w2v_save(const sg_w2v *m, const char *path, sg_model_error *err);
SG_API sg_w2v *sg_w2v_load(const char *path, int threads, sg_model_error *err);
/* A word2vec vectors file (binary 1, 0, or -1 to tell them apart) as a model for queries. */
SG_API sg_w2v *sg_w2v_load_vectors(const char *path, int binary, sg_model_error *err);
/* Table 0 (word vectors) or 1 (context vectors) in word2vec's format, atomically. */
SG_API int sg_w2v_write_vectors(const sg_w2v *m, const char *path, int table, int binary, sg_model_error *err);
/* word2vec.c's k-means of the word vectors into k classes, `word class` lines. */
SG_API int sg_w2v_write_classes(const sg_w2v *m, const char *path, int k, sg_model_error *err);
/* Borrowed: 0 word vectors (V,D), 1 context vectors, 2 inner nodes; NULL if absent. */
SG_API sg_tensor *sg_w2v_table(const sg_w2v *m, int which);
SG_API int64_t sg_w2v_size(const sg_w2v *m); /* words */
SG_API int64_t sg_w2v_dim(const sg_w2v *m);
SG_API const char *sg_w2v_word(const sg_w2v *m, int64_t i);
SG_API int64_t sg_w2v_find(const sg_w2v *m, const char *word); /* -1: absent */
/* The ids of n packed sentences (as sg_vocab_add_packed's) for sg_w2v_train_tokens: each
 * token's row (cut as the reader cuts; SG_W2V_OOV when absent; an empty token, which no
 * file holds, left out), SG_W2V_EOS after each sentence, into ids (cap >= the tokens + n).
 * Returns the ids written, or minus an error status (nothing written). */
SG_API int64_t sg_w2v_lookup_packed(const sg_w2v *m, const char *buf, int64_t len, const int64_t *lens, int64_t n,
                                    int32_t *ids, int64_t cap, sg_model_error *err);
SG_API int sg_w2v_threads(const sg_w2v *m);
/* A word's vector into out (dim); SG_ERR_INDEX if absent. */
SG_API int sg_w2v_word_vector(const sg_w2v *m, const char *word, float *out, sg_model_error *err);
/* The mean of the unit vectors of the words found (gensim's get_mean_vector); *found of n. */
SG_API int sg_w2v_sentence_vector(const sg_w2v *m, const char *const *words, int64_t n, float *out,
                                  int64_t *found, sg_model_error *err);
/* The k (<= 64) rows most similar by cosine to query (dim), rows in exclude[0..n_exclude)
 * left out, best first (ties: the lower row); returns how many, or < 0 (out of memory). */
SG_API int sg_w2v_nearest(sg_w2v *m, const float *query, const int64_t *exclude, int n_exclude, int k,
                          int64_t *rows, float *sims);
/* word's k nearest (the word left out); SG_ERR_INDEX naming a word not in the vocabulary. */
SG_API int sg_w2v_neighbors(sg_w2v *m, const char *word, int k, int64_t *rows, float *sims, int *n,
                            sg_model_error *err);
/* a : b :: c : ? by 3CosAdd over unit vectors: the k best rows (a, b, c left out). */
SG_API int sg_w2v_analogy(sg_w2v *m, const char *a, const char *b, const char *c, int k, int64_t *rows,
                          float *sims, int *n, sg_model_error *err);
/* The analogy benchmark (word2vec's questions-words format) over the `restrict_rows`
 * most frequent words (<= 0: all), ASCII case folded. */
typedef struct {
    char *name;
    int64_t total, covered, correct;
} sg_w2v_eval_section;
typedef struct {
    int64_t questions, covered, correct, rows;
    int64_t skipped, first_skipped; /* lines not of 4 words, the first one's number */
    int64_t n_sections;
    sg_w2v_eval_section *sections;
} sg_w2v_eval;
SG_API int sg_w2v_evaluate(sg_w2v *m, const char *questions, int64_t restrict_rows, sg_w2v_eval *ev,
                           sg_model_error *err);
SG_API void sg_w2v_eval_free(sg_w2v_eval *ev);

/* ---------------------------------------------------------------- fastText */

typedef enum { SG_FT_SUPERVISED, SG_FT_SKIPGRAM, SG_FT_CBOW } sg_ft_kind;
typedef enum { SG_FT_SOFTMAX, SG_FT_NS, SG_FT_HS, SG_FT_OVA } sg_ft_loss;

/* Options: fastText's flags and defaults for kind (sgrad-fasttext -help). */
typedef struct {
    sg_ft_kind kind;
    const char *label; /* label prefix */
    int dim, epoch, word_ngrams, minn, maxn, neg, threads, batch;
    int64_t bucket, min_count, min_count_label;
    double lr;
    uint64_t seed;
    sg_ft_loss loss;
    int verbose;        /* INFO events up to this level */
    int ws;             /* vectors: context window */
    double sample;      /* vectors: -t */
    int lr_update_rate; /* accepted; the rate falls every step */
    sg_event_fn on_event;
    void *event_ud;
} sg_ft_opts;
SG_API sg_ft_opts sg_ft_opts_default(sg_ft_kind kind);
/* Whether opts can train (ranges, -minn/-maxn, -bucket with n-grams, the loss of vectors,
 * the label prefix): SG_OK or SG_ERR_ARG naming the flags. */
SG_API int sg_ft_opts_check(const sg_ft_opts *opts, sg_model_error *err);
SG_API const char *sg_ft_kind_name(sg_ft_kind kind);
SG_API const char *sg_ft_loss_name(sg_ft_loss loss);
SG_API int sg_ft_loss_parse(const char *name, sg_ft_loss *loss); /* 0 or -1 */

typedef struct {
    int64_t examples;          /* per epoch */
    int64_t no_label, no_word; /* lines skipped (supervised) */
    int64_t steps;
    double seconds, final_loss;
} sg_ft_result;

typedef struct sg_ft sg_ft;
/* Trains a model of opts->kind on the file input (read twice: the dictionary, then the
 * examples or each epoch). */
SG_API sg_ft *sg_ft_train_file(const char *input, const sg_ft_opts *opts, sg_ft_result *res,
                               sg_model_error *err);
/* The model file (MODEL.bin) / every vocabulary word's vector as word2vec text (.vec). */
SG_API int sg_ft_save(const sg_ft *m, const char *path, sg_model_error *err);
SG_API int sg_ft_write_vectors(const sg_ft *m, const char *path, sg_model_error *err);
/* Reads a model file; kind: the kind wanted (SG_FT_SUPERVISED: a classifier; SG_FT_SKIPGRAM
 * or SG_FT_CBOW: word vectors of either), else SG_ERR_ARG. Damage is SG_ERR_FORMAT naming
 * the path. */
SG_API sg_ft *sg_ft_load(const char *path, sg_ft_kind kind, sg_model_error *err);
SG_API void sg_ft_free(sg_ft *m);
SG_API sg_ft_kind sg_ft_kind_of(const sg_ft *m);
SG_API int sg_ft_dim(const sg_ft *m);
SG_API int64_t sg_ft_words(const sg_ft *m);
SG_API const char *sg_ft_word(const sg_ft *m, int64_t i);
SG_API int64_t sg_ft_find_word(const sg_ft *m, const char *token); /* cut as read; -1 absent */
SG_API int64_t sg_ft_labels(const sg_ft *m);
SG_API const char *sg_ft_label(const sg_ft *m, int64_t i);
/* A token's vector (the mean of its word and character n-gram rows; zero without any). */
SG_API int sg_ft_word_vector(const sg_ft *m, const char *token, float *out, sg_model_error *err);
/* A line's vector: the classifier's mean of its input rows; word vectors' mean of its
 * words' unit vectors (fastText's getSentenceVector). */
SG_API int sg_ft_sentence_vector(const sg_ft *m, char *const *tokens, int64_t n, bool eol, float *out,
                                 sg_model_error *err);
/* One line of the classifier: score[0..labels) receives each label's log-probability as
 * fastText ranks them (log(p + 1e-5)); *inputs the line's input rows (0: no word, no
 * scores); gold[0..*n_gold) its known labels (at most gold_cap kept). */
SG_API int sg_ft_predict(sg_ft *m, char *const *tokens, int64_t n, bool eol, double *score, int64_t *inputs,
                         int64_t *gold, int64_t gold_cap, int64_t *n_gold, sg_model_error *err);
/* The k words nearest by cosine to query (dim), ban[0..n_ban) left out (vocabulary
 * indices), into best / sim; returns how many, or < 0 (out of memory). */
SG_API int64_t sg_ft_nearest(sg_ft *m, const float *query, int64_t k, const int64_t *ban, int n_ban,
                             int64_t *best, double *sim);

#ifdef __cplusplus
}
#endif
#endif
