/* The core layer's private header: the tensor and context structures, allocator hooks and
 * byte accounting, the step arena, dense tensor construction, errors, dtype helpers and the
 * one parallel loop. Everything above core includes this; it includes only the public
 * header. (Layer order: src/README.md.)
 *
 * Invariants:
 * - A tensor's `ctx` never changes. Tape tensors (persistent == 0) and their data live in
 *   the context's arena and die at sg_tape_reset; persistent tensors are malloc'd through
 *   the allocator hooks and are linked in ctx->persistent so sg_ctx_free can release them.
 * - Dense tensors are contiguous row-major over `shape`; `data` may point into another
 *   tensor's buffer (views) and then owns_data == 0, or into the caller's memory
 *   (sg_tensor_wrap: persistent, borrows_data == 1, owns_data == 0).
 * - A COO tensor keeps `indices` (sparse_dim, nnz) int64 and `values` (nnz, dense dims)
 *   as dense tensors; `shape` is the dense meaning's shape.
 * - `node` is the op that produced a tensor on the current tape (NULL for leaves); the
 *   node type belongs to the autograd layer (src/autograd/tape.h).
 */
#ifndef SG_CORE_H
#define SG_CORE_H

#include "sgrad.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

typedef struct sg_node sg_node;

struct sg_tensor {
    sg_ctx *ctx;
    sg_dtype dtype;
    sg_layout layout;
    int ndim;
    int64_t shape[SG_MAX_DIMS];
    int64_t numel; /* elements of the dense meaning */

    void *data; /* dense: the elements; COO: NULL */
    bool uniform; /* dense gradients inside a backward only: every element equals data[0],
                     the one element stored (sg__tmp_uniform); sg__expand_uniform makes
                     the full tensor for code that reads elements */
    sg_tensor *expanded; /* uniform only: its full form shared by the tensors that took it
                            unowned (sg__accum_grad), made once */

    /* COO only */
    int sparse_dim, dense_dim;
    int64_t nnz;
    sg_tensor *indices; /* (sparse_dim, nnz) int64 */
    sg_tensor *values;  /* (nnz, dense...) */
    bool coalesced;

    /* memory */
    bool persistent; /* from the allocator, freed by sg_tensor_free */
    bool owns_data;  /* persistent only: data was allocated with the tensor */
    bool borrows_data; /* persistent only: data is the caller's (sg_tensor_wrap), never
                          freed here; owns_data is then 0 */
    bool owner_frees; /* an optimizer's state or a word-vector table: sg_tensor_free refuses
                         it; its owner clears this and frees it */
    sg_tensor *prev_persistent, *next_persistent;
    bool released; /* freed by the caller while the tape still used it (sg_tensor_free,
                      src/autograd/tape.c): a dead handle whose memory the tape's nodes
                      may still read, destroyed at sg_tape_reset */
    sg_tensor *next_released; /* ctx->released's link */

    /* autograd */
    bool requires_grad; /* leaf: set by the user; non-leaf: some input requires grad */
    sg_node *node;      /* producing op on the current tape, NULL for leaves */
    sg_tensor *grad;    /* accumulated gradient (dense or COO), NULL if none */
    bool grad_owned;    /* grad's buffers are ours to modify in place */
    bool in_store;      /* leaf is listed in ctx's gradient store */
    uint32_t visit;     /* backward traversal mark (compared with ctx->visit_epoch) */
    int64_t rows_unique_lb; /* COO grads: a lower bound on their unique rows known from a
                               coalesce (0: unknown); read by the compaction rule */
    int64_t nnz_cap;        /* COO grads built by accumulation: entries their index and
                               value buffers can hold (>= nnz); 0: exactly nnz */

    /* optimizer bookkeeping for a parameter: owned and freed by the optimizer that set it.
     * When set it starts with an sg__param_owner (autograd/tape.h), through which
     * sg_tensor_free unregisters the tensor from its optimizer first. */
    void *optim_state;
};

