/* The gradcheck of every differentiable op: src/ops/ops.def lists the ops, the table below
 * holds one case per op, and each case runs sg_gradcheck (the full Jacobian by backward
 * against central differences, in f64) on small random inputs, dense and, where the op
 * takes them, COO. The run fails when a listed op has no case, when a case records a tape
 * node whose name is not in the list, when a check does not record its own op's node, and
 * when some node name of an op (its COO path, say) is recorded by none of its checks; and
 * when include/sgrad.h declares a function returning a tensor that is neither listed nor
 * known to record no node. Forward values are tested in the op areas' own files. */
#include "autograd/tape.h" /* sg_node and tensor->node: the tape walk */
#define TU_SEED 0x94D049BB133111EBull
#include "testutil.h"

#define MAX_NAMES 4

/* ---------------------------------------------------------------- the list */

typedef struct {
    const char *fn;               /* the public function is sg_<fn> */
    void (*addr)(void);           /* its address: a line cannot name a missing function */
    const char *names[MAX_NAMES]; /* tape node names it records; unused slots NULL */
} op_entry;

static const op_entry op_list[] = {
#define SG_OP(fn, ...) {#fn, (void (*)(void))sg_##fn, {__VA_ARGS__}},
#include "ops/ops.def"
#undef SG_OP
};
#define N_OPS ((int)(sizeof op_list / sizeof op_list[0]))

/* Where node name `name` is in list[0..n): op index and name index; false if absent. */
static bool find_name(const op_entry *list, int n, const char *name, int *op, int *k)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < MAX_NAMES && list[i].names[j]; j++)
            if (strcmp(list[i].names[j], name) == 0) {
                *op = i, *k = j;
                return true;
            }
    return false;
}

/* ---------------------------------------------------------------- one check */

typedef struct {
    sg_ctx *ctx;
    int op;            /* index in op_list of the op the case is keyed to */
    unsigned recorded; /* bit k: op_list[op].names[k] was recorded by some check */
    int failures;
    bool quiet; /* self-tests of the checker expect failures */
} case_run;

#define FAIL(r, line, ...)                                                       \
    do {                                                                         \
        if (!(r)->quiet) {                                                       \
            fprintf(stderr, "  sg_%s, line %d: ", op_list[(r)->op].fn, line);    \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
        (r)->failures++;                                                         \
    } while (0)

/* A COO output is checked through its dense meaning. */
typedef struct {
    sg_gradcheck_fn f;
    void *ud;
} wrapped;
static sg_tensor *dense_output(sg_ctx *ctx, sg_tensor *const *in, void *ud)
{
    const wrapped *w = ud;
    return sg_to_dense(w->f(ctx, in, w->ud));
}

#define MAX_WALK 256
/* Every node reachable from y, once each, into seen[]; returns how many (-1 past cap). */
static int walk_tape(sg_tensor *y, sg_node **seen, int cap)
{
    int n = 0;
    if (y && y->node) seen[n++] = y->node;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < seen[i]->n_in; j++) {
            sg_node *p = seen[i]->in[j] ? seen[i]->in[j]->node : NULL;
            bool known = !p;
            for (int k = 0; k < n && !known; k++) known = seen[k] == p;
            if (known) continue;
            if (n == cap) return -1;
            seen[n++] = p;
        }
    return n;
}

/* Gradcheck of f over in[0..n) (masked as given), then one more evaluation whose tape is
 * walked: every node name must be in the list, and the case's op must be among them. */
static void check_at(case_run *r, int line, sg_gradcheck_fn f, void *ud, int masked, int n,
                     sg_tensor *const *in)
{
    for (int i = 0; i < n; i++)
        if (!in[i]) {
            FAIL(r, line, "input %d not built: %s", i, sg_ctx_message(r->ctx));
            sg_ctx_clear_error(r->ctx);
            return;
        }
    wrapped w = {f, ud};
    sg_gradcheck_opts o = {0, 1e-6, 1e-4, masked};
    sg_gradcheck_result res;
    int rc = sg_gradcheck(r->ctx, dense_output, &w, n, in, &o, &res);
    if (rc != SG_OK) FAIL(r, line, "gradcheck %s: %s", sg_status_string(rc), sg_ctx_message(r->ctx));
    sg_ctx_clear_error(r->ctx);

    sg_tape_reset(r->ctx);
    sg_tensor *y = dense_output(r->ctx, in, &w);
    if (!y) FAIL(r, line, "no output: %s", sg_ctx_message(r->ctx));
    sg_node *seen[MAX_WALK];
    int nodes = walk_tape(y, seen, MAX_WALK);
    if (nodes < 0) FAIL(r, line, "more than %d nodes on the tape", MAX_WALK);
    else if (nodes != sg_tape_nodes(r->ctx))
        FAIL(r, line, "%lld nodes on the tape, %d reachable from the output",
             (long long)sg_tape_nodes(r->ctx), nodes);
    bool own = false;
    for (int i = 0; i < nodes; i++) {
        int op, k;
        if (!find_name(op_list, N_OPS, seen[i]->name, &op, &k)) {
            FAIL(r, line, "records node \"%s\", which src/ops/ops.def does not list", seen[i]->name);
        } else if (op == r->op) {
            own = true;
            r->recorded |= 1u << k;
        }
    }
    if (nodes >= 0 && !own) FAIL(r, line, "records none of its op's nodes");
    sg_tape_reset(r->ctx);
    sg_ctx_clear_error(r->ctx);
}
#define N_INPUTS(...) (int)(sizeof((sg_tensor *[]){__VA_ARGS__}) / sizeof(sg_tensor *))
#define CHECK_GRAD(r, f, ud, masked, ...)                                        \
    check_at(r, __LINE__, f, ud, masked, N_INPUTS(__VA_ARGS__), (sg_tensor *[]){__VA_ARGS__})

/* Names of r's op that none of its checks recorded. */
static int unrecorded_names(const case_run *r)
{
    int missing = 0;
    for (int k = 0; k < MAX_NAMES && op_list[r->op].names[k]; k++)
        if (!(r->recorded & (1u << k))) {
            if (!r->quiet)
                fprintf(stderr, "  sg_%s: no check records its node \"%s\"\n", op_list[r->op].fn,
                        op_list[r->op].names[k]);
            missing++;
        }
    return missing;
}

/* ---------------------------------------------------------------- inputs */

/* Persistent f64 tensor with values from [lo, hi), requiring grad. */
static sg_tensor *dense_in(sg_ctx *ctx, double lo, double hi, int ndim, const int64_t *shape)
{
    sg_tensor *t = sg_tensor_new(ctx, SG_F64, ndim, shape);
    if (!t) return NULL;
    double *d = sg_tensor_f64(t);
    for (int64_t i = 0; i < sg_tensor_numel(t); i++) d[i] = lo + (hi - lo) * (tu_rand_unit() + 1) / 2;
    return sg_tensor_requires_grad(t, 1);
}
#define D64(r, lo, hi, ...) dense_in((r)->ctx, lo, hi, SHAPE(__VA_ARGS__))
#define D64_0(r, lo, hi) dense_in((r)->ctx, lo, hi, 0, NULL)

static sg_tensor *constant(sg_tensor *t) { return t ? sg_tensor_requires_grad(t, 0) : NULL; }

/* A random f64 COO input (tu_rand_coo) that requires grad. */
static sg_tensor *coo_in(sg_ctx *ctx, int ndim, const int64_t *shape, int sd, int64_t nnz, int64_t range)
{
    sg_tensor *t = tu_rand_coo(ctx, ndim, shape, sd, nnz, range);
    return t ? sg_tensor_requires_grad(t, 1) : NULL;
}

/* Persistent index tensor (int32 or int64) from int64 values. */
static sg_tensor *index_in(sg_ctx *ctx, sg_dtype dt, int ndim, const int64_t *shape, const int64_t *v)
{
    sg_tensor *t = sg_tensor_new(ctx, dt, ndim, shape);
    for (int64_t i = 0; t && i < sg_tensor_numel(t); i++) {
        if (dt == SG_I64) ((int64_t *)sg_tensor_data(t))[i] = v[i];
        else ((int32_t *)sg_tensor_data(t))[i] = (int32_t)v[i];
    }
    return t;
}

/* Values moved to [0.2, 1.2) in magnitude, keeping the sign: away from relu's kink. */
static sg_tensor *away_from_zero(sg_tensor *t)
{
    double *d = t ? sg_tensor_f64(t) : NULL;
    for (int64_t i = 0; d && i < sg_tensor_numel(t); i++) d[i] = d[i] < 0 ? d[i] - 0.2 : d[i] + 0.2;
    return t;
}

/* ---------------------------------------------------------------- functions under test */

typedef sg_tensor *(*unary_fn)(sg_tensor *);
typedef sg_tensor *(*binary_fn)(sg_tensor *, sg_tensor *);

