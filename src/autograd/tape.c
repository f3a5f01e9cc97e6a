/* The tape: nodes recorded by ops, reverse-mode traversal, the gradient store and the
 * accumulation rules of docs/design.md ("Gradient accumulation").
 * Invariants: nodes are created in a topological order (an op's inputs exist before its
 * output); a traversal touches only nodes reachable from the output it starts at; the
 * store lists each leaf at most once (in_store) and is emptied by sg_tape_reset, which also
 * releases what the caller freed while the tape held nodes (tensors) or a node still called
 * it (optimizers, sg__tape_uses). */
#include "autograd/tape.h"

#include <stdio.h>

bool sg__needs_grad(sg_ctx *ctx, int n, sg_tensor *const *in)
{
    if (!ctx->grad_enabled) return false;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->requires_grad) return true;
    return false;
}

sg_node *sg__node_new(sg_ctx *ctx, sg__backward_fn bw, const char *name, sg_tensor *out,
                      int n, sg_tensor *const *in)
{
    if (n < 0 || n > SG__MAX_NODE_INPUTS)
        return sg__fail(ctx, SG_ERR_STATE, "%s: %d inputs (at most %d)", name, n, SG__MAX_NODE_INPUTS);
    sg_node *node = sg__arena_alloc(ctx, sizeof *node);
    if (!node) return NULL;
    memset(node, 0, sizeof *node);
    node->backward = bw;
    node->name = name;
    node->out = out;
    node->n_in = n;
    for (int i = 0; i < n; i++) node->in[i] = in[i];
    node->seq = ctx->n_nodes++;
    node->prev = ctx->last_node;
    ctx->last_node = node;
    out->node = node;
    out->requires_grad = true;
    return node;
}

int64_t sg_tape_nodes(const sg_ctx *ctx) { return ctx ? ctx->n_nodes : -1; }

bool sg__tape_uses(const sg_ctx *ctx, const void *p)
{
    for (const sg_node *n = ctx->last_node; n; n = n->prev) {
        if (n->extra == p || n->saved[0] == p || n->saved[1] == p) return true;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] == p) return true;
    }
    return false;
}

struct sg__deferred {
    sg__deferred_fn fn;
    sg_node *node;
    sg_tensor *arg;
    struct sg__deferred *next;
};

int sg__defer(sg_node *n, sg__deferred_fn fn, sg_tensor *arg)
{
    sg_ctx *ctx = n->out->ctx;
    struct sg__deferred *d = sg__arena_alloc(ctx, sizeof *d);
    if (!d) return SG_ERR_NOMEM;
    *d = (struct sg__deferred){fn, n, arg, NULL};
    if (ctx->deferred_tail) ctx->deferred_tail->next = d;
    else ctx->deferred = d;
    ctx->deferred_tail = d;
    return SG_OK;
}

/* Runs (run == true) or drops the queued deferred work. Running is two passes: every
 * item in checking mode (fused updates validate, tape.h), then, if all passed, every item
 * for real; so an update refused anywhere in the queue leaves all of them undone. */
static int run_deferred(sg_ctx *ctx, bool run)
{
    int rc = SG_OK;
    if (run && ctx->deferred) {
        ctx->fused_checking = true;
        for (struct sg__deferred *d = ctx->deferred; d && !rc; d = d->next) rc = d->fn(d->node, d->arg);
        ctx->fused_checking = false;
    }
    for (struct sg__deferred *d = ctx->deferred; d && run && !rc; d = d->next) rc = d->fn(d->node, d->arg);
    ctx->deferred = ctx->deferred_tail = NULL;
    return rc;
}

int sg_set_grad_enabled(sg_ctx *ctx, int enabled)
{
    if (!ctx) return 0;
    int prev = ctx->grad_enabled;
    ctx->grad_enabled = enabled != 0;
    return prev;
}

/* ---- gradient store */

