/* sbfs.c — a sandbox's files for the E2B listener's envd, by a process
 * that has joined the sandbox (see sbfs.h).  Each function runs in a
 * process made for one request (a child of lcd's runner), so it may keep
 * what it reads (the sandbox's user and group names, a watch's
 * directories) in static tables. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "json.h"
#include "sbfs.h"
#include "util.h"

#define LIST_MAX 100000 /* entries one list answers with at most */

/* err from errno e: the exit code by kind, e kept in errnum. */
static int fail(lc_error_t **err, int e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(lc_error_t **err, int e, const char *fmt, ...)
{
	int code;
	switch (e) {
	case ENOENT:
		code = LC_EXIT_NOENT;
		break;
	case EEXIST:
		code = LC_EXIT_STATE;
		break;
	case EACCES:
	case EPERM:
	case EROFS:
		code = LC_EXIT_PERM;
		break;
	case ENOTDIR:
	case EISDIR:
	case EINVAL:
	case ELOOP:
	case ENAMETOOLONG:
		code = LC_EXIT_USAGE;
		break;
	default:
		code = LC_EXIT_RUNTIME;
	}
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	lc_error_set(err, code, 0, "%s", msg);
	if (err && *err)
		(*err)->errnum = e;
	return -1;
}

/* ---- names of ids, from the sandbox's own files ---- */

struct idname {
	unsigned id;
	char *name;
};
static struct idname *users, *groups;
static size_t n_users, n_groups;
static bool ids_loaded;

static void load_ids(const char *file, struct idname **out, size_t *n)
{
	_cleanup_free_ char *text = NULL;
	if (lc_read_file(file, &text, NULL, NULL) < 0)
		return;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4] = { 0 };
		size_t k = 0;
		for (char *p = line; k < 4; k++) {
			f[k] = p;
			char *c = strchr(p, ':');
			if (!c)
				break;
			*c = '\0';
			p = c + 1;
		}
		if (k < 3 || !*f[0] || !f[2] || !*f[2])
			continue;
		char *end = NULL;
		unsigned long id = strtoul(f[2], &end, 10);
		if (*end)
			continue;
		*out = realloc(*out, (*n + 1) * sizeof(**out));
		(*out)[(*n)++] = (struct idname){ (unsigned)id, strdup(f[0]) };
	}
}

static json_t *id_name(unsigned id, bool group)
{
	if (!ids_loaded) {
		ids_loaded = true;
		load_ids("/etc/passwd", &users, &n_users);
		load_ids("/etc/group", &groups, &n_groups);
	}
	struct idname *t = group ? groups : users;
	size_t n = group ? n_groups : n_users;
	for (size_t i = 0; i < n; i++)
		if (t[i].id == id && json_string(t[i].name))
			return json_string(t[i].name);
	return json_sprintf("%u", id);
}

/* ---- entries ---- */

/* A name as JSON text: bytes that are not UTF-8 become U+FFFD. */
static json_t *text(const char *s)
{
	json_t *j = json_string(s);
	if (j)
		return j;
	size_t n = strlen(s), o = 0;
	_cleanup_free_ char *t = lc_xmalloc0(3 * n + 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x80) {
			t[o++] = (char)c;
		} else {
			memcpy(t + o, "\xEF\xBF\xBD", 3);
			o += 3;
		}
	}
	return json_string(t);
}

/* The mode as Go's FileMode.String() writes it (what envd answers):
 * the kind and special bits as letters, or '-', then rwxrwxrwx. */
static void perm_string(mode_t m, char out[24])
{
	size_t o = 0;
	if (S_ISDIR(m))
		out[o++] = 'd';
	if (S_ISLNK(m))
		out[o++] = 'L';
	if (S_ISBLK(m) || S_ISCHR(m))
		out[o++] = 'D';
	if (S_ISFIFO(m))
		out[o++] = 'p';
	if (S_ISSOCK(m))
		out[o++] = 'S';
	if (m & S_ISUID)
		out[o++] = 'u';
	if (m & S_ISGID)
		out[o++] = 'g';
	if (S_ISCHR(m))
		out[o++] = 'c';
	if (m & S_ISVTX)
		out[o++] = 't';
	if (!o)
		out[o++] = '-';
	static const char rwx[] = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		out[o++] = (m & (1 << (8 - i))) ? rwx[i] : '-';
	out[o] = '\0';
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : s && s == path ? "/" : s ? s + 1 : path;
}

