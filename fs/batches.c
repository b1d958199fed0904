/*
 * batches.c - /.batches, a subtree of the mount: sampler-ordered batches as
 * files (the files of a step are described in batch_i.h).
 *
 *   /.batches/<spec>/                    a sampler spec (sampler/ grammar)
 *   /.batches/<spec>/epoch-<e>/          one epoch of it
 *   /.batches/<spec>/epoch-<e>/<k>/      batch step k for the spec's rank
 *
 *   /.batches/.why/<spec>                why the mount refuses <spec>, or ok
 *
 * Everything is computed from the path: batch k of epoch e is built
 * directly (libzrsampler, O(B)), so any step of any epoch is instant to
 * reach and ranks need no coordination. Any spec that parses works on
 * lookup; listing /.batches shows the mount's -o batches= specs and a
 * default. A malformed or out-of-range name is ENOENT with a log line, and
 * .why/<name> says the reason to the program or the user who asks (a
 * lookup's ENOENT says nothing more, and a log may be nowhere they look).
 * This file knows names and inode numbers; the specs and epochs open are
 * kept in batch_tables.c, a file's bytes made in batch_files.c, steps
 * ahead and behind a reader handled in batch_prefetch.c.
 *
 * Inode numbers: a spec directory is ZRFS_INO_SPEC + its index in the table
 * of specs; (spec, epoch) pairs get a slot in a second table; a step
 * directory and its files are ZRFS_INO_STEP | slot << 42 | step << 10 |
 * kind. A number names one node for as long as the kernel holds it; the
 * tables give an index to another once the kernel has forgotten every
 * number of it.
 *
 * Sections: nodes, names, the subtree, set-up.
 */
#include "batch_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SPEC "shuffle,batch=256,tail=keep"

/* ---- nodes ---- */

enum node { N_NONE, N_TOP, N_SPEC, N_EPOCH, N_STEP, N_WHY, N_WHY_FILE };

#define WHY_NAME ".why"

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
	       (ino & (UINT64_C(3) << 60)) >= ZRFS_INO_EPOCH || ino == ZRFS_INO_WHY ||
	       zrfs_ino_asked_each_time(ino);
}

/* Whether @kind is a file of a step of this mount. */
static bool kind_exists(const struct zrfs *fs, unsigned kind)
{
	return kind < step_kinds(fs) &&
	       (kind < STEP_FIELD0 || kind_part(kind) != PART_NPY ||
		fs->fields[kind_field(kind)].has_npy);
}

static enum node batches_decode(struct zrfs *fs, fuse_ino_t ino, struct where *w)
{
	uint64_t top = ino & (UINT64_C(3) << 60);

	if (ino == ZRFS_INO_BATCHES)
		return N_TOP;
	if (ino == ZRFS_INO_WHY)
		return N_WHY;
	if (zrfs_ino_asked_each_time(ino))
		return N_WHY_FILE;
	if (top < ZRFS_INO_EPOCH) {
		w->spec = (uint32_t)(ino - ZRFS_INO_SPEC);
		if (ino < ZRFS_INO_SPEC || !(w->at.spec = zrfs_batch_spec_name(fs, w->spec)))
			return N_NONE;
		return N_SPEC;
	}
	if (!zrfs_batch_slot(fs, ino_slot(ino), &w->at, &w->spec))
		return N_NONE;
	if (top == ZRFS_INO_EPOCH)
		return N_EPOCH;
	w->at.step = (ino >> STEP_KIND_BITS) & (STEPS_MAX - 1);
	w->kind = ino_kind(ino);
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

	/* a step's files show the view the step is pinned to (the kernel
	 * holds them: they pinned it); its directory is no view's */
	if (batches_decode(fs, ino, &w) == N_STEP && w.kind != STEP_DIR &&
	    (v = zrfs_step_view(fs, &w.at)) != NULL)
		return v;
	return zrfs_view_ref(cur);
}

/* A number of /.batches found by a lookup or a listing, in view @v: the
 * reference it holds (the spec's and epoch's are taken by the tables) to
 * its epoch's slot, and for a step's file to the step's pin. 0 or -ENOMEM. */
static int take_ref(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, const struct where *w)
{
	if ((ino & ZRFS_INO_STEP) != ZRFS_INO_STEP)
		return 0;
	if (ino_kind(ino) != STEP_DIR && zrfs_step_pin(fs, &w->at, v) < 0)
		return -ENOMEM;
	zrfs_batch_ref(fs, ino);
	return 0;
}

