/* sgrad-bench: runs benchmark families and prints JSON lines (see bench/bench.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "bench.h"
#include "core/core.h" /* sg__kernels_level: the CPU variant the kernels ran in */
#include "families.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name, *what;
    int (*run)(const sgb_cfg *);
} sgb_family;

/* named: run only when asked for by name (not by "all") */
static const struct {
    sgb_family f;
    int named;
} families[] = {
#define SGB_ENTRY(name, what) {{#name, what, sgb_##name}, 0},
#define SGB_NAMED_ENTRY(name, what) {{#name, what, sgb_##name}, 1},
    SGB_FAMILIES(SGB_ENTRY)
    SGB_NAMED_FAMILIES(SGB_NAMED_ENTRY)
#undef SGB_ENTRY
#undef SGB_NAMED_ENTRY
};
#define N_FAMILIES (sizeof families / sizeof families[0])

static volatile double sgb_sink_value;
void sgb_sink(double v) { sgb_sink_value += v; }

double sgb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sgb_median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

double sgb_median_ms(void (*fn)(void *ud), void *ud, int reps)
{
    if (reps < 1) reps = 1;
    if (reps > 1000) reps = 1000;
    double t[1000];
    fn(ud); /* warm-up */
    for (int i = 0; i < reps; i++) {
        double t0 = sgb_now_ms();
        fn(ud);
        t[i] = sgb_now_ms() - t0;
    }
    return sgb_median(t, reps);
}

int sgb_reps(const sgb_cfg *cfg, int full)
{
    if (cfg->reps > 0) return cfg->reps;
    if (!cfg->quick) return full;
    int r = full / 5;
    return r < 3 ? 3 : r;
}

void sgb_emit(const char *bench, const char *kase, const char *params_json, double ms,
              double ref_ms, int threads, const char *extra_json)
{
    printf("{\"bench\":\"%s\",\"case\":\"%s\",\"params\":%s,\"ms\":%.6g", bench, kase,
           params_json ? params_json : "{}", ms);
    if (ref_ms > 0)
        printf(",\"ref_ms\":%.6g,\"ratio\":%.4g", ref_ms, ms / ref_ms);
    else
        printf(",\"ref_ms\":null,\"ratio\":null");
    printf(",\"threads\":%d,\"kernels\":\"%s\"", threads, sg__kernels_name(sg__kernels_level()));
    if (extra_json && *extra_json) printf(",%s", extra_json);
    printf("}\n");
    fflush(stdout);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sgrad-bench [--quick] [--threads N] [--reps N] [--shape SPEC] FAMILY|all\n"
               "  --reps N      repetitions of every case (the median is reported)\n"
               "  --shape SPEC  one case of a family that takes it: matmul MxKxN\nfamilies:\n");
    for (size_t i = 0; i < N_FAMILIES; i++)
        fprintf(f, "  %-10s %s%s\n", families[i].f.name, families[i].f.what,
                families[i].named ? " (only by name)" : "");
}

int main(int argc, char **argv)
{
    sgb_cfg cfg = {0};
    const char *which = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) cfg.quick = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) cfg.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) cfg.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) cfg.shape = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else if (!which) which = argv[i];
        else { usage(stderr); return 2; }
    }
    if (!which) { usage(stderr); return 2; }
    int found = 0, rc = 0;
    for (size_t i = 0; i < N_FAMILIES; i++) {
        if (strcmp(which, families[i].f.name) && (strcmp(which, "all") || families[i].named)) continue;
        found = 1;
        if (families[i].f.run(&cfg) != 0) {
            fprintf(stderr, "sgrad-bench: family %s failed\n", families[i].f.name);
            rc = 1;
        }
    }
    if (!found) {
        fprintf(stderr, "sgrad-bench: unknown family '%s'\n", which);
        usage(stderr);
        return 2;
    }
    return rc;
}
