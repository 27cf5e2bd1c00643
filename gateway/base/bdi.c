/* bdi.c - the FUSE mount as the kernel sees it: where it is mounted
 * (mountinfo), its backing_dev_info's readahead and dirty-page limits.
 *
 * The kernel gives every FUSE bdi strict_limit=1 and max_ratio=1: the
 * mount's dirty pages are held to 1 % of the dirty threshold (on this
 * 6.18 kernel with 24 GiB: max_bytes 48,867,696), enforced even when the
 * machine has little dirty memory in all, so that an unprivileged FUSE
 * server cannot pin memory. With the write-back cache that makes writers
 * sleep in balance_dirty_pages far below what the origin takes. cachegw is
 * started by root; it lets its bdi use the global limits instead
 * (vm.dirty_ratio / dirty_bytes still bound it), as the NFS client's bdi
 * does. read_ahead_kb is raised to readahead= (gw_set_kernel_readahead).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gw_i.h"

/* "\040" in mountinfo is a space, and so on. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
				      (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = 0;
}

/* The device of the top mount on path (the last line naming it), and
 * whether it is a cachegw mount. -ENOENT: nothing mounted there. */
int gw_mount_at(const char *path, unsigned *maj, unsigned *min, bool *ours)
{
	char line[4096], mnt[PATH_MAX];
	FILE *f = fopen("/proc/self/mountinfo", "r");
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned a, b;
		const char *sep;

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &a, &b, mnt) != 3)
			continue;
		unescape(mnt);
		if (strcmp(mnt, path))
			continue;
		sep = strstr(line, " - ");
		*maj = a;
		*min = b;
		*ours = sep && !strncmp(sep + 3, "fuse.cachegw ", 13);
		ret = 0;
	}
	fclose(f);
	return ret;
}

/* The kernel's readahead for a FUSE mount is its bdi's read_ahead_kb (128
 * by default): the size of the read requests we get for sequential reads.
 * Raise it to readahead=, so a sequential reader sends 1 MiB requests and
 * several at a time. Called once the kernel has processed our INIT reply
 * (which can only lower it): at the first open. Found through
 * /proc/self/mountinfo, since a stat() of the mountpoint would ask
 * ourselves. */
void gw_set_kernel_readahead(const struct gw_opts *o)
{
	char dir[128], path[160];
	FILE *f;

	if (!gw_bdi_dir(o, dir, sizeof(dir)))
		return;
	snprintf(path, sizeof(path), "%s/read_ahead_kb", dir);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%llu\n", (unsigned long long)
			  (o->readahead / 1024 ? o->readahead / 1024 : 4)) < 0)
		gw_log("cannot set %s: %s (kernel readahead stays small)",
		       path, strerror(errno));
	if (f)
		fclose(f);
}

bool gw_bdi_dir(const struct gw_opts *o, char *path, size_t len)
{
	char *real = realpath(o->mountpoint, NULL);
	unsigned maj, min;
	bool ours = false;

	if (real && gw_mount_at(real, &maj, &min, &ours) == 0 && ours)
		snprintf(path, len, "/sys/class/bdi/%u:%u", maj, min);
	else
		ours = false;
	free(real);
	return ours;
}

static void bdi_write(const char *dir, const char *name, const char *val)
{
	char path[256];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = write(fd, val, strlen(val));
		close(fd);
	}
	if (n != (ssize_t)strlen(val))
		gw_log("writeback: cannot set %s to %s: %s (the kernel keeps "
		       "this mount's dirty pages small)", path, val,
		       n < 0 ? strerror(errno) : "short write");
}

void gw_set_kernel_dirty_limits(const struct gw_opts *o)
{
	char dir[128];

	if (!gw_bdi_dir(o, dir, sizeof(dir))) {
		gw_log("writeback: no bdi found for %s", o->mountpoint);
		return;
	}
	/* max_ratio first: max_bytes is the same limit in bytes (writing
	 * either sets both); then lift the strict per-bdi limit. */
	bdi_write(dir, "max_ratio", "100");
	if (o->dirty_max) {
		char v[32];

		/* A limit of its own, enforced (strict): past it writers
		 * wait and the flusher starts, so a big write streams to the
		 * origin while it is written instead of all at fsync. */
		snprintf(v, sizeof(v), "%llu", (unsigned long long)o->dirty_max);
		bdi_write(dir, "max_bytes", v);
		bdi_write(dir, "strict_limit", "1");
	} else
		bdi_write(dir, "strict_limit", "0");
}
