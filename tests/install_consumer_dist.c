/* Built against an installed sgrad_dist (tests/test_install.sh, with pkg-config and with
 * find_package(sgrad COMPONENTS dist)) and run on 2 ranks: each rank's gradient is its
 * rank number + 1, so the mean the exchange must give is (1 + 2) / 2 = 1.5. */
#include <sgrad_dist.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    sg_tensor *w = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){3}), 1);
    sg_tensor *g = sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){3});
    sg_tensor_fill(g, sg_dist_rank(d) + 1);
    int ok = d && sg_backward_grad(w, g) == SG_OK && sg_dist_reduce_grads(d, &w, 1) == SG_OK &&
             sg_tensor_get(sg_tensor_grad(w), 2) == 1.5 && sg_dist_size(d) == 2;
    if (!ok) fprintf(stderr, "install_consumer_dist: %s\n", sg_ctx_message(ctx));
    sg_dist_free(d);
    sg_ctx_free(ctx);
    MPI_Finalize();
    return ok ? 0 : 1;
}
