/* fuzz_silly_names: the input is cache_dir/silly-names, the hidden names
 * (".cachegw-silly.*") an earlier run left at the origin (gateway/
 * silly.c). It is loaded as a successor loads it (which keeps every name:
 * it may still be open) and written back; loaded and written again, the
 * file holds the same lines (in another order: the list is a stack):
 * what was read is what is written. */
#include <errno.h>

#include "fuzz.h"
#include "keep_i.h"

#define FILE_MAX (1u << 20)

static struct gw gw;
static char *first, *second;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_lines(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Load and write back; the file's lines, sorted, into out (NUL-separated);
 * its length, or -1 when there is no file. */
static ssize_t load_save(char *out)
{
	static char *lines[FILE_MAX / 2];
	size_t nl = 0, used = 0;
	ssize_t n;

	FZ_CHECK(gw_silly_start(&gw, fz_dir(), true) == 0);
	gw_silly_stop(&gw);
	n = fz_read("silly-names", out, FILE_MAX - 1);
	if (n < 0)
		return n;
	out[n] = 0;
	for (char *p = out, *nl_at; *p; p = nl_at + 1) {
		lines[nl++] = p;
		nl_at = strchr(p, '\n');
		if (!nl_at)
			break;
		*nl_at = 0;
	}
	qsort(lines, nl, sizeof(lines[0]), cmp_lines);
	{
		static char sorted[FILE_MAX];

		for (size_t i = 0; i < nl; i++) {
			size_t len = strlen(lines[i]) + 1;

			memcpy(sorted + used, lines[i], len);
			used += len;
		}
		memcpy(out, sorted, used);
	}
	return (ssize_t)used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ssize_t n1, n2;

	if (!first) {
		first = malloc(FILE_MAX);
		second = malloc(FILE_MAX);
		FZ_CHECK(first && second);
	}
	fz_write("silly-names", data, size);
	n1 = load_save(first);
	n2 = load_save(second);
	FZ_CHECK(n1 == n2);
	FZ_CHECK(n1 < 0 || !memcmp(first, second, (size_t)n1));
	return 0;
}
