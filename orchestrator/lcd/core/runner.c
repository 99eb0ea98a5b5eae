/* runner.c — the process lcd's sandboxes are made from.
 *
 * lc_run forks the process that makes a sandbox, lc_sandbox_create the
 * sandbox's monitor, lc_sandbox_exec the helper that joins it.  Called in
 * lcd, each fork copies lcd: its page tables (every thread's stack,
 * SQLite's page cache, the API's buffers), made copy-on-write for as long
 * as the copy lives (a task's pid 1, a monitor: the sandbox's whole life),
 * so lcd pays a fault for each page it writes afterwards; and the copy
 * holds whatever lcd held in memory (secrets read from lcd.db, tokens,
 * request bodies).
 *
 * So lcd forks, at start and before its database, sockets and threads,
 * one small single-threaded process, the runner.  For a task, a create or
 * an exec, lcd sends it a request (a socket of the request's own, the
 * command's stdio and exec's cancel_fd, as fds); the runner forks a child
 * for it and goes back to waiting; lcd writes the spec (lc_spec_to_wire)
 * or the exec's options to the child, which calls liblcrun at the
 * caller's priority and answers with the result.
 *
 * The file API goes the same way: the child opens the file in the
 * sandbox (or starts its tar stream) and hands lcd the fd; a tar stream's
 * child then waits for lcd's word that the stream is done (or dropped)
 * and answers with its end.  The process that joins the sandbox and
 * reads its files (or a client's tar) is then a fork of the runner too,
 * not of lcd with lcd's secrets in its memory.
 *
 * The runner dies with lcd (PDEATHSIG), and each child with the runner,
 * as the call in lcd's own thread did.  Should the runner be gone anyway,
 * lcd calls liblcrun itself, as before, and the log says so.  So it does
 * while the runner takes nothing (stopped, or stuck): a request whose
 * child has not spoken in RUNNER_ACK_MS is made by lcd itself, and so is
 * every request after it until the runner has read what was queued. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "lcd.h"
#include "netpool.h"
#include "runner.h"
#include "sbfs.h"
#include "util.h"

#define SPEC_MAX (64 << 20) /* a spec's text larger than this is refused */
#define MAXFDS 6            /* the request's socket, stdio, exec's cancel_fd and signal_fd */
#define RUNNER_ACK_MS 3000  /* a child silent this long: the runner takes nothing */

/* The child's answer: as lc_run left res and err (an open file's fd, or
 * a tar stream's, with the answer's first bytes). */
struct answer {
	int ran; /* lc_run's return */
	lc_result_t res;
	int exit_code, errnum;
	char msg[4096];
};

/* A control buffer for SCM_RIGHTS, aligned for struct cmsghdr. */
union ctl {
	char buf[CMSG_SPACE(MAXFDS * sizeof(int))];
	struct cmsghdr align;
};

/* sendmsg of buf with the n fds: what it sent, or -1. */
static ssize_t send_fds(int sock, const void *buf, size_t len, const int *fds, size_t n, int flags)
{
	union ctl ctl;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	}
	ssize_t r;
	while ((r = sendmsg(sock, &mh, MSG_NOSIGNAL | flags)) < 0 && errno == EINTR)
		;
	return r;
}

/* send_fds of all of buf on a stream socket (what sendmsg left, written
 * after it): 0, or -1. */
static int send_all_fds(int sock, const void *buf, size_t len, const int *fds, size_t n)
{
	ssize_t r = send_fds(sock, buf, len, fds, n, 0);
	if (r < 0)
		return -1;
	return (size_t)r == len ? 0 : lc_write_all(sock, (const char *)buf + r, len - (size_t)r) < 0 ? -1 : 0;
}

/* One request: its header and up to MAXFDS fds (-1 where fewer came).  0:
 * the peer has gone. */