/* What a check's function needs besides its differentiable inputs. */
typedef struct {
    unary_fn un;
    binary_fn bin;
    int dim, dim1, keepdim, n, sparse_dim;
    double s;
    int64_t start, end;
    sg_tensor *idx, *idx2, *offsets; /* idx2: a second index tensor */
    sg_tensor *mask, *mask2;
    sg_embedding_opts emb;
    sg_bag_mode mode;
    bool weighted;
    int64_t padding_idx; /* embedding_bag; 0 means none here (cases use row 2) */
    bool include_last_offset;
    const double *lo, *hi; /* clamp's bounds (NULL: none) */
    sg_rank_loss_opts rank;
} args;

/* The two ops whose signatures are changing elsewhere: each is called here only. */
static sg_tensor *call_embedding_bag(sg_tensor *W, const args *a, sg_tensor *per_sample_weights)
{
    sg_embedding_bag_opts o = SG_EMBEDDING_BAG_OPTS_DEFAULT; /* unfused, the true gradient */
    o.mode = a->mode;
    o.per_sample_weights = per_sample_weights;
    o.padding_idx = a->padding_idx ? a->padding_idx : -1;
    o.include_last_offset = a->include_last_offset;
    return sg_embedding_bag(W, a->idx, a->offsets, &o);
}
static sg_tensor *call_sgns_loss(sg_tensor *h, sg_tensor *W, sg_tensor *targets)
{
    return sg_sgns_loss(h, W, targets, NULL); /* unfused */
}

#define ARGS ((const args *)ud)
/* A check's args inline (the parentheses keep their commas inside one macro argument). */
#define ARG(...) (&(args){__VA_ARGS__})
/* A function under test (sg_gradcheck_fn) whose result is the expression given. */
#define CHECKED_FN(name, ...)                                                    \
    static sg_tensor *name(sg_ctx *ctx, sg_tensor *const *in, void *ud)          \
    {                                                                            \
        (void)ctx, (void)ud;                                                     \
        return __VA_ARGS__;                                                      \
    }

CHECKED_FN(f_unary, ARGS->un(in[0]))
CHECKED_FN(f_binary, ARGS->bin(in[0], in[1]))
CHECKED_FN(f_scale, sg_scale(in[0], ARGS->s))
CHECKED_FN(f_sum_dim, sg_sum_dim(in[0], ARGS->dim, ARGS->keepdim))
CHECKED_FN(f_mean_dim, sg_mean_dim(in[0], ARGS->dim, ARGS->keepdim))
CHECKED_FN(f_softmax, sg_softmax(in[0], ARGS->dim))
CHECKED_FN(f_log_softmax, sg_log_softmax(in[0], ARGS->dim))
CHECKED_FN(f_cross_entropy, sg_cross_entropy(in[0], ARGS->idx))
CHECKED_FN(f_reshape, sg_reshape(in[0], 2, (int64_t[]){3, -1}))
CHECKED_FN(f_transpose, sg_transpose(in[0], ARGS->dim, ARGS->dim1))
CHECKED_FN(f_concat, sg_concat(ARGS->n, in))
CHECKED_FN(f_embedding, sg_embedding(in[0], ARGS->idx, &ARGS->emb))
CHECKED_FN(f_embedding_bag, call_embedding_bag(in[0], ARGS, ARGS->weighted ? in[1] : NULL))
CHECKED_FN(f_index_select, sg_index_select(in[0], ARGS->dim, ARGS->idx))
CHECKED_FN(f_slice, sg_slice(in[0], ARGS->start, ARGS->end))
CHECKED_FN(f_to_sparse, sg_to_sparse(in[0], ARGS->sparse_dim))
CHECKED_FN(f_sparse_mask, sg_sparse_mask(in[0], ARGS->mask))
CHECKED_FN(f_sgns_loss, call_sgns_loss(in[0], in[1], ARGS->idx))
CHECKED_FN(f_hs_loss, sg_hs_loss(in[0], in[1], ARGS->idx, ARGS->idx2, ARGS->offsets))
CHECKED_FN(f_norm_dim, sg_norm_dim(in[0], ARGS->s, ARGS->dim, ARGS->keepdim))
CHECKED_FN(f_logsumexp_dim, sg_logsumexp_dim(in[0], ARGS->dim, ARGS->keepdim))
/* .n = 1: the indices are asked for too */
CHECKED_FN(f_max_dim, sg_max_dim(in[0], ARGS->dim, ARGS->keepdim, ARGS->n ? &(sg_tensor *){NULL} : NULL))
CHECKED_FN(f_narrow, sg_narrow(in[0], ARGS->dim, ARGS->start, ARGS->end)) /* end: the length */
CHECKED_FN(f_gather, sg_gather(in[0], ARGS->dim, ARGS->idx))
/* .n: bit 0 weight (in[1]), bit 1 bias (the next input); .s: eps */
CHECKED_FN(f_layer_norm, sg_layer_norm(in[0], sg_tensor_dim(in[0], -1), ARGS->n & 1 ? in[1] : NULL,
                                       ARGS->n & 2 ? in[ARGS->n & 1 ? 2 : 1] : NULL, ARGS->s))
/* sg_gradcheck evaluates f many times and each training-mode call with 0 < p < 1 draws a
 * key from the context's generator, so each evaluation first puts the generator back to
 * the state saved when the check was set up: every evaluation draws the same mask. */
typedef struct {
    double p;
    uint64_t rng[4];
} dropout_args;
static sg_tensor *f_dropout(sg_ctx *ctx, sg_tensor *const *in, void *ud)
{
    const dropout_args *a = ud;
    memcpy(ctx->rng, a->rng, sizeof ctx->rng);
    return sg_dropout(in[0], a->p, 1);
}
CHECKED_FN(f_pow, sg_pow(in[0], ARGS->s))
CHECKED_FN(f_clamp, sg_clamp(in[0], ARGS->lo, ARGS->hi))
CHECKED_FN(f_where, sg_where(ARGS->mask, in[0], in[1])) /* mask: the 0/1 cond */
CHECKED_FN(f_sum_of_where, sg_sum(sg_where(ARGS->mask, in[0], in[1])))
/* op(x, x) backwards put both operands' terms in one buffer; op(x, y) + op(x, x) adds to a
 * gradient x already holds. */
CHECKED_FN(f_matmul_plus_x, sg_add(sg_matmul(in[0], in[1]), in[0]))
CHECKED_FN(f_rowdot_self_plus, sg_add(sg_rowdot(in[0], in[1]), sg_rowdot(in[0], in[0])))
/* .n: the distance kind; .keepdim: conj_b */
CHECKED_FN(f_cdist, sg_cdist(in[0], in[1], (sg_dist_kind)ARGS->n))
CHECKED_FN(f_rowdist, sg_rowdist(in[0], in[1], (sg_dist_kind)ARGS->n))
CHECKED_FN(f_complex_mul, sg_complex_mul(in[0], in[1], ARGS->keepdim != 0))
CHECKED_FN(f_ranking_loss, sg_ranking_loss(in[0], in[1], &ARGS->rank))
/* Restriction: a's gradient is needed only at the mask's pattern (the O(nnz) backwards),
 * also through scale, transpose and an add of two overlapping masks. */
CHECKED_FN(f_matmul_masked, sg_matmul(sg_sparse_mask(in[0], ARGS->mask), in[1]))
CHECKED_FN(f_sum_masked, sg_sum(sg_sparse_mask(in[0], ARGS->mask)))
CHECKED_FN(f_sum_masked_chain, sg_sum(sg_add(sg_transpose(sg_scale(sg_sparse_mask(in[0], ARGS->mask), 2.5), 0, 1),
                                             sg_transpose(sg_sparse_mask(in[0], ARGS->mask2), 0, 1))))
/* A sum's or mean's gradient is uniform (one stored value) through the ops that take it
 * (binary ops, broadcasting or not, and scale), expanded where an op does not (exp), where
 * it reaches a leaf, and where a tensor gets a second gradient. */
CHECKED_FN(f_sum_of_binary, sg_sum(ARGS->bin(in[0], in[1])))
CHECKED_FN(f_mean_scaled_square, sg_mean(sg_scale(sg_mul(in[0], in[0]), 2.5)))
CHECKED_FN(f_sum_exp, sg_sum(sg_exp(sg_scale(in[0], 0.5))))
CHECKED_FN(f_leaf_in_two_sums, sg_add(sg_sum(sg_scale(in[0], 1.5)), sg_sum(sg_mul(sg_scale(in[0], 1.5), in[1]))))
static sg_tensor *f_two_uses(sg_ctx *ctx, sg_tensor *const *in, void *ud)
{
    (void)ctx;
    sg_tensor *y = sg_scale(in[0], 1.5); /* a non-leaf given two gradients */
    switch (ARGS->n) {
    case 0: return sg_add(sg_sum(y), sg_sum(sg_mul(y, y)));
    case 1: return sg_add(sg_sum(sg_mul(y, y)), sg_sum(y));
    default: return sg_add(sg_sum(y), sg_mean(y)); /* two uniform ones */
    }
}
/* index_select of a slice of an index_select: the inner backwards get COO gradients. */
CHECKED_FN(f_select_slice_select,
           sg_index_select(sg_slice(sg_index_select(in[0], 0, ARGS->idx2), ARGS->start, ARGS->end), 0, ARGS->idx))