static int store_add(sg_ctx *ctx, sg_tensor *x)
{
    sg_tensor **s = sg__grow(ctx, ctx->store, &ctx->store_cap, ctx->store_len, sizeof *s, 64);
    if (!s) return SG_ERR_NOMEM;
    ctx->store = s;
    ctx->store[ctx->store_len++] = x;
    x->in_store = true;
    return SG_OK;
}

void sg__grads_clear(sg_ctx *ctx)
{
    for (int64_t i = 0; i < ctx->store_len; i++) {
        ctx->store[i]->grad = NULL;
        ctx->store[i]->in_store = false;
    }
    ctx->store_len = 0;
}

static void grads_forget(sg_tensor *t)
{
    sg_ctx *ctx = t->ctx;
    for (int64_t i = 0; i < ctx->store_len; i++) {
        if (ctx->store[i] != t) continue;
        memmove(ctx->store + i, ctx->store + i + 1, (size_t)(ctx->store_len - i - 1) * sizeof *ctx->store);
        ctx->store_len--;
        t->in_store = false;
        return;
    }
}

/* Freeing a persistent tensor unregisters it from the optimizer holding it (through the
 * seam of tape.h) and unlinks it from the gradient store (this layer's), then the core
 * releases it; or, while the tape holds nodes (one may read t or a view of its data),
 * at sg_tape_reset: until then it is a dead handle that gets no gradient and no fused
 * update, and whose memory the nodes still read. */
void sg_tensor_free(sg_tensor *t)
{
    if (!t || !t->persistent || t->released) return;
    if (t->owner_frees) {
        sg__failc(t->ctx, SG_ERR_STATE, "sg_tensor_free: the tensor belongs to an optimizer "
                  "(sg_optim_state) or a word-vector table (sg_wordvec_vectors) and is freed "
                  "with it; nothing was freed");
        return;
    }
    if (t->optim_state) ((const sg__param_owner *)t->optim_state)->release(t);
    if (t->in_store) grads_forget(t);
    sg_ctx *ctx = t->ctx;
    /* Any tape defers the free: a node may hold a view of t's data (a reshape or slice of
     * a tensor that needs no gradient records no node of its own), which no pointer
     * comparison would find. */
    if (ctx->last_node) {
        t->released = true;
        t->requires_grad = false;
        t->grad = NULL;
        t->next_released = ctx->released;
        ctx->released = t;
        return;
    }
    sg__tensor_destroy(t);
}

int64_t sg_grads_count(const sg_ctx *ctx) { return ctx ? ctx->store_len : -1; }

sg_tensor *sg_grads_param(const sg_ctx *ctx, int64_t i)
{
    if (!ctx || i < 0 || i >= ctx->store_len) return NULL;
    return ctx->store[i];
}

sg_tensor *sg_tensor_grad(const sg_tensor *t) { return t ? t->grad : NULL; }

int sg_tensor_set_grad(sg_tensor *t, sg_tensor *grad)
{
    if (!t) return SG_ERR_NULL;
    sg_ctx *ctx = t->ctx;
    if (!grad) return sg__failc(ctx, SG_ERR_NULL, "sg_tensor_set_grad: NULL gradient");
    if (grad->ctx != ctx)
        return sg__failc(ctx, SG_ERR_ARG, "sg_tensor_set_grad: gradient of another context");
    if (grad->dtype != t->dtype)
        return sg__failc(ctx, SG_ERR_DTYPE, "sg_tensor_set_grad: gradient is %s, tensor is %s",
                         sg__dtype_name(grad->dtype), sg__dtype_name(t->dtype));
    if (!sg__same_shape(t, grad)) {
        char a[64], b[64];
        return sg__failc(ctx, SG_ERR_SHAPE, "sg_tensor_set_grad: gradient %s does not match tensor %s",
                         sg__shape_str(grad, a, sizeof a), sg__shape_str(t, b, sizeof b));
    }
    if (t->node) return sg__failc(ctx, SG_ERR_ARG, "sg_tensor_set_grad: not a leaf tensor");
    if (!t->requires_grad)
        return sg__failc(ctx, SG_ERR_STATE, "sg_tensor_set_grad: tensor does not require grad");
    if (!t->in_store) {
        int rc = store_add(ctx, t);
        if (rc) return rc;
    }
    t->grad = grad;
    t->grad_owned = false;
    t->rows_unique_lb = grad->layout == SG_COO && grad->coalesced ? grad->nnz : 0;
    return SG_OK;
}

