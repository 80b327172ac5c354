/* Exact decimal and integer arithmetic for the condition VM (Spark's semantics).
 *
 * Values are 128-bit two's-complement integers (gcc __int128): integers as they are,
 * DECIMAL(p, s) as the unscaled value, timestamps as microseconds. Products and
 * quotients of wide decimals go through 256-bit magnitudes so no intermediate is lost;
 * results are rounded HALF_UP to the result scale, then checked against the result
 * precision (Spark's DecimalPrecision rules are applied by the compiler, which passes
 * scales and precisions as immediates). Status codes: XS_OK, XS_OVERFLOW, XS_DIV_ZERO.
 */
#ifndef CEPSQL_EXACT128_H
#define CEPSQL_EXACT128_H

#include <stdint.h>
#include <math.h>

typedef __int128 x_i128;
typedef unsigned __int128 x_u128;
typedef struct { x_u128 hi, lo; } x_u256;

enum { XS_OK = 0, XS_OVERFLOW = 1, XS_DIV_ZERO = 2 };

#define X_U128(hi, lo) ((((x_u128)(hi)) << 64) | (x_u128)(lo))

static const x_u128 X_POW10[39] = {
    X_U128(0x0000000000000000ULL, 0x0000000000000001ULL),  /* 1e0 */
    X_U128(0x0000000000000000ULL, 0x000000000000000aULL),  /* 1e1 */
    X_U128(0x0000000000000000ULL, 0x0000000000000064ULL),  /* 1e2 */
    X_U128(0x0000000000000000ULL, 0x00000000000003e8ULL),  /* 1e3 */
    X_U128(0x0000000000000000ULL, 0x0000000000002710ULL),  /* 1e4 */
    X_U128(0x0000000000000000ULL, 0x00000000000186a0ULL),  /* 1e5 */
    X_U128(0x0000000000000000ULL, 0x00000000000f4240ULL),  /* 1e6 */
    X_U128(0x0000000000000000ULL, 0x0000000000989680ULL),  /* 1e7 */
    X_U128(0x0000000000000000ULL, 0x0000000005f5e100ULL),  /* 1e8 */
    X_U128(0x0000000000000000ULL, 0x000000003b9aca00ULL),  /* 1e9 */
    X_U128(0x0000000000000000ULL, 0x00000002540be400ULL),  /* 1e10 */
    X_U128(0x0000000000000000ULL, 0x000000174876e800ULL),  /* 1e11 */
    X_U128(0x0000000000000000ULL, 0x000000e8d4a51000ULL),  /* 1e12 */
    X_U128(0x0000000000000000ULL, 0x000009184e72a000ULL),  /* 1e13 */
    X_U128(0x0000000000000000ULL, 0x00005af3107a4000ULL),  /* 1e14 */
    X_U128(0x0000000000000000ULL, 0x00038d7ea4c68000ULL),  /* 1e15 */
    X_U128(0x0000000000000000ULL, 0x002386f26fc10000ULL),  /* 1e16 */
    X_U128(0x0000000000000000ULL, 0x016345785d8a0000ULL),  /* 1e17 */
    X_U128(0x0000000000000000ULL, 0x0de0b6b3a7640000ULL),  /* 1e18 */
    X_U128(0x0000000000000000ULL, 0x8ac7230489e80000ULL),  /* 1e19 */
    X_U128(0x0000000000000005ULL, 0x6bc75e2d63100000ULL),  /* 1e20 */
    X_U128(0x0000000000000036ULL, 0x35c9adc5dea00000ULL),  /* 1e21 */
    X_U128(0x000000000000021eULL, 0x19e0c9bab2400000ULL),  /* 1e22 */
    X_U128(0x000000000000152dULL, 0x02c7e14af6800000ULL),  /* 1e23 */
    X_U128(0x000000000000d3c2ULL, 0x1bcecceda1000000ULL),  /* 1e24 */
    X_U128(0x0000000000084595ULL, 0x161401484a000000ULL),  /* 1e25 */
    X_U128(0x000000000052b7d2ULL, 0xdcc80cd2e4000000ULL),  /* 1e26 */
    X_U128(0x00000000033b2e3cULL, 0x9fd0803ce8000000ULL),  /* 1e27 */
    X_U128(0x00000000204fce5eULL, 0x3e25026110000000ULL),  /* 1e28 */
    X_U128(0x00000001431e0faeULL, 0x6d7217caa0000000ULL),  /* 1e29 */
    X_U128(0x0000000c9f2c9cd0ULL, 0x4674edea40000000ULL),  /* 1e30 */
    X_U128(0x0000007e37be2022ULL, 0xc0914b2680000000ULL),  /* 1e31 */
    X_U128(0x000004ee2d6d415bULL, 0x85acef8100000000ULL),  /* 1e32 */
    X_U128(0x0000314dc6448d93ULL, 0x38c15b0a00000000ULL),  /* 1e33 */
    X_U128(0x0001ed09bead87c0ULL, 0x378d8e6400000000ULL),  /* 1e34 */
    X_U128(0x0013426172c74d82ULL, 0x2b878fe800000000ULL),  /* 1e35 */
    X_U128(0x00c097ce7bc90715ULL, 0xb34b9f1000000000ULL),  /* 1e36 */
    X_U128(0x0785ee10d5da46d9ULL, 0x00f436a000000000ULL),  /* 1e37 */
    X_U128(0x4b3b4ca85a86c47aULL, 0x098a224000000000ULL),  /* 1e38 */
};

