/* copy.c — lcrun cp: files between the host and a running sandbox.
 *
 * The sandbox side is always handled by a child that joined the sandbox's
 * user and mount namespaces and became its root (lc_enter_sandbox): every
 * path there resolves in the sandbox's own root, so a symlink the sandbox
 * planted (even an absolute one, or ..) leads to the sandbox's files and
 * never to the host's, and what it creates belongs to the sandbox's ids.
 * The two sides talk tar (libarchive, loaded before the fork) over a pipe;
 * with "-" the tar stream is the caller's stdin or stdout.  Extraction
 * refuses absolute paths, .. and writing through symlinks; on the host it
 * restores no owner and no setuid bits, and takes no hard links. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "archivelib.h"
#include "console.h"
#include "exec.h"
#include "lifecycle.h"
#include "state.h"
#include "sync.h"
#include "util.h"

typedef struct endpoint {
	char *id;   /* sandbox id, NULL on the host */
	char *path; /* path (in the sandbox or on the host), NULL for "-" */
} endpoint_t;

static void endpoint_clear(endpoint_t *e)
{
	free(e->id);
	free(e->path);
}

static int parse_endpoint(const char *arg, endpoint_t *e, lc_error_t **err)
{
	memset(e, 0, sizeof(*e));
	if (!strcmp(arg, "-"))
		return 0;
	const char *colon = strchr(arg, ':');
	const char *slash = strchr(arg, '/');
	if (colon && colon != arg && (!slash || slash > colon)) {
		_cleanup_free_ char *ref = strndup(arg, (size_t)(colon - arg));
		if (lc_state_resolve(ref, &e->id, err) < 0)
			return -1;
		const char *p = colon + 1;
		if (p[0] != '/')
			return lc_error_set(err, LC_EXIT_USAGE, 0, "%s: the path in the sandbox must be absolute", arg);
		e->path = strdup(p);
		return 0;
	}
	if (!*arg)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "cp: empty path");
	e->path = strdup(arg);
	return 0;
}

/* The name the source goes by in the tar stream, and the directory to
 * read it from. */
static void split_source(const char *path, char **dir, char **base)
{
	_cleanup_free_ char *a = strdup(path), *b = strdup(path);
	size_t n = strlen(b);
	while (n > 1 && b[n - 1] == '/')
		b[--n] = '\0';
	char *bn = basename(b);
	*base = strdup(!strcmp(bn, "/") ? "." : bn);
	*dir = strdup(dirname(a));
}

static int ar_fail(struct archive *a, const char *what, int code, lc_error_t **err)
{
	const char *m = archive_error_string(a);
	return lc_error_set(err, code, 0, "%s: %s", what, m ? m : "archive error");
}

/* Write path (followed if it is a symlink, its contents not) as a tar
 * stream to fd, entries named base/... */
