/* Matrix products: matmul ((M,K)@(K,N); batched (B,M,K)@(B,K,N); (B,M,K)@(K,N), one
 * matrix for every batch, which is the 2-D product of the stacked (B*M,K) rows; COO @
 * dense is handed to the sparse module) and rowdot.
 *
 * Every dense product (the forward C = A B, the backward dA = G B^T and dB = A^T G) takes
 * one of two kernels, chosen by mm_kernel_for from the product's shape alone (its M, N
 * and contracted K), never from the thread count:
 *  - BLAS, in a build with one (CMake SGRAD_BLAS, docs/blas.md): each batch matrix of the
 *    output is cut into a fixed grid of blocks, MM_BM rows by MM_BN columns (the last
 *    block of a row or column of blocks is smaller when M or N is not a multiple), and
 *    each block is one cblas_sgemm/cblas_dgemm call over the whole contracted dimension
 *    (K is never split), made on one thread; sg__parallel_for hands the blocks to the
 *    context's threads. The backward passes the transposed operands to BLAS as they are.
 *  - direct, the hand-written kernel below (the fallback, the kernel of small products,
 *    and the tests' oracle for the BLAS path): the output's rows are spread over threads.
 *
 * Invariants: every output element is produced by one thread, and the computation that
 * produces it does not depend on the thread count, so results are bitwise identical for
 * any thread count. Direct kernel: an element's terms are added in ascending order of the
 * contracted index with a grouping fixed by compile-time block sizes, whichever thread
 * holds its row. BLAS: the block grid is a function of (M, N) only, so a product of a
 * given shape makes the same BLAS calls (same sizes, leading dimensions, transpositions,
 * operands, beta) for 1 thread or 64; the thread count only decides which thread makes
 * which call. A call runs on the calling thread alone (the library is a serial build, or
 * a threaded one that sgrad sets to one thread before its first product: bl_set_one_thread),
 * and a one-thread gemm computes each element by a sequence of operations fixed by its
 * arguments and the CPU, so each block, hence the product, is the same whichever thread
 * computes it. (A threaded BLIS call does not keep to that: left at 2 threads it rounded
 * a (37,301)@(301,270) product differently from 1.) Which kernel a product takes changes
 * the rounding, which is why that choice too depends on the shape only. All of this is on
 * one machine: BLIS picks its kernels for the CPU at run time, so another CPU may round
 * differently. tests/test_matmul_blas.c checks 1, 2, 3 and 7 threads, and the BLAS
 * products against the direct kernel.
 *
 * The BLAS is BLIS (Debian's serial build) rather than OpenBLAS: measured at one thread on
 * the shapes of sgrad-bench matmul, Debian's BLIS 0.9 ran 3-4x as fast as its OpenBLAS
 * 0.3.21, which does not know this machine's CPU and falls back to SSE3 kernels; where
 * both know the CPU they are about even. docs/blas.md has the figures.
 * The direct kernel's backward products are computed as plain row-major products after
 * an explicit transpose of one operand, so the inner loop of every kernel runs over
 * contiguous memory. */
#include "ops/ops.h"

#include <limits.h>
#include <stdatomic.h>

#define MM_KB 128 /* contracted-index block: MM_KB rows of B stay in cache */
#define MM_NB 256 /* column block of B and C */
#define MM_SERIAL_FLOPS ((int64_t)1 << 21) /* below this, one thread is faster */

/* C (batch,M,N) = A (batch,M,K) @ B (batch,K,N); C zeroed by the caller. */
typedef struct {
    sg_dtype dtype;
    int64_t M, K, N;
    const void *A, *B;
    void *C;
} mm_job;
/* Rows [lo, hi) of the stacked (batch*M) rows of C. One variant per CPU level
 * (SG__HOT_CLONES, core/core.h): the inner loop is elementwise over j, so every vector
 * width computes each c[j] by the same operations in the same order. */
