/* The one parallel loop every kernel goes through. Invariant: the chunking is a function
 * of (n, grain) only, so the thread count never changes which items a chunk holds or the
 * order inside it. */
#include "core/core.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void sg__parallel_for(sg_ctx *ctx, int64_t n, int64_t grain, sg__range_fn fn, void *ud)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t chunks = (n + grain - 1) / grain;
    int threads = sg__threads(ctx);
    if (chunks == 1 || threads <= 1) {
        for (int64_t c = 0; c < chunks; c++)
            fn(ud, c * grain, c + 1 < chunks ? (c + 1) * grain : n);
        return;
    }
    if ((int64_t)threads > chunks) threads = (int)chunks;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (int64_t c = 0; c < chunks; c++)
        fn(ud, c * grain, c + 1 < chunks ? (c + 1) * grain : n);
}
