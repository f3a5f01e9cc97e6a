/* Lifetimes and limits: freeing parameters, optimizers and the context in every order
 * (no use-after-free, no leak: run under ASan with leak detection in the sanitizer build,
 * and the allocator's byte count checked in both builds), a tape tensor read after
 * sg_tape_reset reported by ASan (a forked child must die with the report), a request for
 * 100000 threads clamped so a parallel kernel runs, and the opt-in NaN/Inf guard for every
 * optimizer kind, on dense, COO and fused gradients: a refused step changes no byte of
 * the parameters or state and no step count. */
#define _POSIX_C_SOURCE 200809L
#include "optim/optim.h"
#include "testutil.h"

#include <float.h>

#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- the six optimizer kinds */

static sg_optim *mk_sgd(sg_ctx *c) { return sg_optim_sgd(c, &(sg_sgd_opts){.lr = 0.1}); }
static sg_optim *mk_sgd_lazy(sg_ctx *c)
{
    return sg_optim_sgd(c, &(sg_sgd_opts){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
}
static sg_optim *mk_adagrad(sg_ctx *c) { return sg_optim_adagrad(c, NULL); }
static sg_optim *mk_rowwise(sg_ctx *c) { return sg_optim_rowwise_adagrad(c, NULL); }
static sg_optim *mk_adam(sg_ctx *c) { return sg_optim_adam(c, NULL); }
static sg_optim *mk_lazy_adam(sg_ctx *c) { return sg_optim_lazy_adam(c, NULL); }

typedef sg_optim *(*mk_fn)(sg_ctx *);
static const struct {
    const char *name;
    mk_fn mk;
} kinds[] = {{"sgd", mk_sgd},         {"sgd momentum+wd", mk_sgd_lazy}, {"adagrad", mk_adagrad},
             {"rowwise", mk_rowwise}, {"adam", mk_adam},                {"lazy_adam", mk_lazy_adam}};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

static sg_tensor *param(sg_ctx *ctx, int64_t rows, int64_t width, double seed)
{
    sg_tensor *t = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){rows, width});
    double *d = sg_tensor_f64(t);
    for (int64_t i = 0; i < rows * width; i++) d[i] = seed + 0.01 * (double)i;
    return sg_tensor_requires_grad(t, 1);
}

/* Gives W (rows, width) the dense gradient g(i) = 0.1 + 0.001 i, element `bad` (if >= 0)
 * replaced by `bad_value`. */
static int give_dense(sg_tensor *W, int64_t bad, double bad_value)
{
    sg_ctx *ctx = sg_tensor_ctx(W);
    sg_tensor *g = sg_tensor_new_tmp(ctx, SG_F64, 2, sg_tensor_shape(W));
    double *d = sg_tensor_f64(g);
    for (int64_t i = 0; i < sg_tensor_numel(W); i++) d[i] = 0.1 + 0.001 * (double)i;
    if (bad >= 0) d[bad] = bad_value;
    return sg_backward_grad(W, g);
}

/* Gives W a COO gradient through an embedding lookup of rows {1, 3, 1}, output gradient
 * element `bad` (if >= 0) replaced by bad_value. */
static int give_rows(sg_tensor *W, int64_t bad, double bad_value, sg_optim *fused)
{
    sg_ctx *ctx = sg_tensor_ctx(W);
    int64_t n = 3, D = sg_tensor_dim(W, 1);
    sg_tensor *idx = sg_tensor_new_tmp(ctx, SG_I64, 1, &n); /* the gradient borrows it */
    memcpy(sg_tensor_data(idx), (int64_t[]){1, 3, 1}, sizeof(int64_t[3]));
    sg_tensor *e = sg_embedding(W, idx, &(sg_embedding_opts){.padding_idx = -1, .fused = fused});
    sg_tensor *g = sg_tensor_new_tmp(ctx, SG_F64, 2, (int64_t[]){n, D});
    double *d = sg_tensor_f64(g);
    for (int64_t i = 0; i < n * D; i++) d[i] = 0.2 - 0.003 * (double)i;
    if (bad >= 0) d[bad] = bad_value;
    return e ? sg_backward_grad(e, g) : sg_ctx_status(ctx);
}

/* ---- lifetimes */

/* Freeing a registered parameter unregisters it: the optimizer lists the others in order,
 * and its steps on them equal those of an optimizer that never had it. */