SG__HOT_BODY void mm_rows__body(void *ud, int64_t lo, int64_t hi)
{
    const mm_job *J = ud;
    const int64_t M = J->M, K = J->K, N = J->N;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        for (int64_t r = lo; r < hi;) {
            const int64_t bi = r / M;
            const int64_t i0 = r % M;
            const int64_t i1 = M - i0 < hi - r ? M : i0 + (hi - r);
            const T *Ab = (const T *)J->A + bi * M * K;
            const T *Bb = (const T *)J->B + bi * K * N;
            T *Cb = (T *)J->C + bi * M * N;
            for (int64_t jb = 0; jb < N; jb += MM_NB) {
                const int64_t je = N - jb > MM_NB ? jb + MM_NB : N;
                for (int64_t kb = 0; kb < K; kb += MM_KB) {
                    const int64_t ke = K - kb > MM_KB ? kb + MM_KB : K;
                    for (int64_t i = i0; i < i1; i++) {
                        T *restrict c = Cb + i * N;
                        const T *a = Ab + i * K;
                        int64_t k = kb;
                        for (; k + 4 <= ke; k += 4) {
                            const T a0 = a[k];
                            const T a1 = a[k + 1];
                            const T a2 = a[k + 2];
                            const T a3 = a[k + 3];
                            const T *restrict b0 = Bb + k * N;
                            const T *restrict b1 = b0 + N;
                            const T *restrict b2 = b1 + N;
                            const T *restrict b3 = b2 + N;
                            for (int64_t j = jb; j < je; j++)
                                c[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
                        }
                        for (; k < ke; k++) {
                            const T a0 = a[k];
                            const T *restrict b0 = Bb + k * N;
                            for (int64_t j = jb; j < je; j++) c[j] += a0 * b0[j];
                        }
                    }
                }
            }
            r += i1 - i0;
        }
    });
}
SG__HOT_CLONES(mm_rows, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* C (batch,M,N) zeroed += A @ B, in parallel over row blocks when the product is big. */
static void mm_run(sg_ctx *ctx, sg_dtype dtype, int64_t batch, int64_t M, int64_t K, int64_t N,
                   const void *A, const void *B, void *C)
{
    mm_job J = {dtype, M, K, N, A, B, C};
    const int64_t rows = batch * M;
    if (rows == 0 || N == 0 || K == 0) return;
    int64_t grain = rows;
    int threads = sg__threads(ctx);
    if (threads > 1 && 2 * rows * K * N >= MM_SERIAL_FLOPS)
        grain = (rows + threads - 1) / threads;
    sg__parallel_for(ctx, rows, grain, mm_rows, &J);
}

/* ---------------------------------------------------------------- BLAS path */

/* The block grid of the BLAS path: MM_BM x MM_BN output blocks, one gemm call each
 * (measured on the building machine, docs/blas.md: 256 x 256 costs a few percent against one
 * call for the whole product at one thread, and leaves 4 to 16 blocks to share out in the
 * products of a training step). Constants, so the grid is a function of the shape only. */
#define MM_BM 256
#define MM_BN 256
/* The crossover, per product C (M,N) = op(A) (M,K) @ op(B) (K,N): BLAS when M N K >= 2^14
 * and M K >= 64, else the direct kernel. Measured at one thread through sg_matmul (f32 and
 * f64, docs/blas.md): a gemm call costs about a microsecond before it computes anything,
 * so the direct kernel is faster below 20^3 or so; and when M K is small and N long (as
 * (4,4)@(4,1024)) the direct kernel streams B's rows while BLAS still packs all of B. */
#define MM_BLAS_MIN_MNK ((int64_t)1 << 14)
#define MM_BLAS_MIN_MK 64

#ifdef SG_BLAS
/* CBLAS, declared here rather than through a cblas.h (whose directory differs between
 * BLAS packages: Debian's BLIS puts it under include/<multiarch>/blis-*); the enums are
 * passed as ints, their values fixed by the CBLAS standard. The library's integers are 32
 * bits (LP64, as Debian's libblis4 and libopenblas0), so shapes past INT_MAX stay on
 * the direct kernel. */
void cblas_sgemm(int layout, int transa, int transb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);
void cblas_dgemm(int layout, int transa, int transb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc);
/* The BLAS's own thread count, where it has one. Debian's threaded builds (libblis4-openmp,
 * libopenblas0-pthread) win the runtime alternative wherever they are installed beside the
 * serial one. The OpenMP BLIS threads a call when BLIS_NUM_THREADS or OMP_NUM_THREADS asks,
 * but only outside sgrad's parallel region (inside, its nested team has one thread), and
 * a threaded BLIS call can round differently from a one-thread one: 1 and 2 sgrad threads
 * would differ (seen at OMP_NUM_THREADS=2). A pthreads OpenBLAS runs its own threads under
 * every call. So before its first product sgrad sets the BLAS to one thread, process-wide.
 * Weak references: whichever of the two is linked defines its function. */
void bli_thread_set_num_threads(int64_t n) __attribute__((weak));
void openblas_set_num_threads(int n) __attribute__((weak));
static atomic_bool bl_one_thread;

static void bl_set_one_thread(void)
{
    if (atomic_load_explicit(&bl_one_thread, memory_order_acquire)) return;
    if (bli_thread_set_num_threads) bli_thread_set_num_threads(1);
    if (openblas_set_num_threads) openblas_set_num_threads(1);
    atomic_store_explicit(&bl_one_thread, true, memory_order_release);
}
#define MM_CBLAS_ROW_MAJOR 101
#define MM_CBLAS_NO_TRANS 111
#define MM_CBLAS_TRANS 112
#define MM_HAVE_BLAS true
#ifndef SG_BLAS_NAME
#define SG_BLAS_NAME "cblas"
#endif
#else
#define MM_HAVE_BLAS false
#endif

/* SG__MM_AUTO, or the kernel a test or benchmark forces on every product. */
static atomic_int mm_forced = SG__MM_AUTO;

void sg__matmul_force(int kernel) { atomic_store_explicit(&mm_forced, kernel, memory_order_relaxed); }

const char *sg__matmul_blas(void)
{
#ifdef SG_BLAS
    return SG_BLAS_NAME;
#else
    return NULL;
#endif
}

/* The kernel of a product C (M,N) = op(A) (M,K) @ op(B) (K,N), per batch matrix: BLAS
 * (true) or direct. A function of the shape only (and of a forced choice). */
static bool mm_kernel_for(int64_t M, int64_t N, int64_t K)
{
    if (!MM_HAVE_BLAS || M < 1 || N < 1 || K < 1 || M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return false;
    const int forced = atomic_load_explicit(&mm_forced, memory_order_relaxed);
    if (forced != SG__MM_AUTO) return forced == SG__MM_BLAS;
    const int64_t mk = M * K; /* < 2^62; mk N below only when mk < 2^14 */
    return mk >= MM_BLAS_MIN_MK && (mk >= MM_BLAS_MIN_MNK || mk * N >= MM_BLAS_MIN_MNK);
}

int sg__matmul_kernel(int64_t M, int64_t N, int64_t K)
{
    return mm_kernel_for(M, N, K) ? SG__MM_BLAS : SG__MM_DIRECT;
}

#ifdef SG_BLAS
/* C (batch,M,N) = op(A) @ op(B), or += when accumulate; op(X) is X, or X^T when X is stored
 * transposed (ta: A stored (K,M); tb: B stored (N,K)). */
typedef struct {
    sg_dtype dtype;
    bool ta, tb, accumulate;
    int64_t M, N, K;
    int64_t lda, ldb; /* row strides of A and B as stored */
    int64_t sa, sb;   /* batch strides of A and B (elements); C's is M N */
    int64_t mb, nb;   /* blocks down and across one batch matrix of C */
    const void *A, *B;
    void *C;
} bl_job;

/* Blocks [lo, hi) of the grid, numbered batch-major, then by block row, then column. */
static void bl_blocks(void *ud, int64_t lo, int64_t hi)
{
    const bl_job *J = ud;
    const int64_t per = J->mb * J->nb;
    const int ta = J->ta ? MM_CBLAS_TRANS : MM_CBLAS_NO_TRANS;
    const int tb = J->tb ? MM_CBLAS_TRANS : MM_CBLAS_NO_TRANS;
    for (int64_t t = lo; t < hi; t++) {
        const int64_t bi = t / per, i0 = t % per / J->nb * MM_BM, j0 = t % J->nb * MM_BN;
        const int m = (int)(J->M - i0 < MM_BM ? J->M - i0 : MM_BM);
        const int n = (int)(J->N - j0 < MM_BN ? J->N - j0 : MM_BN);
        const int64_t ao = bi * J->sa + (J->ta ? i0 : i0 * J->lda);
        const int64_t bo = bi * J->sb + (J->tb ? j0 * J->ldb : j0);
        const int64_t co = (bi * J->M + i0) * J->N + j0;
        if (J->dtype == SG_F32)
            cblas_sgemm(MM_CBLAS_ROW_MAJOR, ta, tb, m, n, (int)J->K, 1.0f, (const float *)J->A + ao,
                        (int)J->lda, (const float *)J->B + bo, (int)J->ldb, J->accumulate ? 1.0f : 0.0f,
                        (float *)J->C + co, (int)J->N);
        else
            cblas_dgemm(MM_CBLAS_ROW_MAJOR, ta, tb, m, n, (int)J->K, 1.0, (const double *)J->A + ao,
                        (int)J->lda, (const double *)J->B + bo, (int)J->ldb, J->accumulate ? 1.0 : 0.0,
                        (double *)J->C + co, (int)J->N);
    }
}
#endif

/* The BLAS path of a product that mm_kernel_for gave to BLAS (M, N, K, lda, ldb fit an int):
 * the grid's blocks over the threads, at least MM_SERIAL_FLOPS of work a chunk so a small
 * product stays on one thread (how blocks are grouped into chunks changes no result). */
static void bl_run(sg_ctx *ctx, sg_dtype dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                   bool ta, bool tb, const void *A, const void *B, void *C, bool accumulate)
{
#ifdef SG_BLAS
    bl_job J = {dtype, ta, tb, accumulate, M, N, K, ta ? M : K, tb ? K : N, M * K, K * N,
                (M + MM_BM - 1) / MM_BM, (N + MM_BN - 1) / MM_BN, A, B, C};
    const int64_t block_flops = 2 * (M < MM_BM ? M : MM_BM) * (N < MM_BN ? N : MM_BN) * K;
    const int64_t grain = block_flops >= MM_SERIAL_FLOPS ? 1 : MM_SERIAL_FLOPS / block_flops + 1;
    bl_set_one_thread();
    sg__parallel_for(ctx, batch * J.mb * J.nb, grain, bl_blocks, &J);
#else
    (void)ctx, (void)dtype, (void)batch, (void)M, (void)N, (void)K, (void)ta, (void)tb;
    (void)A, (void)B, (void)C, (void)accumulate;
#endif
}

/* dst (batch,C,R) = transpose of src (batch,R,C), in 32x32 tiles; tr_rows has a variant
 * per CPU level (SG__HOT_CLONES), moves only. */
typedef struct {
    size_t elem;
    int64_t R, C;
    const void *src;
    void *dst;
} tr_job;

#define TR_TILE 32

SG__HOT_BODY void tr_rows__body(void *ud, int64_t lo, int64_t hi)
{
    const tr_job *J = ud;
    const int64_t R = J->R, C = J->C;
    for (int64_t r = lo; r < hi;) {
        const int64_t bi = r / R;
        const int64_t r0 = r % R;
        const int64_t r1 = R - r0 < hi - r ? R : r0 + (hi - r);
        for (int64_t cb = 0; cb < C; cb += TR_TILE) {
            const int64_t ce = C - cb > TR_TILE ? cb + TR_TILE : C;
            if (J->elem == 8) {
                const uint64_t *s = (const uint64_t *)J->src + bi * R * C;
                uint64_t *d = (uint64_t *)J->dst + bi * R * C;
                for (int64_t i = r0; i < r1; i++)
                    for (int64_t c = cb; c < ce; c++) d[c * R + i] = s[i * C + c];
            } else {
                const uint32_t *s = (const uint32_t *)J->src + bi * R * C;
                uint32_t *d = (uint32_t *)J->dst + bi * R * C;
                for (int64_t i = r0; i < r1; i++)
                    for (int64_t c = cb; c < ce; c++) d[c * R + i] = s[i * C + c];
            }
        }
        r += r1 - r0;
    }
}
SG__HOT_CLONES(tr_rows, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* A tape tensor (batch,C,R) holding the transpose of the last two dims of t (batch,R,C). */
static sg_tensor *transpose_last2(const sg_tensor *t, int64_t batch, int64_t R, int64_t C)
{
    int64_t shape[3] = {batch, C, R};
    sg_tensor *out = sg__tmp(t->ctx, t->dtype, 3, shape, false);
    if (!out) return NULL;
    tr_job J = {sg_dtype_size(t->dtype), R, C, t->data, out->data};
    sg__parallel_for(t->ctx, batch * R, TR_TILE, tr_rows, &J);
    return out;
}

/* iarg: batch (1 unless b is batched), M (a's rows per batch: all of them when b is 2-D),
 * K, N. dA = G @ B^T, dB = A^T @ G, each by the kernel its shape takes. For matmul(x, x)
 * both products go into one buffer (the second accumulates onto the first): one
 * accumulation. */
static int matmul_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *a = n->in[0], *b = n->in[1];
    sg_ctx *ctx = a->ctx;
    const int64_t batch = n->iarg[0];
    const int64_t M = n->iarg[1], K = n->iarg[2], N = n->iarg[3];
    const bool same = a == b;
    sg_tensor *ga = NULL;
    if (sg__wants_grad(a)) {
        const bool blas = mm_kernel_for(M, K, N); /* (M,K) = (M,N) @ (N,K) */
        sg_tensor *bt = blas ? NULL : transpose_last2(b, batch, K, N); /* (batch,N,K) */
        ga = blas || bt ? sg__tmp_like(a, !blas) : NULL;
        if (!ga) return sg__status_or_nomem(ctx);
        if (blas) bl_run(ctx, a->dtype, batch, M, K, N, false, true, gout->data, b->data, ga->data, false);
        else mm_run(ctx, a->dtype, batch, M, N, K, gout->data, bt->data, ga->data);
        if (!same) {
            int rc = sg__accum_grad(a, ga, true);
            if (rc != SG_OK) return rc;
        }
    }
    if (sg__wants_grad(b)) {
        const bool blas = mm_kernel_for(K, N, M); /* (K,N) = (K,M) @ (M,N) */
        sg_tensor *at = blas ? NULL : transpose_last2(a, batch, M, K); /* (batch,K,M) */
        sg_tensor *gb = !blas && !at ? NULL : same ? ga : sg__tmp_like(b, !blas);
        if (!gb) return sg__status_or_nomem(ctx);
        if (blas) bl_run(ctx, b->dtype, batch, K, N, M, true, false, a->data, gout->data, gb->data, same);
        else mm_run(ctx, b->dtype, batch, K, M, N, at->data, gout->data, gb->data);
        int rc = sg__accum_grad(b, gb, true);
        if (rc != SG_OK) return rc;
    }
    return SG_OK;
}

/* (M,K)@(K,N) -> (M,N); (B,M,K)@(B,K,N) -> (B,M,N); (B,M,K)@(K,N) -> (B,M,N) (b shared
 * by every batch: the product of a's B*M stacked rows with b, so b's gradient A^T @ G
 * sums over the batch); COO (M,K) @ dense (K,N) -> dense. Errors: SG_ERR_SHAPE for other
 * ranks or mismatched K or B, SG_ERR_DTYPE, SG_ERR_LAYOUT for a COO right operand. */
sg_tensor *sg_matmul(sg_tensor *a, sg_tensor *b)
{
    SG__CHECK_NOTNULL(a);
    SG__CHECK_NOTNULL(b);
    if (a->layout == SG_COO && b->layout == SG_DENSE) return sg__spmm(a, b);
    if (!sg__op_check_pair("sg_matmul", a, b) || !sg__op_check_float("sg_matmul", a) ||
        !sg__op_check_float("sg_matmul", b))
        return NULL;
    sg_ctx *ctx = a->ctx;
    char sa[96], sb[96];
    const bool ok_rank = (a->ndim == 2 || a->ndim == 3) && (b->ndim == 2 || b->ndim == a->ndim);
    if (!ok_rank || a->shape[a->ndim - 1] != b->shape[b->ndim - 2] ||
        (b->ndim == 3 && a->shape[0] != b->shape[0]))
        return sg__fail(ctx, SG_ERR_SHAPE,
                        "sg_matmul: shapes %s and %s do not form (M,K)@(K,N), "
                        "(B,M,K)@(B,K,N) or (B,M,K)@(K,N)",
                        sg__shape_str(a, sa, sizeof sa), sg__shape_str(b, sb, sizeof sb));
    /* A shared b makes a's batch part of the rows: one (batch*M,K)@(K,N) product. */
    const int64_t batch = b->ndim == 3 ? b->shape[0] : 1;
    const int64_t M = b->ndim == 3 ? a->shape[1] : sg__prod(a->shape, 0, a->ndim - 1);
    const int64_t K = a->shape[a->ndim - 1], N = b->shape[b->ndim - 1];
    int64_t shape[3];
    for (int i = 0; i < a->ndim - 1; i++) shape[i] = a->shape[i];
    shape[a->ndim - 1] = N;
    const bool blas = mm_kernel_for(M, N, K);
    sg_tensor *out = sg__tmp(ctx, a->dtype, a->ndim, shape, !blas);
    if (!out) return NULL;
    if (blas) bl_run(ctx, a->dtype, batch, M, N, K, false, false, a->data, b->data, out->data, false);
    else mm_run(ctx, a->dtype, batch, M, K, N, a->data, b->data, out->data);
    sg_tensor *in[2] = {a, b};
    if (sg__needs_grad(ctx, 2, in)) {
        sg_node *n = sg__node_new(ctx, matmul_backward, "sg_matmul", out, 2, in);
        if (!n) return NULL;
        n->iarg[0] = batch;
        n->iarg[1] = M;
        n->iarg[2] = K;
        n->iarg[3] = N;
    }
    return out;
}

/* ---------------------------------------------------------------- rowdot */

/* Partial sums of a row's dot product: term d goes to lane d % ROWDOT_LANES, and the lanes
 * are added pairwise in a fixed tree, so the vector unit does the work and the result
 * depends neither on the thread count nor on the vector width of the CPU variant running
 * it (SG__HOT_CLONES). */
#define ROWDOT_LANES 16 /* the tree below is written for 16 */

/* Forward (g NULL): out[i] = sum_d x[i,d] * y[i,d]. Backward: out[i,d] = g[i] * y[i,d],
 * or t + t with t = g[i] * y[i,d] when `twice` (rowdot(x, x): both inputs' terms in one
 * buffer; the same value the sum of two separate gradients would have). */
typedef struct {
    sg_dtype dtype;
    int64_t D;
    const void *x, *y, *g;
    void *out;
    bool twice;
} rowdot_job;

SG__HOT_BODY void rowdot_rows__body(void *ud, int64_t lo, int64_t hi)
{
    const rowdot_job *J = ud;
    const int64_t D = J->D;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *x = J->x;
        const T *y = J->y;
        const T *g = J->g;
        T *o = J->out;
        if (g && J->twice) {
            for (int64_t i = lo; i < hi; i++) {
                const T gi = g[i];
                const T *yr = y + i * D;
                T *orow = o + i * D;
                for (int64_t d = 0; d < D; d++) {
                    T t = gi * yr[d];
                    orow[d] = t + t;
                }
            }
        } else if (g) {
            for (int64_t i = lo; i < hi; i++) {
                const T gi = g[i];
                const T *yr = y + i * D;
                T *orow = o + i * D;
                for (int64_t d = 0; d < D; d++) orow[d] = gi * yr[d];
            }
        } else {
            for (int64_t i = lo; i < hi; i++) {
                const T *xr = x + i * D;
                const T *yr = y + i * D;
                T acc[ROWDOT_LANES] = {0};
                int64_t d = 0;
                for (; d + ROWDOT_LANES <= D; d += ROWDOT_LANES)
                    for (int k = 0; k < ROWDOT_LANES; k++) acc[k] += xr[d + k] * yr[d + k];
                for (int k = 0; d + k < D; k++) acc[k] += xr[d + k] * yr[d + k];
                for (int k = 0; k < 8; k++) acc[k] += acc[k + 8];
                for (int k = 0; k < 4; k++) acc[k] += acc[k + 4];
                for (int k = 0; k < 2; k++) acc[k] += acc[k + 2];
                o[i] = acc[0] + acc[1];
            }
        }
    });
}
SG__HOT_CLONES(rowdot_rows, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

static int rowdot_backward(sg_node *n, sg_tensor *gout)
{
    const bool same = n->in[0] == n->in[1];
    for (int k = 0; k < (same ? 1 : 2); k++) {
        sg_tensor *x = n->in[k];
        if (!sg__wants_grad(x)) continue;
        sg_tensor *g = sg__tmp_like(x, false);
        if (!g) return sg__status_or_nomem(x->ctx);
        rowdot_job J = {x->dtype, x->shape[1], NULL, n->in[1 - k]->data, gout->data, g->data, same};
        sg__parallel_for(x->ctx, x->shape[0], sg__row_grain(x->shape[1]), rowdot_rows, &J);
        int rc = sg__accum_grad(x, g, true);
        if (rc != SG_OK) return rc;
    }
    return SG_OK;
}

/* (N,D) . (N,D) -> (N). Errors: SG_ERR_SHAPE unless both are (N,D), SG_ERR_DTYPE. */
sg_tensor *sg_rowdot(sg_tensor *a, sg_tensor *b)
{
    SG__CHECK_NOTNULL(a);
    SG__CHECK_NOTNULL(b);
    if (!sg__op_check_pair("sg_rowdot", a, b) || !sg__op_check_float("sg_rowdot", a) ||
        !sg__op_check_float("sg_rowdot", b))
        return NULL;
    if (a->ndim != 2 || !sg__same_shape(a, b)) {
        char sa[96], sb[96];
        return sg__fail(a->ctx, SG_ERR_SHAPE, "sg_rowdot: shapes %s and %s, two (N,D) expected",
                        sg__shape_str(a, sa, sizeof sa), sg__shape_str(b, sb, sizeof sb));
    }
    sg_tensor *out = sg__tmp(a->ctx, a->dtype, 1, a->shape, false);
    if (!out) return NULL;
    rowdot_job J = {a->dtype, a->shape[1], a->data, b->data, NULL, out->data, false};
    sg__parallel_for(a->ctx, a->shape[0], sg__row_grain(a->shape[1]), rowdot_rows, &J);
    sg_tensor *in[2] = {a, b};
    if (sg__needs_grad(a->ctx, 2, in) &&
        !sg__node_new(a->ctx, rowdot_backward, "sg_rowdot", out, 2, in))
        return NULL;
    return out;
}
