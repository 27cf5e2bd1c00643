/* fhclient.c - NFSv3 test client that works by file handle (libnfs).
 *
 * Used by the re-export tests: a real NFS client keeps file handles across
 * server restarts, so the tests need a client that can take a handle, keep
 * it (as hex text), and use it again later without looking anything up.
 *
 *   fhclient gethandle URL PATH     print the handle of PATH (hex), found by
 *                                   LOOKUPs from the export root
 *   fhclient readfh URL HEXFH       READ the whole file to stdout
 *   fhclient lsfh URL HEXDIRFH      READDIRPLUS: print the names, one a line
 *                                   ("." and ".." left out)
 *   fhclient statfh URL HEXFH       GETATTR: print "type size fileid"
 *   fhclient gethandles URL         gethandle of every path on stdin (one a
 *                                   line): "PATH HEX" lines, each directory
 *                                   looked up once
 *   fhclient checkfhs URL DATA      READ by handle every "PATH HEX" line on
 *                                   stdin (as gethandles printed them, maybe
 *                                   from another server) and compare with
 *                                   the file DATA/PATH: a line for each one
 *                                   that fails or differs, "ok N" at the end
 *
 * URL is a libnfs export URL (nfs://127.0.0.1/export?nfsport=N&mountport=N).
 * Exit status: 0 ok, 3 NFS3ERR_STALE (message on stderr), 2 usage,
 * 1 any other error.
 */
#include <sys/time.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

#define EXIT_STALE 3
#define FH_MAX 64		/* NFSv3 limit */
#define CALL_TIMEOUT_MS 30000
#define READ_CHUNK (128 * 1024)

/* libnfs 4.0 keeps struct nfs_fh private; nfs_get_fh() points to this. */
struct libnfs_fh {
	int len;
	char *val;
};

struct fh {
	unsigned len;
	unsigned char data[FH_MAX];
};

static const char *prog = "fhclient";

static struct nfs_context *nfs;
static struct rpc_context *rpc;
static struct fh root;

/* ------------------------------------------------------------------ RPC */

struct call {
	int done;
	int rpc_status;		/* RPC_STATUS_* */
	char err[256];
	void (*copy)(struct call *c, void *res);	/* copies the result */
	void *out;		/* where copy() puts it */
};

static void call_cb(struct rpc_context *r, int status, void *data, void *priv)
{
	struct call *c = priv;

	c->done = 1;
	c->rpc_status = status;
	if (status != RPC_STATUS_SUCCESS) {
		snprintf(c->err, sizeof(c->err), "%s",
			 status == RPC_STATUS_ERROR && data ? (char *)data :
			 rpc_get_error(r) ? rpc_get_error(r) : "RPC failed");
		return;
	}
	c->copy(c, data);
}

/* Drive the context until the call completed. 0, or -1 with a message. */
static int call_wait(struct call *c, const char *what)
{
	struct timeval t0, t;

	gettimeofday(&t0, NULL);
	while (!c->done) {
		struct pollfd p = {
			.fd = rpc_get_fd(rpc),
			.events = (short)rpc_which_events(rpc),
		};
		int n = poll(&p, 1, 100);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "%s: %s: poll: %s\n", prog, what,
				strerror(errno));
			return -1;
		}
		if (rpc_service(rpc, n > 0 ? p.revents : 0) < 0) {
			fprintf(stderr, "%s: %s: %s\n", prog, what,
				rpc_get_error(rpc));
			return -1;
		}
		gettimeofday(&t, NULL);
		if (!c->done && (t.tv_sec - t0.tv_sec) * 1000 +
		    (t.tv_usec - t0.tv_usec) / 1000 > CALL_TIMEOUT_MS) {
			fprintf(stderr, "%s: %s: no reply within %d ms\n",
				prog, what, CALL_TIMEOUT_MS);
			return -1;
		}
	}
	if (c->rpc_status != RPC_STATUS_SUCCESS) {
		fprintf(stderr, "%s: %s: %s\n", prog, what, c->err);
		return -1;
	}
	return 0;
}