/* ---- arena (src/core/arena.c): bump allocator, reset in O(1), 64-byte aligned */
typedef struct sg__chunk sg__chunk;
typedef struct {
    sg__chunk *head;     /* current chunk */
    sg__chunk *first;
    size_t used_total;   /* bytes handed out since the last reset */
    size_t high_water;   /* most bytes handed out in one step so far */
} sg__arena;

/* ---- context */

/* The file output hook: write(2)'s meaning (bytes written, or -1 with errno set). Set only
 * by tests, for fault injection (src/io/io_test.h). */
typedef long (*sg__write_fn)(void *ud, int fd, const void *buf, size_t n);

struct sg_ctx {
    sg_allocator alloc;
    sg__write_fn write_fn; /* file output hook, NULL: write(2) (src/io/io_test.h) */
    void *write_ud;
    int threads;
    int nondeterministic;
    uint64_t rng[4];

    int status;
    char message[256];

    size_t bytes_in_use, peak_bytes;

    sg__arena arena;
    int64_t n_nodes;
    sg_node *last_node; /* the newest node on the tape; each links to the one before */
    bool grad_enabled;
    uint32_t visit_epoch;

    /* work queued by sg__defer during the current backward */
    struct sg__deferred *deferred, *deferred_tail;

    /* gradient store: leaves with a gradient, in order of arrival */
    sg_tensor **store;
    int64_t store_len, store_cap;

    sg_tensor *persistent; /* list of live persistent tensors */
    sg_optim *optims;      /* live optimizers, linked and unlinked by src/optim (opaque
                              here); sg_ctx_free frees them before the tensors */
    /* What the caller freed while the tape still used it, released by sg_tape_reset:
     * tensors (linked by next_released) and optimizers that a recorded fused op calls
     * (linked by src/optim, which sets release_optims to free them). */
    sg_tensor *released;
    sg_optim *optims_released;
    void (*release_optims)(sg_ctx *ctx);
    bool fused_checking;   /* the tape's check pass over deferred fused updates runs:
                              sg__fused_apply_rows validates instead of writing */
};