static ssize_t recv_fds(int sock, void *buf, size_t len, int fds[MAXFDS])
{
	union ctl ctl;
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	for (int i = 0; i < MAXFDS; i++)
		fds[i] = -1;
	ssize_t r;
	while ((r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	for (struct cmsghdr *cm = r > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			memcpy(fds, CMSG_DATA(cm), (n > MAXFDS ? MAXFDS : n) * sizeof(int));
		}
	return r;
}

static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t r = read(fd, (char *)buf + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* What the caller sends the runner with the fds: what to do, at which
 * priority, and which fds come after the request's socket (a bit each:
 * stdio 0-2, then exec's cancel_fd and signal_fd). */
enum { RUN, CREATE, EXEC, START, OPEN, TAR, FS, WATCH };
struct request {
	int kind;
	int nice;
	unsigned fds;
};

/* lc_sandbox_exec's options as text (stdio and cancel_fd go as fds). */
static json_t *exec_to_json(const char *id, const lc_exec_opts_t *o)
{
	return json_pack("{s:s, s:o, s:o, s:o, s:b, s:I, s:I, s:b, s:b, s:b, s:i, s:b, s:b}", "id", id, "argv",
			 lc_strv_to_json(o->argv), "env", lc_strv_to_json(o->env), "workdir",
			 o->workdir ? json_string(o->workdir) : json_null(), "user_set", o->user_set, "uid",
			 (json_int_t)o->uid, "gid", (json_int_t)o->gid, "interactive", o->interactive, "tty", o->tty,
			 "detach", o->detach, "timeout", o->timeout, "forward_signals", o->forward_signals,
			 "new_pgroup", o->new_pgroup);
}

/* Every string in j zeroed (secrets: env, secret_env), before it goes. */
static void wipe(json_t *j)
{
	size_t i;
	const char *k;
	json_t *v;
	if (json_is_string(j))
		explicit_bzero((char *)json_string_value(j), json_string_length(j));
	else if (json_is_array(j))
		json_array_foreach(j, i, v)
			wipe(v);
	else if (json_is_object(j))
		json_object_foreach(j, k, v)
			wipe(v);
}

static bool jbool(json_t *j, const char *k)
{
	return json_is_true(json_object_get(j, k));
}


/* The exec a request describes (j is wiped before it runs); 0, or -1
 * with *err. */
static int exec_from_json(json_t *j, const int *fds, lc_result_t *res, lc_error_t **err)
{
	const char *v = lc_json_str(j, "id");
	_cleanup_free_ char *id = v ? strdup(v) : NULL;
	v = lc_json_str(j, "workdir");
	_cleanup_free_ char *workdir = v ? strdup(v) : NULL;
	lc_exec_opts_t o = { .argv = lc_json_to_strv(json_object_get(j, "argv")),
			     .env = lc_json_to_strv(json_object_get(j, "env")),
			     .workdir = workdir,
			     .user_set = jbool(j, "user_set"),
			     .uid = (uid_t)json_integer_value(json_object_get(j, "uid")),
			     .gid = (gid_t)json_integer_value(json_object_get(j, "gid")),
			     .interactive = jbool(j, "interactive"), .tty = jbool(j, "tty"), .detach = jbool(j, "detach"),
			     .timeout = (int)json_integer_value(json_object_get(j, "timeout")),
			     .stdio = { fds[0], fds[1], fds[2] }, .forward_signals = jbool(j, "forward_signals"),
			     .cancel_fd = fds[3], .signal_fd = fds[4], .new_pgroup = jbool(j, "new_pgroup") };
	wipe(j);
	int rc = id && o.argv ? lc_sandbox_exec(id, &o, res, err)
			      : lc_error_set(err, LC_EXIT_RUNTIME, 0, "the runner could not read the exec's options");
	for (size_t i = 0; o.env && o.env[i]; i++)
		explicit_bzero(o.env[i], strlen(o.env[i]));
	lc_strv_free(o.env);
	lc_strv_free(o.argv);
	return rc;
}

/* Write the answer (a->ran and, where it failed, err), with fd (-1:
 * none), which is closed then. */
static void answer(int ch, struct answer *a, lc_error_t *err, int fd)
{
	if (a->ran < 0 && err) {
		a->exit_code = err->exit_code;
		a->errnum = err->errnum;
		snprintf(a->msg, sizeof(a->msg), "%s", err->msg ? err->msg : "failed");
	}
	lc_error_free(err);
	(void)send_all_fds(ch, a, sizeof(*a), &fd, fd >= 0);
	if (fd >= 0)
		close(fd);
}

/* A path goes as hex: a file's name need not be UTF-8, JSON's strings
 * must be (a request that cannot be written is one lcd would make
 * itself). */
static char *hex_of(const char *s)
{
	size_t n = strlen(s);
	char *h = lc_xmalloc0(2 * n + 1);
	lc_hex(s, n, h);
	return h;
}

static char *unhex(const char *h)
{
	size_t n = h ? strlen(h) : 1;
	if (n % 2)
		return NULL;
	char *s = lc_xmalloc0(n / 2 + 1);
	for (size_t i = 0; i < n / 2; i++) {
		static const char digits[] = "0123456789abcdef";
		const char *hi = memchr(digits, h[2 * i], 16), *lo = memchr(digits, h[2 * i + 1], 16);
		if (!hi || !lo || (hi == digits && lo == digits)) {
			free(s);
			return NULL;
		}
		s[i] = (char)((hi - digits) << 4 | (lo - digits));
	}
	return s;
}

/* A file request (j: id, path, write and mode, or in for a tar stream):
 * the file's fd (or the stream's) goes back with the answer.  A file is
 * opened by this process itself, which joins the sandbox for it (one
 * fork fewer than lc_sandbox_open_file's; it answers from there and
 * ends); a stream has its own process, as lc_sandbox_tar_start makes it.  A stream's
 * process then waits for lcd's word: 'F' it read or wrote the stream to
 * its end, anything else (or nothing, lcd gone) drop it; and answers
 * again with the sandbox side's account. */
static _Noreturn void upload_child(int ch, json_t *j);
static _Noreturn void file_child(int ch, int kind, json_t *j)
{
	if (kind == OPEN && jbool(j, "upload"))
		upload_child(ch, j);
	struct answer a = { .ran = -1, .exit_code = LC_EXIT_RUNTIME };
	lc_error_t *err = NULL;
	const char *id = lc_json_str(j, "id");
	_cleanup_free_ char *path = unhex(lc_json_str(j, "path"));
	int fd = -1;
	lc_tar_job_t *job = NULL;
	if (!id || !path)
		lc_error_set(&err, LC_EXIT_RUNTIME, 0, "the runner could not read its request");
	else if (kind == OPEN)
		a.ran = fd = lc_sandbox_open_file_here(id, path, jbool(j, "write") ? O_WRONLY : O_RDONLY,
						       (mode_t)json_integer_value(json_object_get(j, "mode")), NULL, &err);
	else
		a.ran = lc_sandbox_tar_start(id, path, jbool(j, "in"), &fd, &job, &err);
	if (a.ran > 0)
		a.ran = 0;
	answer(ch, &a, err, fd); /* the stream's end: lcd's only, now */
	if (job) {
		char how = 0;
		while (read(ch, &how, 1) < 0 && errno == EINTR)
			;
		struct answer end = { .exit_code = LC_EXIT_RUNTIME };
		err = NULL;
		end.ran = lc_sandbox_tar_finish(job, how != 'F', &err);
		answer(ch, &end, err, -1);
	}
	_exit(0);
}

/* An upload's file, made in the sandbox (this process joined it) under a
 * temporary name beside path's file: ".NAME.upload-XXXXXX", the sandbox
 * user's, with the mode asked for.  A symlink at path is followed (in the
 * sandbox's root) as a write in place would: *target is where the file
 * goes at the end. */
static int upload_temp(const char *path, mode_t mode, const lc_spec_t *spec, char **target, char **tmp,
		       lc_error_t **err)
{
	struct stat st;
	char *t = NULL;
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		if (!(t = realpath(path, NULL)))
			return lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno,
					    "%s: a symlink to nothing that can be written", path);
	} else {
		t = strdup(path);
	}
	if (stat(t, &st) == 0 && (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode))) {
		lc_error_set(err, S_ISDIR(st.st_mode) ? LC_EXIT_USAGE : LC_EXIT_INVALID, 0,
			     S_ISDIR(st.st_mode) ? "%s is a directory" : "%s is not a regular file", path);
		free(t);
		return -1;
	}
	_cleanup_free_ char *d = strdup(t), *b = strdup(t);
	/* (a name of NAME_MAX bytes leaves no room for the rest: its start) */
	char *name = lc_strdup_printf("%s/.%.200s.upload-XXXXXX", dirname(d), basename(b));
	int fd = mkostemp(name, O_CLOEXEC);
	if (fd < 0) {
		int e = errno, code = LC_EXIT_RUNTIME;
		if (e == ENOENT || e == ENOTDIR)
			code = LC_EXIT_NOENT;
		else if (e == EACCES || e == EPERM || e == EROFS)
			code = LC_EXIT_PERM;
		lc_error_set(err, code, e, "%s", path);
		free(name);
		free(t);
		return -1;
	}
	/* the owner first: a chown clears the setuid and setgid bits */
	if (fchown(fd, spec->uid, spec->gid) < 0 || fchmod(fd, mode & 07777) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot give %s to uid %u with mode %04o", path,
			     (unsigned)spec->uid, (unsigned)(mode & 07777));
		unlink(name);
		close(fd);
		free(name);
		free(t);
		return -1;
	}
	*target = t;
	*tmp = name;
	return fd;
}

