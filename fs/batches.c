/*
 * batches.c - /.batches, a subtree of the mount: sampler-ordered batches as
 * files (the files of a step are described in batch_i.h).
 *
 *   /.batches/<spec>/                    a sampler spec (sampler/ grammar)
 *   /.batches/<spec>/epoch-<e>/          one epoch of it
 *   /.batches/<spec>/epoch-<e>/<k>/      batch step k for the spec's rank
 *
 * Everything is computed from the path: batch k of epoch e is built
 * directly (libzrsampler, O(B)), so any step of any epoch is instant to
 * reach and ranks need no coordination. Any spec that parses works on
 * lookup; listing /.batches shows the mount's -o batches= specs and a
 * default. A malformed or out-of-range name is ENOENT with a log line.
 * This file knows names and inode numbers; a file's bytes are made in
 * batch_files.c, steps ahead and behind a reader handled in
 * batch_prefetch.c.
 *
 * Inode numbers: a spec directory is ZRFS_INO_SPEC + its index in the table
 * of spec names seen; (spec, epoch) pairs get a slot in a second table; a
 * step directory and its files are ZRFS_INO_STEP | slot << 42 | step << 10
 * | kind. Both tables only grow (up to SPECS_MAX specs and SLOTS_MAX epoch
 * slots per mount), so inode numbers never change while mounted.
 *
 * Sections: the tables, nodes, names, the subtree, set-up.
 */
#include "batch_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPECS_MAX 4096
#define DEFAULT_SPEC "shuffle,batch=256,tail=keep"

struct spec_entry {
	char name[ZS_SPEC_MAX + 1];
	zs_spec spec;
};

/* An epoch of a spec, opened: its order over the records there were then. */
struct slot {
	uint32_t spec;
	uint64_t epoch;
	zs_sampler *s;
};

/* An entry of either table is written once, before the count that makes
 * it visible is raised under the lock, and never changes after. */
struct zrfs_batches {
	pthread_mutex_t lock;     /* the counts, and entries being added */
	struct spec_entry *specs;
	uint32_t nspecs, nlisted; /* the first nlisted are listed in /.batches */
	struct slot *slots;
	uint32_t nslots;
};

/* ---- the tables ---- */

