/* layer.c — tar ⇄ directory for image layers (libarchive).
 *
 * Extraction never follows a symlink and never writes outside the target:
 * every entry's parent is reached one component at a time with
 * O_NOFOLLOW|O_DIRECTORY from the target's own descriptor, so a symlink an
 * earlier entry placed cannot redirect a later write, and names with ".."
 * or a leading "/" are refused before anything is touched. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "archivelib.h"
#include "layer.h"
#include "util.h"

#define IO_BUF (1 << 20)

/* ---- sha256 ------------------------------------------------------------- */

/* libcrypto's SHA-256, through digest.c (loaded on first use). */
static lc_sha256_t *sha_new(void)
{
	return lc_sha256_new();
}

static void sha_end(lc_sha256_t *c, char *hex)
{
	unsigned char md[32];
	lc_sha256_final(c, md);
	lc_sha256_hex(md, hex);
}

void lc_sha256_buf(const void *buf, size_t len, char *hex)
{
	lc_sha256_t *c = sha_new();
	lc_sha256_update(c, buf, len);
	sha_end(c, hex);
}

int lc_sha256_file(const char *path, char *hex, uint64_t *size, lc_error_t **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno,
				    "cannot open %s", path);
	_cleanup_free_ char *buf = malloc(IO_BUF);
	if (!buf)
		abort();
	lc_sha256_t *c = sha_new();
	uint64_t total = 0;
	for (;;) {
		ssize_t r = read(fd, buf, IO_BUF);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			sha_end(c, hex);
			return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot read %s", path);
		}
		if (r == 0)
			break;
		lc_sha256_update(c, buf, (size_t)r);
		total += (uint64_t)r;
	}
	sha_end(c, hex);
	if (size)
		*size = total;
	return 0;
}

/* ---- paths -------------------------------------------------------------- */

/* Normalize a tar entry name: drop "./", "//" and a trailing "/"; refuse
 * absolute names and "..".  *out is "" for the archive's root. */
static int clean_path(const char *name, const char *what, char **out, lc_error_t **err)
{
	if (!name || !*name)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "layer entry with an empty name");
	if (name[0] == '/')
		return lc_error_set(err, LC_EXIT_INVALID, 0, "layer entry '%s': %s is an absolute path", what, name);
	char *res = lc_xmalloc0(strlen(name) + 1);
	size_t len = 0;
	const char *p = name;
	while (*p) {
		const char *s = strchr(p, '/');
		size_t n = s ? (size_t)(s - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			free(res);
			return lc_error_set(err, LC_EXIT_INVALID, 0,
					    "layer entry '%s': %s contains '..'", what, name);
		}
		if (n > 0 && !(n == 1 && p[0] == '.')) {
			if (len)
				res[len++] = '/';
			memcpy(res + len, p, n);
			len += n;
		}
		p += n;
		if (*p == '/')
			p++;
	}
	res[len] = '\0';
	*out = res;
	return 0;
}

/* Open directory rel ("" = root) below rootfd without following any
 * symlink; create missing components (0755, root) when create. */
static int open_beneath(int rootfd, const char *rel, bool create, const char *entry, lc_error_t **err)
{
	int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot open the target", entry);
	_cleanup_free_ char *copy = strdup(rel);
	char *save = NULL;
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && create) {
			if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST) {
				int e = errno;
				close(fd);
				return lc_error_set(err, LC_EXIT_RUNTIME, e, "layer entry '%s': cannot create %s", entry, c);
			}
			nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		int e = errno;
		close(fd);
		if (nfd < 0) {
			if (e == ELOOP || e == ENOTDIR)
				return lc_error_set(err, LC_EXIT_INVALID, 0,
						    "layer entry '%s': '%s' on its path is a symlink or not a directory",
						    entry, c);
			return lc_error_set(err, e == ENOENT ? LC_EXIT_INVALID : LC_EXIT_RUNTIME, e,
					    "layer entry '%s': cannot open %s", entry, c);
		}
		fd = nfd;
	}
	return fd;
}

/* Split "a/b/c" into "a/b" and "c" (in place). */
static void split_path(char *rel, const char **dir, const char **base)
{
	char *s = strrchr(rel, '/');
	if (s) {
		*s = '\0';
		*dir = rel;
		*base = s + 1;
	} else {
		*dir = "";
		*base = rel;
	}
}

