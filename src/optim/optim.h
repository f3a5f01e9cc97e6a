/* Definitions shared by the optimizer files in src/optim: the optimizer object, the
 * per-parameter state that a parameter's optim_state points to, the row groups a sparse
 * update works on, and each optimizer kind's kernels.
 *
 * Invariants:
 * - param->optim_state is NULL or an sg__pstate whose `opt` lists it in opt->params at
 *   ps->index; its first member is the sg__param_owner through which sg_tensor_free
 *   unregisters a parameter (autograd/tape.h).
 * - Every live optimizer is on its context's list (ctx->optims, linked by prev/next); one
 *   that sg_optim_free found still called by a fused op on the tape is on
 *   ctx->optims_released instead (linked by next), fully alive until sg_tape_reset.
 * - opt->slot has opt->slot_len entries, each -1 or the stamp of an earlier row grouping
 *   (its epoch, below opt->slot_epoch + 1, and a group): row grouping reads both as "row not
 *   met yet", so it leaves its stamps behind (optim.c, group_rows).
 * - A kernel (dense or rows) is only called once everything that can fail is done: it
 *   writes and cannot fail. It receives s, the parameter's step being applied (already
 *   counted in *ps->step), and lr, that step's learning rate.
 */
#ifndef SG_OPTIM_H
#define SG_OPTIM_H

#include "autograd/tape.h"

#include <math.h>

typedef enum {
    SG__OPT_SGD,
    SG__OPT_ADAGRAD,
    SG__OPT_ROWWISE_ADAGRAD,
    SG__OPT_ADAM,
    SG__OPT_LAZY_ADAM
} sg__optim_kind;

#define SG__OPTIM_MAX_STATE 4

/* A learning rate that holds from parameter step `start` until the next run's start. */
typedef struct {
    int64_t start;
    double lr;
} sg__lr_run;

typedef struct {
    sg__param_owner owner; /* first: how sg_tensor_free reaches it (autograd/tape.h) */
    sg_optim *opt;
    sg_tensor *param;
    int64_t index;       /* position in opt->params */
    int64_t rows, width; /* param viewed as (rows, width) */
    int n_state;
    sg_tensor *state[SG__OPTIM_MAX_STATE];
    const char *state_name[SG__OPTIM_MAX_STATE];
    int64_t *step; /* data of the "step" state tensor: steps this parameter took */
    /* exact lazy SGD */
    int64_t *last;       /* (rows) data of "last_step", or NULL when SGD is not lazy */
    bool lagging;        /* some row may be behind *step */
    sg__lr_run *runs;    /* learning rates since the last flush, by parameter step */
    int64_t n_runs, cap_runs;
} sg__pstate;

/* The rows of one sparse update, grouped: group i is row rows[i] (i itself when rows is
 * NULL) and sums gradient rows occ[off[i] .. off[i+1]) in that order (gradient row i alone
 * when off is NULL). Groups name distinct rows unless `unique` is false (linear updates
 * only). */
typedef struct {
    int64_t n;
    const int64_t *rows;
    const int64_t *off;
    const int64_t *occ;
    bool unique;
} sg__rowgroups;

typedef struct {
    /* Allocates the kind's state tensors for ps (after ps->rows/width are set). */
    int (*init)(sg_optim *opt, sg__pstate *ps);
    /* Dense update of the whole parameter with g (numel); NULL: use `rows` over all rows. */
    void (*dense)(sg_optim *opt, sg__pstate *ps, const void *g, int64_t s, double lr);
    /* Update of the grouped rows with gradient rows g (.., width). */
    void (*rows)(sg_optim *opt, sg__pstate *ps, const sg__rowgroups *rg, const void *g,
                 int64_t s, double lr);
    /* Brings every row of ps up to date; NULL: nothing is ever behind. */
    void (*flush)(sg_optim *opt, sg__pstate *ps);
    /* Brings the rows named by an index tensor up to date (entries out of range skipped);
     * NULL when flush is. */
    void (*sync_rows)(sg_optim *opt, sg__pstate *ps, const sg_tensor *rows);
    /* The kind needs sg__rowgroups with distinct rows (opt->slot sized to rows). */
    bool (*needs_groups)(const sg_optim *opt);
} sg__optim_ops;

struct sg_optim {
    sg__row_updater rows; /* first: how fused ops reach this optimizer (autograd/tape.h) */
    sg_ctx *ctx;
    sg__optim_kind kind;
    const char *name;
    const sg__optim_ops *ops;
    union {
        sg_sgd_opts sgd;
        sg_adagrad_opts adagrad;
        sg_adam_opts adam;
    } o;
    sg_optim *prev, *next; /* the context's list of live optimizers */
    bool check_finite;     /* refuse non-finite gradients (sg_optim_set_check_finite) */
    double lr; /* base learning rate */
    sg_lr_schedule sched;
    int64_t t; /* steps taken */

