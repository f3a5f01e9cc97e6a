/* Core: context, errors, arena, tensors, tape traversal, gradient store and the
 * accumulation rules, allocation-failure injection over a whole training step. */
#include "autograd/tape.h"
#include "testutil.h"


/* ---- a test op: y = s * x, whose backward counts its calls */
static int scale_calls;
static int tscale_backward(sg_node *n, sg_tensor *gout)
{
    scale_calls++;
    sg_tensor *g = sg__tmp_like(gout, false);
    if (!g) return SG_ERR_NOMEM;
    const double *s = gout->data;
    double *d = g->data;
    for (int64_t i = 0; i < g->numel; i++) d[i] = n->scalar[0] * s[i];
    return sg__accum_grad(n->in[0], g, true);
}
static sg_tensor *tscale(sg_tensor *x, double s)
{
    if (!x) return NULL;
    sg_tensor *y = sg__tmp_like(x, false);
    if (!y) return NULL;
    for (int64_t i = 0; i < x->numel; i++) ((double *)y->data)[i] = s * ((double *)x->data)[i];
    if (sg__needs_grad(x->ctx, 1, &x)) {
        sg_node *n = sg__node_new(x->ctx, tscale_backward, "tscale", y, 1, &x);
        if (!n) return NULL;
        n->scalar[0] = s;
    }
    return y;
}

TEST(status_strings_are_distinct)
{
    for (int i = 0; i < SG_STATUS_COUNT; i++)
        for (int j = i + 1; j < SG_STATUS_COUNT; j++) CHECK(strcmp(sg_status_string(i), sg_status_string(j)) != 0);
    CHECK(strcmp(sg_status_string(SG_STATUS_COUNT), "unknown status") == 0);
    CHECK(strcmp(sg_status_string(-1), "unknown status") == 0);
}

TEST(null_handling)
{
    sg_ctx_free(NULL);
    sg_tensor_free(NULL);
    CHECK(sg_tensor_requires_grad(NULL, 1) == NULL);
    CHECK(sg_backward(NULL) == SG_ERR_NULL);
    CHECK(sg_tensor_grad(NULL) == NULL);
    CHECK(sg_tensor_new(NULL, SG_F32, 0, NULL) == NULL);
}

/* Every accessor answers NULL with a value no tensor (context, word table) has. */
TEST(accessors_of_null_return_invalid_values)
{
    CHECK(sg_tensor_ctx(NULL) == NULL);
    CHECK(sg_tensor_dtype(NULL) == SG_DTYPE_INVALID);
    CHECK(sg_tensor_layout(NULL) == SG_LAYOUT_INVALID);
    CHECK(sg_tensor_ndim(NULL) == -1);
    CHECK(sg_tensor_dim(NULL, 0) == -1 && sg_tensor_dim(NULL, -1) == -1);
    CHECK(sg_tensor_shape(NULL) == NULL);
    CHECK(sg_tensor_numel(NULL) == -1);
    CHECK(sg_tensor_data(NULL) == NULL && sg_tensor_f32(NULL) == NULL && sg_tensor_f64(NULL) == NULL);
    CHECK(isnan(sg_tensor_get(NULL, 0)));
    CHECK(sg_tensor_get_requires_grad(NULL) == 0);
    CHECK(sg_tensor_grad(NULL) == NULL);
    CHECK(sg_dtype_size(SG_DTYPE_INVALID) == 0 && sg_dtype_size((sg_dtype)17) == 0);
    CHECK(sg_coo_sparse_dim(NULL) == -1 && sg_coo_dense_dim(NULL) == -1 && sg_coo_nnz(NULL) == -1);
    CHECK(sg_coo_is_coalesced(NULL) == 0);
    CHECK(sg_coo_indices(NULL) == NULL && sg_coo_values(NULL) == NULL);
    CHECK(sg_ctx_status(NULL) == SG_ERR_NULL && strcmp(sg_ctx_message(NULL), "NULL context") == 0);
    CHECK(sg_ctx_threads(NULL) == -1 && sg_ctx_deterministic(NULL) == 0);
    CHECK(sg_grads_count(NULL) == -1 && sg_grads_param(NULL, 0) == NULL);
    CHECK(sg_tape_nodes(NULL) == -1);
    CHECK(sg_wordvec_count(NULL) == -1 && sg_wordvec_dim(NULL) == -1);
    CHECK(sg_wordvec_word(NULL, 0) == NULL && sg_wordvec_vectors(NULL) == NULL);
    CHECK(sg_wordvec_find(NULL, "a") == -1);
}