static inline x_u128 x_abs(x_i128 v) { return v < 0 ? (x_u128)0 - (x_u128)v : (x_u128)v; }

static inline x_u256 x_u256_of(x_u128 v) { x_u256 r = {0, v}; return r; }

static inline int x_u256_cmp(x_u256 a, x_u256 b) {
    if (a.hi != b.hi) return a.hi < b.hi ? -1 : 1;
    if (a.lo != b.lo) return a.lo < b.lo ? -1 : 1;
    return 0;
}

static inline x_u256 x_u256_add(x_u256 a, x_u256 b) {
    x_u256 r; r.lo = a.lo + b.lo; r.hi = a.hi + b.hi + (r.lo < a.lo); return r;
}

static inline x_u256 x_u256_sub(x_u256 a, x_u256 b) {  /* a >= b */
    x_u256 r; r.lo = a.lo - b.lo; r.hi = a.hi - b.hi - (a.lo < b.lo); return r;
}

/* full 128 x 128 -> 256-bit product */
static inline x_u256 x_mul128(x_u128 a, x_u128 b) {
    uint64_t a0 = (uint64_t)a, a1 = (uint64_t)(a >> 64);
    uint64_t b0 = (uint64_t)b, b1 = (uint64_t)(b >> 64);
    x_u128 p00 = (x_u128)a0 * b0, p01 = (x_u128)a0 * b1;
    x_u128 p10 = (x_u128)a1 * b0, p11 = (x_u128)a1 * b1;
    x_u128 mid = (p00 >> 64) + (uint64_t)p01 + (uint64_t)p10;
    x_u256 r;
    r.lo = (mid << 64) | (uint64_t)p00;
    r.hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    return r;
}

/* a * b for a 256-bit a; sets *ovf when the product needs more than 256 bits */
static inline x_u256 x_u256_mul(x_u256 a, x_u128 b, int* ovf) {
    x_u256 lo = x_mul128(a.lo, b), hi = x_mul128(a.hi, b);
    x_u256 r;
    /* hi.lo shifted by 128 bits lands in r.hi; any part of hi beyond 128 bits overflows */
    r.lo = lo.lo;
    r.hi = lo.hi + hi.lo;
    if (hi.hi != 0 || r.hi < lo.hi) *ovf = 1;
    return r;
}

static inline x_u256 x_u256_mul_pow10(x_u256 a, int k, int* ovf) {
    while (k > 38) { a = x_u256_mul(a, X_POW10[38], ovf); k -= 38; }
    return x_u256_mul(a, X_POW10[k], ovf);
}

static inline x_u256 x_u256_shl1(x_u256 a) {
    x_u256 r; r.hi = (a.hi << 1) | (a.lo >> 127); r.lo = a.lo << 1; return r;
}

