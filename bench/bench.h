/* Benchmark harness shared by every family of sgrad-bench.
 *
 * A family is a function `int sgb_<name>(const sgb_cfg *cfg)` in bench/bench_<name>.c,
 * listed once in bench/families.h. Each case times the library path and, in the same run,
 * the plainest hand-written C loop doing the same work, and prints one JSON object per
 * line (sgb_emit). Times are medians over repeated runs. */
#ifndef SGB_BENCH_H
#define SGB_BENCH_H

#include <stdint.h>

typedef struct {
    int quick;         /* fewer repetitions and smaller cases: a smoke test */
    int threads;       /* threads for the library (0: the family's default) */
    int reps;          /* --reps N: repetitions of every case (0: the family's choice) */
    const char *shape; /* --shape SPEC: the one case to run, for families that take it
                          (matmul: MxKxN); NULL: the family's cases */
} sgb_cfg;

double sgb_now_ms(void);
/* The median of t[0..n) (n >= 1; sorts t). */
double sgb_median(double *t, int n);
/* Median wall time in ms of fn(ud) over `reps` runs after one warm-up run. */
double sgb_median_ms(void (*fn)(void *ud), void *ud, int reps);
/* Repetitions for a case: `full` normally, fewer (at least 3) with --quick, cfg->reps when
 * --reps is given. */
int sgb_reps(const sgb_cfg *cfg, int full);
/* One JSON line: {"bench","case","params":<params_json>,"ms","ref_ms","ratio","threads",
 * "kernels"} ("kernels": the CPU variant of the hot kernels, "base", "avx2" or "avx512";
 * SGRAD_KERNELS caps it, src/core/core.h) followed by the fields in extra_json (a comma-separated list of "key":value, or NULL).
 * ref_ms <= 0 means there is no reference loop: ref_ms and ratio are printed as null. */
void sgb_emit(const char *bench, const char *kase, const char *params_json, double ms,
              double ref_ms, int threads, const char *extra_json);
/* Keeps the optimiser from deleting a computed value. */
void sgb_sink(double v);

#include "families.h"
#define SGB_DECLARE(name, what) int sgb_##name(const sgb_cfg *cfg);
SGB_FAMILIES(SGB_DECLARE)
SGB_NAMED_FAMILIES(SGB_DECLARE)
#undef SGB_DECLARE

#endif