/* The same accessors on real tensors: their values, a dim out of range, COO accessors on a
 * dense tensor (no COO tensor: -1, 0, NULL). */
TEST(accessors_of_tensors)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *d = sg_tensor_new(ctx, SG_I32, 2, (int64_t[]){2, 3});
    CHECK(sg_tensor_ctx(d) == ctx && sg_tensor_dtype(d) == SG_I32 && sg_tensor_layout(d) == SG_DENSE);
    CHECK(sg_tensor_ndim(d) == 2 && sg_tensor_numel(d) == 6 && sg_tensor_shape(d)[1] == 3);
    CHECK(sg_tensor_dim(d, 0) == 2 && sg_tensor_dim(d, -1) == 3 && sg_tensor_dim(d, -2) == 2);
    CHECK(sg_tensor_dim(d, 2) == -1 && sg_tensor_dim(d, -3) == -1);
    CHECK(sg_tensor_data(d) != NULL && sg_tensor_f32(d) == NULL && sg_tensor_f64(d) == NULL);
    CHECK(isnan(sg_tensor_get(d, 6)) && isnan(sg_tensor_get(d, -1)) && sg_tensor_get(d, 5) == 0);
    CHECK(sg_coo_sparse_dim(d) == -1 && sg_coo_dense_dim(d) == -1 && sg_coo_nnz(d) == -1);
    CHECK(sg_coo_is_coalesced(d) == 0 && sg_coo_indices(d) == NULL && sg_coo_values(d) == NULL);
    sg_tensor *s = sg_tensor_new(ctx, SG_F64, 0, NULL);
    CHECK(sg_tensor_ndim(s) == 0 && sg_tensor_numel(s) == 1 && sg_tensor_dim(s, 0) == -1);
    CHECK(sg_tensor_shape(s) != NULL && sg_tensor_f64(s) != NULL);
    const int64_t idx[2] = {0, 2};
    const float val[4] = {1, 2, 3, 4};
    sg_tensor *c = sg_coo_new(ctx, SG_F32, 2, (int64_t[]){3, 2}, 1, 2, idx, val);
    CHECK(sg_tensor_layout(c) == SG_COO && sg_tensor_numel(c) == 6 && sg_tensor_data(c) == NULL);
    CHECK(sg_coo_sparse_dim(c) == 1 && sg_coo_dense_dim(c) == 1 && sg_coo_nnz(c) == 2);
    CHECK(sg_coo_indices(c) != NULL && sg_coo_values(c) != NULL);
    CHECK(sg_tensor_get(c, 5) == 4 && sg_tensor_get(c, 2) == 0);
    CHECK(sg_ctx_threads(ctx) >= 1 && sg_ctx_deterministic(ctx) == 1);
    CHECK(sg_grads_count(ctx) == 0 && sg_tape_nodes(ctx) == 0);
    sg_ctx_free(ctx);
}

/* sg_backward_grad on a leaf adds grad_out to its gradient, borrowing grad_out (no copy);
 * a second call accumulates without changing grad_out. A leaf that does not require grad
 * is SG_ERR_STATE, a gradient of another shape SG_ERR_SHAPE, of another dtype SG_ERR_DTYPE
 * naming both (before, SG_ERR_SHAPE "gradient (3) does not match output (3)"). */
TEST(backward_grad_on_a_leaf)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *x = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){3}), 1);
    sg_tensor *g = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    CHECK_STATUS(ctx, sg_backward_grad(x, g), SG_OK);
    CHECK(sg_tensor_grad(x) == g && sg_grads_count(ctx) == 1 && sg_grads_param(ctx, 0) == x);
    CHECK(sg_tape_nodes(ctx) == 0);
    CHECK_STATUS(ctx, sg_backward_grad(x, g), SG_OK);
    sg_tensor *gx = sg_tensor_grad(x);
    for (int i = 0; gx && i < 3; i++) {
        CHECK(sg_tensor_get(gx, i) == 2.0 * (i + 1));
        CHECK(sg_tensor_get(g, i) == i + 1);
    }
    CHECK(gx != NULL && sg_grads_count(ctx) == 1);
    sg_tensor *wrong = sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){4});
    CHECK_STATUS(ctx, sg_backward_grad(x, wrong), SG_ERR_SHAPE);
    sg_tensor *f32 = sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){3});
    CHECK_STATUS(ctx, sg_backward_grad(x, f32), SG_ERR_DTYPE);
    CHECK(strstr(sg_ctx_message(ctx), "f32") && strstr(sg_ctx_message(ctx), "f64"));
    sg_tensor *x32 = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){3}), 1);
    CHECK_STATUS(ctx, sg_backward_grad(tscale(x, 2), f32), SG_ERR_DTYPE); /* an op's output */
    CHECK_STATUS(ctx, sg_tensor_set_grad(x32, g), SG_ERR_DTYPE);
    CHECK(strstr(sg_ctx_message(ctx), "f64") && strstr(sg_ctx_message(ctx), "f32"));
    CHECK(sg_tensor_grad(x32) == NULL && sg_grads_count(ctx) == 1);
    sg_tensor *c = sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){3});
    CHECK_STATUS(ctx, sg_backward_grad(c, g), SG_ERR_STATE);
    CHECK(sg_tensor_grad(c) == NULL);
    CHECK_STATUS(ctx, sg_backward_grad(tscale(c, 2), g), SG_ERR_STATE); /* nothing to reach */
    sg_tape_reset(ctx);
    CHECK(sg_tensor_grad(x) == NULL);
    sg_ctx_free(ctx);
}

