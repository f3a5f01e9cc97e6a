/* sgrad: reverse-mode automatic differentiation with first-class sparse gradients.
 *
 * One public header, in sections: status codes, context, tensors, sparse tensors,
 * autograd, dense ops, sparse ops, gradcheck, optimizers, io (word vectors, checkpoints).
 *
 * Conventions (they hold for every function below unless its comment says otherwise):
 * - Shapes are written (A,B,...) and are row-major and contiguous.
 * - A function that builds a tensor returns NULL on error and records a status code and a
 *   message on the context (sg_ctx_status / sg_ctx_message). An op given a NULL input
 *   returns NULL, so a chain of ops is checked once at its end.
 * - Op outputs ("tape tensors") live in the context's step arena until sg_tape_reset;
 *   tensors made with sg_tensor_new* are persistent and are freed with sg_tensor_free.
 * - On error nothing that the caller can see is changed: in-place functions validate
 *   everything before they write. The library never exits or aborts on bad input.
 */
#ifndef SGRAD_H
#define SGRAD_H

#include <stdbool.h> /* sg_complex_mul's flag */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SG_API marks the functions the shared library exports; the library is built with
 * hidden visibility, so nothing else (no internal sg__ name) is exported. */
#if defined(__GNUC__)
#define SG_API __attribute__((visibility("default")))
#else
#define SG_API
#endif

#define SG_VERSION_MAJOR 0
#define SG_VERSION_MINOR 1
#define SG_VERSION_PATCH 0
#define SG_MAX_DIMS 4

/* ---------------------------------------------------------------- status codes */

/* One list generates the enum and the strings (sg_status_string). */
#define SG_STATUS_LIST(X)                                              \
    X(SG_OK, "ok")                                                     \
    X(SG_ERR_NOMEM, "out of memory")                                   \
    X(SG_ERR_NULL, "NULL argument")                                    \
    X(SG_ERR_SHAPE, "shape mismatch")                                  \
    X(SG_ERR_DTYPE, "wrong dtype")                                     \
    X(SG_ERR_LAYOUT, "wrong layout (dense vs sparse)")                 \
    X(SG_ERR_INDEX, "index out of range")                              \
    X(SG_ERR_ARG, "invalid argument")                                  \
    X(SG_ERR_VALUE, "invalid value (NaN, infinity or out of domain)")  \
    X(SG_ERR_STATE, "invalid state")                                   \
    X(SG_ERR_IO, "input/output error")                                 \
    X(SG_ERR_FORMAT, "corrupt or unsupported file format")             \
    X(SG_ERR_GRADCHECK, "gradient check failed")

typedef enum {
#define SG__STATUS_ENUM(name, str) name,
    SG_STATUS_LIST(SG__STATUS_ENUM)
#undef SG__STATUS_ENUM
    SG_STATUS_COUNT
} sg_status;

/* A static string for a status code; "unknown status" for codes outside the list. */
SG_API const char *sg_status_string(int status);
/* The library's version as a static string "MAJOR.MINOR.PATCH" (the SG_VERSION_* of the
 * header it was built with, and CMake's project version): lets a client that loads the
 * shared library at run time (the Python package) ask which one it got. */
SG_API const char *sg_version(void);

/* ---------------------------------------------------------------- context */

typedef struct sg_ctx sg_ctx;

/* Allocator hooks: alloc returns memory aligned to at least 16 bytes or NULL; free takes
 * what alloc returned (never NULL). ud is passed back unchanged. */
typedef struct {
    void *(*alloc)(void *ud, size_t size);
    void (*free)(void *ud, void *ptr);
    void *ud;
} sg_allocator;

typedef struct {
    sg_allocator allocator; /* both NULL: malloc/free (Linux: blocks >= 4 MiB advised
                               for transparent huge pages, MADV_HUGEPAGE) */
    int threads;            /* OpenMP threads for parallel kernels; <= 0: all available;
                               clamped (see sg_ctx_set_threads) */
    int nondeterministic;   /* 0 (default): results bitwise identical across runs and
                               thread counts; 1: allow faster racy (Hogwild-style) paths */
    uint64_t seed;          /* seed of the context's random generator; 0 picks 42 */
} sg_ctx_opts;

/* A new context; opts NULL gives the defaults above. Returns NULL only if the first
 * allocation fails. */
SG_API sg_ctx *sg_ctx_new(const sg_ctx_opts *opts);
/* Frees the context: first every optimizer still alive (as sg_optim_free), then every
 * persistent tensor still alive, the tape and the arena. NULL: no-op. Every handle the
 * context gave out dies with it: do not call sg_optim_free, sg_tensor_free or
 * sg_wordvec_free on one afterwards (free them before, or just drop the handles). */
SG_API void sg_ctx_free(sg_ctx *ctx);

/* For ctx NULL: sg_ctx_status gives SG_ERR_NULL, sg_ctx_message "NULL context",
 * sg_ctx_threads -1, sg_ctx_deterministic 0; the setters do nothing. */
SG_API int sg_ctx_status(const sg_ctx *ctx);          /* last error code, SG_OK if none */
SG_API const char *sg_ctx_message(const sg_ctx *ctx); /* last error message, "" if none */
SG_API void sg_ctx_clear_error(sg_ctx *ctx);
/* Records status (an SG_ERR_ code) and message (copied, truncated to the context's
 * buffer) as the context's last error, as the library's own functions do: for modules
 * built on the public API (sgrad_dist). Returns status; ctx NULL: SG_ERR_NULL. */
SG_API int sg_ctx_set_error(sg_ctx *ctx, int status, const char *message);

SG_API int sg_ctx_threads(const sg_ctx *ctx);
/* threads <= 0: all available (OpenMP's default, OMP_NUM_THREADS). A request is clamped
 * to max(64, 4 x the processors online), and to OpenMP's thread limit, so that asking for
 * thousands of threads cannot make the OpenMP runtime fail and exit the process;
 * sg_ctx_threads gives the count in use. Without OpenMP the count is 1. Called from
 * inside the caller's own OpenMP parallel region, the library's loops run as tasks of
 * that region (its idle threads take them up; results are the same bits), not as nested
 * regions. */
SG_API void sg_ctx_set_threads(sg_ctx *ctx, int threads);
SG_API int sg_ctx_deterministic(const sg_ctx *ctx); /* 1 unless opts.nondeterministic */

/* Bytes currently obtained from the allocator, and the most ever held at once since the
 * context was made or since the last sg_ctx_reset_peak. */
typedef struct {
    size_t bytes_in_use;
    size_t peak_bytes;
    size_t arena_bytes; /* capacity of the step arena */
} sg_mem_stats;
SG_API sg_mem_stats sg_ctx_mem_stats(const sg_ctx *ctx);
SG_API void sg_ctx_reset_peak(sg_ctx *ctx);

/* Random numbers from the context's generator (xoshiro256**; deterministic per seed). */
SG_API uint64_t sg_rand_u64(sg_ctx *ctx);
SG_API double sg_rand_uniform(sg_ctx *ctx); /* in [0, 1) */

/* ---------------------------------------------------------------- tensors */

/* The _INVALID values are never a tensor's: accessors return them for a NULL tensor. */
typedef enum { SG_DTYPE_INVALID = -1, SG_F32, SG_F64, SG_I32, SG_I64 } sg_dtype;
typedef enum { SG_LAYOUT_INVALID = -1, SG_DENSE, SG_COO } sg_layout;

typedef struct sg_tensor sg_tensor;

/* Persistent dense tensor of zeros, owned by the caller until sg_tensor_free (or the
 * context's end). ndim in 0..SG_MAX_DIMS; every dimension >= 0. */
SG_API sg_tensor *sg_tensor_new(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape);
/* Same, with data copied from `data` (numel elements of dtype). */
SG_API sg_tensor *sg_tensor_from_data(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                               const void *data);
/* A persistent dense tensor over the caller's memory, without a copy: `data` holds numel
 * elements of dtype, row-major, aligned to the element size. The tensor borrows it:
 * sg_tensor_free (and sg_ctx_free) frees only the tensor, never data. Lifetime rule: data
 * must stay valid (and not be freed or moved) until the tensor is freed, or its context;
 * whatever the library writes to the tensor (an optimizer step on it as a parameter, a
 * fill, a checkpoint load) lands in data. Otherwise it is a tensor like sg_tensor_new's:
 * it can require grad and be an optimizer's parameter. Errors: SG_ERR_NULL (data NULL),
 * SG_ERR_ARG (data not aligned to the element size), as sg_tensor_new for the rest. */
SG_API sg_tensor *sg_tensor_wrap(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                                 void *data);
/* A tape tensor of zeros: lives in the step arena until sg_tape_reset (no malloc in a
 * steady-state step). For per-step inputs such as index batches. Using a tape tensor after
 * the reset is an error the library cannot see (its memory holds the next step's data);
 * the AddressSanitizer build (SGRAD_SANITIZE) reports it as a use-after-poison. */