void sg_tape_reset(sg_ctx *ctx)
{
    if (!ctx) return;
    sg__grads_clear(ctx);
    run_deferred(ctx, false);
    ctx->last_node = NULL;
    ctx->n_nodes = 0;
    /* the tape no longer uses what the caller freed during the step */
    if (ctx->optims_released) ctx->release_optims(ctx);
    while (ctx->released) {
        sg_tensor *t = ctx->released;
        ctx->released = t->next_released;
        sg__tensor_destroy(t);
    }
    sg__arena_reset(ctx);
}

/* ---- accumulation */

/* Makes x's dense gradient safe to modify in place (copy on write). */
static int own_dense_grad(sg_tensor *x)
{
    if (x->grad_owned) return SG_OK;
    sg_tensor *c = sg__densify(x->grad);
    if (!c) return SG_ERR_NOMEM;
    x->grad = c;
    x->grad_owned = true;
    return SG_OK;
}

/* Rows of a COO tensor: the number of distinct sparse index tuples it can hold. */
static int64_t sparse_rows(const sg_tensor *coo) { return sg__prod(coo->shape, 0, coo->sparse_dim); }

/* cur + g for row-sparse (sparse_dim 1) gradients of x: appends g's entries into cur's
 * buffers when x owns them and they have room, else into new buffers of twice the needed
 * size, so k accumulations copy O(total entries) rather than O(k * total). Other sparse
 * dims concatenate into exact-size buffers. */
static sg_tensor *coo_append(sg_tensor *x, sg_tensor *cur, const sg_tensor *g)
{
    if (cur->sparse_dim != 1 || g->sparse_dim != 1) return sg__coo_concat(cur, g);
    sg_ctx *ctx = x->ctx;
    int64_t n = cur->nnz + g->nnz, row = sg__prod(cur->shape, 1, cur->ndim);
    size_t esz = sg_dtype_size(cur->dtype);
    bool coalesced = !g->nnz ? cur->coalesced : !cur->nnz ? g->coalesced : false;
    sg_tensor *out = cur;
    if (!x->grad_owned || cur->nnz_cap < n) {
        int64_t cap = 2 * n;
        int64_t vshape[SG_MAX_DIMS];
        vshape[0] = cap;
        for (int i = 1; i < cur->values->ndim; i++) vshape[i] = cur->values->shape[i];
        sg_tensor *ind = sg__tmp(ctx, SG_I64, 2, (int64_t[]){1, cap}, false);
        sg_tensor *val = ind ? sg__tmp(ctx, cur->dtype, cur->values->ndim, vshape, false) : NULL;
        if (!val) return NULL;
        memcpy(ind->data, cur->indices->data, (size_t)cur->nnz * sizeof(int64_t));
        memcpy(val->data, cur->values->data, (size_t)(cur->nnz * row) * esz);
        out = sg__coo_wrap(ctx, cur->ndim, cur->shape, 1, ind, val, false);
        if (!out) return NULL;
        out->nnz = cur->nnz;
        out->nnz_cap = cap;
    }
    memcpy((int64_t *)out->indices->data + out->nnz, g->indices->data, (size_t)g->nnz * sizeof(int64_t));
    memcpy((unsigned char *)out->values->data + (size_t)(out->nnz * row) * esz, g->values->data,
           (size_t)(g->nnz * row) * esz);
    out->nnz = n;
    out->indices->shape[1] = n;
    out->indices->numel = n;
    out->values->shape[0] = n;
    out->values->numel = n * row;
    out->coalesced = coalesced;
    return out;
}

