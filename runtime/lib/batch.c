/* batch.c — lcrun fork's sandboxes, all started and watched by one process.
 *
 * Each sandbox is made exactly as lc_run makes one: lc_sb_begin and
 * lc_sb_step are lc_sb_start's two halves, and the waiting is lc_sb_wait's
 * parts.  Only the waiting is shared: instead of a process of its own per
 * sandbox that ran lc_run and waited there (a fork of lcrun, its page
 * faults and its exit for every sandbox), the caller begins each sandbox
 * itself and serves all of them from one poll.  Their staging processes
 * and pid 1s are its children; each pid 1 dies when the caller does (its
 * end of the sync socket closes, init.c), as a run's dies with lcrun.
 *
 * The loop answers whatever is ready first (a staging process waiting for
 * its maps or its GO, a pid 1 that ended) and begins the next sandbox only
 * when nothing is: a sandbox already on its way is never kept waiting
 * for one that has not begun.
 *
 * A batch with a network is the exception: it keeps a process per
 * sandbox (run_forked, below). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "sandbox_priv.h"
#include "util.h"

typedef enum { SLOT_IDLE, SLOT_STARTING, SLOT_RUNNING, SLOT_DONE } slot_state_t;

typedef struct {
	lc_sb_t c;
	lc_result_t res;
	slot_state_t st;
	int sync_fd;      /* c.sp[0] while pid 1 may still speak, then -1 */
	sigset_t pending; /* signals that came before it ran */
} slot_t;

typedef struct {
	const lc_spec_t *spec;
	const lc_run_shared_t *sh;
	slot_t *slots;
	long count;
	lc_batch_done_fn done;
	void *ud;
	int *foreign; /* room for foreign_fds(): five for each sandbox */
	size_t n_foreign;
	pid_t *exiting; /* staging processes of started sandboxes, to reap */
	long n_exiting;
} batch_t;

/* Reap the staging processes in b->exiting that are done (all of them,
 * waiting, with wait). */
static void reap_exiting(batch_t *b, bool wait)
{
	long k = 0;
	for (long i = 0; i < b->n_exiting; i++) {
		pid_t r;
		while ((r = waitpid(b->exiting[i], NULL, wait ? 0 : WNOHANG)) < 0 && errno == EINTR)
			;
		if (r == 0)
			b->exiting[k++] = b->exiting[i];
	}
	b->n_exiting = k;
}

/* A sandbox that has no result: {"error", "exit_code"}. */
static json_t *error_result(const char *msg, int code)
{
	return json_pack("{s:s, s:i}", "error", msg, "exit_code", code);
}

/* A sandbox's entry in the results once it is torn down: its result, or
 * why it could not be made (err, freed).  Never NULL. */
static json_t *result_json(bool started, lc_error_t *err, const lc_result_t *res)
{
	json_t *j = started ? lc_result_to_json(res)
			    : error_result(err && err->msg ? err->msg : "failed", err ? err->exit_code : LC_EXIT_RUNTIME);
	lc_error_free(err);
	return j ? j : error_result("out of memory", LC_EXIT_RUNTIME);
}

static void finish(batch_t *b, long i, bool started, lc_error_t *err)
{
	slot_t *s = &b->slots[i];
	lc_sb_run_finish(&s->c, &s->res, started);
	s->st = SLOT_DONE;
	b->done(i, result_json(started, err, &s->res), b->ud);
}

/* What lcrun fork holds for the other sandboxes, which a new one's
 * staging process (and pid 1, cloned from it) would otherwise inherit:
 * closed there first (lc_sb_t.foreign_fds). */
static void foreign_fds(batch_t *b, long self, int *fds, size_t *n)
{
	*n = 0;
	for (long i = 0; i < b->count; i++) {
		const slot_t *s = &b->slots[i];
		if (i == self || (s->st != SLOT_STARTING && s->st != SLOT_RUNNING))
			continue;
		const int own[] = { s->c.sp[0], s->c.pidfd, s->c.cg.dirfd, s->c.held_ns[0], s->c.held_ns[1] };
		for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++)
			if (own[k] >= 0)
				fds[(*n)++] = own[k];
	}
}