/* ---------------------------------------------------------------- the cases */

/* Broadcasting pairs, the same tensor as both operands, one operand constant. lo: the
 * right operand's lower bound (divisors stay away from 0). */
static void binary_checks(case_run *r, binary_fn op, double lo)
{
    args a = {.bin = op};
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 3, 1), D64(r, lo, 2, 1, 4));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 2, 3), D64(r, lo, 2, 3));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 3), D64(r, lo, 2, 2, 3));
    CHECK_GRAD(r, f_binary, &a, 0, D64_0(r, -1, 1), D64(r, lo, 2, 2, 3)); /* 0-d */
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 2, 3), D64_0(r, lo, 2));
    CHECK_GRAD(r, f_binary, &a, 0, D64_0(r, -1, 1), D64_0(r, lo, 2));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 2, 1, 3), D64(r, lo, 2, 4, 1));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 2, 3), D64(r, lo, 2, 2, 3));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 1, 2, 1, 2), D64(r, lo, 2, 2, 1, 2, 1));
    sg_tensor *z = D64(r, 0.5, 2, 2, 3);
    CHECK_GRAD(r, f_binary, &a, 0, z, z);
    sg_tensor *c = constant(D64(r, 0.5, 2, 2, 3));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, 0.5, 2, 3), c);
    CHECK_GRAD(r, f_binary, &a, 0, c, D64(r, 0.5, 2, 3));
}

static void case_add(case_run *r)
{
    binary_checks(r, sg_add, -1);
    args a = {.bin = sg_add};
    int64_t sh[2] = {3, 4};
    sg_tensor *rows = coo_in(r->ctx, 2, sh, 1, 4, 2);   /* row-sparse, duplicate rows */
    sg_tensor *cells = coo_in(r->ctx, 2, sh, 2, 7, 6); /* element-sparse, duplicates */
    CHECK_GRAD(r, f_binary, &a, 0, rows, cells);       /* COO + COO: a concatenation */
    CHECK_GRAD(r, f_binary, &a, 0, cells, cells);
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 3, 4), rows); /* dense + COO: dense */
    CHECK_GRAD(r, f_binary, &a, 0, cells, D64(r, -1, 1, 3, 4));
}
static void case_sub(case_run *r) { binary_checks(r, sg_sub, -1); }
static void case_mul(case_run *r) { binary_checks(r, sg_mul, -1); }
static void case_div(case_run *r) { binary_checks(r, sg_div, 0.5); }
/* Random operands never tie (a tie's half/half split: test_ops_dense.c), except op(z, z),
 * where the halves add up to the whole gradient. */
static void max_min_checks(case_run *r, binary_fn op)
{
    binary_checks(r, op, -1);
    args a = {.bin = op}; /* a uniform gradient (of a sum), broadcasting or not */
    CHECK_GRAD(r, f_sum_of_binary, &a, 0, D64(r, -1, 1, 3, 1), D64(r, -1, 1, 1, 4));
    CHECK_GRAD(r, f_sum_of_binary, &a, 0, D64(r, -1, 1, 2, 3), D64(r, -1, 1, 2, 3));
}
static void case_maximum(case_run *r) { max_min_checks(r, sg_maximum); }
static void case_minimum(case_run *r) { max_min_checks(r, sg_minimum); }

/* A persistent 0/1 mask of dtype dt (float or integer) from 0/1 values. */
static sg_tensor *mask_in(sg_ctx *ctx, sg_dtype dt, int ndim, const int64_t *shape, const int64_t *v)
{
    if (dt == SG_I32 || dt == SG_I64) return index_in(ctx, dt, ndim, shape, v);
    sg_tensor *t = sg_tensor_new(ctx, dt, ndim, shape);
    for (int64_t i = 0; t && i < sg_tensor_numel(t); i++) {
        if (dt == SG_F64) sg_tensor_f64(t)[i] = (double)v[i];
        else sg_tensor_f32(t)[i] = (float)v[i];
    }
    return t;
}

static void case_where(case_run *r)
{
    static const int64_t m6[6] = {1, 0, 0, 1, 1, 0}, m3[3] = {0, 1, 1};
    const sg_dtype dts[4] = {SG_F64, SG_F32, SG_I32, SG_I64};
    for (int k = 0; k < 4; k++) { /* every cond dtype, each operand stretched somewhere */
        args a = {.mask = mask_in(r->ctx, dts[k], SHAPE(2, 3), m6)};
        CHECK_GRAD(r, f_where, &a, 0, D64(r, -1, 1, 2, 3), D64(r, -1, 1, 2, 3));
        CHECK_GRAD(r, f_where, &a, 0, D64(r, -1, 1, 3), D64(r, -1, 1, 2, 1));
        CHECK_GRAD(r, f_where, &a, 0, D64_0(r, -1, 1), D64(r, -1, 1, 2, 3));
    }
    args c3 = {.mask = mask_in(r->ctx, SG_I64, SHAPE(3, 1), m3)}; /* (3,1) x (1,4) y (2,1,1) */
    CHECK_GRAD(r, f_where, &c3, 0, D64(r, -1, 1, 1, 4), D64(r, -1, 1, 2, 1, 1));
    CHECK_GRAD(r, f_sum_of_where, &c3, 0, D64(r, -1, 1, 1, 4), D64(r, -1, 1, 3, 4));
    args c0 = {.mask = mask_in(r->ctx, SG_I32, 0, NULL, (int64_t[]){1})}; /* 0-d cond */
    CHECK_GRAD(r, f_where, &c0, 0, D64(r, -1, 1, 2, 2), D64(r, -1, 1, 2));
    args c6 = {.mask = mask_in(r->ctx, SG_F32, SHAPE(2, 3), m6)};
    sg_tensor *z = D64(r, -1, 1, 2, 3), *v = D64(r, -1, 1, 3);
    CHECK_GRAD(r, f_where, &c6, 0, z, z); /* where(c, z, z) = z */
    CHECK_GRAD(r, f_where, &c6, 0, v, v);
    CHECK_GRAD(r, f_sum_of_where, &c6, 0, z, z);
    CHECK_GRAD(r, f_where, &c6, 0, constant(D64(r, -1, 1, 2, 3)), D64(r, -1, 1, 3));
    CHECK_GRAD(r, f_where, &c6, 0, D64(r, -1, 1, 2, 3), constant(D64(r, -1, 1, 1)));
}

static void case_scale(case_run *r)
{
    CHECK_GRAD(r, f_scale, ARG(.s = -2.5), 0, D64(r, -1, 1, 2, 3));
    CHECK_GRAD(r, f_scale, ARG(.s = 0.5), 0, D64_0(r, -1, 1));
    CHECK_GRAD(r, f_scale, ARG(.s = -1.5), 0, coo_in(r->ctx, 2, (int64_t[]){3, 4}, 1, 4, 2));
    CHECK_GRAD(r, f_scale, ARG(.s = 3), 0, coo_in(r->ctx, 3, (int64_t[]){3, 2, 2}, 2, 5, 0));
}

static void case_matmul(case_run *r)
{
    args a = {.bin = sg_matmul};
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 3, 4), D64(r, -1, 1, 4, 5));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 1, 6), D64(r, -1, 1, 6, 1));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 2, 3, 4), D64(r, -1, 1, 2, 4, 2));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 3, 5), constant(D64(r, -1, 1, 5, 2)));
    /* (B,M,K)@(K,N): b shared by the batch, its gradient summed over it */
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 3, 2, 4), D64(r, -1, 1, 4, 5));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 1, 1, 3), D64(r, -1, 1, 3, 1));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 2, 3, 5), constant(D64(r, -1, 1, 5, 2)));
    CHECK_GRAD(r, f_binary, &a, 0, constant(D64(r, -1, 1, 2, 3, 5)), D64(r, -1, 1, 5, 2));
    sg_tensor *x = D64(r, -1, 1, 3, 3), *m = D64(r, -1, 1, 2, 3, 3);
    CHECK_GRAD(r, f_binary, &a, 0, x, x);
    CHECK_GRAD(r, f_binary, &a, 0, m, m);
    CHECK_GRAD(r, f_matmul_plus_x, NULL, 0, x, D64(r, -1, 1, 3, 3));
    CHECK_GRAD(r, f_matmul_plus_x, NULL, 0, m, m);
    /* COO (M,K) @ dense (K,N) */
    int64_t sh[2] = {5, 4};
    sg_tensor *B = D64(r, -1, 1, 4, 3);
    CHECK_GRAD(r, f_binary, &a, 0, coo_in(r->ctx, 2, sh, 2, 9, 12), B);
    CHECK_GRAD(r, f_binary, &a, 0, coo_in(r->ctx, 2, sh, 1, 4, 3), B);
    args ma = {.mask = coo_in(r->ctx, 2, sh, 2, 8, 0)};
    CHECK_GRAD(r, f_matmul_masked, &ma, 0, D64(r, -1, 1, 5, 4), B);
    sg_tensor *s = coo_in(r->ctx, 2, sh, 2, 10, 0);
    CHECK_GRAD(r, f_matmul_masked, &ma, 0, s, B);
    ma.mask = s; /* masked semantics: s restricted to its own pattern */
    CHECK_GRAD(r, f_matmul_masked, &ma, 1, s, B);
    ma.mask = coo_in(r->ctx, 2, sh, 1, 3, 0);
    CHECK_GRAD(r, f_matmul_masked, &ma, 0, D64(r, -1, 1, 5, 4), B);
}

