/* warm_walk.c - `cachegw-inspect warm`, step 2: the regular files below the
 * PATHs, found by WARM_META_JOBS threads listing directories at once; no
 * symbolic link followed, no other filesystem entered. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inspect_i.h"

/* ---- 2. the walk: directories listed by WARM_META_JOBS threads ----
 * Each thread takes a directory from the queue, opens it relative to
 * nothing it did not check (O_DIRECTORY | O_NOFOLLOW, on the mount's
 * filesystem only), lists it (the kernel's READDIRPLUS: the entries'
 * types come with it) and queues its subdirectories: a far origin's
 * round trips overlap instead of adding up. Symbolic links are not
 * followed, other filesystems not entered (as nftw's FTW_PHYS |
 * FTW_MOUNT). */
struct wq {
	char *path;
	struct wq *next;
};

struct walk {
	struct warm *w;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct wq *head;	/* directories to list; lock */
	unsigned busy;		/* threads listing one; lock */
	int err;		/* first -errno that stops the walk; lock */
};

static void walk_push(struct walk *k, char *path)
{
	struct wq *q = malloc(sizeof(*q));

	pthread_mutex_lock(&k->lock);
	if (!q) {
		free(path);
		k->err = -ENOMEM;
	} else {
		q->path = path;
		q->next = k->head;
		k->head = q;
		pthread_cond_signal(&k->cond);
	}
	pthread_mutex_unlock(&k->lock);
}

static void walk_failed(struct walk *k, const char *path, int err)
{
	pthread_mutex_lock(&k->w->out_lock);
	fprintf(stderr, "%s: cannot read %s: %s\n", prog, path,
		strerror(err));
	k->w->failed++;
	pthread_mutex_unlock(&k->w->out_lock);
}

static void walk_dir(struct walk *k, const char *path)
{
	struct warm *w = k->w;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		walk_failed(k, path, errno);
		if (fd >= 0)
			close(fd);
		return;
	}
	if (st.st_dev != w->mntdev) {
		close(fd);
		return;	/* another filesystem mounted below: not ours */
	}
	d = fdopendir(fd);
	if (!d) {
		walk_failed(k, path, errno);
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		unsigned char type = de->d_type;
		char *child;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (type == DT_UNKNOWN) {
			if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
				continue;	/* gone meanwhile */
			type = S_ISDIR(st.st_mode) ? DT_DIR :
			       S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
		}
		if (type != DT_DIR && type != DT_REG)
			continue;
		if (asprintf(&child, "%s/%s", path, de->d_name) < 0) {
			pthread_mutex_lock(&k->lock);
			k->err = -ENOMEM;
			pthread_mutex_unlock(&k->lock);
			break;
		}
		if (type == DT_DIR) {
			walk_push(k, child);
			continue;
		}
		pthread_mutex_lock(&w->out_lock);
		if (warm_add_file(w, child)) {
			pthread_mutex_lock(&k->lock);
			k->err = -ENOMEM;
			pthread_mutex_unlock(&k->lock);
		}
		pthread_mutex_unlock(&w->out_lock);
		free(child);
	}
	closedir(d);
}

static void *walker(void *arg)
{
	struct walk *k = arg;
	struct wq *q;

	pthread_mutex_lock(&k->lock);
	for (;;) {
		while (!k->head && k->busy && !k->err)
			pthread_cond_wait(&k->cond, &k->lock);
		if (k->err || !k->head)
			break;	/* an error, or nothing queued or in hand */
		q = k->head;
		k->head = q->next;
		k->busy++;
		pthread_mutex_unlock(&k->lock);
		walk_dir(k, q->path);
		free(q->path);
		free(q);
		pthread_mutex_lock(&k->lock);
		k->busy--;
		if (!k->busy && !k->head)
			pthread_cond_broadcast(&k->cond);
	}
	pthread_cond_broadcast(&k->cond);
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

/* Walk the directory at path (resolved, below the mount). 0 or -errno. */
int warm_walk_tree(struct warm *w, const char *path)
{
	struct walk k = { .w = w, .lock = PTHREAD_MUTEX_INITIALIZER,
			  .cond = PTHREAD_COND_INITIALIZER };
	pthread_t t[WARM_META_JOBS];
	unsigned n = 0, i;
	char *root = strdup(path);

	if (!root)
		return -ENOMEM;
	walk_push(&k, root);
	for (i = 0; i < WARM_META_JOBS; i++)
		if (pthread_create(&t[n], NULL, walker, &k) == 0)
			n++;
	if (!n)
		walker(&k);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	while (k.head) {	/* left by an error */
		struct wq *q = k.head;

		k.head = q->next;
		free(q->path);
		free(q);
	}
	return k.err;
}