/* An upload (OPEN for writing): the file is written under a temporary
 * name (upload_temp) and put in place only when lcd's word says the body
 * came whole ('F'): synced, then renamed over path, so that a reader (or
 * a crash) sees the old file or the new one, never a part.  Any other
 * word, or none (lcd gone: this process does not die with the runner, to
 * be left to clean up), removes the temporary file.  Answers twice, as a
 * tar stream's process does. */
static _Noreturn void upload_child(int ch, json_t *j)
{
	prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
	struct answer a = { .ran = -1, .exit_code = LC_EXIT_RUNTIME };
	lc_error_t *err = NULL;
	lc_spec_t *spec = NULL;
	const char *id = lc_json_str(j, "id");
	_cleanup_free_ char *path = unhex(lc_json_str(j, "path"));
	_cleanup_free_ char *target = NULL, *tmp = NULL;
	int fd = -1;
	if (!id || !path)
		lc_error_set(&err, LC_EXIT_RUNTIME, 0, "the runner could not read its request");
	else if (lc_sandbox_join_here(id, &spec, &err) == 0 &&
		 (fd = upload_temp(path, (mode_t)json_integer_value(json_object_get(j, "mode")), spec, &target, &tmp,
				   &err)) < 0)
		lc_error_wrap(&err, "in sandbox %s", id);
	lc_spec_free(spec);
	if (fd >= 0)
		a.ran = 0;
	answer(ch, &a, err, fd >= 0 ? dup(fd) : -1);
	if (fd < 0)
		_exit(0);
	char how = 0;
	while (read(ch, &how, 1) < 0 && errno == EINTR)
		;
	struct answer end = { .ran = 0, .exit_code = LC_EXIT_RUNTIME };
	err = NULL;
	if (how == 'F' && fsync(fd) < 0)
		end.ran = lc_error_set(&err, LC_EXIT_RUNTIME, errno, "writing %s in sandbox %s", path, id);
	else if (how == 'F' && rename(tmp, target) < 0)
		end.ran = lc_error_set(&err, LC_EXIT_RUNTIME, errno, "cannot put %s in place in sandbox %s", path, id);
	if (how != 'F' || end.ran < 0)
		unlink(tmp);
	close(fd);
	answer(ch, &end, err, -1);
	_exit(0);
}