static void case_rowdot(case_run *r)
{
    args a = {.bin = sg_rowdot};
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -1, 1, 4, 3), D64(r, -1, 1, 4, 3));
    sg_tensor *x = D64(r, -1, 1, 3, 3);
    CHECK_GRAD(r, f_binary, &a, 0, x, x);
    /* rows wider than the kernel's lanes (37 = 2 * 16 + 5) */
    sg_tensor *w = D64(r, -1, 1, 3, 37);
    CHECK_GRAD(r, f_binary, &a, 0, w, w);
    CHECK_GRAD(r, f_rowdot_self_plus, NULL, 0, w, D64(r, -1, 1, 3, 37));
}

/* Every kind; rows wider than the kernel's lanes (37, 38) and partner counts that leave a
 * remainder after its pairs; op(x, x), where cdist's diagonal distances are 0 (no
 * gradient, and none under finite differences either: both operands move together). */
static void case_cdist(case_run *r)
{
    for (int kind = SG_DIST_L1; kind <= SG_DIST_COMPLEX; kind++) {
        const int64_t wide = kind == SG_DIST_COMPLEX ? 38 : 37;
        CHECK_GRAD(r, f_cdist, ARG(.n = kind), 0, D64(r, -1, 1, 4, 6), D64(r, -1, 1, 5, 6));
        CHECK_GRAD(r, f_cdist, ARG(.n = kind), 0, D64(r, -1, 1, 3, wide), D64(r, -1, 1, 6, wide));
        sg_tensor *x = D64(r, -1, 1, 5, 4);
        CHECK_GRAD(r, f_cdist, ARG(.n = kind), 0, x, x);
        CHECK_GRAD(r, f_cdist, ARG(.n = kind), 0, D64(r, -1, 1, 2, 4), constant(D64(r, -1, 1, 3, 4)));
        CHECK_GRAD(r, f_cdist, ARG(.n = kind), 0, constant(D64(r, -1, 1, 2, 4)), D64(r, -1, 1, 3, 4));
    }
}

static void case_rowdist(case_run *r)
{
    for (int kind = SG_DIST_L1; kind <= SG_DIST_COMPLEX; kind++) {
        const int64_t wide = kind == SG_DIST_COMPLEX ? 38 : 37;
        CHECK_GRAD(r, f_rowdist, ARG(.n = kind), 0, D64(r, -1, 1, 4, 6), D64(r, -1, 1, 4, 6));
        CHECK_GRAD(r, f_rowdist, ARG(.n = kind), 0, D64(r, -1, 1, 3, wide), D64(r, -1, 1, 3, wide));
        CHECK_GRAD(r, f_rowdist, ARG(.n = kind), 0, D64(r, -1, 1, 3, 4), constant(D64(r, -1, 1, 3, 4)));
    }
}

static void case_complex_mul(case_run *r)
{
    for (int conj = 0; conj < 2; conj++) {
        CHECK_GRAD(r, f_complex_mul, ARG(.keepdim = conj), 0, D64(r, -1, 1, 3, 8), D64(r, -1, 1, 3, 8));
        sg_tensor *x = D64(r, -1, 1, 2, 6);
        CHECK_GRAD(r, f_complex_mul, ARG(.keepdim = conj), 0, x, x);
        CHECK_GRAD(r, f_complex_mul, ARG(.keepdim = conj), 0, D64(r, -1, 1, 2, 4), constant(D64(r, -1, 1, 2, 4)));
        CHECK_GRAD(r, f_complex_mul, ARG(.keepdim = conj), 0, constant(D64(r, -1, 1, 2, 4)), D64(r, -1, 1, 2, 4));
    }
}

/* Every kind with and without the masked entry. SELFADV's weights are constants of the
 * gradient but not of finite differences, so its neg gradient is checked at adv_temp 0
 * (uniform weights) and, at adv_temp 0.7, only pos's (neg constant); test_ops_kge.c checks
 * the neg gradient at other temperatures against the formula. */
static void case_ranking_loss(case_run *r)
{
    for (int kind = SG_RANK_SOFTMAX; kind <= SG_RANK_SELFADV; kind++)
        for (int64_t skip = -1; skip <= 2; skip += 3) {
            args a = {.rank = {(sg_rank_loss_kind)kind, kind == SG_RANK_MARGIN ? 0.5 : 1.0,
                               kind == SG_RANK_SELFADV ? 0.0 : 0.7, skip}};
            CHECK_GRAD(r, f_ranking_loss, &a, 0, D64(r, -2, 2, 3), D64(r, -2, 2, 3, 5));
            a.rank.adv_temp = 0.7;
            CHECK_GRAD(r, f_ranking_loss, &a, 0, D64(r, -2, 2, 3), constant(D64(r, -2, 2, 3, 5)));
        }
    args big = {.rank = {SG_RANK_SOFTMAX, 0, 1, -1}}; /* large scores: the stable forms */
    CHECK_GRAD(r, f_ranking_loss, &big, 0, D64(r, 40, 60, 3), D64(r, 40, 60, 3, 4));
}

static void case_sum(case_run *r)
{
    args a = {.un = sg_sum};
    CHECK_GRAD(r, f_unary, &a, 0, D64(r, -1, 1, 2, 3, 4));
    CHECK_GRAD(r, f_unary, &a, 0, D64_0(r, -1, 1));
    int64_t sh[2] = {4, 3};
    CHECK_GRAD(r, f_unary, &a, 0, coo_in(r->ctx, 2, sh, 2, 6, 5));
    CHECK_GRAD(r, f_unary, &a, 0, coo_in(r->ctx, 2, sh, 1, 3, 2));
    args ma = {.mask = coo_in(r->ctx, 2, sh, 2, 5, 0), .mask2 = coo_in(r->ctx, 2, sh, 1, 2, 0)};
    sg_tensor *x = D64(r, -1, 1, 4, 3), *s = coo_in(r->ctx, 2, sh, 2, 7, 0);
    CHECK_GRAD(r, f_sum_masked, &ma, 0, x);
    CHECK_GRAD(r, f_sum_masked, &ma, 0, s);
    ma.mask2 = coo_in(r->ctx, 2, sh, 2, 6, 0); /* overlaps mask */
    CHECK_GRAD(r, f_sum_masked_chain, &ma, 0, x);
    ma.mask = s;
    CHECK_GRAD(r, f_sum_masked, &ma, 1, s);
    const binary_fn bins[4] = {sg_add, sg_sub, sg_mul, sg_div};
    for (int k = 0; k < 4; k++) {
        args b = {.bin = bins[k]};
        CHECK_GRAD(r, f_sum_of_binary, &b, 0, D64(r, -1, 1, 2, 3), D64(r, 0.5, 2, 2, 3));
        CHECK_GRAD(r, f_sum_of_binary, &b, 0, D64(r, -1, 1, 3, 1), D64(r, 0.5, 2, 1, 4));
        CHECK_GRAD(r, f_sum_of_binary, &b, 0, D64(r, -1, 1, 2, 3), D64_0(r, 0.5, 2));
        sg_tensor *z = D64(r, 0.5, 2, 2, 3);
        CHECK_GRAD(r, f_sum_of_binary, &b, 0, z, z);
    }
    CHECK_GRAD(r, f_sum_exp, NULL, 0, D64(r, -1, 1, 3, 4));
    CHECK_GRAD(r, f_leaf_in_two_sums, NULL, 0, D64(r, -1, 1, 3, 4), D64(r, -1, 1, 3, 4));
    for (int n = 0; n < 3; n++) CHECK_GRAD(r, f_two_uses, ARG(.n = n), 0, D64(r, -1, 1, 3, 4));
}

