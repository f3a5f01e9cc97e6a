/* A tiny test harness: TEST(name) { ... } registers a test; CHECK* record failures and
 * go on; TEST_MAIN() runs every test and prints "N passed, N failed".
 * One test file = one executable; tests are run by ctest. */
#ifndef SG_TESTUTIL_H
#define SG_TESTUTIL_H

#include "sgrad.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/* ---- helpers shared by the test files */

/* The tests' own random numbers (xorshift64), independent of the library's generator.
 * A file may #define TU_SEED before including this header. */
#ifndef TU_SEED
#define TU_SEED 0x9E3779B97F4A7C15ull
#endif
static uint64_t tu_rng_state = TU_SEED;
static inline uint64_t tu_rand(void)
{
    tu_rng_state ^= tu_rng_state << 13;
    tu_rng_state ^= tu_rng_state >> 7;
    tu_rng_state ^= tu_rng_state << 17;
    return tu_rng_state;
}
/* Uniform in [-1, 1). */
static inline double tu_rand_unit(void) { return (double)(tu_rand() >> 11) * 0x1.0p-53 * 2.0 - 1.0; }

/* A shape as the (ndim, shape) pair the tensor constructors take: SHAPE(3, 4). */
#define SHAPE(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* Persistent tensor of dtype with values drawn from [lo, hi), requiring grad. */
static inline sg_tensor *rnd(sg_ctx *ctx, sg_dtype dt, double lo, double hi, int ndim, const int64_t *shape)
{
    sg_tensor *t = sg_tensor_new(ctx, dt, ndim, shape);
    if (!t) return NULL;
    sg_tensor_fill_uniform(t, lo, hi);
    return sg_tensor_requires_grad(t, 1);
}

/* Persistent f64 COO with nnz random entries over (sub)rows [0, range) of its sparse index
 * (range <= 0: all), so duplicates are likely; values in [-1, 1). */
static inline sg_tensor *tu_rand_coo(sg_ctx *ctx, int ndim, const int64_t *shape, int sd, int64_t nnz, int64_t range)
{
    int64_t rows = 1, D = 1;
    for (int d = 0; d < sd; d++) rows *= shape[d];
    for (int d = sd; d < ndim; d++) D *= shape[d];
    if (range > rows || range < 1) range = rows;
    int64_t *idx = malloc((size_t)(sd * nnz + 1) * sizeof *idx);
    double *val = malloc((size_t)(nnz * D + 1) * sizeof *val);
    for (int64_t e = 0; e < nnz; e++) {
        int64_t r = (int64_t)(tu_rand() % (uint64_t)range);
        for (int d = sd - 1; d >= 0; d--) {
            idx[d * nnz + e] = r % shape[d];
            r /= shape[d];
        }
    }
    for (int64_t i = 0; i < nnz * D; i++) val[i] = tu_rand_unit();
    sg_tensor *t = sg_coo_new(ctx, SG_F64, ndim, shape, sd, nnz, idx, val);
    free(idx);
    free(val);
    return t;
}

/* Allocator hooks that count calls and can fail the N-th one (fail_at <= 0: never). */
typedef struct {
    long calls, fail_at;
} tu_counting;
static inline void *tu_count_alloc(void *ud, size_t n)
{
    tu_counting *c = ud;
    c->calls++;
    if (c->fail_at > 0 && c->calls == c->fail_at) return NULL;
    return malloc(n);
}
static inline void tu_count_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

typedef void (*tu_fn)(void);
typedef struct {
    const char *name;
    tu_fn fn;
} tu_test;

#define TU_MAX_TESTS 256
static tu_test tu_tests[TU_MAX_TESTS];
static int tu_n_tests;
static int tu_failures; /* failed checks in the current test */

static int tu_dropped; /* tests past TU_MAX_TESTS: the run fails */
static const char *tu_skip_reason; /* set by TU_SKIP in the current test */

/* Ends the current test as skipped (it cannot run in this build), saying why; a skipped
 * test neither passes nor fails. */
#define TU_SKIP(why)                                                             \
    do {                                                                         \
        tu_skip_reason = (why);                                                  \
        return;                                                                  \
    } while (0)
static inline void tu_register(const char *name, tu_fn fn)
{
    if (tu_n_tests < TU_MAX_TESTS) tu_tests[tu_n_tests++] = (tu_test){name, fn};
    else tu_dropped++;
}

/* The dense meaning of t (dense or COO: duplicates summed) as a calloc'd array of numel
 * doubles (one spare); zeros for t == NULL. The caller frees it. */
static inline double *tu_meaning(sg_tensor *t, int64_t numel)
{
    double *m = calloc((size_t)numel + 1, sizeof *m);
    if (!t || !m) return m;
    if (sg_tensor_layout(t) == SG_DENSE) {
        for (int64_t i = 0; i < numel; i++) m[i] = sg_tensor_get(t, i);
        return m;
    }
    int sd = sg_coo_sparse_dim(t), nd = sg_tensor_ndim(t);
    const int64_t *shape = sg_tensor_shape(t);
    int64_t nnz = sg_coo_nnz(t), D = 1;
    for (int d = sd; d < nd; d++) D *= shape[d];
    const int64_t *idx = sg_tensor_data(sg_coo_indices(t));
    sg_tensor *v = sg_coo_values(t);
    for (int64_t e = 0; e < nnz; e++) {
        int64_t r = 0;
        for (int d = 0; d < sd; d++) r = r * shape[d] + idx[d * nnz + e];
        for (int64_t j = 0; j < D; j++) m[r * D + j] += sg_tensor_get(v, e * D + j);
    }
    return m;
}