    sg__pstate **params;
    int64_t n_params, cap_params;
    /* Parameters (or gradient-store entries) the last step looked at, counted wherever a
     * step examines one, whatever it then does: the tests check that it equals the number
     * of gradients, not the number of parameters. */
    int64_t visited;

    int64_t *slot; /* row -> stamp of the grouping that met it (epoch, group), or -1 */
    int64_t slot_len;
    int64_t slot_epoch; /* the last grouping's epoch through slot (0: none yet) */

    /* LazyAdam: beta^k for k < 2^30 as a product of three tables of 1024 (adam.c) */
    double *beta_pow;
    /* Adam: beta1^s and beta2^s of the last step count s a dense update used (0: none),
     * so that the parameters of one step, which share s, call pow once (adam.c) */
    int64_t adam_pow_step;
    double adam_pow[2];

    /* exact lazy SGD: pw[j] = M(pw_lr)^(2^j) (row-major 2x2) for j < pw_n */
    double pw_lr;
    int pw_n;
    double pw[63][4];
};

/* A row grouping's stamp in opt->slot: epoch << SG__SLOT_GROUP_BITS | group; epochs run
 * from 1 to SG__SLOT_EPOCH_MAX, then the slot is reset (optim.c, group_rows). */
#define SG__SLOT_GROUP_BITS 40
#define SG__SLOT_EPOCH_MAX (((int64_t)1 << (63 - SG__SLOT_GROUP_BITS)) - 1)

/* ps when p is a parameter of opt, else NULL (either may be NULL). */
static inline sg__pstate *sg__optim_state_of(const sg_optim *opt, const sg_tensor *p)
{
    if (!opt || !p) return NULL;
    sg__pstate *ps = p->optim_state;
    return ps && ps->opt == opt ? ps : NULL;
}

/* ps is a parameter of exact lazy SGD (SGD with momentum or weight decay): its rows may be
 * behind its step, caught up through its learning-rate runs (sgd.c). */
static inline bool sg__is_lazy_sgd(const sg__pstate *ps) { return ps->last != NULL; }

/* A learning rate an optimizer accepts (finite, >= 0). */
static inline bool sg__valid_lr(double lr) { return isfinite(lr) && lr >= 0; }

extern const sg__optim_ops sg__sgd_ops, sg__adagrad_ops, sg__rowwise_adagrad_ops,
    sg__adam_ops, sg__lazy_adam_ops;

/* The fused row update (the implementation behind opt->rows.apply_rows): opt's update of
 * W's rows r->idx with gradient rows r (autograd/tape.h). SG_ERR_STATE when W is not a
 * parameter of opt, SG_ERR_INDEX for a row out of range, SG_ERR_ARG for a malformed r;
 * nothing changes on error. */
int sg__optim_apply_rows(sg_optim *opt, sg_tensor *W, const sg__fused_rows *r);
/* What sg__optim_apply_rows could refuse for the same arguments, checked without writing
 * (opt->rows.check_rows); with opt->check_finite also SG_ERR_VALUE for a gradient row
 * value that is not finite. */
int sg__optim_check_rows(sg_optim *opt, sg_tensor *W, const sg__fused_rows *r);

/* Makes a persistent state tensor for ps named `name` (shape given), filled with `fill`. */
sg_tensor *sg__optim_state_new(sg_optim *opt, sg__pstate *ps, const char *name,
                               sg_dtype dtype, int ndim, const int64_t *shape, double fill);

/* Tables of LazyAdam's powers of beta1 and beta2 (opt->beta_pow). */
int sg__lazy_adam_tables(sg_optim *opt);

/* The entries of factored rows bucketed by the part that owns their row, for a
 * deterministic update on several threads: part p's entries are order[start[p] ..
 * start[p+1]), ascending. parts == 1 (no buckets) on one thread or in Hogwild mode. */
typedef struct {
    int64_t parts;
    const int64_t *order, *start;
} sg__factored_buckets;

/* Buckets r's entries for an update of rows of `width` elements (one counting-sort pass,
 * O(n + parts), in the step arena); SG_ERR_NOMEM with nothing allocated kept. */
int sg__sgd_factored_buckets(sg_optim *opt, const sg__fused_rows *r, int64_t width,
                             sg__factored_buckets *b);

