/* gw_handlekey_test: re-export handle generations (gateway/inode/handlekey.c)
 * cannot be computed from others, and handle-key keeps every generation
 * handed out.
 *
 * 1. The attack: a client reads three (node-id, generation) pairs in its
 *    own file handles. Were generations the low 32 bits of XXH3-64 of the
 *    node-id seeded with a secret, it could run XXH3 backwards (on 8
 *    bytes it is a few invertible multiply and xor-shift steps): guess
 *    the 32 hash bits it does not see, undo each step, and out comes the
 *    seed, checked on the other two pairs; 2^32 guesses, seconds of CPU.
 *    Here the test, which chose the seed, tells the attacker which 1/1024
 *    of that search holds the answer (2^22 guesses). With the seed, the
 *    attacker predicts 1000 other node-ids' generations; it must get at
 *    most one right (chance: 2^-32 each).
 * 2. The file: a handle-key of the older format keeps its node-ids'
 *    generations (below its cutover the table's, from it the older
 *    hash), later node-ids get SipHash-2-4 under the new key, which the
 *    file keeps across restarts; a damaged file is made anew; the
 *    documented format (key 00..0f) gives SipHash's reference output.
 */
#include <stdint.h>
#include <xxhash.h>

#include "check.h"
#include "inode_i.h"
#include "siphash.h"

#define MX 0x9fb21c651e98df25ull	/* XXH3's multiplier for 4..8 bytes */
#define HINT_BITS 10			/* of the 32 guessed: the test's */

static uint64_t rotl(uint64_t x, int r)
{
	r &= 63;
	return r ? x << r | x >> (64 - r) : x;
}

static uint64_t put_le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return v;
}

/* ---- the attacker: XXH3_64bits_withSeed of 8 bytes, run backwards ----
 * Forward (libxxhash 0.8.1, 4..8-byte input, len 8): the input as
 * in = low word << 32 | high word, k = in ^ bitflip (bitflip: a constant
 * of the library minus the seed with its low word byte-swapped into its
 * high one), then a = k ^ rotl(k, 49) ^ rotl(k, 24), b = a * MX,
 * c = b ^ ((b >> 35) + 8), d = c * MX, h = d ^ (d >> 28). */

/* x * inv(x) == 1 mod 2^64 (x odd): Newton's iteration doubles the
 * correct low bits, from 3. */
static uint64_t inv_mul(uint64_t x)
{
	uint64_t y = x;

	for (int i = 0; i < 5; i++)
		y *= 2 - x * y;
	return y;
}

/* a = k ^ rotl(k, 49) ^ rotl(k, 24) is multiplication by 1 + X^49 + X^24
 * in GF(2)[X]/(X^64 + 1), where squaring doubles the exponents: its 64th
 * power is 1, so its inverse is its 63rd power, the product of its
 * squarings 2^0..2^5. */
static uint64_t unrot(uint64_t a)
{
	for (int j = 0; j < 6; j++)
		a ^= rotl(a, (49 << j) & 63) ^ rotl(a, (24 << j) & 63);
	return a;
}

/* k from d (the value before the last xor-shift). */
static uint64_t undo_from_d(uint64_t d)
{
	uint64_t c = d * inv_mul(MX);
	/* (b >> 35) + 8 < 2^30: c's bits from 30 up are b's */
	uint64_t b = c ^ ((c >> 35) + 8);

	return unrot(b * inv_mul(MX));
}

/* d from a whole hash h = d ^ (d >> 28). */
static uint64_t unshift(uint64_t h)
{
	return h ^ h >> 28 ^ h >> 56;
}

/* d from the low 32 bits of h (g) and d's high 32 (the guess). */
static uint64_t d_from_guess(uint32_t g, uint32_t dhi)
{
	uint32_t t = g ^ (uint32_t)((uint64_t)dhi << 4);

	return (uint64_t)dhi << 32 | (t ^ t >> 28);
}

static uint32_t xxh3_gen(uint64_t nodeid, uint64_t seed)
{
	uint32_t g = (uint32_t)XXH3_64bits_withSeed(&nodeid, 8, seed);

	return g ? g : 1;
}

/* The seed that the pairs (n[i], g[i]) came from, searching the 2^22 high
 * words of d for pair 0 that start with hint; if none fits all three,
 * the last one tried (it fits pair 0). */