TEST(freeing_a_parameter_unregisters_it)
{
    for (int k = 0; k < N_KINDS; k++) {
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
        sg_ctx *ref = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
        sg_optim *opt = kinds[k].mk(ctx), *opt_ref = kinds[k].mk(ref);
        sg_tensor *a = param(ctx, 5, 3, 0.5), *b = param(ctx, 4, 2, -0.5), *c = param(ctx, 6, 3, 1.5);
        sg_tensor *ra = param(ref, 5, 3, 0.5), *rc = param(ref, 6, 3, 1.5);
        CHECK_STATUS(ctx, sg_optim_add_param(opt, a), SG_OK);
        CHECK_STATUS(ctx, sg_optim_add_param(opt, b), SG_OK);
        CHECK_STATUS(ctx, sg_optim_add_param(opt, c), SG_OK);
        sg_optim_add_param(opt_ref, ra);
        sg_optim_add_param(opt_ref, rc);
        /* b is freed while its gradient is in the store: the step skips it */
        CHECK_STATUS(ctx, give_dense(b, -1, 0), SG_OK);
        sg_tensor_free(b);
        CHECK(sg_optim_param_count(opt) == 2);
        CHECK(sg_optim_param(opt, 0) == a && sg_optim_param(opt, 1) == c);
        CHECK(sg_optim_state_count(opt, c) >= 1);
        CHECK(sg_grads_count(ctx) == 0);
        for (int step = 0; step < 3; step++) {
            CHECK_STATUS(ctx, give_dense(a, -1, 0), SG_OK);
            CHECK_STATUS(ctx, give_rows(c, -1, 0, NULL), SG_OK);
            CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
            give_dense(ra, -1, 0);
            give_rows(rc, -1, 0, NULL);
            sg_optim_step(opt_ref);
            sg_tape_reset(ctx);
            sg_tape_reset(ref);
        }
        CHECK(memcmp(sg_tensor_data(a), sg_tensor_data(ra), 15 * sizeof(double)) == 0);
        CHECK(memcmp(sg_tensor_data(c), sg_tensor_data(rc), 18 * sizeof(double)) == 0);
        /* a tensor freed from the optimizer can be replaced by a new one */
        sg_tensor *d = param(ctx, 2, 2, 0);
        CHECK_STATUS(ctx, sg_optim_add_param(opt, d), SG_OK);
        CHECK(sg_optim_param(opt, 2) == d);
        sg_tensor_free(a);
        CHECK(sg_optim_param(opt, 0) == c && sg_optim_param(opt, 1) == d);
        if (tu_failures) fprintf(stderr, "  (kind %s)\n", kinds[k].name);
        sg_optim_free(opt);
        sg_ctx_free(ctx);
        sg_optim_free(opt_ref);
        sg_ctx_free(ref);
    }
}

/* Every order of freeing a parameter, its optimizer and the context, with a gradient in
 * the store and after steps (so every kind's state exists): nothing is used after it is
 * freed (ASan) and every byte comes back (the allocator's count; LSan). */
/* An optimizer's state tensor and a word-vector table are their owners': sg_tensor_free
 * refuses them with SG_ERR_STATE and frees nothing (before, it freed them under their
 * owner, a use-after-free at the next step). */
TEST(freeing_an_owned_tensor_is_refused)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    sg_tensor *W = param(ctx, 4, 3, 0.5);
    sg_optim *opt = mk_adam(ctx);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    CHECK_STATUS(ctx, give_dense(W, -1, 0), SG_OK);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    sg_tensor *m = sg_optim_state(opt, W, 0, NULL);
    CHECK(m != NULL);
    const sg_mem_stats before = sg_ctx_mem_stats(ctx);
    sg_tensor_free(m);
    CHECK(sg_ctx_status(ctx) == SG_ERR_STATE && strstr(sg_ctx_message(ctx), "optimizer"));
    CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == before.bytes_in_use);
    sg_ctx_clear_error(ctx);
    sg_tape_reset(ctx);
    CHECK_STATUS(ctx, give_dense(W, -1, 0), SG_OK);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK); /* the state is still there to use */
    CHECK(sg_optim_state(opt, W, 0, NULL) == m);

    const char *path = tu_tmp_path("owned_wordvec");
    const char *words[2] = {"a", "b"};
    sg_tensor *table = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){2, 3});
    CHECK_STATUS(ctx, sg_wordvec_write(path, table, words, 0), SG_OK);
    sg_wordvec *wv = sg_wordvec_read(ctx, path, 0);
    CHECK(wv != NULL);
    sg_tensor_free(sg_wordvec_vectors(wv));
    CHECK(sg_ctx_status(ctx) == SG_ERR_STATE);
    CHECK(sg_wordvec_vectors(wv) && sg_tensor_f32(sg_wordvec_vectors(wv))[0] == 0.0f);
    sg_ctx_clear_error(ctx);
    sg_wordvec_free(wv);
    remove(path);
    sg_optim_free(opt); /* frees its state itself */
    sg_ctx_free(ctx);
}

