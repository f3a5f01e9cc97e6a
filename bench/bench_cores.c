/* What moving data between the machine's two cores costs, the limit of a 2-thread step
 * that shares rows (one thread's forward reads a row, the other's update writes it).
 * Named family (not run by "all"): sgrad-bench cores. Plain pthreads, no library calls.
 *
 * handoff: two threads take turns on one cache line (an atomic counter each waits for
 * its parity, then increments), ns_per_handoff is one move of the line between cores.
 * rows_handover: a block of rows of 100 floats (the shape of sgrad-w2v's tables; 0.4, 4
 * and 11.2 MB) is read and rewritten (x += 1) in turn by thread 0 and thread 1, one pass
 * each turn;
 * ms is the time of one pass, ref_ms the same pass when one thread makes them all, so
 * ratio is what the rows' trip between the cores adds to a pass. Both threads run in both
 * cases (in the reference the second one only waits): only where the data goes differs.
 * core_speed: one thread pinned to each processor in turn (Linux), the same work on each:
 * word2vec's step on rows (a row's dot product with a vector, then the row moved along
 * it) at rows drawn at random from 11.2 MB (Brown's two tables); ref_ms is the fastest
 * processor's, and `speed` is ref_ms / ms. A host may give one virtual core much less
 * than the other for minutes (docs/performance.md has the measured case); two threads
 * can then give at most the sum of the speeds against one thread on the fastest. */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

enum { CORES_DIM = 100 };

typedef struct {
    _Alignas(64) atomic_long turn; /* alone on its cache line: */
    _Alignas(64) float *rows;       /* the rest starts on the next */
    int64_t n;       /* floats in the block */
    long turns;      /* turns in all, shared by the two threads */
    int both_touch;  /* rows_handover: 1 both threads pass over the block, 0 thread 0 only */
    int handoff;     /* 1: the handoff case (no block) */
} cores_job;

typedef struct {
    cores_job *job;
    int me;
} cores_arg;

static void *cores_worker(void *p)
{
    const cores_arg *a = p;
    cores_job *j = a->job;
    for (long t = a->me; t < j->turns; t += 2) {
        /* spin (a handoff takes well under 1000 spins when both threads run), then yield:
         * on shared cores the other thread may need this one's core to take its turn */
        for (int spins = 0; atomic_load_explicit(&j->turn, memory_order_acquire) != t;)
            if (spins < 1000)
                spins++;
            else
                sched_yield();
        /* in the reference, thread 1's turns cost nothing but the handoff and thread 0
         * makes two passes on its own, so the passes are as many */
        const int passes = j->handoff ? 0 : j->both_touch ? 1 : a->me == 0 ? 2 : 0;
        for (int pass = 0; pass < passes; pass++)
            for (int64_t i = 0; i < j->n; i++) j->rows[i] += 1.0f;
        atomic_store_explicit(&j->turn, t + 1, memory_order_release);
    }
    return NULL;
}

/* Runs job on two threads; ms of the whole, or -1 when a thread cannot start. */
static double cores_run(cores_job *j)
{
    atomic_store(&j->turn, 0);
    pthread_t th;
    cores_arg a0 = {j, 0}, a1 = {j, 1};
    const double t0 = sgb_now_ms();
    if (pthread_create(&th, NULL, cores_worker, &a1)) return -1;
    cores_worker(&a0);
    pthread_join(th, NULL);
    return sgb_now_ms() - t0;
}

static int cores_fail(const char *what)
{
    fprintf(stderr, "sgrad-bench cores: %s\n", what);
    return 1;
}

enum { CORES_MAX_REPS = 16 };

#ifdef __linux__
enum { SPEED_ROWS = 28000, SPEED_MAX_CPUS = 64 };

typedef struct {
    int cpu;
    long visits;
    float *rows; /* SPEED_ROWS x CORES_DIM */
    double ms;   /* < 0: the thread could not be pinned */
} speed_job;

/* Pins itself to job->cpu, then times `visits` visits of rows drawn by a fixed
 * generator: the row's dot product with a fixed vector, and the row moved along it by a
 * tiny step. */
static void *speed_worker(void *p)
{
    speed_job *j = p;
    j->ms = -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(j->cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) return NULL;
    float a[CORES_DIM];
    for (int k = 0; k < CORES_DIM; k++) a[k] = 0.01f * (float)(k % 7);
    uint64_t state = 12345;
    const double t0 = sgb_now_ms();
    for (long v = 0; v < j->visits; v++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull; /* an LCG */
        float *x = j->rows + (int64_t)((state >> 33) % SPEED_ROWS) * CORES_DIM, d = 0;
        for (int k = 0; k < CORES_DIM; k++) d += x[k] * a[k];
        const float g = 1e-6f * (d > 0 ? 1.0f : -1.0f);
        for (int k = 0; k < CORES_DIM; k++) x[k] -= g * a[k];
    }
    j->ms = sgb_now_ms() - t0;
    return NULL;
}

