/* nfsc_open_test: nfsc_open against an origin inside the test
 * (nfsc_fake.h, through the real libnfs): a URL that is not nfs:// or
 * names no export refused with EINVAL, an export the origin refuses with
 * ENOENT and a reason naming it, a port nobody serves as unreachable;
 * a mount gives the origin's root handle, server and export, one mount
 * per connection (nconnect, 4 by default), READ and WRITE sizes from
 * FSINFO capped by rsize=/wsize=; with offline= and the export's root
 * kept, an unreachable origin opens lost (idempotent calls EHOSTDOWN) and
 * its connections are made once it answers, the origin then back. */
#include "nfsc_fake.h"

/* What nfsc.h promises for a server that cannot be reached (libnfs 4.0
 * says "nfs_service failed" for a refused connection: EHOSTUNREACH). */
static bool unreachable(int ret)
{
	return ret == -ECONNREFUSED || ret == -EHOSTUNREACH ||
	       ret == -ETIMEDOUT;
}

static int open_err(const char *url, const struct nfsc_opts *o,
		    struct nfsc **n, char *err, size_t len)
{
	err[0] = 0;
	return nfsc_open(url, o, n, err, len);
}

int main(void)
{
	struct fake f = { 0 }, refusing = { .mnt_status = 2 /* NOENT */ };
	struct nfsc_opts o = { .nconnect = 1 };
	struct nfsc *n = NULL;
	char err[512], url[256];
	uint16_t port;

	fake_start(&f);
	fake_start(&refusing);

	/* 1. Refused at the door. */
	CHECK_EQ(open_err("http://127.0.0.1/export", &o, &n, err,
			  sizeof(err)), -EINVAL);
	CHECK(strstr(err, "nfs://"));
	snprintf(url, sizeof(url), "nfs://127.0.0.1?nfsport=%u&mountport=%u",
		 (unsigned)f.port, (unsigned)f.port);
	CHECK_EQ(open_err(url, &o, &n, err, sizeof(err)), -EINVAL);
	CHECK(err[0]);
	CHECK_EQ(fake_count(&f, FAKE_PROG_MOUNT, 1), 0);

	/* 2. An export the origin does not have: ENOENT, named. */
	CHECK_EQ(open_err(fake_url(&refusing, "/nothere"), &o, &n, err,
			  sizeof(err)), -ENOENT);
	CHECK(strstr(err, "/nothere"));
	CHECK_EQ(fake_count(&refusing, FAKE_PROG_MOUNT, 1), 1);

	/* 3. Nobody there: unreachable. */
	port = fake_closed_port();
	snprintf(url, sizeof(url), "nfs://127.0.0.1/export?nfsport=%u&"
		 "mountport=%u", (unsigned)port, (unsigned)port);
	CHECK(unreachable(open_err(url, &o, &n, err, sizeof(err))));
	CHECK(err[0]);

	/* 4. The export: its root, 4 connections each mounted, sizes. */
	f.rtmax = 65536;
	f.wtmax = 32768;
	n = fake_open(&f, &(struct nfsc_opts){ 0 });
	CHECK_EQ(nfsc_nconnect(n), 4);
	CHECK_EQ(fake_count(&f, FAKE_PROG_MOUNT, 1), 4);
	CHECK_EQ(nfsc_root(n)->len, f.root.len);
	CHECK(!memcmp(nfsc_root(n)->data, f.root.data, f.root.len));
	CHECK(!strcmp(nfsc_server(n), "127.0.0.1"));
	CHECK(!strcmp(nfsc_export(n), "/export"));
	CHECK_EQ(nfsc_rsize(n), 65536);
	CHECK_EQ(nfsc_wsize(n), 32768);
	{
		struct nfsc_attr a;
		struct nfsc_cred root = { 0 };

		CHECK_EQ(nfsc_getattr(n, &root, nfsc_root(n), &a), 0);
		CHECK_EQ(a.type, NFSC_DIR);
		CHECK_EQ(a.fileid, 1);
	}
	nfsc_close(n);
	n = fake_open(&f, &(struct nfsc_opts){ .nconnect = 1,
					       .rsize = 16384,
					       .wsize = 1u << 20 });
	CHECK_EQ(nfsc_rsize(n), 16384);
	CHECK_EQ(nfsc_wsize(n), 32768);
	nfsc_close(n);
	fake_stop(&refusing);
	fake_stop(&f);

	/* 5. With offline= and the export's root as last known: the origin
	 * unreachable, the open succeeds lost; once it answers, the
	 * connection is made and the origin is back. Another export's kept
	 * root does not do. */
	{
		struct fake later = { .port = fake_closed_port() };
		struct nfsc_opts lo = {
			.nconnect = 1, .offline = 5,
			.known_root = &later.root,
			.known_where = "127.0.0.1:/other",
		};
		struct nfsc_cred root = { 0 };
		struct nfsc_origin_stat st;
		struct nfsc_attr a;
		time_t end;

		later.root.len = 3;
		memcpy(later.root.data, "old", 3);
		snprintf(url, sizeof(url), "nfs://127.0.0.1/export?nfsport=%u"
			 "&mountport=%u", (unsigned)later.port,
			 (unsigned)later.port);
		CHECK(unreachable(open_err(url, &lo, &n, err, sizeof(err))));
		lo.known_where = "127.0.0.1:/export";
		CHECK_EQ(open_err(url, &lo, &n, err, sizeof(err)), 0);
		CHECK_EQ(nfsc_start(n), 0);
		nfsc_origin_stat(n, &st);
		CHECK(st.lost && st.started_lost);
		CHECK_EQ(nfsc_root(n)->len, 3);
		CHECK_EQ(nfsc_getattr(n, &root, nfsc_root(n), &a),
			 -EHOSTDOWN);

		fake_start(&later);	/* the same root handle */
		end = time(NULL) + 20;
		do {
			usleep(50000);
			nfsc_origin_stat(n, &st);
		} while (st.lost && time(NULL) < end);
		CHECK(!st.lost);
		CHECK_EQ(st.back_total, 1);
		CHECK_EQ(fake_count(&later, FAKE_PROG_MOUNT, 1), 1);
		CHECK_EQ(nfsc_getattr(n, &root, nfsc_root(n), &a), 0);
		CHECK_EQ(a.type, NFSC_DIR);
		nfsc_close(n);
		fake_stop(&later);
	}

	printf("nfsc_open_test: ok\n");
	return 0;
}