TEST(tensor_construction_errors)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    CHECK(sg_tensor_new(ctx, SG_F32, 5, (int64_t[]){1, 1, 1, 1, 1}) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    sg_ctx_clear_error(ctx);
    CHECK(sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){2, -1}) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg_tensor_new(ctx, (sg_dtype)17, 1, (int64_t[]){2}) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_DTYPE);
    sg_tensor *i = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){3});
    CHECK(sg_tensor_requires_grad(i, 1) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_DTYPE);
    sg_tensor *t = sg_tensor_from_data(ctx, SG_F64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    CHECK(t && sg_tensor_get(t, 3) == 4 && sg_tensor_dim(t, -1) == 2 && sg_tensor_numel(t) == 4);
    sg_ctx_free(ctx); /* frees t and i too: ASan checks for leaks */
}

TEST(memory_accounting_returns_to_zero)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    size_t base = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){100, 10});
    CHECK(sg_ctx_mem_stats(ctx).bytes_in_use >= base + 4000);
    sg_tensor_free(t);
    CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == base);
    CHECK(sg_ctx_mem_stats(ctx).peak_bytes >= base + 4000);
    sg_ctx_free(ctx);
}

/* The kernel's flags for the mapping that holds address p (the VmFlags line of its
 * /proc/self/smaps entry) into flags; false where that file cannot be read. */
static bool vma_flags_of(const void *p, char *flags, size_t cap)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return false;
    char line[512];
    bool inside = false, found = false;
    const uintptr_t a = (uintptr_t)p;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-')
            inside = a >= lo && a < hi;
        else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(flags, cap, "%s", line + 8);
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* Large blocks from the default allocator carry the huge-page advice ("hg" among the
 * mapping's flags); a caller's own allocator gets none (its memory is left as it is). */
TEST(large_blocks_of_the_default_allocator_are_advised_for_huge_pages)
{
    FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!thp) {
        printf("  skipped: this kernel has no transparent huge pages\n");
        return;
    }
    fclose(thp);
    const int64_t shape[2] = {4096, 1024}; /* 16 MiB of f32 */
    tu_counting c = {0, 0};
    sg_ctx *own = sg_ctx_new(&(sg_ctx_opts){.allocator = {tu_count_alloc, tu_count_free, &c}});
    sg_ctx *dflt = sg_ctx_new(NULL);
    sg_tensor *a = sg_tensor_new(own, SG_F32, 2, shape);
    sg_tensor *b = sg_tensor_new(dflt, SG_F32, 2, shape);
    CHECK(a && b);
    char fa[512] = "", fb[512] = "";
    /* the middle of each block: inside the advised whole pages */
    CHECK(vma_flags_of((char *)sg_tensor_data(a) + (8 << 20), fa, sizeof fa));
    CHECK(vma_flags_of((char *)sg_tensor_data(b) + (8 << 20), fb, sizeof fb));
    CHECK(strstr(fb, " hg") != NULL);
    CHECK(strstr(fa, " hg") == NULL);
    sg_ctx_free(own);
    sg_ctx_free(dflt);
}

static void *garbage_alloc(void *ud, size_t n)
{
    (void)ud;
    void *p = malloc(n);
    if (p) memset(p, 0xab, n);
    return p;
}
static void garbage_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

/* A new tensor is zero in every byte, also past the size that all threads zero together,
 * and for any thread count (the allocator here hands out blocks full of 0xab). */