SG_API sg_tensor *sg_tensor_new_tmp(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape);
/* Frees a persistent tensor (and its gradient state). NULL or a tape tensor: no-op. A
 * parameter of an optimizer is first unregistered from it (as if it had never been added:
 * its state is freed, sg_optim_param_count drops by one, the later parameters move down
 * one index). An optimizer's state tensor (sg_optim_state) or a word-vector table
 * (sg_wordvec_vectors) is refused: SG_ERR_STATE on its context, nothing freed (its owner
 * frees it). A tensor freed while the current tape holds nodes (an op may read it, or a
 * view of it, in the backward) dies for the caller at once (as above; it gets no gradient
 * and no fused update) but its memory is released at sg_tape_reset. */
SG_API void sg_tensor_free(sg_tensor *t);

/* Marks a leaf tensor as a parameter whose gradient sg_backward stores. Returns t, or NULL
 * (SG_ERR_DTYPE) for integer tensors, (SG_ERR_ARG) for non-leaf tensors. */
SG_API sg_tensor *sg_tensor_requires_grad(sg_tensor *t, int requires_grad);
SG_API int sg_tensor_get_requires_grad(const sg_tensor *t); /* 0 for NULL */

/* Accessors. None records an error (a NULL tensor has no context to record it on); for
 * t NULL each returns a value no tensor has: -1 for a count or size, SG_DTYPE_INVALID,
 * SG_LAYOUT_INVALID, NULL for a pointer, NaN for an element, 0 for a yes/no question. */
SG_API sg_ctx *sg_tensor_ctx(const sg_tensor *t);
SG_API sg_dtype sg_tensor_dtype(const sg_tensor *t);
SG_API sg_layout sg_tensor_layout(const sg_tensor *t);
SG_API int sg_tensor_ndim(const sg_tensor *t); /* 0 for a scalar */
/* Dimension i; negative i counts from the end; -1 when i is outside [-ndim, ndim). */
SG_API int64_t sg_tensor_dim(const sg_tensor *t, int i);
/* ndim dimensions, valid as long as t (not NULL for a 0-d tensor). */
SG_API const int64_t *sg_tensor_shape(const sg_tensor *t);
SG_API int64_t sg_tensor_numel(const sg_tensor *t); /* elements of the dense meaning */
/* Dense data pointer (row-major), NULL for COO tensors. */
SG_API void *sg_tensor_data(sg_tensor *t);
SG_API float *sg_tensor_f32(sg_tensor *t);  /* NULL unless dense f32 */
SG_API double *sg_tensor_f64(sg_tensor *t); /* NULL unless dense f64 */
SG_API size_t sg_dtype_size(sg_dtype dtype); /* bytes per element; 0 for an unknown dtype */

/* Element i (flat, of the dense meaning) as double; COO tensors sum their duplicates.
 * NaN for t NULL or i outside [0, numel). For tests and small tensors, not hot paths. */
SG_API double sg_tensor_get(const sg_tensor *t, int64_t i);
/* Fills a dense float tensor: sg_tensor_fill sets every element; sg_tensor_fill_uniform
 * draws from U[lo, hi) with the context's generator. Return SG_OK or an error code. */
SG_API int sg_tensor_fill(sg_tensor *t, double value);
SG_API int sg_tensor_fill_uniform(sg_tensor *t, double lo, double hi);
/* Copies src's dense meaning into dense dst of the same shape (dtype converted). */
SG_API int sg_tensor_copy(sg_tensor *dst, const sg_tensor *src);

/* ---------------------------------------------------------------- sparse (COO) tensors */

/* A COO tensor of shape (S0..S{sparse_dim-1}, D0..D{dense_dim-1}) holds nnz entries:
 * indices (sparse_dim, nnz) int64 and values (nnz, D0, ...). Duplicates are allowed and sum.
 * is_coalesced (indices sorted lexicographically and unique) is only set by code that
 * established it. */

/* Validating constructor for user data: copies indices and values into a persistent COO
 * tensor. Errors: SG_ERR_INDEX for an index < 0 or >= its dimension, SG_ERR_SHAPE,
 * SG_ERR_DTYPE (values must be f32 or f64). */
SG_API sg_tensor *sg_coo_new(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                      int sparse_dim, int64_t nnz, const int64_t *indices, const void *values);
/* Same checks and copies, into a tape tensor (the step arena, until sg_tape_reset): for a
 * per-step sparse tensor, e.g. a gradient put in place with sg_tensor_set_grad. */
SG_API sg_tensor *sg_coo_new_tmp(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                                 int sparse_dim, int64_t nnz, const int64_t *indices,
                                 const void *values);
/* COO accessors; t NULL or dense is no COO tensor: the counts give -1, is_coalesced 0 and
 * the views NULL. */
SG_API int sg_coo_sparse_dim(const sg_tensor *t);
SG_API int sg_coo_dense_dim(const sg_tensor *t);
SG_API int64_t sg_coo_nnz(const sg_tensor *t);
SG_API int sg_coo_is_coalesced(const sg_tensor *t);
/* Borrowed views of a COO tensor's parts: indices (sparse_dim, nnz) int64, values
 * (nnz, dense dims...). Valid as long as the tensor. */
SG_API sg_tensor *sg_coo_indices(sg_tensor *t);
SG_API sg_tensor *sg_coo_values(sg_tensor *t);

/* Out-of-place coalesce: sorts by index (LSD radix sort) and sums duplicates, in their
 * original order (bitwise identical for any thread count). Returns a tape tensor, or t
 * itself if t is already coalesced. Not differentiable: the new tensor is not recorded
 * on the tape (it is a detached leaf that does not require grad), so no gradient flows
 * from it back to t, and whether the result is t itself (which keeps its own autograd
 * history) or a detached copy depends only on t's flag. For a differentiable path use
 * sg_to_dense, or sg_sparse_mask for a sparse result. Scratch: 16 bytes per entry (32
 * when the rows or nnz exceed 2^32) from the step arena. SG_ERR_LAYOUT for dense t. */
SG_API sg_tensor *sg_coalesce(sg_tensor *t);
/* dst += src for dense dst and COO src of the same shape: an index-add that needs no sort.
 * Parallel over destination rows; bitwise identical for any thread count. Validates src's
 * indices first and changes nothing on error. Not recorded on the tape. Errors:
 * SG_ERR_NULL, SG_ERR_LAYOUT, SG_ERR_DTYPE (one float dtype), SG_ERR_SHAPE, SG_ERR_INDEX. */
SG_API int sg_index_add_(sg_tensor *dst, const sg_tensor *src);
/* dst += alpha * src, same rules as sg_index_add_; SG_ERR_VALUE for a non-finite alpha. */
SG_API int sg_index_add_scaled_(sg_tensor *dst, const sg_tensor *src, double alpha);

/* ---------------------------------------------------------------- autograd */

/* Backward from a scalar (numel 1) loss: seeds d loss = 1. Visits only the nodes reachable
 * from loss; gradients of leaves that require grad go to the gradient store, accumulating
 * with what is already there. Its time and memory are those of the nodes reachable from
 * loss, whatever else the tape holds: K backwards on K micro-batches before one step
 * (gradient accumulation, no sg_tape_reset between them) cost K times one backward. */
SG_API int sg_backward(sg_tensor *loss);
/* Backward from any output with a given incoming gradient of out's shape and dtype (dense
 * or COO). out may be a leaf that requires grad: then grad_out is added to its stored
 * gradient (as a gradient reaching it from an op would be) and nothing else runs.
 * grad_out is borrowed, not copied: a leaf's gradient may be grad_out itself, so keep it
 * alive and unchanged until sg_tape_reset. Errors: SG_ERR_NULL, SG_ERR_DTYPE (grad_out's
 * dtype differs from out's), SG_ERR_SHAPE (its shape differs), SG_ERR_STATE (out does not
 * require grad: a leaf without requires_grad, or an op result none of whose inputs needed
 * a gradient). */
SG_API int sg_backward_grad(sg_tensor *out, sg_tensor *grad_out);

/* The gradient accumulated for t since the last sg_tape_reset: dense or COO (both mean the
 * same dense array), or NULL if none reached t. Owned by the tape; a later backward that
 * adds to t's gradient may change or replace it, so ask again after each backward. */
SG_API sg_tensor *sg_tensor_grad(const sg_tensor *t);
/* Replaces the gradient stored for leaf t (requires grad) by grad: dense or COO, t's
 * shape and dtype, borrowed (never written by the library: a later accumulation copies
 * it first), so keep it alive and unchanged until sg_tape_reset. t joins the gradient
 * store if it had no gradient. For code that transforms gradients between sg_backward
 * and sg_optim_step (a distributed reduce). Errors: SG_ERR_NULL, SG_ERR_DTYPE (dtype
 * differs), SG_ERR_SHAPE (shape differs), SG_ERR_ARG (t not a leaf, or of another context
 * than grad), SG_ERR_STATE (t does not require grad); nothing changes on error. */
SG_API int sg_tensor_set_grad(sg_tensor *t, sg_tensor *grad);
/* The gradient store lists only the leaves that received a gradient, in the order they got
 * it: iteration is O(leaves with gradients). */
SG_API int64_t sg_grads_count(const sg_ctx *ctx);                /* -1 for ctx NULL */
SG_API sg_tensor *sg_grads_param(const sg_ctx *ctx, int64_t i); /* NULL out of range */

/* Drops the tape: every tape tensor, every node and every stored gradient. O(1) in the
 * tape's size (plus O(leaves with gradients)); keeps the arena's memory for the next step. */