static int produce(const char *path, int fd, lc_error_t **err)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return lc_error_set(err, LC_EXIT_NOENT, errno, "%s", path);
	_cleanup_free_ char *dir = NULL, *base = NULL;
	split_source(path, &dir, &base);
	if (chdir(dir) < 0)
		return lc_error_set(err, LC_EXIT_NOENT, errno, "%s", dir);
	struct archive *disk = archive_read_disk_new();
	struct archive *w = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	int r = -1;
	if (!disk || !w || !e) {
		lc_archivelib_error(err);
		goto out;
	}
	archive_read_disk_set_symlink_hybrid(disk);
	archive_write_set_format_pax_restricted(w);
	archive_write_set_bytes_in_last_block(w, 1);
	if (archive_write_open_fd(w, fd) != ARCHIVE_OK) {
		ar_fail(w, "tar stream", LC_EXIT_RUNTIME, err);
		goto out;
	}
	if (archive_read_disk_open(disk, base) != ARCHIVE_OK) {
		ar_fail(disk, path, LC_EXIT_NOENT, err);
		goto out;
	}
	for (;;) {
		archive_entry_clear(e);
		int h = archive_read_next_header2(disk, e);
		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN) {
			ar_fail(disk, path, LC_EXIT_RUNTIME, err);
			goto out;
		}
		archive_read_disk_descend(disk);
		archive_entry_set_uname(e, NULL);
		archive_entry_set_gname(e, NULL);
		if (archive_write_header(w, e) < ARCHIVE_WARN) {
			ar_fail(w, archive_entry_pathname(e), LC_EXIT_RUNTIME, err);
			goto out;
		}
		if (archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0) {
			char buf[65536];
			la_ssize_t n;
			while ((n = archive_read_data(disk, buf, sizeof(buf))) > 0)
				if (archive_write_data(w, buf, (size_t)n) < 0) {
					ar_fail(w, archive_entry_pathname(e), LC_EXIT_RUNTIME, err);
					goto out;
				}
			if (n < 0) {
				ar_fail(disk, archive_entry_pathname(e), LC_EXIT_RUNTIME, err);
				goto out;
			}
		}
	}
	if (archive_write_close(w) != ARCHIVE_OK) {
		ar_fail(w, "tar stream", LC_EXIT_RUNTIME, err);
		goto out;
	}
	r = 0;
out:
	archive_entry_free(e);
	archive_read_free(disk);
	archive_write_free(w);
	return r;
}

typedef struct target {
	char *dir;    /* directory to extract in */
	char *from;   /* first component to rename, or NULL */
	char *to;
} target_t;

/* Where a copy to dst lands: into dst when it is a directory, else dst is
 * the new name in its (existing) parent.  stream: from a tar on stdin,
 * which always goes into the directory dst. */
static int plan_target(const char *dst, const char *src_base, bool stream, target_t *t, lc_error_t **err)
{
	memset(t, 0, sizeof(*t));
	struct stat st;
	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		t->dir = strdup(dst);
		return 0;
	}
	if (stream)
		return lc_error_set(err, LC_EXIT_NOENT, 0, "%s: a tar stream needs an existing directory", dst);
	size_t n = strlen(dst);
	if (n && dst[n - 1] == '/')
		return lc_error_set(err, LC_EXIT_NOENT, ENOENT, "directory %s", dst);
	_cleanup_free_ char *a = strdup(dst), *b = strdup(dst);
	char *parent = dirname(a);
	if (stat(parent, &st) < 0 || !S_ISDIR(st.st_mode))
		return lc_error_set(err, LC_EXIT_NOENT, 0, "%s: parent directory %s does not exist", dst, parent);
	t->dir = strdup(parent);
	t->from = strdup(src_base);
	t->to = strdup(basename(b));
	return 0;
}

static void target_clear(target_t *t)
{
	free(t->dir);
	free(t->from);
	free(t->to);
}

/* Extract the tar stream on fd into t.  in_sandbox: keep modes, set the
 * owner to uid:gid; on the host: no owner, no setuid bits, no hard links. */