/* Would symlink target, placed at rel, resolve outside the tree?  Absolute
 * targets are read against the tree's root, as the sandbox sees them. */
static bool link_escapes(const char *rel, const char *target)
{
	long depth = 0;
	if (target[0] != '/')
		for (const char *p = rel; *p; p++)
			depth += *p == '/';
	_cleanup_free_ char *copy = strdup(target);
	char *save = NULL;
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			if (--depth < 0)
				return true;
		} else {
			depth++;
		}
	}
	return false;
}

static bool xattr_is_overlay(const char *name)
{
	return !strncmp(name, "trusted.overlay.", 16) || !strncmp(name, "user.overlay.", 13);
}

/* Remove whatever non-directory sits at base (a later entry replaces it). */
static int clear_slot(int pfd, const char *base, bool want_dir, const char *entry, bool *is_dir,
		      lc_error_t **err)
{
	struct stat st;
	*is_dir = false;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (S_ISDIR(st.st_mode)) {
		if (want_dir) {
			*is_dir = true;
			return 0;
		}
		if (unlinkat(pfd, base, AT_REMOVEDIR) < 0)
			return lc_error_set(err, LC_EXIT_INVALID, errno,
					    "layer entry '%s' replaces a directory", entry);
		return 0;
	}
	if (unlinkat(pfd, base, 0) < 0 && errno != ENOENT)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot replace it", entry);
	return 0;
}

/* ---- extraction --------------------------------------------------------- */

struct reader {
	int fd;
	lc_sha256_t *md;
	char buf[1 << 16];
};

static la_ssize_t reader_read(struct archive *a, void *cd, const void **out)
{
	struct reader *r = cd;
	ssize_t n;
	do
		n = read(r->fd, r->buf, sizeof(r->buf));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		archive_set_error(a, errno, "read error");
		return -1;
	}
	lc_sha256_update(r->md, r->buf, (size_t)n);
	*out = r->buf;
	return n;
}

struct dir_time {
	char *rel;
	struct timespec mtime;
};

struct extract {
	struct archive *a;
	int rootfd;
	unsigned flags;
	struct dir_time *dirs;
	size_t n_dirs;
};

static int set_xattrs(struct extract *x, struct archive_entry *e, int fd, const char *entry, lc_error_t **err)
{
	const char *name;
	const void *value;
	size_t size;
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		if (xattr_is_overlay(name))
			continue;
		bool trusted = x->flags & LC_LAYER_TRUSTED;
		if (!strcmp(name, "security.capability") && !trusted)
			return lc_error_set(err, LC_EXIT_INVALID, 0,
					    "layer entry '%s' carries file capabilities (import with --trusted to allow)",
					    entry);
		if (strncmp(name, "user.", 5) && !trusted)
			continue;
		if (fsetxattr(fd, name, value, size, 0) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot set xattr %s",
					    entry, name);
	}
	return 0;
}

static void entry_times(struct archive_entry *e, struct timespec ts[2])
{
	ts[1].tv_sec = archive_entry_mtime(e);
	ts[1].tv_nsec = archive_entry_mtime_nsec(e);
	if (archive_entry_atime_is_set(e)) {
		ts[0].tv_sec = archive_entry_atime(e);
		ts[0].tv_nsec = archive_entry_atime_nsec(e);
	} else {
		ts[0] = ts[1];
	}
}

