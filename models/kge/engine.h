/* The knowledge-graph-embedding engine behind sg_kge (sgrad_kge.h) and sgrad-kge.
 *
 * Modules: options.c (defaults, names, checks), model.c (the tables, their start, the
 * score path: queries, sims, N3), train.c (the epoch loop: shuffle, batches, chunks with
 * negatives, the loss, backward, step, report, evaluate and save when due), eval.c
 * (filtered ranking), query.c (predictions, export), io.c (model files and checkpoints),
 * api.c (the public functions). The TSV reader and the filter index are kge.h's
 * (graph.c, filter.c). Clients of sgrad.h, sgrad_models.h and sgrad_kge.h.
 *
 * Invariants: entity rows [0, ent_train) are those of the training file; negatives are
 * drawn from them only. A model's tables live in their own context (kge_tables.ctx); a
 * training call replaces them. Every random draw comes from a counter-based stream keyed
 * by (seed, purpose, epoch, batch, chunk), so a run can resume at any batch boundary from
 * (epoch, batch) alone, and no draw depends on the thread count (nor on the rank count:
 * under P ranks, sg_kge_set_dist, train.c scores each rank's slice of every chunk on the
 * same draws, with E sharded and freed until the ranks' rows are gathered back at the
 * end; the caller's sg_kge_dist does the exchanges, so this library never links MPI).
 */
#ifndef SG_MODELS_KGE_ENGINE_H
#define SG_MODELS_KGE_ENGINE_H

#include "common/common.h"
#include "kge.h"
#include "sgrad_kge.h"

#include <stdbool.h>
#include <stdint.h>

/* Queries scored at once by the evaluator and predictions: a (block, entities) score
 * matrix (128 x 40k f32 is 20 MB). */
#define KGE_EVAL_BLOCK 128

/* ---- options (options.c) */
/* 0 when o can train, else -1 with the flag at fault (SG_ERR_ARG). */
int kge_opts_check(const sg_kge_opts *o, sg_model_error *e);
/* Whether the score is a distance (transe, rotate) or a dot product. */
bool kge_is_distance(sg_kge_model m);
/* Complex-valued rows (complex, rotate): dim = 2K, real parts then imaginary parts. */
bool kge_is_complex(sg_kge_model m);
/* The start rows' range: opts.init_scale, or for 0 the model's (1e-3 for dot models,
 * RotatE's (margin + 2) / hidden units for distance models). */
double kge_init_scale(const sg_kge_opts *o);

/* ---- the tables and the score path (model.c) */
typedef struct {
    sg_ctx *ctx;
    sg_tensor *E, *R;  /* (n_ent, dim), (rrows, rdim) f32, persistent, requiring grad */
    sg_kge_model model;
    bool reciprocal;
    int64_t n_ent, n_rel; /* names; rrows = n_rel, or 2 n_rel with reciprocal */
    int64_t dim, rrows, rdim;
} kge_tables;

/* Tables for n_ent x dim entities and n_rel relations of opts's model, on a new context of
 * opts->threads threads, filled with their start values (drawn from the stream keyed by
 * opts->seed). 0, or -1 with the reason. */
int kge_tables_init(kge_tables *t, const sg_kge_opts *o, int64_t n_ent, int64_t n_rel, sg_model_error *e);
/* The same shapes, zeros (for a load). */
int kge_tables_alloc(kge_tables *t, const sg_kge_opts *o, int64_t n_ent, int64_t n_rel, int threads,
                     sg_model_error *e);
void kge_tables_free(kge_tables *t);
/* An int64 tape tensor (n) holding idx[0..n). NULL on error (recorded on ctx). */
sg_tensor *kge_index(sg_ctx *ctx, const int64_t *idx, int64_t n);
/* The query of entity rows x (M,dim) and relation rows r (M,rdim, looked up) on the tape:
 * Q_t(x, r) (head_side false) or Q_h(r, x) (true). */
sg_tensor *kge_query(const kge_tables *t, sg_tensor *x, sg_tensor *r, bool head_side);
/* sim(q[m], e[m]) (M) for rows e (M,dim). */
sg_tensor *kge_score_rows(const kge_tables *t, sg_tensor *q, sg_tensor *e);
/* sim(q[m], n[j]) (M,N) for candidate rows n (N,dim); with et (dim,N) given (dot models),
 * the product with it (n unused). */
