/* The context's lifecycle. It sits above every layer because freeing the context must
 * release what each of them holds (optimizers, persistent tensors, the tape, the arena,
 * the gradient store). Invariant: after sg_ctx_free nothing the context handed out is live. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include <sys/mman.h>
#endif
#include "core/core.h"

#include <stdint.h>
#include <stdlib.h>

/* Blocks of at least this many bytes (embedding tables, their optimizer state, large step
 * buffers) are advised to the kernel for transparent huge pages. Rows of a table far
 * bigger than the TLB's reach are read and written in random order, and with 4 KiB pages
 * nearly every row access also walks the page tables: sgrad-w2v at a 1M-word vocabulary
 * (two 400 MB tables) took 0.81x the time with 2 MiB pages (3 pairs), same vectors.
 * Advice only: a kernel without THP, or with THP off, keeps 4 KiB pages. A caller who
 * wants no advice passes its own allocator (sg_ctx_opts.allocator), used as it is. */
#define SG__HUGE_ADVISE_MIN ((size_t)4 << 20)
#define SG__HUGE_PAGE ((uintptr_t)2 << 20)

static void *default_alloc(void *ud, size_t size)
{
    (void)ud;
    if (size < SG__HUGE_ADVISE_MIN) return malloc(size);
    /* A large block starts on a huge page: its rows start on cache lines (malloc's 16-byte
     * offset past a page would spread each 256-byte row over 5 lines instead of 4, and
     * the row kernels' prefetch of a row's first 4 would miss the fifth), and the advice
     * covers all of it. */
    void *p = NULL;
    if (posix_memalign(&p, (size_t)SG__HUGE_PAGE, size)) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Before the first touch, so the first faults already map huge pages. */
    (void)madvise(p, (size + SG__HUGE_PAGE - 1) & ~(SG__HUGE_PAGE - 1), MADV_HUGEPAGE); /* a refusal changes nothing */
#endif
    return p;
}

static void default_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

sg_ctx *sg_ctx_new(const sg_ctx_opts *opts)
{
    sg_ctx_opts o = {0};
    if (opts) o = *opts;
    if (!o.allocator.alloc || !o.allocator.free) {
        o.allocator.alloc = default_alloc;
        o.allocator.free = default_free;
        o.allocator.ud = NULL;
    }
    sg_ctx *ctx = o.allocator.alloc(o.allocator.ud, sizeof *ctx);
    if (!ctx) return NULL;
    memset(ctx, 0, sizeof *ctx);
    ctx->alloc = o.allocator;
    ctx->nondeterministic = o.nondeterministic != 0;
    ctx->grad_enabled = true;
    sg_ctx_set_threads(ctx, o.threads);
    uint64_t s = o.seed ? o.seed : 42;
    for (int i = 0; i < 4; i++) ctx->rng[i] = splitmix64(&s);
    return ctx;
}

void sg_ctx_free(sg_ctx *ctx)
{
    if (!ctx) return;
    /* The tape first, so that nothing below waits for it (and what the caller freed
     * during the step goes); then the optimizers: they hold parameters and their state is
     * persistent tensors. */
    sg_tape_reset(ctx);
    while (ctx->optims) sg_optim_free(ctx->optims);
    while (ctx->persistent) {
        ctx->persistent->owner_frees = false; /* the context's end frees what owners left */
        sg_tensor_free(ctx->persistent);
    }
    sg__arena_free_all(ctx);
    sg__free(ctx, ctx->store);
    sg_allocator a = ctx->alloc;
    a.free(a.ud, ctx);
}
