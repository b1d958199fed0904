/*
 * import.c - zr import: directory trees, .npy arrays, flat files and
 * WebDataset shards become datasets.
 *
 * Every importer first lists its records (which file, which bytes; the
 * planners are in import_sources.c), checks everything it can before
 * writing (dtypes agree, sizes divide, names are valid), claims DEST,
 * reserves all ids at once and lets 1..4 writer threads fill them, each
 * appending to its own chunk, then commits once. On any error the import
 * stops, nothing is committed, and what it made in DEST is removed again:
 * DEST is left as it was.
 *
 * The plan and its writers are import_write.c's.
 *
 * Sections: the command, DEST.
 */
#include "import_i.h"

#include <dirent.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char help[] =
	"usage: zr import dir SRC DEST [--field NAME]\n"
	"                     [--label-from-parent FIELD | --label-from-top FIELD]\n"
	"                     [--ext EXT] [--follow-links] [--no-hidden]\n"
	"                     [--names FIELD | --no-names]\n"
	"       zr import npy FILE.npy [FILE.npy...] DEST [--field NAME]\n"
	"       zr import flat FILE DEST --record-size BYTES [--field NAME]\n"
	"       zr import tar SHARD.tar[.gz] [SHARD.tar...] DEST   (- : standard input)\n"
	"                     [--names FIELD | --no-names]\n"
	"   options for all: [--compress raw|flate] [--chunk-size N] [--writers 1..4]\n"
	"\n"
	"Create the dataset DEST (which must not exist, or be empty) from:\n"
	"  dir   every regular file under SRC, one record each, in byte-wise order\n"
	"        of their paths; the field (default 'data', dtype bytes) takes the\n"
	"        files' extension (the most common one, with a warning naming the\n"
	"        others, when they differ; --ext EXT chooses, --ext '' none); a\n"
	"        file of another kind keeps its own by id (cats/4.jpg: 4.jpg).\n"
	"        --label-from-parent FIELD adds an i64 label per record from its\n"
	"        class directory, the file's immediate parent (SRC/train/cat/x.png:\n"
	"        cat, as torchvision's ImageFolder does); --label-from-top FIELD\n"
	"        takes the first directory under SRC instead (SRC/cat/2024/x.png:\n"
	"        cat).\n"
	"        Classes are numbered 0.. in sorted order of their names, which\n"
	"        meta.json keeps under attrs.classes.FIELD. Every directory (SRC\n"
	"        itself, empty ones), symbolic link, FIFO, socket and device is\n"
	"        kept beside the records, with its mode, owner and times (a\n"
	"        device its number), never a record: a link as its target's text,\n"
	"        nothing read through it (a link to /etc/shadow stays a link), a\n"
	"        FIFO or device never opened; zr export dir and the mount's tree/\n"
	"        give them back. A file of several names (hard links) is one\n"
	"        record, at its first name; the others are kept as hard links to\n"
	"        it (not with a label option or --follow-links). With\n"
	"        --follow-links a link to a file is that file; other links stay\n"
	"        links. With --no-names (no tree to keep them in) links, FIFOs,\n"
	"        sockets and devices are skipped, counted in a warning\n"
	"        (--follow-links: links to files followed). Names\n"
	"        starting with a dot are files and directories like the others, as\n"
	"        rsync -a copies them (.gitignore, .git); --no-hidden skips them\n"
	"        (.DS_Store, ._x in an image folder: with a label option such files\n"
	"        are counted in a warning that names this option).\n"
	"        A file at the top of SRC is in no class: skipped with a warning.\n"
	"  npy   the rows of each array, in order; dtype and row shape are kept, so\n"
	"        the mount's FIELD.npy reproduces the array.\n"
	"  flat  consecutive records of BYTES bytes (u8 of that shape); the file's\n"
	"        size must be a multiple of BYTES.\n"
	"  tar   WebDataset shards: members KEY.EXT that share a KEY (and follow each\n"
	"        other) form one record, each EXT a field of that name (dtype\n"
	"        bytes); a member a sample lacks is a missing value. Samples in the\n"
	"        order of the shards given, then of their members. .cls members\n"
	"        (a class as decimal text) make an i64 field cls when every one\n"
	"        is one (else bytes, with a warning). Members not named KEY.EXT\n"
	"        (a README) and hard links are skipped, with a warning, which\n"
	"        also says when a key's members are split by other keys' (each run\n"
	"        becomes a record). A leading ./ (tar -C DIR .) is no part of a\n"
	"        name. A sparse file (tar --sparse, in any of GNU tar's formats) is\n"
	"        a value with its zeros, left holes in the dataset; a damaged map\n"
	"        fails the import. Directory, symbolic link, FIFO and device\n"
	"        members are kept beside the records, as dir keeps them (the last\n"
	"        of a path). A shard named *.gz or *.tgz is gunzipped, and -\n"
	"        reads one from standard input (compressed or not), into an\n"
	"        unlinked file in $TMPDIR (default /var/tmp) for as long as the\n"
	"        import runs.\n"
	"\n"
	"Original names: dir and tar keep each record's name in a field 'name'\n"
	"(bytes, ext txt; --names FIELD names it, --no-names leaves it out): a\n"
	"file's path under SRC (train/cat/x.png), a sample's KEY with its prefix\n"
	"(train/sample000000). zr find DS NAME gives a record's id, zr export\n"
	"dir and tar write the records back under these names, and the mount\n"
	"shows them as name/ID.txt.\n"
	"\n"
	"  --compress raw|flate  how the field is stored (default raw)\n"
	"  --chunk-size N        records per chunk file (default 65536)\n"
	"  --writers N           parallel writer threads, 1..4 (default 4)\n"
	"\n"
	"A progress line (records/s, MB/s, ETA) is shown on a terminal. On any\n"
	"error nothing is committed and DEST is removed: it is left as it was.\n"
	"While it runs, DEST/import.lock says so (and a second import into DEST\n"
	"is refused); an import that was killed leaves it, and the next import\n"
	"into DEST starts over by itself.\n";

