/* sgrad_kge: knowledge-graph embeddings in libsgrad_models (TransE with L1 or L2
 * distance, DistMult, ComplEx, RotatE), trained with PyTorch-BigGraph's chunked shared
 * negatives and evaluated by filtered ranking. The program sgrad-kge is a flag parser and
 * printer over this header; a binding (Python) calls the same functions and gets bitwise
 * the same models for the same options.
 *
 * Data: TSV files of `head<TAB>relation<TAB>tail` lines (names any bytes but TAB, CR and
 * LF; 1 to 255 bytes). Entities are numbered in order of first appearance in the training
 * file, then those only in the validation and test files (likewise relations): rows
 * [0, entities_train) are trained, the rest keep their initial values and are still
 * ranked.
 *
 * Scores (higher is better): each model gives a tail query q = Q_t(h, r) and a head query
 * q = Q_h(r, t), and score = sim(q, e) for a candidate entity e:
 *   transe_l1 / transe_l2: h + r | t - r, sim -L1 / -L2 distance (dim reals per relation)
 *   distmult:              h * r | t * r, sim dot
 *   complex:               h (x) r | t (x) conj(r), sim dot (rows: K real parts, then K
 *                          imaginary parts, dim = 2K)
 *   rotate:                h (x) e^{i theta} | t (x) e^{-i theta}, sim -sum_k |q_k - e_k|
 *                          (complex modulus); a relation row holds K phases theta
 * With reciprocal relations (opts.reciprocal) the relation table has 2R rows and the head
 * query of (r, t) is the tail query of (t, r + R).
 *
 * Conventions are sgrad_models.h's: an opaque handle (sg_kge_free(NULL) is a no-op, one
 * thread at a time), SG_OK or an error status with *err filled (NULL for a handle), no
 * printing, no exit, events through the callback (which may stop training), and the
 * same model bits for any thread count.
 */
#ifndef SGRAD_KGE_H
#define SGRAD_KGE_H

#include "sgrad_models.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SG_KGE_TRANSE_L1, SG_KGE_TRANSE_L2, SG_KGE_DISTMULT, SG_KGE_COMPLEX, SG_KGE_ROTATE } sg_kge_model;
/* The ranking losses of a chunk (sgrad.h's sg_ranking_loss): softmax cross-entropy over
 * the positive and the negatives, logistic, margin, RotatE's self-adversarial. */
typedef enum { SG_KGE_SOFTMAX, SG_KGE_LOGISTIC, SG_KGE_MARGIN, SG_KGE_SELFADV } sg_kge_loss;
typedef enum { SG_KGE_ADAGRAD, SG_KGE_ROWWISE_ADAGRAD, SG_KGE_SGD, SG_KGE_LAZY_ADAM } sg_kge_optim;
typedef enum { SG_KGE_REG_NONE, SG_KGE_REG_N3 } sg_kge_reg;

/* Names as the program's flags spell them ("transe_l1", ..., "softmax", ..., "adagrad",
 * "rowwise-adagrad", "sgd", "lazy-adam", "none", "n3"); NULL for a value outside the enum.
 * The parsers return 0, or -1 for an unknown name (*out unchanged). */
SG_API const char *sg_kge_model_name(sg_kge_model m);
SG_API const char *sg_kge_loss_name(sg_kge_loss l);
SG_API const char *sg_kge_optim_name(sg_kge_optim o);
SG_API const char *sg_kge_reg_name(sg_kge_reg r);
SG_API int sg_kge_model_parse(const char *name, sg_kge_model *out);
SG_API int sg_kge_loss_parse(const char *name, sg_kge_loss *out);
SG_API int sg_kge_optim_parse(const char *name, sg_kge_optim *out);
SG_API int sg_kge_reg_parse(const char *name, sg_kge_reg *out);

