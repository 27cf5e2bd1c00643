/* fsx: one file, a seeded random sequence of reads, writes, truncates, mapped reads and writes, fsyncs and close/reopens, each checked against an in-memory model of the file's bytes; exit 0 (every check matched), 1 (a mismatch or a failed call: the op log says which), 2 (usage or set-up). */
/*
 * In the spirit of the classic fsx (Avadis Tevanian's, as kept in
 * xfstests), written small for this project. What it adds: the whole
 * file is compared with the model after every operation (not only the
 * range just read), the final check reads through a fresh open, and -X
 * corrupts the file on purpose to show that the checks can fail.
 *
 * Byte pattern: op n writes (n % 255) + 1 at even offsets, so a wrong
 * even byte names the op that wrote it (mod 255) and is never 0 (zeros
 * only come from holes and truncates); odd offsets add a seeded noise
 * table indexed by offset, so data written at the wrong offset differs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum op_type {
	OP_READ,
	OP_WRITE,
	OP_TRUNCATE,
	OP_MAPREAD,
	OP_MAPWRITE,
	OP_FSYNC,
	OP_DREAD,	/* O_DIRECT read through a second fd */
	OP_FADVISE,	/* drop the clean page cache: later reads reach the fs */
	OP_REOPEN,	/* close + open: close-to-open revalidation */
	OP_CORRUPT,	/* -X: a byte changed behind the model's back */
	OP_COUNT
};

static const char *const op_name[OP_COUNT] = {
	[OP_READ] = "read",	    [OP_WRITE] = "write",
	[OP_TRUNCATE] = "truncate", [OP_MAPREAD] = "mapread",
	[OP_MAPWRITE] = "mapwrite", [OP_FSYNC] = "fsync",
	[OP_DREAD] = "dread",	    [OP_FADVISE] = "fadvise",
	[OP_REOPEN] = "reopen",	    [OP_CORRUPT] = "CORRUPT",
};

/* Relative frequency of each op when it is enabled (reopen is -c). */
static const unsigned op_weight[OP_COUNT] = {
	[OP_READ] = 20,	   [OP_WRITE] = 24,  [OP_TRUNCATE] = 8,
	[OP_MAPREAD] = 10, [OP_MAPWRITE] = 10, [OP_FSYNC] = 3,
	[OP_DREAD] = 10,   [OP_FADVISE] = 3,
};

#define LOG_SIZE 50
#define NOISE_SIZE 4093 /* prime: a shifted copy never lines up */
#define DIO_ALIGN 4096

struct log_ent {
	unsigned long n;
	enum op_type op;
	off_t off;
	size_t len;
	off_t size_before, size_after;
	const char *note;
};

static struct {
	const char *path;
	unsigned long numops;
	size_t maxlen;		/* bytes: the file never grows past it */
	size_t maxop;		/* bytes: largest read or write */
	uint64_t seed;
	bool mapread, mapwrite, odirect, fadvise, verbose;
	unsigned close_prob;	/* 1 in N ops is a close + reopen; 0: never */
	unsigned long corrupt_at; /* -X: corrupt after this op; 0: never */
	unsigned long check_every; /* whole-file check after 1 in N ops; 0: end */
	const char *good;	/* -G: where to save the model on a failure */
} opt = {
	.numops = 10000,
	.maxlen = 256 << 10,
	.maxop = 64 << 10,
	.mapread = true,
	.mapwrite = true,
	.fadvise = true,
	.check_every = 1,
};

static uint8_t *model;		/* the file as it must be; zero past model_size */
static off_t model_size;
static uint8_t *buf;		/* scratch, DIO_ALIGN-aligned, maxlen + maxop */
static uint8_t noise[NOISE_SIZE];
static int fd = -1, dfd = -1;
static long pagesize;
static uint64_t rng_state;
static unsigned long opnum;
static struct log_ent oplog[LOG_SIZE];
static unsigned long logged;

/* splitmix64: tiny, and the same sequence on every platform for a seed. */
static uint64_t rnd64(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t n)
{
	return n ? rnd64() % n : 0;
}

/* A value in [0, limit]: mostly uniform, a quarter of the time next to a
 * 4 KiB boundary, where page and cache-block edges are. */
