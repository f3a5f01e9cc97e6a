/* libFuzzer target: sg_checkpoint_load of the input into a fixed model (a (3,4) f32 table
 * "w" and a (4) f64 vector "b" held by an SGD optimizer with momentum), with and without
 * the optimizer. Beyond memory safety, leaks and undefined behaviour: a load either
 * succeeds or fails with an error status and message and changes nothing (the tensors'
 * values and the optimizer's step count are as before). sg_checkpoint_read_meta of the
 * same input must succeed whenever a load does. */
#include "fuzz_input.h"

#include <string.h>

#include "sgrad.h"

static void load_and_check(const char *path, int with_optim)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    FUZZ_REQUIRE(ctx);
    sg_tensor *p[2] = {sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){3, 4}),
                       sg_tensor_new(ctx, SG_F64, 1, (int64_t[]){4})};
    FUZZ_REQUIRE(p[0] && p[1]);
    sg_tensor_fill(p[0], 0.25);
    sg_tensor_fill(p[1], -0.5);
    sg_sgd_opts so = SG_SGD_OPTS_DEFAULT;
    so.momentum = 0.9;
    sg_optim *opt = sg_optim_sgd(ctx, &so);
    FUZZ_REQUIRE(opt && !sg_optim_add_param(opt, p[0]) && !sg_optim_add_param(opt, p[1]));
    const char *names[2] = {"w", "b"};
    sg_checkpoint_meta meta = {0, NULL, NULL};
    int rc = sg_checkpoint_load(ctx, path, p, 2, names, with_optim ? opt : NULL, &meta);
    if (rc != SG_OK) {
        FUZZ_REQUIRE(sg_ctx_status(ctx) != SG_OK && sg_ctx_message(ctx)[0]);
        for (int64_t i = 0; i < 12; i++) FUZZ_REQUIRE(sg_tensor_get(p[0], i) == 0.25);
        for (int64_t i = 0; i < 4; i++) FUZZ_REQUIRE(sg_tensor_get(p[1], i) == -0.5);
        FUZZ_REQUIRE(sg_optim_steps(opt) == 0);
    }
    for (int64_t i = 0; i < meta.n; i++) FUZZ_REQUIRE(meta.keys[i] && meta.values[i]);
    sg_checkpoint_meta_free(ctx, &meta);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(data, size);
    load_and_check(path, 1);
    load_and_check(path, 0);
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    FUZZ_REQUIRE(ctx);
    sg_checkpoint_meta meta = {0, NULL, NULL};
    int rc = sg_checkpoint_read_meta(ctx, path, &meta);
    FUZZ_REQUIRE(rc == SG_OK ? 1 : meta.n == 0 && sg_ctx_message(ctx)[0]);
    for (int64_t i = 0; i < meta.n; i++) FUZZ_REQUIRE(meta.keys[i] && meta.values[i]);
    sg_checkpoint_meta_free(ctx, &meta);
    sg_ctx_free(ctx);
    return 0;
}