/* An operation on a sandbox's files (sbfs.c), by this process, which
 * joins the sandbox for it: the answer (with a file's fd for "read" and
 * "write"), then the result as a length and JSON text.  A watch answers,
 * then writes its events on ch, a JSON text a line, until lcd hangs up. */
static _Noreturn void fs_child(int ch, int kind, json_t *j)
{
	struct answer a = { .ran = -1, .exit_code = LC_EXIT_RUNTIME };
	lc_error_t *err = NULL;
	lc_spec_t *spec = NULL;
	json_t *out = NULL;
	int fd = -1;
	const char *id = lc_json_str(j, "id");
	if (!id)
		lc_error_set(&err, LC_EXIT_RUNTIME, 0, "the runner could not read its request");
	else if (lc_sandbox_join_here(id, &spec, &err) == 0)
		a.ran = kind == WATCH ? lcd_sbfs_watch_start(j, spec, &fd, &err) : lcd_sbfs_op(j, spec, &out, &fd, &err);
	bool ok = a.ran == 0;
	answer(ch, &a, err, kind == WATCH ? -1 : fd);
	if (ok && kind == WATCH)
		lcd_sbfs_watch_run(fd, ch, j); /* until lcd hangs up */
	if (ok) {
		char *text = json_dumps(out ? out : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
		uint32_t len = text ? (uint32_t)strlen(text) : 0;
		if (lc_write_all(ch, &len, sizeof(len)) == 0 && len)
			(void)lc_write_all(ch, text, len);
		free(text);
	}
	_exit(0);
}

/* The request's own process: read the spec, run it (or create the
 * sandbox: its id comes back in res.id; or exec in one), answer, go. */
static _Noreturn void task_child(int ch, const struct request *rq, pid_t lcd_pid)
{
	signal(SIGCHLD, SIG_DFL); /* the runner's SIG_IGN would reap lc_run's children */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	static const char *const names[] = { "lcd-task", "lcd-create", "lcd-exec", "lcd-start", "lcd-open", "lcd-tar",
					     "lcd-fs", "lcd-watch" };
	prctl(PR_SET_NAME, names[rq->kind >= 0 && rq->kind <= WATCH ? rq->kind : RUN], 0, 0, 0);
	struct answer a = { .ran = -1, .exit_code = LC_EXIT_RUNTIME };
	uint32_t len = 0;
	_cleanup_free_ char *text = NULL;
	lc_error_t *err = NULL;
	/* The word that this process exists: until it comes, lcd may still
	 * make the call itself (the runner died with the request, or took
	 * nothing in RUNNER_ACK_MS).  At the runner's priority: a task's
	 * lower one could keep it from coming in time. */
	if (write(ch, "A", 1) != 1)
		_exit(1);
	(void)setpriority(PRIO_PROCESS, 0, rq->nice);
	/* The command's stdio and exec's cancel_fd (fds: -1 where none came)
	 * come with the length of the text: never queued at the runner,
	 * where a request lcd made itself would leave a copy of them. */
	int got[MAXFDS], fds[5] = { -1, -1, -1, -1, -1 };
	ssize_t r = recv_fds(ch, &len, sizeof(len), got);
	for (int i = 0, k = 0; i < 5; i++)
		if (rq->fds & (1u << i))
			fds[i] = got[k++];
	if (r <= 0 || read_full(ch, (char *)&len + r, sizeof(len) - (size_t)r) < 0 || len > SPEC_MAX ||
	    !(text = malloc((size_t)len + 1)) || read_full(ch, text, len) < 0)
		_exit(1); /* the caller has gone, or sent nothing whole: nobody to answer */
	text[len] = '\0';
	json_t *j = json_loads(text, 0, NULL);
	explicit_bzero(text, len);
	lc_spec_t *spec = j && (rq->kind == RUN || rq->kind == CREATE) ? lc_spec_from_json(j) : NULL;
	if (spec)
		wipe(j); /* the spec has its own copies */
	if ((rq->kind == OPEN || rq->kind == TAR) && j)
		file_child(ch, rq->kind, j);
	if ((rq->kind == FS || rq->kind == WATCH) && j)
		fs_child(ch, rq->kind, j);
	if (rq->kind == EXEC && j) {
		a.ran = exec_from_json(j, fds, &a.res, &err);
	} else if (rq->kind == START && lc_json_str(j, "id")) {
		a.ran = lc_sandbox_start(lc_json_str(j, "id"), &err);
	} else if (spec) {
		for (int i = 0; i < 3; i++)
			spec->stdio[i] = fds[i];
		/* A task with the model gateway comes with the address lcd's
		 * worker leased for it (gateway.c): lc_run uses a lease its own
		 * process took, so this one takes it over. */
		bool leased = rq->kind == RUN && spec->id && spec->net.mode != LC_NET_NONE &&
			      lc_netpool_take_over(spec->id, lcd_pid, NULL) == 0;
		a.ran = rq->kind == CREATE ? lc_sandbox_create(spec, a.res.id, &err) : lc_run(spec, &a.res, &err);
		lc_lease_t lease;
		if (a.ran < 0 && leased && lc_netpool_adopt(spec->id, &lease, NULL) == 0)
			lc_netpool_release(spec->id, NULL); /* never used: lc_run failed before the network */
	} else {
		lc_error_set(&err, LC_EXIT_RUNTIME, 0, "the runner could not read its request");
	}
	json_decref(j);
	/* The command's pipes see their end as the command's end, not this
	 * process's. */
	for (int i = 0; i < 5; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	answer(ch, &a, err, -1);
	_exit(0);
}

static _Noreturn void runner_main(int sock, pid_t lcd_pid)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != lcd_pid)
		_exit(0);
	prctl(PR_SET_NAME, "lcd-runner", 0, 0, 0);
	int keep[] = { sock };
	lc_close_fds_except(keep, 1);
	signal(SIGCHLD, SIG_IGN); /* task children reap themselves */
	/* lcd's own threads, the workers that ran lc_run among them, block
	 * lcd_stop_signals (lcd's main thread takes them): so do the runner
	 * (blocked since before the fork) and its children, a terminal's ^C
	 * reaching the whole group included. */
	for (;;) {
		struct request rq;
		int fds[MAXFDS];
		ssize_t r = recv_fds(sock, &rq, sizeof(rq), fds);
		if (r == 0 || (r < 0 && errno != EINTR && errno != ENOMEM && errno != ENOBUFS))
			_exit(0); /* lcd has gone */
		if (r == (ssize_t)sizeof(rq) && fds[0] >= 0) {
			pid_t pid = fork();
			if (pid == 0) {
				close(sock);
				for (int i = 1; i < MAXFDS; i++)
					if (fds[i] >= 0)
						close(fds[i]);
				task_child(fds[0], &rq, lcd_pid);
			}
			/* pid < 0: the worker reads an end without an answer */
		}
		for (int i = 0; i < MAXFDS; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
}

int lcd_runner_start(lcd_t *lcd, lc_error_t **err)
{
	int sp[2];
	lcd->runner_fd = -1;
	/* fds 0-2 open (on /dev/null if lcd came without them): a request's
	 * fds are never taken for stdio there, nor stdio "-1" for them. */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0) {
			int null = open("/dev/null", O_RDWR);
			if (null >= 0 && null != fd) {
				dup2(null, fd);
				close(null);
			}
		}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create the runner's socket");
	/* Blocked across the fork: a ^C to the group before the runner blocks
	 * them itself would end it. */
	sigset_t sigs, old;
	lcd_stop_signals(&sigs);
	sigprocmask(SIG_BLOCK, &sigs, &old);
	pid_t me = getpid();
	pid_t pid = fork();
	if (pid != 0)
		sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		close(sp[0]);
		close(sp[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot fork the runner");
	}
	if (pid == 0)
		runner_main(sp[1], me);
	close(sp[1]);
	lcd->runner_fd = sp[0];
	lcd->runner_pid = pid;
	return 0;
}

/* A request with no command's stdio (start, a file) */
static const int no_stdio[3] = { -1, -1, -1 };

/* The calling thread's nice value: what a process it forked would have. */
static int caller_nice(const lcd_t *lcd)
{
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, 0);
	return nice == -1 && errno ? lcd->nice : nice;
}

/* A request the runner did not take: if it has ended (it should not),
 * say so once and ask it nothing more; else it could not fork this once. */
static void runner_check(lcd_t *lcd)
{
	pid_t r;
	while ((r = waitpid(lcd->runner_pid, NULL, WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == 0 || __atomic_exchange_n(&lcd->runner_gone, true, __ATOMIC_SEQ_CST))
		return;
	lcd_log("the runner (pid %d) has gone: sandboxes are now made from lcd itself", (int)lcd->runner_pid);
}

/* Stalled: a request's child was silent for RUNNER_ACK_MS, and requests
 * are still queued unread on the runner's socket.  Once the runner has
 * read them all (their children find no payload and end), it is asked
 * again. */
static bool runner_stalled(lcd_t *lcd)
{
	if (!__atomic_load_n(&lcd->runner_stalled, __ATOMIC_SEQ_CST))
		return false;
	int queued = 0;
	if (ioctl(lcd->runner_fd, SIOCOUTQ, &queued) == 0 && queued > 0)
		return true;
	if (__atomic_exchange_n(&lcd->runner_stalled, false, __ATOMIC_SEQ_CST))
		lcd_log("the runner (pid %d) reads its requests again", (int)lcd->runner_pid);
	return false;
}

/* Hand a request to a child of the runner.  1: taken, *ch the request's
 * socket, to read the answer from; -1: taken, but the payload could not
 * go (*err; the child does nothing); 0: not taken, the caller does it
 * itself (the runner is gone, or could not fork this once). */
static int hand_over(lcd_t *lcd, int kind, int nice, json_t *payload, const int stdio[3], int cancel_fd,
		     int signal_fd, int *chp, lc_error_t **err)
{
	int ch[2];
	if (lcd->runner_fd < 0 || __atomic_load_n(&lcd->runner_gone, __ATOMIC_SEQ_CST) || !payload ||
	    runner_stalled(lcd) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch) < 0)
		return 0;
	struct request rq = { .kind = kind, .nice = nice > 19 ? 19 : nice };
	int fds[5], given[5] = { stdio[0], stdio[1], stdio[2], cancel_fd, signal_fd };
	size_t n = 0;
	for (int i = 0; i < 5; i++)
		if (given[i] >= 0) {
			rq.fds |= 1u << i;
			fds[n++] = given[i];
		}
	/* Never blocking: a runner that reads nothing fills its socket. */
	int sent = send_fds(lcd->runner_fd, &rq, sizeof(rq), &ch[1], 1, MSG_DONTWAIT) == (ssize_t)sizeof(rq) ? 0 : -1;
	int send_errno = errno;
	close(ch[1]);
	/* No word from the request's process: the runner did not take it
	 * (gone, no fork, or not in RUNNER_ACK_MS); nothing was done, the
	 * caller does it.  A child that comes later finds this end closed
	 * before any payload and does nothing either. */
	char ack;
	struct pollfd p = { ch[0], POLLIN, 0 };
	int ready = 0;
	if (sent == 0)
		while ((ready = poll(&p, 1, RUNNER_ACK_MS)) < 0 && errno == EINTR)
			;
	if (sent < 0 || ready <= 0 || read(ch[0], &ack, 1) != 1) {
		close(ch[0]);
		bool full = sent < 0 && (send_errno == EAGAIN || send_errno == EWOULDBLOCK);
		if (((sent == 0 && ready == 0) || full) &&
		    !__atomic_exchange_n(&lcd->runner_stalled, true, __ATOMIC_SEQ_CST))
			lcd_log("the runner (pid %d) took no request in %d s: sandboxes are made from lcd itself until it "
				"reads its queue", (int)lcd->runner_pid, RUNNER_ACK_MS / 1000);
		if (sent == 0 || send_errno == EPIPE || send_errno == ECONNRESET || send_errno == ECONNREFUSED)
			runner_check(lcd);
		return 0;
	}
	char *text = json_dumps(payload, JSON_COMPACT);
	size_t len = text ? strlen(text) : 0;
	uint32_t len32 = (uint32_t)len;
	int wrote = !text || len > SPEC_MAX ? -1 : 0;
	if (wrote == 0 && (send_all_fds(ch[0], &len32, sizeof(len32), fds, n) < 0 || lc_write_all(ch[0], text, len) < 0))
		wrote = errno;
	if (text) {
		explicit_bzero(text, len);
		free(text);
	}
	if (wrote) {
		close(ch[0]);
		lc_error_set(err, LC_EXIT_RUNTIME, wrote > 0 ? wrote : 0, "cannot hand the request to lcd's runner");
		return -1;
	}
	*chp = ch[0];
	return 1;
}

/* The child's answer on ch: 0 or -1 in *rc (its error in *err), the fd
 * that came with it in *fd (if fd; -1: none). */
static void read_answer(int ch, lc_result_t *res, int *fd, int *rc, lc_error_t **err)
{
	struct answer *a = lc_xmalloc0(sizeof(*a));
	int got[MAXFDS];
	ssize_t r = recv_fds(ch, a, sizeof(*a), got);
	for (int i = 0; i < MAXFDS; i++)
		if (got[i] >= 0 && (i > 0 || !fd))
			close(got[i]);
	if (fd)
		*fd = got[0];
	*rc = -1;
	if (r <= 0 || read_full(ch, (char *)a + r, sizeof(*a) - (size_t)r) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "lcd's runner process ended without a result");
	} else if (a->ran < 0) {
		if (err && !*err && lc_error_set(err, a->exit_code, 0, "%s", a->msg) < 0 && *err)
			(*err)->errnum = a->errnum; /* a->msg already names it */
	} else {
		if (res)
			*res = a->res;
		*rc = a->ran;
	}
	if (*rc < 0 && fd && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	free(a);
}

/* 1: done by a child of the runner (0 or -1 in *rc, *err); 0: not, the
 * caller does it itself (the runner is gone, or could not take it). */
static int ask(lcd_t *lcd, int kind, int nice, json_t *payload, const int stdio[3], int cancel_fd, int signal_fd,
	       lc_result_t *res, int *rc, lc_error_t **err)
{
	int ch = -1;
	int h = hand_over(lcd, kind, nice, payload, stdio, cancel_fd, signal_fd, &ch, err);
	if (h <= 0) {
		*rc = -1;
		return -h;
	}
	read_answer(ch, res, NULL, rc, err);
	close(ch);
	return 1;
}

int lcd_runner_run(lcd_t *lcd, const lc_spec_t *spec, int nice, lc_result_t *res, lc_error_t **err)
{
	int rc;
	_cleanup_json_ json_t *wire = lc_spec_to_wire(spec);
	if (ask(lcd, RUN, nice, wire, spec->stdio, -1, -1, res, &rc, err))
		return rc;
	/* As lc_run's process, the worker takes the task's priority. */
	(void)setpriority(PRIO_PROCESS, 0, nice > 19 ? 19 : nice);
	rc = lc_run(spec, res, err);
	(void)setpriority(PRIO_PROCESS, 0, lcd->nice);
	return rc;
}

int lcd_runner_create(lcd_t *lcd, const lc_spec_t *spec, char id[LC_ID_LEN + 1], lc_error_t **err)
{
	/* The monitor runs at the calling thread's priority, as it would
	 * forked from it. */
	int rc;
	lc_result_t res;
	memset(&res, 0, sizeof(res));
	_cleanup_json_ json_t *wire = lc_spec_to_wire(spec);
	if (ask(lcd, CREATE, caller_nice(lcd), wire, spec->stdio, -1, -1, &res, &rc, err)) {
		if (rc == 0)
			memcpy(id, res.id, LC_ID_LEN + 1);
		return rc;
	}
	return lc_sandbox_create(spec, id, err);
}

int lcd_runner_exec(lcd_t *lcd, const char *id, const lc_exec_opts_t *opts, lc_result_t *res, lc_error_t **err)
{
	int rc;
	_cleanup_json_ json_t *j = exec_to_json(id, opts);
	if (ask(lcd, EXEC, caller_nice(lcd), j, opts->stdio, opts->cancel_fd > 0 ? opts->cancel_fd : -1,
		opts->signal_fd > 0 ? opts->signal_fd : -1, res, &rc, err))
		return rc;
	return lc_sandbox_exec(id, opts, res, err);
}

int lcd_runner_start_sandbox(lcd_t *lcd, const char *id, lc_error_t **err)
{
	int rc;
	lc_result_t res;
	_cleanup_json_ json_t *j = json_pack("{s:s}", "id", id);
	if (ask(lcd, START, caller_nice(lcd), j, no_stdio, -1, -1, &res, &rc, err))
		return rc;
	return lc_sandbox_start(id, err);
}

int lcd_runner_open_file(lcd_t *lcd, const char *id, const char *path, int flags, mode_t mode, struct stat *st,
			 lc_error_t **err)
{
	bool wr = (flags & O_ACCMODE) == O_WRONLY;
	_cleanup_free_ char *hex = hex_of(path ? path : "");
	_cleanup_json_ json_t *j = json_pack("{s:s, s:s, s:b, s:i}", "id", id, "path", hex, "write", wr, "mode",
					     (int)mode);
	int ch = -1, rc, fd = -1;
	int h = hand_over(lcd, OPEN, caller_nice(lcd), j, no_stdio, -1, -1, &ch, err);
	if (h < 0)
		return -1;
	if (h == 0)
		return lc_sandbox_open_file(id, path, flags, mode, st, err);
	read_answer(ch, NULL, &fd, &rc, err);
	close(ch);
	/* What the file is, as lcd sees it (not a stat made in the sandbox) */
	struct stat mine;
	if (rc == 0 && (fd < 0 || fstat(fd, &mine) < 0 || !S_ISREG(mine.st_mode)))
		rc = lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: cannot open %s", id, path);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (st)
		*st = mine;
	return fd;
}

/* A tar stream: through a child of the runner (ch, the stream's own
 * socket) or, the runner gone, lcd's own (job). */
struct lcd_tar {
	int ch;
	lc_tar_job_t *job;
};

int lcd_runner_tar_start(lcd_t *lcd, const char *id, const char *path, bool in, int *fd, lcd_tar_t **out,
			 lc_error_t **err)
{
	_cleanup_free_ char *hex = hex_of(path ? path : "");
	_cleanup_json_ json_t *j = json_pack("{s:s, s:s, s:b}", "id", id, "path", hex, "in", in);
	int ch = -1, rc;
	*fd = -1;
	*out = NULL;
	int h = hand_over(lcd, TAR, caller_nice(lcd), j, no_stdio, -1, -1, &ch, err);
	if (h < 0)
		return -1;
	lcd_tar_t *t = lc_xmalloc0(sizeof(*t));
	t->ch = -1;
	if (h == 0) {
		if (lc_sandbox_tar_start(id, path, in, fd, &t->job, err) < 0) {
			free(t);
			return -1;
		}
		*out = t;
		return 0;
	}
	read_answer(ch, NULL, fd, &rc, err);
	if (rc == 0 && *fd < 0)
		rc = lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: cannot start a tar stream of %s", id, path);
	if (rc < 0) {
		close(ch);
		free(t);
		return -1;
	}
	t->ch = ch;
	*out = t;
	return 0;
}

static int fs_ask(lcd_t *lcd, int kind, json_t *j, int *ch, lc_error_t **err);

int lcd_runner_upload_start(lcd_t *lcd, const char *id, const char *path, mode_t mode, int *fd, lcd_tar_t **out,
			    lc_error_t **err)
{
	_cleanup_free_ char *hex = hex_of(path ? path : "");
	_cleanup_json_ json_t *j = json_pack("{s:s, s:s, s:b, s:b, s:i}", "id", id, "path", hex, "write", true,
					     "upload", true, "mode", (int)mode);
	int ch = -1, rc;
	*fd = -1;
	*out = NULL;
	if (fs_ask(lcd, OPEN, j, &ch, err) < 0)
		return -1;
	read_answer(ch, NULL, fd, &rc, err);
	struct stat st;
	if (rc == 0 && (*fd < 0 || fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode)))
		rc = lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: cannot open %s", id, path);
	if (rc < 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		close(ch);
		return -1;
	}
	lcd_tar_t *t = lc_xmalloc0(sizeof(*t));
	t->ch = ch;
	*out = t;
	return 0;
}

int lcd_runner_tar_finish(lcd_tar_t *t, bool abort, lc_error_t **err)
{
	if (!t)
		return 0;
	int rc = 0;
	if (t->job) {
		rc = lc_sandbox_tar_finish(t->job, abort, err);
	} else {
		char how = abort ? 'X' : 'F';
		if (write(t->ch, &how, 1) != 1)
			rc = lc_error_set(err, LC_EXIT_RUNTIME, errno, "lcd's runner process ended before the tar stream's end");
		else
			read_answer(t->ch, NULL, NULL, &rc, abort ? NULL : err);
		close(t->ch);
	}
	free(t);
	return rc;
}

/* The fs request j (or an upload's file: OPEN), made where the runner
 * cannot: by a grandchild of lcd (its parent ends at once, so nobody must
 * reap it) on one end of a socket pair; the other end comes back in *chp,
 * as the runner's would. */
static int fs_fork(int kind, json_t *j, int *chp, lc_error_t **err)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a socket pair");
	pid_t pid = fork();
	if (pid == 0) {
		close(sp[0]);
		if (fork() == 0) {
			signal(SIGPIPE, SIG_IGN);
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			if (kind == OPEN)
				upload_child(sp[1], j);
			fs_child(sp[1], kind, j);
		}
		_exit(0);
	}
	int e = errno;
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot fork");
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	*chp = sp[0];
	return 0;
}