static uint64_t pick(uint64_t limit)
{
	uint64_t v;

	if (limit < 2 * DIO_ALIGN || rnd(4))
		return rnd(limit + 1);
	v = rnd(limit / DIO_ALIGN + 1) * DIO_ALIGN + rnd(3) - 1;
	return v > limit ? limit : v;
}

static uint8_t pattern(unsigned long n, off_t p)
{
	uint8_t b = (uint8_t)(n % 255 + 1);

	return (p & 1) ? (uint8_t)(b + noise[p % NOISE_SIZE]) : b;
}

static struct log_ent *log_op(enum op_type op, off_t off, size_t len)
{
	struct log_ent *e = &oplog[logged++ % LOG_SIZE];

	*e = (struct log_ent){ .n = opnum, .op = op, .off = off, .len = len,
			       .size_before = model_size,
			       .size_after = model_size };
	return e;
}

static void print_ent(const struct log_ent *e)
{
	fprintf(stderr, "%6lu %-8s", e->n, op_name[e->op]);
	switch (e->op) {
	case OP_TRUNCATE:
		fprintf(stderr, " 0x%jx -> 0x%jx (%s)", (intmax_t)e->size_before,
			(intmax_t)e->size_after,
			e->size_after > e->size_before ? "up" :
			e->size_after < e->size_before ? "down" : "same");
		break;
	case OP_FSYNC:
	case OP_FADVISE:
	case OP_REOPEN:
		fprintf(stderr, " size 0x%jx", (intmax_t)e->size_after);
		break;
	default:
		fprintf(stderr, " 0x%jx thru 0x%jx (%zu bytes) size 0x%jx",
			(intmax_t)e->off, (intmax_t)(e->off + e->len) - 1,
			e->len, (intmax_t)e->size_before);
		if (e->size_after != e->size_before)
			fprintf(stderr, " -> 0x%jx", (intmax_t)e->size_after);
	}
	if (e->note)
		fprintf(stderr, " [%s]", e->note);
	fputc('\n', stderr);
}

static void dump_log(void)
{
	unsigned long first = logged > LOG_SIZE ? logged - LOG_SIZE : 0;

	fprintf(stderr, "op log (the last %lu entries; failed in op %lu):\n",
		logged - first, opnum);
	for (unsigned long i = first; i < logged; i++)
		print_ent(&oplog[i % LOG_SIZE]);
}

static void replay_hint(void)
{
	fprintf(stderr, "replay: fsx -S %" PRIu64 " -N %lu -l %zu -o %zu -c %u -k %lu%s%s%s%s FILE\n",
		opt.seed, opnum, opt.maxlen, opt.maxop, opt.close_prob,
		opt.check_every, opt.mapread ? "" : " -R",
		opt.mapwrite ? "" : " -W", opt.odirect ? " -d" : "",
		opt.fadvise ? "" : " -F");
	/* The classic fsx's .fsxgood: the bytes the file should hold, to
	 * compare with the file at its origin or through another mount. */
	if (opt.good) {
		FILE *g = fopen(opt.good, "w");

		if (!g || fwrite(model, 1, model_size, g) != (size_t)model_size ||
		    fclose(g))
			fprintf(stderr, "fsx: cannot save the model to %s\n",
				opt.good);
		else
			fprintf(stderr, "the model (0x%jx bytes) is in %s\n",
				(intmax_t)model_size, opt.good);
	}
}

static void __attribute__((noreturn)) fail_errno(const char *what)
{
	int e = errno;

	fprintf(stderr, "fsx: FAIL: op %lu: %s: %s (errno %d, %s)\n", opnum,
		what, strerror(e), e, strerrorname_np(e) ? strerrorname_np(e) : "?");
	dump_log();
	replay_hint();
	exit(1);
}

/* Print where got[] (file bytes from off) first differs from the model,
 * and which logged ops last touched that offset. */