TEST(new_tensors_are_zero_on_any_thread_count)
{
    const int64_t sizes[] = {5, ((int64_t)4 << 20) / 4 + 7, ((int64_t)9 << 20) / 4 + 3};
    for (int threads = 1; threads <= 3; threads++) {
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {garbage_alloc, garbage_free, NULL}, .threads = threads});
        CHECK(ctx != NULL);
        for (int k = 0; ctx && k < 3; k++) {
            sg_tensor *t = sg_tensor_new(ctx, SG_F32, 1, &sizes[k]);
            CHECK(t != NULL);
            const unsigned char *b = t ? sg_tensor_data(t) : NULL;
            size_t nonzero = 0;
            for (int64_t i = 0; b && i < sizes[k] * 4; i++) nonzero += b[i] != 0;
            CHECK(nonzero == 0);
        }
        sg_ctx_free(ctx);
    }
}

/* The steady state of a step allocates nothing: the arena keeps its memory. */
TEST(steady_state_step_does_not_allocate)
{
    tu_counting c = {0, 0};
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {tu_count_alloc, tu_count_free, &c}});
    sg_tensor *x = sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){1000});
    sg_tensor_requires_grad(x, 1);
    long before = 0;
    for (int step = 0; step < 4; step++) {
        if (step == 3) before = c.calls;
        sg_tensor *y = x;
        for (int k = 0; k < 50; k++) y = tscale(y, 1.01);
        sg_tensor *seed = sg__tmp_like(y, true);
        CHECK(y && seed);
        CHECK(sg_backward_grad(y, seed) == SG_OK);
        sg_tape_reset(ctx);
    }
    CHECK(c.calls == before);
    sg_ctx_free(ctx);
}

/* Backward visits only nodes reachable from its output. */
TEST(backward_visits_only_reachable_nodes)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *a = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){3}), 1);
    sg_tensor *b = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){3}), 1);
    sg_tensor *ya = tscale(tscale(a, 2), 3);
    sg_tensor *yb = b;
    for (int k = 0; k < 10; k++) yb = tscale(yb, 1);
    CHECK(sg_tape_nodes(ctx) == 12);
    scale_calls = 0;
    sg_tensor *seed = sg__tmp_like(ya, false);
    sg_tensor_fill(seed, 1.0);
    CHECK(sg_backward_grad(ya, seed) == SG_OK);
    CHECK(scale_calls == 2);
    CHECK(sg_grads_count(ctx) == 1 && sg_grads_param(ctx, 0) == a);
    CHECK(sg_tensor_grad(b) == NULL);
    CHECK_NEAR(sg_tensor_get(sg_tensor_grad(a), 1), 6.0, 0);
    (void)yb;
    sg_tape_reset(ctx);
    CHECK(sg_grads_count(ctx) == 0 && sg_tensor_grad(a) == NULL && sg_tape_nodes(ctx) == 0);
    sg_ctx_free(ctx);
}

/* A leaf reached along two paths gets the sum; gradients accumulate across backward calls
 * until the tape is reset. */
TEST(two_paths_and_repeated_backward_accumulate)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *a = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){2}), 1);
    sg_tensor *u = tscale(a, 2), *v = tscale(a, 5);
    sg_tensor *w = tscale(u, 1); /* w depends on a via u only */
    sg_tensor *ins[2] = {w, v};
    (void)ins;
    sg_tensor *seed = sg__tmp_like(w, false);
    sg_tensor_fill(seed, 1.0);
    CHECK(sg_backward_grad(w, seed) == SG_OK);
    CHECK(sg_backward_grad(v, seed) == SG_OK);
    CHECK_NEAR(sg_tensor_get(sg_tensor_grad(a), 0), 7.0, 0);
    CHECK(sg_grads_count(ctx) == 1);
    sg_ctx_free(ctx);
}

static sg_tensor *coo_rows(sg_ctx *ctx, int64_t V, int64_t D, int64_t nnz, const int64_t *rows,
                           const double *vals)
{
    sg_tensor *ind = sg__tmp(ctx, SG_I64, 2, (int64_t[]){1, nnz}, false);
    sg_tensor *val = sg__tmp(ctx, SG_F64, 2, (int64_t[]){nnz, D}, false);
    memcpy(ind->data, rows, (size_t)nnz * sizeof(int64_t));
    memcpy(val->data, vals, (size_t)(nnz * D) * sizeof(double));
    return sg__coo_wrap(ctx, 2, (int64_t[]){V, D}, 1, ind, val, false);
}

/* The accumulation rules of docs/design.md ("Gradient accumulation"), checked against
 * dense arithmetic. */