/* Owner, mode, xattrs (and times for non-directories) through an fd. */
static int apply_meta(struct extract *x, struct archive_entry *e, int fd, bool times, const char *entry,
		      lc_error_t **err)
{
	if (fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0)
		return lc_error_set(err, errno == EPERM ? LC_EXIT_PERM : LC_EXIT_RUNTIME, errno,
				    "layer entry '%s': cannot set its owner", entry);
	if (fchmod(fd, archive_entry_perm(e) & 07777) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot set its mode", entry);
	if (set_xattrs(x, e, fd, entry, err) < 0)
		return -1;
	if (times) {
		struct timespec ts[2];
		entry_times(e, ts);
		if (futimens(fd, ts) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot set its times", entry);
	}
	return 0;
}

static int write_data(struct extract *x, struct archive_entry *e, int fd, const char *entry, lc_error_t **err)
{
	const void *buf;
	size_t size;
	la_int64_t off;
	for (;;) {
		int r = archive_read_data_block(x->a, &buf, &size, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "layer entry '%s': %s", entry,
					    archive_error_string(x->a));
		const char *p = buf;
		while (size > 0) {
			ssize_t w = pwrite(fd, p, size, off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot write", entry);
			p += w;
			off += w;
			size -= (size_t)w;
		}
	}
	if (archive_entry_size_is_set(e) && ftruncate(fd, archive_entry_size(e)) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot set its size", entry);
	return 0;
}

static int extract_entry(struct extract *x, struct archive_entry *e, lc_error_t **err)
{
	const char *name = archive_entry_pathname(e);
	_cleanup_free_ char *rel = NULL;
	if (clean_path(name, name ? name : "", &rel, err) < 0)
		return -1;
	mode_t type = archive_entry_filetype(e);
	mode_t perm = archive_entry_perm(e) & 07777;
	bool trusted = x->flags & LC_LAYER_TRUSTED;
	if (!*rel) {
		if (type == AE_IFDIR)
			return 0; /* the layer's root: the target keeps its own */
		return lc_error_set(err, LC_EXIT_INVALID, 0, "layer entry '%s' is not a directory but names the root",
				    name);
	}
	_cleanup_free_ char *full = strdup(rel);
	const char *dir, *base;
	split_path(rel, &dir, &base);

	/* OCI whiteouts become overlay whiteouts. */
	if (!strncmp(base, ".wh.", 4)) {
		_cleanup_close_ int pfd = open_beneath(x->rootfd, dir, true, name, err);
		if (pfd < 0)
			return -1;
		if (!strcmp(base, ".wh..wh..opq")) {
			if (fsetxattr(pfd, "trusted.overlay.opaque", "y", 1, 0) < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno,
						    "layer entry '%s': cannot mark the directory opaque", name);
			return 0;
		}
		const char *victim = base + 4;
		if (!*victim || !strcmp(victim, ".") || !strcmp(victim, ".."))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "layer entry '%s' is a malformed whiteout", name);
		bool is_dir;
		if (clear_slot(pfd, victim, false, name, &is_dir, err) < 0)
			return -1;
		if (mknodat(pfd, victim, S_IFCHR | 0, makedev(0, 0)) < 0)
			return lc_error_set(err, errno == EPERM ? LC_EXIT_PERM : LC_EXIT_RUNTIME, errno,
					    "layer entry '%s': cannot create the whiteout", name);
		return 0;
	}

	const char *hardlink = archive_entry_hardlink(e);
	if (hardlink) {
		_cleanup_free_ char *trel = NULL;
		if (clean_path(hardlink, name, &trel, err) < 0)
			return -1;
		if (!*trel)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "layer entry '%s' is a hardlink to the root", name);
		const char *tdir, *tbase;
		split_path(trel, &tdir, &tbase);
		_cleanup_close_ int tfd = open_beneath(x->rootfd, tdir, false, name, err);
		if (tfd < 0)
			return -1;
		struct stat st;
		if (fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return lc_error_set(err, LC_EXIT_INVALID, errno, "layer entry '%s': hardlink target %s", name,
					    hardlink);
		if (S_ISDIR(st.st_mode))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "layer entry '%s' is a hardlink to a directory",
					    name);
		_cleanup_close_ int pfd = open_beneath(x->rootfd, dir, true, name, err);
		if (pfd < 0)
			return -1;
		bool is_dir;
		if (clear_slot(pfd, base, false, name, &is_dir, err) < 0)
			return -1;
		if (linkat(tfd, tbase, pfd, base, 0) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot link to %s", name,
					    hardlink);
		return 0;
	}

	if ((perm & (S_ISUID | S_ISGID)) && type != AE_IFDIR && !trusted)
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "layer entry '%s' has the setuid/setgid bit (import with --trusted to allow)", name);
	if ((type == AE_IFCHR || type == AE_IFBLK) && !trusted)
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "layer entry '%s' is a device node (import with --trusted to allow)", name);
	if (type == AE_IFSOCK)
		return 0; /* sockets are not content */
	if (type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK && type != AE_IFIFO && type != AE_IFCHR &&
	    type != AE_IFBLK)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "layer entry '%s' has an unknown type", name);
	const char *target = type == AE_IFLNK ? archive_entry_symlink(e) : NULL;
	if (type == AE_IFLNK && (!target || !*target || link_escapes(full, target)))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "layer entry '%s' is a symlink to %s, outside the tree",
				    name, target ? target : "(nothing)");

	_cleanup_close_ int pfd = open_beneath(x->rootfd, dir, true, name, err);
	if (pfd < 0)
		return -1;
	bool is_dir;
	if (clear_slot(pfd, base, type == AE_IFDIR, name, &is_dir, err) < 0)
		return -1;

	if (type == AE_IFDIR) {
		if (!is_dir && mkdirat(pfd, base, 0700) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot create it", name);
		_cleanup_close_ int dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot open it", name);
		if (apply_meta(x, e, dfd, false, name, err) < 0)
			return -1;
		/* Times last: creating children would change them. */
		struct dir_time *nd = realloc(x->dirs, (x->n_dirs + 1) * sizeof(*nd));
		if (!nd)
			abort();
		x->dirs = nd;
		struct timespec ts[2];
		entry_times(e, ts);
		x->dirs[x->n_dirs].rel = lc_steal(full);
		x->dirs[x->n_dirs].mtime = ts[1];
		x->n_dirs++;
		return 0;
	}
	if (type == AE_IFREG) {
		_cleanup_close_ int fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot create it", name);
		if (write_data(x, e, fd, name, err) < 0)
			return -1;
		return apply_meta(x, e, fd, true, name, err);
	}
	/* symlink, fifo, device: no data, metadata by name (never followed) */
	int r;
	if (type == AE_IFLNK)
		r = symlinkat(target, pfd, base);
	else
		r = mknodat(pfd, base, type | perm, archive_entry_rdev(e));
	if (r < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot create it", name);
	if (fchownat(pfd, base, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) < 0)
		return lc_error_set(err, errno == EPERM ? LC_EXIT_PERM : LC_EXIT_RUNTIME, errno,
				    "layer entry '%s': cannot set its owner", name);
	if (type != AE_IFLNK && fchmodat(pfd, base, perm, 0) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot set its mode", name);
	struct timespec ts[2];
	entry_times(e, ts);
	if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "layer entry '%s': cannot set its times", name);
	return 0;
}

static void drain(int fd, lc_sha256_t *md)
{
	char buf[1 << 16];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		lc_sha256_update(md, buf, (size_t)n);
	}
}