/* q = n / d, *rem = n % d (d != 0): native when both fit 128 bits, else shift-subtract */
static inline x_u256 x_u256_divmod(x_u256 n, x_u256 d, x_u256* rem) {
    x_u256 q = {0, 0}, r = {0, 0};
    int i;
    if (n.hi == 0 && d.hi == 0) {
        q.lo = n.lo / d.lo; r.lo = n.lo % d.lo; *rem = r; return q;
    }
    for (i = 255; i >= 0; i--) {
        r = x_u256_shl1(r);
        if (i >= 128) r.lo |= (n.hi >> (i - 128)) & 1; else r.lo |= (n.lo >> i) & 1;
        if (x_u256_cmp(r, d) >= 0) {
            r = x_u256_sub(r, d);
            if (i >= 128) q.hi |= (x_u128)1 << (i - 128); else q.lo |= (x_u128)1 << i;
        }
    }
    *rem = r;
    return q;
}

/* HALF_UP rounding of a magnitude by 10^k (k >= 0) */
static inline x_u256 x_round_down(x_u256 m, int k) {
    x_u256 d, rem, q, twice;
    if (k <= 0) return m;
    if (k > 76) return x_u256_of(0);  /* every value we hold is below 10^77 / 2 */
    d = x_u256_of(1);
    { int ovf = 0; d = x_u256_mul_pow10(d, k, &ovf); }
    q = x_u256_divmod(m, d, &rem);
    twice = x_u256_shl1(rem);
    if (x_u256_cmp(twice, d) >= 0) q = x_u256_add(q, x_u256_of(1));
    return q;
}

/* a signed result from sign and magnitude, checked against precision p (|v| < 10^p) */
static inline int x_finish(int negative, x_u256 m, int p, x_i128* out) {
    if (m.hi != 0 || m.lo >= X_POW10[p]) return XS_OVERFLOW;
    *out = negative ? -(x_i128)m.lo : (x_i128)m.lo;
    return XS_OK;
}

/* a (scale sa) + or - b (scale sb), rounded HALF_UP to scale sr, precision pr */
static inline int x_dec_add(x_i128 a, int sa, x_i128 b, int sb, int subtract, int sr, int pr,
                            x_i128* out) {
    int m = sa > sb ? sa : sb, ovf = 0, na = a < 0, nb = (b < 0) != (subtract != 0), neg;
    x_u256 A, B, R;
    if (sa == sb && sr == sa) {  /* fast path: no rescaling, no rounding */
        x_i128 r;
        if (!(subtract ? __builtin_sub_overflow(a, b, &r) : __builtin_add_overflow(a, b, &r))) {
            if (x_abs(r) >= X_POW10[pr]) return XS_OVERFLOW;
            *out = r;
            return XS_OK;
        }
    }
    A = x_u256_mul_pow10(x_u256_of(x_abs(a)), m - sa, &ovf);
    B = x_u256_mul_pow10(x_u256_of(x_abs(b)), m - sb, &ovf);
    if (na == nb) { R = x_u256_add(A, B); neg = na; }
    else if (x_u256_cmp(A, B) >= 0) { R = x_u256_sub(A, B); neg = na; }
    else { R = x_u256_sub(B, A); neg = nb; }
    return x_finish(neg, x_round_down(R, m - sr), pr, out);
}

/* a (scale sa) * b (scale sb), rounded HALF_UP to scale sr (<= sa + sb), precision pr */
static inline int x_dec_mul(x_i128 a, int sa, x_i128 b, int sb, int sr, int pr, x_i128* out) {
    x_i128 r;
    if (sr == sa + sb && !__builtin_mul_overflow(a, b, &r)) {
        if (x_abs(r) >= X_POW10[pr]) return XS_OVERFLOW;
        *out = r;
        return XS_OK;
    }
    return x_finish((a < 0) != (b < 0), x_round_down(x_mul128(x_abs(a), x_abs(b)), sa + sb - sr),
                    pr, out);
}

/* a (scale sa) / b (scale sb), rounded HALF_UP to scale sr, precision pr: long division
 * in chunks of up to 18 decimal digits so no intermediate exceeds 256 bits */
