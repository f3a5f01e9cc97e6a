/* The autograd layer's private header: tape nodes, recording, the gradient store, the
 * accumulation rules, deferred (fused) work and the interface through which a fused op
 * reaches an optimizer. Includes only the layers below (sparse, core).
 *
 * Invariant: nodes are appended in creation order, which is a topological order.
 */
#ifndef SG_TAPE_H
#define SG_TAPE_H

#include "sparse/sparse.h"

/* A backward function receives the node and the (dense, unless the node accepts sparse)
 * gradient of its output, and pushes input gradients with sg__accum_grad. A uniform gout
 * (core.h: one stored element) reaches only nodes that accept one. */
typedef int (*sg__backward_fn)(sg_node *n, sg_tensor *gout);

#define SG__MAX_NODE_INPUTS 4

struct sg_node {
    sg__backward_fn backward;
    const char *name;
    sg_tensor *out;
    int n_in;
    sg_tensor *in[SG__MAX_NODE_INPUTS];
    sg_tensor *saved[2]; /* op-specific saved tensors (e.g. softmax output) */
    double scalar[2];    /* op-specific scalars */
    int64_t iarg[4];     /* op-specific integers (dims, flags) */
    void *extra;         /* op-specific pointer (e.g. an optimizer for fused updates) */
    bool accepts_sparse_gout; /* else the engine densifies a COO gout first */
    bool accepts_uniform_gout; /* else the engine expands a uniform gout first */
    uint32_t visit; /* backward traversal mark (compared with ctx->visit_epoch) */
    int64_t seq; /* creation order on the tape */
    sg_node *prev; /* the node recorded before this one (ctx->last_node is the newest) */
    /* The backward traversal's working state, kept in the nodes it reaches so that a
     * backward allocates nothing for it (tape.c, collect): the depth-first stack's link
     * and the next input to explore, then the order the gradients flow in (outputs
     * first). Meaningful only during one sg_backward_grad. */
    sg_node *bw_stack, *bw_next;
    int bw_in;
};

/* True when the op's output must be recorded: grad enabled and some input requires grad. */
bool sg__needs_grad(sg_ctx *ctx, int n, sg_tensor *const *in);
/* Records a node for `out` with inputs in[0..n). Sets out->node and out->requires_grad.
 * Returns NULL (NOMEM recorded) on failure. */
sg_node *sg__node_new(sg_ctx *ctx, sg__backward_fn bw, const char *name, sg_tensor *out,
                      int n, sg_tensor *const *in);
/* Adds g (dense or COO, the shape of x) to x's gradient under the rules of docs/design.md
 * ("Gradient accumulation"):
 * none + g = g (no copy; `owned` says whether g may later be modified in place),
 * sparse + sparse = concatenation, dense + sparse = index-add, sparse + dense = dense.
 * A uniform g stays uniform only as the first gradient of a non-leaf; a leaf's gradient,
 * or a sum with another, is expanded first. Leaves that require grad are listed in the
 * gradient store. No-op if !x->requires_grad. */
int sg__accum_grad(sg_tensor *x, sg_tensor *g, bool owned);
/* Queues fn(n, arg) to run after the traversal of the current backward has succeeded,
 * in the order queued. For work that must not happen while other nodes may still read
 * what it changes: a fused optimizer update of a table in place. A failed backward drops
 * the queue, so nothing the caller can see changes. The queue runs twice: first with
 * ctx->fused_checking set, when fn must only check that it can succeed (and change
 * nothing but the step arena), then, if every fn passed, for real; so one refusal leaves
 * all the queued work undone. sg__fused_apply_rows follows this by itself. */
typedef int (*sg__deferred_fn)(sg_node *n, sg_tensor *arg);
int sg__defer(sg_node *n, sg__deferred_fn fn, sg_tensor *arg);
/* True when a node on the current tape refers to p (an input, a saved tensor, its extra
 * pointer such as a fused optimizer): freeing p must then wait for sg_tape_reset.
 * O(nodes on the tape); O(1) when the tape is empty. */
bool sg__tape_uses(const sg_ctx *ctx, const void *p);
/* Empties the gradient store (and the grads it lists) without dropping the tape. */
void sg__grads_clear(sg_ctx *ctx);
static inline bool sg__wants_grad(const sg_tensor *x) { return x && x->requires_grad; }

/* ---- fused updates: the seam between the ops and the optimizer layer above them.
 * An op that updates a table in its own backward (embedding, embedding_bag, sgns) is
 * given an sg_optim; it reaches the optimizer's row kernel through this interface, which
 * every sg_optim holds as its first member (src/optim/optim.h). So ops call the optimizer
 * without including a header of a higher layer. */

