/* BLAKE2b (RFC 7693), no key, 8-byte digest: hashlib.blake2b(data, digest_size=8).
 *
 * One implementation for the native extensions that hash as the Python code does: the
 * core's batch dedupe (_batch.c: the digest read big-endian, as
 * iri_scrapy.store.dedupe.fingerprint) and the protocol level's page cutter
 * (iri_scrapy/protocol/_blocks.c: read little-endian and signed, as
 * iri_scrapy.protocol.fingerprint._hs).  Each test checks its side against hashlib.
 * Header-only (static functions): each extension compiles its own copy.
 */
#ifndef IRI_SCRAPY_BLAKE2B_H
#define IRI_SCRAPY_BLAKE2B_H

#include <stdint.h>
#include <string.h>

static const uint64_t blake2b_iv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t blake2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

#define ROTR64(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
#define G(a, b, c, d, x, y) do {                      \
        v[a] = v[a] + v[b] + (x); v[d] = ROTR64(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d]; v[b] = ROTR64(v[b] ^ v[c], 24);       \
        v[a] = v[a] + v[b] + (y); v[d] = ROTR64(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d]; v[b] = ROTR64(v[b] ^ v[c], 63);       \
    } while (0)

static uint64_t
load64(const unsigned char *p)
{
    uint64_t w = 0;
    for (int k = 7; k >= 0; k--) w = (w << 8) | p[k];
    return w;
}

static void
blake2b_compress(uint64_t h[8], const unsigned char block[128], uint64_t t, int last)
{
    uint64_t m[16], v[16];
    for (int k = 0; k < 16; k++) m[k] = load64(block + 8 * k);
    for (int k = 0; k < 8; k++) {
        v[k] = h[k];
        v[k + 8] = blake2b_iv[k];
    }
    v[12] ^= t;  /* the counter's high word stays 0: lines are far below 2**64 bytes */
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const uint8_t *s = blake2b_sigma[r];
        G(0, 4, 8, 12, m[s[0]], m[s[1]]);
        G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        G(2, 6, 10, 14, m[s[4]], m[s[5]]);
        G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        G(0, 5, 10, 15, m[s[8]], m[s[9]]);
        G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        G(2, 7, 8, 13, m[s[12]], m[s[13]]);
        G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int k = 0; k < 8; k++) h[k] ^= v[k] ^ v[k + 8];
}

/* The 8-byte digest of data[0:n) as one little-endian word (its first byte lowest). */
static uint64_t
blake2b_digest8(const unsigned char *data, size_t n)
{
    uint64_t h[8];
    memcpy(h, blake2b_iv, sizeof h);
    h[0] ^= 0x01010000ULL | 8;  /* depth 1, fanout 1, no key, digest length 8 */
    unsigned char block[128];
    uint64_t t = 0;
    while (n > 128) {
        t += 128;
        blake2b_compress(h, data, t, 0);
        data += 128;
        n -= 128;
    }
    memset(block, 0, sizeof block);
    memcpy(block, data, n);
    blake2b_compress(h, block, t + n, 1);
    return h[0];
}

#endif
