/* sg__vexp: exp of a block of doubles in place, for the fused losses' rows.
 *
 * Invariants: every element takes the same operations (clamp to [-708, 709], x = k ln 2 + r
 * with k = round(x / ln 2) by the add-and-subtract of 1.5 * 2^52, r reduced with ln 2 split
 * in a high part exact in k * LN2_HI and a low part, e^r by Horner over 1/i! to degree 13,
 * times 2^k built from k's bits), so the loop vectorises and every CPU variant gives
 * bitwise the same results (the build has -ffp-contract=off); a libm call would not
 * vectorise and its result may depend on the CPU. |r| <= ln 2 / 2 bounds the truncated
 * series' relative error by 2e-16; the result is within a few ulps of exp. Below -708
 * the result is exp(-708) (about 3e-308) rather than a denormal or 0, which the losses
 * only ever add to a sum of at least 1, and above 709 exp(709); NaN stays NaN. */
#include "ops/ops.h"

#include <string.h>

SG__HOT_BODY void vexp_block__body(double *x, int64_t n)
{
    const double log2e = 1.4426950408889634, shift = 0x1.8p52;
    const double ln2_hi = 0x1.62e42fee00000p-1, ln2_lo = 0x1.a39ef35793c76p-33;
    uint64_t shift_bits;
    memcpy(&shift_bits, &shift, sizeof shift_bits);
    for (int64_t i = 0; i < n; i++) {
        double v = x[i] < -708.0 ? -708.0 : x[i];
        v = v > 709.0 ? 709.0 : v;
        const double t = v * log2e + shift;
        const double k = t - shift;
        const double r = (v - k * ln2_hi) - k * ln2_lo;
        double p = 1.0 / 6227020800.0;
        p = p * r + 1.0 / 479001600.0;
        p = p * r + 1.0 / 39916800.0;
        p = p * r + 1.0 / 3628800.0;
        p = p * r + 1.0 / 362880.0;
        p = p * r + 1.0 / 40320.0;
        p = p * r + 1.0 / 5040.0;
        p = p * r + 1.0 / 720.0;
        p = p * r + 1.0 / 120.0;
        p = p * r + 1.0 / 24.0;
        p = p * r + 1.0 / 6.0;
        p = p * r + 0.5;
        p = p * r + 1.0;
        p = p * r + 1.0;
        uint64_t tb;
        memcpy(&tb, &t, sizeof tb);
        const uint64_t scale_bits = (tb - shift_bits + 1023) << 52;
        double scale;
        memcpy(&scale, &scale_bits, sizeof scale);
        x[i] = p * scale;
    }
}
SG__HOT_CLONES(vexp_block, (double *x, int64_t n), (x, n))

void sg__vexp(double *x, int64_t n) { vexp_block(x, n); }