SG_API void sg_tape_reset(sg_ctx *ctx);
/* While disabled, ops record nothing (inference). Returns the previous setting. */
SG_API int sg_set_grad_enabled(sg_ctx *ctx, int enabled);
/* Number of nodes on the tape now; -1 for ctx NULL. */
SG_API int64_t sg_tape_nodes(const sg_ctx *ctx);

/* ---------------------------------------------------------------- dense ops */
/* Every op has a backward. Binary ops need equal dtypes and broadcast like numpy
 * (shapes aligned at the end; a dimension of 1 stretches).
 * Operands are dense f32/f64 (reshape, transpose and concat also move integer tensors);
 * a COO operand is accepted only where a comment says so. A dim may be negative (counted
 * from the end). Results have the operands' dtype and are bitwise identical for any
 * thread count. Errors (NULL returned, nothing recorded on the tape): SG_ERR_SHAPE,
 * SG_ERR_DTYPE (mixed dtypes, integers where floats are needed), SG_ERR_ARG (a dim out of
 * range, operands of two contexts), SG_ERR_LAYOUT (COO where not accepted), SG_ERR_INDEX
 * (cross_entropy targets, gather's index, narrow's range; checked before anything is
 * written). Means of nothing are NaN. */

/* add also takes COO operands of equal shapes: COO + COO is a COO concatenation, COO +
 * dense is dense. */
SG_API sg_tensor *sg_add(sg_tensor *a, sg_tensor *b);
SG_API sg_tensor *sg_sub(sg_tensor *a, sg_tensor *b);
SG_API sg_tensor *sg_mul(sg_tensor *a, sg_tensor *b);
SG_API sg_tensor *sg_div(sg_tensor *a, sg_tensor *b);
/* Elementwise max / min, broadcasting like sg_add (a gradient summed back to each
 * operand's shape). As PyTorch: a NaN operand wins (is returned), and the gradient goes to
 * the larger (smaller) operand, split g/2 and g/2 between a and b where they are equal;
 * with a NaN both get g. */
SG_API sg_tensor *sg_maximum(sg_tensor *a, sg_tensor *b);
SG_API sg_tensor *sg_minimum(sg_tensor *a, sg_tensor *b);
/* cond ? x : y elementwise; cond, x and y broadcast together (numpy rules, as sg_add).
 * x and y: dense f32/f64 of one dtype, the result's. cond: a dense 0/1 mask of any dtype
 * (f32, f64, i32, i64), nonzero meaning x; it gets no gradient and must stay alive and
 * unchanged until the backward. The gradient g goes to x where cond is 1 and to y where it
 * is 0 (each summed back to its operand's shape). Errors, before anything is written:
 * SG_ERR_VALUE when cond holds anything but 0 and 1 (NaN included; the message names the
 * first such element), SG_ERR_SHAPE, SG_ERR_DTYPE (x, y), SG_ERR_LAYOUT, SG_ERR_ARG. */
SG_API sg_tensor *sg_where(sg_tensor *cond, sg_tensor *x, sg_tensor *y);
SG_API sg_tensor *sg_scale(sg_tensor *a, double s); /* also for COO a */
/* Accepted shapes (no other broadcasting; SG_ERR_SHAPE for the rest):
 *   (M,K)   @ (K,N)   -> (M,N)
 *   (B,M,K) @ (B,K,N) -> (B,M,N)    one product per batch
 *   (B,M,K) @ (K,N)   -> (B,M,N)    b shared by every batch, as in numpy; b's gradient
 *                                    sums over the batch
 *   COO (M,K) @ dense (K,N) -> dense (M,N)
 * Dense products and their backward (dA = G B^T, dB = A^T G) run on a BLAS (BLIS) in a
 * build with one (CMake SGRAD_BLAS), cut into fixed 256 x 256 blocks of the output over the
 * context's threads, and on a hand-written kernel below about 2^14 multiply-adds (or
 * without a BLAS); which one depends on the shape alone, so results are bitwise the same
 * for any thread count (on one machine; docs/blas.md). */
SG_API sg_tensor *sg_matmul(sg_tensor *a, sg_tensor *b);
SG_API sg_tensor *sg_sum(sg_tensor *a);  /* all elements -> shape (); also for COO a */
SG_API sg_tensor *sg_mean(sg_tensor *a); /* all elements -> shape () */
SG_API sg_tensor *sg_sum_dim(sg_tensor *a, int dim, int keepdim);
SG_API sg_tensor *sg_mean_dim(sg_tensor *a, int dim, int keepdim);
SG_API sg_tensor *sg_relu(sg_tensor *a);
SG_API sg_tensor *sg_sigmoid(sg_tensor *a);
SG_API sg_tensor *sg_tanh(sg_tensor *a);
SG_API sg_tensor *sg_exp(sg_tensor *a);
SG_API sg_tensor *sg_log(sg_tensor *a);
SG_API sg_tensor *sg_log_sigmoid(sg_tensor *a); /* stable: min(x,0) - log1p(exp(-|x|)) */
/* Same shape and dtype out. Gradients at the edges follow PyTorch: abs' is sign(x), 0 at
 * x == 0; sqrt's is g / (2 sqrt(x)), inf at 0, NaN below. */
SG_API sg_tensor *sg_abs(sg_tensor *a);
SG_API sg_tensor *sg_sqrt(sg_tensor *a);
SG_API sg_tensor *sg_sin(sg_tensor *a);
SG_API sg_tensor *sg_cos(sg_tensor *a);
/* x^exponent (C's pow in the dtype, the exponent rounded to it: a negative x to a
 * non-integer exponent is NaN). Gradient exponent * x^(exponent-1) * g; exactly 0 for
 * exponent 0, also at x == 0. */
SG_API sg_tensor *sg_pow(sg_tensor *a, double exponent);
/* min(max(x, *min), *max); either bound may be NULL (none), not both (SG_ERR_ARG). A NaN
 * bound is SG_ERR_VALUE (our choice); a NaN x stays NaN. min > max sets every element to
 * max, as PyTorch. The gradient passes where min <= x <= max (bounds included), else 0:
 * with min > max, 0 everywhere. */
SG_API sg_tensor *sg_clamp(sg_tensor *a, const double *min, const double *max);
/* softmax, log_softmax, cross_entropy and bce_with_logits (values and gradients) keep the
 * dtype's accuracy however large the logits are: only differences from the slice's
 * maximum enter (log_softmax = (x - max) - log1p(sum of exp(x - max) over the other
 * elements)), never a rounded max + log(sum), which loses ulp(max)/2 (2e-4 for f32 logits
 * near 1e4). */
SG_API sg_tensor *sg_softmax(sg_tensor *a, int dim);
SG_API sg_tensor *sg_log_softmax(sg_tensor *a, int dim);
/* logits (N,C), targets (N) int32/int64 in [0,C) -> mean over N of -log_softmax[target].
 * targets must stay alive and unchanged until the backward. */
SG_API sg_tensor *sg_cross_entropy(sg_tensor *logits, sg_tensor *targets);
/* logits and targets of one shape (targets float in [0,1]) -> mean BCE, stable. */
SG_API sg_tensor *sg_bce_with_logits(sg_tensor *logits, sg_tensor *targets);
/* (N,D) . (N,D) -> (N): row-wise dot products. */
SG_API sg_tensor *sg_rowdot(sg_tensor *a, sg_tensor *b);
/* Distances, complex products and ranking losses for knowledge-graph embeddings. 2-D
 * dense contiguous f32/f64 operands of one dtype; results bitwise identical for any thread
 * count. Errors (NULL, nothing recorded): SG_ERR_SHAPE, SG_ERR_DTYPE, SG_ERR_LAYOUT,
 * SG_ERR_ARG (a kind out of range, two contexts).
 * Distance kinds: L1 sum |a-b|; L2 sqrt(sum (a-b)^2), gradient 0 where the distance is 0
 * (as torch.cdist); COMPLEX: rows of D = 2K reals, columns [0,K) the real parts and [K,2K)
 * the imaginary parts, sum_k |a_k - b_k| with |.| the complex modulus, gradient 0 through
 * a term whose modulus is 0. */
typedef enum { SG_DIST_L1, SG_DIST_L2, SG_DIST_COMPLEX } sg_dist_kind;
/* a (M,D), b (N,D) -> (M,N): out[m][n] = dist(a[m], b[n]). D even for COMPLEX. */
SG_API sg_tensor *sg_cdist(sg_tensor *a, sg_tensor *b, sg_dist_kind kind);
/* a (M,D), b (M,D) -> (M): row m's dist(a[m], b[m]), same kinds and conventions. */
SG_API sg_tensor *sg_rowdist(sg_tensor *a, sg_tensor *b, sg_dist_kind kind);
/* a (M,2K), b (M,2K) (halves: real | imaginary) -> (M,2K): a * b, or a * conj(b) when
 * conj_b. Same shapes only. */