/* ---- the command ---- */

static const struct source {
	const char *kind;
	int (*plan)(struct import *im);
	const char *args;     /* the positional arguments, for messages */
	bool many;            /* takes several inputs */
} sources[] = {
	{"dir", plan_dir, "SRC DEST", false},
	{"npy", plan_npy, "FILE.npy... DEST", true},
	{"flat", plan_flat, "FILE DEST --record-size BYTES", false},
	{"tar", plan_tar, "SHARD.tar... DEST", true},
};

/* Whether this kind of import has original names to keep. */
static bool names_kind(const struct import *im)
{
	return im->src->plan == plan_dir || im->src->plan == plan_tar;
}

enum {
	O_FIELD = 256, O_PARENT, O_TOP, O_NAMES, O_NO_NAMES, O_EXT, O_COMPRESS, O_CHUNK,
	O_WRITERS, O_RECORD_SIZE, O_LINKS, O_HIDDEN, O_NO_HIDDEN
};

/* Whether this kind of import takes option @c. */
static bool takes(const struct import *im, int c)
{
	switch (c) {
	case O_PARENT: case O_TOP: case O_EXT: case O_LINKS: case O_HIDDEN: case O_NO_HIDDEN:
		return im->src->plan == plan_dir;
	case O_NAMES: case O_NO_NAMES:
		return names_kind(im);
	case O_RECORD_SIZE:
		return im->src->plan == plan_flat;
	default:
		return true;
	}
}

/* Option @c's value @val into im->o: 0, or -1 (said). */
static int take_option(struct import *im, int c, const char *val)
{
	struct opts *o = &im->o;

	switch (c) {
	case O_FIELD: o->field = val; break;
	case O_PARENT: case O_TOP:
		o->label_field = val;
		o->label_top = c == O_TOP;
		break;
	case O_NAMES: o->names = val; break;
	case O_NO_NAMES: o->names = NULL; break;
	case O_LINKS: o->follow_links = true; break;
	case O_HIDDEN: case O_NO_HIDDEN: o->hidden = c == O_HIDDEN; break;
	case O_EXT:
		if (val[0] && (strlen(val) > ZR_EXT_MAX || zr_name_check(val) < 0)) {
			zr_warn("import: --ext %s: not an extension (%s)", val,
				strlen(val) > ZR_EXT_MAX ? "too long" : zr_errmsg(NULL));
			return -1;
		}
		o->ext = val;
		break;
	case O_COMPRESS:
		if (zr_compress_parse(val, &o->compress) < 0) {
			zr_warn("import: --compress: %s", zr_errmsg(NULL));
			return -1;
		}
		break;
	case O_CHUNK: return parse_u64(val, 1, UINT32_MAX, "--chunk-size", &o->chunk_size);
	case O_WRITERS: return parse_u64(val, 1, 4, "--writers", &o->writers);
	case O_RECORD_SIZE:
		return parse_size(val, ZR_RECORD_MAX, "--record-size", &o->record_size) < 0 ||
				       o->record_size == 0
			       ? -1
			       : 0;
	}
	return 0;
}