int sg__accum_grad(sg_tensor *x, sg_tensor *g, bool owned)
{
    if (!x || !x->requires_grad) return SG_OK;
    sg_ctx *ctx = x->ctx;
    if (!g) return ctx->status ? ctx->status : sg__failc(ctx, SG_ERR_STATE, "NULL gradient");
    if (!sg__same_shape(x, g) || g->dtype != x->dtype) {
        char a[64], b[64];
        return sg__failc(ctx, SG_ERR_STATE, "internal: gradient %s does not match tensor %s",
                         sg__shape_str(g, a, sizeof a), sg__shape_str(x, b, sizeof b));
    }
    if (!x->node && !x->in_store) {
        int rc = store_add(ctx, x);
        if (rc) return rc;
    }
    sg_tensor *cur = x->grad;
    /* a uniform gradient is kept only where the backward loop will meet it (a non-leaf's
     * first), so users, optimizers and the rules below only ever see full tensors */
    if (g->uniform && (cur || !x->node)) {
        if (owned) { /* given to x alone */
            if (!(g = sg__expand_uniform(g))) return sg__status_or_nomem(ctx);
        } else { /* shared (an add's operands): one expansion for all of them, unowned */
            if (!g->expanded && !(g->expanded = sg__expand_uniform(g))) return sg__status_or_nomem(ctx);
            g = g->expanded;
        }
    }
    if (cur && cur->uniform) {
        if (!(cur = sg__expand_uniform(cur))) return sg__status_or_nomem(ctx);
        x->grad = cur;
        x->grad_owned = true;
    }
    if (!cur) { /* none + g = g, no copy */
        x->grad = g;
        x->grad_owned = owned;
        x->rows_unique_lb = g->layout == SG_COO && g->coalesced ? g->nnz : 0;
        return SG_OK;
    }
    if (cur->layout == SG_DENSE) {
        int rc = own_dense_grad(x);
        if (rc) return rc;
        cur = x->grad;
        if (g->layout == SG_COO) { /* dense += sparse: index-add, no sort */
            sg__index_add_unchecked(cur, g, 1.0);
            return SG_OK;
        }
        SG__DISPATCH_FLOAT(cur->dtype, T, {
            T *d = cur->data;
            const T *s = g->data;
            for (int64_t i = 0; i < cur->numel; i++) d[i] += s[i];
        });
        return SG_OK;
    }
    if (g->layout == SG_DENSE) { /* sparse + dense = dense */
        sg_tensor *d = owned ? g : sg__densify(g);
        if (!d) return SG_ERR_NOMEM;
        sg__index_add_unchecked(d, cur, 1.0);
        x->grad = d;
        x->grad_owned = true;
        return SG_OK;
    }
    /* sparse + sparse = concatenation */
    int64_t lb_g = g->coalesced ? g->nnz : 0;
    int64_t lb = x->rows_unique_lb > lb_g ? x->rows_unique_lb : lb_g;
    sg_tensor *cat = coo_append(x, cur, g);
    if (!cat) return SG_ERR_NOMEM;
    /* Compaction: more entries than the table has rows, or 8x more than the unique rows
     * known from the last coalesce, means many duplicates; merging them bounds memory and
     * costs O(nnz) amortised, since nnz must grow 8-fold before the next merge. */
    if (cat->nnz > sparse_rows(cat) || (lb > 0 && cat->nnz > 8 * lb)) {
        cat = sg_coalesce(cat);
        if (!cat) return ctx->status;
        lb = cat->nnz;
    }
    x->grad = cat;
    x->grad_owned = true;
    x->rows_unique_lb = lb;
    return SG_OK;
}

/* ---- backward */

/* The nodes reachable from `root` in reverse topological order (outputs before inputs),
 * by an iterative depth-first post-order: returns the first, each linked to the next by
 * bw_next. The stack and the order live in the nodes themselves (bw_stack, bw_in,
 * bw_next), so this allocates nothing and costs O(nodes reachable from root) in time,
 * whatever else the tape holds: K backwards on K micro-batch graphs of one tape cost K
 * times one (a scratch array sized by the whole tape made that quadratic in memory).
 * Clears the gradient of every node it lists (a non-leaf's gradient lives for one
 * traversal). The links are valid until the next traversal; no backward or deferred
 * function starts one while they are read. */