static void __attribute__((noreturn)) fail_bytes(const char *what, off_t off,
						 const uint8_t *got, size_t len)
{
	size_t i = 0, last, nbad = 0;
	off_t bad;

	while (i < len && got[i] == model[off + i])
		i++;
	bad = off + i;
	for (last = i; i < len; i++)
		if (got[i] != model[off + i]) {
			last = i;
			nbad++;
		}
	fprintf(stderr, "fsx: FAIL: op %lu: %s: first bad offset 0x%jx (%jd), "
		"%zu bad bytes up to 0x%jx\n", opnum, what, (intmax_t)bad,
		(intmax_t)bad, nbad, (intmax_t)(off + last));
	fprintf(stderr, "offset      expected got\n");
	for (i = bad - off; i < len && i < (size_t)(bad - off) + 16; i++)
		fprintf(stderr, "0x%08jx  0x%02x     0x%02x%s\n",
			(intmax_t)(off + i), model[off + i], got[i],
			got[i] == model[off + i] ? "" : "  <-");
	if (!(bad & 1) && got[bad - off])
		fprintf(stderr, "the bad byte looks written by op %u (mod 255)\n",
			got[bad - off] - 1);
	for (unsigned long k = logged; k-- > 0 && logged - k <= LOG_SIZE;) {
		const struct log_ent *e = &oplog[k % LOG_SIZE];
		bool touches = (e->op == OP_WRITE || e->op == OP_MAPWRITE ||
				e->op == OP_CORRUPT) ?
			bad >= e->off && bad < e->off + (off_t)e->len :
			e->op == OP_TRUNCATE &&
			bad >= (e->size_before < e->size_after ?
				e->size_before : e->size_after);

		if (touches) {
			fprintf(stderr, "last op to touch it: ");
			print_ent(e);
			break;
		}
	}
	dump_log();
	replay_hint();
	exit(1);
}

static void __attribute__((noreturn)) fail_msg(const char *fmt, intmax_t a,
					       intmax_t b)
{
	fprintf(stderr, "fsx: FAIL: op %lu: ", opnum);
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	dump_log();
	replay_hint();
	exit(1);
}

/* The whole file, read through cfd, against the model. */
static void check_file(int cfd, const char *when)
{
	size_t cap = opt.maxlen + DIO_ALIGN;
	struct stat st;
	off_t got = 0;
	ssize_t r;

	if (fstat(cfd, &st) < 0)
		fail_errno("fstat");
	if (st.st_size != model_size)
		fail_msg("size after the op: file 0x%jx, model 0x%jx",
			 (intmax_t)st.st_size, (intmax_t)model_size);
	/* Read past the end as well: a file longer than its size is wrong. */
	if (cfd == dfd) {
		/* One aligned read: O_DIRECT may refuse an unaligned offset. */
		r = pread(cfd, buf, cap & ~(size_t)(DIO_ALIGN - 1), 0);
		got = r > 0 ? r : 0;
	} else {
		while ((r = pread(cfd, buf + got, cap - got, got)) > 0)
			got += r;
	}
	if (r < 0)
		fail_errno(cfd == dfd ? "pread (whole-file check, O_DIRECT)" :
					"pread (whole-file check)");
	if (got != model_size)
		fail_msg("whole-file read returned 0x%jx bytes, model size 0x%jx",
			 (intmax_t)got, (intmax_t)model_size);
	if (memcmp(buf, model, got))
		fail_bytes(when, 0, buf, got);
}

static void model_resize(off_t size)
{
	if (size < model_size)
		memset(model + size, 0, model_size - size);
	model_size = size;
}

/* pread [off, off+len) from f (fd, or dfd: O_DIRECT) and compare with the
 * model: exactly what it holds there (short only at its end), byte for
 * byte. what names the call in an errno failure. */
static void check_pread(int f, const char *what, off_t off, size_t len)
{
	size_t want = off >= model_size ? 0 :
		      (size_t)(model_size - off) < len ? model_size - off : len;
	ssize_t r = pread(f, buf, len, off);

	if (r < 0)
		fail_errno(what);
	if ((size_t)r != want)
		fail_msg(f == dfd ? "short O_DIRECT read: 0x%jx bytes, want 0x%jx"
				  : "short read: 0x%jx bytes, want 0x%jx",
			 r, want);
	if (memcmp(buf, model + off, r))
		fail_bytes(f == dfd ? "O_DIRECT read" : "read", off, buf, r);
}