static void begin(batch_t *b, long i)
{
	slot_t *s = &b->slots[i];
	lc_error_t *err = NULL;
	lc_sb_run_prepare(&s->c, b->spec, b->sh, &s->res);
	foreign_fds(b, i, b->foreign, &b->n_foreign);
	s->c.foreign_fds = b->foreign;
	s->c.n_foreign_fds = b->n_foreign;
	s->st = SLOT_STARTING;
	s->sync_fd = -1;
	if (lc_sb_begin(&s->c, &err) < 0)
		finish(b, i, false, err);
	s->c.foreign_fds = NULL; /* the staging process has its copy */
	s->c.n_foreign_fds = 0;
}

static void started(batch_t *b, long i)
{
	slot_t *s = &b->slots[i];
	LC_FAULT("sandbox-running");
	lc_sb_run_started(&s->c, &s->res);
	/* the staging process has cloned into the cgroup: one fd fewer for
	 * each of up to hundreds of sandboxes */
	if (s->c.cg.dirfd >= 0) {
		close(s->c.cg.dirfd);
		s->c.cg.dirfd = -1;
	}
	/* Its staging process exits once pid 1 is cloned, and that exit may
	 * wait for its mount namespace (a copy of the host's mounts) to go:
	 * reaped as it finishes (reap_exiting), never waited for. */
	if (s->c.staging > 0) {
		b->exiting[b->n_exiting++] = s->c.staging;
		s->c.staging = 0;
	}
	s->st = SLOT_RUNNING;
	s->sync_fd = s->c.sp[0];
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&s->pending, sig) == 1)
			lc_sb_signal(&s->c, sig);
}

static void step(batch_t *b, long i)
{
	lc_error_t *err = NULL;
	int r = lc_sb_step(&b->slots[i].c, &err);
	if (r < 0)
		finish(b, i, false, err);
	else if (r == 1)
		started(b, i);
}

static void ended(batch_t *b, long i)
{
	slot_t *s = &b->slots[i];
	/* pid 1's last word (its command's EXIT, with the signal) may still
	 * wait on the socket when its pidfd came first in this pass */
	struct pollfd p = { s->sync_fd, POLLIN, 0 };
	while (s->sync_fd >= 0 && poll(&p, 1, 0) == 1 && lc_sb_sync_read(&s->c))
		;
	lc_sb_reap(&s->c, &s->res);
	finish(b, i, true, NULL);
}

/* A signal lcrun fork got: to every running sandbox, as lc_run forwards
 * it, except one the kernel sent (a terminal's reached every pid 1 that
 * existed itself); to every sandbox not running yet as it starts, unless
 * it is a terminal's and the sandbox's pid 1 exists. */
static void forward(batch_t *b, int sigfd)
{
	struct signalfd_siginfo si;
	if (read(sigfd, &si, sizeof(si)) != sizeof(si))
		return;
	for (long i = 0; i < b->count; i++) {
		slot_t *s = &b->slots[i];
		/* a pid 1 that exists has had these blocked since its birth: a
		 * terminal's waits in it already */
		bool has_pid1 = s->st == SLOT_STARTING && (s->c.got_pid || s->c.got_ready);
		if (s->st == SLOT_RUNNING && si.ssi_code != SI_KERNEL)
			lc_sb_signal(&s->c, (int)si.ssi_signo);
		else if ((s->st == SLOT_IDLE || s->st == SLOT_STARTING) && !(si.ssi_code == SI_KERNEL && has_pid1))
			sigaddset(&s->pending, (int)si.ssi_signo);
	}
}

/* ---- with a network: a process per sandbox --------------------------------
 *
 * A sandbox's network is set up and torn down with netlink and nftables
 * calls that block for milliseconds (the veth pair, its addresses, the
 * chains; at the end the hand-over to lcrun-net).  From one process they
 * would come one after another; with a process per sandbox, as every
 * batch had before, they run side by side (measured: a fork of 10 with
 * --net allow took 165-177 ms from one process against 129-133 ms). */

static void child_main(batch_t *b, long i, int fd, pid_t parent, int sigfd)
{
	/* if lcrun fork dies, its sandboxes end too (lc_sb_wait forwards TERM) */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(0);
	if (sigfd >= 0)
		close(sigfd);
	static const int fwd[] = LC_FORWARD_SIGNALS;
	sigset_t old;
	int own = lc_signals_to_fd(fwd, sizeof(fwd) / sizeof(fwd[0]), &old);
	slot_t *s = &b->slots[i];
	lc_error_t *err = NULL;
	lc_sb_run_prepare(&s->c, b->spec, b->sh, &s->res);
	int r = lc_sb_start(&s->c, &err);
	if (r == 0) {
		lc_sb_run_started(&s->c, &s->res);
		lc_sb_wait(&s->c, &s->res, own);
	}
	lc_sb_run_finish(&s->c, &s->res, r == 0);
	char *txt = json_dumps(result_json(r == 0, err, &s->res), JSON_COMPACT);
	if (txt)
		lc_write_all(fd, txt, strlen(txt));
	_exit(0);
}