TEST(every_order_of_freeing_is_safe)
{
    enum { PARAM_OPTIM_CTX, OPTIM_PARAM_CTX, PARAM_CTX, OPTIM_CTX, CTX, TWO_OPTIMS_CTX, N_ORDERS };
    for (int k = 0; k < N_KINDS; k++) {
        for (int order = 0; order < N_ORDERS; order++) {
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
            sg_optim *opt = kinds[k].mk(ctx);
            sg_optim *opt2 = order == TWO_OPTIMS_CTX ? kinds[(k + 1) % N_KINDS].mk(ctx) : NULL;
            sg_tensor *w = param(ctx, 6, 4, 0.25), *w2 = param(ctx, 3, 4, 0.75);
            sg_optim_add_param(opt, w);
            if (opt2) sg_optim_add_param(opt2, w2);
            for (int step = 0; step < 2; step++) {
                CHECK_STATUS(ctx, give_rows(w, -1, 0, NULL), SG_OK);
                CHECK_STATUS(ctx, give_dense(w2, -1, 0), SG_OK);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
                if (opt2) CHECK_STATUS(ctx, sg_optim_step(opt2), SG_OK);
                if (step == 0) sg_tape_reset(ctx);
            }
            switch (order) {
            case PARAM_OPTIM_CTX:
                sg_tensor_free(w);
                CHECK(sg_optim_param_count(opt) == 0);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK); /* nothing left to step */
                sg_optim_free(opt);
                sg_tensor_free(w2);
                break;
            case OPTIM_PARAM_CTX:
                sg_optim_free(opt);
                CHECK(w->optim_state == NULL);
                sg_tensor_free(w);
                break;
            case PARAM_CTX:
                sg_tensor_free(w);
                CHECK(sg_optim_param_count(opt) == 0);
                break;
            case OPTIM_CTX:
                sg_optim_free(opt);
                CHECK(w->optim_state == NULL && w2->optim_state == NULL);
                break;
            default:
                break;
            }
            sg_ctx_free(ctx);
        }
        if (tu_failures) {
            fprintf(stderr, "  (kind %s)\n", kinds[k].name);
            return;
        }
    }
}

/* ---- freeing what the tape still uses */

static sg_tensor *rows_131(sg_ctx *ctx) /* a persistent index tensor, so it can be freed */
{
    return sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){3}, (int64_t[]){1, 3, 1});
}

static sg_tensor *lookup(sg_tensor *W, sg_tensor *idx, sg_optim *fused)
{
    return sg_embedding(W, idx, &(sg_embedding_opts){.padding_idx = -1, .fused = fused});
}

/* sg_optim_free between a fused op and its backward: the backward still applies the
 * update (W ends as in a run that freed the optimizer after the step; for SGD, W's rows
 * minus lr times how often the lookup names them), and the optimizer goes at the reset.
 * Before, the backward called the freed optimizer (ASan: heap-use-after-free). */
TEST(an_optimizer_freed_before_its_fused_backward_lives_until_the_reset)
{
    for (int k = 0; k < N_KINDS; k++) {
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
        sg_ctx *ref = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
        sg_tensor *W = param(ctx, 5, 3, 0.5), *rW = param(ref, 5, 3, 0.5);
        sg_optim *opt = kinds[k].mk(ctx), *ropt = kinds[k].mk(ref);
        sg_optim_add_param(opt, W);
        sg_optim_add_param(ropt, rW);
        sg_tensor *loss = sg_sum(lookup(W, rows_131(ctx), opt));
        sg_tensor *rloss = sg_sum(lookup(rW, rows_131(ref), ropt));
        sg_optim_free(opt);
        CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
        CHECK_STATUS(ref, sg_backward(rloss), SG_OK);
        CHECK(memcmp(sg_tensor_data(W), sg_tensor_data(rW), 15 * sizeof(double)) == 0);
        if (k == 0) {
            const double *w = sg_tensor_f64(W);
            const double times[5] = {0, 2, 0, 1, 0};
            for (int i = 0; i < 15; i++) CHECK_NEAR(w[i], 0.5 + 0.01 * i - 0.1 * times[i / 3], 1e-12);
        }
        CHECK(W->optim_state != NULL); /* attached until the reset */
        sg_tape_reset(ctx);
        CHECK(W->optim_state == NULL && ctx->optims_released == NULL);
        CHECK_STATUS(ctx, sg_optim_add_param(kinds[k].mk(ctx), W), SG_OK);
        if (tu_failures) fprintf(stderr, "  (kind %s)\n", kinds[k].name);
        sg_ctx_free(ctx);
        sg_ctx_free(ref);
    }
    /* freed mid-step and never reset: the context's end frees it (LSan) */
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    sg_tensor *W = param(ctx, 5, 3, 0.5);
    sg_optim *opt = mk_adam(ctx);
    sg_optim_add_param(opt, W);
    CHECK(lookup(W, rows_131(ctx), opt) != NULL);
    sg_optim_free(opt);
    sg_tensor_free(W);
    sg_ctx_free(ctx);
}

