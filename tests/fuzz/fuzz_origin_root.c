/* fuzz_origin_root: the input is cache_dir/origin-root, the export's root
 * handle kept for a start without the origin (daemon/origin_root.c). A
 * handle it accepts fits a file handle, and written back by the real
 * writer and read again it is the same handle from the same place. */
#include <errno.h>

#include "fuzz.h"
#include "daemon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char where[1024], where2[1024], *colon;
	struct nfsc_fh fh, fh2;

	fz_write("origin-root", data, size);
	if (gw_origin_root_load(fz_dir(), where, sizeof(where), &fh))
		return 0;
	FZ_CHECK(fh.len >= 1 && fh.len <= NFSC_FH_MAX);
	FZ_CHECK(strlen(where) < sizeof(where));
	/* The writer keeps "SERVER:EXPORT": split where as it was made. */
	colon = strchr(where, ':');
	if (!colon)
		return 0;
	*colon = 0;
	if (gw_origin_root_save(fz_dir(), where, colon + 1, &fh))
		return 0;
	*colon = ':';
	FZ_CHECK(gw_origin_root_load(fz_dir(), where2, sizeof(where2),
				     &fh2) == 0);
	FZ_CHECK(!strcmp(where, where2));
	FZ_CHECK(fh2.len == fh.len && !memcmp(fh2.data, fh.data, fh.len));
	return 0;
}
