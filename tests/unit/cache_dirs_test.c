/* cache_dirs_test: bad cache_dir inputs give one-line errors (not a directory, foreign non-empty, other format version, not writable, missing); a new cache is 0700 with 0600 files. */
#include "cache_helpers.h"

static int try_open(const char *dir, enum cache_open_mode mode, char *err,
		    size_t errlen)
{
	struct cache_opts o = { .dir = dir, .mode = mode };
	struct cache *c = NULL;
	int ret = cache_open(&o, &c, err, errlen);

	if (!ret)
		cache_close(c);
	else
		fprintf(stderr, "  expected error: %s\n", err);
	CHECK(!strchr(err, '\n'));
	return ret;
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	CHECK(f);
	fputs(s, f);
	fclose(f);
}

int main(void)
{
	char err[512];
	struct stat st;
	struct cache *c;
	struct cache_obj *o;

	/* Not a directory. */
	write_file(t_path("file"), "x");
	CHECK_EQ(try_open(t_path("file"), CACHE_OPEN_OWNER, err, sizeof(err)), -ENOTDIR);
	CHECK(strstr(err, "is not a directory"));
	/* Foreign, non-empty: refused, and nothing written into it. */
	mkdir(t_path("foreign"), 0755);
	write_file(t_path("foreign/precious"), "x");
	CHECK_EQ(try_open(t_path("foreign"), CACHE_OPEN_OWNER, err, sizeof(err)), -ENOTEMPTY);
	CHECK(strstr(err, "not empty"));
	CHECK(access(t_path("foreign/lock"), F_OK) < 0);
	CHECK_EQ(try_open(t_path("foreign"), CACHE_OPEN_MODIFY, err, sizeof(err)), -ENOENT);
	/* Other format version. */
	mkdir(t_path("v99"), 0700);
	write_file(t_path("v99/cache.conf"), "format_version = 99\nblock_size = 65536\n");
	CHECK_EQ(try_open(t_path("v99"), CACHE_OPEN_OWNER, err, sizeof(err)), -EPROTO);
	CHECK(strstr(err, "format version 99"));
	CHECK(access(t_path("v99/lock"), F_OK) < 0);	/* refused untouched */
	/* Damaged cache.conf: refused untouched, with what to do. */
	mkdir(t_path("junkconf"), 0700);
	write_file(t_path("junkconf/cache.conf"), "hello\n");
	CHECK_EQ(try_open(t_path("junkconf"), CACHE_OPEN_OWNER, err, sizeof(err)), -EPROTO);
	CHECK(strstr(err, "damaged cache.conf") && strstr(err, "empty cache_dir"));
	CHECK(access(t_path("junkconf/lock"), F_OK) < 0);
	/* A bad block size recorded: the same. */
	mkdir(t_path("badbs"), 0700);
	write_file(t_path("badbs/cache.conf"), "format_version = 2\nblock_size = 3000\n");
	CHECK_EQ(try_open(t_path("badbs"), CACHE_OPEN_OWNER, err, sizeof(err)), -EPROTO);
	CHECK(strstr(err, "bad block_size 3000"));
	CHECK(access(t_path("badbs/lock"), F_OK) < 0);
	/* Numbers past 32 bits are damage, not their low bits (2^32 + 2 is
	 * not version 2, 2^32 + 64 KiB not a 64 KiB block), nor are signs. */
	{
		static const char *const bad[] = {
			"format_version = 4294967298\nblock_size = 65536\n",
			"format_version = 2\nblock_size = 4295032832\n",
			"format_version = 2\nblock_size = 18446744073709617152\n",
			"format_version = -18446744073709551614\nblock_size = 65536\n",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char d[32];

			snprintf(d, sizeof(d), "bignum%zu", i);
			mkdir(t_path(d), 0700);
			snprintf(d, sizeof(d), "bignum%zu/cache.conf", i);
			write_file(t_path(d), bad[i]);
			snprintf(d, sizeof(d), "bignum%zu", i);
			CHECK_EQ(try_open(t_path(d), CACHE_OPEN_OWNER, err,
					  sizeof(err)), -EPROTO);
			CHECK(strstr(err, "damaged cache.conf"));
		}
	}
	/* Missing parent; missing dir for INSPECT. */
	CHECK_EQ(try_open(t_path("no/such/dir"), CACHE_OPEN_OWNER, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "cannot create"));
	CHECK_EQ(try_open(t_path("nothere"), CACHE_OPEN_INSPECT, err, sizeof(err)), -ENOENT);
	/* Bad block size. */
	{
		struct cache_opts o = { .dir = t_path("bs"), .block_size = 3000 };

		CHECK_EQ(cache_open(&o, &c, err, sizeof(err)), -EINVAL);
	}
	/* Not writable: root bypasses modes, so only as a normal user. */
	if (geteuid() != 0) {
		mkdir(t_path("ro"), 0500);
		CHECK_EQ(try_open(t_path("ro"), CACHE_OPEN_OWNER, err, sizeof(err)), -EACCES);
		CHECK(strstr(err, "not writable"));
	} else {
		fprintf(stderr, "  (running as root: not-writable case not testable here)\n");
	}
	/* An empty existing dir (even with lost+found) becomes a cache, 0700. */
	mkdir(t_path("empty"), 0755);
	mkdir(t_path("empty/lost+found"), 0700);
	c = t_open(t_path("empty"), CACHE_OPEN_OWNER, 0, 0, 0);
	o = t_get(c, "k", "v", 100);
	CHECK_EQ(cache_fill(o, "0123456789", 10, 0), -EINVAL);	/* short, not EOF */
	{
		char buf[100] = "x";

		CHECK_EQ(cache_fill(o, buf, 100, 0), 0);
	}
	cache_drain(c);
	cache_obj_put(o);
	CHECK_EQ(stat(t_path("empty"), &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0700);
	CHECK_EQ(stat(t_path("empty/cache.conf"), &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);
	CHECK_EQ(stat(t_path("empty/lock"), &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);
	CHECK_EQ(stat(t_objfile(c, "k", true), &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);
	CHECK_EQ(stat(t_objfile(c, "k", false), &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);
	cache_close(c);
	/* A new dir is created 0700. */
	c = t_open(t_path("new"), CACHE_OPEN_OWNER, 0, 0, 0);
	cache_close(c);
	CHECK_EQ(stat(t_path("new"), &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0700);
	return 0;
}
