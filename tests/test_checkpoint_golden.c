/* Checkpoint bytes do not drift: for each optimizer kind (SGD plain, with momentum and
 * dampening, with weight decay alone, Nesterov; Adagrad; row-wise Adagrad; Adam; AdamW;
 * LazyAdam) a small model whose parameters and optimizer state are set directly saves a
 * file byte-identical to tests/golden/checkpoint/<kind>.safetensors, and that file, loaded
 * into a fresh model and saved again, gives the same bytes (so the load restores every
 * byte the save writes, lazy-SGD bookkeeping included).
 *
 * The golden files were written by `test_checkpoint_golden --write DIR` built against the
 * library before src/io/checkpoint.c was split into io/ and optim/ (commit 0421bf7).
 * Regenerate them only for an intended change of the format.
 *
 * Values are multiples of 1/8 or 1/16 and the options powers of two where they enter the
 * arithmetic, so the catch-up of the rows exact lazy SGD has left behind (computed by the
 * save) is exact in f32 and f64 on any compiler: the files depend on no rounding choice.
 * No step is taken (steps would go through libm).
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdbool.h>

typedef enum {
    K_SGD,
    K_SGD_MOMENTUM,
    K_SGD_WEIGHT_DECAY,
    K_SGD_NESTEROV,
    K_ADAGRAD,
    K_ROWWISE_ADAGRAD,
    K_ADAM,
    K_ADAMW,
    K_LAZY_ADAM,
    K_COUNT
} kind;

static const char *const kind_name[K_COUNT] = {"sgd", "sgd_momentum", "sgd_weight_decay", "sgd_nesterov",
                                               "adagrad", "rowwise_adagrad", "adam", "adamw", "lazy_adam"};

enum { STEP = 6, STEPS = 7 }; /* every parameter's step; the optimizer's */

static double half_lr(void *ud, int64_t step, double base_lr)
{
    (void)ud;
    (void)step;
    return base_lr * 0.5;
}

static sg_optim *make_optim(sg_ctx *ctx, kind k)
{
    sg_sgd_opts s = {0.5, 0, 0, 0, 0};
    sg_adagrad_opts g = {0.25, 0.125, 0.25, 0.5, 0x1p-20};
    sg_adam_opts a = {0.125, 0.875, 0.9375, 0x1p-24, 0.0625, 0};
    switch (k) {
    case K_SGD: return sg_optim_sgd(ctx, &s);
    case K_SGD_MOMENTUM: {
        s.momentum = 0.5;
        s.dampening = 0.5;
        sg_optim *o = sg_optim_sgd(ctx, &s);
        sg_lr_schedule ls = {SG_LR_LINEAR, 8, 0.25, NULL, NULL};
        if (o) sg_optim_set_schedule(o, &ls);
        return o;
    }
    case K_SGD_WEIGHT_DECAY: {
        s.weight_decay = 0.25;
        sg_optim *o = sg_optim_sgd(ctx, &s);
        sg_lr_schedule cs = {SG_LR_CALLBACK, 0, 1, half_lr, NULL};
        if (o) sg_optim_set_schedule(o, &cs);
        return o;
    }
    case K_SGD_NESTEROV:
        s.momentum = 0.5;
        s.weight_decay = 0.25;
        s.nesterov = 1;
        return sg_optim_sgd(ctx, &s);
    case K_ADAGRAD: return sg_optim_adagrad(ctx, &g);
    case K_ROWWISE_ADAGRAD: return sg_optim_rowwise_adagrad(ctx, &g);
    case K_ADAM: return sg_optim_adam(ctx, &a);
    case K_ADAMW: a.decoupled = 1; return sg_optim_adam(ctx, &a);
    case K_LAZY_ADAM: return sg_optim_lazy_adam(ctx, &a);
    case K_COUNT: break;
    }
    return NULL;
}

typedef struct {
    sg_ctx *ctx;
    sg_tensor *t[4]; /* W (6,4) f32, frozen (2,3) i32 (no optimizer), b (3) f64, s () f32 */
    sg_optim *opt;
} model;

static const char *const names[4] = {"emb.weight", "frozen", "bias", "scale"};

/* Element i of pattern p: a multiple of 1/8 in [-1, 1] (positive: 1/16 .. 11/16). */
static double pattern(int p, int64_t i, int positive)
{
    if (positive) return (double)((i * 3 + p) % 11 + 1) / 16.0;
    return (double)((i * 5 + p * 7) % 17 - 8) / 8.0;
}

static void fill(sg_tensor *t, int p, int positive)
{
    for (int64_t i = 0; i < sg_tensor_numel(t); i++) {
        double v = pattern(p, i, positive);
        switch (sg_tensor_dtype(t)) {
        case SG_F32: sg_tensor_f32(t)[i] = (float)v; break;
        case SG_F64: sg_tensor_f64(t)[i] = v; break;
        case SG_I32: ((int32_t *)sg_tensor_data(t))[i] = (int32_t)(v * 8); break;
        default: ((int64_t *)sg_tensor_data(t))[i] = (int64_t)(v * 8); break;
        }
    }
}

/* Sets every state tensor of param j (pattern p): the step counts within [0, STEP], rows
 * up to 3 steps behind, and for exact lazy SGD a learning-rate history of two runs. */