/* The file's metadata: its user.e2b.* extended attributes, {} if none
 * (or the filesystem keeps none).  A symlink's own are not read. */
#define META_PREFIX "user.e2b."
static json_t *metadata_of(const char *path, int fd)
{
	json_t *m = json_object();
	char names[8192];
	ssize_t n = fd >= 0 ? flistxattr(fd, names, sizeof(names)) : listxattr(path, names, sizeof(names));
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		const char *k = names + i;
		if (strncmp(k, META_PREFIX, strlen(META_PREFIX)))
			continue;
		char val[4097];
		ssize_t v = fd >= 0 ? fgetxattr(fd, k, val, sizeof(val) - 1) : getxattr(path, k, val, sizeof(val) - 1);
		if (v < 0)
			continue;
		val[v] = '\0';
		json_object_set_new(m, k + strlen(META_PREFIX), text(val));
	}
	return m;
}

/* Replace the file's metadata with meta (an object of strings): envd's
 * upload does, so an upload without any clears what was there. */
static int set_metadata(int fd, const char *path, json_t *meta, lc_error_t **err)
{
	char names[8192];
	ssize_t n = flistxattr(fd, names, sizeof(names));
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1)
		if (!strncmp(names + i, META_PREFIX, strlen(META_PREFIX)))
			fremovexattr(fd, names + i);
	const char *k;
	json_t *v;
	json_object_foreach(meta, k, v) {
		_cleanup_free_ char *name = lc_strdup_printf(META_PREFIX "%s", k);
		const char *val = json_string_value(v);
		if (!val || fsetxattr(fd, name, val, strlen(val), 0) < 0)
			return fail(err, errno == ENOTSUP ? EINVAL : errno ? errno : EINVAL, "%s: cannot keep metadata %s: %s", path,
				    k, errno == ENOTSUP ? "the sandbox's filesystem keeps no extended attributes" : strerror(errno));
	}
	return 0;
}

static json_t *entry_of(const char *path, const char *name, const struct stat *st)
{
	char perms[24];
	perm_string(st->st_mode, perms);
	const char *type = S_ISREG(st->st_mode) ? "file" : S_ISDIR(st->st_mode) ? "dir" : S_ISLNK(st->st_mode) ? "symlink" : "other";
	json_t *e = json_pack("{s:o, s:s, s:o, s:I, s:i, s:s, s:o, s:o, s:I}", "name", text(name), "type", type, "path",
			      text(path), "size", (json_int_t)st->st_size, "mode", (int)(st->st_mode & 0777),
			      "permissions", perms, "owner", id_name(st->st_uid, false), "group", id_name(st->st_gid, true),
			      "mtime_ns", (json_int_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
	json_t *meta = S_ISLNK(st->st_mode) ? json_object() : metadata_of(path, -1);
	json_object_set_new(e, "metadata", meta);
	if (S_ISLNK(st->st_mode)) {
		char target[4096];
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n >= 0) {
			target[n] = '\0';
			json_object_set_new(e, "symlink_target", text(target));
		}
	}
	return e;
}

static int entry_at(const char *path, bool follow, json_t **out, lc_error_t **err)
{
	struct stat st;
	if ((follow ? stat(path, &st) : lstat(path, &st)) < 0)
		return fail(err, errno == ENOTDIR ? ENOENT : errno, "%s: %s", path, strerror(errno));
	*out = entry_of(path, base_name(path), &st);
	return 0;
}

static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir);
	return lc_strdup_printf("%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
}

/* The directories on the way to path (path too when last), made and
 * given to uid:gid where missing. */