static int consume(int fd, const target_t *t, bool in_sandbox, uid_t uid, gid_t gid, lc_error_t **err)
{
	if (chdir(t->dir) < 0)
		return lc_error_set(err, LC_EXIT_NOENT, errno, "%s", t->dir);
	int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
		    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS;
	if (in_sandbox)
		flags |= ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_OWNER;
	struct archive *rd = archive_read_new();
	struct archive *w = archive_write_disk_new();
	int r = -1;
	if (!rd || !w) {
		lc_archivelib_error(err);
		goto out;
	}
	archive_read_support_format_tar(rd);
	archive_read_support_format_gnutar(rd);
	archive_write_disk_set_options(w, flags);
	if (archive_read_open_fd(rd, fd, 65536) != ARCHIVE_OK) {
		ar_fail(rd, "tar stream", LC_EXIT_INVALID, err);
		goto out;
	}
	struct archive_entry *e;
	for (;;) {
		int h = archive_read_next_header(rd, &e);
		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN) {
			ar_fail(rd, "tar stream", LC_EXIT_INVALID, err);
			goto out;
		}
		const char *name = archive_entry_pathname(e);
		while (name && name[0] == '.' && name[1] == '/')
			name += 2;
		if (!name || !*name)
			continue;
		if (t->from) {
			size_t n = strlen(t->from);
			if (!strcmp(t->from, ".")) {
				_cleanup_free_ char *nn = lc_strdup_printf("%s/%s", t->to, name);
				archive_entry_copy_pathname(e, strcmp(name, ".") ? nn : t->to);
			} else if (!strncmp(name, t->from, n) && (name[n] == '\0' || name[n] == '/')) {
				_cleanup_free_ char *nn = lc_strdup_printf("%s%s", t->to, name + n);
				archive_entry_copy_pathname(e, nn);
			} else {
				lc_error_set(err, LC_EXIT_INVALID, 0, "tar stream: unexpected entry %s", name);
				goto out;
			}
		}
		if (!in_sandbox && archive_entry_hardlink(e)) {
			lc_error_set(err, LC_EXIT_INVALID, 0, "tar stream: hard link %s refused", name);
			goto out;
		}
		if (in_sandbox) {
			archive_entry_set_uid(e, uid);
			archive_entry_set_gid(e, gid);
			archive_entry_set_uname(e, NULL);
			archive_entry_set_gname(e, NULL);
		}
		if (archive_write_header(w, e) < ARCHIVE_WARN) {
			ar_fail(w, archive_entry_pathname(e), archive_errno(w) == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, err);
			goto out;
		}
		const void *buf;
		size_t len;
		la_int64_t off;
		int d;
		while ((d = archive_read_data_block(rd, &buf, &len, &off)) == ARCHIVE_OK)
			if (archive_write_data_block(w, buf, len, off) < ARCHIVE_WARN) {
				ar_fail(w, archive_entry_pathname(e), LC_EXIT_RUNTIME, err);
				goto out;
			}
		if (d != ARCHIVE_EOF) {
			ar_fail(rd, "tar stream", LC_EXIT_INVALID, err);
			goto out;
		}
		if (archive_write_finish_entry(w) < ARCHIVE_WARN) {
			ar_fail(w, archive_entry_pathname(e), LC_EXIT_RUNTIME, err);
			goto out;
		}
	}
	if (archive_write_close(w) != ARCHIVE_OK) {
		ar_fail(w, t->dir, LC_EXIT_RUNTIME, err);
		goto out;
	}
	/* What follows the archive's end (the rest of the last record: tar
	 * pads the stream to 10 KiB) is read too: the writer would otherwise
	 * find the pipe closed on its last bytes, if they came after this
	 * end, and take a copy that completed for a failed one. */
	char rest[4096];
	ssize_t n;
	while ((n = read(fd, rest, sizeof(rest))) > 0 || (n < 0 && errno == EINTR))
		;
	r = 0;
out:
	archive_read_free(rd);
	archive_write_free(w);
	return r;
}

/* In a child of parent's: join the sandbox of pidfd (its user and mount
 * namespaces, as its root).  Joining changes the credentials, which
 * clears the death signal: the one it had is set again, and if the
 * parent went meanwhile, this process ends as that signal would have
 * ended it. */
static int join_for_copy(int pidfd, pid_t parent, lc_error_t **e)
{
	int pdeath = 0;
	(void)prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0);
	if (lc_enter_sandbox(pidfd, CLONE_NEWUSER | CLONE_NEWNS, e) < 0)
		return -1;
	if (pdeath) {
		(void)prctl(PR_SET_PDEATHSIG, pdeath, 0, 0, 0);
		if (getppid() != parent)
			_exit(1);
	}
	umask(022);
	return 0;
}

