/* cachegw-bench-nfsread — the plain-libnfs baseline of cachegw-bench: in
 * one process, mount an NFSv3 export with libnfs's sync API and walk a
 * directory tree in it, reading every regular file whole (default) or only
 * lstat()ing every entry (--stat).  Prints "files=N dirs=N bytes=N".
 *
 *   cachegw-bench-nfsread [--stat] nfs://HOST/EXPORT[?nfsport=N&mountport=N] [SUBDIR]
 *
 * Exit status 0, or 1 with a message on the first error. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <nfsc/libnfs.h>

#define BUFSZ (1024 * 1024)

struct walk {
	struct nfs_context *nfs;
	int stat_only;
	char *buf;
	uint64_t files, dirs, bytes;
};

static int read_file(struct walk *w, const char *path)
{
	struct nfsfh *fh;
	int n;

	if (nfs_open(w->nfs, path, O_RDONLY, &fh) < 0) {
		fprintf(stderr, "nfsread: open %s: %s\n", path, nfs_get_error(w->nfs));
		return -1;
	}
	while ((n = nfs_read(w->nfs, fh, BUFSZ, w->buf)) > 0)
		w->bytes += (uint64_t)n;
	nfs_close(w->nfs, fh);
	if (n < 0) {
		fprintf(stderr, "nfsread: read %s: %s\n", path, nfs_get_error(w->nfs));
		return -1;
	}
	return 0;
}

static int walk_dir(struct walk *w, const char *path)
{
	struct nfsdir *dir;
	struct nfsdirent *e;
	char *child;
	int rc = 0;

	if (nfs_opendir(w->nfs, path, &dir) < 0) {
		fprintf(stderr, "nfsread: opendir %s: %s\n", path, nfs_get_error(w->nfs));
		return -1;
	}
	w->dirs++;
	while (rc == 0 && (e = nfs_readdir(w->nfs, dir)) != NULL) {
		if (!strcmp(e->name, ".") || !strcmp(e->name, ".."))
			continue;
		if (asprintf(&child, "%s/%s", path, e->name) < 0) {
			rc = -1;
			break;
		}
		if (w->stat_only) {
			struct nfs_stat_64 st;

			if (nfs_lstat64(w->nfs, child, &st) < 0) {
				fprintf(stderr, "nfsread: lstat %s: %s\n", child,
					nfs_get_error(w->nfs));
				rc = -1;
			} else if (S_ISREG(st.nfs_mode)) {
				w->files++;
				w->bytes += st.nfs_size;
			}
			if (rc == 0 && S_ISDIR(st.nfs_mode))
				rc = walk_dir(w, child);
		} else if (S_ISDIR(e->mode)) {
			rc = walk_dir(w, child);
		} else if (S_ISREG(e->mode)) {
			rc = read_file(w, child);
			w->files++;
		}
		free(child);
	}
	nfs_closedir(w->nfs, dir);
	return rc;
}

int main(int argc, char **argv)
{
	struct walk w = { 0 };
	struct nfs_url *url = NULL;
	const char *sub = "";
	char *root = NULL;
	int i = 1, rc = 1;

	if (i < argc && !strcmp(argv[i], "--stat")) {
		w.stat_only = 1;
		i++;
	}
	if (argc - i < 1 || argc - i > 2 || argv[i][0] == '-') {
		fprintf(stderr, "usage: cachegw-bench-nfsread [--stat] nfs://HOST/EXPORT[?ARGS] [SUBDIR]\n");
		return 2;
	}
	if (argc - i == 2)
		sub = argv[i + 1];
	w.nfs = nfs_init_context();
	w.buf = malloc(BUFSZ);
	if (!w.nfs || !w.buf) {
		fprintf(stderr, "nfsread: out of memory\n");
		goto out;
	}
	/* Every lookup and readdir goes to the server, as in a plain loop. */
	nfs_set_dircache(w.nfs, 0);
	url = nfs_parse_url_dir(w.nfs, argv[i]);
	if (!url) {
		fprintf(stderr, "nfsread: bad URL %s: %s\n", argv[i], nfs_get_error(w.nfs));
		goto out;
	}
	if (nfs_mount(w.nfs, url->server, url->path) < 0) {
		fprintf(stderr, "nfsread: mount %s:%s: %s\n", url->server, url->path,
			nfs_get_error(w.nfs));
		goto out;
	}
	while (*sub == '/')
		sub++;
	if (asprintf(&root, "/%s", sub) < 0)
		goto out;
	if (strlen(root) > 1 && root[strlen(root) - 1] == '/')
		root[strlen(root) - 1] = '\0';
	if (walk_dir(&w, strcmp(root, "/") ? root : "") == 0) {
		printf("files=%" PRIu64 " dirs=%" PRIu64 " bytes=%" PRIu64 "\n",
		       w.files, w.dirs, w.bytes);
		rc = 0;
	}
out:
	free(root);
	if (url)
		nfs_destroy_url(url);
	if (w.nfs)
		nfs_destroy_context(w.nfs);
	free(w.buf);
	return rc;
}