static int find_spec(struct zrfs_batches *b, const char *name)
{
	for (uint32_t i = 0; i < b->nspecs; i++)
		if (strcmp(b->specs[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}

/* Index of spec @name, interned on first sight; -ENOENT (logged) if bad
 * (for a dataset of @n records: hi beyond it, say). */
static int spec_index(struct zrfs *fs, uint64_t n, const char *name, bool listed)
{
	struct zrfs_batches *b = fs->batches;
	zs_sampler *s = NULL;
	zs_spec spec;
	int idx;

	pthread_mutex_lock(&b->lock);
	idx = find_spec(b, name);
	pthread_mutex_unlock(&b->lock);
	if (idx >= 0)
		return idx;
	if (zs_spec_parse(name, &spec) < 0 || zs_sampler_create(&s, &spec, n) < 0) {
		char esc[ZRFS_LOG_NAME_MAX], why[ZRFS_LOG_NAME_MAX];
		if (zrfs_log_admit()) /* the reason may quote the name */
			fuse_log(FUSE_LOG_ERR, "zrfs: %s/%s: %s\n", ZRFS_BATCHES_NAME,
				 zrfs_log_name(name, esc, sizeof esc),
				 zrfs_log_name(zs_errmsg(), why, sizeof why));
		return -ENOENT;
	}
	zs_sampler_destroy(s); /* each epoch has its own */
	pthread_mutex_lock(&b->lock);
	idx = find_spec(b, name); /* another thread may have been first */
	if (idx < 0 && b->nspecs < SPECS_MAX) {
		idx = (int)b->nspecs;
		snprintf(b->specs[idx].name, sizeof b->specs[idx].name, "%s", name);
		b->specs[idx].spec = spec;
		b->nspecs++;
		if (listed)
			b->nlisted = b->nspecs;
	}
	pthread_mutex_unlock(&b->lock);
	if (idx < 0 && zrfs_log_admit()) {
		char esc[ZRFS_LOG_NAME_MAX];
		fuse_log(FUSE_LOG_ERR, "zrfs: %s/%s: more than %d specs in one mount\n",
			 ZRFS_BATCHES_NAME, zrfs_log_name(name, esc, sizeof esc), SPECS_MAX);
	}
	return idx < 0 ? -ENOENT : idx;
}

/* The slot of (@spec, @epoch), made on first sight with an order over the
 * @n records of the view current then; -ENOENT (logged) if the table is
 * full or the spec does not fit the records (hi beyond a shrunken n). */
static int slot_of(struct zrfs_batches *b, uint32_t spec, uint64_t epoch, uint64_t n)
{
	zs_sampler *s = NULL;
	int found = -ENOENT;

	pthread_mutex_lock(&b->lock);
	for (uint32_t i = b->nslots; i-- > 0;) /* recent epochs are at the end */
		if (b->slots[i].spec == spec && b->slots[i].epoch == epoch) {
			found = (int)i;
			break;
		}
	if (found < 0 && b->nslots < SLOTS_MAX &&
	    zs_sampler_create(&s, &b->specs[spec].spec, n) == 0) {
		b->slots[b->nslots] = (struct slot){spec, epoch, s};
		found = (int)b->nslots++;
	}
	pthread_mutex_unlock(&b->lock);
	if (found < 0 && zrfs_log_admit())
		fuse_log(FUSE_LOG_ERR, "zrfs: %s/%s/epoch-%llu: %s\n", ZRFS_BATCHES_NAME,
			 b->specs[spec].name, (unsigned long long)epoch,
			 b->nslots >= SLOTS_MAX ? "more than 65536 epochs opened in one mount"
						: zs_errmsg());
	return found;
}

/* ---- nodes ---- */

enum node { N_NONE, N_TOP, N_SPEC, N_EPOCH, N_STEP };

/* A node of /.batches: which, and (below the top) where. */
struct where {
	uint32_t spec;
	struct batch_step at; /* step is valid for N_STEP only */
	unsigned kind;        /* N_STEP: STEP_DIR or a file's kind */
};

static bool batches_owns(const struct zrfs *fs, fuse_ino_t ino)
{
	(void)fs;
	return ino == ZRFS_INO_BATCHES || (ino >= ZRFS_INO_SPEC && ino < ZRFS_INO_SPEC + SPECS_MAX) ||
	       (ino & (UINT64_C(3) << 60)) >= ZRFS_INO_EPOCH;
}

/* Whether @kind is a file of a step of this mount. */
static bool kind_exists(const struct zrfs *fs, unsigned kind)
{
	return kind < step_kinds(fs) &&
	       (kind < STEP_FIELD0 || kind_part(kind) != PART_NPY ||
		fs->fields[kind_field(kind)].has_npy);
}

static enum node decode(struct zrfs *fs, fuse_ino_t ino, struct where *w)
{
	struct zrfs_batches *b = fs->batches;
	uint64_t top = ino & (UINT64_C(3) << 60);
	bool found;

	if (ino == ZRFS_INO_BATCHES)
		return N_TOP;
	if (top < ZRFS_INO_EPOCH) {
		w->spec = (uint32_t)(ino - ZRFS_INO_SPEC);
		pthread_mutex_lock(&b->lock);
		found = ino >= ZRFS_INO_SPEC && w->spec < b->nspecs;
		pthread_mutex_unlock(&b->lock);
		if (found)
			w->at.spec = b->specs[w->spec].name;
		return found ? N_SPEC : N_NONE;
	}
	w->at.slot = (uint32_t)(top == ZRFS_INO_EPOCH ? ino & (SLOTS_MAX - 1)
						       : (ino >> 42) & (SLOTS_MAX - 1));
	pthread_mutex_lock(&b->lock);
	found = w->at.slot < b->nslots;
	pthread_mutex_unlock(&b->lock);
	if (!found)
		return N_NONE;
	w->spec = b->slots[w->at.slot].spec;
	w->at.epoch = b->slots[w->at.slot].epoch;
	w->at.s = b->slots[w->at.slot].s;
	w->at.spec = b->specs[w->spec].name;
	if (top == ZRFS_INO_EPOCH)
		return N_EPOCH;
	w->at.step = (ino >> STEP_KIND_BITS) & (STEPS_MAX - 1);
	w->kind = (unsigned)(ino & ((1u << STEP_KIND_BITS) - 1));
	if (w->at.step >= zs_steps(w->at.s) || (w->kind != STEP_DIR && !kind_exists(fs, w->kind)))
		return N_NONE;
	return N_STEP;
}

/* ---- names ---- */

static const char *const part_suffix[PARTS] = {"", ".offsets", ".npy"};

/* The name of step file @kind. */
static void kind_name(const struct zrfs *fs, unsigned kind, char *buf, size_t cap)
{
	if (kind == STEP_IDS)
		snprintf(buf, cap, "ids");
	else if (kind == STEP_INFO)
		snprintf(buf, cap, "info.json");
	else
		snprintf(buf, cap, "%s%s", fs->fields[kind_field(kind)].spec->name,
			 part_suffix[kind_part(kind)]);
}

/* The kind of the step file called @name, or -ENOENT. */
static int kind_of(const struct zrfs *fs, const char *name)
{
	size_t len = strlen(name);

	if (strcmp(name, "ids") == 0)
		return STEP_IDS;
	if (strcmp(name, "info.json") == 0)
		return STEP_INFO;
	for (unsigned f = 0; f < fs->nfields; f++) {
		const struct zrfs_field *fd = &fs->fields[f];
		if (len < fd->name_len || memcmp(name, fd->spec->name, fd->name_len) != 0)
			continue;
		for (unsigned part = 0; part < PARTS; part++)
			if (strcmp(name + fd->name_len, part_suffix[part]) == 0 &&
			    kind_exists(fs, step_kind(f, part)))
				return (int)step_kind(f, part);
	}
	return -ENOENT;
}

/* ---- the subtree ---- */

static struct zrfs_view *batches_view_of(struct zrfs *fs, struct zrfs_view *cur, fuse_ino_t ino)
{
	struct where w = {0};
	struct zrfs_view *v;

	if (decode(fs, ino, &w) != N_STEP)
		return zrfs_view_ref(cur);
	/* a step shows the view it was pinned to first */
	if ((v = zrfs_pinned_view(fs, step_dir_ino(&w.at))) != NULL)
		return v;
	/* first: pinned to the current one (full: it shows it all the same),
	 * by its files; the directory's attributes (a listing of its epoch
	 * with attributes) are no view's */
	if (w.kind == STEP_DIR)
		return zrfs_view_ref(cur);
	if (zrfs_pin(fs, step_dir_ino(&w.at), cur) == 1)
		zrfs_prefetch_pinned(fs, &w.at);
	return zrfs_view_ref(cur);
}

static void batches_forget(struct zrfs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct where w = {0};

	(void)nlookup; /* a step's pin goes with its inode */
	if (decode(fs, ino, &w) == N_STEP && w.kind == STEP_DIR && zrfs_unpin(fs, ino)) {
		zrfs_prefetch_unpinned(fs, &w.at);
		zrfs_batch_forget(fs, &w.at); /* its next view may be another */
	}
}

static int batches_lookup(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t parent,
			  const char *name, fuse_ino_t *out)
{
	struct where w = {0};
	uint64_t num;
	int idx;

	if (parent == ZRFS_INO_ROOT) {
		*out = ZRFS_INO_BATCHES;
		return strcmp(name, ZRFS_BATCHES_NAME) == 0 ? 0 : -ENOENT;
	}
	switch (decode(fs, parent, &w)) {
	case N_TOP:
		if ((idx = spec_index(fs, v->n, name, false)) < 0)
			return idx;
		*out = ZRFS_INO_SPEC + (uint64_t)idx;
		return 0;
	case N_SPEC:
		if (strncmp(name, "epoch-", 6) != 0 ||
		    zrfs_parse_dec(name + 6, strlen(name + 6), ZS_EPOCH_MAX, &num) < 0 ||
		    (idx = slot_of(fs->batches, w.spec, num, v->n)) < 0)
			return -ENOENT;
		*out = ZRFS_INO_EPOCH | (uint64_t)idx;
		return 0;
	case N_EPOCH:
		if (zrfs_parse_dec(name, strlen(name), STEPS_MAX - 1, &num) < 0 ||
		    num >= zs_steps(w.at.s))
			return -ENOENT;
		*out = step_ino(w.at.slot, num, STEP_DIR);
		return 0;
	case N_STEP:
		if (w.kind != STEP_DIR)
			return -ENOTDIR;
		if ((idx = kind_of(fs, name)) < 0)
			return idx;
		*out = step_ino(w.at.slot, w.at.step, (unsigned)idx);
		return 0;
	case N_NONE:
		break;
	}
	return -ENOENT;
}

static int batches_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct stat *st)
{
	struct where w = {0};
	enum node node = decode(fs, ino, &w);
	uint64_t size;
	int rc;

	if (node == N_NONE)
		return -ENOENT;
	if (node != N_STEP || w.kind == STEP_DIR) {
		zrfs_dir_attr(fs, v, ino, st);
		return 0;
	}
	if ((rc = zrfs_batch_file_size(fs, v, &w.at, w.kind, &size)) < 0)
		return rc;
	zrfs_file_attr(fs, v, ino, size, st);
	return 0;
}

static int batches_entry(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t dir, uint64_t pos,
			 struct zrfs_dirent *out)
{
	struct zrfs_batches *b = fs->batches;
	struct where w = {0};
	uint64_t i = pos - 2;
	bool listed;
	int slot;

	out->pos = pos;
	out->type = S_IFDIR;
	if (dir == ZRFS_INO_ROOT) {
		snprintf(out->name, sizeof out->name, "%s", ZRFS_BATCHES_NAME);
		out->ino = ZRFS_INO_BATCHES;
		return pos == 2;
	}
	switch (decode(fs, dir, &w)) {
	case N_TOP:
		pthread_mutex_lock(&b->lock);
		listed = i < b->nlisted;
		pthread_mutex_unlock(&b->lock);
		if (!listed)
			return 0;
		snprintf(out->name, sizeof out->name, "%s", b->specs[i].name);
		out->ino = ZRFS_INO_SPEC + i;
		return 1;
	case N_SPEC: /* epoch-0 is listed; every epoch-<e> works on lookup */
		if (i > 0 || (slot = slot_of(b, w.spec, 0, v->n)) < 0)
			return 0;
		snprintf(out->name, sizeof out->name, "epoch-0");
		out->ino = ZRFS_INO_EPOCH | (uint64_t)slot;
		return 1;
	case N_EPOCH:
		if (i >= zs_steps(w.at.s))
			return 0;
		snprintf(out->name, sizeof out->name, "%llu", (unsigned long long)i);
		out->ino = step_ino(w.at.slot, i, STEP_DIR);
		return 1;
	case N_STEP:
		if (w.kind != STEP_DIR)
			return -ENOTDIR;
		for (unsigned kind = STEP_IDS + (unsigned)i; kind < step_kinds(fs); kind++) {
			if (!kind_exists(fs, kind))
				continue;
			kind_name(fs, kind, out->name, sizeof out->name);
			out->ino = step_ino(w.at.slot, w.at.step, kind);
			out->type = S_IFREG;
			out->pos = kind - STEP_IDS + 2;
			return 1;
		}
		return 0;
	case N_NONE:
		break;
	}
	return -ENOENT;
}

static void batches_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
			 size_t size, off_t off)
{
	struct where w = {0};
	enum node node = decode(fs, ino, &w);
	bool ahead = false;

	if (node != N_STEP || w.kind == STEP_DIR) {
		fuse_reply_err(req, node == N_NONE ? ENOENT : EISDIR);
		return;
	}
	if (off == 0)
		zrfs_prefetch_drop_behind(fs, &w.at);
	if (w.kind >= STEP_FIELD0) {
		unsigned f = kind_field(w.kind);
		if (off == 0)
			zrfs_prefetch_ahead(fs, &w.at, f);
		ahead = !fs->fields[f].flate && zrfs_prefetch_hinted(fs, &w.at, f);
	}
	zrfs_batch_file_read(req, fs, v, &w.at, w.kind, size, off, ahead);
}

const struct zrfs_subtree zrfs_batches = {
	.name = ZRFS_BATCHES_NAME,
	.volatile_names = true, /* a spec or an epoch may fit the records later */
	.view = true,
	.owns = batches_owns,
	.view_of = batches_view_of,
	.forget = batches_forget,
	.lookup = batches_lookup,
	.attr = batches_attr,
	.entry = batches_entry,
	.read = batches_read,
};

/* ---- set-up ---- */

int zrfs_batches_create(struct zrfs *fs, struct zrfs_view *v, const char *specs)
{
	struct zrfs_batches *b = calloc(1, sizeof *b);
	char *list = specs ? strdup(specs) : NULL, *save = NULL;
	int rc = 0;

	if (!b || (specs && !list) || !(b->specs = calloc(SPECS_MAX, sizeof *b->specs)) ||
	    !(b->slots = calloc(SLOTS_MAX, sizeof *b->slots)) || zrfs_prefetch_create(fs) < 0) {
		free(list);
		if (b) {
			free(b->specs);
			free(b->slots);
			free(b);
		}
		fprintf(stderr, "zrfs: out of memory\n");
		return -ENOMEM;
	}
	pthread_mutex_init(&b->lock, NULL);
	fs->batches = b;
	for (char *s = list ? strtok_r(list, ":", &save) : NULL; s && rc == 0;
	     s = strtok_r(NULL, ":", &save)) {
		if (spec_index(fs, v->n, s, true) < 0) {
			fprintf(stderr, "zrfs: -o batches: '%s': %s\n", s, zs_errmsg());
			rc = -EINVAL;
		}
	}
	if (rc == 0 && v->n > 0)
		spec_index(fs, v->n, DEFAULT_SPEC, true);
	free(list);
	return rc;
}

void zrfs_batches_start(struct zrfs *fs)
{
	zrfs_prefetch_start(fs);
}

void zrfs_batches_destroy(struct zrfs *fs)
{
	struct zrfs_batches *b = fs->batches;

	zrfs_prefetch_destroy(fs); /* its threads use the tables */
	if (!b)
		return;
	for (uint32_t i = 0; i < b->nslots; i++)
		zs_sampler_destroy(b->slots[i].s);
	free(b->specs);
	free(b->slots);
	pthread_mutex_destroy(&b->lock);
	free(b);
	fs->batches = NULL;
}
