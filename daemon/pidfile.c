/* pidfile.c - pidfile=: this process's pid, written atomically; removed at
 * exit unless a successor has written its own. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

void gw_pidfile_write(const struct gw_opts *o)
{
	char tmp[PATH_MAX], line[24];
	bool ok;
	int fd, n;

	if (!o->pidfile)
		return;
	/* A name of its own in the pidfile's directory (mkostemp: O_EXCL,
	 * so a link someone put there in advance is never followed: the
	 * pid, say "PIDFILE.1234", would be theirs to guess), then renamed
	 * over it: readers see the old pid or the new, never half. */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.XXXXXX", o->pidfile) >=
	    sizeof(tmp)) {
		gw_log("pidfile '%s': %s", o->pidfile, strerror(ENAMETOOLONG));
		return;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		gw_log("pidfile '%s': %s", o->pidfile, strerror(errno));
		return;
	}
	n = snprintf(line, sizeof(line), "%d\n", getpid());
	ok = fchmod(fd, 0644) == 0 && write(fd, line, (size_t)n) == n;
	if (close(fd) < 0)
		ok = false;
	if (!ok || rename(tmp, o->pidfile) < 0) {
		gw_log("pidfile '%s': %s", o->pidfile, strerror(errno));
		unlink(tmp);
	}
}

void gw_pidfile_remove(const struct gw_opts *o)
{
	FILE *f;
	int pid = 0;

	if (!o->pidfile || !(f = fopen(o->pidfile, "r")))
		return;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	if (pid == getpid())	/* not a successor's */
		unlink(o->pidfile);
}
