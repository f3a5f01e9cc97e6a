/* Links against an installed sgrad: d/dx sum(x*x) at x = (1,2,3) must be (2,4,6), and a
 * 40x40 matrix product must be exact. */
#include <math.h>
#include <stdio.h>
#include <sgrad.h>

int main(void)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *x = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    sg_tensor_requires_grad(x, 1);
    if (sg_backward(sg_sum(sg_mul(x, x)))) {
        fprintf(stderr, "error: %s\n", sg_ctx_message(ctx));
        return 1;
    }
    sg_tensor *g = sg_tensor_grad(x);
    int ok = 1;
    for (int i = 0; i < 3; i++) ok &= fabs(sg_tensor_get(g, i) - 2.0 * (i + 1)) < 1e-12;
    /* A product big enough for the BLAS path of a build with one (src/ops/matmul.c), so a
     * static user links the BLAS too; small integers, so every summation order is exact. */
    enum { n = 40 };
    static double a[n * n], b[n * n];
    for (int i = 0; i < n * n; i++) {
        a[i] = i % 7 - 3;
        b[i] = i % 5 - 2;
    }
    sg_tensor *c = sg_matmul(sg_tensor_from_data(ctx, SG_F64, 2, (int64_t[]){n, n}, a),
                             sg_tensor_from_data(ctx, SG_F64, 2, (int64_t[]){n, n}, b));
    ok &= c != NULL;
    for (int i = 0; c && i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            ok &= sg_tensor_get(c, i * n + j) == s;
        }
    printf("%s\n", ok ? "install ok" : "wrong gradient");
    sg_ctx_free(ctx);
    return ok ? 0 : 1;
}