static int fs_ask(lcd_t *lcd, int kind, json_t *j, int *ch, lc_error_t **err)
{
	int h = hand_over(lcd, kind, caller_nice(lcd), j, no_stdio, -1, -1, ch, err);
	if (h < 0)
		return -1;
	if (h == 0 && fs_fork(kind, j, ch, err) < 0)
		return -1;
	return 0;
}

int lcd_runner_fs(lcd_t *lcd, const char *id, json_t *op, json_t **out, int *fd, lc_error_t **err)
{
	*out = NULL;
	if (fd)
		*fd = -1;
	json_object_set_new(op, "id", json_string(id));
	int ch = -1, rc, got = -1;
	if (fs_ask(lcd, FS, op, &ch, err) < 0)
		return -1;
	read_answer(ch, NULL, &got, &rc, err);
	uint32_t len = 0;
	char *text = NULL;
	if (rc == 0 && (read_full(ch, &len, sizeof(len)) < 0 || len > SPEC_MAX || !(text = lc_xmalloc0((size_t)len + 1)) ||
			read_full(ch, text, len) < 0))
		rc = lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: the file operation ended without a result", id);
	close(ch);
	if (rc == 0 && !(*out = json_loads(text, JSON_DECODE_ANY, NULL)))
		rc = lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: the file operation's result is not JSON", id);
	free(text);
	if (rc < 0 || !fd) {
		if (got >= 0)
			close(got);
		return rc < 0 ? -1 : 0;
	}
	*fd = got;
	return 0;
}

int lcd_runner_watch(lcd_t *lcd, const char *id, json_t *op, int *fd, lc_error_t **err)
{
	*fd = -1;
	json_object_set_new(op, "id", json_string(id));
	int ch = -1, rc;
	if (fs_ask(lcd, WATCH, op, &ch, err) < 0)
		return -1;
	read_answer(ch, NULL, NULL, &rc, err);
	if (rc < 0) {
		close(ch);
		return -1;
	}
	*fd = ch;
	return 0;
}
