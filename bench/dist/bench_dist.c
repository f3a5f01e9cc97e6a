/* sgrad-bench dist: the embedding train step under mpirun (run it as
 * `mpirun -np P sgrad-bench dist`; "all" leaves it out), two cases, one JSON line each
 * from rank 0, B = 1e4 lookups per rank, D = 64, V = 1e6 (--quick: 100, 8, 1000), Adagrad:
 * - embedding_step: data parallel, every rank holds the whole table: backward,
 *   sg_dist_reduce_grads, step; the median step time (the slowest rank's), the bytes rank 0
 *   sent in the last step in the exchange the rule chose, what the dense exchange would
 *   have sent, and the choice;
 * - sharded_step: the table sharded (sg_dist_table): lookup, backward, the table's
 *   backward, step; the step time, rank 0's bytes in the lookup and the backward, and its
 *   table memory (shard and Adagrad state, from sg_ctx_mem_stats; the largest over ranks)
 *   against the whole table's as the first case measured it.
 * No reference loop (ref_ms null). */
#include "bench.h"
#include "sgrad_dist.h"

#include <stdio.h>
#include <stdlib.h>

/* The median of times[0..n) (sorted in place). */
static double median(double *times, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort */
        for (int j = i; j > 0 && times[j - 1] > times[j]; j--) {
            double t = times[j];
            times[j] = times[j - 1];
            times[j - 1] = t;
        }
    return times[n / 2];
}

/* *table_mem: the bytes the whole table and its Adagrad state took (sg_ctx_mem_stats). */
static int data_parallel_case(const sgb_cfg *cfg, int rank, int size, int64_t B, int64_t D, int64_t V, int steps,
                              size_t *table_mem)
{
    int rc = 0;
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = cfg->threads, .seed = 1 + (uint64_t)rank});
    size_t mem0 = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_tensor *W = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){V, D}), 1);
    sg_optim *opt = sg_optim_adagrad(ctx, NULL);
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    if (!W || !opt || !d || sg_optim_add_param(opt, W)) {
        fprintf(stderr, "sgrad-bench dist: %s\n", sg_ctx_message(ctx));
        rc = 1;
    }
    *table_mem = sg_ctx_mem_stats(ctx).bytes_in_use - mem0;
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
        sgb_emit("dist", "embedding_step", params, median(times, steps), 0, sg_ctx_threads(ctx), extra);
    }
    free(times);
    sg_dist_free(d);
    sg_ctx_free(ctx);
    return any;
}

static int sharded_case(const sgb_cfg *cfg, int rank, int size, int64_t B, int64_t D, int64_t V, int steps,
                        size_t unsharded_mem)
{
    int rc = 0;
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = cfg->threads, .seed = 1 + (uint64_t)rank});
    sg_dist *d = sg_dist_new(ctx, MPI_COMM_WORLD, NULL);
    size_t mem0 = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_dist_table *tab = sg_dist_table_new(d, SG_F32, V, D);
    sg_optim *opt = sg_optim_adagrad(ctx, NULL);
    if (!tab || !opt || sg_optim_add_param(opt, sg_dist_table_shard(tab)) ||
        sg_tensor_fill_uniform(sg_dist_table_shard(tab), -0.1, 0.1)) {
        fprintf(stderr, "sgrad-bench dist: %s\n", sg_ctx_message(ctx));
        rc = 1;
    }
    size_t table_mem = sg_ctx_mem_stats(ctx).bytes_in_use - mem0;
    double *times = calloc((size_t)steps, sizeof *times);
    sg_dist_table_stats st = {0};
    for (int s = 0; s < steps && !rc; s++) {
        sg_tensor *idx = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){B});
        int64_t *ix = sg_tensor_data(idx);
        for (int64_t i = 0; i < B; i++) ix[i] = (int64_t)(sg_rand_u64(ctx) % (uint64_t)V);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = sgb_now_ms();
        sg_tensor *e = sg_dist_table_lookup(tab, idx);
        if (!e || sg_backward(sg_sum(e)) || sg_dist_table_backward(tab) || sg_optim_step(opt)) {
            fprintf(stderr, "sgrad-bench dist: rank %d: %s\n", rank, sg_ctx_message(ctx));
            rc = 1;
        }
        sg_tape_reset(ctx);
        double mine = sgb_now_ms() - t0;
        MPI_Allreduce(&mine, &times[s], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        sg_dist_table_stats_get(tab, &st);
    }
    int any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    unsigned long long mem_max = table_mem, mine_mem = table_mem;
    MPI_Allreduce(&mine_mem, &mem_max, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (!any && rank == 0) {
        char params[160], extra[512];
        snprintf(params, sizeof params, "{\"B\":%lld,\"D\":%lld,\"V\":%lld,\"ranks\":%d,\"optimizer\":\"adagrad\"}",
                 (long long)B, (long long)D, (long long)V, size);
        snprintf(extra, sizeof extra,
                 "\"table_bytes_rank0\":%zu,\"table_bytes_max_rank\":%llu,\"table_bytes_unsharded\":%zu,"
                 "\"bytes_lookup_rank0\":%llu,\"bytes_backward_rank0\":%llu,\"rows_served_rank0\":%lld",
                 table_mem, mem_max, unsharded_mem, (unsigned long long)st.bytes_lookup,
                 (unsigned long long)st.bytes_backward, (long long)st.rows_served);
        sgb_emit("dist", "sharded_step", params, median(times, steps), 0, sg_ctx_threads(ctx), extra);
    }
    free(times);
    sg_dist_table_free(tab);
    sg_dist_free(d);
    sg_ctx_free(ctx);
    return any;
}

int sgb_dist(const sgb_cfg *cfg)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(NULL, NULL);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int64_t B = cfg->quick ? 100 : 10000, D = cfg->quick ? 8 : 64, V = cfg->quick ? 1000 : 1000000;
    const int steps = sgb_reps(cfg, 20);
    size_t unsharded_mem = 0;
    int rc = data_parallel_case(cfg, rank, size, B, D, V, steps, &unsharded_mem);
    if (!rc) rc = sharded_case(cfg, rank, size, B, D, V, steps, unsharded_mem);
    if (!inited) MPI_Finalize();
    return rc;
}