int lc_layer_extract(int fd, const char *dir, unsigned flags, char *blob_hex, char *diff_hex, lc_error_t **err)
{
	struct extract x = { .flags = flags, .rootfd = -1 };
	int ret = -1;
	struct reader *rd = lc_xmalloc0(sizeof(*rd));
	rd->fd = fd;
	rd->md = sha_new();
	x.rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (x.rootfd < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", dir);
		goto out;
	}
	x.a = archive_read_new();
	if (!x.a) {
		lc_archivelib_error(err);
		goto out;
	}
	archive_read_support_filter_all(x.a);
	archive_read_support_format_tar(x.a);
	archive_read_support_format_empty(x.a);
	if (archive_read_open(x.a, rd, NULL, reader_read, NULL) != ARCHIVE_OK) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "not a tar archive: %s", archive_error_string(x.a));
		goto out;
	}
	for (;;) {
		struct archive_entry *e;
		int r = archive_read_next_header(x.a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			lc_error_set(err, LC_EXIT_INVALID, 0, "not a valid tar archive: %s",
				     archive_error_string(x.a));
			goto out;
		}
		if (extract_entry(&x, e, err) < 0)
			goto out;
	}
	for (size_t i = 0; i < x.n_dirs; i++) {
		_cleanup_close_ int dfd = open_beneath(x.rootfd, x.dirs[i].rel, false, x.dirs[i].rel, err);
		if (dfd < 0)
			goto out;
		struct timespec ts[2] = { x.dirs[i].mtime, x.dirs[i].mtime };
		futimens(dfd, ts);
	}
	bool plain = archive_filter_count(x.a) <= 1 || archive_filter_code(x.a, 0) == ARCHIVE_FILTER_NONE;
	drain(fd, rd->md);
	char hex[LC_HEX_LEN + 1];
	sha_end(rd->md, hex);
	rd->md = NULL;
	if (blob_hex)
		strcpy(blob_hex, hex);
	if (diff_hex)
		strcpy(diff_hex, plain ? hex : "");
	ret = 0;