SG_API sg_tensor *sg_complex_mul(sg_tensor *a, sg_tensor *b, bool conj_b);
/* The ranking loss of one chunk (scores: higher is better).
 * pos (M), neg (M,N) -> scalar, the SUM over rows m of loss_m:
 *  SG_RANK_SOFTMAX:  logsumexp(pos_m, neg_m.) - pos_m
 *  SG_RANK_LOGISTIC: softplus(-pos_m) + mean_j softplus(neg_mj)
 *  SG_RANK_MARGIN:   sum_j relu(margin - pos_m + neg_mj)
 *  SG_RANK_SELFADV:  -logsigmoid(margin + pos_m) - sum_j w_mj logsigmoid(-neg_mj - margin),
 *                    w_m. = softmax_j(adv_temp * neg_mj), treated as a constant (no gradient)
 * skip_offset >= 0 masks entry (m, skip_offset + m) of neg (a chunk's own positive among its
 * in-chunk negatives): it takes no part (nor in N for means/softmax); -1: nothing masked.
 * A row left without negatives adds its positive term alone (LOGISTIC, SELFADV; 0 for
 * SOFTMAX and MARGIN). Computed in double, stably (logsumexp around the row maximum,
 * softplus and logsigmoid per sign); relu' and the kinks' gradients are 0 at 0. Gradients
 * flow to pos and neg. o NULL: SG_RANK_LOSS_OPTS_DEFAULT. Errors: SG_ERR_SHAPE,
 * SG_ERR_DTYPE, SG_ERR_LAYOUT, SG_ERR_ARG (a kind out of range, skip_offset < -1 or
 * skip_offset + M > N, a margin or adv_temp that is not finite). */
typedef enum { SG_RANK_SOFTMAX, SG_RANK_LOGISTIC, SG_RANK_MARGIN, SG_RANK_SELFADV } sg_rank_loss_kind;
typedef struct { sg_rank_loss_kind kind; double margin; double adv_temp; int64_t skip_offset; } sg_rank_loss_opts;
#define SG_RANK_LOSS_OPTS_DEFAULT {SG_RANK_SOFTMAX, 0.0, 1.0, -1}
SG_API sg_tensor *sg_ranking_loss(sg_tensor *pos, sg_tensor *neg, const sg_rank_loss_opts *o);
/* Views and copies. reshape: same numel, one dim may be -1; a view (no copy);
 * SG_ERR_SHAPE when the counts differ or the target's product overflows int64_t. */
SG_API sg_tensor *sg_reshape(sg_tensor *a, int ndim, const int64_t *shape);
/* Swaps two dims; a contiguous copy for dense a; 2-D COO a gives a COO result. */
SG_API sg_tensor *sg_transpose(sg_tensor *a, int dim0, int dim1);
/* Concatenates n tensors along dim 0 (other dims equal). */
SG_API sg_tensor *sg_concat(int n, sg_tensor *const *ts);

/* Along one dim (dense f32/f64 x; dim negative counts from the end; SG_ERR_ARG for a bad
 * dim, a 0-d x included). Gradients are dense; results bitwise identical for any thread
 * count. */
/* torch.gather: out[i][j][k] = x[index[i][j][k]][j][k] for dim 0 (likewise for the other
 * dims) -> index's shape. index: dense int32/int64 of x's rank, index.size(d) <= x.size(d)
 * for d != dim (any size along dim), entries in [0, x.size(dim)); it must stay alive and
 * unchanged until the backward. Every entry is checked before anything is written:
 * SG_ERR_INDEX names the first bad value and its position. Backward: a scatter-add of the
 * incoming gradient into zeros of x's shape (repeated indices sum, in ascending order
 * along dim; no atomics). Errors: SG_ERR_SHAPE, SG_ERR_INDEX, SG_ERR_DTYPE, SG_ERR_LAYOUT,
 * SG_ERR_ARG (dim, two contexts). */
SG_API sg_tensor *sg_gather(sg_tensor *x, int dim, sg_tensor *index);
/* Elements [start, start + length) of dim: a contiguous copy. start may be negative
 * (start + x.size(dim), as PyTorch); SG_ERR_INDEX unless 0 <= start and
 * start + length <= x.size(dim) then, length >= 0. x's gradient: the incoming gradient in
 * the range, zeros elsewhere. */
SG_API sg_tensor *sg_narrow(sg_tensor *x, int dim, int64_t start, int64_t length);
/* p-norm along dim, p = 1 or 2 only (else SG_ERR_ARG); accumulated in double (p = 2
 * rescaled by the largest magnitude where the sum of squares would overflow or underflow);
 * 0 over an empty dim. Gradient at the kink, as PyTorch: p = 1 gives g sign(x) with
 * sign(0) = 0; p = 2 gives g x / norm, and 0 where the norm is 0. */
SG_API sg_tensor *sg_norm_dim(sg_tensor *x, double p, int dim, int keepdim);
/* log(sum(exp(x))) along dim, stable: max + log1p(sum of exp(x - max) over the others).
 * As PyTorch: -inf where every element is -inf (and over an empty dim), +inf where one is
 * +inf, NaN where one is NaN. Backward g softmax(x) (so NaN where every element is -inf,
 * as PyTorch). */
SG_API sg_tensor *sg_logsumexp_dim(sg_tensor *x, int dim, int keepdim);
/* Maximum along dim -> values (differentiable, returned) and, when indices is not NULL,
 * *indices: an int64 tape tensor of the values' shape holding the position along dim of
 * each maximum (not differentiable; the backward reads it, so leave it unchanged; set to
 * NULL on error). Ties: the first maximum wins, and gets the whole gradient (the others
 * 0), as PyTorch; a NaN is the maximum (the first NaN). SG_ERR_SHAPE for an empty dim. */
SG_API sg_tensor *sg_max_dim(sg_tensor *x, int dim, int keepdim, sg_tensor **indices);

/* Dropout. training == 0 or p == 0: returns x itself (no copy, no node, no random draw).
 * Else each element is zeroed with probability p and kept ones are scaled by 1/(1-p)
 * (p == 1: all zeros); x's gradient is g times the same mask and scale. The mask comes
 * from one 64-bit key drawn from the context's generator per call with 0 < p < 1
 * (sg_rand_u64; p == 1 draws nothing) and a hash of (key, element): the same seed and
 * call sequence give the same mask for any thread count. Errors: SG_ERR_ARG (p outside
 * [0, 1] or NaN), SG_ERR_DTYPE, SG_ERR_LAYOUT. */
SG_API sg_tensor *sg_dropout(sg_tensor *x, double p, int training);
/* Layer normalisation over the last dim: (x - mean) / sqrt(var + eps) * weight + bias per
 * row, var the biased variance (as PyTorch), both accumulated in double. normalized_size
 * must be x's last dim (x of rank >= 1), else SG_ERR_SHAPE. weight and bias are optional
 * (NULL: none), each of shape (normalized_size) and x's dtype; x, weight and bias get
 * gradients. eps finite and >= 0, else SG_ERR_ARG. Errors also SG_ERR_SHAPE (weight,
 * bias), SG_ERR_DTYPE, SG_ERR_LAYOUT, SG_ERR_ARG (two contexts). */
SG_API sg_tensor *sg_layer_norm(sg_tensor *x, int64_t normalized_size, sg_tensor *weight,
                                sg_tensor *bias, double eps);

/* ---------------------------------------------------------------- sparse-gradient ops */

typedef struct {
    int64_t padding_idx; /* rows equal to this index give zero output rows and no
                            gradient; -1: none */
    double max_norm;     /* > 0: rows looked up are renormalised in place to this L2 norm
                            first (not differentiated, as in PyTorch); 0: off */
    struct sg_optim *fused; /* non-NULL: the backward applies this optimizer's update to
                               the rows directly and stores no gradient for W, which must
                               then be a parameter of that optimizer that requires grad
                               (a leaf: an update of a computed W would not reach the
                               tensors it came from), else SG_ERR_ARG */
} sg_embedding_opts;

/* W (V,D) dense, idx any shape (...) int32/int64 in [0,V) -> (..., D). W's gradient is a
 * COO (V,D) tensor whose values are the incoming gradient buffer and whose indices are
 * idx (no copy for int64 idx), uncoalesced. With padding_idx, entries equal to it are left
 * out of the gradient (only then are indices and values copied). opts NULL: defaults
 * above. idx must stay alive and unchanged until sg_tape_reset (W's gradient borrows
 * it until then). Errors: SG_ERR_LAYOUT,
 * SG_ERR_DTYPE, SG_ERR_SHAPE (W not 2-D, idx over 3-D), SG_ERR_INDEX (checked before
 * max_norm writes anything), SG_ERR_ARG (padding_idx outside [0,V) and not -1, max_norm
 * negative or not finite, fused with a W that is not a parameter of that optimizer
 * requiring grad). */
SG_API sg_tensor *sg_embedding(sg_tensor *W, sg_tensor *idx, const sg_embedding_opts *opts);

typedef enum { SG_BAG_SUM, SG_BAG_MEAN, SG_BAG_MAX } sg_bag_mode;
/* What the backward gives W's rows.
 * SG_BAG_GRAD_TRUE: the gradient of the forward (what sg_gradcheck checks).
 * SG_BAG_GRAD_WORD2VEC (SG_BAG_MEAN only, so never with per_sample_weights): NOT the
 *   gradient of the forward. Each entry of
 *   a bag that is not padding receives the bag's whole incoming gradient row, undivided
 *   by the bag's size, as word2vec.c's CBOW (cbow_mean), gensim and fastText update the
 *   context words; so a row's gradient is the sum, over the bag entries naming it, of
 *   their bags' gradient rows, while the true one is that sum divided by each bag's
 *   size. Padding entries still get nothing and still do not count in the mean. The
 *   forward is the mean either way. */