static int set_state(model *m, int j, int p)
{
    sg_tensor *param = m->t[j];
    int n = sg_optim_state_count(m->opt, param);
    bool lazy_sgd = false;
    for (int i = 0; i < n; i++) {
        const char *nm;
        sg_tensor *st = sg_optim_state(m->opt, param, i, &nm);
        int64_t *d = sg_tensor_data(st);
        lazy_sgd |= !strcmp(nm, "last_step");
        if (!strcmp(nm, "step")) *d = STEP;
        else if (!strcmp(nm, "last_step") || !strcmp(nm, "row_step"))
            for (int64_t r = 0; r < sg_tensor_numel(st); r++) d[r] = STEP - (r + p) % 4;
        else fill(st, p + i, !strcmp(nm, "sum") || !strcmp(nm, "exp_avg_sq"));
    }
    int64_t start[2] = {3, 5};
    double lr[2] = {0.5, 0.25};
    return lazy_sgd ? sg_optim_set_lr_runs(m->opt, param, start, lr, 2) : SG_OK;
}

/* The model of kind k; with state != 0 its values and state set (else fresh, zero state). */
static model make_model(kind k, int state)
{
    sg_ctx_opts co = {.threads = 1, .seed = 7};
    model m = {sg_ctx_new(&co), {NULL}, NULL};
    int64_t sw[2] = {6, 4}, sf[2] = {2, 3}, sb[1] = {3};
    m.t[0] = sg_tensor_new(m.ctx, SG_F32, 2, sw);
    m.t[1] = sg_tensor_new(m.ctx, SG_I32, 2, sf);
    m.t[2] = sg_tensor_new(m.ctx, SG_F64, 1, sb);
    m.t[3] = sg_tensor_new(m.ctx, SG_F32, 0, NULL);
    m.opt = make_optim(m.ctx, k);
    for (int j = 0; j < 4; j++)
        if (j != 1) sg_optim_add_param(m.opt, m.t[j]);
    if (!state) return m;
    for (int j = 0; j < 4; j++) fill(m.t[j], 3 * j + 1, 0);
    sg_optim_set_steps(m.opt, STEPS);
    for (int j = 0; j < 4; j++)
        if (j != 1 && set_state(&m, j, j)) fprintf(stderr, "%s: %s\n", kind_name[k], sg_ctx_message(m.ctx));
    return m;
}

static const char *const meta_keys[2] = {"epoch", "note"}, *const meta_values[2] = {"3", "a \"quoted\"\n value"};

static int save(model *m, const char *path)
{
    sg_checkpoint_meta meta = {2, meta_keys, meta_values};
    return sg_checkpoint_save(m->ctx, path, m->t, 4, names, m->opt, &meta);
}

static int same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = tu_slurp(a, &na), *y = tu_slurp(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static void golden_path(char *out, size_t n, kind k)
{
    snprintf(out, n, "%s/tests/golden/checkpoint/%s.safetensors", SG_SOURCE_DIR, kind_name[k]);
}

TEST(each_optimizer_kind_saves_the_golden_bytes)
{
    for (kind k = 0; k < K_COUNT; k++) {
        char golden[512];
        golden_path(golden, sizeof golden, k);
        const char *path = tu_tmp_path("ckpt_golden");
        model m = make_model(k, 1);
        CHECK_STATUS(m.ctx, save(&m, path), SG_OK);
        int same = same_file(path, golden);
        if (!same) fprintf(stderr, "  %s: the save differs from %s\n", kind_name[k], golden);
        CHECK(same);
        sg_ctx_free(m.ctx);
        remove(path);
    }
}

TEST(each_golden_file_loads_and_saves_again_unchanged)
{
    for (kind k = 0; k < K_COUNT; k++) {
        char golden[512];
        golden_path(golden, sizeof golden, k);
        const char *path = tu_tmp_path("ckpt_golden_again");
        model m = make_model(k, 0);
        sg_checkpoint_meta meta = {0, NULL, NULL};
        CHECK_STATUS(m.ctx, sg_checkpoint_load(m.ctx, golden, m.t, 4, names, m.opt, &meta), SG_OK);
        CHECK(meta.n == 2 && !strcmp(sg_checkpoint_meta_get(&meta, "note"), meta_values[1]));
        sg_checkpoint_meta_free(m.ctx, &meta);
        CHECK(sg_optim_steps(m.opt) == STEPS);
        CHECK_STATUS(m.ctx, save(&m, path), SG_OK);
        int same = same_file(path, golden);
        if (!same) fprintf(stderr, "  %s: load and save differs from %s\n", kind_name[k], golden);
        CHECK(same);
        sg_ctx_free(m.ctx);
        remove(path);
    }
}

/* Writes the golden set into dir (run by hand, against the library whose format is meant). */
static int write_golden(const char *dir)
{
    int fail = 0;
    for (kind k = 0; k < K_COUNT; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, kind_name[k]);
        model m = make_model(k, 1);
        if (save(&m, path)) {
            fprintf(stderr, "%s: %s\n", path, sg_ctx_message(m.ctx));
            fail = 1;
        }
        sg_ctx_free(m.ctx);
    }
    return fail;
}

#define main tu_run_tests
int tu_run_tests(int argc, char **argv);
TEST_MAIN()
#undef main

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write")) return write_golden(argv[2]);
    return tu_run_tests(argc, argv);
}
