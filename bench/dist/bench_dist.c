/* sgrad-bench dist: the data-parallel embedding train step under mpirun (run it as
 * `mpirun -np P sgrad-bench dist`; "all" leaves it out). Each rank looks up B random rows
 * of a (V, D) f32 table, backward, sg_dist_reduce_grads, Adagrad step. Rank 0 prints one
 * line: the median step time (the slowest rank's), the bytes rank 0 sent in the last step in the
 * exchange the rule chose, what the dense exchange would have sent, and the choice.
 * B = 1e4, D = 64, V = 1e6 (--quick: 100, 8, 1000). No reference loop (ref_ms null). */
#include "bench.h"
#include "sgrad_dist.h"

#include <stdio.h>
#include <stdlib.h>

int sgb_dist(const sgb_cfg *cfg)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(NULL, NULL);
    int rank, size, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int64_t B = cfg->quick ? 100 : 10000, D = cfg->quick ? 8 : 64, V = cfg->quick ? 1000 : 1000000;
    const int steps = sgb_reps(cfg, 20);
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = cfg->threads, .seed = 1 + (uint64_t)rank});
    sg_tensor *W = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){V, D}), 1);
    sg_optim *opt = sg_optim_adagrad(ctx, NULL);
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    if (!W || !opt || !d || sg_optim_add_param(opt, W)) {
        fprintf(stderr, "sgrad-bench dist: %s\n", sg_ctx_message(ctx));
        rc = 1;
    }
    double *times = calloc((size_t)steps, sizeof *times);
    sg_dist_stats st = {0};
    sg_dist_param_stats ps = {0};
    for (int s = 0; s < steps && !rc; s++) {
        sg_tensor *idx = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){B});
        int64_t *ix = sg_tensor_data(idx);
        for (int64_t i = 0; i < B; i++) ix[i] = (int64_t)(sg_rand_u64(ctx) % (uint64_t)V);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = sgb_now_ms();
        if (sg_backward(sg_sum(sg_embedding(W, idx, NULL))) || sg_dist_reduce_grads(d, &W, 1) ||
            sg_optim_step(opt)) {
            fprintf(stderr, "sgrad-bench dist: rank %d: %s\n", rank, sg_ctx_message(ctx));
            rc = 1;
        }
        sg_tape_reset(ctx);
        double mine = sgb_now_ms() - t0;
        MPI_Allreduce(&mine, &times[s], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        sg_dist_stats_get(d, &st);
        sg_dist_param_stats_get(d, 0, &ps);
    }
    int any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any && rank == 0) {
        for (int i = 1; i < steps; i++) /* insertion sort: the median */
            for (int j = i; j > 0 && times[j - 1] > times[j]; j--) {
                double t = times[j];
                times[j] = times[j - 1];
                times[j - 1] = t;
            }
        char params[160], extra[512];
        snprintf(params, sizeof params, "{\"B\":%lld,\"D\":%lld,\"V\":%lld,\"ranks\":%d,\"optimizer\":\"adagrad\"}",
                 (long long)B, (long long)D, (long long)V, size);
        const char *choice = ps.choice == SG_DIST_SPARSE_AS_SPARSE ? "sparse" : "dense";
        double sparse_b = (double)ps.bytes_sparse_est, dense_b = (double)ps.bytes_dense_est;
        snprintf(extra, sizeof extra,
                 "\"bytes_sent_rank0\":%llu,\"bytes_dense_alternative_rank0\":%llu,"
                 "\"rule_sparse_bytes\":%llu,\"rule_dense_bytes\":%llu,\"dense_over_sparse\":%.4g,"
                 "\"choice\":\"%s\",\"nnz_total\":%lld,\"rows_out\":%lld,\"reduce_ms\":%.4g",
                 (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_all_dense,
                 (unsigned long long)ps.bytes_sparse_est, (unsigned long long)ps.bytes_dense_est,
                 sparse_b > 0 ? dense_b / sparse_b : 0.0, choice, (long long)ps.nnz_total,
                 (long long)ps.rows_out, st.seconds * 1e3);
        sgb_emit("dist", "embedding_step", params, times[steps / 2], 0, sg_ctx_threads(ctx), extra);
    }
    free(times);
    sg_dist_free(d);
    sg_ctx_free(ctx);
    if (!inited) MPI_Finalize();
    return any;
}
