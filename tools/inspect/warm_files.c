/* warm_files.c - `cachegw-inspect warm`: the list of files it works
 * through, and what the gateway caches of each (`cached`, one file, or
 * every file WARM_META_JOBS at once): the walk (warm_walk.c) adds to the
 * list, the command (warm.c) asks before the reads, the report
 * (warm_read.c) after them. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_i.h"

int warm_add_file(struct warm *w, const char *path)
{
	struct wfile *f;

	/* The control protocol is one line per command. */
	if (strchr(path, '\n')) {
		fprintf(stderr, "%s: skipping a name with a newline: %s\n",
			prog, path);
		return 0;
	}
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 256;
		struct wfile *nf = realloc(w->f, cap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		w->f = nf;
		w->cap = cap;
	}
	f = &w->f[w->n];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	if (!f->path)
		return -ENOMEM;
	f->rel = f->path[w->mntlen] ? f->path + w->mntlen + 1 : "";
	w->n++;
	return 0;
}

int warm_ask_cached(struct warm *w, struct wfile *f, uint64_t *cached,
		    bool *complete)
{
	unsigned long long size, got;
	char *cmd, *reply;
	int done, ret;

	if (asprintf(&cmd, "cached %s", f->rel) < 0)
		return -1;
	ret = ctl_ask(w->dir, cmd, &reply);
	free(cmd);
	if (ret) {
		ctl_perror(w->dir, ret);
		return -1;
	}
	if (sscanf(reply, "file %llu %llu %d", &size, &got, &done) != 3) {
		reply[strcspn(reply, "\n")] = 0;
		fprintf(stderr, "%s: %s: %s\n", prog, f->path, reply);
		free(reply);
		return -1;
	}
	free(reply);
	f->size = size;
	*cached = got;
	*complete = done != 0;
	return 0;
}

static void *asker(void *arg)
{
	struct warm *w = arg;

	for (;;) {
		size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
		struct wfile *f;

		if (i >= w->n)
			break;
		f = &w->f[i];
		if (warm_ask_cached(w, f, &f->before, &f->complete)) {
			f->failed = true;
			__atomic_fetch_add(&w->failed, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

void warm_ask_all(struct warm *w)
{
	pthread_t t[WARM_META_JOBS];
	unsigned n = 0, i;

	w->next = 0;
	for (i = 0; i < WARM_META_JOBS && i < w->n; i++)
		if (pthread_create(&t[n], NULL, asker, w) == 0)
			n++;
	if (!n)
		asker(w);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	w->next = 0;
}