out:
	if (x.a)
		archive_read_free(x.a);
	if (rd->md) {
		char tmp[LC_HEX_LEN + 1];
		sha_end(rd->md, tmp);
	}
	free(rd);
	if (x.rootfd >= 0)
		close(x.rootfd);
	for (size_t i = 0; i < x.n_dirs; i++)
		free(x.dirs[i].rel);
	free(x.dirs);
	return ret;
}

int lc_layer_decompress(const char *path, int out_fd, char *hex, uint64_t *size, const char **media_type,
			lc_error_t **err)
{
	struct archive *a = archive_read_new();
	if (!a)
		return lc_archivelib_error(err);
	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	archive_read_support_format_empty(a);
	int ret = -1;
	uint64_t total = 0;
	lc_sha256_t *md = sha_new();
	char *buf = malloc(IO_BUF);
	if (!buf)
		abort();
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		lc_error_set(err, LC_EXIT_NOENT, archive_errno(a), "cannot read %s", path);
		goto out;
	}
	struct archive_entry *e;
	int r = archive_read_next_header(a, &e);
	if (r == ARCHIVE_OK || r == ARCHIVE_WARN) {
		for (;;) {
			la_ssize_t n = archive_read_data(a, buf, IO_BUF);
			if (n < 0) {
				lc_error_set(err, LC_EXIT_INVALID, 0, "cannot decompress %s: %s", path,
					     archive_error_string(a));
				goto out;
			}
			if (n == 0)
				break;
			lc_sha256_update(md, buf, (size_t)n);
			total += (uint64_t)n;
			if (out_fd >= 0 && lc_write_all(out_fd, buf, (size_t)n) < 0) {
				lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot write the decompressed %s", path);
				goto out;
			}
		}
	} else if (r != ARCHIVE_EOF) {
		lc_error_set(err, LC_EXIT_INVALID, 0, "cannot read %s: %s", path, archive_error_string(a));
		goto out;
	}
	if (media_type) {
		int code = archive_filter_count(a) > 1 ? archive_filter_code(a, 0) : ARCHIVE_FILTER_NONE;
		*media_type = code == ARCHIVE_FILTER_NONE   ? "application/vnd.oci.image.layer.v1.tar"
			      : code == ARCHIVE_FILTER_GZIP ? "application/vnd.oci.image.layer.v1.tar+gzip"
			      : code == ARCHIVE_FILTER_ZSTD ? "application/vnd.oci.image.layer.v1.tar+zstd"
							    : NULL;
	}
	ret = 0;
out:
	sha_end(md, hex);
	if (size)
		*size = total;
	free(buf);
	archive_read_free(a);
	return ret;
}

/* ---- writing ------------------------------------------------------------ */

struct writer {
	struct archive *a;
	struct archive_entry_linkresolver *lr;
	lc_sha256_t *md;
	int fd;
	uint64_t size;
	int write_errno;
	uid_t ubase;
	gid_t gbase;
	unsigned count;
	unsigned flags;
	char *buf, *zero;
	const lc_upper_t *uppers;
	size_t n_uppers, cur;
};

static la_ssize_t writer_write(struct archive *a, void *cd, const void *buf, size_t len)
{
	struct writer *w = cd;
	if (lc_write_all(w->fd, buf, len) < 0) {
		w->write_errno = errno;
		archive_set_error(a, errno, "write error");
		return -1;
	}
	lc_sha256_update(w->md, buf, len);
	w->size += len;
	return (la_ssize_t)len;
}

static int archive_fail(struct writer *w, const char *what, lc_error_t **err)
{
	int e = w->write_errno ? w->write_errno : archive_errno(w->a);
	return lc_error_set(err, LC_EXIT_RUNTIME, e > 0 ? e : 0, "cannot write the layer at %s: %s", what,
			    archive_error_string(w->a) ? archive_error_string(w->a) : "error");
}

/* Host path of an upper entry, for messages. */
static char *host_path(struct writer *w, const char *rel)
{
	const char *pre = w->uppers[w->cur].prefix;
	size_t skip = *pre ? strlen(pre) + 1 : 0;
	if (strlen(rel) < skip)
		return strdup(w->uppers[w->cur].dir);
	return lc_strdup_printf("%s/%s", w->uppers[w->cur].dir, rel + skip);
}

/* Host ids back to the sandbox's.  An id outside the sandbox's range (a
 * mount point the runtime made as host root, say) is what the sandbox saw
 * as the overflow id, 65534, and is recorded so. */