static uint64_t recover_seed(const uint64_t n[3], const uint32_t g[3],
			     uint32_t hint, uint64_t bitflip0, int *found)
{
	uint64_t seed = 0;

	*found = 0;
	for (uint32_t i = 0; i < 1u << (32 - HINT_BITS); i++) {
		uint32_t dhi = hint << (32 - HINT_BITS) | i;
		uint64_t k = undo_from_d(d_from_guess(g[0], dhi));
		uint64_t flip = k ^ rotl(n[0], 32);
		uint64_t s2 = bitflip0 - flip;	/* the seed, low word swapped up */
		uint32_t lo = (uint32_t)s2;

		seed = ((s2 >> 32) ^ __builtin_bswap32(lo)) << 32 | lo;
		if (xxh3_gen(n[1], seed) == g[1] &&
		    xxh3_gen(n[2], seed) == g[2]) {
			*found = 1;
			break;
		}
	}
	return seed;
}

/* A v1 handle-key (as the gateway wrote it before SipHash): magic, seed,
 * cutover, XXH3-64 of the 24 bytes before. */
static void write_v1(const char *dir, uint64_t seed, uint64_t cutover)
{
	uint8_t b[32];
	char path[256];
	FILE *f;

	memcpy(b, "CGWHKEY1", 8);
	put_le(b + 8, seed);
	put_le(b + 16, cutover);
	put_le(b + 24, XXH3_64bits(b, 24));
	snprintf(path, sizeof(path), "%s/handle-key", dir);
	f = fopen(path, "w");
	CHECK(f && fwrite(b, 1, 32, f) == 32 && fclose(f) == 0);
}

static size_t read_key_file(const char *dir, uint8_t *b, size_t max)
{
	char path[256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/handle-key", dir);
	f = fopen(path, "r");
	CHECK(f);
	n = fread(b, 1, max, f);
	fclose(f);
	return n;
}

static void write_key_file(const char *dir, const uint8_t *b, size_t n)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/handle-key", dir);
	f = fopen(path, "w");
	CHECK(f && fwrite(b, 1, n, f) == n && fclose(f) == 0);
}

static const char *subdir(const char *name)
{
	static char path[4][256];
	static int k;
	char *p = path[k++ & 3];

	snprintf(p, 256, "%s/%s", t_tmpdir(), name);
	CHECK(mkdir(p, 0700) == 0);
	return p;
}

/* The SipHash generation of nodeid under the key in a v2 file's bytes. */
static uint32_t sip_gen(const uint8_t *file, uint64_t nodeid)
{
	uint8_t m[8];
	uint32_t g;

	put_le(m, nodeid);
	g = (uint32_t)siphash24(file + 8, m, 8);
	return g ? g : 1;
}

static void attack(void)
{
	const uint64_t seed = 0x3c6ef372fe94f82bull;	/* the secret */
	static struct gw gw;
	const char *dir = subdir("attack");
	uint64_t n[3] = { 1000, 1001, 1002 }, bitflip0, guess;
	uint32_t g[3], hint;
	int found, right = 0;

	/* The attacker's model checks itself: the library's bitflip at seed
	 * 0 comes out the same from two inputs, and unrot undoes the mix. */
	for (uint64_t k = 1; k < 1u << 20; k = k * 3 + 7)
		CHECK(unrot(k ^ rotl(k, 49) ^ rotl(k, 24)) == k);
	bitflip0 = undo_from_d(unshift(XXH3_64bits_withSeed(&n[0], 8, 0))) ^
		   rotl(n[0], 32);
	CHECK((undo_from_d(unshift(XXH3_64bits_withSeed(&n[1], 8, 0))) ^
	       rotl(n[1], 32)) == bitflip0);

	/* The gateway: handle-key as a gateway of the XXH3 format made it at
	 * its first start (cutover 2: every node-id hashed). */
	write_v1(dir, seed, 2);
	gw.generation = 0x5eed;
	CHECK_EQ(gw_handle_key_load(&gw, dir, 2), 0);
	for (int i = 0; i < 3; i++)
		g[i] = gw_node_generation(&gw, n[i]);

	/* The search slice that holds d's high word for pair 0, were the
	 * generations XXH3 under seed. */
	hint = (uint32_t)(unshift(XXH3_64bits_withSeed(&n[0], 8, seed)) >>
			  (64 - HINT_BITS));
	guess = recover_seed(n, g, hint, bitflip0, &found);
	for (uint64_t id = 5000; id < 6000; id++)
		right += gw_node_generation(&gw, id) == xxh3_gen(id, guess);
	fprintf(stderr, "attack: seed %s (%016llx), %d of 1000 generations "
		"predicted\n", found ? "recovered" : "not found",
		(unsigned long long)guess, right);
	CHECK(right <= 1);
	CHECK(!found);
}