/* A signal lcrun fork got: to every sandbox process not yet reaped, which
 * forwards it to its sandbox; not one the kernel sent (a terminal's
 * reached the whole process group, the sandbox processes too). */
static void forward_to(int sigfd, const pid_t *pids, long count)
{
	struct signalfd_siginfo si;
	if (read(sigfd, &si, sizeof(si)) != sizeof(si) || si.ssi_code == SI_KERNEL)
		return;
	for (long j = 0; j < count; j++)
		if (pids[j] > 0)
			kill(pids[j], (int)si.ssi_signo);
}

/* One sandbox process's result; meanwhile the signals to forward. */
static json_t *read_result(int fd, int sigfd, const pid_t *pids, long count)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		struct pollfd p[2] = { { fd, POLLIN, 0 }, { sigfd, POLLIN, 0 } };
		if (poll(p, sigfd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		if (sigfd >= 0 && (p[1].revents & POLLIN))
			forward_to(sigfd, pids, count);
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			char *nb = realloc(buf, cap);
			if (!nb)
				abort();
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	json_t *j = buf ? json_loadb(buf, len, 0, NULL) : NULL;
	free(buf);
	return j ? j : error_result("the sandbox process ended without a result", LC_EXIT_RUNTIME);
}

static void run_forked(batch_t *b, int sigfd)
{
	pid_t *pids = lc_xmalloc0((size_t)b->count * sizeof(pid_t));
	int *fds = lc_xmalloc0((size_t)b->count * sizeof(int));
	pid_t self = getpid();
	long count = b->count;
	fflush(NULL);
	for (long i = 0; i < b->count; i++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0) {
			count = i;
			break;
		}
		pids[i] = fork();
		if (pids[i] < 0) {
			close(p[0]);
			close(p[1]);
			count = i;
			break;
		}
		if (pids[i] == 0) {
			close(p[0]);
			child_main(b, i, p[1], self, sigfd);
		}
		close(p[1]);
		fds[i] = p[0];
	}
	for (long i = 0; i < b->count; i++) {
		json_t *r;
		if (i < count) {
			r = read_result(fds[i], sigfd, pids, count);
			close(fds[i]);
			while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
				;
			pids[i] = 0; /* reaped: its number may be another's now */
		} else {
			r = error_result("cannot start a process for this sandbox", LC_EXIT_RUNTIME);
		}
		b->done(i, r, b->ud);
	}
	free(fds);
	free(pids);
}

enum { FD_SIG, FD_START, FD_SYNC, FD_PID };