TEST(accumulation_rules)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *x = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){4, 2}), 1);
    /* none + sparse = that sparse tensor, no copy */
    sg_tensor *g1 = coo_rows(ctx, 4, 2, 2, (int64_t[]){3, 1}, (double[]){1, 2, 3, 4});
    CHECK(sg__accum_grad(x, g1, false) == SG_OK);
    CHECK(sg_tensor_grad(x) == g1);
    /* sparse + sparse = concatenation, unsorted, duplicates kept */
    sg_tensor *g2 = coo_rows(ctx, 4, 2, 1, (int64_t[]){3}, (double[]){10, 20});
    CHECK(sg__accum_grad(x, g2, false) == SG_OK);
    sg_tensor *g = sg_tensor_grad(x);
    CHECK(g->layout == SG_COO && g->nnz == 3 && !g->coalesced);
    CHECK(((int64_t *)g->indices->data)[0] == 3 && ((int64_t *)g->indices->data)[2] == 3);
    double want[8] = {0, 0, 3, 4, 0, 0, 11, 22};
    for (int i = 0; i < 8; i++) CHECK_NEAR(sg_tensor_get(g, i), want[i], 0);
    /* compaction: nnz above the 4 rows coalesces */
    sg_tensor *g3 = coo_rows(ctx, 4, 2, 2, (int64_t[]){1, 0}, (double[]){1, 1, 1, 1});
    CHECK(sg__accum_grad(x, g3, false) == SG_OK);
    g = sg_tensor_grad(x);
    CHECK(g->layout == SG_COO && g->nnz <= 4 && g->coalesced);
    double want2[8] = {1, 1, 4, 5, 0, 0, 11, 22};
    for (int i = 0; i < 8; i++) CHECK_NEAR(sg_tensor_get(g, i), want2[i], 0);
    /* sparse + dense = dense; the borrowed dense buffer is not modified */
    sg_tensor *d = sg__tmp_like(x, false);
    sg_tensor_fill(d, 0.5);
    CHECK(sg__accum_grad(x, d, false) == SG_OK);
    g = sg_tensor_grad(x);
    CHECK(g->layout == SG_DENSE && g != d);
    for (int i = 0; i < 8; i++) CHECK_NEAR(sg_tensor_get(g, i), want2[i] + 0.5, 0);
    CHECK_NEAR(sg_tensor_get(d, 0), 0.5, 0);
    /* dense + sparse = index-add in place (g is owned now) */
    sg_tensor *g4 = coo_rows(ctx, 4, 2, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    CHECK(sg__accum_grad(x, g4, false) == SG_OK);
    CHECK(sg_tensor_grad(x) == g);
    CHECK_NEAR(sg_tensor_get(g, 4), 0.5 + 4, 0);
    CHECK_NEAR(sg_tensor_get(g, 5), 0.5 + 6, 0);
    CHECK(sg_grads_count(ctx) == 1);
    sg_ctx_free(ctx);
}

/* A dense gradient borrowed from elsewhere is copied before it is added to (copy on write). */
TEST(borrowed_dense_gradient_is_not_modified)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *x = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){3}), 1);
    sg_tensor *y = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){3}), 1);
    sg_tensor *shared = sg__tmp_like(x, false);
    sg_tensor_fill(shared, 1.0);
    CHECK(sg__accum_grad(x, shared, false) == SG_OK);
    CHECK(sg__accum_grad(y, shared, false) == SG_OK);
    CHECK(sg__accum_grad(x, shared, false) == SG_OK);
    CHECK_NEAR(sg_tensor_get(sg_tensor_grad(x), 0), 2.0, 0);
    CHECK_NEAR(sg_tensor_get(sg_tensor_grad(y), 0), 1.0, 0);
    CHECK_NEAR(sg_tensor_get(shared, 0), 1.0, 0);
    sg_ctx_free(ctx);
}

/* ---- one training step of a small MLP, through the public API */
static int mlp_step(sg_ctx *ctx, sg_tensor **p, sg_tensor *X, sg_tensor *Y)
{
    sg_tensor *h = sg_tanh(sg_add(sg_matmul(X, p[0]), p[1]));
    sg_tensor *loss = sg_cross_entropy(sg_matmul(h, p[2]), Y);
    int rc = loss ? sg_backward(loss) : sg_ctx_status(ctx);
    if (!rc) {
        /* validate every gradient before writing any parameter */
        for (int64_t i = 0; i < sg_grads_count(ctx); i++)
            if (!sg_tensor_grad(sg_grads_param(ctx, i))) rc = SG_ERR_STATE;
        for (int64_t i = 0; !rc && i < sg_grads_count(ctx); i++) {
            sg_tensor *q = sg_grads_param(ctx, i);
            double *w = sg_tensor_f64(q);
            for (int64_t j = 0; j < sg_tensor_numel(q); j++) w[j] -= 0.1 * sg_tensor_get(sg_tensor_grad(q), j);
        }
    }
    sg_tape_reset(ctx);
    return rc;
}

