/* runner.c — the process tasks' sandboxes are made from.
 *
 * lc_run forks the process that makes a sandbox.  Called in lcd, that
 * fork copies lcd: its page tables (every thread's stack, SQLite's page
 * cache, the API's buffers), made copy-on-write for as long as the
 * sandbox's staging process and pid 1 keep the copy, so lcd pays a fault
 * for each page it writes afterwards; and the copy holds whatever lcd
 * held in memory (secrets read from lcd.db, tokens, request bodies).
 *
 * So lcd forks, at start and before its database, sockets and threads,
 * one small single-threaded process, the runner.  A task's worker sends
 * it a request (a socket of the task's own and the command's stdio, as
 * fds), the runner forks a child for the task and goes back to waiting;
 * the worker writes the spec (lc_spec_to_wire) to the child, which runs
 * it with lc_run at the task's priority and answers with the result.
 *
 * The runner dies with lcd (PDEATHSIG), and each child with the runner,
 * as lc_run in lcd's own thread did.  Should the runner be gone anyway,
 * tasks run with lc_run in lcd itself, as before, and the log says so. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lcd.h"
#include "util.h"

#define SPEC_MAX (64 << 20) /* a spec's text larger than this is refused */

/* The child's answer: as lc_run left res and err. */
struct answer {
	int ran; /* lc_run's return */
	lc_result_t res;
	int exit_code, errnum;
	char msg[4096];
};