/* sg_tensor_free of a table between its lookup (plain or fused) and the backward: the
 * table leaves its optimizer and gets no gradient and no update, while the other operand
 * still gets its gradient, the table's rows as the lookup read them; its memory goes at
 * the reset. Before, the backward read the freed table (ASan: heap-use-after-free). */
TEST(a_table_freed_before_the_backward_is_released_at_the_reset)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    sg_optim *opt = mk_sgd(ctx);
    for (int fused = 0; fused < 2; fused++) {
        sg_tensor *W = param(ctx, 5, 3, 0.5), *X = param(ctx, 3, 3, -1.0);
        sg_optim_add_param(opt, W);
        sg_tensor *loss = sg_sum(sg_mul(lookup(W, rows_131(ctx), fused ? opt : NULL), X));
        sg_tensor_free(W);
        CHECK(sg_optim_param_count(opt) == 0);
        CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
        CHECK(sg_grads_count(ctx) == 1 && sg_grads_param(ctx, 0) == X);
        const int64_t rows[3] = {1, 3, 1};
        for (int i = 0; i < 9; i++)
            CHECK(sg_tensor_get(sg_tensor_grad(X), i) == 0.5 + 0.01 * (double)(rows[i / 3] * 3 + i % 3));
        CHECK(ctx->released != NULL);
        sg_tape_reset(ctx);
        CHECK(ctx->released == NULL);
        sg_tensor_free(X);
        if (tu_failures) fprintf(stderr, "  (fused %d)\n", fused);
    }
    sg_ctx_free(ctx);
}

/* sg_tensor_free of the index tensor between the lookup and the backward, given to the
 * lookup itself or through a reshape (indices need no gradient, so no node records the
 * view and only the view is on the tape): W's gradient still names rows 1, 3, 1 (row 1
 * twice) and the step applies it. Before, the backward or the step read the freed
 * indices (ASan: heap-use-after-free). */
TEST(an_index_tensor_freed_before_the_backward_is_released_at_the_reset)
{
    for (int view = 0; view < 2; view++) {
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
        sg_tensor *W = param(ctx, 5, 3, 0.5);
        sg_optim *opt = mk_sgd(ctx);
        sg_optim_add_param(opt, W);
        sg_tensor *idx = rows_131(ctx);
        sg_tensor *looked = view ? sg_reshape(idx, 1, (int64_t[]){3}) : idx;
        CHECK(looked != NULL);
        sg_tensor *loss = sg_sum(lookup(W, looked, NULL));
        sg_tensor_free(idx);
        CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        const double times[5] = {0, 2, 0, 1, 0};
        for (int i = 0; i < 15; i++)
            CHECK_NEAR(sg_tensor_f64(W)[i], 0.5 + 0.01 * i - 0.1 * times[i / 3], 1e-12);
        sg_tape_reset(ctx);
        CHECK(ctx->released == NULL);
        sg_ctx_free(ctx);
    }
}

/* After sg_optim_free and freeing its parameters, the context holds as many bytes as
 * before the optimizer was made (besides the arena and the gradient store, which it
 * keeps for later steps). */
TEST(freeing_returns_every_byte)
{
    for (int k = 0; k < N_KINDS; k++) {
        for (int param_first = 0; param_first < 2; param_first++) {
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
            sg_tensor *warm = param(ctx, 6, 4, 0.0);
            give_rows(warm, -1, 0, NULL); /* grows the arena and the store once */
            sg_tape_reset(ctx);
            sg_tensor_free(warm);
            size_t before = sg_ctx_mem_stats(ctx).bytes_in_use;
            sg_optim *opt = kinds[k].mk(ctx);
            sg_tensor *w = param(ctx, 6, 4, 0.25);
            sg_optim_add_param(opt, w);
            give_rows(w, -1, 0, NULL);
            sg_optim_step(opt);
            sg_tape_reset(ctx);
            if (param_first) {
                sg_tensor_free(w);
                sg_optim_free(opt);
            } else {
                sg_optim_free(opt);
                sg_tensor_free(w);
            }
            CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == before);
            sg_ctx_free(ctx);
        }
        if (tu_failures) fprintf(stderr, "  (kind %s)\n", kinds[k].name);
    }
}

