/* The public seams a module outside the library builds on (sgrad_dist uses them):
 * sg_tensor_set_grad, sg_coo_new_tmp and sg_ctx_set_error. */
#include "testutil.h"

TEST(set_grad_replaces_and_is_what_the_optimizer_applies)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *w = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){3, 2}), 1);
    sg_tensor *frozen = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){3, 2});
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){0.5, 0, 0, 0, 0});
    sg_optim_add_param(opt, w);
    CHECK(sg_grads_count(ctx) == 0);
    /* rows 2 and 0 (twice), so the optimizer must sum them: w -= 0.5 * g */
    sg_tensor *g = sg_coo_new_tmp(ctx, SG_F64, 2, sg_tensor_shape(w), 1, 3, (int64_t[]){2, 0, 0},
                                  (double[]){1, 2, 3, 4, 5, 6});
    CHECK(g != NULL && !sg_coo_is_coalesced(g) && sg_coo_nnz(g) == 3);
    CHECK_STATUS(ctx, sg_tensor_set_grad(w, g), SG_OK);
    CHECK(sg_grads_count(ctx) == 1 && sg_grads_param(ctx, 0) == w && sg_tensor_grad(w) == g);
    /* a later accumulation does not write into the borrowed gradient */
    sg_tensor *one = sg_tensor_new_tmp(ctx, SG_F64, 2, (int64_t[]){3, 2});
    sg_tensor_fill(one, 1.0);
    CHECK_STATUS(ctx, sg_backward_grad(w, one), SG_OK);
    CHECK(sg_tensor_get(sg_coo_values(g), 0) == 1 && sg_tensor_get(one, 0) == 1);
    /* set again: replaces, does not add */
    CHECK_STATUS(ctx, sg_tensor_set_grad(w, g), SG_OK);
    CHECK(sg_grads_count(ctx) == 1 && sg_tensor_grad(w) == g);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    const double want[6] = {-0.5 * 8, -0.5 * 10, 0, 0, -0.5 * 1, -0.5 * 2};
    for (int i = 0; i < 6; i++) CHECK(sg_tensor_f64(w)[i] == want[i]);
    /* errors change nothing */
    sg_tensor *wrong = sg_tensor_new_tmp(ctx, SG_F64, 2, (int64_t[]){2, 3});
    sg_tensor *f32 = sg_tensor_new_tmp(ctx, SG_F32, 2, (int64_t[]){3, 2});
    CHECK_STATUS(ctx, sg_tensor_set_grad(w, wrong), SG_ERR_SHAPE);
    CHECK_STATUS(ctx, sg_tensor_set_grad(w, f32), SG_ERR_DTYPE);
    CHECK_STATUS(ctx, sg_tensor_set_grad(w, NULL), SG_ERR_NULL);
    CHECK_STATUS(ctx, sg_tensor_set_grad(frozen, one), SG_ERR_STATE);
    CHECK(sg_tensor_set_grad(NULL, one) == SG_ERR_NULL);
    sg_tensor *y = sg_scale(w, 2.0);
    CHECK_STATUS(ctx, sg_tensor_set_grad(y, one), SG_ERR_ARG);
    sg_ctx *other = sg_ctx_new(NULL);
    sg_tensor *foreign = sg_tensor_new_tmp(other, SG_F64, 2, (int64_t[]){3, 2});
    CHECK_STATUS(ctx, sg_tensor_set_grad(w, foreign), SG_ERR_ARG);
    CHECK(sg_tensor_grad(w) == g && sg_grads_count(ctx) == 1 && sg_tensor_grad(frozen) == NULL);
    sg_tape_reset(ctx);
    CHECK(sg_tensor_grad(w) == NULL && sg_grads_count(ctx) == 0);
    sg_ctx_free(other);
    sg_ctx_free(ctx);
}

TEST(coo_new_tmp_validates_and_copies)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t idx[2] = {1, 3};
    float val[4] = {1, 2, 3, 4};
    sg_tensor *t = sg_coo_new_tmp(ctx, SG_F32, 2, (int64_t[]){4, 2}, 1, 2, idx, val);
    CHECK(t && sg_coo_is_coalesced(t));
    idx[0] = 0;
    val[0] = 9;
    CHECK(sg_tensor_get(t, 2) == 1 && sg_tensor_get(t, 7) == 4 && sg_tensor_get(t, 0) == 0);
    CHECK(sg_coo_new_tmp(ctx, SG_F32, 2, (int64_t[]){4, 2}, 1, 1, (int64_t[]){4}, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    CHECK(strstr(sg_ctx_message(ctx), "sg_coo_new_tmp") != NULL);
    CHECK(sg_coo_new_tmp(ctx, SG_I32, 2, (int64_t[]){4, 2}, 1, 1, idx, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_DTYPE);
    CHECK(sg_coo_new_tmp(NULL, SG_F32, 2, (int64_t[]){4, 2}, 1, 1, idx, val) == NULL);
    sg_ctx_free(ctx);
}

TEST(ctx_set_error_records_status_and_message)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    CHECK(sg_ctx_set_error(ctx, SG_ERR_IO, "the network went away") == SG_ERR_IO);
    CHECK(sg_ctx_status(ctx) == SG_ERR_IO && !strcmp(sg_ctx_message(ctx), "the network went away"));
    char longmsg[2000];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = '\0';
    CHECK(sg_ctx_set_error(ctx, SG_ERR_ARG, longmsg) == SG_ERR_ARG);
    CHECK(strlen(sg_ctx_message(ctx)) < sizeof longmsg - 1 && sg_ctx_message(ctx)[0] == 'x');
    CHECK(sg_ctx_set_error(ctx, SG_ERR_STATE, NULL) == SG_ERR_STATE && sg_ctx_message(ctx)[0] == '\0');
    CHECK(sg_ctx_set_error(NULL, SG_ERR_IO, "x") == SG_ERR_NULL);
    sg_ctx_clear_error(ctx);
    CHECK(sg_ctx_status(ctx) == SG_OK);
    sg_ctx_free(ctx);
}

TEST_MAIN()