static inline int x_dec_div(x_i128 a, int sa, x_i128 b, int sb, int sr, int pr, x_i128* out) {
    int e = sr + sb - sa, ovf = 0, c;
    x_u256 A = x_u256_of(x_abs(a)), B = x_u256_of(x_abs(b)), q, rem, limit;
    if (b == 0) return XS_DIV_ZERO;
    if (e < 0) B = x_u256_mul_pow10(B, -e, &ovf), e = 0;
    q = x_u256_divmod(A, B, &rem);
    limit = x_u256_of(X_POW10[pr]);
    while (e > 0) {
        if (x_u256_cmp(q, limit) >= 0) return XS_OVERFLOW;  /* only grows from here */
        c = e > 18 ? 18 : e;
        e -= c;
        rem = x_u256_mul(rem, X_POW10[c], &ovf);
        {
            x_u256 part = x_u256_divmod(rem, B, &rem);
            q = x_u256_add(x_u256_mul(q, X_POW10[c], &ovf), part);
        }
    }
    if (x_u256_cmp(x_u256_shl1(rem), B) >= 0) q = x_u256_add(q, x_u256_of(1));
    return x_finish((a < 0) != (b < 0), q, pr, out);
}

/* remainder with the dividend's sign (Java's BigDecimal.remainder), at scale max(sa, sb),
 * then rounded HALF_UP to scale sr, precision pr */
static inline int x_dec_mod(x_i128 a, int sa, x_i128 b, int sb, int sr, int pr, x_i128* out) {
    int m = sa > sb ? sa : sb, ovf = 0;
    x_u256 A, B, rem;
    if (b == 0) return XS_DIV_ZERO;
    A = x_u256_mul_pow10(x_u256_of(x_abs(a)), m - sa, &ovf);
    B = x_u256_mul_pow10(x_u256_of(x_abs(b)), m - sb, &ovf);
    x_u256_divmod(A, B, &rem);
    return x_finish(a < 0, x_round_down(rem, m - sr), pr, out);
}

/* compare a (scale sa) with b (scale sb) exactly: -1, 0, 1 */
static inline int x_dec_cmp(x_i128 a, int sa, x_i128 b, int sb) {
    int ovf = 0, na = a < 0, nb = b < 0, c;
    x_u256 A, B;
    if (sa == sb) return (a > b) - (a < b);
    if (na != nb) return na ? -1 : 1;
    A = x_u256_mul_pow10(x_u256_of(x_abs(a)), (sa > sb ? sa : sb) - sa, &ovf);
    B = x_u256_mul_pow10(x_u256_of(x_abs(b)), (sa > sb ? sa : sb) - sb, &ovf);
    c = x_u256_cmp(A, B);
    return na ? -c : c;
}

/* rescale to a larger or smaller scale (HALF_UP when dropping digits), precision pr */
static inline int x_dec_rescale(x_i128 a, int sa, int sr, int pr, x_i128* out) {
    int ovf = 0;
    x_u256 m = x_u256_of(x_abs(a));
    if (sr >= sa) m = x_u256_mul_pow10(m, sr - sa, &ovf);
    else m = x_round_down(m, sa - sr);
    if (ovf) return XS_OVERFLOW;
    return x_finish(a < 0, m, pr, out);
}

/* integer result wrapped to width bits (two's complement), or XS_OVERFLOW when it does
 * not fit and wrap is 0 */
static inline int x_int_fit(x_i128 v, int width, int wrap, x_i128* out) {
    x_i128 w;
    if (width >= 128) { *out = v; return XS_OK; }
    if (width == 64) w = (int64_t)v;
    else if (width == 32) w = (int32_t)v;
    else if (width == 16) w = (int16_t)v;
    else w = (int8_t)v;
    if (w != v && !wrap) return XS_OVERFLOW;
    *out = w;
    return XS_OK;
}

/* integral a op b (op: 0 + 1 - 2 * 4 % 5 pmod) at the type's width */
static inline int x_int_op(int op, x_i128 a, x_i128 b, int width, int wrap, x_i128* out) {
    x_i128 r;
    if (op == 0) r = a + b;
    else if (op == 1) r = a - b;
    else if (op == 2) r = a * b;
    else {
        if (b == 0) return XS_DIV_ZERO;
        r = a % b;
        if (op == 5 && r < 0) r = (r + b) % b;
    }
    return x_int_fit(r, width, wrap, out);
}

