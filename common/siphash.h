/* siphash.h - SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast
 * short-input PRF", 2012): a keyed pseudo-random function with a 128-bit
 * key and a 64-bit output. Without the key its outputs cannot be
 * predicted from other outputs, which a fast non-keyed hash seeded with a
 * secret (XXH3) does not give: the gateway's re-export handle generations
 * (gateway/inode/handlekey.c) rest on it. Written from the paper's description;
 * tests/unit/siphash_test checks the reference vectors.
 *
 * The key is 16 bytes, read as two little-endian words k0, k1; the message
 * is read as little-endian words, the last one padded with zeros and the
 * message's length (mod 256) in its top byte.
 */
#ifndef CACHEGW_SIPHASH_H
#define CACHEGW_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define SIPHASH_KEY_LEN 16

static inline uint64_t siphash_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline uint64_t siphash_rotl(uint64_t x, int b)
{
	return x << b | x >> (64 - b);
}

/* One SipRound: two ARX half-rounds over the four state words. */
static inline void siphash_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = siphash_rotl(v[1], 13);
	v[1] ^= v[0];
	v[0] = siphash_rotl(v[0], 32);
	v[2] += v[3];
	v[3] = siphash_rotl(v[3], 16);
	v[3] ^= v[2];
	v[0] += v[3];
	v[3] = siphash_rotl(v[3], 21);
	v[3] ^= v[0];
	v[2] += v[1];
	v[1] = siphash_rotl(v[1], 17);
	v[1] ^= v[2];
	v[2] = siphash_rotl(v[2], 32);
}

/* SipHash-2-4 of len bytes at msg under key: two rounds per message word,
 * four to finish. */
static inline uint64_t siphash24(const uint8_t key[SIPHASH_KEY_LEN],
				 const void *msg, size_t len)
{
	const uint8_t *m = msg;
	uint64_t k0 = siphash_le64(key), k1 = siphash_le64(key + 8);
	/* 1. the state: the key xored with "somepseudorandomlygeneratedbytes" */
	uint64_t v[4] = {
		k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
		k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull,
	};
	uint64_t w;
	size_t i;

	/* 2. compression: each whole word, then the last (padded) one */
	for (i = 0; i + 8 <= len; i += 8) {
		w = siphash_le64(m + i);
		v[3] ^= w;
		siphash_round(v);
		siphash_round(v);
		v[0] ^= w;
	}
	w = (uint64_t)(len & 0xff) << 56;
	for (size_t j = 0; i + j < len; j++)
		w |= (uint64_t)m[i + j] << (8 * j);
	v[3] ^= w;
	siphash_round(v);
	siphash_round(v);
	v[0] ^= w;
	/* 3. finalization */
	v[2] ^= 0xff;
	for (int r = 0; r < 4; r++)
		siphash_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

#endif