static int mlp_setup(sg_ctx *ctx, sg_tensor **p, sg_tensor **X, sg_tensor **Y)
{
    *X = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){8, 3});
    *Y = sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){8}, (int64_t[]){0, 1, 2, 0, 1, 2, 0, 1});
    p[0] = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){3, 5});
    p[1] = sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){5});
    p[2] = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){5, 3});
    if (!*X || !*Y || !p[0] || !p[1] || !p[2]) return SG_ERR_NOMEM;
    for (int i = 0; i < 3; i++) {
        sg_tensor_fill_uniform(p[i], -1, 1);
        sg_tensor_requires_grad(p[i], 1);
    }
    sg_tensor_fill_uniform(*X, -1, 1);
    return SG_OK;
}

/* Fails the N-th allocation for every N a step makes: an error, never a crash or a leak,
 * and parameters unchanged when the step failed. */
TEST(allocation_failure_at_every_point_of_a_step)
{
    tu_counting c = {0, 0};
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {tu_count_alloc, tu_count_free, &c}, .threads = 1});
    sg_tensor *p[3], *X, *Y;
    CHECK(mlp_setup(ctx, p, &X, &Y) == SG_OK);
    long setup_calls = c.calls;
    CHECK(mlp_step(ctx, p, X, Y) == SG_OK);
    long total = c.calls;
    sg_ctx_free(ctx);
    int failures_seen = 0;
    for (long n = setup_calls + 1; n <= total; n++) {
        tu_counting f = {0, n};
        sg_ctx *fc = sg_ctx_new(&(sg_ctx_opts){.allocator = {tu_count_alloc, tu_count_free, &f}, .threads = 1});
        CHECK(fc != NULL);
        if (!fc) continue;
        CHECK(mlp_setup(fc, p, &X, &Y) == SG_OK);
        double before[15];
        for (int j = 0; j < 15; j++) before[j] = sg_tensor_get(p[0], j);
        int rc = mlp_step(fc, p, X, Y);
        if (rc) {
            failures_seen++;
            CHECK(rc == SG_ERR_NOMEM);
            CHECK(sg_ctx_status(fc) == SG_ERR_NOMEM);
            for (int j = 0; j < 15; j++) CHECK(sg_tensor_get(p[0], j) == before[j]);
        }
        sg_ctx_free(fc);
    }
    CHECK(failures_seen > 0);
}

TEST(huge_shape_with_a_zero_dim_is_rejected)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t big = (int64_t)1 << 62;
    CHECK(sg_tensor_new(ctx, SG_F32, 3, (int64_t[]){0, big, big}) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    sg_ctx_free(ctx);
}

/* A reshape target whose dims multiply past INT64_MAX is SG_ERR_SHAPE (before, the
 * product overflowed, undefined behaviour that UBSan reports, and wrapped to a count that
 * could match: 4 * (2^62 + 1) wraps to 4, so (2^62 + 1, 4) was accepted as a view of 4
 * elements). Dims whose product fits, or that hold a 0, are unaffected. */
TEST(reshape_refuses_a_target_whose_size_overflows)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *t = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){4}, (double[]){0, 1, 2, 3});
    const int64_t big = ((int64_t)1 << 62) + 1;
    CHECK(sg_reshape(t, 2, (int64_t[]){big, 4}) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    sg_ctx_clear_error(ctx);
    CHECK(sg_reshape(t, 3, (int64_t[]){INT64_MAX, 2, -1}) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    sg_ctx_clear_error(ctx);
    sg_tensor *r = sg_reshape(t, 3, (int64_t[]){2, -1, 1});
    CHECK(r && sg_tensor_dim(r, 1) == 2 && sg_tensor_get(r, 3) == 3);
    sg_tensor *e = sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){0});
    CHECK(sg_reshape(e, 3, (int64_t[]){0, (int64_t)1 << 20, (int64_t)1 << 20}) != NULL);
    sg_ctx_free(ctx);
}

/* Many sparse accumulations: the result equals the dense sum, entries are appended (not
 * re-copied each time: buffers grow geometrically), and the unique-row bound compacts. */