/* round a (scale sa) to scale sr < sa: mode 0 HALF_UP, 1 FLOOR, 2 CEILING, 3 HALF_EVEN */
static inline int x_dec_round(x_i128 a, int sa, int sr, int mode, int pr, x_i128* out) {
    x_u256 m = x_u256_of(x_abs(a)), d, q, rem;
    int ovf = 0, up;
    if (sr >= sa) return x_finish(a < 0, m, pr, out);
    if (mode == 0) return x_finish(a < 0, x_round_down(m, sa - sr), pr, out);
    d = x_u256_mul_pow10(x_u256_of(1), sa - sr, &ovf);
    q = x_u256_divmod(m, d, &rem);
    if (mode == 3) {
        int c = x_u256_cmp(x_u256_shl1(rem), d);
        up = c > 0 || (c == 0 && (q.lo & 1));
    } else {
        up = (rem.hi != 0 || rem.lo != 0) && ((mode == 1) == (a < 0));
    }
    if (up) q = x_u256_add(q, x_u256_of(1));
    return x_finish(a < 0, q, pr, out);
}

/* a (scale sa) truncated toward zero to an integer (Spark's CAST of DECIMAL to integral) */
static inline int x_dec_trunc(x_i128 a, int sa, x_i128* out) {
    x_u128 m = x_abs(a);
    if (sa > 0) m /= X_POW10[sa];
    *out = a < 0 ? -(x_i128)m : (x_i128)m;
    return XS_OK;
}

/* running sum of an aggregate: the sentinel X_SUM_OVERFLOW (below every 38-digit value)
 * sticks once the 128-bit sum overflowed */
#define X_SUM_OVERFLOW ((x_i128)((x_u128)1 << 127))
static inline void x_sum_add(x_i128* sum, x_i128 v) {
    if (*sum != X_SUM_OVERFLOW && __builtin_add_overflow(*sum, v, sum)) *sum = X_SUM_OVERFLOW;
}

/* number of significant bits of a magnitude (0 for 0) */
static inline int x_bitlen(x_u128 v) {
    unsigned long long hi = (unsigned long long)(v >> 64), lo = (unsigned long long)v;
    if (hi) return 128 - __builtin_clzll(hi);
    return lo ? 64 - __builtin_clzll(lo) : 0;
}

/* |v| / 10^scale rounded once (half even) to a binary mantissa of `bits` bits (53 for
 * DOUBLE, 24 for FLOAT), as Java's BigDecimal.doubleValue/floatValue: Spark's
 * Decimal.toDouble/toFloat. The quotient is formed with at least bits + 2 bits, and the
 * remainder decides ties. */
static inline double x_round_binary(x_i128 v, int scale, int bits) {
    x_u128 n = x_abs(v), q, mant, rest, half;
    x_u256 num, den, rem, quot;
    int k = 0, shift, blen, sticky, ovf = 0, i;
    double r;
    if (n == 0) return v < 0 ? -0.0 : 0.0;
    den = x_u256_mul_pow10(x_u256_of(1), scale, &ovf);
    blen = x_bitlen(den.lo);  /* 10^scale < 2^128 for scale <= 38 */
    if (bits + 2 + blen > x_bitlen(n)) k = bits + 2 + blen - x_bitlen(n);
    num = x_u256_of(n);
    for (i = 0; i < k; i++) num = x_u256_shl1(num);
    quot = x_u256_divmod(num, den, &rem);
    q = quot.lo;  /* < 2^128: n * 2^k / 10^scale has at most bits + 4 bits when k > 0 */
    sticky = rem.hi != 0 || rem.lo != 0;
    shift = x_bitlen(q) - bits;
    if (shift > 0) {
        mant = q >> shift;
        rest = q & ((((x_u128)1) << shift) - 1);
        half = ((x_u128)1) << (shift - 1);
        if (rest > half || (rest == half && (sticky || (mant & 1)))) mant += 1;
    } else {
        mant = q;
        shift = 0;
    }
    r = ldexp((double)mant, shift - k);
    return v < 0 ? -r : r;
}

/* DECIMAL(p, scale) (or an integer, scale 0) to DOUBLE, correctly rounded */
static inline double x_to_double(x_i128 v, int scale) {
    static const double p10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
        1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (scale == 0) return (double)v;  /* one rounding (gcc's __floattidf) */
    if (scale <= 22 && x_abs(v) <= ((x_u128)1 << 53)) return (double)(int64_t)v / p10[scale];
    return x_round_binary(v, scale, 53);
}

/* DECIMAL(p, scale) (or an integer) to FLOAT, correctly rounded (not through double) */
static inline float x_to_float(x_i128 v, int scale) {
    if (scale == 0) return (float)v;  /* __floattisf: one rounding */
    return (float)x_round_binary(v, scale, 24);  /* exact: 24 bits fit a float */
}

#endif
