/*
 * dataset.c - the dataset as the mount serves it: opened read-only as the
 * first view (view.c), its fields with what the tree derives from them
 * (names, extensions, record sizes; the mount's own copies, as views come
 * and go), the field of records' original names, the owner the files
 * show, and the cache; and all of it released again.
 *
 * zrfs opens the dataset before mounting, so a bad dataset is reported on
 * the terminal and nothing is mounted.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The smallest limit in FILE under @root/@path and each of its parents
 * (a cgroup's memory bound, and its ancestors'), or UINT64_MAX. */
static uint64_t cgroup_limit(const char *root, const char *path, const char *file)
{
	char p[4096], buf[64];
	uint64_t min = UINT64_MAX;

	snprintf(p, sizeof p, "%s%s", root, path);
	for (;;) {
		size_t n = strlen(p);
		FILE *f;
		snprintf(p + n, sizeof p - n, "/%s", file);
		if ((f = fopen(p, "re")) != NULL) {
			char *end;
			unsigned long long v;
			if (fgets(buf, sizeof buf, f) && (v = strtoull(buf, &end, 10), end != buf) &&
			    v < min)
				min = v; /* "max" (v2) parses as nothing: no limit */
			fclose(f);
		}
		p[n] = 0;
		char *slash = strrchr(p, '/');
		if (!slash || (size_t)(slash - p) < strlen(root))
			return min;
		*slash = 0;
	}
}

/* The memory this process may fill with page cache: the machine's, or less
 * where its memory cgroup (v2 memory.max, v1 memory.limit_in_bytes) bounds
 * it, as in a container or a job of a cluster's scheduler. */
static uint64_t memory_bound(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t bound = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096];

	while (f && fgets(line, sizeof line, f)) {
		char *path = strchr(line, ':'), *ctl = path ? path + 1 : NULL, *end;
		uint64_t v = UINT64_MAX, w;
		if (!ctl || !(path = strchr(ctl, ':')))
			continue;
		*path++ = 0;
		if ((end = strchr(path, '\n')))
			*end = 0;
		if (ctl[0] == 0) { /* v2: "0::/path" */
			v = cgroup_limit("/sys/fs/cgroup", path, "memory.max");
			w = cgroup_limit("/sys/fs/cgroup/unified", path, "memory.max");
			v = w < v ? w : v;
		} else if (strcmp(ctl, "memory") == 0) { /* v1 */
			v = cgroup_limit("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
		}
		if (v < bound)
			bound = v;
	}
	if (f)
		fclose(f);
	return bound;
}

/* The mount's copy of field @i of @ds. */
static void field_copy(struct zrfs_field *f, zr_dataset *ds, unsigned i, bool check)
{
	const zr_field_spec *spec = zr_field(ds, i);

	f->own = *spec;
	snprintf(f->name, sizeof f->name, "%s", spec->name);
	f->own.name = f->name;
	if (spec->ext) {
		snprintf(f->ext, sizeof f->ext, "%s", spec->ext);
		f->own.ext = f->ext;
	}
	f->spec = &f->own;
	f->name_len = strlen(f->name);
	f->ext_len = spec->ext ? strlen(f->ext) : 0;
	f->record_size = zr_field_record_size(ds, i);
	/* -o check: a raw value too is served from the cache, checked once */
	f->whole = spec->compress == ZR_FLATE || (check && zr_format_version(ds) >= 2);
	/* a fixed shape: FIELD.npy (zr_npy_header refuses what NumPy cannot read) */
	char hdr[ZR_NPY_HEADER_MAX];
	f->has_npy = spec->fixed && zr_npy_header(spec, 0, hdr, sizeof hdr) > 0;
}

int zrfs_dataset_open(struct zrfs *fs)
{
	struct zrfs_view *v = NULL;
	zr_dataset *ds;
	struct stat st;
	int rc = zr_open(&ds, fs->dataset, ZR_RDONLY | (fs->opts.check ? ZR_CHECK : 0));

	if (rc < 0) {
		fprintf(stderr, "zrfs: %s\n", zr_errmsg(NULL));
		return -1;
	}
	if (stat(fs->dataset, &st) == 0) {
		fs->uid = st.st_uid;
		fs->gid = st.st_gid;
	}
	fs->nfields = zr_field_count(ds);
	fs->fields = calloc(fs->nfields, sizeof *fs->fields);
	if (!fs->fields) {
		zr_close(ds);
		fprintf(stderr, "zrfs: out of memory\n");
		return -1;
	}
	for (unsigned i = 0; i < fs->nfields; i++)
		field_copy(&fs->fields[i], ds, i, fs->opts.check);
	if (zr_names_get(ds, &fs->names) < 0) {
		zr_close(ds);
		fprintf(stderr, "zrfs: out of memory\n");
		return -1;
	}
	if ((rc = zrfs_view_make(fs, ds, &v)) < 0) { /* v owns ds from here on */
		zr_close(ds);
		fprintf(stderr, "zrfs: %s/meta.json: cannot read: %s\n", fs->dataset, strerror(-rc));
		return -1;
	}
	if (fs->opts.readaround == UINT64_MAX) {
		/* a dataset that fits in memory is read once per epoch, all of it:
		 * reading around each record costs no extra I/O and makes fewer,
		 * larger requests; a larger one would read bytes that are evicted
		 * before they are used, so only the records themselves. The
		 * memory is what this process's cgroup lets it have. */
		fs->opts.readaround = zr_chunk_bytes_estimate(ds) <= memory_bound() / 2 ? 64 << 10 : 0;
		/* bigger: page faults in the chunk mappings read only what they
		 * touch, not the device's read-around (up to read_ahead_kb, MiBs),
		 * which random reads would mostly throw away; the daemon asks
		 * for what it is about to read itself */
		if (!fs->opts.readaround)
			zr_advise_random(true);
	}
	if (zrfs_cache_create(&fs->cache, fs->opts.cache_bytes) < 0 ||
	    zrfs_versions_create(fs, v->gen) < 0 || zrfs_inodes_create(fs) < 0 ||
	    zrfs_state_create(fs, v) < 0) { /* last: then it holds v */
		zrfs_view_put(v);
		fprintf(stderr, "zrfs: out of memory\n");
		return -1;
	}
	return 0;
}

void zrfs_dataset_close(struct zrfs *fs)
{
	zrfs_scratch_free(); /* this thread's reader, before the dataset closes */
	zrfs_inodes_destroy(fs); /* the views pinned: every request is over */
	zrfs_state_destroy(fs);
	zrfs_versions_destroy(fs);
	zrfs_cache_destroy(fs->cache);
	free(fs->fields);
	fs->cache = NULL;
	fs->fields = NULL;
}
