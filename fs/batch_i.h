/*
 * batch_i.h - what the four files of /.batches share: batches.c (the
 * subtree: names, inode numbers), batch_tables.c (the specs and epochs
 * opened, bounded), batch_files.c (where a batch file's bytes are
 * assembled) and batch_prefetch.c (steps made ready ahead of a reader,
 * dropped behind it).
 *
 * A step directory holds, per step of an epoch of a spec:
 *   ids              the record ids, little-endian u64         STEP_IDS
 *   info.json        epoch, step, rank, world, seed, ...       STEP_INFO
 *   <field>          the records, concatenated in batch order  PART_DATA
 *   <field>.offsets  B + 1 little-endian u64 offsets into it   PART_OFFSETS
 *   <field>.npy      fixed-shape fields: a (B, *shape) array   PART_NPY
 * A file's kind is STEP_IDS, STEP_INFO, or step_kind(field, part); the
 * directory itself is STEP_DIR. Step inode numbers:
 * ZRFS_INO_STEP | slot << 42 | step << 10 | kind.
 *
 * While the dataset changes: an epoch's order is fixed by the number of
 * records when the epoch was first opened (its slot's sampler); records
 * appended later join from the next epoch opened. A step directory shows
 * one view, pinned when it is first looked up or prefetched, so all its
 * files are of one committed state and none changes size; a record of the
 * order that view no longer has reads as missing.
 */
#ifndef ZRFS_BATCH_I_H
#define ZRFS_BATCH_I_H

#include "zrfs_i.h"
#include "zrsampler.h"

enum step_file { STEP_DIR, STEP_IDS, STEP_INFO, STEP_FIELD0 };
enum batch_part { PART_DATA, PART_OFFSETS, PART_NPY, PARTS };

#define STEP_KIND_BITS 10     /* STEP_FIELD0 + PARTS * ZR_FIELDS_MAX kinds fit */
#define STEPS_MAX (UINT64_C(1) << 32)
#define SPECS_MAX 4096        /* specs open at once (a power of 2) */
#define SLOTS_MAX 65536       /* (spec, epoch) pairs open at once (a power of 2) */

static inline unsigned step_kind(unsigned field, enum batch_part part)
{
	return STEP_FIELD0 + PARTS * field + (unsigned)part;
}

/* Field and part of a field file's kind (>= STEP_FIELD0). */
static inline unsigned kind_field(unsigned kind)
{
	return (kind - STEP_FIELD0) / PARTS;
}

static inline enum batch_part kind_part(unsigned kind)
{
	return (enum batch_part)((kind - STEP_FIELD0) % PARTS);
}

/* One past the last kind of a step of this mount's fields. */
static inline unsigned step_kinds(const struct zrfs *fs)
{
	return STEP_FIELD0 + PARTS * fs->nfields;
}

static inline fuse_ino_t step_ino(uint32_t slot, uint64_t step, unsigned kind)
{
	return ZRFS_INO_STEP | (uint64_t)slot << 42 | step << STEP_KIND_BITS | kind;
}

/* The cache key of a step's field (a flate field's blob, a raw one's offsets):
 * bit 63 set, clear of
 * the record keys (field << 40 | id). */
static inline uint64_t batch_key(uint32_t slot, uint64_t step, unsigned field)
{
	return UINT64_C(1) << 63 | (uint64_t)slot << 40 | step << 8 | field;
}

/* Batch @step of epoch @epoch of a spec, as the tables know it. */
struct batch_step {
	const zs_sampler *s;  /* the epoch's: immutable, lives as long as the mount */
	const char *spec;     /* the spec's name as looked up; as long-lived */
	uint32_t slot;        /* the (spec, epoch) pair's index in the table */
	uint64_t epoch, step;
};

/* The numbers of a step's directory, and of its epoch's (the directory the
 * step's name is in). */
static inline fuse_ino_t step_dir_ino(const struct batch_step *at)
{
	return step_ino(at->slot, at->step, STEP_DIR);
}

static inline fuse_ino_t epoch_ino(uint32_t slot)
{
	return ZRFS_INO_EPOCH | slot;
}

/* The kind of a step's number: STEP_DIR, STEP_IDS, ... */
static inline unsigned ino_kind(fuse_ino_t ino)
{
	return (unsigned)(ino & ((1u << STEP_KIND_BITS) - 1));
}

/* The slot of an epoch directory, a step or a step's file. */
static inline uint32_t ino_slot(fuse_ino_t ino)
{
	return (uint32_t)((ino & (UINT64_C(3) << 60)) == ZRFS_INO_EPOCH ? ino & (SLOTS_MAX - 1)
									 : (ino >> 42) & (SLOTS_MAX - 1));
}

/* ---- batch_tables.c ---- */

/* All thread-safe. The tables are fs->batches; @queue_pass queues a pass
 * (below) on a thread of the owner's, false if it cannot now (it is asked
 * again). */
int zrfs_batch_tables_create(struct zrfs *fs, bool (*queue_pass)(struct zrfs *fs));
void zrfs_batch_tables_destroy(struct zrfs *fs);
/* Whether spec @name parses and fits @n records (into *@spec): its steps
 * an epoch, or -1 with the reason in zs_errmsg(). The one check of a
 * spec's lookup and of its .why file. */
int64_t zrfs_batch_spec_check(const char *name, uint64_t n, zs_spec *spec);
/* The index of spec @name, found or made (for a dataset of @n records; set
 * up makes the -o batches specs first, @listed, to stay): -ENOENT (logged,
 * unless @listed: the caller says why) if it does not parse or fit, or
 * every index is in use. */