static void shift_ids(struct writer *w, struct archive_entry *e, const struct stat *st)
{
	if (w->flags & LC_LAYER_RAW_IDS)
		return;
	bool uid_in = st->st_uid >= w->ubase && st->st_uid - w->ubase < w->count;
	bool gid_in = st->st_gid >= w->gbase && st->st_gid - w->gbase < w->count;
	archive_entry_set_uid(e, uid_in ? st->st_uid - w->ubase : LC_OVERFLOW_ID);
	archive_entry_set_gid(e, gid_in ? st->st_gid - w->gbase : LC_OVERFLOW_ID);
}

/* Copy xattrs (but overlay's own); report opaque markers. */
static int read_xattrs(struct writer *w, int dfd, int fd, const char *name, const char *rel,
		       struct archive_entry *e, bool *opaque, lc_error_t **err)
{
	*opaque = false;
	char proc[64 + 256];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d/%s", dfd, name);
	char list[8192];
	/* through the file's own fd when there is one (cheaper than a path) */
	ssize_t n = fd >= 0 ? flistxattr(fd, list, sizeof(list)) : llistxattr(proc, list, sizeof(list));
	if (n < 0) {
		if (errno == ENOTSUP)
			return 0;
		_cleanup_free_ char *hp = host_path(w, rel);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot list the xattrs of %s", hp);
	}
	for (char *k = list; k < list + n; k += strlen(k) + 1) {
		char val[65536];
		ssize_t vn = fd >= 0 ? fgetxattr(fd, k, val, sizeof(val)) : lgetxattr(proc, k, val, sizeof(val));
		if (vn < 0)
			continue; /* vanished, or not ours to read */
		if (xattr_is_overlay(k)) {
			const char *what = strchr(k, '.') + strlen(".overlay.");
			if (!strcmp(what, "opaque") && vn == 1 && val[0] == 'y') {
				*opaque = true;
			} else if (!strcmp(what, "redirect") || !strcmp(what, "metacopy")) {
				_cleanup_free_ char *hp = host_path(w, rel);
				return lc_error_set(err, LC_EXIT_INVALID, 0,
						    "%s carries overlay %s, which a layer cannot hold "
						    "(mount with redirect_dir=off,metacopy=off)", hp, what);
			}
			continue;
		}
		archive_entry_xattr_add_entry(e, k, val, (size_t)vn);
	}
	return 0;
}

static int write_marker(struct writer *w, const char *dir_rel, const char *name, const struct stat *st,
			lc_error_t **err)
{
	_cleanup_free_ char *path = *dir_rel ? lc_strdup_printf("%s/%s", dir_rel, name) : strdup(name);
	struct archive_entry *m = archive_entry_new();
	if (!m)
		return lc_archivelib_error(err);
	archive_entry_set_pathname(m, path);
	archive_entry_set_filetype(m, AE_IFREG);
	archive_entry_set_perm(m, 0);
	archive_entry_set_size(m, 0);
	archive_entry_set_uid(m, 0);
	archive_entry_set_gid(m, 0);
	archive_entry_set_mtime(m, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	int r = archive_write_header(w->a, m);
	archive_entry_free(m);
	return r < ARCHIVE_WARN ? archive_fail(w, path, err) : 0;
}

/* Sparse map from SEEK_DATA/SEEK_HOLE; false when the file has no holes. */
static bool sparse_map(int fd, off_t size, struct archive_entry *e)
{
	off_t pos = 0;
	bool holes = false;
	while (pos < size) {
		off_t d = lseek(fd, pos, SEEK_DATA);
		if (d < 0) {
			if (errno == ENXIO) /* a hole to the end */
				holes = true;
			else
				return false;
			break;
		}
		off_t h = lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			return false;
		if (h > size)
			h = size;
		if (d > pos)
			holes = true;
		if (h > d)
			archive_entry_sparse_add_entry(e, d, h - d);
		pos = h;
	}
	if (!holes) {
		archive_entry_sparse_clear(e);
		return false;
	}
	/* the last block must reach the end of the file */
	la_int64_t off = 0, len = 0, last_end = 0;
	archive_entry_sparse_reset(e);
	while (archive_entry_sparse_next(e, &off, &len) == ARCHIVE_OK)
		last_end = off + len;
	if (last_end < size)
		archive_entry_sparse_add_entry(e, size, 0);
	return true;
}

static int write_file_data(struct writer *w, int fd, const struct stat *st, struct archive_entry *e,
			   const char *rel, lc_error_t **err)
{
	la_int64_t off = 0, len = 0;
	off_t pos = 0;
	bool sparse = archive_entry_sparse_count(e) > 0;
	if (sparse)
		archive_entry_sparse_reset(e);
	while (pos < st->st_size) {
		off_t data_end = st->st_size;
		if (sparse) {
			if (archive_entry_sparse_next(e, &off, &len) != ARCHIVE_OK)
				off = st->st_size, len = 0;
			/* the hole before this block */
			while (pos < off) {
				size_t n = (size_t)(off - pos) < IO_BUF ? (size_t)(off - pos) : IO_BUF;
				if (archive_write_data(w->a, w->zero, n) < 0)
					return archive_fail(w, rel, err);
				pos += (off_t)n;
			}
			data_end = off + len;
		}
		while (pos < data_end) {
			size_t want = (size_t)(data_end - pos) < IO_BUF ? (size_t)(data_end - pos) : IO_BUF;
			ssize_t r = pread(fd, w->buf, want, pos);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				_cleanup_free_ char *hp = host_path(w, rel);
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read %s", hp);
			}
			if (r == 0)
				return 0; /* shrank while we read: the rest is padded */
			if (archive_write_data(w->a, w->buf, (size_t)r) < 0)
				return archive_fail(w, rel, err);
			pos += r;
		}
		if (sparse && len == 0)
			break;
	}
	return 0;
}