/* ---- a tape tensor used after sg_tape_reset */

#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif

/* A child reads a tape tensor's element before (must live) and after sg_tape_reset (must
 * die with ASan's use-after-poison report on its stderr). */
TEST(tape_tensor_read_after_reset_is_reported_by_asan)
{
#ifndef TU_ASAN
    TU_SKIP("needs the AddressSanitizer build (-DSGRAD_SANITIZE=ON)");
#else
    for (int after_reset = 0; after_reset < 2; after_reset++) {
        int fds[2];
        CHECK(pipe(fds) == 0);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 2);
            close(fds[0]);
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
            sg_tensor *t = sg_tensor_new_tmp(ctx, SG_F32, 1, (int64_t[]){16});
            float *d = sg_tensor_f32(t);
            if (after_reset) sg_tape_reset(ctx);
            volatile float x = d[3];
            (void)x;
            _exit(0);
        }
        close(fds[1]);
        char buf[8192];
        size_t len = 0;
        ssize_t got;
        while ((got = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)got;
        buf[len] = '\0';
        close(fds[0]);
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (after_reset) {
            CHECK(!clean);
            CHECK(strstr(buf, "use-after-poison") != NULL);
        } else {
            CHECK(clean);
        }
    }
#endif
}

/* ---- threads */

static void double_items(void *ud, int64_t lo, int64_t hi)
{
    int64_t *out = ud;
    for (int64_t i = lo; i < hi; i++) out[i] = 2 * i;
}

/* A request for 100000 threads is clamped (the OpenMP runtime would otherwise fail to
 * create them and exit) and parallel kernels run: a loop of one item per chunk (as many
 * chunks as threads asked for, so every thread is wanted), and a dense index-add of many
 * rows against a naive loop. */
TEST(thousands_of_threads_are_clamped)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 100000});
    CHECK(ctx != NULL);
    int th = sg_ctx_threads(ctx);
#ifdef _OPENMP
    int cap = 4 * omp_get_num_procs();
    if (cap < 64) cap = 64;
    if (omp_get_thread_limit() < cap) cap = omp_get_thread_limit();
    CHECK(th == cap);
#else
    CHECK(th == 1);
#endif
    sg_ctx_set_threads(ctx, 1 << 30);
    CHECK(sg_ctx_threads(ctx) == th);
    sg_ctx_set_threads(ctx, 100000);
    const int64_t n_items = 100000;
    int64_t *items = calloc((size_t)n_items, sizeof *items);
    sg__parallel_for(ctx, n_items, 1, double_items, items);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n_items; i++) wrong += items[i] != 2 * i;
    CHECK(wrong == 0);
    free(items);
    const int64_t V = 1 << 16, D = 4, nnz = 1 << 17;
    sg_tensor *dst = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){V, D});
    int64_t *idx = malloc((size_t)nnz * sizeof *idx);
    double *val = malloc((size_t)(nnz * D) * sizeof *val), *want = calloc((size_t)(V * D), sizeof *want);
    for (int64_t e = 0; e < nnz; e++) idx[e] = (int64_t)(tu_rand() % (uint64_t)V);
    for (int64_t i = 0; i < nnz * D; i++) val[i] = tu_rand_unit();
    for (int64_t e = 0; e < nnz; e++)
        for (int64_t j = 0; j < D; j++) want[idx[e] * D + j] += val[e * D + j];
    sg_tensor *src = sg_coo_new(ctx, SG_F64, 2, (int64_t[]){V, D}, 1, nnz, idx, val);
    CHECK(sg__parallel_threads(ctx, V * D, SG__GRAIN) > 1 || th == 1);
    CHECK_STATUS(ctx, sg_index_add_(dst, src), SG_OK);
    int64_t bad = 0;
    for (int64_t i = 0; i < V * D; i++) bad += fabs(sg_tensor_f64(dst)[i] - want[i]) > 1e-12;
    CHECK(bad == 0);
    free(idx);
    free(val);
    free(want);
    sg_ctx_free(ctx);
}

/* ---- the NaN/Inf guard */

/* Every byte an optimizer step could change: parameters, state tensors, step counts. */
typedef struct {
    unsigned char *bytes;
    size_t len;
} snapshot;

static void snap_add(snapshot *s, const void *p, size_t n)
{
    s->bytes = realloc(s->bytes, s->len + n);
    memcpy(s->bytes + s->len, p, n);
    s->len += n;
}