int zrfs_batch_spec_index(struct zrfs *fs, uint64_t n, const char *name, bool listed);
/* The slot of epoch @epoch of spec @spec (the kernel holds the spec's
 * directory), found or opened with an order over @n records: -ENOENT
 * (logged) if the spec does not fit @n (hi beyond it) or every slot is in
 * use. */
int zrfs_batch_slot_of(struct zrfs *fs, uint32_t spec, uint64_t epoch, uint64_t n);
/* The name of spec @spec, or NULL: none has that index now. Valid while
 * the kernel holds the spec's directory or one of its epochs'. */
const char *zrfs_batch_spec_name(struct zrfs *fs, uint32_t spec);
/* The name of the @i-th listed spec, or NULL past the last. */
const char *zrfs_batch_listed(struct zrfs *fs, uint32_t i);
/* Slot @slot as *at (slot, epoch, sampler, spec's name; not the step) and
 * its spec's index, or false: not open. Valid while the kernel holds a
 * number of it or a prefetch job holds it. */
bool zrfs_batch_slot(struct zrfs *fs, uint32_t slot, struct batch_step *at, uint32_t *spec);
/* /.batches/.why/<spec>: the texts of the last WHY_KEPT files looked up,
 * each under a number of its own (WHY_TEXT_MAX bytes at most). Keep
 * @text as a new file's: its number. */
#define WHY_KEPT 64
#define WHY_TEXT_MAX 512
fuse_ino_t zrfs_batch_why_keep(struct zrfs *fs, const char *text);
/* The text of .why file @ino into @buf (WHY_TEXT_MAX bytes): its length,
 * or -ENOENT (not kept any more). */
int zrfs_batch_why_text(struct zrfs *fs, fuse_ino_t ino, char *buf);
/* A reference to the spec or epoch entry node @ino of /.batches is of
 * (not the top directory): taken for a number a lookup or a listing gave
 * (zrfs_batch_spec_index and zrfs_batch_slot_of take one themselves), of
 * an entry referenced already; let go. */
void zrfs_batch_ref(struct zrfs *fs, fuse_ino_t ino);
void zrfs_batch_unref(struct zrfs *fs, fuse_ino_t ino);
/* A prefetch job takes a reference to slot @slot (referenced already),
 * or puts it. */
void zrfs_batch_slot_ref(struct zrfs *fs, uint32_t slot);
void zrfs_batch_slot_put(struct zrfs *fs, uint32_t slot);
/* A pass over the tables, in two calls: the sweep gives back what is no
 * longer held (the slots *gone[0, return), whose indices are not free
 * until the finish, once what was made of their steps is forgotten); the
 * finish frees them, and asks back what has not been used for longest. */
uint32_t zrfs_batch_tables_sweep(struct zrfs *fs, const uint32_t **gone);
void zrfs_batch_tables_finish(struct zrfs *fs, uint32_t ngone);

/* ---- batch_files.c ---- */

/* Every function below reads step @at from view @v, the one it shows. */

/* Size of file @kind (not STEP_DIR) of step @at; assembles a flate field's
 * batch. 0 or a negative code (logged). */
int zrfs_batch_file_size(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
			 unsigned kind, uint64_t *size);
/* Reply to a read of file @kind of step @at; @ahead: its records were
 * asked for already (a prefetch). */
void zrfs_batch_file_read(fuse_req_t req, struct zrfs *fs, struct zrfs_view *v,
			  const struct batch_step *at, unsigned kind, size_t size, off_t off,
			  bool ahead);
/* Assemble flate field @field's batch of step @at into the cache (a
 * prefetch); 0 or a negative code (logged). */
int zrfs_batch_assemble(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
			unsigned field);
/* Ask the kernel for the records of raw field @field's batch of step @at. */
void zrfs_batch_read_ahead(struct zrfs *fs, struct zrfs_view *v, const struct batch_step *at,
			   unsigned field);
/* Drop the assembled batches of step @at from the cache (its view may
 * change). */
void zrfs_batch_uncache(struct zrfs *fs, const struct batch_step *at);

/* ---- batch_prefetch.c ---- */

int zrfs_prefetch_create(struct zrfs *fs);
/* Threads: one per CPU, at most 4 and -o prefetch, at least one. */
void zrfs_prefetch_start(struct zrfs *fs);
void zrfs_prefetch_destroy(struct zrfs *fs);
/* A reader started step @at of @field: make the steps after it ready, from
 * the views they will show (pinned, else the current one), pinning none. */
void zrfs_prefetch_ahead(struct zrfs *fs, const struct batch_step *at, unsigned field);
/* Step pins: a number of a file of step @at was found (a lookup, a
 * listing): the step shows the view it was pinned to, or from now on @v;
 * 0 or -ENOMEM. That number is let go. The view step @at is pinned to,
 * referenced, or NULL. */
int zrfs_step_pin(struct zrfs *fs, const struct batch_step *at, struct zrfs_view *v);
void zrfs_step_unpin(struct zrfs *fs, uint32_t slot, uint64_t step);
struct zrfs_view *zrfs_step_view(struct zrfs *fs, const struct batch_step *at);
/* A reader started step @at: drop the files of step - drop_behind. */
void zrfs_prefetch_drop_behind(struct zrfs *fs, const struct batch_step *at);
/* Whether a prefetch asked the kernel for raw @field's records of @at. */
bool zrfs_prefetch_hinted(struct zrfs *fs, const struct batch_step *at, unsigned field);
/* Queue a pass over the tables: false if not queued (no thread, a full
 * queue). Run one now, on this thread. */
bool zrfs_prefetch_pass(struct zrfs *fs);
void zrfs_prefetch_pass_now(struct zrfs *fs);

#endif /* ZRFS_BATCH_I_H */