static const char *nfsstat_name(int st)
{
	switch (st) {
	case NFS3_OK: return "NFS3_OK";
	case NFS3ERR_PERM: return "NFS3ERR_PERM";
	case NFS3ERR_NOENT: return "NFS3ERR_NOENT";
	case NFS3ERR_IO: return "NFS3ERR_IO";
	case NFS3ERR_ACCES: return "NFS3ERR_ACCES";
	case NFS3ERR_NOTDIR: return "NFS3ERR_NOTDIR";
	case NFS3ERR_ISDIR: return "NFS3ERR_ISDIR";
	case NFS3ERR_INVAL: return "NFS3ERR_INVAL";
	case NFS3ERR_STALE: return "NFS3ERR_STALE";
	case NFS3ERR_BADHANDLE: return "NFS3ERR_BADHANDLE";
	case NFS3ERR_BAD_COOKIE: return "NFS3ERR_BAD_COOKIE";
	case NFS3ERR_NOTSUPP: return "NFS3ERR_NOTSUPP";
	case NFS3ERR_TOOSMALL: return "NFS3ERR_TOOSMALL";
	case NFS3ERR_SERVERFAULT: return "NFS3ERR_SERVERFAULT";
	case NFS3ERR_JUKEBOX: return "NFS3ERR_JUKEBOX";
	default: return "NFS3ERR_?";
	}
}

/* An NFS error: message; exit status 3 for STALE, 1 otherwise. */
static int nfs_fail(const char *what, int st)
{
	fprintf(stderr, "%s: %s: %s (%d)\n", prog, what, nfsstat_name(st), st);
	return st == NFS3ERR_STALE ? EXIT_STALE : 1;
}

static void fh3_set(nfs_fh3 *dst, const struct fh *fh)
{
	dst->data.data_len = fh->len;
	dst->data.data_val = (char *)fh->data;
}

static int fh_from3(struct fh *dst, const nfs_fh3 *src)
{
	if (src->data.data_len == 0 || src->data.data_len > FH_MAX)
		return -1;
	dst->len = src->data.data_len;
	memcpy(dst->data, src->data.data_val, dst->len);
	return 0;
}

/* ------------------------------------------------------------ handles */

static void fh_print(const struct fh *fh)
{
	for (unsigned i = 0; i < fh->len; i++)
		printf("%02x", fh->data[i]);
	printf("\n");
}

static int fh_parse(struct fh *fh, const char *hex)
{
	size_t n = strlen(hex);

	if (n == 0 || n % 2 || n / 2 > FH_MAX)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1 ||
		    !strchr("0123456789abcdefABCDEF", hex[2 * i]) ||
		    !strchr("0123456789abcdefABCDEF", hex[2 * i + 1]))
			return -1;
		fh->data[i] = (unsigned char)v;
	}
	fh->len = (unsigned)(n / 2);
	return 0;
}

/* ------------------------------------------------------------ connect */

static int connect_url(const char *url)
{
	struct nfs_url *u;
	struct nfsfh *rfh;
	const struct libnfs_fh *lfh;

	nfs = nfs_init_context();
	if (!nfs) {
		fprintf(stderr, "%s: nfs_init_context failed\n", prog);
		return -1;
	}
	u = nfs_parse_url_dir(nfs, url);
	if (!u) {
		fprintf(stderr, "%s: bad URL '%s': %s\n", prog, url,
			nfs_get_error(nfs));
		return -1;
	}
	if (nfs_mount(nfs, u->server, u->path) != 0) {
		fprintf(stderr, "%s: mount %s:%s: %s\n", prog, u->server,
			u->path, nfs_get_error(nfs));
		nfs_destroy_url(u);
		return -1;
	}
	nfs_destroy_url(u);
	if (nfs_open(nfs, "/", O_RDONLY, &rfh) != 0) {
		fprintf(stderr, "%s: open of the export root: %s\n", prog,
			nfs_get_error(nfs));
		return -1;
	}
	lfh = (const struct libnfs_fh *)nfs_get_fh(rfh);
	if (!lfh || lfh->len <= 0 || lfh->len > FH_MAX) {
		fprintf(stderr, "%s: unexpected root handle size\n", prog);
		return -1;
	}
	root.len = (unsigned)lfh->len;
	memcpy(root.data, lfh->val, root.len);
	nfs_close(nfs, rfh);
	rpc = nfs_get_rpc_context(nfs);
	return 0;
}

