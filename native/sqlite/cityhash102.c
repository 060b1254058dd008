/*
 * CityHash128 of CityHash v1.0.2 (Geoff Pike and Jyrki Alakuijala, Google,
 * MIT licence), the version ClickHouse checksums its compressed blocks with
 * (later CityHash releases hash differently). Written for little-endian
 * hosts, as ClickHouse's framing is. Only the 128-bit function and what it
 * needs.
 */
#include "cityhash102.h"

#include <string.h>

static const uint64_t K0 = 0xc3a5c85c97cb3127ULL;
static const uint64_t K1 = 0xb492b66fbe98f273ULL;
static const uint64_t K2 = 0x9ae16a3b2f90404fULL;
static const uint64_t K3 = 0xc949d7c7509e6557ULL;

typedef struct {
  uint64_t lo, hi;
} Pair;

static uint64_t load64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static uint64_t load32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static uint64_t rotr(uint64_t v, unsigned shift) { return shift == 0 ? v : (v >> shift) | (v << (64 - shift)); }

static uint64_t shiftMix(uint64_t v) { return v ^ (v >> 47); }

/* Murmur-like mix of 128 bits down to 64 */
static uint64_t mix128(uint64_t lo, uint64_t hi) {
  const uint64_t mul = 0x9ddfea08eb382d69ULL;
  uint64_t a = (lo ^ hi) * mul;
  a ^= a >> 47;
  uint64_t b = (hi ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

static uint64_t hashUpTo16(const unsigned char *s, size_t len) {
  if (len > 8) {
    uint64_t a = load64(s), b = load64(s + len - 8);
    return mix128(a, rotr(b + len, (unsigned)len)) ^ b;
  }
  if (len >= 4) return mix128(len + (load32(s) << 3), load32(s + len - 4));
  if (len > 0) {
    uint32_t y = (uint32_t)s[0] + ((uint32_t)s[len >> 1] << 8);
    uint32_t z = (uint32_t)len + ((uint32_t)s[len - 1] << 2);
    return shiftMix(y * K2 ^ z * K3) * K2;
  }
  return K2;
}

static Pair weak32(uint64_t w, uint64_t x, uint64_t y, uint64_t z, uint64_t a, uint64_t b) {
  a += w;
  b = rotr(b + a + z, 21);
  uint64_t c = a;
  a += x;
  a += y;
  b += rotr(a, 44);
  return (Pair){a + z, b + c};
}

static Pair weak32At(const unsigned char *s, uint64_t a, uint64_t b) {
  return weak32(load64(s), load64(s + 8), load64(s + 16), load64(s + 24), a, b);
}

/* the short-input path (under 128 bytes) */
static Pair cityMurmur(const unsigned char *s, size_t len, Pair seed) {
  uint64_t a = seed.lo, b = seed.hi, c, d;
  if (len <= 16) {
    a = shiftMix(a * K1) * K1;
    c = b * K1 + hashUpTo16(s, len);
    d = shiftMix(a + (len >= 8 ? load64(s) : c));
  } else {
    c = mix128(load64(s + len - 8) + K1, a);
    d = mix128(b + len, c + load64(s + len - 16));
    a += d;
    for (ptrdiff_t left = (ptrdiff_t)len - 16; left > 0; left -= 16, s += 16) {
      a ^= shiftMix(load64(s) * K1) * K1;
      a *= K1;
      b ^= a;
      c ^= shiftMix(load64(s + 8) * K1) * K1;
      c *= K1;
      d ^= c;
    }
  }
  a = mix128(a, c);
  b = mix128(d, b);
  return (Pair){a ^ b, mix128(b, a)};
}

/* one 64-byte round of the long-input loop */
static void round64(const unsigned char *s, uint64_t *x, uint64_t *y, uint64_t *z, Pair *v, Pair *w) {
  *x = rotr(*x + *y + v->lo + load64(s + 16), 37) * K1;
  *y = rotr(*y + v->hi + load64(s + 48), 42) * K1;
  *x ^= w->hi;
  *y ^= v->lo;
  *z = rotr(*z ^ w->lo, 33);
  *v = weak32At(s, v->hi * K1, *x + w->lo);
  *w = weak32At(s + 32, *z + w->hi, *y);
  uint64_t t = *z;
  *z = *x;
  *x = t;
}

static Pair city128Seeded(const unsigned char *s, size_t len, Pair seed) {
  if (len < 128) return cityMurmur(s, len, seed);
  uint64_t x = seed.lo, y = seed.hi, z = len * K1;
  Pair v, w;
  v.lo = rotr(y ^ K1, 49) * K1 + load64(s);
  v.hi = rotr(v.lo, 42) * K1 + load64(s + 8);
  w.lo = rotr(y + z, 35) * K1 + x;
  w.hi = rotr(x + load64(s + 88), 53) * K1;
  do {
    round64(s, &x, &y, &z, &v, &w);
    round64(s + 64, &x, &y, &z, &v, &w);
    s += 128;
    len -= 128;
  } while (len >= 128);
  y += rotr(w.lo, 37) * K0 + z;
  x += rotr(v.lo + z, 49) * K0;
  /* the remaining 0..127 bytes, in 32-byte pieces from the end */
  for (size_t done = 0; done < len;) {
    done += 32;
    y = rotr(y - x, 42) * K0 + v.hi;
    w.lo += load64(s + len - done + 16);
    x = rotr(x, 49) * K0 + w.lo;
    w.lo += v.lo;
    v = weak32At(s + len - done, v.lo, v.hi);
  }
  x = mix128(x, v.lo);
  y = mix128(y, w.lo);
  return (Pair){mix128(x + v.hi, w.hi) + y, mix128(x + w.hi, y + v.hi)};
}

void kreplay_cityhash102_128(const unsigned char *s, size_t len, uint64_t out[2]) {
  Pair r;
  if (len >= 16)
    r = city128Seeded(s + 16, len - 16, (Pair){load64(s) ^ K3, load64(s + 8)});
  else if (len >= 8)
    r = city128Seeded(NULL, 0, (Pair){load64(s) ^ (len * K0), load64(s + len - 8) ^ K1});
  else
    r = city128Seeded(s, len, (Pair){K0, K1});
  out[0] = r.lo;
  out[1] = r.hi;
}