static sg_node *collect(sg_ctx *ctx, sg_node *root)
{
    uint32_t mark = ++ctx->visit_epoch;
    if (mark == 0) mark = ++ctx->visit_epoch; /* 0 is a new node's: never a traversal's mark */
    sg_node *top = root, *order = NULL;
    root->visit = mark;
    root->bw_in = 0;
    root->bw_stack = NULL;
    while (top) {
        sg_node *v = top;
        if (v->bw_in < v->n_in) {
            sg_tensor *in = v->in[v->bw_in++];
            sg_node *u = in ? in->node : NULL;
            if (u && u->visit != mark) {
                u->visit = mark;
                u->bw_in = 0;
                u->bw_stack = top;
                top = u;
            }
            continue;
        }
        /* post-order (inputs first), each prepended: the list runs outputs first */
        top = v->bw_stack;
        v->out->grad = NULL;
        v->bw_next = order;
        order = v;
    }
    return order;
}

int sg_backward_grad(sg_tensor *out, sg_tensor *grad_out)
{
    if (!out) return SG_ERR_NULL;
    sg_ctx *ctx = out->ctx;
    if (!grad_out) return sg__failc(ctx, SG_ERR_NULL, "sg_backward: NULL gradient");
    if (grad_out->dtype != out->dtype)
        return sg__failc(ctx, SG_ERR_DTYPE, "sg_backward: gradient is %s, output is %s",
                         sg__dtype_name(grad_out->dtype), sg__dtype_name(out->dtype));
    if (!sg__same_shape(out, grad_out)) {
        char a[64], b[64];
        return sg__failc(ctx, SG_ERR_SHAPE, "sg_backward: gradient %s does not match output %s",
                         sg__shape_str(grad_out, a, sizeof a), sg__shape_str(out, b, sizeof b));
    }
    if (!out->requires_grad)
        return sg__failc(ctx, SG_ERR_STATE, "sg_backward: output does not require grad");
    if (!out->node) return sg__accum_grad(out, grad_out, false);

    sg_node *order = collect(ctx, out->node);
    out->grad = grad_out;
    out->grad_owned = false;
    for (sg_node *v = order; v; v = v->bw_next) {
        sg_tensor *g = v->out->grad;
        if (!g) continue;
        int rc = SG_OK;
        if ((g->layout == SG_COO && !v->accepts_sparse_gout) || (g->uniform && !v->accepts_uniform_gout)) {
            g = g->uniform ? sg__expand_uniform(g) : sg__densify(g);
            if (!g) rc = sg__status_or_nomem(ctx);
        }
        if (rc == SG_OK) rc = v->backward(v, g);
        v->out->grad = NULL;
        if (rc) {
            if (!ctx->status) sg__failc(ctx, rc, "backward of %s failed", v->name);
            /* the nodes not reached keep no gradient: a partial one, or a uniform one (one
             * stored element) that sg_tensor_grad would hand out as a full tensor */
            for (sg_node *k = v->bw_next; k; k = k->bw_next) k->out->grad = NULL;
            run_deferred(ctx, false);
            return rc;
        }
    }
    return run_deferred(ctx, true);
}

int sg_backward(sg_tensor *loss)
{
    if (!loss) return SG_ERR_NULL;
    if (loss->numel != 1 || loss->layout != SG_DENSE)
        return sg__failc(loss->ctx, SG_ERR_SHAPE, "sg_backward: loss must be a dense scalar (numel %lld)",
                         (long long)loss->numel);
    sg_tensor *seed = sg__tmp_like(loss, false);
    if (!seed) return loss->ctx->status;
    SG__DISPATCH_FLOAT(loss->dtype, T, { ((T *)seed->data)[0] = 1; });
    return sg_backward_grad(loss, seed);
}
