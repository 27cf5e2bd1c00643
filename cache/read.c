/* read.c - verified reads: every block a read touches passes its checksum
 * or the read is a miss. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cache_i.h"
#include "lockcheck.h"

/* Read the stored checksums of sectors [first, first+n) into out, one pread
 * per super-group (they are contiguous within one). A hole reads as 0,
 * which simply fails to verify. */
int cache_load_csums(struct cache *c, int meta_fd, uint64_t first,
		     uint64_t n, uint64_t *out)
{
	uint64_t per_super = (uint64_t)META_SUPER_BLOCKS * cache_spb(c->block_size);
	uint64_t s = first, end = first + n;

	while (s < end) {
		uint64_t gend = (s / per_super + 1) * per_super;
		uint64_t cnt = (gend < end ? gend : end) - s;
		ssize_t r = cache_pread(c, meta_fd, out + (s - first), cnt * 8,
					cache_meta_sector_off(c->block_size, s), 0);

		if (r < 0)
			return (int)r;
		if ((uint64_t)r < cnt * 8)
			memset((char *)(out + (s - first)) + r, 0, cnt * 8 - r);
		s += cnt;
	}
	return 0;
}

/* The checksums of blocks [first, first+n): n * cache_spb(bs) of them. */
int cache_load_block_csums(struct cache *c, int meta_fd, uint64_t first,
			   uint64_t n, uint64_t *out)
{
	uint32_t spb = cache_spb(c->block_size);

	return cache_load_csums(c, meta_fd, first * spb, n * spb, out);
}

static int read_flags(const struct cache *c)
{
	return c->write_mode == CACHE_WRITE_DONTCACHE ? RWF_DONTCACHE : 0;
}

/* Read the bytes [start, end) of an object of size size (start a multiple
 * of CACHE_SECTOR, end one too or size) into buf (aligned, room for the
 * DIO-rounded length). For DIRECT mode the data fd has O_DIRECT and reads
 * use it too: reading verified blocks through the page cache would keep a
 * second copy of data the gateway's own page cache (FUSE keep_cache)
 * already holds, which is what DIRECT exists to avoid. Bytes past the end
 * of the file read as zeros (a hole) and fail to verify unless they really
 * are zeros. Returns the logical length or -errno. */
static ssize_t read_range(struct cache *c, int fd, bool direct,
			  uint64_t start, uint64_t end, void *buf)
{
	size_t len = end - start;
	size_t rlen = direct ? ALIGN_UP(len, CACHE_DIO_ALIGN) : len;
	ssize_t r = cache_pread(c, fd, buf, rlen, start, read_flags(c));

	if (r < 0)
		return r;
	if ((size_t)r < len)
		memset((char *)buf + r, 0, len - r);
	if (c->write_mode == CACHE_WRITE_FADVISE)
		posix_fadvise(fd, start, rlen, POSIX_FADV_DONTNEED);
	return len;
}

/* The first sector of [s0, s0 + n), whose bytes are at data and which end
 * at byte end of the object, that fails its checksum; s0 + n if none. */
static uint64_t first_bad_sector(uint64_t salt, uint64_t s0, uint64_t n,
				 const void *data, uint64_t end,
				 const uint64_t *csums)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t sstart = (s0 + i) * CACHE_SECTOR;
		uint64_t slen = end - sstart < CACHE_SECTOR ? end - sstart : CACHE_SECTOR;

		if (cache_sector_csum(salt, s0 + i,
				      (const char *)data + i * CACHE_SECTOR,
				      slen) != csums[i])
			return s0 + i;
	}
	return s0 + n;
}

void *cache_alloc_aligned(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, CACHE_DIO_ALIGN, ALIGN_UP(len, CACHE_DIO_ALIGN)))
		return NULL;
	return p;
}

static void log_corrupt(struct cache_obj *o, uint64_t blk)
{
	STAT_ADD(o->c, corrupt_blocks, 1);
	cache_log("corrupt block %llu of object %s dropped",
		  (unsigned long long)blk, o->name);
}

bool cache_present(struct cache_obj *o, uint64_t off, size_t len)
{
	uint32_t bs = o->c->block_size;
	bool all = true;
	uint64_t b, last;

	pthread_mutex_lock(&o->lock);
	if (!o->opened || o->broken || off >= o->hdr->size) {
		pthread_mutex_unlock(&o->lock);
		return false;
	}
	if (!len || len > o->hdr->size - off)
		len = (size_t)(o->hdr->size - off);
	last = (off + len - 1) / bs;
	for (b = off / bs; all && b <= last; b++)
		all = cache_bit(o->bitmap, b);
	pthread_mutex_unlock(&o->lock);
	return all;
}