/* Training options (sgrad-kge train -help names the flags). */
typedef struct {
    sg_kge_model model;
    int dim;            /* reals per entity row (even for complex and rotate) */
    int epochs;
    int64_t batch;      /* edges per optimizer step */
    int64_t chunk;      /* edges per chunk: a chunk shares its negatives */
    int64_t negs;       /* entities drawn per chunk, uniformly from the trained ones */
    int chunk_negs;     /* 1: the chunk's own true entities are negatives too (each
                           query's own one masked) */
    sg_kge_loss loss;
    double margin;      /* margin and selfadv losses; RotatE's gamma */
    double adv_temp;    /* selfadv: the softmax temperature of the negatives' weights */
    int reciprocal;     /* 1: inverse relations, tail queries only */
    sg_kge_reg reg;
    double reg_coef;    /* N3 weight (per query, on the batch's rows) */
    sg_kge_optim optim;
    double lr;
    double init_scale;  /* entity rows (and relation rows but rotate's phases) start
                           uniform in [-init_scale, init_scale]; 0: the model's (1e-3 for
                           distmult and complex, as kbc; (margin + 2) / hidden units for
                           transe and rotate, as RotatE's code); rotate's phases start
                           uniform in [-pi, pi] */
    int threads;        /* 0: every core */
    uint64_t seed;
    int eval_every;     /* epochs between validation rankings (0: none) */
    int64_t max_eval;   /* validation triples ranked then: the first max_eval (0: all) */
    const char *checkpoint; /* written every save_every steps (0: each epoch's end) and at
                               the end; copied by sg_kge_new */
    int64_t save_every;
    const char *resume; /* a checkpoint to continue from (copied) */
    int verbose;        /* INFO events up to this level (0 none) */
    sg_event_fn on_event;
    void *event_ud;
} sg_kge_opts;

/* The defaults of model: dim 400, chunk-negs 0, seed 1, max-eval 1000; DistMult and
 * ComplEx as kbc's ComplEx-N3 (softmax loss, reciprocal, N3 0.05, Adagrad lr 0.1), 30
 * epochs, batch = chunk = 1000 edges with 1000 negatives; TransE and RotatE with RotatE's
 * loss (selfadv, margin 6 (transe_l2: 1), adv-temp 0.5; no reciprocal, no N3), lazy-adam
 * lr 0.01, 25 epochs, batch = chunk = 512 edges with 512 negatives. How they were chosen:
 * docs/kge.md. */
SG_API sg_kge_opts sg_kge_opts_default(sg_kge_model model);
/* SG_OK when opts can train (ranges, an even dim for complex and rotate, loss and model
 * combinations), else SG_ERR_ARG naming the option as its flag. */
SG_API int sg_kge_opts_check(const sg_kge_opts *opts, sg_model_error *err);

/* What a training call did. */
typedef struct {
    int64_t entities, relations;             /* rows: every file's names */
    int64_t entities_train, relations_train; /* named in the training file */
    int64_t train_edges, valid_edges, test_edges;
    int64_t steps, edges;  /* optimizer steps and edges trained by this call */
    int epochs_done;       /* epochs complete (a resumed run counts the checkpoint's) */
    double seconds;        /* training wall time of this call */
    double edges_per_sec;
    double final_loss;     /* mean loss per query over the last epoch */
    double valid_mrr;      /* the last validation ranking's MRR; -1 if none ran */
    bool refused;          /* the resume checkpoint was refused before training */
} sg_kge_result;

/* Filtered ranking metrics (sg_kge_evaluate): means over 2 * count rankings (tail and
 * head side of each triple ranked); rank = 1 + #(better) + #(tied others) / 2. */
typedef struct {
    double mrr, hits1, hits3, hits10, mr;
    int64_t count;   /* triples ranked */
    int64_t unseen;  /* of those, naming an entity or relation not in the training file */
    int64_t unknown; /* triples left out: a name the model has no row for */
} sg_kge_metrics;

typedef struct sg_kge sg_kge;