static int send_fds(int sock, const void *buf, size_t len, const int *fds, size_t n)
{
	char ctl[CMSG_SPACE(4 * sizeof(int))];
	memset(ctl, 0, sizeof(ctl));
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	ssize_t r;
	while ((r = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return r == (ssize_t)len ? 0 : -1;
}

/* One request: its header and up to 4 fds (-1 where fewer came).  0: the
 * peer has gone. */
static ssize_t recv_fds(int sock, void *buf, size_t len, int fds[4])
{
	char ctl[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	for (int i = 0; i < 4; i++)
		fds[i] = -1;
	ssize_t r;
	while ((r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	for (struct cmsghdr *cm = r > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			memcpy(fds, CMSG_DATA(cm), (n > 4 ? 4 : n) * sizeof(int));
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

/* What the worker sends the runner with the fds: the task's priority and
 * which of the command's stdio come (a bit each). */
struct request {
	int nice;
	unsigned stdio;
};

/* The task's own process: read the spec, run it, answer, go. */
static _Noreturn void task_child(int ch, const struct request *rq, const int *stdio)
{
	signal(SIGCHLD, SIG_DFL); /* the runner's SIG_IGN would reap lc_run's children */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	prctl(PR_SET_NAME, "lcd-task", 0, 0, 0);
	(void)setpriority(PRIO_PROCESS, 0, rq->nice);
	struct answer a = { .ran = -1, .exit_code = LC_EXIT_RUNTIME };
	uint32_t len = 0;
	_cleanup_free_ char *text = NULL;
	lc_error_t *err = NULL;
	if (read_full(ch, &len, sizeof(len)) < 0 || len > SPEC_MAX || !(text = malloc((size_t)len + 1)) ||
	    read_full(ch, text, len) < 0)
		_exit(1); /* the worker has gone, or sent nothing whole: nobody to answer */
	text[len] = '\0';
	json_t *j = json_loads(text, 0, NULL);
	explicit_bzero(text, len);
	lc_spec_t *spec = j ? lc_spec_from_json(j) : NULL;
	json_decref(j);
	if (!spec) {
		snprintf(a.msg, sizeof(a.msg), "the task runner could not read the task's spec");
	} else {
		for (int i = 0; i < 3; i++)
			spec->stdio[i] = stdio[i];
		a.ran = lc_run(spec, &a.res, &err);
		if (a.ran < 0 && err) {
			a.exit_code = err->exit_code;
			a.errnum = err->errnum;
			snprintf(a.msg, sizeof(a.msg), "%s", err->msg ? err->msg : "cannot run the task");
		}
	}
	size_t off = 0;
	while (off < sizeof(a)) {
		ssize_t w = write(ch, (char *)&a + off, sizeof(a) - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
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
	for (;;) {
		struct request rq;
		int fds[4];
		ssize_t r = recv_fds(sock, &rq, sizeof(rq), fds);
		if (r == 0 || (r < 0 && errno != EINTR && errno != ENOMEM && errno != ENOBUFS))
			_exit(0); /* lcd has gone */
		if (r == (ssize_t)sizeof(rq) && fds[0] >= 0) {
			int stdio[3] = { -1, -1, -1 };
			for (int i = 0, k = 1; i < 3; i++)
				if (rq.stdio & (1u << i))
					stdio[i] = k < 4 ? fds[k++] : -1;
			pid_t pid = fork();
			if (pid == 0) {
				close(sock);
				task_child(fds[0], &rq, stdio);
			}
			/* pid < 0: the worker reads an end without an answer */
		}
		for (int i = 0; i < 4; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
}

int lcd_runner_start(lcd_t *lcd, lc_error_t **err)
{
	int sp[2];
	lcd->runner_fd = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create the task runner's socket");
	pid_t me = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(sp[0]);
		close(sp[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot fork the task runner");
	}
	if (pid == 0)
		runner_main(sp[1], me);
	close(sp[1]);
	lcd->runner_fd = sp[0];
	lcd->runner_pid = pid;
	return 0;
}

/* The runner is gone (it should not be): say so once. */
static void runner_lost(lcd_t *lcd)
{
	static bool said;
	pthread_mutex_lock(&lcd->lock);
	bool first = !said;
	said = true;
	pthread_mutex_unlock(&lcd->lock);
	if (first)
		lcd_log("the task runner (pid %d) has gone: tasks now run from lcd itself", (int)lcd->runner_pid);
}

int lcd_runner_run(lcd_t *lcd, const lc_spec_t *spec, int nice, lc_result_t *res, lc_error_t **err)
{
	int ch[2];
	if (lcd->runner_fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch) < 0)
		goto in_lcd;
	struct request rq = { .nice = nice > 19 ? 19 : nice };
	int fds[4] = { ch[1] };
	size_t n = 1;
	for (int i = 0; i < 3; i++)
		if (spec->stdio[i] >= 0) {
			rq.stdio |= 1u << i;
			fds[n++] = spec->stdio[i];
		}
	int sent = send_fds(lcd->runner_fd, &rq, sizeof(rq), fds, n);
	close(ch[1]);
	if (sent < 0) {
		close(ch[0]);
		runner_lost(lcd);
		goto in_lcd;
	}
	json_t *j = lc_spec_to_wire(spec);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	size_t len = text ? strlen(text) : 0;
	uint32_t len32 = (uint32_t)len;
	bool wrote = text && len <= SPEC_MAX && lc_write_all(ch[0], &len32, sizeof(len32)) == 0 &&
		     lc_write_all(ch[0], text, len) == 0;
	if (text) {
		explicit_bzero(text, len);
		free(text);
	}
	struct answer *a = lc_xmalloc0(sizeof(*a));
	int rc = -1;
	if (!wrote)
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot hand the task to the task runner");
	else if (read_full(ch[0], a, sizeof(*a)) < 0)
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "the task's runner process ended without a result");
	else if (a->ran < 0 && lc_error_set(err, a->exit_code, 0, "%s", a->msg) < 0 && *err)
		(*err)->errnum = a->errnum; /* a->msg already names it */
	else {
		*res = a->res;
		rc = a->ran;
	}
	close(ch[0]);
	free(a);
	return rc;

in_lcd:
	/* As lc_run's process, the worker takes the task's priority. */
	(void)setpriority(PRIO_PROCESS, 0, nice > 19 ? 19 : nice);
	int ran = lc_run(spec, res, err);
	(void)setpriority(PRIO_PROCESS, 0, lcd->nice);
	return ran;
}