static void case_mean(case_run *r)
{
    CHECK_GRAD(r, f_unary, ARG(.un = sg_mean), 0, D64(r, -1, 1, 2, 3, 4));
    CHECK_GRAD(r, f_unary, ARG(.un = sg_mean), 0, D64(r, -1, 1, 5));
    CHECK_GRAD(r, f_mean_scaled_square, NULL, 0, D64(r, -1, 1, 4, 5));
}

static void reduce_dim_checks(case_run *r, sg_gradcheck_fn f)
{
    sg_tensor *x = D64(r, -1, 1, 2, 3, 4);
    for (int dim = -1; dim < 3; dim++)
        for (int keep = 0; keep < 2; keep++) CHECK_GRAD(r, f, ARG(.dim = dim, .keepdim = keep), 0, x);
    CHECK_GRAD(r, f, ARG(.dim = 0), 0, D64(r, -1, 1, 5));
}
static void case_sum_dim(case_run *r) { reduce_dim_checks(r, f_sum_dim); }
static void case_mean_dim(case_run *r) { reduce_dim_checks(r, f_mean_dim); }

static void case_relu(case_run *r)
{
    CHECK_GRAD(r, f_unary, ARG(.un = sg_relu), 0, away_from_zero(D64(r, -1, 1, 2, 3)));
}
static void case_sigmoid(case_run *r)
{
    CHECK_GRAD(r, f_unary, ARG(.un = sg_sigmoid), 0, D64(r, -4, 4, 2, 3));
    CHECK_GRAD(r, f_unary, ARG(.un = sg_sigmoid), 0, D64(r, -40, 40, 4)); /* saturated */
}
static void case_tanh(case_run *r) { CHECK_GRAD(r, f_unary, ARG(.un = sg_tanh), 0, D64(r, -2, 2, 2, 3)); }
static void case_exp(case_run *r) { CHECK_GRAD(r, f_unary, ARG(.un = sg_exp), 0, D64(r, -2, 2, 2, 3)); }
static void case_log(case_run *r) { CHECK_GRAD(r, f_unary, ARG(.un = sg_log), 0, D64(r, 0.3, 3, 2, 3)); }
static void case_abs(case_run *r)
{
    CHECK_GRAD(r, f_unary, ARG(.un = sg_abs), 0, away_from_zero(D64(r, -1, 1, 2, 3)));
}
static void case_sqrt(case_run *r) { CHECK_GRAD(r, f_unary, ARG(.un = sg_sqrt), 0, D64(r, 0.2, 3, 2, 3)); }
static void case_sin(case_run *r) { CHECK_GRAD(r, f_unary, ARG(.un = sg_sin), 0, D64(r, -4, 4, 2, 3)); }
static void case_cos(case_run *r) { CHECK_GRAD(r, f_unary, ARG(.un = sg_cos), 0, D64(r, -4, 4, 2, 3)); }
static void case_pow(case_run *r)
{
    /* any exponent on x > 0; integer exponents also on negative x */
    const double any[7] = {2, 0.5, -1.5, 1, 0, 3.7, -2};
    for (int k = 0; k < 7; k++) CHECK_GRAD(r, f_pow, ARG(.s = any[k]), 0, D64(r, 0.3, 2, 2, 3));
    const double whole[4] = {2, 3, -1, -2};
    for (int k = 0; k < 4; k++) CHECK_GRAD(r, f_pow, ARG(.s = whole[k]), 0, away_from_zero(D64(r, -1, 1, 5)));
}
static void case_clamp(case_run *r)
{
    /* |x| in [0.2, 1.2): no element within 0.1 of a bound */
    static const double zero = 0, m15 = -1.5, p15 = 1.5, p01 = 0.1, m01 = -0.1;
    args bounds[6] = {{.lo = &zero}, {.hi = &zero}, {.lo = &m15, .hi = &zero},
                      {.lo = &zero, .hi = &p15}, {.lo = &m01, .hi = &p01},
                      {.lo = &p01, .hi = &m01}}; /* the last two clamp all; min > max */
    sg_tensor *x = away_from_zero(D64(r, -1, 1, 3, 4));
    for (int k = 0; k < 6; k++) CHECK_GRAD(r, f_clamp, &bounds[k], 0, x);
}
static void case_log_sigmoid(case_run *r)
{
    CHECK_GRAD(r, f_unary, ARG(.un = sg_log_sigmoid), 0, D64(r, -6, 6, 2, 3));
    CHECK_GRAD(r, f_unary, ARG(.un = sg_log_sigmoid), 0, D64(r, -40, 40, 4));
}

static void softmax_checks(case_run *r, sg_gradcheck_fn f)
{
    sg_tensor *x = D64(r, -2, 2, 3, 4);
    for (int dim = -1; dim < 2; dim++) CHECK_GRAD(r, f, ARG(.dim = dim), 0, x);
    CHECK_GRAD(r, f, ARG(.dim = 1), 0, D64(r, -2, 2, 2, 3, 4));
}
static void case_softmax(case_run *r) { softmax_checks(r, f_softmax); }
static void case_log_softmax(case_run *r) { softmax_checks(r, f_log_softmax); }

static void case_cross_entropy(case_run *r)
{
    const int64_t t[4] = {2, 0, 4, 2};
    for (int k = 0; k < 2; k++) {
        args a = {.idx = index_in(r->ctx, k ? SG_I32 : SG_I64, 1, (int64_t[]){4}, t)};
        CHECK_GRAD(r, f_cross_entropy, &a, 0, D64(r, -2, 2, 4, 5));
    }
}

static void case_bce_with_logits(case_run *r)
{
    args a = {.bin = sg_bce_with_logits}; /* targets in [0,1] get a gradient too */
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -3, 3, 2, 3), D64(r, 0, 1, 2, 3));
    CHECK_GRAD(r, f_binary, &a, 0, D64(r, -3, 3, 5), D64(r, 0, 1, 5));
}

static void case_reshape(case_run *r) { CHECK_GRAD(r, f_reshape, NULL, 0, D64(r, -1, 1, 2, 6)); }

static void case_transpose(case_run *r)
{
    CHECK_GRAD(r, f_transpose, ARG(.dim = 0, .dim1 = 1), 0, D64(r, -1, 1, 3, 4));
    CHECK_GRAD(r, f_transpose, ARG(.dim = 0, .dim1 = -1), 0, D64(r, -1, 1, 2, 3, 4));
    CHECK_GRAD(r, f_transpose, ARG(.dim = 1, .dim1 = 2), 0, D64(r, -1, 1, 2, 3, 2, 2));
    int64_t sh[2] = {3, 4};
    CHECK_GRAD(r, f_transpose, ARG(.dim = 0, .dim1 = 1), 0, coo_in(r->ctx, 2, sh, 1, 4, 2));
    CHECK_GRAD(r, f_transpose, ARG(.dim = 1, .dim1 = 0), 0, coo_in(r->ctx, 2, sh, 2, 7, 6));
}

static void case_concat(case_run *r)
{
    CHECK_GRAD(r, f_concat, ARG(.n = 3), 0, D64(r, -1, 1, 1, 3), D64(r, -1, 1, 2, 3), D64(r, -1, 1, 3, 3));
    /* more inputs than a node holds: concatenated in groups */
    CHECK_GRAD(r, f_concat, ARG(.n = 6), 0, D64(r, -1, 1, 1, 2), D64(r, -1, 1, 2, 2), D64(r, -1, 1, 1, 2),
               D64(r, -1, 1, 1, 2), D64(r, -1, 1, 3, 2), D64(r, -1, 1, 1, 2));
    sg_tensor *x = D64(r, -1, 1, 3, 3);
    CHECK_GRAD(r, f_concat, ARG(.n = 2), 0, x, x);
    CHECK_GRAD(r, f_concat, ARG(.n = 2), 0, constant(D64(r, -1, 1, 2, 3)), D64(r, -1, 1, 1, 3));
}

static void case_embedding(case_run *r)
{
    sg_tensor *W = D64(r, -1, 1, 6, 3);
    const int64_t v[6] = {1, 4, 1, 0, 5, 1};
    args a = {.idx = index_in(r->ctx, SG_I64, 2, (int64_t[]){2, 3}, v), .emb = {-1, 0, NULL}};
    CHECK_GRAD(r, f_embedding, &a, 0, W);
    a.idx = index_in(r->ctx, SG_I32, 1, (int64_t[]){6}, v);
    CHECK_GRAD(r, f_embedding, &a, 0, W);
    a.emb.padding_idx = 1; /* rows 1 give zeros and no gradient */
    CHECK_GRAD(r, f_embedding, &a, 0, W);
    a.idx = index_in(r->ctx, SG_I64, 0, NULL, (int64_t[]){4}); /* 0-d index */
    CHECK_GRAD(r, f_embedding, &a, 0, W);
}