/* A model to train with opts (checked: SG_ERR_ARG naming the flag); NULL on error. */
SG_API sg_kge *sg_kge_new(const sg_kge_opts *opts, sg_model_error *err);
SG_API void sg_kge_free(sg_kge *m);
/* Reads train, valid and test (valid and test may be NULL), builds the tables and trains
 * (continuing opts.resume when given: refused, res->refused set, when the checkpoint was
 * made with other options or other data). Malformed TSV is SG_ERR_FORMAT naming
 * "FILE:LINE"; an unreadable file SG_ERR_IO. SG_STOPPED when the event callback asked:
 * the model is that of the last step. res may be NULL. */
SG_API int sg_kge_train_files(sg_kge *m, const char *train, const char *valid, const char *test,
                              sg_kge_result *res, sg_model_error *err);
/* Training by P processes (mpirun; the program's tools/kge/dist.c implements it over
 * sgrad_dist.h, so this library needs no MPI). Every rank calls sg_kge_train_files with
 * the same options and files. Each step is one global batch: every chunk's units (its
 * queries with reciprocal relations, else its edges) are cut into P contiguous slices and
 * rank r scores slice r against the chunk's negatives (the stream keyed by seed, epoch,
 * batch and chunk, as in one process). The entity table is sharded by row range (each
 * rank holds its rows and their optimizer state); the relation table is replicated and
 * its gradient summed over the ranks before the same step on every rank. Every call below
 * is collective: every rank makes it, in the same order. Each returns 0, or -1 with *err
 * set (the same on every rank where the failure is agreed). */
typedef struct sg_kge_dist sg_kge_dist;
struct sg_kge_dist {
    int rank, ranks;
    /* The sharded (rows, dim) f32 table on ctx (the tables' context): this rank's shard
     * (persistent, requiring grad, zeros) holding global rows [*begin, *end); NULL on error. */
    sg_tensor *(*table)(sg_kge_dist *d, sg_ctx *ctx, int64_t rows, int64_t dim, int64_t *begin, int64_t *end,
                        sg_model_error *err);
    /* The rows idx (int64, 1-D, any length including 0) of the table: a tape tensor whose
     * gradient backward() sends to the rows' owners; NULL on error. */
    sg_tensor *(*lookup)(sg_kge_dist *d, sg_tensor *idx, sg_model_error *err);
    int (*backward)(sg_kge_dist *d, sg_model_error *err);
    /* rel's gradient replaced by the sum over the ranks (no averaging). */
    int (*reduce)(sg_kge_dist *d, sg_tensor *rel, sg_model_error *err);
    /* x[0..n) replaced by its sum over the ranks, the same on every rank. */
    int (*sum)(sg_kge_dist *d, double *x, int n, sg_model_error *err);
    /* The whole table, row-major (rows x dim floats), into full on every rank. */
    int (*gather)(sg_kge_dist *d, float *full, sg_model_error *err);
    /* The shard and opt's state (opt's one parameter is the shard) to or from
     * "<path>.<rank>-of-<ranks>"; load refuses another rank count. */
    int (*save)(sg_kge_dist *d, const char *path, sg_optim *opt, sg_model_error *err);
    int (*load)(sg_kge_dist *d, const char *path, sg_optim *opt, sg_model_error *err);
    /* Frees the table (after training; the shard goes with it). */
    void (*release)(sg_kge_dist *d);
    void *impl;
};
/* Trains m's later sg_kge_train_files calls as rank d->rank of d->ranks (d NULL or
 * d->ranks 1: one process). d stays the caller's and must outlive those calls. The
 * trained model is whole on every rank afterwards (the ranks' shards gathered); a
 * checkpoint (opts.checkpoint) is the shards' files beside one file of the replicated
 * relation table, optimizer and position that rank 0 writes at the path itself; a resume
 * is refused, before training, when the checkpoint was made by another rank count. */