/* -------------------------------------------------------------- LOOKUP */

struct lookup_out {
	int status;
	struct fh fh;
	int badfh;
};

static void lookup_copy(struct call *c, void *data)
{
	LOOKUP3res *res = data;
	struct lookup_out *o = c->out;

	o->status = res->status;
	if (res->status == NFS3_OK &&
	    fh_from3(&o->fh, &res->LOOKUP3res_u.resok.object))
		o->badfh = 1;
}

static int do_lookup(const struct fh *dir, const char *name, struct fh *out)
{
	struct lookup_out o = { 0 };
	struct call c = { .copy = lookup_copy, .out = &o };
	LOOKUP3args a;
	char what[512];

	memset(&a, 0, sizeof(a));
	fh3_set(&a.what.dir, dir);
	a.what.name = (char *)name;
	snprintf(what, sizeof(what), "LOOKUP '%s'", name);
	if (rpc_nfs3_lookup_async(rpc, call_cb, &a, &c) != 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, what, rpc_get_error(rpc));
		return 1;
	}
	if (call_wait(&c, what))
		return 1;
	if (o.status != NFS3_OK)
		return nfs_fail(what, o.status);
	if (o.badfh) {
		fprintf(stderr, "%s: %s: bad handle size in reply\n", prog, what);
		return 1;
	}
	*out = o.fh;
	return 0;
}

/* The handle of PATH, relative to the directory handle FROM, by LOOKUPs
 * of each component. */
