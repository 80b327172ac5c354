/* Spark's round/bround of a DOUBLE or FLOAT (RoundBase): BigDecimal.valueOf(x), i.e. the
 * shortest decimal string that reads back as x (Java's Double.toString; a FLOAT is widened
 * to double first), rounded HALF_UP (round) or HALF_EVEN (bround) at `digits` places after
 * the point (negative: before it), then read back as a double (or a float). NaN and
 * infinities are returned unchanged. So round(2.675, 2) is 2.68 although the double
 * 2.675 lies below the tie; rounding the binary value (floor(x * 100 + 0.5)) gives 2.67. */
#ifndef CEPSQL_SPARK_ROUND_H
#define CEPSQL_SPARK_ROUND_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the shortest "d.ddde+XX" text (1..17 significant digits) that reads back as x */
static inline int x_shortest_digits(double x, char* digits, int* exp10) {
    char buf[40];
    int p, n = 0, i;
    char* e;
    for (p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    for (i = 0; buf[i] && buf[i] != 'e'; i++)
        if (buf[i] >= '0' && buf[i] <= '9') digits[n++] = buf[i];
    e = strchr(buf, 'e');
    *exp10 = e ? atoi(e + 1) : 0;
    return n;
}

static inline double x_spark_round(double x, int digits, int half_even, int to_float) {
    char d[24], out[64];
    int n, e10, keep, up, i, neg = x < 0, tail = 0;
    if (x != x || x - x != 0.0 || x == 0.0) return x;  /* NaN, +-inf, +-0 */
    n = x_shortest_digits(neg ? -x : x, d, &e10);
    /* value = 0.d[0]d[1]... * 10^(e10 + 1); keep the first `keep` digits */
    keep = e10 + 1 + digits;
    if (keep >= n) return x;  /* no digit dropped: the value is unchanged */
    if (keep < 0) return 0.0;
    for (i = keep + 1; i < n; i++) tail |= d[i] != '0';
    if (half_even) {
        int last_odd = keep > 0 && ((d[keep - 1] - '0') & 1);
        up = d[keep] > '5' || (d[keep] == '5' && (tail || last_odd));
    } else {
        up = d[keep] >= '5';
    }
    /* digits 0..keep-1, plus one unit in the last kept place when rounding up */
    for (i = keep - 1; up && i >= 0; i--) {
        if (d[i] == '9') { d[i] = '0'; } else { d[i]++; up = 0; }
    }
    if (up) {  /* carried past the first digit: 10^(e10 + 1) */
        snprintf(out, sizeof out, "%s1e%d", neg ? "-" : "", e10 + 1);
    } else if (keep == 0) {
        return 0.0;
    } else {
        snprintf(out, sizeof out, "%s0.%.*se%d", neg ? "-" : "", keep, d, e10 + 1);
    }
    if (to_float) return (double)strtof(out, NULL);
    return strtod(out, NULL);
}

#endif