typedef enum { SG_BAG_GRAD_TRUE, SG_BAG_GRAD_WORD2VEC } sg_bag_grad;
typedef struct {
    sg_bag_mode mode;              /* how a bag's rows combine; default SG_BAG_MEAN (as
                                      PyTorch's EmbeddingBag) */
    sg_tensor *per_sample_weights; /* (N) dense, W's dtype: entry i's row is scaled by it
                                      (SG_BAG_SUM only); it gets a dense gradient. NULL:
                                      none */
    int64_t padding_idx;           /* entries equal to this row are left out of their bag
                                      (not counted by the mean, never the max) and give no
                                      gradient; -1: none */
    int include_last_offset;       /* nonzero: offsets has B+1 entries and the last is N
                                      (CSR style, as PyTorch's option); 0: B entries */
    struct sg_optim *fused;        /* as sg_embedding_opts.fused: the backward applies this
                                      optimizer's update to the rows (deferred to the end
                                      of the backward) and stores no gradient for W */
    sg_bag_grad grad;              /* the backward's rule for W; default SG_BAG_GRAD_TRUE */
} sg_embedding_bag_opts;
#define SG_EMBEDDING_BAG_OPTS_DEFAULT {SG_BAG_MEAN, NULL, -1, 0, NULL, SG_BAG_GRAD_TRUE}

/* W (V,D), idx (N) flat int32/int64, offsets int32/int64 the start of each bag
 * (non-decreasing, offsets[0] == 0; see include_last_offset) -> (B,D). Empty bags (and
 * bags of padding only) give zero rows. opts NULL: SG_EMBEDDING_BAG_OPTS_DEFAULT (mean).
 * W's gradient is COO (V,D) with one row per entry of idx that is not padding (indices:
 * idx, no copy for int64 idx without padding); in max mode each output element's gradient
 * goes to the first entry that attains the maximum. idx and offsets must stay alive and
 * unchanged until sg_tape_reset (W's gradient borrows idx). Errors: SG_ERR_INDEX (idx
 * outside [0,V), offsets outside [0,N]), SG_ERR_ARG (offsets[0] != 0, decreasing offsets,
 * a last offset other than N with include_last_offset, weights outside sum mode, unknown
 * mode or grad rule, SG_BAG_GRAD_WORD2VEC outside mean mode, padding_idx outside [0,V) and not -1, fused with a W that is not a parameter of
 * that optimizer requiring grad), SG_ERR_SHAPE (also: include_last_offset with no
 * offsets), SG_ERR_DTYPE, SG_ERR_LAYOUT; nothing is recorded on error. */
SG_API sg_tensor *sg_embedding_bag(sg_tensor *W, sg_tensor *idx, sg_tensor *offsets,
                                   const sg_embedding_bag_opts *opts);
/* Rows idx (K) of x along dim (dim 0: sparse gradient for x) -> x's shape with dim = K.
 * x dense float; idx 1-D int32/int64 in [0, x's dim). dim 0: x's gradient is COO with rows
 * idx and the incoming gradient as values (no copy); other dims: a dense gradient.
 * Errors: SG_ERR_INDEX, SG_ERR_ARG (dim), SG_ERR_SHAPE, SG_ERR_LAYOUT, SG_ERR_DTYPE. */
SG_API sg_tensor *sg_index_select(sg_tensor *x, int dim, sg_tensor *idx);
/* Rows [start, end) of x's leading dimension: a view; x's gradient is sparse (COO rows
 * [start, end) whose values are the incoming gradient). x dense, ndim >= 1; SG_ERR_INDEX
 * unless 0 <= start <= end <= x's first dim. */
SG_API sg_tensor *sg_slice(sg_tensor *x, int64_t start, int64_t end);

/* COO and its backward.
 * Sparse means dense: every op on COO tensors (these and the COO paths of sg_add, sg_scale,
 * sg_transpose, sg_matmul, sg_sum) has a non-masked backward, so gradients reach
 * unspecified elements too; only sg_sparse_mask restricts a gradient to a pattern. Hence
 * sg_sum of a COO leaf gives it a dense gradient of the leaf's shape (every element's
 * derivative is 1, an O(numel) array), and sg_matmul(COO a, b) gives a a dense
 * G @ B^T (O(M K N)). When every path from a COO tensor to the leaves goes through a
 * sg_sparse_mask (possibly via add, scale, transpose), only its gradient on its own
 * pattern can matter, and these two backwards compute just that: O(nnz).
 *
 * COO -> dense (dense x: x itself). Backward is non-masked: the full incoming gradient
 * flows to x, unspecified elements included. */
SG_API sg_tensor *sg_to_dense(sg_tensor *x);
/* Dense -> COO with the given sparse_dim (1..ndim, else SG_ERR_ARG), keeping the nonzero
 * (sub)rows, coalesced; a COO x of that sparse_dim is returned as is (of another:
 * SG_ERR_LAYOUT). Backward: the incoming gradient flows to x unchanged. */
SG_API sg_tensor *sg_to_sparse(sg_tensor *x, int sparse_dim);
/* x (dense or COO) restricted to mask's (COO) pattern: a COO result with mask's indices
 * and x's values there. Backward restricts the gradient to the pattern (masked). The
 * pattern is mask's coalesced indices (a position named twice counts once; mask's values
 * are ignored); a COO x needs a sparse_dim <= mask's. x's gradient is COO on the pattern,
 * O(pattern). Errors: SG_ERR_LAYOUT, SG_ERR_SHAPE, SG_ERR_DTYPE. */
SG_API sg_tensor *sg_sparse_mask(sg_tensor *x, sg_tensor *mask);

/* ---------------------------------------------------------------- word2vec loss */

typedef struct {
    struct sg_optim *fused; /* non-NULL: the backward applies this optimizer's update to
                               W's rows directly (deferred to the end of the backward, as
                               sg_embedding_opts.fused) and stores no gradient for W (h
                               still gets its gradient); W must be a parameter of that
                               optimizer that requires grad (a leaf) and h must lie outside
                               W's memory, else SG_ERR_ARG; NULL: W gets a COO gradient */
} sg_sgns_opts;

/* Negative-sampling loss of word2vec (skip-gram and CBOW) for B examples:
 *   loss = -sum_i [ log sigmoid(W[t_i0] . h_i) + sum_{j>=1} log sigmoid(-W[t_ij] . h_i) ]
 * h (B,D) dense float (the input vectors, e.g. from sg_embedding or sg_embedding_bag),
 * W (V,D) dense float of h's dtype (the output table), targets (B,T) int32/int64 in
 * [0,V) with T >= 1: column 0 the true target, columns 1.. the negatives -> scalar.
 * Gradients: h gets a dense (B,D) one; W a COO (V,D) one with B*T rows (the targets,
 * uncoalesced; indices borrowed from int64 targets, which must then stay alive and
 * unchanged until sg_tape_reset) or, with opts->fused, the optimizer's update. Fused into
 * plain SGD (no momentum, no weight decay) the update costs O(B*T*D) without writing the
 * gradient rows out, is bitwise identical for any thread count, and with a
 * nondeterministic context runs Hogwild-style (racy row updates, faster); other
 * optimizers get the gradient rows written out. opts NULL: no fusion.
 * Errors: SG_ERR_SHAPE, SG_ERR_DTYPE, SG_ERR_LAYOUT, SG_ERR_INDEX (a target out of range),
 * SG_ERR_ARG (fused with a W that is not a parameter of that optimizer requiring grad, or
 * with h in W's memory). */
SG_API sg_tensor *sg_sgns_loss(sg_tensor *h, sg_tensor *W, sg_tensor *targets,
                        const sg_sgns_opts *opts);

/* Hierarchical softmax loss (word2vec's -hs, fastText's -loss hs) for B examples, each
 * with a path of inner tree nodes and a 0/1 code per node:
 *   loss = sum_i sum_{e in path i} softplus(-z_e),  z_e = +-(W[nodes[e]] . h_i)
 * with + for code 1 and - for code 0 (-log sigmoid(s) or -log sigmoid(-s)).
 * h (B,D) dense float, W (N,D) of h's dtype (one row per inner node); nodes (P) and codes
 * (P) int32/int64; offsets (B) int32/int64: example i's path is entries [offsets[i],
 * offsets[i+1]) (the last one's runs to P; offsets[0] == 0, non-decreasing; an empty path
 * adds 0) -> scalar. Gradients: h a dense (B,D) one; W a COO (N,D) one with exactly P rows,
 * the path nodes (uncoalesced; indices borrowed from int64 nodes, which must then stay
 * alive and unchanged until sg_tape_reset). Not fused: the optimizer steps W's rows from
 * the stored gradient. Errors (nothing recorded): SG_ERR_SHAPE, SG_ERR_DTYPE,
 * SG_ERR_LAYOUT, SG_ERR_INDEX (a node outside [0,N)), SG_ERR_VALUE (a code other than 0
 * or 1), SG_ERR_ARG (bad offsets, path entries with B = 0, operands of two contexts).
 * One-vs-all (fastText's -loss ova) needs no op of its own: it is sg_bce_with_logits on
 * the (B,C) logits with 0/1 targets, times B*C (a sum over labels and examples). */