TEST(repeated_sparse_accumulation)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    enum { V = 100000, D = 2, K = 50, N = 100 };
    sg_tensor *x = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){V, D}), 1);
    static double want[V * D];
    memset(want, 0, sizeof want);
    int64_t rows[N];
    double vals[N * D];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) {
            rows[i] = (int64_t)((k * 7 + i * 13) % 10) * 997;
            vals[2 * i] = k + 1;
            vals[2 * i + 1] = -(double)i;
            want[rows[i] * D] += vals[2 * i];
            want[rows[i] * D + 1] += vals[2 * i + 1];
        }
        CHECK(sg__accum_grad(x, coo_rows(ctx, V, D, N, rows, vals), false) == SG_OK);
    }
    sg_tensor *g = sg_tensor_grad(x);
    CHECK(g->layout == SG_COO && g->nnz == K * N); /* no bound known: nnz <= rows rule only */
    CHECK(g->nnz_cap >= g->nnz);
    sg_tensor *d = sg__densify(g);
    int bad = 0;
    for (int i = 0; i < V * D; i++) bad += sg_tensor_get(d, i) != want[i];
    CHECK(bad == 0);
    /* once a coalesce has counted the unique rows (10), 8x that many entries compacts */
    sg_tensor *c = sg_coalesce(g);
    CHECK(c && c->nnz == 10);
    sg_tape_reset(ctx);
    c = sg_coalesce(coo_rows(ctx, V, D, N, rows, vals));
    CHECK(sg__accum_grad(x, c, false) == SG_OK);
    for (int k = 0; k < 8; k++) CHECK(sg__accum_grad(x, coo_rows(ctx, V, D, N, rows, vals), false) == SG_OK);
    g = sg_tensor_grad(x);
    CHECK(g->nnz <= 10 + N);
    memset(want, 0, sizeof want);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++) want[rows[i] * D + j] += 9 * vals[i * D + j];
    d = sg__densify(g);
    bad = 0;
    for (int i = 0; i < V * D; i++) bad += fabs(sg_tensor_get(d, i) - want[i]) > 1e-9;
    CHECK(bad == 0);
    sg_ctx_free(ctx);
}

/* Deferred work runs after every node of the traversal, and not at all when it fails;
 * each item is checked (a pass with fused_checking set) before any item runs. */
static int deferred_runs, deferred_checks;
static double seen_by_reader;
static int bump_table(sg_node *n, sg_tensor *arg)
{
    (void)arg;
    if (n->out->ctx->fused_checking) {
        deferred_checks++;
        return SG_OK;
    }
    CHECK(deferred_checks == 1);
    ((double *)n->in[0]->data)[0] += 100;
    deferred_runs++;
    return SG_OK;
}
static int writer_backward(sg_node *n, sg_tensor *gout)
{
    return sg__defer(n, bump_table, gout);
}
static int reader_backward(sg_node *n, sg_tensor *gout)
{
    (void)gout;
    seen_by_reader = ((double *)n->in[0]->data)[0];
    return n->iarg[0] ? SG_ERR_VALUE : SG_OK;
}
static int join_backward(sg_node *n, sg_tensor *gout)
{
    int rc = sg__accum_grad(n->in[0], gout, false);
    return rc ? rc : sg__accum_grad(n->in[1], gout, false);
}
static sg_tensor *test_op(sg_tensor *x, sg__backward_fn bw, int fail)
{
    sg_tensor *y = sg__tmp_like(x, true);
    sg_node *n = sg__node_new(x->ctx, bw, "test", y, 1, &x);
    n->iarg[0] = fail;
    return y;
}

TEST(deferred_work_runs_after_the_traversal)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *w = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){1}), 1);
    for (int fail = 0; fail < 2; fail++) {
        deferred_runs = deferred_checks = 0;
        sg_tensor_fill(w, 1.0);
        /* the writer's node comes later, so its backward runs before the reader's */
        sg_tensor *r = test_op(w, reader_backward, fail);
        sg_tensor *wr = test_op(w, writer_backward, 0);
        sg_tensor *seed = sg__tmp_like(w, false);
        sg_tensor_fill(seed, 1);
        sg_tensor *in2[2] = {r, wr};
        sg_tensor *out = sg__tmp_like(w, true);
        sg__node_new(ctx, join_backward, "join", out, 2, in2);
        int rc = sg_backward_grad(out, seed);
        CHECK(rc == (fail ? SG_ERR_VALUE : SG_OK));
        CHECK_NEAR(seen_by_reader, 1.0, 0);
        CHECK(deferred_runs == (fail ? 0 : 1));
        CHECK(deferred_checks == (fail ? 0 : 1));
        CHECK_NEAR(sg_tensor_get(w, 0), fail ? 1.0 : 101.0, 0);
        sg_tape_reset(ctx);
    }
    sg_ctx_free(ctx);
}