sg_tensor *kge_score_cross(const kge_tables *t, sg_tensor *q, sg_tensor *n, sg_tensor *et);
/* sum over rows and k of |x_k|^3 (complex modulus for complex-valued rows): scalar. */
sg_tensor *kge_n3(const kge_tables *t, sg_tensor *x, bool entity);

/* ---- training (train.c) */
/* The run's position between two batches: what a checkpoint saves beside the tables. */
typedef struct {
    int epoch;          /* the epoch under way (0-based); opts.epochs once done */
    int64_t batch;      /* the next batch of that epoch */
    int64_t steps;      /* all epochs */
    double epoch_loss;  /* this epoch's loss sum (per query, times queries) so far */
    int64_t epoch_queries;
} kge_position;

/* ---- evaluation (eval.c) */
/* Filtered ranks of n triples (ids within the tables): ranks[2i] the tail side of triple
 * i, ranks[2i+1] its head side. f NULL: raw ranking. 0, or -1 with the reason. */
int kge_rank_triples(const kge_tables *t, const int64_t *h, const int64_t *r, const int64_t *tl, int64_t n,
                     const kg_filter *f, double *ranks, sg_model_error *e);
/* Metrics of 2n ranks. */
void kge_metrics_of(const double *ranks, int64_t n, sg_kge_metrics *m);

/* ---- the handle (api.c) */
struct sg_kge {
    sg_kge_opts o;        /* strings point into checkpoint/resume, or NULL */
    char *checkpoint, *resume;
    kg_dict ents, rels;
    int64_t ent_train, rel_train;
    kg_triples train, valid, test;
    kge_tables tb;        /* ctx NULL: no tables */
    sg_kge_dist *dist;    /* the caller's (sg_kge_set_dist); NULL or 1 rank: one process */
};
/* Reads the files (valid and test may be NULL) into m's dictionaries and triples, and
 * starts the tables. 0, or -1 with the reason. */
int kge_prepare(sg_kge *m, const char *train, const char *valid, const char *test, sg_model_error *e);
/* Trains m's prepared tables per m->o. 0, SG_STOPPED, or -1 with the reason. */
int kge_train(sg_kge *m, sg_kge_result *res, sg_model_error *e);
/* The k best candidates of query q of side (tail side: x = head; head side: x = tail):
 * rows and scores. 0, or -1 (no memory). */
int kge_predict(const kge_tables *t, int64_t x, int64_t r, bool head_side, int k, int64_t *rows, float *scores,
                int *n, sg_model_error *e);

/* Writes the export files of sgrad_kge.h's sg_kge_export into dir. 0, or -1. */
int kge_export(const sg_kge *m, const char *dir, sg_model_error *e);

/* ---- files (io.c) */
/* The FNV-1a 64 hash of what a training run's bits depend on besides the options: the
 * names in row order and the training triples. */
uint64_t kge_data_hash(const sg_kge *m);
int kge_model_save(const sg_kge *m, const char *path, sg_model_error *e);
/* Reads a model file or checkpoint into an empty m (names, options, tables). */
int kge_model_load(sg_kge *m, const char *path, int threads, sg_model_error *e);
/* A training checkpoint: tables, optimizer, position. */
int kge_checkpoint_save(const sg_kge *m, sg_optim *opt, const kge_position *p, sg_model_error *e);
/* 0 when m->o.resume was made by the same options from the same data; then its tables,
 * optimizer state and position are loaded. -1 with the reason otherwise. */
int kge_checkpoint_resume(sg_kge *m, sg_optim *opt, kge_position *p, sg_model_error *e);

/* The counter-based streams: a stream for (seed, purpose, a, b, c). */
enum { KGE_STREAM_INIT = 1, KGE_STREAM_SHUFFLE = 2, KGE_STREAM_NEGS = 3 };
static inline uint64_t kge_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline tc_rng kge_stream(uint64_t seed, uint64_t purpose, uint64_t a, uint64_t b, uint64_t c)
{
    const uint64_t k = kge_mix(kge_mix(kge_mix(kge_mix(seed) ^ purpose) ^ a) ^ b) ^ c;
    return (tc_rng){kge_mix(k)};
}

/* Names of a dictionary (kge.h's kg_dict) by row. */
static inline int64_t kge_dict_size(const kg_dict *d) { return d->n; }
static inline const char *kge_dict_name(const kg_dict *d, int64_t i) { return d->names[i]; }

#endif