static int emit(struct writer *w, int dfd, const char *name, const char *rel, const struct stat *st,
		lc_error_t **err)
{
	/* A whiteout (0/0 character device) becomes .wh.NAME. */
	if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0)) {
		_cleanup_free_ char *dir_rel = strdup(rel);
		char *s = strrchr(dir_rel, '/');
		if (s)
			*s = '\0';
		else
			dir_rel[0] = '\0';
		_cleanup_free_ char *wh = lc_strdup_printf(".wh.%s", name);
		return write_marker(w, dir_rel, wh, st, err);
	}
	if (S_ISSOCK(st->st_mode))
		return 0;
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return lc_archivelib_error(err);
	int ret = -1;
	_cleanup_close_ int fd = -1;
	archive_entry_copy_stat(e, st);
	archive_entry_set_pathname(e, rel);
	archive_entry_unset_atime(e);
	archive_entry_unset_ctime(e);
	archive_entry_unset_birthtime(e);
	if (!S_ISREG(st->st_mode))
		archive_entry_set_size(e, 0);
	shift_ids(w, e, st);
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) {
		fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (S_ISDIR(st->st_mode) ? O_DIRECTORY : 0));
		if (fd < 0) {
			_cleanup_free_ char *hp = host_path(w, rel);
			lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", hp);
			goto out;
		}
	}
	bool opaque = false;
	if (read_xattrs(w, dfd, fd, name, rel, e, &opaque, err) < 0)
		goto out;
	if (S_ISLNK(st->st_mode)) {
		char target[PATH_MAX + 1];
		ssize_t n = readlinkat(dfd, name, target, PATH_MAX);
		if (n < 0) {
			_cleanup_free_ char *hp = host_path(w, rel);
			lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read the link %s", hp);
			goto out;
		}
		target[n] = '\0';
		archive_entry_copy_symlink(e, target);
	}
	if (S_ISREG(st->st_mode) && (off_t)st->st_blocks * 512 < st->st_size)
		sparse_map(fd, st->st_size, e);
	struct archive_entry *spare = NULL;
	archive_entry_linkify(w->lr, &e, &spare);
	if (spare)
		archive_entry_free(spare); /* only for deferring strategies */
	if (archive_write_header(w->a, e) < ARCHIVE_WARN) {
		archive_fail(w, rel, err);
		goto out;
	}
	if (S_ISREG(st->st_mode) && !archive_entry_hardlink(e) && archive_entry_size(e) > 0 &&
	    write_file_data(w, fd, st, e, rel, err) < 0)
		goto out;
	if (opaque && S_ISDIR(st->st_mode) && write_marker(w, rel, ".wh..wh..opq", st, err) < 0)
		goto out;
	ret = 0;
out:
	archive_entry_free(e);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_other_prefix(struct writer *w, const char *name)
{
	for (size_t i = 0; i < w->n_uppers; i++)
		if (i != w->cur && *w->uppers[i].prefix && !strcmp(w->uppers[i].prefix, name))
			return true;
	return false;
}