static snapshot snap(sg_optim *opt)
{
    snapshot s = {NULL, 0};
    int64_t t = sg_optim_steps(opt);
    snap_add(&s, &t, sizeof t);
    for (int64_t i = 0; i < sg_optim_param_count(opt); i++) {
        sg_tensor *p = sg_optim_param(opt, i);
        snap_add(&s, sg_tensor_data(p), (size_t)sg_tensor_numel(p) * sg_dtype_size(sg_tensor_dtype(p)));
        for (int k = 0; k < sg_optim_state_count(opt, p); k++) {
            sg_tensor *st = sg_optim_state(opt, p, k, NULL);
            snap_add(&s, sg_tensor_data(st), (size_t)sg_tensor_numel(st) * sg_dtype_size(sg_tensor_dtype(st)));
        }
    }
    return s;
}

static bool snap_same(snapshot a, snapshot b)
{
    bool same = a.len == b.len && memcmp(a.bytes, b.bytes, a.len) == 0;
    free(a.bytes);
    free(b.bytes);
    return same;
}

static bool all_finite(sg_tensor *t)
{
    for (int64_t i = 0; i < sg_tensor_numel(t); i++)
        if (!isfinite(sg_tensor_get(t, i))) return false;
    return true;
}

/* A backward that fails part-way (here an allocation, at each point in turn) leaves no
 * gradient on the tensors it had not reached: not a partial one, and not a sum's uniform
 * gradient (one stored value), which would read as a full tensor. */
TEST(failed_backward_leaves_no_gradient_on_unreached_tensors)
{
    int failures = 0, done = 0;
    for (long k = 1; k <= 40 && !done; k++) {
        tu_counting c = {0, 0};
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {tu_count_alloc, tu_count_free, &c}, .threads = 1});
        const int64_t n = 50000;
        sg_tensor *a = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, &n), 1);
        sg_tensor *b = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, &n), 1);
        CHECK(sg_tensor_fill(a, 0.5) == SG_OK && sg_tensor_fill(b, -0.25) == SG_OK);
        sg_tensor *ea = sg_exp(a), *eb = sg_exp(b);
        sg_tensor *loss = sg_sum(sg_add(ea, eb));
        CHECK(loss != NULL);
        c.fail_at = c.calls + k; /* the k-th allocation of the backward fails */
        int rc = sg_backward(loss);
        if (rc == SG_OK) {
            done = 1;
            CHECK(sg_tensor_get(sg_tensor_grad(a), n - 1) == exp(0.5));
        } else {
            failures++;
            CHECK(rc == SG_ERR_NOMEM);
            CHECK(sg_tensor_grad(ea) == NULL && sg_tensor_grad(eb) == NULL);
        }
        sg_ctx_free(ctx);
    }
    CHECK(failures > 0 && done);
}

/* sum(a + b) gives a and b one shared full form of the sum's uniform gradient; a second
 * backward adding to a copies a's first, so b keeps its own values. */
TEST(leaves_sharing_a_sum_gradient_accumulate_apart)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    const int64_t n = 1000;
    sg_tensor *a = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, &n), 1);
    sg_tensor *b = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 1, &n), 1);
    CHECK(sg_backward(sg_sum(sg_add(a, b))) == SG_OK);
    CHECK(sg_tensor_grad(a) == sg_tensor_grad(b)); /* one expansion, shared */
    CHECK(sg_backward(sg_sum(sg_scale(a, 2.0))) == SG_OK);
    for (int64_t i = 0; i < n; i += 111) {
        CHECK(sg_tensor_get(sg_tensor_grad(a), i) == 3.0);
        CHECK(sg_tensor_get(sg_tensor_grad(b), i) == 1.0);
    }
    sg_ctx_free(ctx);
}

/* The guard's scans read 16 values at a time, then the rest: in both dtypes a NaN or an
 * infinity of either sign is found wherever it lies (first element, inside the blocks,
 * the last of a block, the tail), and the largest finite value passes. */