/* The options and positional arguments after KIND: -1 when they are good,
 * else the exit status (the message printed). */
static int parse_args(struct import *im, int argc, char **argv)
{
	static const struct option opts[] = {
		{"field", required_argument, 0, O_FIELD},
		{"label-from-parent", required_argument, 0, O_PARENT},
		{"label-from-top", required_argument, 0, O_TOP},
		{"names", required_argument, 0, O_NAMES},
		{"no-names", no_argument, 0, O_NO_NAMES},
		{"ext", required_argument, 0, O_EXT},
		{"compress", required_argument, 0, O_COMPRESS},
		{"chunk-size", required_argument, 0, O_CHUNK},
		{"writers", required_argument, 0, O_WRITERS},
		{"record-size", required_argument, 0, O_RECORD_SIZE},
		{"follow-links", no_argument, 0, O_LINKS},
		{"hidden", no_argument, 0, O_HIDDEN}, /* the default, still taken */
		{"no-hidden", no_argument, 0, O_NO_HIDDEN},
		ZR_OPT_HELP, ZR_OPT_END};
	struct opts *o = &im->o;
	const char *kind = im->src->kind;
	int c;

	optind = 2; /* after KIND */
	while ((c = zr_getopt(argc, argv, "h", opts, "import")) != -1) {
		if (c == 'h' || c == '?')
			return c == 'h' ? (fputs(help, stdout), 0) : EXIT_USAGE;
		if (!takes(im, c)) {
			const struct option *x = opts;
			while (x->val != c)
				x++;
			zr_warn("import %s: option '--%s' is not for %s sources (see 'zr import --help')",
				kind, x->name, kind);
			return EXIT_USAGE;
		}
		if (take_option(im, c, optarg) < 0)
			return EXIT_USAGE;
	}
	for (; optind < argc; optind++) {
		if (im->npos == (int)(sizeof im->pos / sizeof *im->pos)) {
			zr_warn("import: too many files");
			return EXIT_USAGE;
		}
		im->pos[im->npos++] = argv[optind];
	}
	if (im->npos < 2 || (!im->src->many && im->npos != 2) ||
	    (im->src->plan == plan_flat && o->record_size == 0)) {
		zr_warn("import %s: expected %s (see 'zr import --help')", kind, im->src->args);
		return EXIT_USAGE;
	}
	if (zr_name_check(o->field) < 0 || (o->label_field && zr_name_check(o->label_field) < 0) ||
	    (o->names && zr_name_check(o->names) < 0)) {
		zr_warn("import: %s", zr_errmsg(NULL));
		return EXIT_USAGE;
	}
	if (o->label_field && strcmp(o->label_field, o->field) == 0) {
		zr_warn("import: the label field needs a name of its own");
		return EXIT_USAGE;
	}
	return -1;
}

/* The dataset's attrs, kept in meta.json: {"classes": {"FIELD": ["a",
 * "b", ...]}} with labels, the class names; {"names": {"field": F, "kind":
 * "path"|"key"}} with names (a file's path under SRC, "files" naming the
 * field that holds the files; a WebDataset key, to which the member's
 * extension is added: zr_names). NULL if out of memory. */