SG_API sg_tensor *sg_hs_loss(sg_tensor *h, sg_tensor *W, sg_tensor *nodes, sg_tensor *codes,
                             sg_tensor *offsets);

/* ---------------------------------------------------------------- gradcheck */

typedef sg_tensor *(*sg_gradcheck_fn)(sg_ctx *ctx, sg_tensor *const *inputs, void *ud);

typedef struct {
    double eps;  /* finite-difference step; 0: 1e-6 */
    double atol; /* 0: 1e-5 */
    double rtol; /* 0: 1e-3 */
    int masked;  /* for COO inputs: 0 perturbs every element of the dense meaning;
                    1 only the specified elements. The analytical gradient is still
                    compared at every element: at an unspecified one the numerical
                    derivative is 0, so masked = 1 passes only if backward gives 0
                    there (true when every path from the input goes through
                    sg_sparse_mask; a non-masked op such as sg_to_dense fails it) */
} sg_gradcheck_opts;

typedef struct {
    int passed;
    int input;          /* where the worst mismatch is: input number, */
    int64_t element;    /* flat element of that input, */
    int64_t output;     /* flat element of the output */
    double analytical;  /* d output / d element by backward */
    double numerical;   /* by central differences */
    double max_abs_err; /* worst |analytical - numerical| over everything */
} sg_gradcheck_result;

/* Compares the full Jacobian of f (via one backward per output element) with central
 * finite differences for every input that requires grad; inputs must be tensors of ctx
 * (else SG_ERR_ARG) and, where they require grad, persistent f64 tensors (dense or COO).
 * Resets the tape. Returns SG_OK if all match within atol + rtol * |numerical|,
 * SG_ERR_GRADCHECK if not (details in res), or another error. */
SG_API int sg_gradcheck(sg_ctx *ctx, sg_gradcheck_fn f, void *ud, int n_inputs,
                 sg_tensor *const *inputs, const sg_gradcheck_opts *opts,
                 sg_gradcheck_result *res);

/* ---------------------------------------------------------------- optimizers */
/* An optimizer updates the parameters registered with it from the context's gradient store.
 *
 * Cost: a step visits only the registered parameters that received a gradient since the
 * last sg_tape_reset and, for a COO gradient, only the rows it names: O(parameters with
 * gradients + rows touched), whatever the number of registered parameters. Call
 * sg_optim_step after sg_backward and before sg_tape_reset (gradients live on the tape).
 *
 * Rows: a parameter of shape (R, ...) is R rows of numel/R elements (a 0-d one is one row);
 * a COO gradient names rows by its first sparse index; duplicates sum. Linear updates (SGD
 * without momentum or weight decay) apply an uncoalesced gradient as it is; every other
 * update sums duplicate rows first.
 *
 * Steps: the optimizer counts its steps t = 1, 2, ... (sg_optim_steps) and takes the
 * learning rate of step t from its schedule. A parameter with no gradient at a step is not
 * stepped (as in PyTorch) and each parameter counts its own steps (state "step"). Within a
 * parameter that got a COO gradient, the rows it does not name got a zero gradient:
 * - SGD is exact lazy: with momentum and/or weight decay a zero gradient still moves a row,
 *   and that effect has a closed form (a 2x2 linear recurrence per element). Each row keeps
 *   the parameter step it was last brought to (state "last_step"); when a row is next
 *   read by an op (sg_embedding, sg_embedding_bag, sg_index_select and sg_sgns_loss bring
 *   the rows they name up to date first; an op that reads the whole tensor brings every
 *   row), touched by a step, or at sg_optim_flush, the skipped steps are applied at once,
 *   each with its own learning rate, so the parameters and the gradients computed from
 *   them equal those of dense SGD to float rounding. Reading the data directly
 *   (sg_tensor_data) sees the rows as last brought: flush first. Cost per
 *   touched row: O(log skipped) for a constant learning rate, O(learning-rate changes
 *   among the skipped steps) under a schedule (the optimizer keeps those changes per
 *   parameter until the next flush, 16 bytes each).
 * - Adagrad and row-wise Adagrad leave untouched rows as they are (a zero gradient adds
 *   nothing to the accumulator); weight decay, when set, is applied to touched rows only.
 * - Adam (and AdamW) is dense Adam: a COO gradient is densified and every element steps
 *   (O(numel)). LazyAdam is the O(touched) variant; see sg_optim_lazy_adam.
 *
 * State: per-parameter state lives in persistent tensors (sg_optim_state) that a checkpoint
 * can save and restore with the optimizer's step count (sg_optim_steps/_set_steps). Call
 * sg_optim_flush before saving an SGD optimizer with momentum or weight decay by hand
 * (sg_checkpoint_save needs no flush: it keeps the lazy bookkeeping).
 *
 * Lifetime: a parameter belongs to at most one optimizer. Freeing a parameter
 * (sg_tensor_free) unregisters it from its optimizer; sg_ctx_free frees the optimizers
 * still alive. Any order of sg_tensor_free, sg_optim_free and sg_ctx_free is safe, as long
 * as no handle is used after the call that freed it (sg_ctx_free frees them all), also
 * between an op and its backward: the tape keeps what its ops use until sg_tape_reset.
 * An optimizer is used by one thread at a time; its kernels use the context's threads and
 * are bitwise deterministic for any thread count. Optimizers that sum duplicate rows keep
 * 8 bytes of scratch per row of their largest parameter (grouping without a sort); a step
 * allocates from the step arena only (exact lazy SGD under a changing learning rate also
 * grows its history, amortised).
 *
 * Fused updates: an op that can update a table in its own backward (sg_embedding,
 * sg_embedding_bag, sg_sgns_loss) takes the optimizer in its options (`fused = opt`); its
 * backward then hands the table's gradient rows to opt's row update, applied once the
 * whole backward has run, and stores no gradient for the table (which must be a parameter
 * of opt that requires grad; the op checks). The update uses the learning rate of the
 * coming sg_optim_step (steps + 1) and counts as one step of the table (a table updated by
 * two fused ops in one step takes two steps); call sg_optim_step after the backward as
 * usual so that the step count advances.
 *
 * NaN/Inf guard (opt-in, sg_optim_set_check_finite): the step, or the fused update, that
 * would apply a gradient holding a NaN or an infinity is refused with SG_ERR_VALUE.
 *
 * Errors (every function below): SG_ERR_NULL for a NULL optimizer or parameter,
 * SG_ERR_ARG for out-of-range options, SG_ERR_VALUE for a learning rate (schedule result)
 * that is negative or not finite (or a non-finite gradient under the guard),
 * SG_ERR_NOMEM; nothing is changed on error. */

typedef struct sg_optim sg_optim;

/* SGD as in PyTorch: g += weight_decay * w; with momentum, v = g at a parameter's first
 * step and v = momentum * v + (1 - dampening) * g after; g = nesterov ? g + momentum * v
 * : v; w -= lr * g. lr, momentum, weight_decay >= 0; nesterov needs momentum > 0 and
 * dampening 0. */
typedef struct {
    double lr;
    double momentum;
    double dampening;
    double weight_decay;
    int nesterov;
} sg_sgd_opts;
#define SG_SGD_OPTS_DEFAULT {1e-3, 0.0, 0.0, 0.0, 0}

/* Adagrad as in PyTorch: clr = lr / (1 + (step - 1) * lr_decay); g += weight_decay * w;
 * sum += g * g; w -= clr * g / (sqrt(sum) + eps); sum starts at initial_accumulator.
 * Row-wise Adagrad (one accumulator per row, as in table-batched embedding trainers):
 * acc[r] += mean over the row of g * g; w[r] -= clr * g / (sqrt(acc[r]) + eps). */
typedef struct {
    double lr;
    double lr_decay;
    double weight_decay;
    double initial_accumulator;
    double eps;
} sg_adagrad_opts;
#define SG_ADAGRAD_OPTS_DEFAULT {1e-2, 0.0, 0.0, 0.0, 1e-10}

/* Adam as in PyTorch: with t the parameter's step, g += weight_decay * w (or, with
 * decoupled = 1 (AdamW), w *= 1 - lr * weight_decay); m = beta1 m + (1 - beta1) g;
 * v = beta2 v + (1 - beta2) g^2; w -= lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t))
 * + eps). beta1, beta2 in [0, 1); eps, weight_decay >= 0. */
typedef struct {
    double lr;
    double beta1, beta2;
    double eps;
    double weight_decay;
    int decoupled;
} sg_adam_opts;
#define SG_ADAM_OPTS_DEFAULT {1e-3, 0.9, 0.999, 1e-8, 0.0, 0}

/* Constructors; opts NULL gives the defaults above. Return NULL on error (recorded on ctx).
 * State per parameter: SGD "momentum_buffer" (param's shape, with momentum) and
 * "last_step" (rows, int64, with momentum or weight decay); Adagrad "sum" (param's shape);
 * row-wise Adagrad "sum" (rows); Adam "exp_avg", "exp_avg_sq" (param's shape); LazyAdam
 * the same plus "row_step" (rows, int64); every optimizer "step" ((), int64). */