/* The first block-aligned offset in [off, end) whose block is (want) or is
 * not (!want) present; end if none. */
static uint64_t scan_blocks(struct cache_obj *o, uint64_t off, uint64_t end,
			    bool want)
{
	uint32_t bs = o->c->block_size;
	uint64_t b, last, ret = end;

	pthread_mutex_lock(&o->lock);
	if (!o->opened || o->broken || off >= o->hdr->size) {
		pthread_mutex_unlock(&o->lock);
		return want ? end : (off < end ? off / bs * bs : end);
	}
	if (end > o->hdr->size)
		end = o->hdr->size;
	last = (end + bs - 1) / bs;
	for (b = off / bs; b < last; b++) {
		if (cache_bit(o->bitmap, b) == want) {
			ret = b * bs;
			break;
		}
	}
	pthread_mutex_unlock(&o->lock);
	return ret;
}

uint64_t cache_next_absent(struct cache_obj *o, uint64_t off, uint64_t end)
{
	return scan_blocks(o, off, end, false);
}

uint64_t cache_next_present(struct cache_obj *o, uint64_t off, uint64_t end)
{
	return scan_blocks(o, off, end, true);
}

ssize_t cache_read(struct cache_obj *o, void *buf, size_t len, uint64_t off)
{
	struct cache *c = o->c;
	uint32_t bs = c->block_size, spb = cache_spb(bs);
	uint64_t size, first, n, s0, ns, send, salt, gen, useq, cseq;
	uint64_t stack_csums[64], *csums = NULL, *chunks = NULL;
	uint64_t stack_chunks[2 * CACHE_CSC_CHUNK];	/* a read in 2 chunks */
	uint64_t k0 = 0, nk = 0;
	void *bounce = NULL, *data;
	bool direct, bad = false, cached;
	int fd, meta_fd;
	ssize_t ret;

	STAT_ADD(c, reads, 1);
	/* 1. Under the lock: bounds, presence, and a snapshot of the
	 *    incarnation; the I/O itself runs unlocked so readers of one
	 *    object proceed in parallel. */
	pthread_mutex_lock(&o->lock);
	if (!o->opened || o->broken) {
		pthread_mutex_unlock(&o->lock);
		STAT_ADD(c, miss_bytes, len);
		return -ENODATA;
	}
	size = o->hdr->size;
	if (off >= size || !len) {
		pthread_mutex_unlock(&o->lock);
		return 0;
	}
	if (len > size - off)
		len = size - off;
	first = off / bs;
	n = (off + len - 1) / bs - first + 1;
	for (uint64_t b = first; b < first + n; b++)
		if (!cache_bit(o->bitmap, b)) {
			pthread_mutex_unlock(&o->lock);
			STAT_ADD(c, miss_bytes, len);
			return -ENODATA;
		}
	salt = o->hdr->salt;
	gen = o->gen;
	useq = o->unmark_seq;
	fd = o->data_fd;	/* stable: our caller holds a reference */
	meta_fd = o->meta_fd;
	direct = o->direct;
	/* 2. The sectors the read touches, and their checksums: only these
	 *    are read and verified, not the whole blocks. The checksums
	 *    come from the checksum cache if it has them. */
	s0 = off / CACHE_SECTOR;
	ns = (off + len - 1) / CACHE_SECTOR - s0 + 1;
	send = (s0 + ns) * CACHE_SECTOR < size ? (s0 + ns) * CACHE_SECTOR : size;
	csums = ns <= 64 ? stack_csums : malloc(ns * 8);
	cached = csums && cache_csc_lookup_locked(o, s0, ns, csums);
	cseq = o->csc_seq;
	pthread_mutex_unlock(&o->lock);

	ret = -ENOMEM;
	/* Whole sectors into an aligned buffer: read straight into it. */
	if (off == s0 * CACHE_SECTOR && len == ns * CACHE_SECTOR &&
	    (uintptr_t)buf % CACHE_DIO_ALIGN == 0)
		data = buf;
	else
		data = bounce = cache_alloc_aligned(ns * CACHE_SECTOR);
	if (!data || !csums)
		goto out;
	ret = 0;
	if (!cached) {
		/* The whole chunks, to cache them: one pread as before (a
		 * chunk never straddles a super-group), a little longer. */
		uint64_t nsec = (size + CACHE_SECTOR - 1) / CACHE_SECTOR;
		uint64_t cs, ce;

		k0 = s0 / CACHE_CSC_CHUNK;
		nk = (s0 + ns - 1) / CACHE_CSC_CHUNK - k0 + 1;
		cs = k0 * CACHE_CSC_CHUNK;
		ce = (k0 + nk) * CACHE_CSC_CHUNK < nsec ?
		     (k0 + nk) * CACHE_CSC_CHUNK : nsec;
		STAT_ADD(c, csum_loads, 1);
		chunks = nk <= 2 ? stack_chunks :
			 malloc(nk * CACHE_CSC_CHUNK * 8);
		if (chunks)
			memset(chunks + (ce - cs), 0,
			       (nk * CACHE_CSC_CHUNK - (ce - cs)) * 8);
		if (!chunks) {	/* then only what this read needs */
			ret = cache_load_csums(c, meta_fd, s0, ns, csums);
		} else {
			ret = cache_load_csums(c, meta_fd, cs, ce - cs, chunks);
			if (!ret)
				memcpy(csums, chunks + (s0 - cs), ns * 8);
		}
	}
	if (!ret)
		ret = read_range(c, fd, direct, s0 * CACHE_SECTOR, send, data);
	if (ret < 0) {
		pthread_mutex_lock(&o->lock);
		if (o->gen == gen)
			cache_obj_fail_locked(o, (int)ret, "read");
		pthread_mutex_unlock(&o->lock);
		goto out;
	}
	/* 3. Verify every sector touched; drop the blocks of those that
	 *    fail unless the block changed under us (then it is a race, not
	 *    corruption). */
	for (uint64_t s = s0; s < s0 + ns; s++) {
		uint64_t b;

		s = first_bad_sector(salt, s, s0 + ns - s,
				     (char *)data + (s - s0) * CACHE_SECTOR,
				     send, csums + (s - s0));
		if (s == s0 + ns)
			break;
		bad = true;
		b = s / spb;
		pthread_mutex_lock(&o->lock);
		if (o->gen == gen && o->unmark_seq == useq &&
		    cache_bit(o->bitmap, b)) {
			int r;

			log_corrupt(o, b);
			cache_obj_cancel_locked(o, b);
			r = cache_obj_unmark_locked(o, b);
			useq = o->unmark_seq;
			if (r)
				cache_obj_fail_locked(o, r, "metadata write");
		}
		pthread_mutex_unlock(&o->lock);
		s = (b + 1) * spb - 1;	/* on to the next block */
	}
	if (bad) {
		ret = -ENODATA;
		STAT_ADD(c, miss_bytes, len);
		goto out;
	}
	if (chunks) {
		/* They verified what they guard: keep them for next time. */
		pthread_mutex_lock(&o->lock);
		if (o->gen == gen)
			cache_csc_insert_locked(o, k0, nk, chunks, cseq);
		pthread_mutex_unlock(&o->lock);
	}
	if (data != buf)
		memcpy(buf, (char *)data + (off - s0 * CACHE_SECTOR), len);
	STAT_ADD(c, hit_bytes, len);
	ret = len;
out:
	free(bounce);
	if (chunks != stack_chunks)
		free(chunks);
	if (csums != stack_csums)
		free(csums);
	return ret;
}

