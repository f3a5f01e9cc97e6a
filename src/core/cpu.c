/* Which variant of the hot kernels runs (SG__HOT_CLONES, core/core.h): the best level this
 * build compiled that the CPU runs, found once on first use; SGRAD_KERNELS=base|avx2|avx512
 * in the environment caps it (for measurements and as a way round a faulty variant), and
 * tests force each level in turn. Every level gives bitwise the same results (core.h says
 * why), so the choice never shows in a result.
 *
 * Why a level read at each call rather than an ifunc (target_clones): the tests and
 * benchmarks can switch it in one process, and it works under every sanitizer (a
 * target_clones function built by clang 14 with -fsanitize=thread crashes at start-up: its
 * resolver runs before TSan's runtime), while a call costs a load and a predicted branch
 * once per chunk of work. The CPU check is the compiler's (__builtin_cpu_supports), which also asks the
 * operating system whether it saves the AVX and AVX-512 registers. */
#include "core/core.h"

#include <stdatomic.h>
#include <stdlib.h>

/* -1 until the first call of sg__kernels_level. */
static atomic_int kernels_now = -1;
static atomic_int kernels_cpu = -1; /* sg__kernels_best's answer, once found */

/* Whether this build has a variant for `level` (the base always). */
static bool compiled(int level)
{
    switch (level) {
    case SG__KERNELS_BASE: return true;
#ifdef SG__VARIANT_AVX2
    case SG__KERNELS_AVX2: return true;
#endif
#ifdef SG__VARIANT_AVX512
    case SG__KERNELS_AVX512: return true;
#endif
    default: return false;
    }
}

/* Whether the CPU (and its operating system) runs the instructions of `level`: the
 * features of SG__TARGET_AVX2_ / SG__TARGET_AVX512_, one by one. */
static bool cpu_runs(int level)
{
    if (level == SG__KERNELS_BASE) return true;
#if defined(SG__VARIANT_AVX2) || defined(SG__VARIANT_AVX512)
    __builtin_cpu_init();
    bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
              __builtin_cpu_supports("popcnt");
    if (level == SG__KERNELS_AVX2) return v3;
    if (level == SG__KERNELS_AVX512)
        return v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq");
#endif
    return false;
}

int sg__kernels_best(void)
{
    int best = atomic_load_explicit(&kernels_cpu, memory_order_relaxed);
    if (best >= 0) return best;
    best = SG__KERNELS_BASE;
    for (int l = SG__KERNELS_LEVELS - 1; l > SG__KERNELS_BASE; l--)
        if (compiled(l) && cpu_runs(l)) {
            best = l;
            break;
        }
    atomic_store_explicit(&kernels_cpu, best, memory_order_relaxed);
    return best;
}

bool sg__kernels_has(int level)
{
    return level == SG__KERNELS_BASE ||
           (level > SG__KERNELS_BASE && level < SG__KERNELS_LEVELS && compiled(level) && cpu_runs(level));
}

const char *sg__kernels_name(int level)
{
    switch (level) {
    case SG__KERNELS_BASE: return "base";
    case SG__KERNELS_AVX2: return "avx2";
    case SG__KERNELS_AVX512: return "avx512";
    default: return "?";
    }
}

/* The default level: the best, capped by SGRAD_KERNELS (an unknown value is ignored; a
 * level the build or CPU lacks gives the best one below it). */
static int default_level(void)
{
    int level = sg__kernels_best();
    const char *env = getenv("SGRAD_KERNELS");
    if (!env || !*env) return level;
    for (int l = SG__KERNELS_BASE; l < SG__KERNELS_LEVELS; l++)
        if (strcmp(env, sg__kernels_name(l)) == 0) {
            while (l > SG__KERNELS_BASE && !sg__kernels_has(l)) l--;
            return l < level ? l : level;
        }
    return level;
}

int sg__kernels_level(void)
{
    int level = atomic_load_explicit(&kernels_now, memory_order_relaxed);
    if (level >= 0) return level;
    level = default_level(); /* threads that race here find the same answer */
    atomic_store_explicit(&kernels_now, level, memory_order_relaxed);
    return level;
}

bool sg__kernels_force(int level)
{
    if (level < 0) {
        atomic_store_explicit(&kernels_now, default_level(), memory_order_relaxed);
        return true;
    }
    if (!sg__kernels_has(level)) return false;
    atomic_store_explicit(&kernels_now, level, memory_order_relaxed);
    return true;
}
