/* handlekey_v1.c - what a gateway of handle-key's first format
 * ("CGWHKEY1") wrote and gave out, for the test of an upgrade from it
 * (tests/integration/76_handle_guess.sh): such a gateway's cache_dir and
 * the generations in the handles its clients still hold.
 *
 *   handlekey_v1 write FILE SEED CUTOVER   write FILE as that gateway made
 *                                          its handle-key: "CGWHKEY1", SEED,
 *                                          CUTOVER (u64 little-endian each),
 *                                          XXH3-64 of the 24 bytes before
 *   handlekey_v1 gen SEED NODEID           print the generation it gave
 *                                          NODEID (from CUTOVER on): the
 *                                          low 32 bits of XXH3-64 of the
 *                                          node-id seeded with SEED, 0 made
 *                                          1; as 8 hex digits in the byte
 *                                          order of a FUSE file handle
 *                                          (little-endian)
 *
 * Numbers are hexadecimal (0x optional). Exit status: 0 ok, 1 error,
 * 2 usage.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static int num(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 16);
	return errno || !*s || *end ? -1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t a, b;

	if (argc == 5 && !strcmp(argv[1], "write") && !num(argv[3], &a) &&
	    !num(argv[4], &b)) {
		uint8_t k[32];
		FILE *f;

		memcpy(k, "CGWHKEY1", 8);
		put64(k + 8, a);
		put64(k + 16, b);
		put64(k + 24, XXH3_64bits(k, 24));
		f = fopen(argv[2], "w");
		if (!f || fwrite(k, 1, sizeof(k), f) != sizeof(k) ||
		    fclose(f)) {
			perror(argv[2]);
			return 1;
		}
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "gen") && !num(argv[2], &a) &&
	    !num(argv[3], &b)) {
		uint32_t g = (uint32_t)XXH3_64bits_withSeed(&b, sizeof(b), a);

		if (!g)
			g = 1;
		printf("%02x%02x%02x%02x\n", g & 0xff, g >> 8 & 0xff,
		       g >> 16 & 0xff, g >> 24);
		return 0;
	}
	fprintf(stderr, "usage: handlekey_v1 write FILE SEED CUTOVER\n"
		"       handlekey_v1 gen SEED NODEID\n");
	return 2;
}