SG_API sg_optim *sg_optim_sgd(sg_ctx *ctx, const sg_sgd_opts *opts);
SG_API sg_optim *sg_optim_adagrad(sg_ctx *ctx, const sg_adagrad_opts *opts);
SG_API sg_optim *sg_optim_rowwise_adagrad(sg_ctx *ctx, const sg_adagrad_opts *opts);
SG_API sg_optim *sg_optim_adam(sg_ctx *ctx, const sg_adam_opts *opts);
/* LazyAdam, for sparse gradients: only the rows a gradient names step, each row counts its
 * own steps ("row_step") and its bias correction uses that count. It differs from dense
 * Adam in that an untouched row does not move (dense Adam keeps moving it along its
 * decaying first moment) and its moments do not decay while untouched. A row first seen at
 * global step t gets the bias correction of a first step, so its first update is lr *
 * sign(g) (for |g| >> eps). Implementations that use the global step t for every row scale
 * that first update by (1 - beta1) / (1 - beta1^t) * sqrt((1 - beta2^t) / (1 - beta2)):
 * with the default betas 0.74 at t = 2, 0.48 at t = 12 (the smallest), above 1 from
 * t = 106 on, 2.5 at t = 1000, tending to (1 - beta1) / sqrt(1 - beta2) = 3.16; so it is
 * damped early in training and amplified later. Weight decay applies to touched rows only.
 * With a dense gradient every row is touched and LazyAdam equals Adam. */
SG_API sg_optim *sg_optim_lazy_adam(sg_ctx *ctx, const sg_adam_opts *opts);
/* Frees the optimizer and its state tensors and detaches its parameters (they stay alive).
 * NULL: no-op. Not after sg_ctx_free of its context, which already freed it. While an op
 * fused into opt (fused = opt) is on the tape, the free completes at sg_tape_reset: until
 * then that op's backward still applies opt's update and the parameters stay attached. */
SG_API void sg_optim_free(sg_optim *opt);

/* Registers a persistent dense f32/f64 parameter and allocates its state (zeros; Adagrad's
 * accumulators at initial_accumulator). SG_ERR_STATE if param already belongs to an
 * optimizer (this one included), SG_ERR_LAYOUT / SG_ERR_DTYPE / SG_ERR_ARG for a COO,
 * integer or tape tensor. O(1) in the number of parameters. */
SG_API int sg_optim_add_param(sg_optim *opt, sg_tensor *param);
SG_API int64_t sg_optim_param_count(const sg_optim *opt); /* -1 if opt is NULL */
SG_API sg_tensor *sg_optim_param(const sg_optim *opt, int64_t i); /* NULL if out of range */

/* One step over the gradient store (see the section's head). Parameters in the store that
 * are not registered with opt are skipped. Returns SG_OK or an error code. */
SG_API int sg_optim_step(sg_optim *opt);
/* The NaN/Inf guard, off by default (on != 0 turns it on). While on, sg_optim_step first
 * checks every gradient value it is about to apply (dense values, or a COO gradient's
 * values) and a fused update (sg_embedding, sg_embedding_bag, sg_sgns_loss with fused =
 * opt) every gradient row it would apply; one value that is NaN or infinite refuses the
 * whole step (or the whole backward's fused updates, of every optimizer) with SG_ERR_VALUE
 * and a message naming the parameter by its index in opt (as sg_optim_param) and the
 * first bad element. Nothing changes then: parameters, state, step counts. Costs one
 * parallel read of the gradient values per step. SG_OK, or SG_ERR_NULL for opt NULL. */
SG_API int sg_optim_set_check_finite(sg_optim *opt, int on);
/* Brings every row of every parameter up to date (exact lazy SGD); O(rows of the
 * parameters that have rows behind). A no-op for the other optimizers. */
SG_API int sg_optim_flush(sg_optim *opt);

/* Learning-rate schedules: the learning rate of step t (t >= 1) from the base lr. */
typedef double (*sg_lr_fn)(void *ud, int64_t step, double base_lr);
typedef enum {
    SG_LR_CONSTANT, /* base_lr */
    SG_LR_LINEAR,   /* base_lr * (1 + (end_factor - 1) * min(t - 1, steps) / steps) */
    SG_LR_CALLBACK  /* fn(ud, t, base_lr); must be a pure function of its arguments */
} sg_lr_kind;
typedef struct {
    sg_lr_kind kind;
    int64_t steps;     /* SG_LR_LINEAR: > 0 */
    double end_factor; /* SG_LR_LINEAR: >= 0 */
    sg_lr_fn fn;       /* SG_LR_CALLBACK */
    void *ud;
} sg_lr_schedule;
/* sched NULL: constant. */
SG_API int sg_optim_set_schedule(sg_optim *opt, const sg_lr_schedule *sched);
SG_API int sg_optim_set_lr(sg_optim *opt, double base_lr);
/* The learning rate the next step will use; NaN if opt is NULL or the schedule fails. */
SG_API double sg_optim_lr(const sg_optim *opt);
/* Steps taken (the next step is number steps + 1; -1 if opt is NULL); set it when
 * restoring a checkpoint. */
SG_API int64_t sg_optim_steps(const sg_optim *opt);
SG_API int sg_optim_set_steps(sg_optim *opt, int64_t steps);

/* Number of state tensors kept for param (0 if param is not registered with opt, -1 if opt
 * is NULL) and the
 * i-th of them with its name (borrowed, valid until sg_optim_free); NULL if out of range. */
SG_API int sg_optim_state_count(const sg_optim *opt, const sg_tensor *param);
SG_API sg_tensor *sg_optim_state(const sg_optim *opt, const sg_tensor *param, int i,
                          const char **name);
/* Exact lazy SGD's learning-rate history of param (for saving and restoring the state
 * outside a checkpoint, e.g. Python's state_dict): the learning rates of param's steps
 * since its rows were last all brought up to date, as runs: run i holds from param's step
 * start[i] until the next run's start. The rows behind ("last_step" < "step") need them
 * to catch up. Writes min(n, cap) runs to start and lr (NULL with cap 0) and returns n: 0
 * for the other optimizers and for SGD without momentum and weight decay; -1 for opt NULL
 * or a param not registered with opt (SG_ERR_STATE recorded). */
SG_API int64_t sg_optim_lr_runs(const sg_optim *opt, const sg_tensor *param, int64_t *start,
                                double *lr, int64_t cap);
/* Restores param's history to the n runs given (start[] ascending and >= 1, lr[] finite
 * and >= 0; copied) after its "last_step" and "step" state tensors have been written
 * (through sg_optim_state), and recomputes from them which rows are behind. SG_ERR_STATE
 * for a param not registered with opt or an optimizer that keeps no history (then n must
 * be 0: SG_OK), SG_ERR_ARG for runs out of order or out of range, a "last_step" outside
 * [0, "step"], or n == 0 while a row is behind; SG_ERR_NOMEM. Nothing changes on error. */
SG_API int sg_optim_set_lr_runs(sg_optim *opt, sg_tensor *param, const int64_t *start,
                                const double *lr, int64_t n);
/* Drops the stored gradients of opt's parameters (PyTorch's zero_grad): each reads as none
 * (sg_tensor_grad NULL) and leaves the gradient store, so that a later backward starts
 * from zero and a step skips the parameter; other leaves keep theirs. The tape, its
 * tensors and the step arena (the memory of the dropped gradients included) stay until
 * sg_tape_reset. O(gradients in the store). SG_ERR_NULL for opt NULL. */
SG_API int sg_optim_zero_grad(sg_optim *opt);

/* Clipping over every gradient in ctx's store (dense and COO), applied in place of the
 * gradients (a gradient that is not ours to modify is replaced by a modified copy; a COO
 * gradient is replaced by its coalesced form). Duplicates are summed first.
 * sg_clip_grad_norm: total = L2 norm over all gradients, written to *total_norm (may be
 * NULL); if total > max_norm, every gradient is scaled by max_norm / (total + 1e-6).
 * Returns SG_ERR_ARG for max_norm < 0 or NaN, SG_ERR_VALUE (gradients unchanged) if the
 * total is not finite. sg_clip_grad_value: every element clamped to [-clip, clip]
 * (clip >= 0). */
SG_API int sg_clip_grad_norm(sg_ctx *ctx, double max_norm, double *total_norm);
SG_API int sg_clip_grad_value(sg_ctx *ctx, double clip);

/* ---------------------------------------------------------------- io: word vectors */
/* word2vec's two file formats. Both open with a text line "V D". Text: then V lines
 * "word v1 ... vD". Binary: then, per word, the word, one space, D float32 values
 * (little-endian) and a newline. gensim's KeyedVectors.load_word2vec_format reads both.
 * One contract for writer and reader: V >= 0 distinct words, each 1..4095 bytes without
 * whitespace or NUL; D in 1..2^20; finite f32 values; nothing but whitespace after the
 * V-th record. What the writer writes the reader gives back exactly (the f32 values bit
 * for bit); what the reader refuses the writer refuses. */

typedef struct sg_wordvec sg_wordvec;