static void batches_let_go(struct zrfs *fs, fuse_ino_t ino)
{
	/* the top, .why and its files keep nothing */
	if (ino == ZRFS_INO_BATCHES || ino == ZRFS_INO_WHY || zrfs_ino_asked_each_time(ino))
		return;
	if ((ino & ZRFS_INO_STEP) == ZRFS_INO_STEP && ino_kind(ino) != STEP_DIR)
		zrfs_step_unpin(fs, ino_slot(ino), (ino >> STEP_KIND_BITS) & (STEPS_MAX - 1));
	zrfs_batch_unref(fs, ino); /* last: this may let its slot go */
}

/* A .why file for spec @name over @v's records: its number in *@out
 * (its text: the reason the spec is refused, or what it makes). */
static int why_lookup(struct zrfs *fs, struct zrfs_view *v, const char *name, fuse_ino_t *out)
{
	char text[WHY_TEXT_MAX];
	zs_spec spec;
	int64_t steps = zrfs_batch_spec_check(name, v->n, &spec);

	if (steps < 0)
		snprintf(text, sizeof text, "%s\n", zs_errmsg());
	else
		snprintf(text, sizeof text, "ok: %lld step%s an epoch over %llu record%s\n",
			 (long long)steps, steps == 1 ? "" : "s", (unsigned long long)v->n,
			 v->n == 1 ? "" : "s");
	*out = zrfs_batch_why_keep(fs, text);
	return 0;
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
	switch (batches_decode(fs, parent, &w)) {
	case N_TOP:
		if (strcmp(name, WHY_NAME) == 0) {
			*out = ZRFS_INO_WHY;
			return 0;
		}
		if ((idx = zrfs_batch_spec_index(fs, v->n, name, false)) < 0)
			return idx;
		*out = ZRFS_INO_SPEC + (uint64_t)idx;
		return 0;
	case N_SPEC:
		if (strncmp(name, "epoch-", 6) != 0 ||
		    zrfs_parse_dec(name + 6, strlen(name + 6), ZS_EPOCH_MAX, &num) < 0 ||
		    (idx = zrfs_batch_slot_of(fs, w.spec, num, v->n)) < 0)
			return -ENOENT;
		*out = ZRFS_INO_EPOCH | (uint64_t)idx;
		return 0;
	case N_EPOCH:
		if (zrfs_parse_dec(name, strlen(name), STEPS_MAX - 1, &num) < 0 ||
		    num >= zs_steps(w.at.s))
			return -ENOENT;
		*out = step_ino(w.at.slot, num, STEP_DIR);
		return take_ref(fs, v, *out, &w);
	case N_STEP:
		if (w.kind != STEP_DIR)
			return -ENOTDIR;
		if ((idx = kind_of(fs, name)) < 0)
			return idx;
		*out = step_ino(w.at.slot, w.at.step, (unsigned)idx);
		return take_ref(fs, v, *out, &w);
	case N_WHY:
		return why_lookup(fs, v, name, out);
	case N_WHY_FILE:
		return -ENOTDIR;
	case N_NONE:
		break;
	}
	return -ENOENT;
}