int lc_sandbox_copy(const char *src_arg, const char *dst_arg, lc_error_t **err)
{
	endpoint_t src, dst;
	if (parse_endpoint(src_arg, &src, err) < 0)
		return -1;
	if (parse_endpoint(dst_arg, &dst, err) < 0) {
		endpoint_clear(&src);
		return -1;
	}
	int r = -1;
	int pfd[2] = { -1, -1 }, es[2] = { -1, -1 }, pidfd = -1;
	pid_t child = -1;
	json_t *st = NULL;
	lc_spec_t *spec = NULL;
	target_t t = { 0 };
	_cleanup_free_ char *sdir = NULL, *sbase = NULL;
	bool into = dst.id != NULL; /* host -> sandbox */
	const endpoint_t *sb = into ? &dst : &src, *host = into ? &src : &dst;
	if (!!src.id == !!dst.id) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "cp: exactly one side must be in a sandbox (ID:/path)");
		goto out;
	}
	st = lc_state_read(sb->id, err);
	if (!st)
		goto out;
	const char *status = lc_state_status(st, sb->id);
	if (strcmp(status, "running") && strcmp(status, "paused")) {
		lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is %s: cp needs a running sandbox (lcrun start %s)",
			     sb->id, status, sb->id);
		goto out;
	}
	pidfd = lc_state_pid1_pidfd(st, sb->id, err);
	if (pidfd < 0)
		goto out;
	spec = lc_spec_from_json(json_object_get(st, "spec"));
	if (host->path) {
		if (into) {
			struct stat hs;
			if (stat(host->path, &hs) < 0) {
				lc_error_set(err, LC_EXIT_NOENT, errno, "%s", host->path);
				goto out;
			}
		} else {
			split_source(sb->path, &sdir, &sbase);
			if (plan_target(host->path, sbase, false, &t, err) < 0)
				goto out;
		}
	}
	/* Here, not in the child: there, a dlopen() would look for the library
	 * in the sandbox's root (see archivelib.h). */
	if (lc_archivelib_load(err) < 0)
		goto out;
	if (pipe2(pfd, O_CLOEXEC) < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, es) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a pipe");
		goto out;
	}
	void (*oldpipe)(int) = signal(SIGPIPE, SIG_IGN);
	pid_t me = getpid();
	child = fork();
	if (child == 0) {
		lc_error_t *e = NULL;
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		close(es[0]);
		if (join_for_copy(pidfd, me, &e) == 0) {
			if (into) {
				close(pfd[1]);
				_cleanup_free_ char *hdir = NULL, *hbase = NULL;
				if (host->path)
					split_source(host->path, &hdir, &hbase);
				target_t ct;
				if (plan_target(sb->path, hbase, !host->path, &ct, &e) == 0)
					consume(host->path ? pfd[0] : 0, &ct, true, spec->uid, spec->gid, &e);
			} else {
				close(pfd[0]);
				produce(sb->path, host->path ? pfd[1] : 1, &e);
			}
		}
		if (e) {
			lc_error_wrap(&e, "in sandbox %s", sb->id);
			lc_msg_send_error(es[1], e);
			_exit(1);
		}
		_exit(0);
	}
	close(es[1]);
	es[1] = -1;
	lc_error_t *mine = NULL;
	if (child < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot fork%s",
				     errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
		signal(SIGPIPE, oldpipe);
		goto out;
	}
	if (into) {
		close(pfd[0]);
		pfd[0] = -1;
		if (host->path)
			produce(host->path, pfd[1], &mine);
		close(pfd[1]);
		pfd[1] = -1;
	} else {
		close(pfd[1]);
		pfd[1] = -1;
		if (host->path)
			consume(pfd[0], &t, false, 0, 0, &mine);
		close(pfd[0]);
		pfd[0] = -1;
	}
	int status_c = 0;
	while (waitpid(child, &status_c, 0) < 0 && errno == EINTR)
		;
	child = -1;
	signal(SIGPIPE, oldpipe);
	lc_msg_t m;
	struct pollfd p = { es[0], POLLIN, 0 };
	if (poll(&p, 1, 0) > 0 && lc_msg_recv(es[0], &m) == 1 && m.type == LC_MSG_ERROR) {
		lc_error_free(mine);
		lc_error_from_buf(err, m.text, strlen(m.text));
		goto out;
	}
	if (mine) {
		*err = mine;
		goto out;
	}
	if (!WIFEXITED(status_c) || WEXITSTATUS(status_c)) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "cp: the copy in sandbox %s failed", sb->id);
		goto out;
	}
	r = 0;