static void case_embedding_bag(case_run *r)
{
    sg_tensor *W = D64(r, -1, 1, 7, 3), *weights = D64(r, -1, 1, 8);
    const int64_t v[8] = {1, 6, 1, 0, 2, 2, 5, 3};
    sg_tensor *offsets = index_in(r->ctx, SG_I32, 1, (int64_t[]){4}, (int64_t[]){0, 3, 3, 5}); /* bag 1 empty */
    sg_tensor *csr = index_in(r->ctx, SG_I64, 1, (int64_t[]){5}, (int64_t[]){0, 3, 3, 5, 8});
    args a = {.idx = index_in(r->ctx, SG_I64, 1, (int64_t[]){8}, v), .offsets = offsets};
    /* every mode, then the weighted sum: plain, with padding row 2 (left out of its bags),
     * and with CSR offsets (include_last_offset) */
    for (int variant = 0; variant < 3; variant++) {
        a.padding_idx = variant == 1 ? 2 : 0;
        a.include_last_offset = variant == 2;
        a.offsets = variant == 2 ? csr : offsets;
        a.weighted = false;
        for (int mode = SG_BAG_SUM; mode <= SG_BAG_MAX; mode++) {
            a.mode = (sg_bag_mode)mode;
            CHECK_GRAD(r, f_embedding_bag, &a, 0, W);
        }
        a.mode = SG_BAG_SUM;
        a.weighted = true;
        CHECK_GRAD(r, f_embedding_bag, &a, 0, W, weights);
    }
}

static void case_index_select(case_run *r)
{
    sg_tensor *x = D64(r, -1, 1, 5, 4, 2);
    args a = {.idx = index_in(r->ctx, SG_I32, 1, (int64_t[]){5}, (int64_t[]){3, 0, 3, 1, 3})};
    for (int dim = 0; dim < 2; dim++) {
        a.dim = dim;
        CHECK_GRAD(r, f_index_select, &a, 0, x);
    }
    a.idx = index_in(r->ctx, SG_I64, 1, (int64_t[]){3}, (int64_t[]){1, 1, 0});
    a.dim = 2;
    CHECK_GRAD(r, f_index_select, &a, 0, x);
    a.dim = -1;
    CHECK_GRAD(r, f_index_select, &a, 0, x);
    args chain = {.idx = index_in(r->ctx, SG_I64, 1, (int64_t[]){4}, (int64_t[]){2, 0, 2, 1}),
                  .idx2 = index_in(r->ctx, SG_I64, 1, (int64_t[]){6}, (int64_t[]){4, 4, 0, 2, 1, 3}),
                  .start = 1, .end = 4};
    CHECK_GRAD(r, f_select_slice_select, &chain, 0, x);
}

static void case_slice(case_run *r)
{
    sg_tensor *x = D64(r, -1, 1, 5, 4, 2);
    CHECK_GRAD(r, f_slice, ARG(.start = 1, .end = 4), 0, x);
    CHECK_GRAD(r, f_slice, ARG(.start = 0, .end = 5), 0, D64(r, -1, 1, 5));
    CHECK_GRAD(r, f_slice, ARG(.start = 2, .end = 2), 0, x); /* empty */
}

static void case_to_dense(case_run *r)
{
    CHECK_GRAD(r, f_unary, ARG(.un = sg_to_dense), 0, coo_in(r->ctx, 2, (int64_t[]){3, 4}, 2, 7, 6));
    CHECK_GRAD(r, f_unary, ARG(.un = sg_to_dense), 0, coo_in(r->ctx, 3, (int64_t[]){4, 2, 3}, 1, 3, 0));
}

static void case_to_sparse(case_run *r)
{
    sg_tensor *x = D64(r, -1, 1, 4, 2, 3);
    double *xd = sg_tensor_f64(x);
    for (int j = 0; xd && j < 6; j++) xd[6 + j] = 0; /* row 1 is zero */
    if (xd) xd[0] = 0;
    for (int sd = 1; sd <= 3; sd++) CHECK_GRAD(r, f_to_sparse, ARG(.sparse_dim = sd), 0, x);
}

static void case_sparse_mask(case_run *r)
{
    int64_t sh[3] = {4, 2, 3};
    args a = {.mask = coo_in(r->ctx, 3, sh, 2, 5, 0)};
    CHECK_GRAD(r, f_sparse_mask, &a, 0, D64(r, -1, 1, 4, 2, 3));
    sg_tensor *s = coo_in(r->ctx, 3, sh, 2, 9, 5);
    CHECK_GRAD(r, f_sparse_mask, &a, 0, s);
    CHECK_GRAD(r, f_sparse_mask, &a, 0, coo_in(r->ctx, 3, sh, 1, 3, 0)); /* x less sparse */
    a.mask = s; /* s on its own pattern, masked: a non-masked check would perturb the mask */
    CHECK_GRAD(r, f_sparse_mask, &a, 1, s);
}

static void case_sgns_loss(case_run *r)
{
    enum { B = 3, T = 3, D = 4, V = 5 };
    sg_tensor *h = D64(r, -1, 1, B, D), *W = D64(r, -1, 1, V, D);
    /* row 2 appears three times (duplicates must sum), row 4 never */
    const int64_t tv[B * T] = {2, 0, 1, 3, 2, 2, 0, 1, 3};
    for (int k = 0; k < 2; k++) {
        args a = {.idx = index_in(r->ctx, k ? SG_I32 : SG_I64, 2, (int64_t[]){B, T}, tv)};
        CHECK_GRAD(r, f_sgns_loss, &a, 0, h, W);
    }
    args one = {.idx = index_in(r->ctx, SG_I64, 2, (int64_t[]){B, 1}, (int64_t[]){1, 4, 1})}; /* T = 1 */
    CHECK_GRAD(r, f_sgns_loss, &one, 0, h, W);
}

static void case_hs_loss(case_run *r)
{
    enum { B = 4, D = 3, N = 5, P = 8 };
    sg_tensor *h = D64(r, -1, 1, B, D), *W = D64(r, -1, 1, N, D);
    /* paths of lengths 3, 0 (adds nothing), 4 and 1; node 2 three times, node 4 never */
    const int64_t nodes[P] = {2, 0, 1, 3, 2, 2, 0, 1}, codes[P] = {1, 0, 1, 0, 0, 1, 1, 0};
    const int64_t offs[B] = {0, 3, 3, 7};
    for (int k = 0; k < 2; k++) {
        sg_dtype dt = k ? SG_I32 : SG_I64;
        args a = {.idx = index_in(r->ctx, dt, 1, (int64_t[]){P}, nodes),
                  .idx2 = index_in(r->ctx, dt, 1, (int64_t[]){P}, codes),
                  .offsets = index_in(r->ctx, dt, 1, (int64_t[]){B}, offs)};
        CHECK_GRAD(r, f_hs_loss, &a, 0, h, W);
    }
}

/* Values 0.25 apart in a scrambled order (7 k mod n, n not a multiple of 7), no ties
 * within 1e-6: the maximum never changes under the finite differences. */
static sg_tensor *distinct(sg_tensor *t)
{
    double *d = t ? sg_tensor_f64(t) : NULL;
    const int64_t n = t ? sg_tensor_numel(t) : 0;
    for (int64_t k = 0; d && k < n; k++) d[k] = 0.25 * (double)((7 * k) % n) - 0.1 * (double)n;
    return t;
}

static void case_norm_dim(case_run *r)
{
    sg_tensor *x = away_from_zero(D64(r, -1, 1, 2, 3, 4)); /* no zeros: p = 1's kink */
    for (int p = 1; p <= 2; p++)
        for (int dim = -1; dim < 3; dim++)
            for (int keep = 0; keep < 2; keep++)
                CHECK_GRAD(r, f_norm_dim, ARG(.s = p, .dim = dim, .keepdim = keep), 0, x);
    CHECK_GRAD(r, f_norm_dim, ARG(.s = 2, .dim = 0), 0, D64(r, -1, 1, 5));
}

static void case_logsumexp_dim(case_run *r)
{
    sg_tensor *x = D64(r, -2, 2, 2, 3, 4);
    for (int dim = -1; dim < 3; dim++)
        for (int keep = 0; keep < 2; keep++)
            CHECK_GRAD(r, f_logsumexp_dim, ARG(.dim = dim, .keepdim = keep), 0, x);
    CHECK_GRAD(r, f_logsumexp_dim, ARG(.dim = 1), 0, D64(r, 40, 60, 3, 5)); /* large logits */
}

static void case_max_dim(case_run *r)
{
    sg_tensor *x = distinct(D64(r, -1, 1, 2, 3, 4));
    for (int dim = -1; dim < 3; dim++)
        for (int keep = 0; keep < 2; keep++)
            CHECK_GRAD(r, f_max_dim, ARG(.dim = dim, .keepdim = keep, .n = keep), 0, x);
    CHECK_GRAD(r, f_max_dim, ARG(.dim = 0), 0, distinct(D64(r, -1, 1, 5)));
}