static void do_read(void)
{
	off_t off = pick(model_size + opt.maxop / 4);
	size_t len = 1 + rnd(opt.maxop);

	log_op(OP_READ, off, len);
	check_pread(fd, "pread", off, len);
}

/* O_DIRECT needs aligned offsets, lengths and buffers. */
static void do_dread(void)
{
	off_t off = pick(model_size + opt.maxop / 4) & ~(off_t)(DIO_ALIGN - 1);
	size_t len = (1 + rnd(opt.maxop) + DIO_ALIGN - 1) & ~(size_t)(DIO_ALIGN - 1);

	log_op(OP_DREAD, off, len);
	check_pread(dfd, "pread (O_DIRECT)", off, len);
}

static void gen_data(off_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(opnum, off + i);
}

static void do_write(void)
{
	off_t off = pick(opt.maxlen - 1);
	size_t len = 1 + rnd(opt.maxop);
	struct log_ent *e;
	ssize_t r;

	if (off + len > opt.maxlen)
		len = opt.maxlen - off;
	e = log_op(OP_WRITE, off, len);
	gen_data(off, len);
	r = pwrite(fd, buf, len, off);
	if (r < 0)
		fail_errno("pwrite");
	if ((size_t)r != len)
		fail_msg("short write: 0x%jx bytes of 0x%jx", r, len);
	memcpy(model + off, buf, len);
	if (off + (off_t)len > model_size)
		model_size = off + len;
	e->size_after = model_size;
}

static void do_truncate(void)
{
	off_t size = pick(opt.maxlen);
	struct log_ent *e = log_op(OP_TRUNCATE, 0, 0);

	if (ftruncate(fd, size) < 0)
		fail_errno("ftruncate");
	model_resize(size);
	e->size_after = size;
}

static void do_mapread(void)
{
	off_t off, pg;
	size_t len, maplen;
	struct log_ent *e;
	uint8_t *p;

	if (model_size == 0) {
		/* Mapping an empty file gives SIGBUS on access; nothing to do. */
		log_op(OP_MAPREAD, 0, 0)->note = "skipped: empty file";
		return;
	}
	off = rnd(model_size);
	len = 1 + rnd(opt.maxop);
	if (off + (off_t)len > model_size)
		len = model_size - off;
	e = log_op(OP_MAPREAD, off, len);
	pg = off & ~(off_t)(pagesize - 1);
	maplen = off - pg + len;
	/* A read that ends at EOF maps the rest of its page too: POSIX
	 * wants it zero there, and that is where stale bytes would show. */
	if (off + (off_t)len == model_size && model_size % pagesize) {
		maplen += pagesize - model_size % pagesize;
		e->note = "with the page past EOF";
	}
	p = mmap(NULL, maplen, PROT_READ, MAP_SHARED, fd, pg);
	if (p == MAP_FAILED)
		fail_errno("mapread: mmap(PROT_READ, MAP_SHARED)");
	if (memcmp(p + (off - pg), model + off, len))
		fail_bytes("mapped read", off, p + (off - pg), len);
	for (size_t i = off - pg + len; i < maplen; i++)
		if (p[i])
			fail_msg("mapped read: byte 0x%jx past EOF is 0x%jx, not 0",
				 (intmax_t)(pg + i), p[i]);
	if (munmap(p, maplen) < 0)
		fail_errno("munmap");
}

static void do_mapwrite(void)
{
	off_t off = pick(opt.maxlen - 1), pg;
	size_t len = 1 + rnd(opt.maxop), maplen;
	struct log_ent *e;
	uint8_t *p;

	if (off + len > opt.maxlen)
		len = opt.maxlen - off;
	e = log_op(OP_MAPWRITE, off, len);
	/* A mapping cannot grow a file: extend it first, as the classic
	 * fsx does (the model grows by zeros). */
	if (off + (off_t)len > model_size) {
		if (ftruncate(fd, off + len) < 0)
			fail_errno("mapwrite: ftruncate (extend before mapping)");
		model_resize(off + len);
		e->note = "extended by ftruncate first";
	}
	e->size_after = model_size;
	pg = off & ~(off_t)(pagesize - 1);
	maplen = off - pg + len;
	p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, pg);
	if (p == MAP_FAILED)
		fail_errno("mapwrite: mmap(PROT_READ|PROT_WRITE, MAP_SHARED)");
	gen_data(off, len);
	memcpy(p + (off - pg), buf, len);
	memcpy(model + off, buf, len);
	if (msync(p, maplen, MS_SYNC) < 0)
		fail_errno("mapwrite: msync(MS_SYNC)");
	if (munmap(p, maplen) < 0)
		fail_errno("munmap");
}