SG_API void sg_kge_set_dist(sg_kge *m, sg_kge_dist *d);
/* Filtered ranking of the triples of test (a TSV file) against every entity, tails and
 * heads, with the known triples of filters[0..n_filters) removed (the test triple itself
 * is always ranked). Triples naming a name the model has no row for are left out and
 * counted in unknown. SG_ERR_FORMAT / SG_ERR_IO for a bad file, SG_ERR_STATE without a
 * trained or loaded model. */
SG_API int sg_kge_evaluate(sg_kge *m, const char *test, const char *const *filters, int n_filters,
                           sg_kge_metrics *out, sg_model_error *err);
/* The k best tails of (head, relation) / heads of (relation, tail), best first (ties: the
 * lower entity row first): rows[0..*n) and scores; names (may be NULL) gets the entity
 * names (owned by m, valid until it is freed). k >= 1; *n = min(k, entities). SG_ERR_INDEX
 * naming a name the model does not know. */
SG_API int sg_kge_predict_tails(sg_kge *m, const char *head, const char *relation, int k, int64_t *rows,
                                float *scores, const char **names, int *n, sg_model_error *err);
SG_API int sg_kge_predict_heads(sg_kge *m, const char *relation, const char *tail, int k, int64_t *rows,
                                float *scores, const char **names, int *n, sg_model_error *err);
/* The model file: one safetensors checkpoint holding "entities" (E, dim) and "relations"
 * (R', rdim) f32 with the names and the options in its metadata (kge.*), written
 * atomically. sg_kge_load reads a model file or a one-process training checkpoint into a
 * model for queries on `threads` threads (0: every core); SG_ERR_FORMAT naming path when
 * it is not one (a multi-rank checkpoint's file holds no entity table: resume it, or
 * load the run's model file). */
SG_API int sg_kge_save(const sg_kge *m, const char *path, sg_model_error *err);
SG_API sg_kge *sg_kge_load(const char *path, int threads, sg_model_error *err);
/* Writes into the existing directory dir: entities.tsv and relations.tsv (`name<TAB>v1
 * v2 ...`, 9 significant digits: floats read back exactly), entities.npy and
 * relations.npy (float32, C order), entity_names.txt and relation_names.txt (a name a
 * line, in row order). With reciprocal relations the relation table's rows R..2R-1 (the
 * inverses) are named "NAME (inverse)". Rotate's relation rows are its phases. Each file
 * is replaced atomically; SG_ERR_IO naming the file that could not be written. */
SG_API int sg_kge_export(const sg_kge *m, const char *dir, sg_model_error *err);

/* Accessors (0 / NULL for m NULL or without tables). The options in use: for a loaded
 * model those of its file (paths and callbacks NULL). */
SG_API const sg_kge_opts *sg_kge_options(const sg_kge *m);
SG_API int64_t sg_kge_entities(const sg_kge *m);
SG_API int64_t sg_kge_relations(const sg_kge *m); /* names; the table has 2x with reciprocal */
SG_API int64_t sg_kge_entities_train(const sg_kge *m);
SG_API int64_t sg_kge_relations_train(const sg_kge *m);
SG_API const char *sg_kge_entity_name(const sg_kge *m, int64_t i);   /* NULL out of range */
SG_API const char *sg_kge_relation_name(const sg_kge *m, int64_t i); /* NULL out of range */
SG_API int64_t sg_kge_find_entity(const sg_kge *m, const char *name);   /* -1: absent */
SG_API int64_t sg_kge_find_relation(const sg_kge *m, const char *name); /* -1: absent */
/* The tables as row-major float32 owned by m (valid until the next training call or
 * sg_kge_free): which 0 the entities (*rows = entities, *cols = dim), 1 the relations
 * (*rows = relations, x2 with reciprocal; *cols = dim, or dim / 2 phases for rotate).
 * Writing them changes the model. NULL for another `which` or no tables. */
SG_API float *sg_kge_table(sg_kge *m, int which, int64_t *rows, int64_t *cols);

#ifdef __cplusplus
}
#endif
#endif