/* Writes table (V,D) (dense f32 or f64, written as f32) with row i labelled words[i], most
 * frequent first by convention, as text (binary 0) or binary (1). Text values have 9
 * significant digits, so f32 values read back exactly. The save is atomic: a temporary
 * file beside path, fsynced and renamed over it, so an error or a killed process leaves
 * the previous file. A symlink is followed (its target is replaced, the link stays); a
 * replaced file keeps its permission bits, a new one gets 0666 minus the umask; a path
 * that is a directory, device, FIFO or socket is refused (SG_ERR_IO) and left as it is.
 * Returns SG_OK, or SG_ERR_NULL, SG_ERR_LAYOUT, SG_ERR_DTYPE, SG_ERR_SHAPE (not 2-D, D
 * outside 1..2^20), SG_ERR_ARG (a word outside the contract, a repeated word, a value not
 * finite as f32; all checked before any file is touched), SG_ERR_IO; recorded on table's
 * ctx. */
SG_API int sg_wordvec_write(const char *path, const sg_tensor *table, const char *const *words,
                     int binary);
/* Reads a file in word2vec's text (binary 0) or binary (1) format, or either (-1: told
 * apart by the first record). Returns a new sg_wordvec (free it with sg_wordvec_free), or
 * NULL with SG_ERR_IO, SG_ERR_FORMAT (bad header, short record, a value that is not a
 * finite number, a duplicate word, a word with a NUL byte, data after the V-th record;
 * the message names the record) or SG_ERR_NOMEM recorded on ctx. Memory follows the
 * records read, not the header: a file too short for the header's V records fails before
 * the table is allocated, and the table grows (from about 1 MiB) as records are read, so
 * a header or a sparse file's size alone cannot make it allocate much. Detection (-1)
 * needs a seekable file: on a pipe it fails with SG_ERR_ARG before reading any record
 * (give 0 or 1 there). */
SG_API sg_wordvec *sg_wordvec_read(sg_ctx *ctx, const char *path, int binary);
/* Frees wv and its vectors; call it before sg_ctx_free of wv's context. NULL: no-op. */
SG_API void sg_wordvec_free(sg_wordvec *wv);
SG_API int64_t sg_wordvec_count(const sg_wordvec *wv); /* V; -1 for wv NULL */
SG_API int64_t sg_wordvec_dim(const sg_wordvec *wv);   /* D; -1 for wv NULL */
/* Word i (0-based, file order), or NULL when i is out of range. Owned by wv. */
SG_API const char *sg_wordvec_word(const sg_wordvec *wv, int64_t i);
/* The (V,D) f32 vectors: a persistent tensor owned by wv (sg_tensor_free refuses it). */
SG_API sg_tensor *sg_wordvec_vectors(const sg_wordvec *wv);
/* Row of `word`, or -1 if it is absent. O(1) on average (hash table). */
SG_API int64_t sg_wordvec_find(const sg_wordvec *wv, const char *word);

/* ---------------------------------------------------------------- io: checkpoints */
/* A checkpoint is a safetensors file (readable by the safetensors packages and by a few
 * lines of numpy, see docs/formats.md, "Checkpoints"): an 8-byte little-endian header length N, N
 * bytes of JSON (padded with spaces so the data starts 8-byte aligned) naming each tensor's
 * dtype ("F32", "F64", "I32", "I64"), shape and data_offsets [begin, end) within the data
 * section, plus "__metadata__" (a string map); then the tensors' raw little-endian bytes in
 * header order. It holds:
 * - every parameter under the name the caller gives, with its current values (rows that
 *   exact lazy SGD has left behind are written caught up, as sg_optim_flush would make
 *   them, without changing the optimizer);
 * - with an optimizer, "optim/<name>/<state>" for each of the parameter's sg_optim_state
 *   tensors; for exact lazy SGD also "optim/<name>/lagging_rows" (k) int64, the rows still
 *   behind, ascending, with their raw values "optim/<name>/lagging_param" (k, ...) (and
 *   "optim/<name>/lagging_momentum_buffer" with momentum), and the learning-rate history
 *   "optim/<name>/lr_run_start" (n) int64 / "optim/<name>/lr_run_lr" (n) f64. Those pairs
 *   of row indices and row values are the only sparse data in a checkpoint;
 * - metadata: the user's string pairs, and the library's keys, all starting "sgrad.": the
 *   format version (2), an FNV-1a 64-bit checksum of the whole file (length, header and
 *   data, its own 16 hex digits read as '0'; files of format 1, whose checksum covers the
 *   data section only, still load), the context's random generator state, and with an
 *   optimizer its kind, step count, base learning rate, hyperparameters and schedule
 *   (kind, steps, end_factor; a callback is not saved).
 * Resuming is exact: in deterministic mode, N steps, a save, a load into a fresh context
 * with fresh tensors and a fresh optimizer, and M more steps give bitwise the parameters of
 * N + M steps without a stop (the save does not flush; it keeps the lazy bookkeeping).
 * Files are little-endian: on a big-endian host save and load fail with SG_ERR_STATE. */

/* User metadata: n (key, value) pairs of C strings, borrowed. Keys are non-empty, unique
 * and do not start with "sgrad." (the library's). */
typedef struct {
    int64_t n;
    const char *const *keys;
    const char *const *values;
} sg_checkpoint_meta;

/* Saves params[0..n_params) (persistent or tape tensors, dense, any dtype) under
 * names[i], optim's state (optim may be NULL; every parameter of optim must be among
 * params) and meta (may be NULL) to path, atomically: a temporary file beside path is
 * written, fsynced and renamed over it, so path holds the previous file or the whole new
 * one, whatever happens (a process killed mid-save may leave a stray "path.tmp-*" file).
 * A symlink is followed (its target is replaced, the link stays); a replaced file keeps
 * its permission bits, a new one gets 0666 minus the umask.
 * Names are non-empty, unique, not "__metadata__" and not starting with "optim/". Changes
 * nothing in memory. Errors (recorded on ctx, checked before the file is opened):
 * SG_ERR_NULL, SG_ERR_ARG (a bad or duplicate name or key, n_params < 0, an optimizer
 * parameter missing from params, tensors of another context), SG_ERR_LAYOUT (a COO
 * tensor), then SG_ERR_IO (path unwritable; a directory, device, FIFO or socket; a write
 * failed: path untouched), SG_ERR_NOMEM. */
SG_API int sg_checkpoint_save(sg_ctx *ctx, const char *path, sg_tensor *const *params,
                              int64_t n_params, const char *const *names, sg_optim *optim,
                              const sg_checkpoint_meta *meta);

/* Restores a checkpoint into existing tensors: params[i] (dense, the dtype and shape saved
 * under names[i]) gets the saved values; optim (may be NULL) must be of the saved kind with
 * the same hyperparameters and exactly the saved parameters registered (the same names in
 * params); it gets its state, step count, base learning rate and schedule back (a saved
 * callback schedule needs optim to have a callback schedule already; it is kept). The
 * context's random generator state is restored too. With optim NULL the file's optimizer
 * state is ignored (a load for inference); any other tensor in the file that is not among
 * names, or a name missing from the file, is an error. Everything (JSON, offsets,
 * checksum, names, dtypes, shapes, optimizer state ranges) is checked before anything is
 * written: on error nothing changes. meta_out (may be NULL) receives the user metadata,
 * owned by the caller until sg_checkpoint_meta_free(ctx, meta_out).
 * Errors: SG_ERR_NULL, SG_ERR_ARG (names as for save), SG_ERR_LAYOUT, SG_ERR_IO (cannot
 * open or read), SG_ERR_FORMAT (not a valid sgrad safetensors file: bad JSON, a header
 * longer than the file, offsets that overlap or leave gaps, a size that disagrees with
 * dtype and shape, a checksum mismatch, header bytes included; the message says which),
 * SG_ERR_DTYPE / SG_ERR_SHAPE (a tensor saved with another dtype / shape), SG_ERR_STATE
 * (a name missing from the file or an extra tensor in it, an optimizer of another kind,
 * other hyperparameters or other parameters), SG_ERR_NOMEM. Memory: the file's size plus
 * its header's, however large the header claims the tensors are. */
SG_API int sg_checkpoint_load(sg_ctx *ctx, const char *path, sg_tensor *const *params,
                              int64_t n_params, const char *const *names, sg_optim *optim,
                              sg_checkpoint_meta *meta_out);

/* Reads only the user metadata of a checkpoint into meta_out (freed with
 * sg_checkpoint_meta_free), after the same checks of the file as sg_checkpoint_load
 * (header, offsets, checksum, format version): so a program can see what a checkpoint was
 * made from before it builds the tensors to load it into. Changes nothing else (the random
 * generator state is not restored). Errors: SG_ERR_NULL, SG_ERR_IO, SG_ERR_FORMAT,
 * SG_ERR_NOMEM. */
SG_API int sg_checkpoint_read_meta(sg_ctx *ctx, const char *path, sg_checkpoint_meta *meta_out);

/* The value of key in meta, or NULL if absent (or meta NULL). O(n). */
SG_API const char *sg_checkpoint_meta_get(const sg_checkpoint_meta *meta, const char *key);
/* Frees metadata filled by sg_checkpoint_load and sets it to empty. NULL: no-op. */
SG_API void sg_checkpoint_meta_free(sg_ctx *ctx, sg_checkpoint_meta *meta);

#ifdef __cplusplus
}
#endif
#endif
