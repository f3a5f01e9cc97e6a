/* The one parallel loop every kernel goes through (statically spread, or dynamically for
 * kernels whose chunks take unequal times), and its variant for kernels whose
 * ranges each scan all of their input. Invariant: sg__parallel_for's chunking is a
 * function of (n, grain) only, so the thread count never changes which items a chunk
 * holds or the order inside it; only sg__parallel_ranges cuts by the thread count, for
 * kernels whose outputs do not depend on where the cuts fall; sg__parallel_any ORs the
 * chunks' answers. */
#include "core/core.h"

#include <stdatomic.h>
#ifdef _OPENMP
#include <omp.h>
#endif

bool sg__in_caller_region(void)
{
#ifdef _OPENMP
    return omp_in_parallel() != 0;
#else
    return false;
#endif
}

static int64_t chunk_count(int64_t n, int64_t grain) { return (n + grain - 1) / grain; }
/* The end of chunk c of `chunks` over [0, n) (the last one may be shorter). */
static int64_t chunk_end(int64_t c, int64_t chunks, int64_t grain, int64_t n)
{
    return c + 1 < chunks ? (c + 1) * grain : n;
}

int sg__parallel_threads(const sg_ctx *ctx, int64_t n, int64_t grain)
{
    if (n <= 0) return 1;
    int64_t chunks = chunk_count(n, grain < 1 ? 1 : grain);
    int threads = sg__threads(ctx);
    return (int64_t)threads > chunks ? (int)chunks : threads;
}

#ifdef _OPENMP
/* One chunk as a task's body (the task captures its arguments' values). */
static void run_chunk(sg__range_fn fn, void *ud, int64_t lo, int64_t hi) { fn(ud, lo, hi); }

#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define SG_TSAN_UNCHECKED __attribute__((no_sanitize("thread")))
#endif
#endif
#ifndef SG_TSAN_UNCHECKED
#define SG_TSAN_UNCHECKED
#endif

/* The chunks as tasks of the caller's region, and the wait for them (the calling thread
 * runs tasks too while it waits). ThreadSanitizer does not check this function's own
 * stores: they are the compiler's copies of each task's arguments into a block that libomp
 * recycles from finished tasks, a handover inside libomp, which is not instrumented. What
 * archer tells TSan about tasks missed it once in CI (50 runs of the same test beside
 * other work did not show it again): such a store was reported against the read of the
 * block's previous task. The chunks' work, fn, is checked as everywhere else. */
SG_TSAN_UNCHECKED static void spawn_chunk_tasks(int64_t n, int64_t grain, int64_t chunks,
                                                sg__range_fn fn, void *ud)
{
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t lo = c * grain, hi = chunk_end(c, chunks, grain, n);
#pragma omp task
        run_chunk(fn, ud, lo, hi);
    }
#pragma omp taskwait
}
#endif

/* The chunks of sg__parallel_for: statically spread (a thread gets the same chunks of
 * consecutive loops over one tensor, so they stay in its cache) or, `dynamic`, taken by
 * whichever thread is free (for kernels whose chunks cost unequal times). */
static void run_chunks(sg_ctx *ctx, int64_t n, int64_t grain, sg__range_fn fn, void *ud, bool dynamic)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t chunks = chunk_count(n, grain);
    int threads = sg__parallel_threads(ctx, n, grain);
    if (threads <= 1) {
        for (int64_t c = 0; c < chunks; c++)
            fn(ud, c * grain, chunk_end(c, chunks, grain, n));
        return;
    }
#ifdef _OPENMP
    if (sg__in_caller_region()) {
        /* Inside the caller's parallel region a nested one would get one thread: the
         * chunks become tasks instead, taken up by the region's threads that are idle (at
         * a barrier or a wait). Same chunks, same results; this call returns when all
         * of them are done. */
        spawn_chunk_tasks(n, grain, chunks, fn, ud);
        return;
    }
    if (dynamic) {
#pragma omp parallel for num_threads(threads) schedule(dynamic)
        for (int64_t c = 0; c < chunks; c++)
            fn(ud, c * grain, chunk_end(c, chunks, grain, n));
        return;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
#else
    (void)dynamic;
#endif
    for (int64_t c = 0; c < chunks; c++)
        fn(ud, c * grain, chunk_end(c, chunks, grain, n));
}

void sg__parallel_chunks(sg_ctx *ctx, int64_t n, int64_t grain, sg__range_fn fn, void *ud)
{
    run_chunks(ctx, n, grain, fn, ud, false);
}

void sg__parallel_for_dynamic(sg_ctx *ctx, int64_t n, int64_t grain, sg__range_fn fn, void *ud)
{
    if (n > 0 && n <= grain) fn(ud, 0, n);
    else run_chunks(ctx, n, grain, fn, ud, true);
}

typedef struct {
    sg__range_fn fn;
    void *ud;
    int64_t n, parts;
} ranges_job;

/* Items lo..hi of the ranges loop are range numbers: range p is [n p / P, n (p+1) / P). */
static void run_ranges(void *vj, int64_t lo, int64_t hi)
{
    const ranges_job *j = vj;
    for (int64_t p = lo; p < hi; p++) j->fn(j->ud, j->n * p / j->parts, j->n * (p + 1) / j->parts);
}

void sg__parallel_ranges(sg_ctx *ctx, int64_t n, int64_t work, sg__range_fn fn, void *ud)
{
    if (n <= 0) return;
    int64_t parts = sg__parallel_threads(ctx, work, SG__GRAIN);
    if (parts > n) parts = n;
    if (parts <= 1) {
        fn(ud, 0, n);
        return;
    }
    ranges_job j = {fn, ud, n, parts};
    sg__parallel_for(ctx, parts, 1, run_ranges, &j);
}

typedef struct {
    sg__range_test test;
    void *ud;
    atomic_bool found;
} any_job;

static void run_test(void *vj, int64_t lo, int64_t hi)
{
    any_job *j = vj;
    if (j->test(j->ud, lo, hi)) atomic_store_explicit(&j->found, true, memory_order_relaxed);
}

bool sg__parallel_any(sg_ctx *ctx, int64_t n, int64_t grain, sg__range_test test, void *ud)
{
    any_job j = {test, ud, false};
    sg__parallel_for(ctx, n, grain, run_test, &j);
    return atomic_load_explicit(&j.found, memory_order_relaxed);
}