static void do_fsync(void)
{
	log_op(OP_FSYNC, 0, 0);
	if (fsync(fd) < 0)
		fail_errno("fsync");
}

static void do_fadvise(void)
{
	int e;

	log_op(OP_FADVISE, 0, 0)->note = "POSIX_FADV_DONTNEED";
	e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (e) {
		errno = e;
		fail_errno("posix_fadvise(POSIX_FADV_DONTNEED)");
	}
}

static void open_files(void)
{
	fd = open(opt.path, O_RDWR);
	if (fd < 0)
		fail_errno("open(O_RDWR)");
	if (opt.odirect) {
		dfd = open(opt.path, O_RDONLY | O_DIRECT);
		if (dfd < 0)
			fail_errno("open(O_RDONLY|O_DIRECT)");
	}
}

static void close_files(void)
{
	if (dfd >= 0 && close(dfd) < 0)
		fail_errno("close (O_DIRECT fd)");
	dfd = -1;
	/* close() is where NFS-like file systems report a lost write. */
	if (close(fd) < 0)
		fail_errno("close");
	fd = -1;
}

static void do_reopen(void)
{
	log_op(OP_REOPEN, 0, 0);
	close_files();
	open_files();
}

/* -X: change one byte through another fd, which the model does not see. */
static void do_corrupt(void)
{
	off_t off = model_size ? (off_t)rnd(model_size) : 0;
	struct log_ent *e = log_op(OP_CORRUPT, off, 1);
	uint8_t b = model_size ? model[off] ^ 0x5a : 0x5a;
	int cfd = open(opt.path, O_WRONLY);

	e->note = "self-test: -X changed this byte behind the model";
	if (cfd < 0 || pwrite(cfd, &b, 1, off) != 1 || close(cfd) < 0)
		fail_errno("self-test corruption");
	fprintf(stderr, "fsx: self-test: changed the byte at 0x%jx after op %lu\n",
		(intmax_t)off, opnum);
}

static enum op_type choose_op(void)
{
	bool on[OP_COUNT] = {
		[OP_READ] = true, [OP_WRITE] = true, [OP_TRUNCATE] = true,
		[OP_FSYNC] = true, [OP_MAPREAD] = opt.mapread,
		[OP_MAPWRITE] = opt.mapwrite, [OP_DREAD] = opt.odirect,
		[OP_FADVISE] = opt.fadvise,
	};
	unsigned total = 0, r;

	if (opt.close_prob && rnd(opt.close_prob) == 0)
		return OP_REOPEN;
	for (int i = 0; i < OP_COUNT; i++)
		total += on[i] ? op_weight[i] : 0;
	r = rnd(total);
	for (int i = 0; i < OP_COUNT; i++) {
		if (!on[i])
			continue;
		if (r < op_weight[i])
			return i;
		r -= op_weight[i];
	}
	return OP_READ;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: fsx [-N ops] [-l maxlen] [-o maxop] [-S seed] [-c P] [-k N] [-G PATH] [-RWdFv] [-X N] FILE\n"
		"  -N ops     operations to run (default 10000)\n"
		"  -l maxlen  largest file size in bytes (default 262144)\n"
		"  -o maxop   largest read or write in bytes (default 65536)\n"
		"  -S seed    seed of the operation sequence (default: from the clock)\n"
		"  -c P       close and reopen the file on 1 in P ops (default 0: never)\n"
		"  -R         no mapped reads\n"
		"  -W         no mapped writes\n"
		"  -d         O_DIRECT reads as well, and the whole-file checks also\n"
		"             read the file with O_DIRECT (around the page cache)\n"
		"  -F         no POSIX_FADV_DONTNEED ops\n"
		"  -k N       check the whole file after 1 in N ops (default 1; 0: only\n"
		"             at the end); reads always check what they read. A larger N\n"
		"             leaves fewer of the file's pages cached between reads\n"
		"  -G PATH    on a failure, save the bytes the file should hold in PATH\n"
		"  -X N       self-test: corrupt a byte after op N; fsx must then fail\n"
		"  -v         print every op\n"
		"Sizes take K and M suffixes. FILE is created or truncated. Exit 0: every check matched; 1: a mismatch\n"
		"or a failed call (the op log and a replay line are printed); 2: usage.\n");
	exit(2);
}