static void case_narrow(case_run *r)
{
    sg_tensor *x = D64(r, -1, 1, 2, 5, 3);
    CHECK_GRAD(r, f_narrow, ARG(.dim = 1, .start = 1, .end = 3), 0, x);
    CHECK_GRAD(r, f_narrow, ARG(.dim = -1, .start = -2, .end = 2), 0, x); /* negative start */
    CHECK_GRAD(r, f_narrow, ARG(.dim = 0, .start = 0, .end = 2), 0, x);  /* the whole dim */
    CHECK_GRAD(r, f_narrow, ARG(.dim = 2, .start = 1, .end = 1), 0, x);
    CHECK_GRAD(r, f_narrow, ARG(.dim = 1, .start = 5, .end = 0), 0, x); /* empty */
}

static void case_gather(case_run *r)
{
    sg_tensor *x = D64(r, -1, 1, 3, 4), *y = D64(r, -1, 1, 2, 3, 4);
    /* repeated entries (their gradients sum), more entries along dim than x has */
    const int64_t v1[10] = {3, 0, 3, 1, 3, 2, 2, 0, 1, 2};
    CHECK_GRAD(r, f_gather, ARG(.dim = 1, .idx = index_in(r->ctx, SG_I64, 2, (int64_t[]){2, 5}, v1)), 0, x);
    CHECK_GRAD(r, f_gather, ARG(.dim = -1, .idx = index_in(r->ctx, SG_I32, 2, (int64_t[]){3, 3}, v1)), 0, x);
    const int64_t v0[8] = {2, 0, 1, 2, 2, 2, 0, 1};
    CHECK_GRAD(r, f_gather, ARG(.dim = 0, .idx = index_in(r->ctx, SG_I32, 2, (int64_t[]){4, 2}, v0)), 0, x);
    const int64_t v3[12] = {1, 0, 2, 2, 2, 1, 0, 0, 1, 2, 1, 0};
    for (int dim = 0; dim < 3; dim++) {
        int64_t v[12];
        for (int k = 0; k < 12; k++) v[k] = v3[k] % sg_tensor_dim(y, dim);
        sg_tensor *idx = index_in(r->ctx, SG_I64, 3, (int64_t[]){2, 2, 3}, v);
        CHECK_GRAD(r, f_gather, ARG(.dim = dim, .idx = idx), 0, y);
    }
    CHECK_GRAD(r, f_gather, ARG(.dim = 0, .idx = index_in(r->ctx, SG_I64, 1, (int64_t[]){4}, v0)), 0,
               D64(r, -1, 1, 3)); /* 1-D */
}

static void case_dropout(case_run *r)
{
    const double ps[3] = {0.3, 0.6, 1.0};
    for (int k = 0; k < 3; k++) {
        dropout_args a = {.p = ps[k]};
        memcpy(a.rng, r->ctx->rng, sizeof a.rng);
        CHECK_GRAD(r, f_dropout, &a, 0, D64(r, -1, 1, 4, 5));
        sg_rand_u64(r->ctx); /* the next check: another state, another mask */
    }
}

static void case_layer_norm(case_run *r)
{
    sg_tensor *x = D64(r, -1, 1, 3, 5), *w = D64(r, 0.5, 1.5, 5), *b = D64(r, -1, 1, 5);
    CHECK_GRAD(r, f_layer_norm, ARG(.n = 3, .s = 1e-5), 0, x, w, b);
    CHECK_GRAD(r, f_layer_norm, ARG(.n = 1, .s = 1e-5), 0, x, w);
    CHECK_GRAD(r, f_layer_norm, ARG(.n = 2, .s = 0.1), 0, x, b);
    CHECK_GRAD(r, f_layer_norm, ARG(.n = 0, .s = 1e-5), 0, D64(r, -1, 1, 2, 2, 4));
    CHECK_GRAD(r, f_layer_norm, ARG(.n = 3, .s = 1e-5), 0, D64(r, -1, 1, 2, 2, 4), D64(r, 0.5, 1.5, 4),
               constant(D64(r, -1, 1, 4)));
}

typedef struct {
    const char *op; /* an ops.def entry's fn */
    void (*run)(case_run *r);
} op_case;

static const op_case cases[] = {
    {"add", case_add},
    {"sub", case_sub},
    {"mul", case_mul},
    {"div", case_div},
    {"maximum", case_maximum},
    {"minimum", case_minimum},
    {"where", case_where},
    {"scale", case_scale},
    {"matmul", case_matmul},
    {"rowdot", case_rowdot},
    {"cdist", case_cdist},
    {"rowdist", case_rowdist},
    {"complex_mul", case_complex_mul},
    {"sum", case_sum},
    {"mean", case_mean},
    {"sum_dim", case_sum_dim},
    {"mean_dim", case_mean_dim},
    {"norm_dim", case_norm_dim},
    {"logsumexp_dim", case_logsumexp_dim},
    {"max_dim", case_max_dim},
    {"relu", case_relu},
    {"sigmoid", case_sigmoid},
    {"tanh", case_tanh},
    {"exp", case_exp},
    {"log", case_log},
    {"log_sigmoid", case_log_sigmoid},
    {"abs", case_abs},
    {"sqrt", case_sqrt},
    {"pow", case_pow},
    {"clamp", case_clamp},
    {"sin", case_sin},
    {"cos", case_cos},
    {"softmax", case_softmax},
    {"log_softmax", case_log_softmax},
    {"cross_entropy", case_cross_entropy},
    {"bce_with_logits", case_bce_with_logits},
    {"ranking_loss", case_ranking_loss},
    {"dropout", case_dropout},
    {"layer_norm", case_layer_norm},
    {"reshape", case_reshape},
    {"transpose", case_transpose},
    {"concat", case_concat},
    {"narrow", case_narrow},
    {"gather", case_gather},
    {"embedding", case_embedding},
    {"embedding_bag", case_embedding_bag},
    {"index_select", case_index_select},
    {"slice", case_slice},
    {"to_dense", case_to_dense},
    {"to_sparse", case_to_sparse},
    {"sparse_mask", case_sparse_mask},
    {"sgns_loss", case_sgns_loss},
    {"hs_loss", case_hs_loss},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* The case keyed to op fn in cs[0..m), NULL if none. */
static const op_case *case_for(const op_case *cs, int m, const char *fn)
{
    for (int i = 0; i < m; i++)
        if (strcmp(cs[i].op, fn) == 0) return &cs[i];
    return NULL;
}

/* Ops of list[0..n) without a case in cs[0..m), each named on stderr unless quiet. */
static int ops_without_case(const op_entry *list, int n, const op_case *cs, int m, bool quiet)
{
    int missing = 0;
    for (int i = 0; i < n; i++)
        if (!case_for(cs, m, list[i].fn)) {
            if (!quiet)
                fprintf(stderr, "  sg_%s is in src/ops/ops.def but has no case here\n", list[i].fn);
            missing++;
        }
    return missing;
}

static sg_ctx *case_ctx(void)
{
    sg_ctx_opts o = {.seed = 5};
    return sg_ctx_new(&o);
}

/* ---------------------------------------------------------------- tests */

TEST(the_list_names_each_op_and_node_once)
{
    CHECK(N_OPS > 0);
    for (int i = 0; i < N_OPS; i++) {
        CHECK(op_list[i].addr != NULL && op_list[i].names[0] != NULL);
        for (int j = 0; j < i; j++) CHECK(strcmp(op_list[i].fn, op_list[j].fn) != 0);
        for (int k = 0; k < MAX_NAMES && op_list[i].names[k]; k++) {
            int op, at;
            CHECK(find_name(op_list, N_OPS, op_list[i].names[k], &op, &at) && op == i && at == k);
        }
    }
}

TEST(every_case_is_keyed_to_a_listed_op_once)
{
    for (int i = 0; i < N_CASES; i++) {
        bool listed = false;
        for (int j = 0; j < N_OPS; j++) listed |= strcmp(op_list[j].fn, cases[i].op) == 0;
        if (!listed) fprintf(stderr, "  case \"%s\" is keyed to no op of src/ops/ops.def\n", cases[i].op);
        CHECK(listed);
        CHECK(case_for(cases, N_CASES, cases[i].op) == &cases[i]);
    }
}

TEST(every_listed_op_passes_its_gradcheck_case)
{
    CHECK(ops_without_case(op_list, N_OPS, cases, N_CASES, false) == 0);
    for (int i = 0; i < N_OPS; i++) {
        const op_case *c = case_for(cases, N_CASES, op_list[i].fn);
        if (!c) continue;
        case_run r = {case_ctx(), i, 0, 0, false};
        CHECK(r.ctx != NULL);
        if (!r.ctx) return;
        c->run(&r);
        r.failures += unrecorded_names(&r);
        if (r.failures) fprintf(stderr, "  sg_%s: %d failed checks\n", op_list[i].fn, r.failures);
        tu_failures += r.failures;
        sg_ctx_free(r.ctx);
    }
}

/* Public functions that return a tensor but record no tape node (constructors, views of a
 * tensor's parts, gradients, optimizer state, the non-differentiable coalesce). */
static const char *const untaped[] = {
    "tensor_new", "tensor_from_data", "tensor_wrap", "tensor_new_tmp", "tensor_requires_grad", "coo_new",
    "coo_new_tmp", "coo_indices", "coo_values", "coalesce", "tensor_grad", "grads_param", "optim_param",
    "optim_state", "wordvec_vectors",
};

/* Functions declared "SG_API sg_tensor *sg_<name>(" in header text that are neither in the
 * list nor untaped, each named on stderr unless quiet. */
static int unlisted_public_ops(const char *header, bool quiet)
{
    static const char decl[] = "SG_API sg_tensor *sg_";
    int missing = 0;
    for (const char *p = strstr(header, decl); p; p = strstr(p, decl)) {
        p += sizeof decl - 1;
        size_t len = strcspn(p, "(");
        bool known = false;
        for (int i = 0; i < N_OPS && !known; i++)
            known = strlen(op_list[i].fn) == len && strncmp(op_list[i].fn, p, len) == 0;
        for (size_t i = 0; i < sizeof untaped / sizeof untaped[0] && !known; i++)
            known = strlen(untaped[i]) == len && strncmp(untaped[i], p, len) == 0;
        if (!known) {
            if (!quiet)
                fprintf(stderr, "  sg_%.*s returns a tensor but is not in src/ops/ops.def\n", (int)len, p);
            missing++;
        }
    }
    return missing;
}

/* The whole file as a string (NULL if unreadable); the caller frees it. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        text = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (text && (fseek(f, 0, SEEK_SET) != 0 || fread(text, 1, (size_t)n, f) != (size_t)n)) {
            free(text);
            text = NULL;
        }
        if (text) text[n] = 0;
    }
    fclose(f);
    return text;
}

TEST(every_public_function_returning_a_tensor_is_listed_or_untaped)
{
    char *header = read_text(SG_SOURCE_DIR "/include/sgrad.h");
    CHECK(header != NULL);
    if (!header) return;
    CHECK(strstr(header, "SG_API sg_tensor *sg_embedding(") != NULL); /* the scan sees ops */
    CHECK(unlisted_public_ops(header, false) == 0);
    free(header);
    CHECK(unlisted_public_ops("SG_API sg_tensor *sg_frobnicate(sg_tensor *x);", true) == 1);
}