static char *import_attrs(const struct import *im)
{
	json_t *root = json_object(), *v;
	char *text = NULL;

	if (root && im->o.label_field) {
		json_t *classes = json_array();
		for (size_t i = 0; classes && i < im->classes.n; i++)
			if (json_array_append_new(classes, json_string(im->classes.v[i])) < 0) {
				json_decref(classes);
				classes = NULL;
			}
		if (!classes || !(v = json_pack("{s:o}", im->o.label_field, classes)) ||
		    json_object_set_new(root, "classes", v) < 0)
			goto out;
	}
	if (root && im->p.names &&
	    (!(v = im->src->plan == plan_dir
			   ? json_pack("{s:s,s:s,s:s}", "field", im->o.names, "kind", "path",
				       "files", im->o.field)
			   : json_pack("{s:s,s:s}", "field", im->o.names, "kind", "key")) ||
	     json_object_set_new(root, "names", v) < 0 ||
	     (im->p.mtimes && json_object_set_new(v, "mtime", json_string(MTIME_FIELD)) < 0) ||
	     (im->p.modes && json_object_set_new(v, "mode", json_string(MODE_FIELD)) < 0) ||
	     (im->p.atimes && (json_object_set_new(v, "atime", json_string(ATIME_FIELD)) < 0 ||
			       json_object_set_new(v, "ctime", json_string(CTIME_FIELD)) < 0)) ||
	     (im->p.owners && (json_object_set_new(v, "uid", json_string(UID_FIELD)) < 0 ||
			       json_object_set_new(v, "gid", json_string(GID_FIELD)) < 0)) ||
	     /* the label the paths give, kept so by a mount writing in tree/ */
	     (im->o.label_field && im->src->plan == plan_dir &&
	      json_object_set_new(v, "label",
				  json_pack("{s:s,s:s}", "field", im->o.label_field, "from",
					    im->o.label_top ? "top" : "parent")) < 0)))
		goto out;
	text = root ? json_dumps(root, JSON_COMPACT) : NULL;
out:
	json_decref(root);
	return text;
}

/* Each record's original name, as the field im->o.names after the others:
 * a file's path under SRC, a sample's KEY. 0, or -1 (said why). */