TEST(guard_finds_nonfinite_values_anywhere_in_a_long_gradient)
{
    const int64_t rows = 7, width = 37, at[4] = {0, 100, 255, 258}; /* 259 = 16 x 16 + 3 */
    const sg_dtype dtypes[2] = {SG_F32, SG_F64};
    for (int t = 0; t < 2; t++) {
        const double bads[4] = {NAN, -NAN, INFINITY, -INFINITY};
        const double big = dtypes[t] == SG_F32 ? FLT_MAX : DBL_MAX;
        for (int b = -1; b < 4; b++)
            for (int a = 0; a < 4; a++) {
                sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
                sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0, 0, 0, 0});
                sg_tensor *w = sg_tensor_requires_grad(sg_tensor_new(ctx, dtypes[t], 2, (int64_t[]){rows, width}), 1);
                CHECK(sg_optim_add_param(opt, w) == SG_OK && sg_optim_set_check_finite(opt, 1) == SG_OK);
                sg_tensor *g = sg_tensor_new_tmp(ctx, dtypes[t], 2, (int64_t[]){rows, width});
                CHECK(sg_tensor_fill(g, 1e-3) == SG_OK);
                const double v = b < 0 ? -big : bads[b]; /* b = -1: finite, large */
                if (dtypes[t] == SG_F32) sg_tensor_f32(g)[at[a]] = (float)v;
                else sg_tensor_f64(g)[at[a]] = v;
                CHECK(sg_backward_grad(w, g) == SG_OK);
                CHECK_STATUS(ctx, sg_optim_step(opt), b < 0 ? SG_OK : SG_ERR_VALUE);
                sg_ctx_free(ctx);
            }
    }
}

/* Dense and COO gradients: with the guard a NaN or Inf in the second parameter's gradient
 * refuses the step naming parameter 1 and changes nothing; the same step without the bad
 * value then succeeds; without the guard the bad value reaches the weights. */
TEST(guard_refuses_nonfinite_step_gradients)
{
    const double bads[2] = {NAN, INFINITY};
    for (int k = 0; k < N_KINDS; k++) {
        for (int sparse = 0; sparse < 2; sparse++) {
            for (int b = 0; b < 2; b++) {
                sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 2});
                sg_optim *opt = kinds[k].mk(ctx);
                CHECK_STATUS(ctx, sg_optim_set_check_finite(opt, 1), SG_OK);
                sg_tensor *w0 = param(ctx, 5, 3, 0.5), *w1 = param(ctx, 5, 3, -0.5);
                sg_optim_add_param(opt, w0);
                sg_optim_add_param(opt, w1);
                /* one good step first, so that the state is not all zeros */
                give_dense(w0, -1, 0);
                give_rows(w1, -1, 0, NULL);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
                sg_tape_reset(ctx);
                snapshot before = snap(opt);
                give_dense(w0, -1, 0);
                if (sparse) give_rows(w1, 4, bads[b], NULL);
                else give_dense(w1, 7, bads[b]);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_ERR_VALUE);
                CHECK(strstr(sg_ctx_message(ctx), "parameter 1") != NULL);
                CHECK(snap_same(before, snap(opt)));
                sg_tape_reset(ctx);
                sg_ctx_clear_error(ctx);
                give_dense(w0, -1, 0);
                if (sparse) give_rows(w1, -1, 0, NULL);
                else give_dense(w1, -1, 0);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
                CHECK(sg_optim_steps(opt) == 2);
                sg_tape_reset(ctx);
                /* the guard off: the step goes through and the weights are not finite */
                CHECK_STATUS(ctx, sg_optim_set_check_finite(opt, 0), SG_OK);
                if (sparse) give_rows(w1, 4, bads[b], NULL);
                else give_dense(w1, 7, bads[b]);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
                CHECK(!all_finite(w1));
                sg_ctx_free(ctx);
            }
        }
        if (tu_failures) fprintf(stderr, "  (kind %s)\n", kinds[k].name);
    }
    CHECK(sg_optim_set_check_finite(NULL, 1) == SG_ERR_NULL);
}

/* Fused updates: an embedding fused into the optimizer with a non-finite output gradient
 * is refused at the end of the backward and the table, state and step counts do not
 * change. */
TEST(guard_refuses_nonfinite_fused_embedding_rows)
{
    for (int k = 0; k < N_KINDS; k++) {
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
        sg_optim *opt = kinds[k].mk(ctx);
        sg_optim_set_check_finite(opt, 1);
        sg_tensor *W = param(ctx, 5, 3, 0.5);
        sg_optim_add_param(opt, W);
        CHECK_STATUS(ctx, give_rows(W, -1, 0, opt), SG_OK);
        sg_optim_step(opt);
        sg_tape_reset(ctx);
        snapshot before = snap(opt);
        CHECK_STATUS(ctx, give_rows(W, 5, INFINITY, opt), SG_ERR_VALUE);
        CHECK(strstr(sg_ctx_message(ctx), "parameter 0") != NULL);
        CHECK(snap_same(before, snap(opt)));
        sg_tape_reset(ctx);
        sg_ctx_free(ctx);
        if (tu_failures) fprintf(stderr, "  (kind %s)\n", kinds[k].name);
    }
}