/* ---- the checker itself can fail */

/* y = x, recorded under a name that is not in the list; its backward is right. */
static int unlisted_backward(sg_node *n, sg_tensor *gout) { return sg__accum_grad(n->in[0], gout, false); }
static sg_tensor *f_unlisted_then_scale(sg_ctx *ctx, sg_tensor *const *in, void *ud)
{
    (void)ud;
    sg_tensor *x = in[0], *y = sg__tmp_like(x, false);
    if (!y) return NULL;
    memcpy(y->data, x->data, (size_t)x->numel * sizeof(double));
    if (sg__needs_grad(ctx, 1, &x) && !sg__node_new(ctx, unlisted_backward, "not_in_the_list", y, 1, &x))
        return NULL;
    return sg_scale(y, 2);
}

static int op_index(const char *fn)
{
    for (int i = 0; i < N_OPS; i++)
        if (strcmp(op_list[i].fn, fn) == 0) return i;
    return -1;
}

TEST(checker_reports_an_unlisted_node_and_a_check_without_its_op)
{
    int scale = op_index("scale"), relu = op_index("relu");
    CHECK(scale >= 0 && relu >= 0);
    if (scale < 0 || relu < 0) return;
    case_run r = {case_ctx(), scale, 0, 0, true};
    sg_tensor *x = dense_in(r.ctx, -1, 1, SHAPE(2, 2));
    CHECK_GRAD(&r, f_unlisted_then_scale, NULL, 0, x); /* the gradients are right */
    CHECK(r.failures == 1);
    CHECK(r.recorded == 1u);
    r = (case_run){r.ctx, relu, 0, 0, true}; /* a check keyed to relu that records scale */
    CHECK_GRAD(&r, f_scale, ARG(.s = 2), 0, x);
    CHECK(r.failures == 1);
    sg_ctx_free(r.ctx);
}

TEST(checker_reports_a_node_name_no_check_records)
{
    int add = op_index("add");
    CHECK(add >= 0);
    if (add < 0) return;
    case_run r = {case_ctx(), add, 0, 0, true};
    CHECK_GRAD(&r, f_binary, ARG(.bin = sg_add), 0, D64(&r, -1, 1, 2), D64(&r, -1, 1, 2));
    CHECK(r.failures == 0);
    CHECK(unrecorded_names(&r) == 1); /* the COO path, "sparse_add" */
    sg_ctx_free(r.ctx);
}

TEST(checker_reports_a_listed_op_without_a_case)
{
    op_entry planted[N_OPS + 1];
    memcpy(planted, op_list, sizeof op_list);
    planted[N_OPS] = (op_entry){"not_an_op", NULL, {"not_an_op"}};
    int missing = ops_without_case(op_list, N_OPS, cases, N_CASES, true);
    CHECK(ops_without_case(planted, N_OPS + 1, cases, N_CASES, true) == missing + 1);
    CHECK(ops_without_case(op_list, N_OPS, cases + 1, N_CASES - 1, true) == missing + 1);
}

/* y = 2x under the listed name "sg_scale", with a backward that claims dy/dx = 3. */
static int wrong_scale_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *g = sg__tmp_like(gout, false);
    if (!g) return SG_ERR_NOMEM;
    for (int64_t i = 0; i < g->numel; i++) ((double *)g->data)[i] = 3 * ((const double *)gout->data)[i];
    return sg__accum_grad(n->in[0], g, true);
}
static sg_tensor *f_wrong_scale(sg_ctx *ctx, sg_tensor *const *in, void *ud)
{
    (void)ud;
    sg_tensor *x = in[0], *y = sg__tmp_like(x, false);
    if (!y) return NULL;
    for (int64_t i = 0; i < x->numel; i++) ((double *)y->data)[i] = 2 * ((const double *)x->data)[i];
    if (sg__needs_grad(ctx, 1, &x) && !sg__node_new(ctx, wrong_scale_backward, "sg_scale", y, 1, &x))
        return NULL;
    return y;
}

TEST(checker_reports_a_wrong_gradient)
{
    int scale = op_index("scale");
    CHECK(scale >= 0);
    if (scale < 0) return;
    case_run r = {case_ctx(), scale, 0, 0, true};
    CHECK_GRAD(&r, f_wrong_scale, NULL, 0, dense_in(r.ctx, -1, 1, SHAPE(3)));
    CHECK(r.failures == 1 && r.recorded == 1u); /* the gradcheck only: the node is listed */
    sg_ctx_free(r.ctx);
}

/* sum(x * x) of the first input; the second is only passed along. */
static sg_tensor *f_sum_sq_first(sg_ctx *ctx, sg_tensor *const *in, void *ud)
{
    (void)ctx;
    (void)ud;
    return sg_sum(sg_mul(in[0], in[0]));
}

/* An input of another context is refused with SG_ERR_ARG, and that context's gradient is
 * left alone. Before, sg_gradcheck took its stale gradient (2, from a backward run there)
 * for the analytical derivative and reported SG_ERR_GRADCHECK against the numerical 0. */
TEST(gradcheck_refuses_an_input_of_another_context)
{
    sg_ctx *a = sg_ctx_new(NULL), *b = sg_ctx_new(NULL);
    sg_tensor *x = sg_tensor_requires_grad(sg_tensor_from_data(a, SG_F64, SHAPE(3), (double[]){1, 1, 1}), 1);
    sg_tensor *y = sg_tensor_requires_grad(sg_tensor_from_data(b, SG_F64, SHAPE(3), (double[]){1, 1, 1}), 1);
    CHECK_STATUS(b, sg_backward(sg_sum(sg_mul(y, y))), SG_OK);
    sg_gradcheck_result res;
    CHECK_STATUS(a, sg_gradcheck(a, f_sum_sq_first, NULL, 2, (sg_tensor *[]){x, y}, NULL, &res), SG_ERR_ARG);
    CHECK(strstr(sg_ctx_message(a), "two contexts") != NULL);
    CHECK(sg_tensor_grad(y) && sg_tensor_get(sg_tensor_grad(y), 0) == 2.0);
    CHECK_STATUS(a, sg_gradcheck(a, f_sum_sq_first, NULL, 1, (sg_tensor *[]){x}, NULL, &res), SG_OK);
    sg_ctx_free(a);
    sg_ctx_free(b);
}

TEST_MAIN()