static int ensure_dirs(const char *path, uid_t uid, gid_t gid, bool last, lc_error_t **err)
{
	_cleanup_free_ char *p = strdup(path);
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	if (!last) {
		char *slash = strrchr(p, '/');
		if (!slash || slash == p)
			return 0;
		*slash = '\0';
	}
	for (char *s = p + 1;; s++) {
		bool end = *s == '\0';
		if (*s != '/' && !end)
			continue;
		char c = *s;
		*s = '\0';
		struct stat st;
		if (stat(p, &st) == 0) {
			if (!S_ISDIR(st.st_mode))
				return fail(err, ENOTDIR, "%s exists and is not a directory", p);
		} else if (errno != ENOENT) {
			return fail(err, errno, "%s: %s", p, strerror(errno));
		} else if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			return fail(err, errno, "cannot make directory %s: %s", p, strerror(errno));
		} else if (lchown(p, uid, gid) < 0) {
			return fail(err, errno, "cannot give %s to %u:%u: %s", p, (unsigned)uid, (unsigned)gid, strerror(errno));
		}
		*s = c;
		if (end)
			return 0;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries under dir (as named: path), depth levels deep, in the
 * order envd walks them: each directory's names sorted, depth first. */
static int walk(const char *dir, int depth, json_t *out, lc_error_t **err)
{
	DIR *d = opendir(dir);
	if (!d)
		return fail(err, errno, "cannot read directory %s: %s", dir, strerror(errno));
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *p = join(dir, names[i]);
		struct stat st;
		if (rc == 0 && json_array_size(out) < LIST_MAX && lstat(p, &st) == 0) {
			json_array_append_new(out, entry_of(p, names[i], &st));
			if (S_ISDIR(st.st_mode) && depth > 1)
				rc = walk(p, depth - 1, out, err);
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	int r = flag == FTW_DP ? rmdir(p) : unlink(p);
	return r < 0 && errno != ENOENT ? -1 : 0;
}

static int open_checked(const char *path, int flags, mode_t mode, struct stat *st, lc_error_t **err)
{
	int fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
	if (fd < 0)
		return fail(err, errno, "%s: %s", path, errno == EISDIR ? "path is a directory" : strerror(errno));
	if (fstat(fd, st) < 0) {
		int e = errno;
		close(fd);
		return fail(err, e, "%s: %s", path, strerror(e));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return S_ISDIR(st->st_mode) ? fail(err, EISDIR, "%s: path is a directory", path)
					    : fail(err, EINVAL, "%s: not a regular file", path);
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

static int user_of(const char *name, json_t **out, lc_error_t **err)
{
	_cleanup_free_ char *pw = NULL;
	if (lc_read_file("/etc/passwd", &pw, NULL, NULL) < 0)
		return fail(err, ENOENT, "the sandbox has no /etc/passwd to find user %s in", name);
	char *save = NULL;
	for (char *line = strtok_r(pw, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[7] = { 0 };
		size_t k = 0;
		for (char *p = line; k < 7 && p; k++) {
			f[k] = p;
			p = strchr(p, ':');
			if (p)
				*p++ = '\0';
		}
		if (k < 6 || strcmp(f[0], name))
			continue;
		*out = json_pack("{s:I, s:I, s:s}", "uid", (json_int_t)strtoul(f[2], NULL, 10), "gid",
				 (json_int_t)strtoul(f[3], NULL, 10), "home", f[5]);
		return 0;
	}
	return fail(err, ENOENT, "no user %s in the sandbox's /etc/passwd", name);
}

static uid_t jid(json_t *op, const char *k, unsigned dflt)
{
	json_t *v = json_object_get(op, k);
	return json_is_integer(v) ? (uid_t)json_integer_value(v) : (uid_t)dflt;
}

int lcd_sbfs_op(json_t *op, const lc_spec_t *spec, json_t **out, int *fd, lc_error_t **err)
{
	const char *what = lc_json_str(op, "op");
	const char *path = lc_json_str(op, "path");
	uid_t uid = jid(op, "uid", spec ? spec->uid : 0);
	gid_t gid = (gid_t)jid(op, "gid", spec ? spec->gid : 0);
	*out = NULL;
	*fd = -1;
	if (what && !strcmp(what, "user")) {
		const char *name = lc_json_str(op, "name");
		return name ? user_of(name, out, err) : fail(err, EINVAL, "user: no name given");
	}
	if (!what || !path || path[0] != '/')
		return fail(err, EINVAL, "a file operation needs an absolute path");
	json_t *e = NULL;
	struct stat st;
	if (!strcmp(what, "stat")) {
		if (entry_at(path, json_is_true(json_object_get(op, "follow")), &e, err) < 0)
			return -1;
		*out = json_pack("{s:o}", "entry", e);
		return 0;
	}
	if (!strcmp(what, "list")) {
		json_int_t depth = json_integer_value(json_object_get(op, "depth"));
		if (stat(path, &st) < 0)
			return fail(err, errno == ENOTDIR ? ENOENT : errno, "%s: %s", path, strerror(errno));
		if (!S_ISDIR(st.st_mode))
			return fail(err, ENOTDIR, "path is not a directory: %s", path);
		json_t *list = json_array();
		if (walk(path, depth < 1 ? 1 : depth > 64 ? 64 : (int)depth, list, err) < 0) {
			json_decref(list);
			return -1;
		}
		*out = json_pack("{s:o}", "entries", list);
		return 0;
	}
	if (!strcmp(what, "mkdir")) {
		if (stat(path, &st) == 0)
			return S_ISDIR(st.st_mode) ? fail(err, EEXIST, "directory already exists: %s", path)
						   : fail(err, ENOTDIR, "path already exists but it is not a directory: %s", path);
		if (ensure_dirs(path, uid, gid, true, err) < 0 || entry_at(path, false, &e, err) < 0)
			return -1;
		*out = json_pack("{s:o}", "entry", e);
		return 0;
	}
	if (!strcmp(what, "move")) {
		const char *to = lc_json_str(op, "to");
		if (!to || to[0] != '/')
			return fail(err, EINVAL, "move: the destination must be an absolute path");
		if (lstat(path, &st) < 0)
			return fail(err, errno == ENOTDIR ? ENOENT : errno, "source file not found: %s", path);
		if (ensure_dirs(to, uid, gid, false, err) < 0)
			return -1;
		if (rename(path, to) < 0)
			return fail(err, errno, "cannot move %s to %s: %s", path, to, strerror(errno));
		if (entry_at(to, false, &e, err) < 0)
			return -1;
		*out = json_pack("{s:o}", "entry", e);
		return 0;
	}
	if (!strcmp(what, "remove")) {
		if (lstat(path, &st) < 0) {
			if (errno == ENOENT || errno == ENOTDIR) {
				*out = json_object();
				return 0;
			}
			return fail(err, errno, "%s: %s", path, strerror(errno));
		}
		int r = S_ISDIR(st.st_mode) ? nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS) : unlink(path);
		if (r < 0 && errno != ENOENT)
			return fail(err, errno, "cannot remove %s: %s", path, strerror(errno));
		*out = json_object();
		return 0;
	}
	if (!strcmp(what, "write")) {
		mode_t mode = (mode_t)jid(op, "mode", 0644) & 07777;
		if (ensure_dirs(path, uid, gid, false, err) < 0)
			return -1;
		int f = open_checked(path, O_WRONLY | O_CREAT | O_TRUNC, mode, &st, err);
		if (f < 0)
			return -1;
		if (fchown(f, uid, gid) < 0) {
			int en = errno;
			close(f);
			return fail(err, en, "cannot give %s to %u:%u: %s", path, (unsigned)uid, (unsigned)gid, strerror(en));
		}
		json_t *meta = json_object_get(op, "metadata");
		if (set_metadata(f, path, meta, err) < 0) {
			close(f);
			return -1;
		}
		*fd = f;
		*out = json_pack("{s:o, s:o, s:o}", "name", text(base_name(path)), "path", text(path), "metadata",
				 metadata_of(path, f));
		return 0;
	}
	if (!strcmp(what, "read")) {
		int f = open_checked(path, O_RDONLY, 0, &st, err);
		if (f < 0)
			return -1;
		*fd = f;
		*out = json_pack("{s:I}", "size", (json_int_t)st.st_size);
		return 0;
	}
	return fail(err, EINVAL, "unknown file operation '%s'", what);
}

/* ---- watches ---- */

static struct watched {
	int wd;
	char *rel; /* the directory, relative to the watched one ("" for itself) */
} *watched;
static size_t n_watched;

#define WATCH_MASK (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | \
		    IN_MOVE_SELF | IN_ONLYDIR)

static void watch_add(int fd, const char *root, const char *rel, bool recursive)
{
	_cleanup_free_ char *p = *rel ? join(root, rel) : strdup(root);
	int wd = inotify_add_watch(fd, p, WATCH_MASK);
	if (wd < 0)
		return;
	watched = realloc(watched, (n_watched + 1) * sizeof(*watched));
	watched[n_watched++] = (struct watched){ wd, strdup(rel) };
	if (!recursive)
		return;
	DIR *d = opendir(p);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		_cleanup_free_ char *sub = *rel ? join(rel, de->d_name) : strdup(de->d_name);
		_cleanup_free_ char *full = join(root, sub);
		struct stat st;
		if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode))
			watch_add(fd, root, sub, true);
	}
	if (d)
		closedir(d);
}

