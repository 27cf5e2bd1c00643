/* silly.c - files unlinked (or renamed over) while open through the mount.
 *
 * An NFSv3 origin keeps no open-file state: a REMOVE of a file that a
 * process here holds open destroys it, and the descriptor answers ESTALE.
 * Like the Linux NFS client (fs/nfs/unlink.c, nfs_sillyrename), the gateway
 * RENAMEs such a file to a hidden name in the same directory instead, and
 * REMOVEs that name at the last close of the inode. The names are
 * ".cachegw-silly.<fileid, 16 hex digits>.<counter, hex>": clearly ours, and
 * checked against the file's fileid before anything is removed.
 *
 * The hidden names are not hidden from READDIR (the Linux client does not
 * hide its .nfs files either): a directory holding one is not empty, so
 * rmdir answers ENOTEMPTY until the last close, as over NFS.
 *
 * A gateway that dies leaves its hidden names behind: every one is recorded
 * in cache_dir/silly-names (rewritten whole, fsynced, renamed into place,
 * its directory fsynced) before the RENAME and dropped after the REMOVE,
 * and gw_silly_start() removes the leftovers of an earlier run. Only names
 * in that file, of the form above, whose fileid matches, are ever removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "keep_i.h"

#define SILLY_PREFIX ".cachegw-silly."
#define SILLY_FILE "silly-names"
#define SILLY_MAGIC "cachegw-silly-names 1"

struct gw_silly {
	struct gw_silly *next;		/* table list, table lock */
	struct nfsc_fh dir;		/* directory holding the hidden name */
	char name[64];			/* the hidden name */
	uint64_t fileid;
	struct nfsc_cred cred;		/* who unlinked it: removes it too */
};

struct gw_silly_tab {
	pthread_mutex_t lock;		/* guards the list and the file */
	struct gw_silly *head;
	char *path;			/* cache_dir/silly-names */
	uint64_t counter;		/* next name's counter, lock */
};

/* ---- the record of hidden names ---- */

static void fh_hex(const struct nfsc_fh *fh, char *out)
{
	for (uint32_t i = 0; i < fh->len; i++)
		sprintf(out + 2 * i, "%02x", fh->data[i]);
	out[2 * fh->len] = 0;
}

static int fh_unhex(const char *s, struct nfsc_fh *fh)
{
	size_t n = strlen(s);

	if (n == 0 || n % 2 || n / 2 > NFSC_FH_MAX)
		return -EINVAL;
	fh->len = (uint32_t)(n / 2);
	for (size_t i = 0; i < fh->len; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		fh->data[i] = (uint8_t)v;
	}
	return 0;
}

/* The fileid a name of ours carries, or -EINVAL for any other name:
 * the prefix, 16 hex digits, a dot, 1 to 16 hex digits, nothing else. */
static int name_fileid(const char *name, uint64_t *fileid)
{
	const char *p = name + strlen(SILLY_PREFIX), *ctr = p + 17;
	size_t n;

	if (strncmp(name, SILLY_PREFIX, strlen(SILLY_PREFIX)) ||
	    strspn(p, "0123456789abcdef") != 16 || p[16] != '.')
		return -EINVAL;
	n = strspn(ctr, "0123456789abcdef");
	if (n == 0 || n > 16 || ctr[n])
		return -EINVAL;
	*fileid = strtoull(p, NULL, 16);
	return 0;
}

/* fopen() that follows no link (the file is in the cache directory,
 * where nothing is reached through one), close-on-exec, mode 0600. */
static FILE *fopen_nofollow(const char *path, int flags, const char *mode)
{
	int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC, 0600);
	FILE *f;

	if (fd < 0)
		return NULL;
	f = fdopen(fd, mode);
	if (!f) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return f;
}

/* Write the list to the file, durably. t->lock held. */
static int tab_save_locked(struct gw_silly_tab *t)
{
	char tmp[4096], fh[2 * NFSC_FH_MAX + 1];
	struct gw_silly *s;
	FILE *f;
	int ret = 0;

	GW_ASSERT_HELD(&t->lock);

	if (!t->head) {
		if (unlink(t->path) < 0 && errno != ENOENT)
			return -errno;
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", t->path);
	f = fopen_nofollow(tmp, O_WRONLY | O_CREAT | O_TRUNC, "w");
	if (!f)
		return -errno;
	fprintf(f, "%s\n", SILLY_MAGIC);
	for (s = t->head; s; s = s->next) {
		fh_hex(&s->dir, fh);
		fprintf(f, "%" PRIu32 " %" PRIu32 " %s %s\n", s->cred.uid,
			s->cred.gid, fh, s->name);
	}
	if (fflush(f) || fsync(fileno(f)))
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, t->path) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	else	/* the record must survive a power cut that follows the
		 * origin's RENAME */
		ret = fsync_parent(t->path);
	return ret;
}