/* The gradient rows of a fused update of a (V, D) table W: n rows, row k for W's row
 * idx[k] (duplicates allowed). Either given, g (n, D) of W's dtype, or (g NULL) factored as
 *     row k = scale * coef[k] * x[k / per]        coef (n), x (n / per, D), W's dtype
 * which is how sgns holds its rows, or (g NULL, xrow set) gathered as
 *     row k = x[xrow[k]]                          xrow (n) in [0, nx), x (nx, D), W's dtype
 * which is how embedding_bag holds them (x: its output gradient, a bag's row shared by the
 * bag's entries). In both forms the optimizer may apply the rows without writing the
 * (n, D) rows out. */
typedef struct {
    const int64_t *idx;
    int64_t n;
    const void *g;
    const void *x, *coef;
    int64_t per;
    double scale;
    const int64_t *xrow;
    int64_t nx;
} sg__fused_rows;

/* The function table at the start of every sg_optim. */
typedef struct sg__row_updater {
    /* Everything apply_rows could refuse, checked without writing: SG_ERR_STATE (W not
     * opt's parameter), SG_ERR_INDEX, SG_ERR_ARG, SG_ERR_VALUE (learning rate, or a
     * gradient value that is not finite when opt checks them), SG_ERR_NOMEM. */
    int (*check_rows)(sg_optim *opt, sg_tensor *W, const sg__fused_rows *r);
    /* Applies opt's update to W's rows with gradient rows r; duplicates are summed before
     * nonlinear updates. Called after check_rows passed on the same rows (gradient values
     * are not checked again); errors as check_rows', nothing written on error. */
    int (*apply_rows)(sg_optim *opt, sg_tensor *W, const sg__fused_rows *r);
    /* True when p is registered with opt (hence a persistent leaf). */
    bool (*has_param)(const sg_optim *opt, const sg_tensor *p);
} sg__row_updater;

/* What a deferred fused update calls. The tape runs the deferred queue twice: a check
 * pass (ctx->fused_checking), in which this validates, and then, if every update passed,
 * the pass that writes; so a refused update anywhere in a backward leaves every table
 * unchanged. A deferred function that calls this must have no other effect than on the
 * step arena (it runs twice). */
static inline int sg__fused_apply_rows(sg_optim *opt, sg_tensor *W, const sg__fused_rows *r)
{
    if (W->released) return SG_OK; /* freed by the caller since the op: nobody sees W */
    const sg__row_updater *u = (const sg__row_updater *)(const void *)opt;
    return W->ctx->fused_checking ? u->check_rows(opt, W, r) : u->apply_rows(opt, W, r);
}

static inline bool sg__fused_has_param(const sg_optim *opt, const sg_tensor *p)
{
    return ((const sg__row_updater *)(const void *)opt)->has_param(opt, p);
}

/* ---- parameters held by an optimizer: the seam between this layer (and the ops) and the
 * optimizer (a layer above). A tensor's optim_state, when set, points to an object whose
 * first member is an sg__param_owner; sg_tensor_free calls its release before the tensor
 * goes, so no optimizer ever lists a freed tensor, and an op calls sg__param_sync before
 * it reads a parameter, so it never reads a row that exact lazy SGD has left behind. */
typedef struct sg__param_owner {
    /* Unregisters param from the optimizer holding it and frees its state there; clears
     * param->optim_state. Cannot fail. */
    void (*release)(sg_tensor *param);
    /* Brings the rows of param named by `rows` (an i32/i64 index tensor; entries outside
     * [0, rows) are skipped) or, rows NULL, every row, to the optimizer's step: what the
     * dense optimizer would hold there. Changes no value of the parameter's dense meaning;
     * O(1) when no row is behind. Cannot fail; not for concurrent use on one parameter. */
    void (*sync)(sg_tensor *param, const sg_tensor *rows);
} sg__param_owner;

/* Makes the rows an op is about to read of t current (every row: rows NULL); a no-op for
 * a tensor no optimizer holds. */
static inline void sg__param_sync(const sg_tensor *t, const sg_tensor *rows)
{
    if (t->optim_state) ((const sg__param_owner *)t->optim_state)->sync((sg_tensor *)(uintptr_t)t, rows);
}

/* The check every fused op makes before recording: the update writes W in place instead
 * of giving it a gradient, so W must be the tensor that owns the gradient (a leaf that
 * requires grad: an update of a computed W would not reach the tensors it came from) and
 * a parameter of opt. Records SG_ERR_ARG naming op and returns false otherwise. */
static inline bool sg__fused_check(const char *op, const sg_optim *opt, const sg_tensor *W)
{
    if (!W->node && W->requires_grad && sg__fused_has_param(opt, W)) return true;
    sg__fail(W->ctx, SG_ERR_ARG,
             "%s: a fused update needs the table to be a leaf that requires grad and is a "
             "parameter of the optimizer", op);
    return false;
}

#endif