out:
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	for (int i = 0; i < 2; i++) {
		if (pfd[i] >= 0)
			close(pfd[i]);
		if (es[i] >= 0)
			close(es[i]);
	}
	if (pidfd >= 0)
		close(pidfd);
	target_clear(&t);
	lc_spec_free(spec);
	json_decref(st);
	endpoint_clear(&src);
	endpoint_clear(&dst);
	return r;
}

/* ---- the file API of lcd: open a file, or run a tar stream, in a sandbox -- */

static int errno_code(int e)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		return LC_EXIT_NOENT;
	case EACCES:
	case EPERM:
	case EROFS:
		return LC_EXIT_PERM;
	case EISDIR:
	case ELOOP:
	case ENAMETOOLONG:
		return LC_EXIT_USAGE;
	default:
		return LC_EXIT_RUNTIME;
	}
}

/* A sandbox that cp can reach: running or paused.  Returns a pidfd of its
 * pid 1; *spec gets its spec (for the user's ids). */
static int reachable(const char *id_or_name, char **id, lc_spec_t **spec, lc_error_t **err)
{
	_cleanup_json_ json_t *st = lc_state_open(id_or_name, id, err);
	if (!st)
		return -1;
	const char *status = lc_state_status(st, *id);
	if (strcmp(status, "running") && strcmp(status, "paused"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is %s, not running", *id, status);
	int pidfd = lc_state_pid1_pidfd(st, *id, err);
	if (pidfd >= 0)
		*spec = lc_spec_from_json(json_object_get(st, "spec"));
	return pidfd;
}

/* reachable, for an absolute path in the sandbox. */
static int reachable_path(const char *id_or_name, const char *path, char **id, lc_spec_t **spec, lc_error_t **err)
{
	if (!path || path[0] != '/')
		return lc_error_set(err, LC_EXIT_USAGE, 0, "%s: the path in the sandbox must be absolute", path ? path : "");
	return reachable(id_or_name, id, spec, err);
}

/* Fork a child that keeps only the fds in keep (plus 0-2), has joined the
 * sandbox's user and mount namespaces and is its root.  0 in the child,
 * the pid in the parent, -1 on error (in the child: reported on es). */
static pid_t fork_into(int pidfd, int es, const int *keep, size_t nkeep, lc_error_t **err)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot fork%s",
				     errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
	if (pid > 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	int k[8] = { pidfd, es };
	size_t n = 2;
	for (size_t i = 0; i < nkeep && n < 8; i++)
		k[n++] = keep[i];
	lc_close_fds_except(k, n);
	lc_error_t *e = NULL;
	if (join_for_copy(pidfd, parent, &e) < 0) {
		lc_msg_send_error(es, e);
		_exit(1);
	}
	close(pidfd);
	return 0;
}

/* The child's last word: its error, if any, then exit. */
static void __attribute__((noreturn)) child_end(int es, lc_error_t *e, const char *id)
{
	if (e) {
		lc_error_wrap(&e, "in sandbox %s", id);
		lc_msg_send_error(es, e);
		_exit(1);
	}
	_exit(0);
}

/* The file at path, opened as lc_sandbox_open_file says, by a process
 * that has joined the sandbox; -1 with *e. */
static int open_in_sandbox(const char *path, bool wr, mode_t mode, const lc_spec_t *spec, struct stat *sb,
			   lc_error_t **e)
{
	int oflags = (wr ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	int fd = open(path, oflags, mode & 07777);
	if (fd < 0)
		return lc_error_set(e, errno_code(errno), errno, "%s", path);
	if (fstat(fd, sb) < 0)
		lc_error_set(e, LC_EXIT_RUNTIME, errno, "%s", path);
	else if (S_ISDIR(sb->st_mode))
		lc_error_set(e, LC_EXIT_USAGE, 0, "%s is a directory", path);
	else if (!S_ISREG(sb->st_mode))
		lc_error_set(e, LC_EXIT_INVALID, 0, "%s is not a regular file", path);
	else if (wr && fchown(fd, spec->uid, spec->gid) < 0)
		lc_error_set(e, LC_EXIT_RUNTIME, errno, "cannot give %s to uid %u", path, (unsigned)spec->uid);
	if (*e) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The fd as the caller gets it: blocking, its stat in st (if st). */
static int opened(int fd, const char *path, struct stat *st, lc_error_t **err)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	if (st && fstat(fd, st) < 0) {
		close(fd);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "%s", path);
	}
	return fd;
}

int lc_sandbox_open_file(const char *id_or_name, const char *path, int flags, mode_t mode, struct stat *st,
			 lc_error_t **err)
{
	_cleanup_free_ char *id = NULL;
	lc_spec_t *spec = NULL;
	bool wr = (flags & O_ACCMODE) == O_WRONLY;
	_cleanup_close_ int pidfd = reachable_path(id_or_name, path, &id, &spec, err);
	if (pidfd < 0)
		return -1;
	int es[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, es) < 0) {
		lc_spec_free(spec);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a socket pair");
	}
	pid_t child = fork_into(pidfd, es[1], NULL, 0, err);
	if (child == 0) {
		lc_error_t *e = NULL;
		struct stat sb;
		int fd = open_in_sandbox(path, wr, mode, spec, &sb, &e);
		if (fd >= 0 && lc_msg_send_fd(es[1], LC_MSG_READY, 0, fd) < 0)
			_exit(1);
		child_end(es[1], e, id);
	}
	close(es[1]);
	lc_spec_free(spec);
	if (child < 0) {
		close(es[0]);
		return -1;
	}
	lc_msg_t m;
	int fd = -1;
	int r = lc_msg_recv_fd(es[0], &m, &fd);
	close(es[0]);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	if (r == 1 && m.type == LC_MSG_ERROR) {
		if (fd >= 0)
			close(fd);
		lc_error_from_buf(err, m.text, strlen(m.text));
		return -1;
	}
	if (r != 1 || m.type != LC_MSG_READY || fd < 0) {
		if (fd >= 0)
			close(fd);
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: cannot open %s", id, path);
	}
	return opened(fd, path, st, err);
}

int lc_sandbox_open_file_here(const char *id_or_name, const char *path, int flags, mode_t mode, struct stat *st,
			      lc_error_t **err)
{
	_cleanup_free_ char *id = NULL;
	lc_spec_t *spec = NULL;
	_cleanup_close_ int pidfd = reachable_path(id_or_name, path, &id, &spec, err);
	if (pidfd < 0)
		return -1;
	lc_error_t *e = NULL;
	struct stat sb;
	int fd = -1;
	if (join_for_copy(pidfd, getppid(), &e) == 0)
		fd = open_in_sandbox(path, (flags & O_ACCMODE) == O_WRONLY, mode, spec, &sb, &e);
	lc_spec_free(spec);
	if (fd < 0) {
		lc_error_wrap(&e, "in sandbox %s", id);
		if (err && !*err)
			*err = e;
		else
			lc_error_free(e);
		return -1;
	}
	return opened(fd, path, st, err);
}

int lc_sandbox_join_here(const char *id_or_name, lc_spec_t **spec, lc_error_t **err)
{
	_cleanup_free_ char *id = NULL;
	lc_spec_t *sp = NULL;
	_cleanup_close_ int pidfd = reachable(id_or_name, &id, &sp, err);
	if (pidfd < 0)
		return -1;
	lc_error_t *e = NULL;
	if (join_for_copy(pidfd, getppid(), &e) < 0) {
		lc_spec_free(sp);
		lc_error_wrap(&e, "in sandbox %s", id);
		if (err && !*err)
			*err = e;
		else
			lc_error_free(e);
		return -1;
	}
	if (spec)
		*spec = sp;
	else
		lc_spec_free(sp);
	return 0;
}

struct lc_tar_job {
	pid_t pid;
	int es;
	char *id;
};

int lc_sandbox_tar_start(const char *id_or_name, const char *path, bool in, int *fd, lc_tar_job_t **out,
			 lc_error_t **err)
{
	_cleanup_free_ char *id = NULL;
	lc_spec_t *spec = NULL;
	*fd = -1;
	_cleanup_close_ int pidfd = reachable_path(id_or_name, path, &id, &spec, err);
	if (pidfd < 0)
		return -1;
	int es[2], pfd[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, es) < 0) {
		lc_spec_free(spec);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a socket pair");
	}
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		close(es[0]);
		close(es[1]);
		lc_spec_free(spec);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a pipe");
	}
	int mine = in ? pfd[0] : pfd[1]; /* the child's end */
	pid_t child = fork_into(pidfd, es[1], &mine, 1, err);
	if (child == 0) {
		lc_error_t *e = NULL;
		struct stat sb;
		if (stat(path, &sb) < 0)
			lc_error_set(&e, errno_code(errno), errno, "%s", path);
		else if (in && !S_ISDIR(sb.st_mode))
			lc_error_set(&e, LC_EXIT_NOENT, 0, "%s: a tar stream needs an existing directory", path);
		if (e)
			child_end(es[1], e, id);
		if (lc_msg_send(es[1], LC_MSG_READY, 0, 0, NULL) < 0)
			_exit(1);
		if (in) {
			target_t t = { .dir = (char *)path };
			consume(mine, &t, true, spec->uid, spec->gid, &e);
		} else {
			produce(path, mine, &e);
		}
		child_end(es[1], e, id);
	}
	close(es[1]);
	close(mine);
	lc_spec_free(spec);
	int theirs = in ? pfd[1] : pfd[0];
	if (child < 0) {
		close(es[0]);
		close(theirs);
		return -1;
	}
	lc_msg_t m;
	int r = lc_msg_recv(es[0], &m);
	if (r != 1 || m.type != LC_MSG_READY) {
		close(theirs);
		close(es[0]);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
		if (r == 1 && m.type == LC_MSG_ERROR) {
			lc_error_from_buf(err, m.text, strlen(m.text));
			return -1;
		}
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: the copy could not start", id);
	}
	lc_tar_job_t *job = lc_xmalloc0(sizeof(*job));
	job->pid = child;
	job->es = es[0];
	job->id = lc_steal(id);
	*fd = theirs;
	*out = job;
	return 0;
}

int lc_sandbox_tar_finish(lc_tar_job_t *job, bool abort, lc_error_t **err)
{
	if (!job)
		return 0;
	if (abort)
		kill(job->pid, SIGKILL);
	int status = 0;
	while (waitpid(job->pid, &status, 0) < 0 && errno == EINTR)
		;
	int r = 0;
	lc_msg_t m;
	struct pollfd p = { job->es, POLLIN, 0 };
	if (!abort && poll(&p, 1, 0) > 0 && lc_msg_recv(job->es, &m) == 1 && m.type == LC_MSG_ERROR) {
		lc_error_from_buf(err, m.text, strlen(m.text));
		r = -1;
	} else if (!abort && (!WIFEXITED(status) || WEXITSTATUS(status)))
		r = lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: the copy failed", job->id);
	close(job->es);
	free(job->id);
	free(job);
	return r;
}

int lc_tar_from_host(const char *path, int fd, lc_error_t **err)
{
	return produce(path, fd, err);
}

int lc_tar_to_host(int fd, const char *dir, lc_error_t **err)
{
	target_t t;
	if (plan_target(dir, NULL, true, &t, err) < 0)
		return -1;
	int r = consume(fd, &t, false, 0, 0, err);
	target_clear(&t);
	return r;
}