static int plan_names(struct import *im)
{
	struct plan *p = &im->p;
	size_t skip = strlen(im->pos[0]) + 1;

	if (!im->o.names || !names_kind(im))
		return 0;
	for (unsigned f = 0; f < im->nf; f++)
		if (strcmp(im->f[f].name, im->o.names) == 0) {
			zr_warn("import: a field '%s' holds the records already: --names FIELD keeps "
				"the original names in another field, --no-names drops them",
				im->o.names);
			return -1;
		}
	if (im->nf == ZR_FIELDS_MAX) {
		zr_warn("import: no field left for the original names: --no-names drops them");
		return -1;
	}
	if (!(p->names = malloc((p->n ? p->n : 1) * sizeof *p->names))) {
		zr_warn("import: out of memory");
		return -1;
	}
	uint64_t unsafe = 0;
	const char *first = NULL;
	for (uint64_t i = 0; i < p->n; i++) {
		p->names[i] = im->src->plan == plan_dir ? im->files.v[i] + skip : im->t.key_names.v[i];
		if (!zr_name_safe(p->names[i], strlen(p->names[i])) && unsafe++ == 0)
			first = p->names[i];
	}
	/* a key from a tar may be anything (../x, /etc/x): kept as a name,
	 * it makes no file where the tree is written */
	if (unsafe)
		zr_warn("import: %llu key%s not a relative path below a directory (the first: '%s'): "
			"kept as %s, but tree/ and zr export dir and tar leave %s out",
			(unsigned long long)unsafe, unsafe == 1 ? " is" : "s are", first,
			unsafe == 1 ? "a name" : "names", unsafe == 1 ? "its record" : "their records");
	im->f[im->nf++] = (zr_field_spec){.name = im->o.names, .dtype = ZR_BYTES, .ext = "txt"};
	/* and the files' times, so that the tree shows them (rsync -a then finds
	 * nothing to do): unless a field has the name, or none is left */
	bool taken = im->nf == ZR_FIELDS_MAX || !im->mtimes;
	for (unsigned f = 0; !taken && f < im->nf; f++)
		taken = strcmp(im->f[f].name, MTIME_FIELD) == 0;
	if (!taken) {
		p->mtimes = im->mtimes;
		p->mtime_width = im->mtime_width;
		im->f[im->nf] = (zr_field_spec){.name = MTIME_FIELD, .dtype = ZR_I64, .fixed = 1};
		if (im->mtime_width > 1) { /* one per field, this one's included */
			assert(im->mtime_width == im->nf + 1);
			im->f[im->nf].ndim = 1;
			im->f[im->nf].shape[0] = im->mtime_width;
		}
		im->nf++;
	}
	/* and their modes (permission bits: git status, a script's x bit) */
	taken = taken || im->nf == ZR_FIELDS_MAX || !im->modes;
	for (unsigned f = 0; !taken && f < im->nf; f++)
		taken = strcmp(im->f[f].name, MODE_FIELD) == 0;
	if (!taken) {
		p->modes = im->modes;
		im->f[im->nf++] = (zr_field_spec){.name = MODE_FIELD, .dtype = ZR_U32, .fixed = 1};
	}
	/* and their access times, and the change times of the copies the
	 * dataset holds: the import's (touch -a, make, git's index) */
	taken = taken || im->nf + 2 > ZR_FIELDS_MAX || !im->atimes;
	for (unsigned f = 0; !taken && f < im->nf; f++)
		taken = strcmp(im->f[f].name, ATIME_FIELD) == 0 ||
			strcmp(im->f[f].name, CTIME_FIELD) == 0;
	if (!taken) {
		p->atimes = im->atimes;
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		p->ctime = zr_time_ns(now);
		im->f[im->nf++] = (zr_field_spec){.name = ATIME_FIELD, .dtype = ZR_I64, .fixed = 1};
		im->f[im->nf++] = (zr_field_spec){.name = CTIME_FIELD, .dtype = ZR_I64, .fixed = 1};
	}
	/* and their owners and groups (rsync -a, tar and cp -a keep them for root) */
	taken = taken || im->nf + 2 > ZR_FIELDS_MAX || !im->owners;
	for (unsigned f = 0; !taken && f < im->nf; f++)
		taken = strcmp(im->f[f].name, UID_FIELD) == 0 ||
			strcmp(im->f[f].name, GID_FIELD) == 0;
	if (!taken) {
		p->owners = im->owners;
		im->f[im->nf++] = (zr_field_spec){.name = UID_FIELD, .dtype = ZR_U32, .fixed = 1};
		im->f[im->nf++] = (zr_field_spec){.name = GID_FIELD, .dtype = ZR_U32, .fixed = 1};
	}
	return 0;
}

/* ---- DEST ----
 *
 * An import claims DEST with DEST/import.lock (ZR_IMPORT_LOCK), made in an
 * empty directory before anything else and locked for as long as the
 * import runs; it goes once every record is committed, and last when a
 * failed import removes what it made. So a killed import leaves DEST
 * missing, empty, or holding an unlocked import.lock: the next import
 * into DEST then clears what the killed one made and starts over. */

/* Whether @name (in chunk/ if @in_chunk) is a file an import makes. */
static bool made_by_import(const char *name, bool in_chunk)
{
	static const char *const fixed[] = {"meta.json", "meta.json.tmp", "readers", "writer",
					    "changes", "changes.tmp", "journal"};
	size_t n = strlen(name);

	if (in_chunk)
		return n > 3 && strcmp(name + n - 3, ".zr") == 0;
	for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
		if (strcmp(name, fixed[i]) == 0)
			return true;
	return strncmp(name, "journal.", 8) == 0 || strncmp(name, "tree.", 5) == 0 ||
	       (n > 7 && strcmp(name + n - 7, ".offset") == 0) ||
	       (n > 11 && strcmp(name + n - 11, ".offset.new") == 0);
}

/* Remove what an import made in the directory @dfd (chunk/ and its
 * chunks included), but not its lock: 0, or -1 with the reason in @err
 * (an entry no import makes is left, and named). */