/* Verify every present block (offline inspection). Called with o->lock
 * held; the object is quiet enough that races are not a concern. */
int cache_obj_verify_locked(struct cache_obj *o, bool repair, uint64_t *bad)
{
	struct cache *c = o->c;
	uint32_t bs = c->block_size, spb = cache_spb(bs);
	uint64_t *csums;
	void *buf;
	int ret = 0;

	GW_ASSERT_HELD(&o->lock);
	buf = cache_alloc_aligned(bs);
	csums = malloc((size_t)spb * 8);
	if (!buf || !csums) {
		free(buf);
		free(csums);
		return -ENOMEM;
	}
	for (uint64_t b = 0; b < o->nblocks && !ret; b++) {
		uint64_t start = b * bs;
		uint64_t end = start + bs < o->hdr->size ? start + bs : o->hdr->size;
		uint64_t nsec = (end - start + CACHE_SECTOR - 1) / CACHE_SECTOR;
		ssize_t len;

		if (!cache_bit(o->bitmap, b))
			continue;
		ret = cache_load_block_csums(c, o->meta_fd, b, 1, csums);
		if (ret)
			break;
		len = read_range(c, o->data_fd, o->direct, start, end, buf);
		if (len < 0) {
			ret = (int)len;
			break;
		}
		if (first_bad_sector(o->hdr->salt, b * spb, nsec, buf, end,
				     csums) == b * spb + nsec)
			continue;
		(*bad)++;
		cache_log("%s block %llu of object %s fails its checksum",
			  repair ? "dropping" : "found:", (unsigned long long)b,
			  o->name);
		if (repair) {
			STAT_ADD(c, corrupt_blocks, 1);
			ret = cache_obj_unmark_locked(o, b);
		}
	}
	free(buf);
	free(csums);
	return ret;
}