static void tab_add(struct gw_silly_tab *t, struct gw_silly *s)
{
	int ret;

	pthread_mutex_lock(&t->lock);
	s->next = t->head;
	t->head = s;
	ret = tab_save_locked(t);
	pthread_mutex_unlock(&t->lock);
	/* Not fatal: without the record only a crash leaves the name. */
	if (ret)
		gw_log("silly-rename: cannot record %s: %s", s->name,
		       strerror(-ret));
}

static void tab_del(struct gw_silly_tab *t, struct gw_silly *s)
{
	struct gw_silly **pp;
	int ret;

	pthread_mutex_lock(&t->lock);
	for (pp = &t->head; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	ret = tab_save_locked(t);
	pthread_mutex_unlock(&t->lock);
	if (ret)
		gw_log("silly-rename: cannot update %s: %s", t->path,
		       strerror(-ret));
}

/* REMOVE s's name if it is still the file it was made for. 0 when the
 * name is gone, -errno when it stays (to be tried at the next start). */
static int silly_remove(struct gw *gw, const struct gw_silly *s)
{
	struct nfsc_fh fh;
	struct nfsc_attr a;
	bool has_attr = false;
	int ret;

	ret = nfsc_lookup(gw->nfs, &s->cred, &s->dir, s->name, &fh, &a,
			  &has_attr);
	if (ret == -ENOENT || ret == -ESTALE)
		return 0;	/* gone already, or its directory is */
	if (!ret && !has_attr)
		ret = nfsc_getattr(gw->nfs, &s->cred, &fh, &a);
	if (ret)
		return ret;
	if (a.fileid != s->fileid) {
		gw_log("silly-rename: %s is another file now; left alone",
		       s->name);
		return 0;
	}
	ret = nfsc_remove(gw->nfs, &s->cred, &s->dir, s->name);
	return ret == -ENOENT ? 0 : ret;
}

/* ---- start-up: the names an earlier run left ---- */

static void load_line(struct gw_silly_tab *t, const char *line)
{
	char fh[2 * NFSC_FH_MAX + 2], name[64];
	unsigned uid, gid;
	struct gw_silly *s;

	if (sscanf(line, "%u %u %129s %63s", &uid, &gid, fh, name) != 4)
		goto bad;
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	s->cred.uid = uid;
	s->cred.gid = gid;
	strcpy(s->name, name);
	if (fh_unhex(fh, &s->dir) || name_fileid(name, &s->fileid)) {
		free(s);
		goto bad;
	}
	s->next = t->head;
	t->head = s;
	return;
bad:
	gw_log("silly-rename: ignoring a bad line in %s", t->path);
}

static void load(struct gw_silly_tab *t)
{
	char line[512];
	FILE *f = fopen_nofollow(t->path, O_RDONLY, "r");

	if (!f) {
		if (errno == ELOOP)
			gw_log("silly-rename: %s is a symbolic link: not "
			       "followed, ignored", t->path);
		return;
	}
	if (!fgets(line, sizeof(line), f) ||
	    strncmp(line, SILLY_MAGIC "\n", sizeof(line))) {
		gw_log("silly-rename: %s is not ours; ignored", t->path);
		fclose(f);
		return;
	}
	while (fgets(line, sizeof(line), f))
		load_line(t, line);
	fclose(f);
}

int gw_silly_start(struct gw *gw, const char *cache_dir, bool keep)
{
	struct gw_silly_tab *t = calloc(1, sizeof(*t));
	struct gw_silly **pp, *s;
	int ret;

	if (!t || asprintf(&t->path, "%s/%s", cache_dir, SILLY_FILE) < 0) {
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	/* Seconds in the high bits: names of an earlier run that could not
	 * be removed are never reused. */
	t->counter = (uint64_t)time(NULL) << 16;
	gw->silly = t;
	load(t);
	/* A successor (gw_state.h): the names are of files the kernel may
	 * still have open through the connection; the next fresh start
	 * removes them. */
	for (pp = &t->head; keep && (s = *pp);) {
		gw_log("silly-rename: %s kept: its file may still be open "
		       "(gw_silly_adopt ties it to the file again)", s->name);
		pp = &s->next;
	}
	for (pp = &t->head; !keep && (s = *pp);) {
		ret = silly_remove(gw, s);
		if (ret) {
			gw_log("silly-rename: cannot remove %s left by an "
			       "earlier run: %s (kept for the next start)",
			       s->name, strerror(-ret));
			pp = &s->next;
			continue;
		}
		gw_log("silly-rename: removed %s left by an earlier run",
		       s->name);
		*pp = s->next;
		free(s);
	}
	pthread_mutex_lock(&t->lock);
	ret = tab_save_locked(t);
	pthread_mutex_unlock(&t->lock);
	if (ret)
		gw_log("silly-rename: cannot update %s: %s", t->path,
		       strerror(-ret));
	return 0;
}

void gw_silly_stop(struct gw *gw)
{
	struct gw_silly_tab *t = gw->silly;
	struct gw_silly *s;

	if (!t)
		return;
	while ((s = t->head)) {
		t->head = s->next;
		free(s);
	}
	pthread_mutex_destroy(&t->lock);
	free(t->path);
	free(t);
	gw->silly = NULL;
}

/* ---- unlink / rename over an open file, and its last close ---- */

bool gw_silly_wanted(struct gw_inode *ino, const struct nfsc_attr *a)
{
	bool open;

	/* Another name keeps the file: removing this one is harmless. */
	if (a->type != NFSC_REG || a->nlink > 1)
		return false;
	pthread_mutex_lock(&ino->lock);
	open = (ino->opens > 0 || ino->opening > 0) && !ino->silly;
	pthread_mutex_unlock(&ino->lock);
	return open;
}

int gw_silly_rename(struct gw *gw, const struct nfsc_cred *cr,
		    struct gw_inode *dir, const char *name,
		    struct gw_inode *ino, const struct nfsc_attr *a)
{
	struct gw_silly_tab *t = gw->silly;
	struct gw_silly *s = calloc(1, sizeof(*s));
	bool closed;
	int ret;

	if (!s)
		return -ENOMEM;
	s->dir = dir->fh;
	s->fileid = a->fileid;
	s->cred = *cr;
	pthread_mutex_lock(&t->lock);
	snprintf(s->name, sizeof(s->name), SILLY_PREFIX "%016" PRIx64
		 ".%" PRIx64, a->fileid, t->counter++);
	pthread_mutex_unlock(&t->lock);
	/* 1. Recorded first: a crash after the RENAME leaves a name the
	 *    next start knows. */
	tab_add(t, s);
	/* 2. The file keeps its handle under the hidden name. */
	ret = nfsc_rename(gw->nfs, cr, &dir->fh, name, &dir->fh, s->name);
	if (ret) {
		tab_del(t, s);
		free(s);
		return ret;
	}
	/* 3. Its last close removes the name; if that close came while the
	 *    RENAME was out, nobody else will. */
	pthread_mutex_lock(&ino->lock);
	closed = ino->opens == 0 && ino->opening == 0;
	if (!closed && !ino->silly) {
		ino->silly = s;
		s = NULL;
	}
	pthread_mutex_unlock(&ino->lock);
	if (closed)
		gw_silly_finish(gw, s);
	else if (s)	/* a second hidden name: left for the next start */
		gw_log("silly-rename: %s: file already has a hidden name",
		       s->name);
	return 0;
}

int gw_silly_undo(struct gw *gw, struct gw_inode *dir, const char *name,
		  struct gw_inode *ino)
{
	struct gw_silly *s;
	int ret;

	pthread_mutex_lock(&ino->lock);
	s = ino->silly;
	ino->silly = NULL;
	pthread_mutex_unlock(&ino->lock);
	if (!s)
		return 0;
	ret = nfsc_rename(gw->nfs, &s->cred, &s->dir, s->name, &dir->fh,
			  name);
	if (ret) {
		gw_log("silly-rename: cannot rename %s back: %s", s->name,
		       strerror(-ret));
		pthread_mutex_lock(&ino->lock);
		ino->silly = s;
		pthread_mutex_unlock(&ino->lock);
		return ret;
	}
	tab_del(gw->silly, s);
	free(s);
	return 0;
}

void gw_silly_finish(struct gw *gw, struct gw_silly *s)
{
	int ret = silly_remove(gw, s);

	if (ret) {
		/* Kept in the record: the next start tries again. */
		gw_log("silly-rename: cannot remove %s: %s", s->name,
		       strerror(-ret));
		return;
	}
	tab_del(gw->silly, s);
	free(s);
}

void gw_silly_release(struct gw *gw, struct gw_inode *ino)
{
	struct gw_silly *s = NULL;

	pthread_mutex_lock(&ino->lock);
	if (ino->opens == 0 && ino->opening == 0) {
		s = ino->silly;
		ino->silly = NULL;
	}
	pthread_mutex_unlock(&ino->lock);
	if (s)
		gw_silly_finish(gw, s);
}

bool gw_silly_is(struct gw_inode *ino, const struct gw_inode *dir,
		 const char *name)
{
	const struct gw_silly *s;
	bool is;

	pthread_mutex_lock(&ino->lock);
	s = ino->silly;
	is = s && s->dir.len == dir->fh.len &&
	     !memcmp(s->dir.data, dir->fh.data, s->dir.len) &&
	     !strcmp(s->name, name);
	pthread_mutex_unlock(&ino->lock);
	return is;
}

bool gw_silly_has(struct gw_inode *ino)
{
	bool has;

	pthread_mutex_lock(&ino->lock);
	has = ino->silly != NULL;
	pthread_mutex_unlock(&ino->lock);
	return has;
}

void gw_silly_adopt(struct gw *gw, struct gw_inode *ino, uint64_t fileid)
{
	struct gw_silly_tab *t = gw->silly;
	struct gw_silly *s;

	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	for (s = t->head; s && s->fileid != fileid; s = s->next)
		;
	pthread_mutex_unlock(&t->lock);
	if (!s)
		return;
	pthread_mutex_lock(&ino->lock);
	if (!ino->silly)
		ino->silly = s;
	pthread_mutex_unlock(&ino->lock);
}
