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
 * for one that has not begun. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

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
} batch_t;

static void finish(batch_t *b, long i, bool started, lc_error_t *err)
{
	slot_t *s = &b->slots[i];
	json_t *j = NULL;
	if (!started)
		j = json_pack("{s:s, s:i}", "error", err && err->msg ? err->msg : "failed", "exit_code",
			      err ? err->exit_code : LC_EXIT_RUNTIME);
	lc_error_free(err);
	lc_sb_run_finish(&s->c, &s->res, started);
	if (started)
		j = lc_result_to_json(&s->res);
	s->st = SLOT_DONE;
	b->done(i, j ? j : json_pack("{s:s, s:i}", "error", "out of memory", "exit_code", LC_EXIT_RUNTIME), b->ud);
}

static void begin(batch_t *b, long i)
{
	slot_t *s = &b->slots[i];
	lc_error_t *err = NULL;
	lc_sb_run_prepare(&s->c, b->spec, b->sh, &s->res);
	s->st = SLOT_STARTING;
	s->sync_fd = -1;
	if (lc_sb_begin(&s->c, &err) < 0)
		finish(b, i, false, err);
}

static void started(batch_t *b, long i)
{
	slot_t *s = &b->slots[i];
	lc_sb_run_started(&s->c, &s->res);
	/* the staging process has cloned into the cgroup: one fd fewer for
	 * each of up to hundreds of sandboxes */
	if (s->c.cg.dirfd >= 0) {
		close(s->c.cg.dirfd);
		s->c.cg.dirfd = -1;
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
	lc_sb_reap(&s->c, &s->res);
	finish(b, i, true, NULL);
}

/* A signal lcrun fork got: to every sandbox, as lc_run forwards it; not
 * one the kernel sent (a terminal's reached every pid 1 itself). */
static void forward(batch_t *b, int sigfd)
{
	struct signalfd_siginfo si;
	if (read(sigfd, &si, sizeof(si)) != sizeof(si) || si.ssi_code == SI_KERNEL)
		return;
	for (long i = 0; i < b->count; i++) {
		slot_t *s = &b->slots[i];
		if (s->st == SLOT_RUNNING)
			lc_sb_signal(&s->c, (int)si.ssi_signo);
		else if (s->st != SLOT_DONE)
			sigaddset(&s->pending, (int)si.ssi_signo);
	}
}

enum { FD_SIG, FD_START, FD_SYNC, FD_PID };

void lc_run_batch(const lc_spec_t *spec, const lc_run_shared_t *sh, long count, int sigfd, lc_batch_done_fn done,
		  void *ud)
{
	batch_t b = { spec, sh, lc_xmalloc0((size_t)count * sizeof(slot_t)), count, done, ud };
	struct pollfd *pfd = lc_xmalloc0((size_t)(2 * count + 1) * sizeof(*pfd));
	long *who = lc_xmalloc0((size_t)(2 * count + 1) * sizeof(*who));
	int *kind = lc_xmalloc0((size_t)(2 * count + 1) * sizeof(*kind));
	for (long i = 0; i < count; i++)
		sigemptyset(&b.slots[i].pending);
	long next = 0, left = count;
	while (left > 0) {
		int n = 0, wait = -1;
		long long now = lc_now_ms();
		if (sigfd >= 0) {
			pfd[n] = (struct pollfd){ sigfd, POLLIN, 0 };
			kind[n++] = FD_SIG;
		}
		for (long i = 0; i < count; i++) {
			slot_t *s = &b.slots[i];
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
				if (s->c.staging > 0 && (wait < 0 || wait > 100))
					wait = 100; /* its staging process, to reap below */
				long long dl = lc_sb_deadline(&s->c);
				if (dl >= 0 && !s->c.timed_out) {
					long long ms = dl > now ? dl - now : 0;
					if (wait < 0 || ms < wait)
						wait = (int)ms;
				}
			}
		}
		if (next < count)
			wait = 0;
		if (poll(pfd, (nfds_t)n, wait) < 0 && errno != EINTR)
			break;
		for (int k = 0; k < n; k++) {
			if (!pfd[k].revents)
				continue;
			if (kind[k] == FD_SIG) {
				forward(&b, sigfd);
				continue;
			}
			long i = who[k];
			slot_t *s = &b.slots[i];
			if (kind[k] == FD_START && s->st == SLOT_STARTING) {
				step(&b, i);
			} else if (kind[k] == FD_SYNC && s->st == SLOT_RUNNING) {
				if (!lc_sb_sync_read(&s->c))
					s->sync_fd = -1; /* pid 1 hung up: only its exit is left to see */
			} else if (kind[k] == FD_PID && s->st == SLOT_RUNNING && (pfd[k].revents & POLLIN)) {
				ended(&b, i);
			}
		}
		now = lc_now_ms();
		for (long i = 0; i < count; i++) {
			slot_t *s = &b.slots[i];
			if (s->st != SLOT_RUNNING)
				continue;
			/* The staging process exits once pid 1 is cloned, and its
			 * exit may wait for its mount namespace to go: reaped when
			 * it is done, never waited for. */
			if (s->c.staging > 0 && waitpid(s->c.staging, NULL, WNOHANG) == s->c.staging)
				s->c.staging = 0;
			long long dl = lc_sb_deadline(&s->c);
			if (dl >= 0 && !s->c.timed_out && now >= dl)
				lc_sb_expire(&s->c);
			if (s->c.pidfd < 0 && lc_sb_exited(&s->c))
				ended(&b, i);
		}
		left = count - next;
		for (long i = 0; i < next; i++)
			left += b.slots[i].st != SLOT_DONE;
		if (next < count)
			begin(&b, next++);
	}
	/* only a poll that failed ends the loop early: what is left ends now */
	for (long i = 0; i < count; i++) {
		slot_t *s = &b.slots[i];
		if (s->st == SLOT_IDLE) {
			lc_error_t *err = NULL;
			lc_error_set(&err, LC_EXIT_RUNTIME, errno, "sandbox %ld not started", i + 1);
			lc_sb_run_prepare(&s->c, spec, sh, &s->res);
			finish(&b, i, false, err);
		} else if (s->st == SLOT_STARTING) {
			lc_error_t *err = NULL;
			lc_error_set(&err, LC_EXIT_RUNTIME, errno, "sandbox %s: cannot wait for it", s->c.id);
			finish(&b, i, false, err);
		} else if (s->st == SLOT_RUNNING) {
			lc_sb_expire(&s->c);
			ended(&b, i);
		}
	}
	free(kind);
	free(who);
	free(pfd);
	free(b.slots);
}