/* Every sandbox from this process, in one poll (see the top). */
static void run_here(batch_t *b, int sigfd)
{
	long count = b->count;
	struct pollfd *pfd = lc_xmalloc0((size_t)(2 * count + 1) * sizeof(*pfd));
	long *who = lc_xmalloc0((size_t)(2 * count + 1) * sizeof(*who));
	int *kind = lc_xmalloc0((size_t)(2 * count + 1) * sizeof(*kind));
	long next = 0;
	int poll_errno = 0;
	for (;;) {
		long active = 0;
		for (long i = 0; i < next; i++)
			active += b->slots[i].st == SLOT_STARTING || b->slots[i].st == SLOT_RUNNING;
		if (!active && next == count)
			break;
		int n = 0, wait = -1;
		long long now = lc_now_ms();
		if (sigfd >= 0) {
			pfd[n] = (struct pollfd){ sigfd, POLLIN, 0 };
			kind[n++] = FD_SIG;
		}
		for (long i = 0; i < count; i++) {
			slot_t *s = &b->slots[i];
			if (s->st == SLOT_STARTING) {
				pfd[n] = (struct pollfd){ s->c.sp[0], POLLIN, 0 };
				who[n] = i;
				kind[n++] = FD_START;
			} else if (s->st == SLOT_RUNNING) {
				if (s->sync_fd >= 0) {
					pfd[n] = (struct pollfd){ s->sync_fd, POLLIN, 0 };
					who[n] = i;
					kind[n++] = FD_SYNC;
				}
				if (s->c.pidfd >= 0) {
					pfd[n] = (struct pollfd){ s->c.pidfd, POLLIN, 0 };
					who[n] = i;
					kind[n++] = FD_PID;
				} else if (wait < 0 || wait > 10) {
					wait = 10; /* no pidfd: waitid below */
				}
				long long dl = lc_sb_deadline(&s->c);
				if (dl >= 0 && !s->c.timed_out) {
					long long ms = dl > now ? dl - now : 0;
					if (wait < 0 || ms < wait)
						wait = (int)ms;
				}
			}
		}
		if (b->n_exiting && (wait < 0 || wait > 100))
			wait = 100; /* staging processes to reap */
		if (next < count)
			wait = 0;
		if (poll(pfd, (nfds_t)n, wait) < 0 && errno != EINTR) {
			poll_errno = errno;
			break;
		}
		for (int k = 0; k < n; k++) {
			if (!pfd[k].revents)
				continue;
			if (kind[k] == FD_SIG) {
				forward(b, sigfd);
				continue;
			}
			long i = who[k];
			slot_t *s = &b->slots[i];
			if (kind[k] == FD_START && s->st == SLOT_STARTING) {
				step(b, i);
			} else if (kind[k] == FD_SYNC && s->st == SLOT_RUNNING) {
				if (!lc_sb_sync_read(&s->c))
					s->sync_fd = -1; /* pid 1 hung up: only its exit is left to see */
			} else if (kind[k] == FD_PID && s->st == SLOT_RUNNING && (pfd[k].revents & POLLIN)) {
				ended(b, i);
			}
		}
		now = lc_now_ms();
		reap_exiting(b, false);
		for (long i = 0; i < count; i++) {
			slot_t *s = &b->slots[i];
			if (s->st != SLOT_RUNNING)
				continue;
			long long dl = lc_sb_deadline(&s->c);
			if (dl >= 0 && !s->c.timed_out && now >= dl)
				lc_sb_expire(&s->c);
			if (s->c.pidfd < 0 && lc_sb_exited(&s->c))
				ended(b, i);
		}
		if (next < count)
			begin(b, next++);
	}
	/* only a poll that failed ends the loop early: what is left is
	 * killed (its result says so: killed by SIGKILL) or not started */
	for (long i = 0; i < count; i++) {
		slot_t *s = &b->slots[i];
		lc_error_t *err = NULL;
		if (s->st == SLOT_IDLE) {
			lc_error_set(&err, LC_EXIT_RUNTIME, poll_errno, "sandbox %ld not started: cannot wait for sandboxes",
				     i + 1);
			lc_sb_run_prepare(&s->c, b->spec, b->sh, &s->res);
			finish(b, i, false, err);
		} else if (s->st == SLOT_STARTING) {
			/* its pid 1 may exist before its word was read */
			if (s->c.cg.path)
				lc_cgroup_kill(s->c.cg.path);
			lc_error_set(&err, LC_EXIT_RUNTIME, poll_errno, "sandbox %s: cannot wait for it", s->c.id);
			finish(b, i, false, err);
		} else if (s->st == SLOT_RUNNING) {
			if (s->c.cg.path)
				lc_cgroup_kill(s->c.cg.path);
			lc_sb_signal(&s->c, SIGKILL);
			ended(b, i);
		}
	}
	reap_exiting(b, true);
	free(kind);
	free(who);
	free(pfd);
}

void lc_run_batch(const lc_spec_t *spec, const lc_run_shared_t *sh, long count, int sigfd, lc_batch_done_fn done,
		  void *ud)
{
	batch_t b = { spec, sh, lc_xmalloc0((size_t)count * sizeof(slot_t)), count, done, ud,
		      lc_xmalloc0((size_t)count * 5 * sizeof(int)), 0, lc_xmalloc0((size_t)count * sizeof(pid_t)), 0 };
	for (long i = 0; i < count; i++)
		sigemptyset(&b.slots[i].pending);
	if (spec->net.mode != LC_NET_NONE)
		run_forked(&b, sigfd);
	else
		run_here(&b, sigfd);
	free(b.exiting);
	free(b.foreign);
	free(b.slots);
}