static int walk(struct writer *w, int dfd, const char *rel, lc_error_t **err)
{
	int dup_fd = dup(dfd);
	if (dup_fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read directory %s", rel);
	_cleanup_dir_ DIR *d = fdopendir(dup_fd);
	if (!d) {
		close(dup_fd);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read directory %s", rel);
	}
	_cleanup_strv_ char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!*rel && is_other_prefix(w, de->d_name))
			continue;
		if (n + 1 >= cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(char *));
			if (!nn)
				abort();
			names = nn;
		}
		names[n++] = strdup(de->d_name);
		names[n] = NULL;
	}
	if (n)
		qsort(names, n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		_cleanup_free_ char *crel = *rel ? lc_strdup_printf("%s/%s", rel, names[i]) : strdup(names[i]);
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			_cleanup_free_ char *hp = host_path(w, crel);
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot stat %s", hp);
		}
		if (emit(w, dfd, names[i], crel, &st, err) < 0)
			return -1;
		if (S_ISDIR(st.st_mode)) {
			_cleanup_close_ int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0) {
				_cleanup_free_ char *hp = host_path(w, crel);
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", hp);
			}
			if (walk(w, cfd, crel, err) < 0)
				return -1;
		}
	}
	return 0;
}

int lc_layer_write(const lc_upper_t *uppers, size_t n, uid_t uid_base, gid_t gid_base, unsigned flags, int fd,
		   char *hex, uint64_t *size, lc_error_t **err)
{
	struct writer w = {
		.fd = fd, .ubase = uid_base, .gbase = gid_base, .count = lc_uid_count(), .flags = flags,
		.uppers = uppers, .n_uppers = n,
	};
	int ret = -1;
	w.md = sha_new();
	w.buf = malloc(IO_BUF);
	w.zero = lc_xmalloc0(IO_BUF);
	if (!w.buf)
		abort();
	w.a = archive_write_new();
	w.lr = w.a ? archive_entry_linkresolver_new() : NULL;
	if (!w.lr) {
		lc_archivelib_error(err);
		goto out;
	}
	archive_write_set_format_pax_restricted(w.a);
	archive_write_add_filter_none(w.a);
	archive_write_set_bytes_per_block(w.a, 1 << 16); /* fewer, larger writes */
	archive_write_set_bytes_in_last_block(w.a, 1);
	archive_entry_linkresolver_set_strategy(w.lr, archive_format(w.a));
	if (archive_write_open(w.a, &w, NULL, writer_write, NULL) != ARCHIVE_OK) {
		archive_fail(&w, "start", err);
		goto out;
	}
	for (w.cur = 0; w.cur < n; w.cur++) {
		_cleanup_close_ int rfd = open(uppers[w.cur].dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (rfd < 0) {
			lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno, "cannot open %s",
				     uppers[w.cur].dir);
			goto out;
		}
		const char *prefix = uppers[w.cur].prefix ? uppers[w.cur].prefix : "";
		if (*prefix) {
			struct stat st;
			if (fstat(rfd, &st) < 0) {
				lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot stat %s", uppers[w.cur].dir);
				goto out;
			}
			/* the prefix directory itself, with the upper root's metadata */
			struct archive_entry *e = archive_entry_new();
			if (!e) {
				lc_archivelib_error(err);
				goto out;
			}
			archive_entry_copy_stat(e, &st);
			archive_entry_set_pathname(e, prefix);
			archive_entry_unset_atime(e);
			archive_entry_unset_ctime(e);
			archive_entry_set_size(e, 0);
			shift_ids(&w, e, &st);
			int r = 0;
			if (archive_write_header(w.a, e) < ARCHIVE_WARN)
				r = archive_fail(&w, prefix, err);
			archive_entry_free(e);
			if (r < 0)
				goto out;
		}
		if (walk(&w, rfd, prefix, err) < 0)
			goto out;
	}
	if (archive_write_close(w.a) != ARCHIVE_OK) {
		archive_fail(&w, "end", err);
		goto out;
	}
	ret = 0;
out:
	archive_write_free(w.a);
	archive_entry_linkresolver_free(w.lr);
	sha_end(w.md, hex);
	if (size)
		*size = w.size;
	free(w.buf);
	free(w.zero);
	return ret;
}