static int walk(const struct fh *from, const char *path, struct fh *out)
{
	struct fh cur = *from;
	char *p = strdup(path), *save = NULL, *tok;
	int ret = 0;

	if (!p)
		return 1;
	for (tok = strtok_r(p, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		struct fh next;

		ret = do_lookup(&cur, tok, &next);
		if (ret)
			break;
		cur = next;
	}
	free(p);
	if (!ret)
		*out = cur;
	return ret;
}

static int cmd_gethandle(const char *path)
{
	struct fh fh;
	int ret = walk(&root, path, &fh);

	if (!ret)
		fh_print(&fh);
	return ret;
}

/* gethandles: a tree's handles in one connection. The directory of the
 * previous path is remembered, so a sorted list costs one LOOKUP a file. */
static int cmd_gethandles(void)
{
	char line[4096], dir[4096] = "";
	struct fh dirfh = root;
	int ret = 0;

	while (fgets(line, sizeof(line), stdin)) {
		char *slash, *name = line;
		struct fh fh;
		int r;

		line[strcspn(line, "\n")] = '\0';
		if (!*line)
			continue;
		slash = strrchr(line, '/');
		if (slash) {
			*slash = '\0';
			if (strcmp(dir, line)) {
				r = walk(&root, line, &dirfh);
				if (r) {
					ret = r;
					dir[0] = '\0';
					continue;
				}
				snprintf(dir, sizeof(dir), "%s", line);
			}
			name = slash + 1;
			r = do_lookup(&dirfh, name, &fh);
			*slash = '/';
		} else {
			r = do_lookup(&root, name, &fh);
		}
		if (r) {
			ret = r;
			continue;
		}
		printf("%s ", line);
		fh_print(&fh);
	}
	return ret;
}

/* ------------------------------------------------------------- GETATTR */

struct getattr_out {
	int status;
	fattr3 attr;
};

static void getattr_copy(struct call *c, void *data)
{
	GETATTR3res *res = data;
	struct getattr_out *o = c->out;

	o->status = res->status;
	if (res->status == NFS3_OK)
		o->attr = res->GETATTR3res_u.resok.obj_attributes;
}

static int do_getattr(const struct fh *fh, fattr3 *attr)
{
	struct getattr_out o = { 0 };
	struct call c = { .copy = getattr_copy, .out = &o };
	GETATTR3args a;

	memset(&a, 0, sizeof(a));
	fh3_set(&a.object, fh);
	if (rpc_nfs3_getattr_async(rpc, call_cb, &a, &c) != 0) {
		fprintf(stderr, "%s: GETATTR: %s\n", prog, rpc_get_error(rpc));
		return 1;
	}
	if (call_wait(&c, "GETATTR"))
		return 1;
	if (o.status != NFS3_OK)
		return nfs_fail("GETATTR", o.status);
	*attr = o.attr;
	return 0;
}

static int cmd_statfh(const struct fh *fh)
{
	fattr3 at;
	int ret = do_getattr(fh, &at);
	const char *t;

	if (ret)
		return ret;
	switch (at.type) {
	case NF3REG: t = "file"; break;
	case NF3DIR: t = "dir"; break;
	case NF3LNK: t = "symlink"; break;
	default: t = "other"; break;
	}
	printf("%s %" PRIu64 " %" PRIu64 "\n", t, (uint64_t)at.size,
	       (uint64_t)at.fileid);
	return 0;
}

/* ---------------------------------------------------------------- READ */

struct read_out {
	int status;
	uint32_t count;
	int eof;
	char *buf;		/* READ_CHUNK bytes */
	int overflow;
};

static void read_copy(struct call *c, void *data)
{
	READ3res *res = data;
	struct read_out *o = c->out;
	READ3resok *ok = &res->READ3res_u.resok;

	o->status = res->status;
	if (res->status != NFS3_OK)
		return;
	if (ok->data.data_len > READ_CHUNK || ok->count != ok->data.data_len) {
		o->overflow = 1;
		return;
	}
	o->count = ok->data.data_len;
	o->eof = ok->eof;
	memcpy(o->buf, ok->data.data_val, o->count);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* READ the whole file FH, handing each piece to put (0 or -1 with a
 * message of its own). */
typedef int (*read_put)(void *arg, const char *p, size_t n);

static int read_fh(const struct fh *fh, read_put put, void *arg)
{
	char *buf = malloc(READ_CHUNK);
	uint64_t off = 0;
	fattr3 at;
	int ret;

	if (!buf)
		return 1;
	/* GETATTR first: a stale handle is reported as such even for an
	 * empty file, and a directory handle is refused. */
	ret = do_getattr(fh, &at);
	if (ret)
		goto out;
	if (at.type != NF3REG) {
		fprintf(stderr, "%s: READ: handle is not a regular file (type %d)\n",
			prog, (int)at.type);
		ret = 1;
		goto out;
	}
	for (;;) {
		struct read_out o = { .buf = buf };
		struct call c = { .copy = read_copy, .out = &o };
		READ3args a;
		char what[64];

		memset(&a, 0, sizeof(a));
		fh3_set(&a.file, fh);
		a.offset = off;
		a.count = READ_CHUNK;
		snprintf(what, sizeof(what), "READ at %" PRIu64, off);
		if (rpc_nfs3_read_async(rpc, call_cb, &a, &c) != 0) {
			fprintf(stderr, "%s: %s: %s\n", prog, what,
				rpc_get_error(rpc));
			ret = 1;
			goto out;
		}
		if (call_wait(&c, what)) {
			ret = 1;
			goto out;
		}
		if (o.status != NFS3_OK) {
			ret = nfs_fail(what, o.status);
			goto out;
		}
		if (o.overflow) {
			fprintf(stderr, "%s: %s: malformed reply\n", prog, what);
			ret = 1;
			goto out;
		}
		if (put(arg, buf, o.count)) {
			ret = 1;
			goto out;
		}
		off += o.count;
		if (o.eof)
			break;
		if (o.count == 0) {
			fprintf(stderr, "%s: %s: short read without eof\n",
				prog, what);
			ret = 1;
			goto out;
		}
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

static int put_stdout(void *arg, const char *p, size_t n)
{
	(void)arg;
	if (write_all(STDOUT_FILENO, p, n)) {
		fprintf(stderr, "%s: write to stdout: %s\n", prog,
			strerror(errno));
		return -1;
	}
	return 0;
}

static int cmd_readfh(const struct fh *fh)
{
	return read_fh(fh, put_stdout, NULL);
}

/* checkfhs: what was read so far against the local file. */
struct cmp {
	FILE *f;
	int differs;
};

static int put_cmp(void *arg, const char *p, size_t n)
{
	struct cmp *c = arg;
	char want[4096];

	while (n && !c->differs) {
		size_t k = n < sizeof(want) ? n : sizeof(want);

		if (fread(want, 1, k, c->f) != k || memcmp(want, p, k))
			c->differs = 1;
		p += k;
		n -= k;
	}
	return 0;
}

static int cmd_checkfhs(const char *data)
{
	char line[4096];
	unsigned ok = 0;
	int ret = 0;

	while (fgets(line, sizeof(line), stdin)) {
		char *sp, file[8192];
		struct cmp c = { 0 };
		struct fh fh;
		int r;

		line[strcspn(line, "\n")] = '\0';
		sp = strrchr(line, ' ');
		if (!sp || fh_parse(&fh, sp + 1)) {
			printf("bad line '%s'\n", line);
			ret = 1;
			continue;
		}
		*sp = '\0';
		snprintf(file, sizeof(file), "%s/%s", data, line);
		c.f = fopen(file, "rb");
		if (!c.f) {
			printf("%s: %s\n", file, strerror(errno));
			ret = 1;
			continue;
		}
		r = read_fh(&fh, put_cmp, &c);
		if (r)
			printf("%s: the handle does not read (%s)\n", line,
			       r == EXIT_STALE ? "stale" : "error");
		else if (c.differs || fgetc(c.f) != EOF)
			printf("%s: the handle reads other bytes than the origin's\n",
			       line);
		else
			ok++;
		fclose(c.f);
	}
	printf("ok %u\n", ok);
	return ret;
}

/* --------------------------------------------------------- READDIRPLUS */

struct rdp_out {
	int status;
	int eof;
	uint64_t cookie;	/* of the last entry */
	char verf[NFS3_COOKIEVERFSIZE];
	unsigned n;
	int printed_err;
};

static void rdp_copy(struct call *c, void *data)
{
	READDIRPLUS3res *res = data;
	struct rdp_out *o = c->out;
	READDIRPLUS3resok *ok = &res->READDIRPLUS3res_u.resok;

	o->status = res->status;
	if (res->status != NFS3_OK)
		return;
	memcpy(o->verf, ok->cookieverf, NFS3_COOKIEVERFSIZE);
	o->eof = ok->reply.eof;
	/* libnfs decodes entries into a buffer where they are not always
	 * 8-byte aligned: copy each one out before touching its fields. */
	for (const char *p = (const char *)ok->reply.entries; p; ) {
		entryplus3 e;

		memcpy(&e, p, sizeof(e));
		o->cookie = e.cookie;
		o->n++;
		if (strcmp(e.name, ".") && strcmp(e.name, ".."))
			printf("%s\n", e.name);
		p = (const char *)e.nextentry;
	}
}

static int cmd_lsfh(const struct fh *fh)
{
	uint64_t cookie = 0;
	char verf[NFS3_COOKIEVERFSIZE] = { 0 };
	unsigned rounds = 0;

	for (;;) {
		struct rdp_out o = { 0 };
		struct call c = { .copy = rdp_copy, .out = &o };
		READDIRPLUS3args a;

		memset(&a, 0, sizeof(a));
		fh3_set(&a.dir, fh);
		a.cookie = cookie;
		memcpy(a.cookieverf, verf, NFS3_COOKIEVERFSIZE);
		a.dircount = 8192;
		a.maxcount = 32768;
		if (rpc_nfs3_readdirplus_async(rpc, call_cb, &a, &c) != 0) {
			fprintf(stderr, "%s: READDIRPLUS: %s\n", prog,
				rpc_get_error(rpc));
			return 1;
		}
		if (call_wait(&c, "READDIRPLUS"))
			return 1;
		if (o.status != NFS3_OK)
			return nfs_fail("READDIRPLUS", o.status);
		if (o.eof)
			break;
		if (o.n == 0 || ++rounds > 100000) {
			fprintf(stderr, "%s: READDIRPLUS: no progress\n", prog);
			return 1;
		}
		cookie = o.cookie;
		memcpy(verf, o.verf, NFS3_COOKIEVERFSIZE);
	}
	if (fflush(stdout)) {
		fprintf(stderr, "%s: stdout: %s\n", prog, strerror(errno));
		return 1;
	}
	return 0;
}

/* ---------------------------------------------------------------- main */

static int usage(void)
{
	fprintf(stderr,
		"usage: %s gethandle URL PATH\n"
		"       %s readfh URL HEXFH\n"
		"       %s lsfh URL HEXDIRFH\n"
		"       %s statfh URL HEXFH\n"
		"       %s gethandles URL <PATHS\n"
		"       %s checkfhs URL DATA <HANDLES\n"
		"exit: 0 ok, 3 NFS3ERR_STALE, 2 usage, 1 other errors\n",
		prog, prog, prog, prog, prog, prog);
	return 2;
}

int main(int argc, char **argv)
{
	const char *cmd;
	struct fh fh;
	int ret;

	if (argc == 3 && !strcmp(argv[1], "gethandles")) {
		if (connect_url(argv[2])) {
			ret = 1;
			goto out;
		}
		ret = cmd_gethandles();
		goto flush;
	}
	if (argc != 4)
		return usage();
	cmd = argv[1];
	if (!strcmp(cmd, "checkfhs")) {
		if (connect_url(argv[2])) {
			ret = 1;
			goto out;
		}
		ret = cmd_checkfhs(argv[3]);
		goto flush;
	}
	if (strcmp(cmd, "gethandle") && strcmp(cmd, "readfh") &&
	    strcmp(cmd, "lsfh") && strcmp(cmd, "statfh"))
		return usage();
	if (strcmp(cmd, "gethandle") && fh_parse(&fh, argv[3])) {
		fprintf(stderr, "%s: '%s' is not a hex file handle of 1..%d bytes\n",
			prog, argv[3], FH_MAX);
		return 2;
	}
	if (connect_url(argv[2])) {
		ret = 1;
		goto out;
	}
	if (!strcmp(cmd, "gethandle"))
		ret = cmd_gethandle(argv[3]);
	else if (!strcmp(cmd, "readfh"))
		ret = cmd_readfh(&fh);
	else if (!strcmp(cmd, "lsfh"))
		ret = cmd_lsfh(&fh);
	else
		ret = cmd_statfh(&fh);
flush:
	if (fflush(stdout) && !ret) {
		fprintf(stderr, "%s: stdout: %s\n", prog, strerror(errno));
		ret = 1;
	}
out:
	if (nfs)
		nfs_destroy_context(nfs);
	return ret;
}