TEST(wrapped_memory_is_a_parameter_that_the_library_never_frees)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    double *buf = malloc(6 * sizeof *buf);
    for (int i = 0; i < 6; i++) buf[i] = i + 1;
    sg_tensor *w = sg_tensor_wrap(ctx, SG_F64, 2, (int64_t[]){2, 3}, buf);
    CHECK(w && sg_tensor_data(w) == buf && sg_tensor_numel(w) == 6);
    CHECK(sg_tensor_requires_grad(w, 1) == w);
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){.lr = 0.5});
    CHECK_STATUS(ctx, sg_optim_add_param(opt, w), SG_OK);
    /* loss = sum(w * w): gradient 2 w, so one SGD step at lr 0.5 leaves w - w = 0 */
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(w, w))), SG_OK);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    sg_tape_reset(ctx);
    for (int i = 0; i < 6; i++) CHECK_NEAR(buf[i], 0.0, 0);
    sg_tensor_free(w); /* unregisters it and frees the header only */
    CHECK(sg_optim_param_count(opt) == 0);
    sg_optim_free(opt);
    buf[5] = 7; /* still ours: ASan would report a use after free here */
    CHECK(buf[5] == 7);
    /* a wrapped tensor left to sg_ctx_free: the context frees the header, not buf */
    CHECK(sg_tensor_wrap(ctx, SG_F64, 1, (int64_t[]){6}, buf) != NULL);
    sg_ctx_free(ctx);
    free(buf);
}

TEST(wrap_refuses_bad_memory_and_changes_nothing)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t buf[4] = {0};
    size_t before = sg_ctx_mem_stats(ctx).bytes_in_use;
    CHECK(!sg_tensor_wrap(ctx, SG_F64, 1, (int64_t[]){2}, (char *)buf + 4));
    CHECK(sg_ctx_status(ctx) == SG_ERR_ARG && strstr(sg_ctx_message(ctx), "aligned"));
    CHECK(!sg_tensor_wrap(ctx, SG_F32, 1, (int64_t[]){2}, (char *)buf + 2));
    CHECK(sg_ctx_status(ctx) == SG_ERR_ARG);
    CHECK(!sg_tensor_wrap(ctx, SG_F32, 1, (int64_t[]){2}, NULL));
    CHECK(sg_ctx_status(ctx) == SG_ERR_NULL);
    CHECK(!sg_tensor_wrap(ctx, SG_F32, 1, (int64_t[]){-1}, buf));
    CHECK(sg_ctx_status(ctx) == SG_ERR_SHAPE);
    CHECK(!sg_tensor_wrap(NULL, SG_F32, 1, (int64_t[]){2}, buf));
    CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == before);
    /* an f32 tensor needs only 4-byte alignment; integers may be wrapped (no grad) */
    sg_tensor *t = sg_tensor_wrap(ctx, SG_F32, 1, (int64_t[]){2}, (char *)buf + 4);
    CHECK(t && sg_tensor_get(t, 0) == 0);
    sg_tensor *i = sg_tensor_wrap(ctx, SG_I64, 1, (int64_t[]){4}, buf);
    CHECK(i && !sg_tensor_requires_grad(i, 1) && sg_ctx_status(ctx) == SG_ERR_DTYPE);
    /* wrapping 1 MiB allocates only a header, and freeing it gives back exactly that */
    float *big = calloc(1 << 18, sizeof *big);
    size_t s0 = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_tensor *b = sg_tensor_wrap(ctx, SG_F32, 1, (int64_t[]){1 << 18}, big);
    size_t s1 = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_tensor_free(b);
    CHECK(s1 > s0 && s1 - s0 < 4096);
    CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == s0);
    free(big);
    sg_ctx_free(ctx);
}

/* The version string against the project version in CMakeLists.txt, read from the file. */
TEST(version_matches_the_cmake_project)
{
    FILE *f = fopen(SG_SOURCE_DIR "/CMakeLists.txt", "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[512], want[64] = "";
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "project(sgrad VERSION %63[0-9.]", want) == 1) break;
    fclose(f);
    CHECK(want[0] != 0);
    CHECK(strcmp(sg_version(), want) == 0);
}

TEST_MAIN()