static int clear_made(int dfd, bool in_chunk, char *err, size_t errlen)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int rc = 0;

	if (!d) {
		snprintf(err, errlen, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (rc == 0 && (de = readdir(d))) {
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
		    (!in_chunk && strcmp(name, ZR_IMPORT_LOCK) == 0))
			continue;
		if (!in_chunk && strcmp(name, "chunk") == 0) {
			int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			rc = cfd < 0 ? -1 : clear_made(cfd, true, err, errlen);
			if (cfd >= 0)
				close(cfd);
			if (cfd < 0)
				snprintf(err, errlen, "chunk: %s", strerror(errno));
			else if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
				rc = -1, snprintf(err, errlen, "chunk: %s", strerror(errno));
		} else if (!made_by_import(name, in_chunk)) {
			snprintf(err, errlen, "it also holds %s%s, which no import makes",
				 in_chunk ? "chunk/" : "", name);
			rc = -1;
		} else if (unlinkat(dfd, name, 0) < 0) {
			snprintf(err, errlen, "%s%s: %s", in_chunk ? "chunk/" : "", name,
				 strerror(errno));
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}

/* Claim @dest for an import: its directory in @dfd and its lock in
 * @lockfd; 0, or -1 (the message printed). */
static int claim_dest(const char *dest, int *dfd, int *lockfd)
{
	char err[PATH_MAX + 64];
	struct dirent *de;
	bool empty = true, found;
	struct stat st;
	DIR *d;

	*dfd = *lockfd = -1;
	if (mkdir(dest, 0755) < 0 && errno != EEXIST) {
		zr_warn("import: %s: cannot create: %s", dest, strerror(errno));
		return -1;
	}
	if ((*dfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    !(d = fdopendir(dup(*dfd)))) {
		zr_warn("import: %s: %s", dest, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    strcmp(de->d_name, ZR_IMPORT_LOCK) != 0)
			empty = false;
	closedir(d);
	found = fstatat(*dfd, ZR_IMPORT_LOCK, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (!found && !empty) {
		zr_warn("import: %s: exists and is not empty", dest);
		return -1;
	}
	*lockfd = openat(*dfd, ZR_IMPORT_LOCK,
			 O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (found ? 0 : O_CREAT | O_EXCL),
			 0644);
	if (*lockfd < 0 && errno == EEXIST) {
		zr_warn("import: %s: another import into it has just begun", dest);
		return -1;
	}
	if (*lockfd < 0 || fstat(*lockfd, &st) < 0 || !S_ISREG(st.st_mode)) {
		zr_warn("import: %s/%s: %s", dest, ZR_IMPORT_LOCK,
			*lockfd < 0 ? strerror(errno) : "not a regular file");
		return -1;
	}
	/* an import killed a moment ago may still hold the lock while the
	 * kernel finishes tearing it down: wait a little (at most 1 s) before
	 * calling it a running import */
	int locked, tries = 0;
	while ((locked = flock(*lockfd, LOCK_EX | LOCK_NB)) < 0 && errno == EWOULDBLOCK &&
	       ++tries < 100)
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	if (locked < 0) {
		zr_warn("import: %s: %s", dest,
			errno == EWOULDBLOCK ? "another import into it is running"
					     : strerror(errno));
		return -1;
	}
	if (found && !empty) {
		zr_warn("import: %s: an import into it did not finish (killed?): starting over",
			dest);
		if (clear_made(*dfd, false, err, sizeof err) < 0) {
			zr_warn("import: %s: %s: remove it (rm -r %s) and import again", dest, err,
				dest);
			return -1;
		}
	}
	return 0;
}

/* The import's end: on @success the lock goes (the dataset is whole),
 * else what it made goes, the lock last, and DEST too. */
static void release_dest(const char *dest, int dfd, int lockfd, bool success)
{
	char err[PATH_MAX + 64];

	if (dfd >= 0 && lockfd >= 0) {
		if (success || clear_made(dfd, false, err, sizeof err) == 0) {
			unlinkat(dfd, ZR_IMPORT_LOCK, 0);
			fsync(dfd);
		}
		if (!success)
			rmdir(dest);
	}
	if (lockfd >= 0)
		close(lockfd);
	if (dfd >= 0)
		close(dfd);
}

/* Create DEST with the planned fields and write every record: the exit
 * status, DEST removed again on failure. */
static int write_dataset(struct import *im, const char *dest, const char *attrs)
{
	zr_dataset *ds = NULL;
	uint64_t first;
	int dfd, lockfd, rc;

	if (claim_dest(dest, &dfd, &lockfd) < 0) {
		/* nothing goes: DEST is another's, or says what to do */
		release_dest(dest, -1, lockfd, false);
		if (dfd >= 0)
			close(dfd);
		return 1;
	}
	rc = zr_create(dest, im->f, im->nf,
		       &(zr_create_opts){.chunk_size = (uint32_t)im->o.chunk_size, .attrs = attrs});
	if (rc < 0) {
		zr_warn("import: %s", zr_errmsg(NULL));
		release_dest(dest, dfd, lockfd, false);
		return rc == ZR_EINVAL_SPEC ? EXIT_USAGE : 1;
	}
	if ((rc = zr_open_writer(&ds, dest, ZR_RDWR, "import")) < 0 || (rc = zr_reserve(ds, im->p.n, &first)) < 0) {
		zr_warn("import: %s", zr_errmsg(ds));
	} else {
		write_all_records(&im->p, ds, first, (unsigned)im->o.writers);
		if (atomic_load(&im->p.failed))
			zr_warn("import: %s", im->p.err);
		else if ((rc = zr_tree_set(ds, im->tree.v, im->tree.n)) < 0 ||
			 (rc = zr_commit(ds)) < 0)
			zr_warn("import: %s", zr_errmsg(ds));
	}
	zr_close(ds); /* without a commit, nothing of this import stays */
	if (rc < 0 || atomic_load(&im->p.failed)) {
		release_dest(dest, dfd, lockfd, false);
		return 1;
	}
	release_dest(dest, dfd, lockfd, true);
	printf("%s: %llu records, %.1f MB\n", dest, (unsigned long long)im->p.n,
	       (double)im->p.bytes / 1e6);
	return 0;
}

int cmd_import(int argc, char **argv)
{
	struct import *im;
	char *attrs = NULL;
	int status;

	if (argc < 2 || is_help(argv[1])) {
		fputs(help, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (!(im = calloc(1, sizeof *im))) {
		zr_warn("import: out of memory");
		return 1;
	}
	for (size_t i = 0; i < sizeof sources / sizeof *sources; i++)
		if (strcmp(argv[1], sources[i].kind) == 0)
			im->src = &sources[i];
	im->o = (struct opts){.field = "data", .names = "name", .hidden = true, .compress = ZR_RAW,
			     .writers = 4};
	if (!im->src) {
		zr_warn("import: unknown source kind '%s' (dir, npy, flat, tar; see 'zr import --help')",
			argv[1]);
		status = EXIT_USAGE;
	} else {
		status = parse_args(im, argc, argv);
	}
	if (status < 0) {
		pthread_mutex_init(&im->p.err_lock, NULL);
		im->p.width = im->nf = 1;
		im->f[0] = (zr_field_spec){.name = im->o.field, .dtype = ZR_BYTES,
					   .compress = im->o.compress};
		status = 1;
		if (im->o.label_field && !(im->p.labels = malloc(sizeof *im->p.labels)))
			zr_warn("import: out of memory");
		else if (im->src->plan(im) < 0) /* everything checked before DEST is touched */
			zr_warn("import: %s", im->p.err[0] ? im->p.err : "out of memory");
		else {
			if (im->o.label_field)
				im->f[im->nf++] = (zr_field_spec){.name = im->o.label_field,
								  .dtype = ZR_I64, .fixed = 1};
			if (plan_names(im) < 0)
				;
			else if (!(attrs = import_attrs(im)))
				zr_warn("import: out of memory");
			else
				status = write_dataset(im, im->pos[im->npos - 1],
						       strcmp(attrs, "{}") ? attrs : NULL);
		}
		pthread_mutex_destroy(&im->p.err_lock);
	}
	strs_free(&im->files);
	strs_free(&im->classes);
	tree_list_free(&im->tree);
	zr_tar_free(&im->t);
	strs_free(&im->unpacked);
	for (int i = 0; i < im->nunpacked; i++)
		close(im->unpacked_fd[i]);
	free(im->p.srcs);
	free(im->p.labels);
	free(im->p.unlabelled);
	free(im->p.names);
	free(im->mtimes);
	free(im->modes);
	free(im->owners);
	free(im->atimes);
	free(attrs);
	free(im);
	return status;
}
