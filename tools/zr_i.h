/*
 * zr_i.h - helpers shared by the subcommands of the zr command.
 */
#ifndef ZR_TOOL_I_H
#define ZR_TOOL_I_H

#include "zrecord.h"

#include <getopt.h>
#include <jansson.h>

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses: 0 success, 1 failure (or problems found), 2 usage error. */
#define EXIT_USAGE 2

typedef struct zr_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} zr_cmd;

int cmd_create(int argc, char **argv);
int cmd_put(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_set(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_find(int argc, char **argv);

/* Records' original names (zr_names, core): record @id's name into @buf
 * (NUL-terminated): 1, 0 when it has none, -EINVAL when it makes no file
 * (not a relative path that stays below its directory, or too long: @buf
 * then says so; nothing said), or another negative code (said on stderr:
 * unreadable). */
int names_get(zr_dataset *ds, const zr_names *n, uint64_t id, char *buf, size_t cap);
/* Create @path (relative, checked) under the directory @dfd, making its
 * directories: a descriptor to write, or -1 (said on stderr; @shown names
 * the directory). */
int names_create_at(int dfd, const char *path, const char *shown);
/* The directory @path's last component is in, under @dfd (made as needed,
 * entered without following a link): @dfd itself, or a descriptor to
 * close; the last component at *@leaf. -1 (said on stderr). */
int names_parent_at(int dfd, const char *path, const char *shown, const char **leaf);
/* A dataset opened for writing with one value per field read from
 * --FIELD=FILE arguments argv[from..argc) (data NULL where not given). */
struct field_args {
	zr_dataset *ds;
	zr_value *values;
	void *bufs[ZR_FIELDS_MAX];
};
/* 0, or an exit status (message printed); field_args_close() either way. */
int field_args_open(struct field_args *a, const char *dir, int argc, char **argv, int from,
		    const char *what);
void field_args_close(struct field_args *a);
int cmd_cat(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_rebalance(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_sample(int argc, char **argv);

/* Print "zr: " + message to stderr. */
void zr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* zr_open(@dir, @flags) for a command @what; opening for writing, a writer
 * on this machine that is ending (a mount just unmounted, committing what
 * it was given: zr_holder_end) is waited for, said on stderr. */
int zr_open_writer(zr_dataset **ds, const char *dir, unsigned flags, const char *what);
/* Open @dir read-only, checking what is read (ZR_CHECK), and find @field:
 * its index, or -1 (said, as @what;
 * *@ds closed). */
int zr_open_field(const char *what, const char *dir, const char *field, zr_dataset **ds);
/* Print @j (then released) compactly on stdout, then @after: a script's
 * line of --json output (null if @j is NULL: out of memory). */
void zr_json_put(json_t *j, const char *after);
/* @s as a JSON string; bytes that are not UTF-8 (JSON holds nothing else)
 * become '?'. NULL if out of memory. */
json_t *zr_json_text(const char *s);
/* The dataset's attrs (meta.json) parsed, for json_decref(); NULL if out of
 * memory. */
json_t *zr_attrs_json(const zr_dataset *ds);
/* Record @id's file name in field @f's directory of a mount: ID[.EXT], the
 * extension the field's, or its name's own (zr_names_ext; @n the names the
 * dataset keeps, NULL: none asked). Not thread-safe. */
void zr_record_file_name(zr_dataset *ds, const zr_names *n, unsigned f, uint64_t id, char *buf,
			 size_t cap);
/* Report a library failure: the library's detail, or the code's text. */
int zr_fail(int rc, const char *what);
/* The options of every zr command: getopt_long over @argv with the short
 * options @shorts and the long ones @opts, argument order free (options
 * after operands too). The next option's code, -1 when none is left (the
 * operands are argv[optind..argc)), or '?' after a message naming @cmd
 * (unknown option, missing value): a usage error. Each command lists
 * {"help", no_argument, 0, 'h'} and "h". */
int zr_getopt(int argc, char **argv, const char *shorts, const struct option *opts,
	      const char *cmd);
/* Whether argv[optind..argc) holds @min..@max operands (@max -1: any);
 * if not, says "expected @what". */
bool zr_operands(int argc, const char *cmd, int min, int max, const char *what);
/* For a command of operands only: -1 to go on (operands from
 * argv[optind]), or the exit status (0: help printed on stdout). */
int zr_no_options(int argc, char **argv, const char *cmd, const char *help);
#define ZR_OPT_HELP {"help", no_argument, 0, 'h'}
#define ZR_OPT_END {0, 0, 0, 0}
/* Parse a decimal unsigned number in [lo, hi]; 0 or -1 with a message. */
int parse_u64(const char *s, uint64_t lo, uint64_t hi, const char *what, uint64_t *out);
/* Parse a size with an optional K/M/G suffix (powers of 1024). */
int parse_size(const char *s, uint64_t hi, const char *what, uint64_t *out);
/* Is argv[i] asking for help? */
bool is_help(const char *arg);
/* Read a whole file ("-" = stdin) into a malloc'd buffer; failures are
 * said as "@what: PATH: why". */
int read_file(const char *what, const char *path, void **buf, size_t *len);
/* Write all of buf to fd. */
int write_all(int fd, const void *buf, size_t len);
/* Monotonic seconds. */
double now_sec(void);

/* A progress line on standard error while a long command runs, when it is
 * a terminal: "DONE/TOTAL UNIT  RATE UNIT/s  MB/s  ETA S s". */
struct zr_progress {
	const char *unit;    /* "records", "values" */
	double t0, drawn;
	bool tty;
};
void zr_progress_start(struct zr_progress *p, const char *unit);
/* Redraw the line (at most 5 times a second, but always when @final,
 * which ends it); @bytes 0: no MB/s. */
void zr_progress_show(struct zr_progress *p, uint64_t done, uint64_t total, uint64_t bytes,
		      bool final);
/* Clear the line, for another line to be printed (it is drawn again at the
 * next show). */
void zr_progress_clear(struct zr_progress *p);
/* zr_progress_set()'s callback for a struct zr_progress (values, no bytes):
 * the library's last call, done == total, ends the line. */
void zr_progress_cb_show(void *ctx, uint64_t done, uint64_t total);
/* Remove @path and everything under it (symbolic links not followed). */
void rm_tree(const char *path);

/* A growing list of malloc'd strings. strs_add takes @x (NULL: -ENOMEM;
 * freed on failure); strs_free frees the strings and the list. */
struct strs {
	char **v;
	size_t n, cap;
};
/* Room in the array *@v (a pointer to it, of @cap elements of @size
 * bytes) for element @n: doubled when full, @first at the start. 0 or
 * -ENOMEM (the array as it was). */
int grow(void *v, size_t *cap, size_t n, size_t size, size_t first);
int strs_add(struct strs *s, char *x);
void strs_free(struct strs *s);

/* The regular-file members of WebDataset-style tar shards (tar.c): members
 * sharing a key (the name up to the first '.' of its last component) are one
 * sample, each extension a field. zr_tar_scan appends one shard's members,
 * @shard naming it in messages and kept by pointer in the members. */
struct zr_tar_member {
	uint32_t key, field;   /* sample index, index into fields */
	const char *shard;
	uint64_t off, len;     /* its bytes at @off of the shard, @len of them */
	int64_t mtime;         /* its modification time, ns since the epoch */
	/* a sparse file (tar --sparse): @len is its size, its data
	 * segs[seg_at, seg_at + nsegs) stored one after another from @off, the
	 * rest zeros; nsegs 0: its bytes as they are */
	uint32_t nsegs;
	size_t seg_at;
};
/* A segment of data of a sparse member: @len bytes at @off of the file. */
struct zr_tar_seg {
	uint64_t off, len;
};
/* A directory, symbolic link, FIFO or device member, for the tree
 * (zr_tree_entry). */
struct zr_tar_entry {
	char *path, *target;   /* target: a link's; NULL for the others */
	uint32_t mode;         /* S_IFDIR, S_IFLNK, S_IFIFO, S_IFCHR or S_IFBLK, and the
				* permission bits */
	uint64_t rdev;         /* a device's number */
	int64_t mtime;
};
struct zr_tar {
	struct zr_tar_member *m;
	struct zr_tar_entry *e; /* directories and symbolic links, in order */
	size_t ne, ecap;
	size_t n, cap;
	struct strs fields;    /* extensions, in order of first appearance */
	uint32_t keys;         /* samples so far */
	struct strs key_names; /* each sample's KEY, prefix included */
	char last_key[PATH_MAX];
	uint64_t skipped;      /* members not named KEY.EXT, left out */
	char first_skipped[PATH_MAX + 64];
	uint64_t unfiled;      /* hard links: not files, left out */
	char first_unfiled[PATH_MAX + 64];
	struct zr_tar_seg *segs; /* the sparse members' segments */
	size_t nsegs, segcap;
};
/* List the members of the shard open as @fd, which the writers open as
 * @path; messages name it @shown. */
int zr_tar_scan(struct zr_tar *t, int fd, const char *path, const char *shown, char *err,
		size_t errlen);
/* Keys that more than one sample has (their members not together: each
 * run of them became a record), and in *@first the first in byte order. */
uint64_t zr_tar_split_keys(const struct zr_tar *t, const char **first);
void zr_tar_free(struct zr_tar *t);

#endif