/* ---- errors: record and return NULL / the code */
void *sg__fail(sg_ctx *ctx, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int sg__failc(sg_ctx *ctx, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- memory */
void *sg__malloc(sg_ctx *ctx, size_t size); /* allocator hooks, counted; NULL + NOMEM */
void *sg__calloc(sg_ctx *ctx, size_t n, size_t size);
/* Room for one more element in arr (len used of *cap, elements of `elem` bytes): returns
 * arr itself if it has room, else a copy with double the capacity (first: the initial
 * one; arr is freed and *cap updated), or NULL (SG_ERR_NOMEM, arr unchanged). */
void *sg__grow(sg_ctx *ctx, void *arr, int64_t *cap, int64_t len, size_t elem, int64_t first);
void sg__free(sg_ctx *ctx, void *p); /* NULL: no-op */
void *sg__arena_alloc(sg_ctx *ctx, size_t size); /* NULL + NOMEM; memory not zeroed */
void sg__arena_reset(sg_ctx *ctx);
void sg__arena_free_all(sg_ctx *ctx);
size_t sg__arena_capacity(const sg_ctx *ctx);

/* ---- tensor construction (tape tensors unless said) */
/* Unlinks persistent t from its context and frees it and its buffers. t must no longer be
 * listed by any higher layer: sg_tensor_free (src/autograd/tape.c) sees to that. */
void sg__tensor_destroy(sg_tensor *t);
/* Dense tape tensor, data uninitialised (zeroed when `zero`). */
sg_tensor *sg__tmp(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape, bool zero);
sg_tensor *sg__tmp_like(const sg_tensor *t, bool zero); /* dense, t's dtype and shape */
/* A uniform tape tensor of t's dtype and shape, every element v, storing one element
 * (a sum's or mean's gradient, so that it costs no pass over the summed tensor). Only the
 * backward engine and the ops whose nodes set accepts_uniform_gout ever see one. */
sg_tensor *sg__tmp_uniform(const sg_tensor *t, double v);
/* The full dense tape tensor of uniform u (a fill). */
sg_tensor *sg__expand_uniform(const sg_tensor *u);
/* Dense tape tensor header over borrowed data (a view). */
sg_tensor *sg__view(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape, void *data);
/* Unchecked COO tape tensor over the given parts (no copy, no validation): for the
 * library's own hot paths. indices (sparse_dim, nnz) int64, values (nnz, dense...). */
sg_tensor *sg__coo_wrap(sg_ctx *ctx, int ndim, const int64_t *shape, int sparse_dim,
                        sg_tensor *indices, sg_tensor *values, bool coalesced);
/* Persistent COO tensor with uninitialised indices (sparse_dim, nnz) int64 and values
 * (nnz, dense...) of dtype; it owns both (sg_tensor_free releases them). For constructors
 * that validate user data and then fill them. */
sg_tensor *sg__coo_new_persistent(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                                  int sparse_dim, int64_t nnz);
int64_t sg__numel(int ndim, const int64_t *shape);
bool sg__same_shape(const sg_tensor *a, const sg_tensor *b);
/* Product of dims [from, to). */
int64_t sg__prod(const int64_t *shape, int from, int to);
/* Element i of dense t's data as a double (any dtype). */
double sg__dense_at(const sg_tensor *t, int64_t i);
/* SG_OK for a dense float tensor; else records LAYOUT or DTYPE naming fn (NULL: SG_ERR_NULL). */
int sg__check_float_dense(const sg_tensor *t, const char *fn);
/* Formats a shape as "(2,3)" into buf. */
const char *sg__shape_str(const sg_tensor *t, char *buf, size_t n);
/* "f32", "f64", "i32", "i64" ("?" for anything else), for messages. */
const char *sg__dtype_name(sg_dtype d);
/* *out = a * b for a, b >= 0; false (out untouched) when the product exceeds INT64_MAX. */
static inline bool sg__mul_fits(int64_t a, int64_t b, int64_t *out)
{
    if (a != 0 && b > INT64_MAX / a) return false;
    *out = a * b;
    return true;
}

/* ---- threads */
int sg__threads(const sg_ctx *ctx);
/* Most threads a context runs on: this many times the processors online (at least 64,
 * and no more than OpenMP's thread limit), so that a request for thousands of threads
 * never makes the OpenMP runtime fail to create them and exit the process. */
#define SG__THREADS_PER_PROC 4
#define SG__THREADS_FLOOR 64

/* ---- small helpers shared by modules */
/* Status for a backward or kernel to return after an allocation came back NULL: the one
 * recorded on ctx, NOMEM if none was. */
static inline int sg__status_or_nomem(const sg_ctx *ctx)
{
    return ctx->status != SG_OK ? ctx->status : SG_ERR_NOMEM;
}

/* Hints to fetch the cache line at address a for reading (SG__PREFETCH) or writing
 * (SG__PREFETCH_W); no effect where the compiler has none. */
#if defined(__GNUC__)
#define SG__PREFETCH(a) __builtin_prefetch(a)
#define SG__PREFETCH_W(a) __builtin_prefetch((a), 1)
#else
#define SG__PREFETCH(a) ((void)(a))
#define SG__PREFETCH_W(a) ((void)(a))
#endif
/* The cache lines that bytes [p, p + n) span, one at a time (a row that does not start on
 * a line spans one line more than its length: its last one is prefetched too). */
#define SG__CACHE_LINE 64
#define SG__FOR_LINES(q, p, n)                                                                      \
    for (const char *q = (const char *)((uintptr_t)(p) & ~(uintptr_t)(SG__CACHE_LINE - 1)),         \
                    *q##_end = (const char *)(p) + (n);                                            \
         q < q##_end; q += SG__CACHE_LINE)

/* Prefetches the first `bytes` bytes of row `row` (rows of rowbytes) of base, for reading. */
static inline void sg__prefetch_row(const void *base, int64_t row, size_t rowbytes, size_t bytes)
{
    const char *p = (const char *)base + (size_t)row * rowbytes;
    SG__FOR_LINES(q, p, bytes) SG__PREFETCH(q);
}

/* ---- per-CPU variants of the hot kernels (src/core/cpu.c; docs/blas.md, "Kernels per CPU")
 *
 * The library is built for the baseline of its target (x86-64: SSE2) unless SGRAD_NATIVE
 * asks for -march=native. The hot kernels (the direct matmul and its transposes, the
 * optimizers' row kernels, the sgns forward, the embedding gathers, the elementwise ops,
 * index-add, the NaN/Inf scans: docs/blas.md lists them) are compiled once per level below
 * and the level is chosen at run time, once, from the CPU:
 *   SG__KERNELS_BASE    the build's own flags (SSE2 on plain x86-64; any other CPU)
 *   SG__KERNELS_AVX2    AVX2, FMA, BMI1/2, POPCNT (x86-64-v3's vector part: Haswell, Zen)
 *   SG__KERNELS_AVX512  those plus AVX-512 F, CD, BW, DQ, VL (x86-64-v4: Skylake-SP on)
 * A level is compiled only where the compiler has the target attribute (gcc, clang) on
 * x86-64 and the build's flags do not already include it (a -march=native build on an
 * AVX-512 machine has the base variant only); elsewhere, or with SG_NO_KERNEL_VARIANTS
 * defined, SG__HOT_CLONES makes the plain function.
 *
 * Every variant gives bitwise the same results: the library is compiled with
 * -ffp-contract=off (no fused multiply-add unless written as fma(), and none is), and no
 * kernel's order of operations depends on the vector width (a reduction keeps a fixed
 * number of lanes and a fixed tree, whatever width the compiler vectorises it with; gcc and
 * clang vectorise no other floating-point reduction without -ffast-math or an omp simd
 * reduction, and the library uses neither). Library calls (expf, BLIS) are the same code
 * under every variant. So the variant, like the thread count, changes the speed only, and
 * a -march=native build gives the same bits too; tests/test_kernel_variants.c runs every
 * kernel under every level the CPU has and compares the bits. A sanitizer build keeps the
 * variants (ASan and clang's TSan run them; an ifunc-based dispatch would not start under
 * TSan, src/core/cpu.c).
 *
 * Use: the kernel's body is written once as a static always-inline function NAME__body
 * (SG__HOT_BODY) returning void; SG__HOT_CLONES(NAME, (params), (args)) then defines the
 * variants NAME__base, NAME__avx2, NAME__avx512, each the body inlined under its target,
 * and static void NAME(params), which calls the variant of sg__kernels_level(). Dispatch
 * costs a load and a branch per call: kernels are called once per chunk of work. */
#define SG__KERNELS_BASE 0
#define SG__KERNELS_AVX2 1
#define SG__KERNELS_AVX512 2
#define SG__KERNELS_LEVELS 3

#if !defined(SG_NO_KERNEL_VARIANTS) && defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute)
#if __has_attribute(target)
#if !(defined(__AVX2__) && defined(__FMA__) && defined(__BMI2__))
#define SG__VARIANT_AVX2 1
#endif
#if !(defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512BW__) && defined(__AVX512DQ__))
#define SG__VARIANT_AVX512 1
#endif
#endif
#endif

/* The level the kernels run at: the best this build and CPU have (sg__kernels_best), lower
 * when the environment says SGRAD_KERNELS=base or avx2, or as a test forced it. */
int sg__kernels_level(void);
/* The best level this build has a variant for and this CPU runs. */
int sg__kernels_best(void);
/* Whether this build has a variant for `level` and this CPU runs it (the base: always). */
bool sg__kernels_has(int level);
/* Tests and benchmarks: run every kernel at `level` from now on (process-wide; -1: back to
 * the default). False, and nothing changed, unless sg__kernels_has(level). */
bool sg__kernels_force(int level);
/* "base", "avx2", "avx512" ("?" for anything else). */
const char *sg__kernels_name(int level);

#if defined(__GNUC__)
#define SG__HOT_BODY static inline __attribute__((always_inline))
#else
#define SG__HOT_BODY static inline
#endif
/* The features each level compiles for and src/core/cpu.c checks the CPU for, one list. */
#define SG__TARGET_AVX2_ __attribute__((target("avx2,fma,bmi,bmi2,popcnt")))
#define SG__TARGET_AVX512_ \
    __attribute__((target("avx2,fma,bmi,bmi2,popcnt,avx512f,avx512cd,avx512vl,avx512bw,avx512dq")))
#ifdef SG__VARIANT_AVX2
#define SG__CLONE_AVX2_(name, params, args) \
    SG__TARGET_AVX2_ static void name##__avx2 params { name##__body args; }
#define SG__CALL_AVX2_(name, args) \
    if (level_ == SG__KERNELS_AVX2) {  \
        name##__avx2 args;             \
        return;                        \
    }
#else
#define SG__CLONE_AVX2_(name, params, args)
#define SG__CALL_AVX2_(name, args)
#endif
#ifdef SG__VARIANT_AVX512
#define SG__CLONE_AVX512_(name, params, args) \
    SG__TARGET_AVX512_ static void name##__avx512 params { name##__body args; }
#define SG__CALL_AVX512_(name, args)     \
    if (level_ == SG__KERNELS_AVX512) { \
        name##__avx512 args;            \
        return;                         \
    }
#else
#define SG__CLONE_AVX512_(name, params, args)
#define SG__CALL_AVX512_(name, args)
#endif
#if defined(SG__VARIANT_AVX2) || defined(SG__VARIANT_AVX512)
#define SG__HOT_CLONES(name, params, args)                \
    static void name##__base params { name##__body args; } \
    SG__CLONE_AVX2_(name, params, args)                   \
    SG__CLONE_AVX512_(name, params, args)                 \
    static void name params                               \
    {                                                     \
        const int level_ = sg__kernels_level();           \
        SG__CALL_AVX512_(name, args)                      \
        SG__CALL_AVX2_(name, args)                        \
        (void)level_;                                     \
        name##__base args;                                \
    }
#else
#define SG__HOT_CLONES(name, params, args) \
    static void name params { name##__body args; }
#endif

/* ---- dtype dispatch: runs BODY with T defined as float or double */
#define SG__DISPATCH_FLOAT(dtype, T, BODY)         \
    do {                                           \
        if ((dtype) == SG_F32) {                   \
            typedef float T;                       \
            BODY                                   \
        } else {                                   \
            typedef double T;                      \
            BODY                                   \
        }                                          \
    } while (0)

/* Reads index i of an int32/int64 tensor's data. */
static inline int64_t sg__idx_at(const sg_tensor *t, int64_t i)
{
    return t->dtype == SG_I64 ? ((const int64_t *)t->data)[i]
                              : (int64_t)((const int32_t *)t->data)[i];
}
static inline bool sg__is_float(sg_dtype d) { return d == SG_F32 || d == SG_F64; }
static inline bool sg__is_int(sg_dtype d) { return d == SG_I32 || d == SG_I64; }

/* ---- common input checks for ops: return NULL from the op on failure */
/* Returns NULL from the op when t is NULL (whoever made t NULL recorded why). */
#define SG__CHECK_NOTNULL(t)                                   \
    do {                                                       \
        if (!(t)) return NULL;                                 \
    } while (0)

/* ---- the one parallel loop (src/core/parallel.c) */
/* Work on items [lo, hi) of a kernel; ud is the kernel's job description. */
typedef void (*sg__range_fn)(void *ud, int64_t lo, int64_t hi);

/* Runs fn over [0, n) in chunks of `grain` items (the last chunk may be shorter), spread
 * over the context's threads when there are two chunks or more. Chunk boundaries depend
 * only on n and grain, never on the thread count, so a kernel whose chunks write disjoint
 * outputs (or per-chunk partials combined in chunk order) is bitwise deterministic. Chunk
 * c is [c grain, (c+1) grain), so lo / grain is its index: a kernel keeps per-chunk partials
 * (histograms, counts) in slot lo / grain of an array of (n + grain - 1) / grain.
 * A single chunk runs inline, so a small tensor's kernel costs a direct call that the
 * compiler may inline; more chunks go through sg__parallel_chunks. */
void sg__parallel_chunks(sg_ctx *ctx, int64_t n, int64_t grain, sg__range_fn fn, void *ud);
/* True when the library was called from inside the caller's (active) OpenMP parallel
 * region: its loops then run as tasks of that region (sg__parallel_chunks), so a kernel
 * that cuts its work by the thread count may cut finer, for the idle threads to share. */
bool sg__in_caller_region(void);
static inline void sg__parallel_for(sg_ctx *ctx, int64_t n, int64_t grain, sg__range_fn fn, void *ud)
{
    if (n <= 0) return;
    if (n <= grain) {
        fn(ud, 0, n);
        return;
    }
    sg__parallel_chunks(ctx, n, grain, fn, ud);
}

/* sg__parallel_for with the chunks taken by whichever thread is free instead of spread
 * evenly: for kernels whose chunks take unequal times (random table rows, where some
 * chunks wait on memory much longer). The same chunks, so the same results. */
void sg__parallel_for_dynamic(sg_ctx *ctx, int64_t n, int64_t grain, sg__range_fn fn, void *ud);

/* A chunk's test for sg__parallel_any: true when items [lo, hi) hold what the kernel
 * looks for. */
typedef bool (*sg__range_test)(void *ud, int64_t lo, int64_t hi);

/* True when test holds for some chunk of [0, n) (chunked as by sg__parallel_for; the
 * answer does not depend on the thread count). For checks that scan an input in parallel,
 * e.g. for an index out of range, before a serial pass finds and reports the first one. */
bool sg__parallel_any(sg_ctx *ctx, int64_t n, int64_t grain, sg__range_test test, void *ud);

/* The grain policy: about SG__GRAIN elements of work per chunk, so small tensors stay on
 * one thread and big ones split evenly. */
#define SG__GRAIN ((int64_t)1 << 15)

/* Items per chunk for a kernel whose item costs about `len` elements of work (a row of
 * len elements): about SG__GRAIN elements per chunk, at least one item. */
static inline int64_t sg__row_grain(int64_t len)
{
    return len > 0 && len < SG__GRAIN ? SG__GRAIN / len : 1;
}

/* Threads sg__parallel_for(ctx, n, grain, ...) runs on: the context's threads, at most one
 * per chunk (so 1 when n <= grain). A kernel may take a cheaper one-thread algorithm when
 * this is 1, provided both give bitwise the same result. */
int sg__parallel_threads(const sg_ctx *ctx, int64_t n, int64_t grain);

/* Runs fn over [0, n) cut into at most one contiguous range per thread: as many ranges as
 * sg__parallel_threads(ctx, work, SG__GRAIN), capped at n, with even cuts (one call
 * fn(ud, 0, n) when that is 1). For kernels in which every range scans the whole input
 * and keeps what falls in its range (a range of destination rows, as in the deterministic
 * index-add of docs/design.md, "Determinism"): such a range costs the full scan however
 * short it is, so there are never more ranges than threads. `work` is the kernel's total
 * elements of work. The cuts depend on the thread count, so fn must compute every output
 * the same way whichever range holds it (then the result is bitwise identical for any
 * thread count). */
void sg__parallel_ranges(sg_ctx *ctx, int64_t n, int64_t work, sg__range_fn fn, void *ud);

#endif