static unsigned long long num_arg(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		usage();
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (*end)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	bool seeded = false;
	int c;

	while ((c = getopt(argc, argv, "N:l:o:S:c:RWdFk:G:X:v")) != -1) {
		switch (c) {
		case 'N': opt.numops = num_arg(optarg); break;
		case 'l': opt.maxlen = num_arg(optarg); break;
		case 'o': opt.maxop = num_arg(optarg); break;
		case 'S': opt.seed = num_arg(optarg); seeded = true; break;
		case 'c': opt.close_prob = num_arg(optarg); break;
		case 'R': opt.mapread = false; break;
		case 'W': opt.mapwrite = false; break;
		case 'd': opt.odirect = true; break;
		case 'F': opt.fadvise = false; break;
		case 'G': opt.good = optarg; break;
		case 'k': opt.check_every = num_arg(optarg); break;
		case 'X': opt.corrupt_at = num_arg(optarg); break;
		case 'v': opt.verbose = true; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || opt.maxlen < 1 || opt.maxop < 1)
		usage();
	opt.path = argv[optind];
	if (!seeded) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		opt.seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20) ^
			   (uint64_t)ts.tv_sec;
	}
	rng_state = opt.seed;
	for (int i = 0; i < NOISE_SIZE; i++)
		noise[i] = rnd64() >> 56;
	pagesize = sysconf(_SC_PAGESIZE);
	model = calloc(opt.maxlen + opt.maxop + DIO_ALIGN, 1);
	if (!model || posix_memalign((void **)&buf, DIO_ALIGN,
				     opt.maxlen + opt.maxop + DIO_ALIGN)) {
		fprintf(stderr, "fsx: out of memory\n");
		return 2;
	}
	printf("fsx: seed %" PRIu64 ", %lu ops, file %s\n", opt.seed,
	       opt.numops, opt.path);
	fflush(stdout);

	/* The file starts empty, like the model. */
	fd = open(opt.path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		fprintf(stderr, "fsx: cannot create %s: %s\n", opt.path,
			strerror(errno));
		return 2;
	}
	close(fd);
	open_files();

	for (opnum = 1; opnum <= opt.numops; opnum++) {
		enum op_type op = choose_op();

		switch (op) {
		case OP_READ: do_read(); break;
		case OP_WRITE: do_write(); break;
		case OP_TRUNCATE: do_truncate(); break;
		case OP_MAPREAD: do_mapread(); break;
		case OP_MAPWRITE: do_mapwrite(); break;
		case OP_FSYNC: do_fsync(); break;
		case OP_DREAD: do_dread(); break;
		case OP_FADVISE: do_fadvise(); break;
		case OP_REOPEN: do_reopen(); break;
		default: break;
		}
		if (opt.verbose)
			print_ent(&oplog[(logged - 1) % LOG_SIZE]);
		if (opnum == opt.corrupt_at)
			do_corrupt();
		if (!opt.check_every ||
		    (opnum % opt.check_every && opnum != opt.corrupt_at))
			continue;
		check_file(fd, "whole-file check after the op");
		/* Around the page cache too: what the file system itself holds
		 * (the kernel's pages could hide what it got wrong). */
		if (opt.odirect)
			check_file(dfd, "whole-file O_DIRECT check after the op");
	}
	opnum = opt.numops;

	/* Last, through a fresh open: what the next user of the file sees. */
	close_files();
	fd = open(opt.path, O_RDONLY);
	if (fd < 0)
		fail_errno("final open(O_RDONLY)");
	check_file(fd, "final check through a fresh open");
	close(fd);
	printf("fsx: %lu ops passed, final size %jd, seed %" PRIu64 "\n",
	       opt.numops, (intmax_t)model_size, opt.seed);
	return 0;
}
