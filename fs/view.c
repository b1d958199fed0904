/*
 * view.c - what the mount shows: one committed state at a time, as a view,
 * and the names lock that lookups and listings resolve under.
 *
 * A view is immutable once published: the dataset handle of one generation
 * (opened with zr_reopen, so views share chunk files), its length, meta.json
 * as served, the .npy views' headers. Requests hold the view they answer
 * from (counted), so a view lives while any request, inode or batch step
 * uses it. Content never changes under an inode number: a number whose
 * bytes a commit replaced shows the view it showed for as long as the
 * kernel holds it (inodes.c: a pin), and a new lookup finds a new number
 * (versions.c).
 *
 * Sections: views, the current view.
 */
#include "zrfs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- views ---- */

static int load_meta(struct zrfs_view *v, const char *dataset)
{
	char path[4096];
	struct stat st;
	int fd, rc = -EIO;

	snprintf(path, sizeof path, "%s/meta.json", dataset);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (16 << 20) &&
	    (v->meta = malloc((size_t)st.st_size + 1)) != NULL &&
	    read(fd, v->meta, (size_t)st.st_size) == st.st_size) {
		v->meta_len = (size_t)st.st_size;
		v->mtime = st.st_mtim;
		rc = 0;
	}
	close(fd);
	return rc;
}

int zrfs_view_make(struct zrfs *fs, zr_dataset *ds, struct zrfs_view **out)
{
	struct zrfs_view *v = calloc(1, sizeof *v + fs->nfields * sizeof v->npy[0]);
	int rc;

	*out = NULL;
	if (!v)
		return -ENOMEM;
	atomic_init(&v->refs, 1);
	v->ds = ds;
	v->gen = zr_generation(ds);
	v->n = zr_length(ds);
	/* meta.json as it was when the handle was opened: a commit may have
	 * replaced it since, and then the next view serves that one */
	if ((rc = load_meta(v, fs->dataset)) < 0) {
		free(v);
		return rc;
	}
	for (unsigned f = 0; f < fs->nfields; f++)
		if (fs->fields[f].has_npy &&
		    (rc = zrfs_npy_header(fs->fields[f].spec, v->n, fs->fields[f].record_size,
					  &v->npy[f])) < 0) {
			free(v->meta);
			free(v);
			return rc;
		}
	*out = v;
	return 0;
}

struct zrfs_view *zrfs_view_ref(struct zrfs_view *v)
{
	atomic_fetch_add(&v->refs, 1);
	return v;
}

void zrfs_view_put(struct zrfs_view *v)
{
	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	zr_close(v->ds);
	free(v->meta);
	free(v);
}

/* ---- the current view ---- */

struct zrfs_state {
	pthread_rwlock_t lock;    /* the current view, and versions.c's tables:
				   * held for reading by lookups and listings */
	struct zrfs_view *view;
};

int zrfs_state_create(struct zrfs *fs, struct zrfs_view *first)
{
	struct zrfs_state *s = calloc(1, sizeof *s);

	if (!s)
		return -ENOMEM;
	pthread_rwlock_init(&s->lock, NULL);
	s->view = first;
	fs->state = s;
	return 0;
}

void zrfs_state_destroy(struct zrfs *fs)
{
	struct zrfs_state *s = fs->state;

	if (!s)
		return;
	zrfs_view_put(s->view);
	pthread_rwlock_destroy(&s->lock);
	free(s);
	fs->state = NULL;
}

struct zrfs_view *zrfs_view_current(struct zrfs *fs)
{
	struct zrfs_view *v;

	pthread_rwlock_rdlock(&fs->state->lock);
	v = zrfs_view_ref(fs->state->view);
	pthread_rwlock_unlock(&fs->state->lock);
	return v;
}

struct zrfs_view *zrfs_names_begin(struct zrfs *fs)
{
	pthread_rwlock_rdlock(&fs->state->lock);
	return fs->state->view;
}

struct zrfs_view *zrfs_names_view(struct zrfs *fs)
{
	return fs->state->view;
}

void zrfs_names_end(struct zrfs *fs)
{
	pthread_rwlock_unlock(&fs->state->lock);
}

/* ---- publishing (follow.c, under the write lock) ---- */

void zrfs_state_lock(struct zrfs *fs)
{
	pthread_rwlock_wrlock(&fs->state->lock);
}

void zrfs_state_unlock(struct zrfs *fs)
{
	pthread_rwlock_unlock(&fs->state->lock);
}

struct zrfs_view *zrfs_view_publish(struct zrfs *fs, struct zrfs_view *v)
{
	struct zrfs_view *old = fs->state->view;

	fs->state->view = v;
	return old;
}