/* core_speed: every processor this process may run on, in turn, reps times. */
static int core_speed(const sgb_cfg *cfg, int reps)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed)) {
        fprintf(stderr, "sgrad-bench cores: core_speed skipped: cannot read the processors allowed\n");
        return 0;
    }
    int cpus[SPEED_MAX_CPUS], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < SPEED_MAX_CPUS; c++)
        if (CPU_ISSET(c, &allowed)) cpus[n++] = c;
    float *rows = calloc((size_t)SPEED_ROWS * CORES_DIM, sizeof *rows);
    static double t[SPEED_MAX_CPUS][CORES_MAX_REPS];
    if (!rows) return cores_fail("out of memory");
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            speed_job j = {.cpu = cpus[i], .visits = cfg->quick ? 20000 : 2000000, .rows = rows};
            pthread_t th;
            if (pthread_create(&th, NULL, speed_worker, &j)) {
                free(rows);
                return cores_fail("cannot start a thread");
            }
            pthread_join(th, NULL);
            if (j.ms < 0) {
                fprintf(stderr, "sgrad-bench cores: core_speed skipped: cannot pin a thread to processor %d\n",
                        cpus[i]);
                free(rows);
                return 0;
            }
            t[i][r] = j.ms;
        }
    sgb_sink(rows[0]);
    free(rows);
    double med[SPEED_MAX_CPUS], fastest = 0;
    for (int i = 0; i < n; i++) {
        med[i] = sgb_median(t[i], reps);
        if (i == 0 || med[i] < fastest) fastest = med[i];
    }
    for (int i = 0; i < n; i++) {
        char params[32], extra[32];
        snprintf(params, sizeof params, "{\"cpu\":%d}", cpus[i]);
        snprintf(extra, sizeof extra, "\"speed\":%.3f", fastest / med[i]);
        sgb_emit("cores", "core_speed", params, med[i], fastest, 1, extra);
    }
    return 0;
}
#else
static int core_speed(const sgb_cfg *cfg, int reps)
{
    (void)cfg;
    (void)reps;
    fprintf(stderr, "sgrad-bench cores: core_speed skipped: pinning threads needs Linux\n");
    return 0;
}
#endif

int sgb_cores(const sgb_cfg *cfg)
{
    int reps = sgb_reps(cfg, 7);
    reps = reps > CORES_MAX_REPS ? CORES_MAX_REPS : reps;
    double t[CORES_MAX_REPS], u[CORES_MAX_REPS];
    /* handoff: the median over reps runs of `turns` handoffs */
    {
        cores_job j = {.turns = cfg->quick ? 2000 : 1000000, .handoff = 1};
        for (int r = 0; r < reps; r++)
            if ((t[r] = cores_run(&j)) < 0) return cores_fail("cannot start a thread");
        const double ms = sgb_median(t, reps);
        char extra[64], params[64];
        snprintf(extra, sizeof extra, "\"ns_per_handoff\":%.4g", ms * 1e6 / (double)j.turns);
        snprintf(params, sizeof params, "{\"handoffs\":%ld}", j.turns);
        sgb_emit("cores", "handoff", params, ms, 0, 2, extra);
    }
    /* rows_handover, for blocks from one core's L2 to past a shared cache; the two ways
     * in turn, medians of each */
    const int64_t row_counts[] = {1000, 10000, 28000};
    for (size_t c = 0; c < sizeof row_counts / sizeof row_counts[0]; c++) {
        const int64_t rows = cfg->quick ? row_counts[c] / 10 : row_counts[c];
        cores_job j = {.n = rows * CORES_DIM, .turns = cfg->quick ? 20 : 200};
        j.rows = calloc((size_t)j.n, sizeof *j.rows);
        if (!j.rows) return cores_fail("out of memory");
        for (int r = 0; r < reps; r++) {
            j.both_touch = 1;
            t[r] = cores_run(&j);
            j.both_touch = 0;
            u[r] = cores_run(&j);
            if (t[r] < 0 || u[r] < 0) {
                free(j.rows);
                return cores_fail("cannot start a thread");
            }
        }
        sgb_sink(j.rows[0]);
        free(j.rows);
        char params[96];
        snprintf(params, sizeof params, "{\"rows\":%lld,\"dim\":%d,\"mb\":%.3g}", (long long)rows, CORES_DIM,
                 (double)rows * CORES_DIM * 4 / 1e6);
        sgb_emit("cores", "rows_handover", params, sgb_median(t, reps) / (double)j.turns,
                 sgb_median(u, reps) / (double)j.turns, 2, NULL);
    }
    return core_speed(cfg, reps);
}