/* A fused update's guard bounds its factors by their largest magnitudes (16 values at a
 * time, then the rest): a NaN in a row of h (and so in its coefficients, at positions in
 * and past the 16-value blocks) is found wherever it lies, in both dtypes, and the table
 * is left as it was. */
TEST(guard_finds_a_nonfinite_row_value_of_a_long_fused_update)
{
    enum { ROWS = 50, D = 37, NB = 8, T = 3 }; /* NB x D = 296 = 18 x 16 + 8 values */
    const int64_t at[5] = {0, 116, 140, 255, 290};
    const sg_dtype dtypes[2] = {SG_F32, SG_F64};
    for (int t = 0; t < 2; t++)
        for (int a = 0; a < 5; a++) {
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
            sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0, 0, 0, 0});
            sg_tensor *W = sg_tensor_requires_grad(sg_tensor_new(ctx, dtypes[t], 2, (int64_t[]){ROWS, D}), 1);
            CHECK(sg_optim_add_param(opt, W) == SG_OK && sg_optim_set_check_finite(opt, 1) == SG_OK);
            CHECK(sg_tensor_fill_uniform(W, -0.1, 0.1) == SG_OK);
            sg_tensor *h = sg_tensor_new_tmp(ctx, dtypes[t], 2, (int64_t[]){NB, D});
            CHECK(sg_tensor_fill(h, 0.05) == SG_OK);
            if (dtypes[t] == SG_F32) sg_tensor_f32(h)[at[a]] = NAN;
            else sg_tensor_f64(h)[at[a]] = NAN;
            int64_t tv[NB * T];
            for (int i = 0; i < NB * T; i++) tv[i] = (7 * i + 3) % ROWS;
            sg_tensor *tg = sg_tensor_from_data(ctx, SG_I64, 2, (int64_t[]){NB, T}, tv);
            const size_t bytes = (size_t)ROWS * D * sg_dtype_size(dtypes[t]);
            void *before = malloc(bytes);
            memcpy(before, sg_tensor_data(W), bytes);
            sg_tensor *loss = sg_sgns_loss(h, W, tg, &(sg_sgns_opts){.fused = opt});
            CHECK(loss != NULL);
            CHECK_STATUS(ctx, sg_backward(loss), SG_ERR_VALUE);
            CHECK(memcmp(before, sg_tensor_data(W), bytes) == 0);
            free(before);
            sg_ctx_free(ctx);
        }
}

/* word2vec's step, fused twice: h = embedding(A) fused into optA, sgns(h, B) fused into
 * optB. A non-finite value in B makes A's update (h's gradient) non-finite while B's own
 * rows stay finite; B's update is queued first, yet neither table may change. A NaN in A
 * makes B's factored rows (coef x h) non-finite: refused too. */
TEST(guard_refuses_the_whole_backward_of_fused_updates)
{
    for (int k = 0; k < N_KINDS; k++) {
        for (int poison_a = 0; poison_a < 2; poison_a++) {
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
            sg_optim *optA = kinds[k].mk(ctx), *optB = kinds[k].mk(ctx);
            sg_optim_set_check_finite(optA, 1);
            sg_optim_set_check_finite(optB, 1);
            sg_tensor *A = param(ctx, 6, 4, 0.1), *B = param(ctx, 6, 4, -0.2);
            sg_optim_add_param(optA, A);
            sg_optim_add_param(optB, B);
            if (poison_a) sg_tensor_f64(A)[2 * 4 + 1] = NAN;
            else sg_tensor_f64(B)[3 * 4 + 2] = INFINITY;
            snapshot a0 = snap(optA), b0 = snap(optB);
            sg_tensor *idx = sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){2}, (int64_t[]){2, 5});
            sg_tensor *tg = sg_tensor_from_data(ctx, SG_I64, 2, (int64_t[]){2, 2}, (int64_t[]){3, 1, 0, 3});
            sg_tensor *h = sg_embedding(A, idx, &(sg_embedding_opts){.padding_idx = -1, .fused = optA});
            sg_tensor *loss = sg_sgns_loss(h, B, tg, &(sg_sgns_opts){.fused = optB});
            CHECK(loss != NULL);
            CHECK_STATUS(ctx, sg_backward(loss), SG_ERR_VALUE);
            CHECK(strstr(sg_ctx_message(ctx), "not finite") != NULL);
            CHECK(snap_same(a0, snap(optA)));
            CHECK(snap_same(b0, snap(optB)));
            sg_tape_reset(ctx);
            sg_ctx_free(ctx);
            if (tu_failures) {
                fprintf(stderr, "  (kind %s, poison %s)\n", kinds[k].name, poison_a ? "A" : "B");
                return;
            }
        }
    }
}

TEST_MAIN()