#ifdef _POSIX_C_SOURCE
#include <unistd.h>
/* A scratch file name unique to this process (8 live at once); the file itself is the
 * test's to remove. */
static inline char *tu_tmp_path(const char *name)
{
    static char path[8][256];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 256, "/tmp/sgrad_test_%s_%d", name, (int)getpid());
    return p;
}
static inline void tu_write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}
/* ---- files: reading back, fault injection through the context's write hook, strays */
#include <dirent.h>
#include <errno.h>

/* The whole file as a malloc'd buffer (*n bytes; the caller frees it), NULL if it cannot
 * be opened. */
static inline unsigned char *tu_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    size_t cap = 1 << 16;
    unsigned char *b = malloc(cap);
    for (size_t k; b && (k = fread(b + *n, 1, cap - *n, f)) > 0;) {
        *n += k;
        if (*n == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    return b;
}

/* A write hook (sg__set_write_hook, src/io/io_test.h) that lets `budget` bytes through and then fails with
 * errno `err` (budget < 0: no limit), and passes at most `chunk` bytes a call when chunk
 * > 0 (short writes). */
typedef struct {
    long budget;
    int err;
    long chunk;
} tu_fault;

static inline long tu_faulty_write(void *ud, int fd, const void *buf, size_t n)
{
    tu_fault *f = ud;
    if (f->chunk > 0 && n > (size_t)f->chunk) n = (size_t)f->chunk;
    if (f->budget >= 0) {
        if (f->budget == 0) {
            errno = f->err;
            return -1;
        }
        if (n > (size_t)f->budget) n = (size_t)f->budget;
        f->budget -= (long)n;
    }
    return (long)write(fd, buf, n);
}

/* Files in /tmp whose names start with base's file name and contain ".tmp-": temporary
 * files an atomic save left behind. */
static inline int tu_stray_temporaries(const char *base)
{
    const char *name = strrchr(base, '/') + 1;
    DIR *d = opendir("/tmp");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, name, strlen(name)) && strstr(e->d_name, ".tmp-")) n++;
    if (d) closedir(d);
    return n;
}
#endif

#define TEST(name)                                                               \
    static void test_##name(void);                                               \
    __attribute__((constructor)) static void tu_reg_##name(void)                \
    {                                                                            \
        tu_register(#name, test_##name);                                         \
    }                                                                            \
    static void test_##name(void)

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            tu_failures++;                                                       \
        }                                                                        \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                    \
    do {                                                                         \
        double tu_a = (double)(a), tu_b = (double)(b), tu_t = (double)(tol);     \
        if (!(fabs(tu_a - tu_b) <= tu_t)) {                                      \
            fprintf(stderr, "  %s:%d: CHECK_NEAR failed: %s = %.10g, %s = %.10g (tol %g)\n", \
                    __FILE__, __LINE__, #a, tu_a, #b, tu_b, tu_t);               \
            tu_failures++;                                                       \
        }                                                                        \
    } while (0)

/* Checks a status code and prints the context's message when it is not the expected one. */
#define CHECK_STATUS(ctx, got, want)                                             \
    do {                                                                         \
        int tu_g = (got), tu_w = (want);                                         \
        if (tu_g != tu_w) {                                                      \
            fprintf(stderr, "  %s:%d: status %s (%s), wanted %s\n", __FILE__, __LINE__, \
                    sg_status_string(tu_g), sg_ctx_message(ctx), sg_status_string(tu_w)); \
            tu_failures++;                                                       \
        }                                                                        \
    } while (0)

#define TEST_MAIN()                                                              \
    int main(int argc, char **argv)                                              \
    {                                                                            \
        int passed = 0, failed = 0, skipped = 0;                                 \
        for (int i = 0; i < tu_n_tests; i++) {                                   \
            if (argc > 1 && !strstr(tu_tests[i].name, argv[1])) continue;        \
            tu_failures = 0;                                                     \
            tu_skip_reason = NULL;                                               \
            tu_tests[i].fn();                                                    \
            if (tu_skip_reason && !tu_failures) {                                \
                skipped++;                                                       \
                printf("skip %s: %s\n", tu_tests[i].name, tu_skip_reason);       \
            } else if (tu_failures) {                                            \
                failed++;                                                        \
                fprintf(stderr, "FAIL %s\n", tu_tests[i].name);                  \
            } else {                                                             \
                passed++;                                                        \
                printf("ok   %s\n", tu_tests[i].name);                           \
            }                                                                    \
        }                                                                        \
        if (tu_dropped) fprintf(stderr, "%d tests over TU_MAX_TESTS not run\n", tu_dropped); \
        if (passed + failed + skipped == 0) fprintf(stderr, "no test ran\n");   \
        printf("%d passed, %d failed", passed, failed);                          \
        if (skipped) printf(", %d skipped", skipped);                            \
        printf("\n");                                                           \
        return failed || tu_dropped || passed + failed + skipped == 0 ? 1 : 0;   \
    }

#endif