static int batches_attr(struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino, struct stat *st)
{
	struct where w = {0};
	enum node node = batches_decode(fs, ino, &w);
	uint64_t size;
	int rc;

	if (node == N_NONE)
		return -ENOENT;
	if (node == N_WHY_FILE) {
		char text[WHY_TEXT_MAX];
		if ((rc = zrfs_batch_why_text(fs, ino, text)) < 0)
			return rc;
		zrfs_file_attr(fs, v, ino, (uint64_t)rc, st);
		return 0;
	}
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
	struct where w = {0};
	uint64_t i = pos - 2;
	const char *name;
	int slot;

	out->pos = pos;
	out->type = S_IFDIR;
	if (dir == ZRFS_INO_ROOT) {
		snprintf(out->name, sizeof out->name, "%s", ZRFS_BATCHES_NAME);
		out->ino = ZRFS_INO_BATCHES;
		return pos == 2;
	}
	switch (batches_decode(fs, dir, &w)) {
	case N_TOP:
		if (i >= SPECS_MAX || !(name = zrfs_batch_listed(fs, (uint32_t)i)))
			return 0;
		snprintf(out->name, sizeof out->name, "%s", name);
		out->ino = ZRFS_INO_SPEC + i;
		zrfs_batch_ref(fs, out->ino); /* listed: never given back */
		return 1;
	case N_SPEC: /* epoch-0 is listed; every epoch-<e> works on lookup */
		if (i > 0 || (slot = zrfs_batch_slot_of(fs, w.spec, 0, v->n)) < 0)
			return 0;
		snprintf(out->name, sizeof out->name, "epoch-0");
		out->ino = ZRFS_INO_EPOCH | (uint64_t)slot;
		return 1;
	case N_EPOCH:
		if (i >= zs_steps(w.at.s))
			return 0;
		snprintf(out->name, sizeof out->name, "%llu", (unsigned long long)i);
		out->ino = step_ino(w.at.slot, i, STEP_DIR);
		return take_ref(fs, v, out->ino, &w) < 0 ? -ENOMEM : 1;
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
			return take_ref(fs, v, out->ino, &w) < 0 ? -ENOMEM : 1;
		}
		return 0;
	case N_WHY: /* looked up by name only */
		return 0;
	case N_WHY_FILE:
		return -ENOTDIR;
	case N_NONE:
		break;
	}
	return -ENOENT;
}

static void batches_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v, fuse_ino_t ino,
			 size_t size, off_t off)
{
	struct where w = {0};
	enum node node = batches_decode(fs, ino, &w);
	bool ahead = false;

	if (node == N_WHY_FILE) {
		char text[WHY_TEXT_MAX];
		int rc = zrfs_batch_why_text(fs, ino, text);
		if (rc < 0)
			zrfs_reply_err(req, rc);
		else
			zrfs_reply_slice(req, text, (uint64_t)rc, size, off);
		return;
	}
	if (node != N_STEP || w.kind == STEP_DIR) {
		zrfs_reply_err(req, node == N_NONE ? -ENOENT : -EISDIR);
		return;
	}
	if (off == 0)
		zrfs_prefetch_drop_behind(fs, &w.at);
	if (w.kind >= STEP_FIELD0) {
		unsigned f = kind_field(w.kind);
		if (off == 0)
			zrfs_prefetch_ahead(fs, &w.at, f);
		ahead = !fs->fields[f].whole && zrfs_prefetch_hinted(fs, &w.at, f);
	}
	zrfs_batch_file_read(req, fs, v, &w.at, w.kind, size, off, ahead);
}

const struct zrfs_subtree zrfs_batches = {
	.name = ZRFS_BATCHES_NAME,
	.volatile_names = true, /* a spec or an epoch may fit the records later */
	.view = true,
	.owns = batches_owns,
	.view_of = batches_view_of,
	.let_go = batches_let_go,
	.lookup = batches_lookup,
	.attr = batches_attr,
	.entry = batches_entry,
	.read = batches_read,
};

/* ---- set-up ---- */

int zrfs_batches_create(struct zrfs *fs, struct zrfs_view *v, const char *specs)
{
	char *list = specs ? strdup(specs) : NULL, *save = NULL;
	int rc = 0;

	if ((specs && !list) || zrfs_batch_tables_create(fs, zrfs_prefetch_pass) < 0 ||
	    zrfs_prefetch_create(fs) < 0) {
		free(list);
		fprintf(stderr, "zrfs: out of memory\n");
		return -ENOMEM;
	}
	for (char *s = list ? strtok_r(list, ":", &save) : NULL; s && rc == 0;
	     s = strtok_r(NULL, ":", &save)) {
		if (zrfs_batch_spec_index(fs, v->n, s, true) < 0) {
			fprintf(stderr, "zrfs: -o batches: '%s': %s\n", s, zs_errmsg());
			rc = -EINVAL;
		}
	}
	if (rc == 0 && v->n > 0)
		zrfs_batch_spec_index(fs, v->n, DEFAULT_SPEC, true);
	free(list);
	return rc;
}

void zrfs_batches_start(struct zrfs *fs)
{
	zrfs_prefetch_start(fs);
}

void zrfs_batches_destroy(struct zrfs *fs)
{
	zrfs_prefetch_destroy(fs); /* its threads use the tables */
	zrfs_batch_tables_destroy(fs);
}
