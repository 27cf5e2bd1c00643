/* cache_lock_test: the lock file: a second OWNER or a MODIFY gets -EBUSY with the holder's pid; INSPECT works alongside; the lock goes with the owner. */
#include <sys/wait.h>
#include "cache_helpers.h"

static int try_open(enum cache_open_mode mode, char *err, size_t errlen)
{
	struct cache_opts o = { .dir = t_path("c"), .mode = mode };
	struct cache *c = NULL;
	int ret = cache_open(&o, &c, err, errlen);

	if (!ret)
		cache_close(c);
	return ret;
}

int main(void)
{
	struct cache *c = t_open(t_path("c"), CACHE_OPEN_OWNER, 0, 0, 0);
	char err[256], want[64];
	pid_t pid;
	int st;

	snprintf(want, sizeof(want), "(pid %ld)", (long)getpid());
	CHECK_EQ(try_open(CACHE_OPEN_OWNER, err, sizeof(err)), -EBUSY);
	CHECK(strstr(err, "is in use by another cachegw"));
	CHECK(strstr(err, want));
	CHECK_EQ(try_open(CACHE_OPEN_MODIFY, err, sizeof(err)), -EBUSY);
	CHECK_EQ(try_open(CACHE_OPEN_INSPECT, err, sizeof(err)), 0);
	/* From another process too. */
	pid = fork();
	CHECK(pid >= 0);
	if (!pid)
		_exit(try_open(CACHE_OPEN_OWNER, err, sizeof(err)) == -EBUSY ? 0 : 1);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st));
	cache_close(c);
	CHECK_EQ(try_open(CACHE_OPEN_OWNER, err, sizeof(err)), 0);
	CHECK_EQ(try_open(CACHE_OPEN_MODIFY, err, sizeof(err)), 0);
	return 0;
}