/* Linear SGD (no momentum, no weight decay) on factored gradient rows r (r->g NULL):
 * W[idx[k]] -= lr * scale * coef[k] * x[k / per], each row's entries in order (bitwise
 * the same for any thread count; b from sg__sgd_factored_buckets); with a
 * nondeterministic context, Hogwild-style. */
void sg__sgd_rows_factored(sg_optim *opt, sg__pstate *ps, const sg__fused_rows *r,
                           const sg__factored_buckets *b, double lr);

/* Prepares the exact lazy SGD catch-up for learning rate lr (outside parallel regions). */
void sg__sgd_prepare(sg_optim *opt, double lr);

/* Row r of exact lazy SGD parameter ps as of its step *ps->step (zero gradients over the
 * steps it is behind, exactly as sg_optim_flush computes them), written to w (width
 * elements of the parameter's dtype) and, with momentum, its momentum row to v (else v is
 * unused); the optimizer is not changed. For saving a checkpoint. */
void sg__sgd_row_current(const sg_optim *opt, const sg__pstate *ps, int64_t r, void *w, void *v);

/* One kernel call's job, handed to its chunk function through sg__parallel_for: the
 * update of parameter ps at step s with learning rate lr and gradient g; rg: the grouped
 * rows for a row kernel, NULL for a dense one. Chunks are elements (dense kernels, grain
 * SG__GRAIN) or groups (row kernels, grain sg__row_grain(width)); distinct groups name
 * distinct rows, so chunks write disjoint rows. Linear SGD's groups may repeat a row: it
 * runs one part per thread instead, each owning the rows a hash gives it and scanning
 * every group. */
typedef struct {
    sg_optim *opt;
    sg__pstate *ps;
    const sg__rowgroups *rg;
    const void *g;
    int64_t s;
    double lr;
} sg__optim_job;

/* Row kernels prefetch the parameter and state rows of the group this many groups ahead:
 * a large table's rows come from memory, and the prefetches overlap those misses. At most
 * SG__OPTIM_PREFETCH_MAX bytes of a row are prefetched (the hardware streams the rest). */
#define SG__OPTIM_AHEAD 8
#define SG__OPTIM_PREFETCH_MAX 1024

/* Prefetches (for writing) row `row` of a (rows, rowbytes) buffer; base NULL: nothing. */
static inline void sg__optim_prefetch(const void *base, int64_t row, size_t rowbytes)
{
    if (!base) return;
    const char *p = (const char *)base + (size_t)row * rowbytes;
    size_t n = rowbytes < SG__OPTIM_PREFETCH_MAX ? rowbytes : SG__OPTIM_PREFETCH_MAX;
    SG__FOR_LINES(q, p, n) SG__PREFETCH_W(q);
}

/* sqrt of a float or double in its own precision. */
#define SG__SQRT(x) _Generic((x), float: sqrtf, default: sqrt)(x)

/* Columns summed at once when a group has duplicate rows (a stack buffer). */
#define SG__OPTIM_CHUNK 256

/* The summed gradient of group i, columns [c0, c0 + len) (len <= SG__OPTIM_CHUNK): a
 * pointer into g when the group has one occurrence, else buf filled with the sum. */
#define SG__OPTIM_DEFINE_GROUP_SUM(T, NAME)                                                \
    static inline const T *NAME(const sg__rowgroups *rg, int64_t i, const T *g,           \
                                int64_t width, int64_t c0, int64_t len, T *buf)            \
    {                                                                                      \
        if (!rg->off) return g + i * width + c0;                                           \
        int64_t a = rg->off[i], b = rg->off[i + 1];                                        \
        if (b - a == 1) return g + rg->occ[a] * width + c0;                                \
        const T *s0 = g + rg->occ[a] * width + c0;                                         \
        for (int64_t j = 0; j < len; j++) buf[j] = s0[j];                                  \
        for (int64_t k = a + 1; k < b; k++) {                                              \
            const T *sk = g + rg->occ[k] * width + c0;                                     \
            for (int64_t j = 0; j < len; j++) buf[j] += sk[j];                             \
        }                                                                                  \
        return buf;                                                                        \
    }

SG__OPTIM_DEFINE_GROUP_SUM(float, sg__group_sum_f32)
SG__OPTIM_DEFINE_GROUP_SUM(double, sg__group_sum_f64)

/* Dispatch-friendly spelling: SG__GROUP_SUM(T)(...) picks the f32 or f64 version. */
#define SG__GROUP_SUM(T) \
    _Generic((T *)0, float *: sg__group_sum_f32, double *: sg__group_sum_f64)

static inline int64_t sg__group_row(const sg__rowgroups *rg, int64_t i)
{
    return rg->rows ? rg->rows[i] : i;
}

#endif
