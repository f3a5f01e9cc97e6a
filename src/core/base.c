/* The context's state that every layer uses: allocator hooks with byte accounting, error
 * state, threads, random numbers. (Its lifecycle, which frees every layer's objects, is
 * src/context.c.)
 * Invariants: every byte the library holds comes from sg__malloc (counted in bytes_in_use)
 * or from the arena, whose chunks come from sg__malloc too. The last error lives here,
 * never in a global. */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const char *const status_strings[] = {
#define SG__STATUS_STR(name, str) str,
    SG_STATUS_LIST(SG__STATUS_STR)
#undef SG__STATUS_STR
};

const char *sg_status_string(int status)
{
    if (status < 0 || status >= SG_STATUS_COUNT) return "unknown status";
    return status_strings[status];
}

#define SG__STR(x) #x
#define SG__XSTR(x) SG__STR(x)
const char *sg_version(void)
{
    return SG__XSTR(SG_VERSION_MAJOR) "." SG__XSTR(SG_VERSION_MINOR) "." SG__XSTR(SG_VERSION_PATCH);
}

/* Each allocation carries a header holding its size, so frees need no size. It is a cache
 * line long: a large block starts on a huge page (src/context.c), so its data, a table's
 * rows, starts on a cache line, and a row of 64 floats fills 4 lines, not 5. */
#define SG__HDR 64

void *sg__malloc(sg_ctx *ctx, size_t size)
{
    if (size > SIZE_MAX - SG__HDR) return sg__fail(ctx, SG_ERR_NOMEM, "allocation of %zu bytes is too large", size);
    unsigned char *p = ctx->alloc.alloc(ctx->alloc.ud, size + SG__HDR);
    if (!p) return sg__fail(ctx, SG_ERR_NOMEM, "out of memory allocating %zu bytes", size);
    memcpy(p, &size, sizeof size);
    ctx->bytes_in_use += size;
    if (ctx->bytes_in_use > ctx->peak_bytes) ctx->peak_bytes = ctx->bytes_in_use;
    return p + SG__HDR;
}

static void zero_bytes(void *ud, int64_t lo, int64_t hi) { memset((unsigned char *)ud + lo, 0, (size_t)(hi - lo)); }

/* Blocks past this are zeroed by all the context's threads: a fresh block's first touch
 * is where the kernel clears its pages, so this spreads that work too (sgrad-w2v's two
 * 400 MB tables at a 1M-word vocabulary: about a second on one core). */
#define SG__ZERO_GRAIN ((int64_t)4 << 20)

void *sg__calloc(sg_ctx *ctx, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return sg__fail(ctx, SG_ERR_NOMEM, "allocation of %zu x %zu bytes overflows", n, size);
    void *p = sg__malloc(ctx, n * size);
    if (p) sg__parallel_for(ctx, (int64_t)(n * size), SG__ZERO_GRAIN, zero_bytes, p);
    return p;
}

void *sg__grow(sg_ctx *ctx, void *arr, int64_t *cap, int64_t len, size_t elem, int64_t first)
{
    if (len < *cap) return arr;
    int64_t n = *cap ? 2 * *cap : first;
    void *p = sg__malloc(ctx, (size_t)n * elem);
    if (!p) return NULL;
    if (len) memcpy(p, arr, (size_t)len * elem);
    sg__free(ctx, arr);
    *cap = n;
    return p;
}

void sg__free(sg_ctx *ctx, void *ptr)
{
    if (!ptr) return;
    unsigned char *p = (unsigned char *)ptr - SG__HDR;
    size_t size;
    memcpy(&size, p, sizeof size);
    ctx->bytes_in_use -= size;
    ctx->alloc.free(ctx->alloc.ud, p);
}

static void vfail(sg_ctx *ctx, int status, const char *fmt, va_list ap)
{
    if (!ctx) return;
    ctx->status = status;
    vsnprintf(ctx->message, sizeof ctx->message, fmt, ap);
}

void *sg__fail(sg_ctx *ctx, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(ctx, status, fmt, ap);
    va_end(ap);
    return NULL;
}

int sg__failc(sg_ctx *ctx, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

int sg_ctx_status(const sg_ctx *ctx) { return ctx ? ctx->status : SG_ERR_NULL; }
const char *sg_ctx_message(const sg_ctx *ctx) { return ctx ? ctx->message : "NULL context"; }

void sg_ctx_clear_error(sg_ctx *ctx)
{
    if (!ctx) return;
    ctx->status = SG_OK;
    ctx->message[0] = '\0';
}

int sg_ctx_set_error(sg_ctx *ctx, int status, const char *message)
{
    if (!ctx) return SG_ERR_NULL;
    return sg__failc(ctx, status, "%s", message ? message : "");
}

int sg_ctx_threads(const sg_ctx *ctx) { return ctx ? ctx->threads : -1; }

void sg_ctx_set_threads(sg_ctx *ctx, int threads)
{
    if (!ctx) return;
#ifdef _OPENMP
    if (threads <= 0) threads = omp_get_max_threads();
    int procs = omp_get_num_procs();
    int cap = procs > 0 && procs <= INT32_MAX / SG__THREADS_PER_PROC ? procs * SG__THREADS_PER_PROC : SG__THREADS_FLOOR;
    if (cap < SG__THREADS_FLOOR) cap = SG__THREADS_FLOOR;
    int limit = omp_get_thread_limit();
    if (limit > 0 && cap > limit) cap = limit;
    if (threads > cap) threads = cap;
#else
    threads = 1;
#endif
    ctx->threads = threads < 1 ? 1 : threads;
}

int sg__threads(const sg_ctx *ctx) { return ctx ? ctx->threads : 1; }
int sg_ctx_deterministic(const sg_ctx *ctx) { return ctx ? !ctx->nondeterministic : 0; }

sg_mem_stats sg_ctx_mem_stats(const sg_ctx *ctx)
{
    sg_mem_stats s = {0, 0, 0};
    if (!ctx) return s;
    s.bytes_in_use = ctx->bytes_in_use;
    s.peak_bytes = ctx->peak_bytes;
    s.arena_bytes = sg__arena_capacity(ctx);
    return s;
}

void sg_ctx_reset_peak(sg_ctx *ctx)
{
    if (ctx) ctx->peak_bytes = ctx->bytes_in_use;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sg_rand_u64(sg_ctx *ctx)
{
    uint64_t *s = ctx->rng;
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double sg_rand_uniform(sg_ctx *ctx) { return (double)(sg_rand_u64(ctx) >> 11) * 0x1.0p-53; }