static void file(void)
{
	const uint64_t seed = 0x9e3779b97f4a7c15ull, T = 0x5eed;
	const uint64_t ids[] = { 1, 2, 50, 99, 100, 150, 199, 200, 300, 499,
				 700, 1ull << 40 };
	const size_t nids = sizeof(ids) / sizeof(ids[0]);
	static struct gw gw, gw2;
	const char *dir = subdir("file");
	uint8_t b[64], b2[64];
	uint32_t before[16];
	int same = 0;

	/* 1. The older format, cutover 100, upgraded at high-water mark 200:
	 * nothing handed out changes, node-ids from 200 get SipHash. */
	write_v1(dir, seed, 100);
	gw.generation = T;
	CHECK_EQ(gw_handle_key_load(&gw, dir, 200), 0);
	CHECK_EQ(read_key_file(dir, b, sizeof(b)), 56);
	CHECK(!memcmp(b, "CGWHKEY2", 8));
	for (size_t i = 0; i < nids; i++) {
		uint64_t id = ids[i];
		uint32_t want = id < 100 ? T : id < 200 ? xxh3_gen(id, seed) :
			       sip_gen(b, id);

		before[i] = gw_node_generation(&gw, id);
		CHECK_EQ(before[i], want);
	}
	for (uint64_t id = 200; id < 1200; id++)
		same += gw_node_generation(&gw, id) == xxh3_gen(id, seed);
	CHECK(same <= 1);

	/* 2. A restart (higher mark): the same file, the same generations. */
	gw2.generation = T;
	CHECK_EQ(gw_handle_key_load(&gw2, dir, 900), 0);
	CHECK_EQ(read_key_file(dir, b2, sizeof(b2)), 56);
	CHECK(!memcmp(b, b2, 56));
	for (size_t i = 0; i < nids; i++)
		CHECK_EQ(gw_node_generation(&gw2, ids[i]), before[i]);

	/* 3. Damaged (a key byte): made anew with the current mark; below
	 * it the table's generation, from it a new key. */
	b2[20] ^= 1;
	write_key_file(dir, b2, 56);
	memset(&gw2, 0, sizeof(gw2));
	gw2.generation = T;
	CHECK_EQ(gw_handle_key_load(&gw2, dir, 600), 0);
	CHECK_EQ(read_key_file(dir, b2, sizeof(b2)), 56);
	CHECK(memcmp(b + 8, b2 + 8, 16) != 0);
	CHECK_EQ(gw_node_generation(&gw2, 150), T);
	CHECK_EQ(gw_node_generation(&gw2, 599), T);
	CHECK_EQ(gw_node_generation(&gw2, 600), sip_gen(b2, 600));
	CHECK_EQ(gw_node_generation(&gw2, 700), sip_gen(b2, 700));

	/* 4. The format as documented, key 00..0f: node-id
	 * 0x0706050403020100 is SipHash's 8-byte reference message (00..07),
	 * whose output's low word is 0x9a932462. A table without an older
	 * range (cutover 2 for both). */
	memcpy(b, "CGWHKEY2", 8);
	for (int i = 0; i < 16; i++)
		b[8 + i] = (uint8_t)i;
	put_le(b + 24, 2);
	put_le(b + 32, 0);
	put_le(b + 40, 2);
	put_le(b + 48, XXH3_64bits(b, 48));
	write_key_file(dir, b, 56);
	memset(&gw2, 0, sizeof(gw2));
	gw2.generation = T;
	CHECK_EQ(gw_handle_key_load(&gw2, dir, 5000), 0);
	CHECK_EQ(gw_node_generation(&gw2, 0x0706050403020100ull), 0x9a932462);
	CHECK_EQ(gw_node_generation(&gw2, 1), T);	/* the root */
	CHECK_EQ(gw_node_generation(&gw2, 2), sip_gen(b, 2));
	CHECK_EQ(read_key_file(dir, b2, sizeof(b2)), 56);
	CHECK(!memcmp(b, b2, 56));	/* read, not rewritten */

	/* 5. None yet: made, nothing older. */
	dir = subdir("fresh");
	memset(&gw2, 0, sizeof(gw2));
	gw2.generation = T;
	CHECK_EQ(gw_handle_key_load(&gw2, dir, 2), 0);
	CHECK_EQ(read_key_file(dir, b2, sizeof(b2)), 56);
	CHECK_EQ(gw_node_generation(&gw2, 1), T);
	CHECK_EQ(gw_node_generation(&gw2, 2), sip_gen(b2, 2));
}

int main(void)
{
	attack();
	file();
	return 0;
}
