/* Step arena: a bump allocator for tape tensors and nodes.
 * Invariants: allocations are 64-byte aligned; sg__arena_reset is O(1) when one chunk
 * served the whole step (the steady state). When a step needed several chunks, the reset
 * replaces them with one chunk as large as the step's total, so the next step of the
 * same size allocates nothing. */
#include "core/core.h"

#include <stdint.h>

/* In a build with AddressSanitizer the bytes of a chunk that are not handed out are
 * poisoned, and sg__arena_reset poisons everything handed out in the step, so a tape
 * tensor used after sg_tape_reset is reported as a use-after-poison; an allocation
 * unpoisons exactly the bytes asked for. Elsewhere these are no-ops. */
#if defined(__SANITIZE_ADDRESS__)
#define SG__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SG__ASAN 1
#endif
#endif
#ifdef SG__ASAN
#include <sanitizer/asan_interface.h>
#define SG__POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define SG__UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SG__POISON(p, n) ((void)(p), (void)(n))
#define SG__UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define SG__ALIGN 64
#define SG__MIN_CHUNK ((size_t)1 << 16)

struct sg__chunk {
    sg__chunk *next;
    size_t cap, used;
    unsigned char *base; /* aligned start of the usable bytes */
};

static sg__chunk *chunk_new(sg_ctx *ctx, size_t cap)
{
    size_t hdr = (sizeof(sg__chunk) + SG__ALIGN - 1) & ~(size_t)(SG__ALIGN - 1);
    if (cap > SIZE_MAX - hdr - SG__ALIGN) return sg__fail(ctx, SG_ERR_NOMEM, "arena chunk of %zu bytes is too large", cap);
    unsigned char *raw = sg__malloc(ctx, hdr + cap + SG__ALIGN);
    if (!raw) return NULL;
    sg__chunk *c = (sg__chunk *)raw;
    uintptr_t b = ((uintptr_t)(raw + sizeof(sg__chunk)) + SG__ALIGN - 1) & ~(uintptr_t)(SG__ALIGN - 1);
    c->base = (unsigned char *)b;
    c->next = NULL;
    c->cap = cap;
    c->used = 0;
    SG__POISON(c->base, cap);
    return c;
}

void *sg__arena_alloc(sg_ctx *ctx, size_t size)
{
    sg__arena *a = &ctx->arena;
    if (size > SIZE_MAX - SG__ALIGN) return sg__fail(ctx, SG_ERR_NOMEM, "tape allocation of %zu bytes is too large", size);
    const size_t asked = size;
    size = (size + SG__ALIGN - 1) & ~(size_t)(SG__ALIGN - 1);
    if (size == 0) size = SG__ALIGN;
    sg__chunk *c = a->head;
    if (!c || c->used + size > c->cap) {
        size_t cap = c ? c->cap * 2 : SG__MIN_CHUNK;
        if (cap < size) cap = size;
        sg__chunk *n = chunk_new(ctx, cap);
        if (!n) return NULL;
        if (c) c->next = n;
        else a->first = n;
        a->head = c = n;
    }
    void *p = c->base + c->used;
    SG__UNPOISON(p, asked);
    c->used += size;
    a->used_total += size;
    if (a->used_total > a->high_water) a->high_water = a->used_total;
    return p;
}

void sg__arena_reset(sg_ctx *ctx)
{
    sg__arena *a = &ctx->arena;
    if (a->first && a->first->next) {
        size_t total = 0;
        for (sg__chunk *c = a->first; c; c = c->next) total += c->cap;
        sg__arena_free_all(ctx);
        /* A failed consolidation only costs a later regrowth: keep the caller's status. */
        int status = ctx->status;
        char message[sizeof ctx->message];
        memcpy(message, ctx->message, sizeof message);
        a->first = a->head = chunk_new(ctx, total);
        ctx->status = status;
        memcpy(ctx->message, message, sizeof message);
    }
    if (a->first) {
        SG__POISON(a->first->base, a->first->cap);
        a->first->used = 0;
    }
    a->head = a->first;
    a->used_total = 0;
}

void sg__arena_free_all(sg_ctx *ctx)
{
    sg__arena *a = &ctx->arena;
    sg__chunk *c = a->first;
    while (c) {
        sg__chunk *n = c->next;
        SG__UNPOISON(c->base, c->cap);
        sg__free(ctx, c);
        c = n;
    }
    a->first = a->head = NULL;
    a->used_total = 0;
}

size_t sg__arena_capacity(const sg_ctx *ctx)
{
    size_t total = 0;
    for (const sg__chunk *c = ctx->arena.first; c; c = c->next) total += c->cap;
    return total;
}