int lcd_sbfs_watch_start(json_t *op, const lc_spec_t *spec, int *fd, lc_error_t **err)
{
	(void)spec;
	const char *path = lc_json_str(op, "path");
	struct stat st;
	if (!path || path[0] != '/')
		return fail(err, EINVAL, "a watch needs an absolute path");
	if (stat(path, &st) < 0)
		return fail(err, errno == ENOTDIR ? ENOENT : errno, "%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return fail(err, ENOTDIR, "path %s is not a directory", path);
	int f = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (f < 0)
		return fail(err, errno, "cannot watch %s: %s", path, strerror(errno));
	watch_add(f, path, "", json_is_true(json_object_get(op, "recursive")));
	if (!n_watched) {
		close(f);
		return fail(err, errno ? errno : EINVAL, "cannot watch %s", path);
	}
	*fd = f;
	return 0;
}

static const char *event_type(uint32_t m)
{
	if (m & (IN_CREATE | IN_MOVED_TO))
		return "create";
	if (m & IN_MODIFY)
		return "write";
	if (m & IN_DELETE)
		return "remove";
	if (m & IN_MOVED_FROM)
		return "rename";
	if (m & IN_ATTRIB)
		return "chmod";
	return NULL;
}

/* One event line to out: -1 once out is gone. */
static int emit(int out, const char *root, const char *name, const char *type, bool with_entry)
{
	json_t *e = json_pack("{s:o, s:s}", "name", text(name), "type", type);
	struct stat st;
	_cleanup_free_ char *full = join(root, name);
	if (with_entry && lstat(full, &st) == 0)
		json_object_set_new(e, "entry", entry_of(full, base_name(full), &st));
	char *line = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	size_t len = strlen(line);
	line[len] = '\n';
	int w = lc_write_all(out, line, len + 1);
	free(line);
	return w;
}

/* A directory that came under a recursive watch may hold files already
 * (made before its watch was added): they are announced as made, and
 * written to when they have content. */
static int announce(int out, const char *root, const char *rel, bool with_entry, int depth)
{
	_cleanup_free_ char *dir = join(root, rel);
	DIR *d = opendir(dir);
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		_cleanup_free_ char *name = join(rel, de->d_name);
		_cleanup_free_ char *full = join(root, name);
		struct stat st;
		if (lstat(full, &st) < 0)
			continue;
		rc = emit(out, root, name, "create", with_entry);
		if (rc == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
			rc = emit(out, root, name, "write", with_entry);
		if (rc == 0 && S_ISDIR(st.st_mode) && depth < 32)
			rc = announce(out, root, name, with_entry, depth + 1);
	}
	if (d)
		closedir(d);
	return rc;
}

void lcd_sbfs_watch_run(int fd, int out, json_t *op)
{
	const char *root = lc_json_str(op, "path");
	bool recursive = json_is_true(json_object_get(op, "recursive"));
	bool with_entry = json_is_true(json_object_get(op, "include_entry"));
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		struct pollfd p[2] = { { fd, POLLIN, 0 }, { out, POLLIN, 0 } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (p[1].revents)
			return; /* lcd hung up (it never writes on this socket) */
		if (!(p[0].revents & POLLIN))
			continue;
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			continue;
		for (char *q = buf; q < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)q;
			q += sizeof(*ev) + ev->len;
			const char *rel = NULL;
			for (size_t i = 0; i < n_watched; i++)
				if (watched[i].wd == ev->wd)
					rel = watched[i].rel;
			if (!rel)
				continue;
			if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) && !*rel)
				return; /* the watched directory itself is gone */
			const char *type = event_type(ev->mask);
			if (!type || !ev->len)
				continue;
			_cleanup_free_ char *name = *rel ? join(rel, ev->name) : strdup(ev->name);
			bool new_dir = recursive && (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO));
			if (new_dir)
				watch_add(fd, root, name, true);
			if (emit(out, root, name, type, with_entry) < 0 ||
			    (new_dir && announce(out, root, name, with_entry, 0) < 0))
				return;
		}
	}
}
