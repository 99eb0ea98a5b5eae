/* sandbox_priv.h — one sandbox being started, run and torn down: lc_sb_t
 * and its steps (sandbox.c), for lc_run, a batch (batch.c) and the
 * monitor of a long-lived sandbox (lifecycle.c).  Not part of the stable
 * API in lcrun.h. */
#ifndef LC_SANDBOX_PRIV_H
#define LC_SANDBOX_PRIV_H

#include <stdbool.h>
#include <sys/types.h>

#include "cgroup.h"
#include "lcrun.h"
#include "mounts.h"
#include "seccomp.h"

typedef struct lc_sb {
	const lc_spec_t *spec;
	char start_error[256]; /* pid 1's word after READY: it could not start the command */
	char id[LC_ID_LEN + 1];
	char *sbdir;
	bool rootless;
	bool host_image;
	bool state_written;
	bool state_dir_made; /* this start made the (empty) state directory */
	int claim_fd;        /* that directory, flocked (shared) until the first
				state is written: lcrun gc removes a claim
				without state only when nobody holds it */
	bool name_linked;
	bool net_up;          /* lc_net_prepare() ran (and no attach failed): lc_net_teardown() at the end */
	lc_rootfs_plan_t plan;
	lc_cgroup_t cg;
	lc_seccomp_prog_t prog;
	char **envp;
	bool secrets_noted; /* spec->secret_env and envp (lc_secret_note) */
	int sp[2];
	pid_t staging;
	pid_t userns_child; /* lc_userns_new's, killed, to reap */
	pid_t init;
	int pidfd;
	long long start_ms;
	long long created_ms;
	bool no_command; /* create: pid 1 idles, commands come by exec */
	bool reuse_dir;  /* start: the sandbox directory and state exist (stopped) */
	bool idmapped;   /* the staging process could idmap the lower layers */
	bool throwaway;  /* lc_run without --keep: nothing of it outlives the run */
	bool single_threaded; /* the caller, at lc_sb_init: raw clone3, removers, its own user namespace */
	bool empty_lower;     /* an image of config only: private/ovl/empty is its lower */
	bool joined;          /* lcrun made the user namespace (sent with the GO), staging joins it */
	struct lc_lease *lease; /* the network's, from lc_net_prepare (lc_sb_begin) for lc_net_attach */
	bool prog_later;      /* the seccomp program is made after the staging fork and sent to
			       * pid 1 with its GO (a memfd): joined, no network, no batch */
	bool hold_mntns;      /* the staging process sends its mount namespaces: */
	int held_ns[2];       /* held for the remover (remover_start) or the batch, -1 when none: */
#define LC_HELD_PID1 0        /* pid 1's (sent with PID) */
#define LC_HELD_STAGING 1     /* the staging process's own, left for pid 1's (sent with USERNS) */
	int rm_pipe;     /* socket to the remover forked while the command runs (-1: none) */
	char *rm_dst;    /* where the directory goes in trash/ for it */
	bool rm_locked;  /* the remover holds the directory's flock */
	bool rm_went;    /* it has the directory: the state directory goes to it too */
	struct lc_image_resolved *img; /* spec->image, resolved */
	const struct lc_run_shared *shared; /* made once for a batch (lc_run_batch), or NULL */
	bool got_exit;                      /* pid 1's EXIT came (during lc_sb_start, or after): */
	int exit_code, exit_signal;         /* what it said */
	bool got_pid, got_ready;            /* lc_sb_step: the two words that end the start */
	bool timed_out;                     /* lc_sb_expire killed it */
	const int *foreign_fds;             /* the caller's fds the staging process closes first */
	size_t n_foreign_fds;               /* (a batch's, of its other sandboxes) */
	int stage_ns;                       /* staging, in a batch: its own mount namespace, kept */
					    /* until it exits (pid 1 closes its copy at once) */
} lc_sb_t;
/* "net.KEY=VALUE" as spec->sysctls takes it (LC_EXIT_USAGE otherwise). */
int lc_sysctl_check(const char *kv, lc_error_t **err);
/* The command's environment: PATH, HOME, TERM, LANG, then spec->env. */
char **lc_build_env(const lc_spec_t *spec);

/* Fill defaults (before lc_sb_start). */
void lc_sb_init(lc_sb_t *c, const lc_spec_t *spec);
/* Validate, build the root, start pid 1; returns once pid 1 is READY.  The
 * caller becomes pid 1's parent (it must be the process that waits). */
int lc_sb_start(lc_sb_t *c, lc_error_t **err);
/* lc_sb_start in two halves, for a caller that starts many at once: begin
 * (everything up to the staging process's first word), then a step each
 * time c->sp[0] is readable: 0 more to come, 1 started, -1 failed. */
int lc_sb_begin(lc_sb_t *c, lc_error_t **err);
int lc_sb_step(lc_sb_t *c, lc_error_t **err);
/* Wait for the command (or pid 1) to end, honouring spec->timeout and
 * forwarding signals read from sigfd (-1: none). */
void lc_sb_wait(lc_sb_t *c, lc_result_t *res, int sigfd);
/* lc_sb_wait's parts, for a caller that waits for many at once: when
 * spec->timeout ends (-1: never), and what to do then; a signal to pid 1;
 * a word from pid 1 (false: it hung up); has pid 1 exited (without a
 * pidfd); reap it and fill res's status. */
long long lc_sb_deadline(const lc_sb_t *c);
void lc_sb_expire(lc_sb_t *c);
void lc_sb_signal(lc_sb_t *c, int sig);
bool lc_sb_sync_read(lc_sb_t *c);
bool lc_sb_exited(lc_sb_t *c);
void lc_sb_reap(lc_sb_t *c, lc_result_t *res);
/* lc_run's parts around lc_sb_start and lc_sb_wait: set c and res up;
 * once started (res's id, a run's remover, a batch's held namespace);
 * at the end (statistics, teardown, c freed). */
void lc_sb_run_prepare(lc_sb_t *c, const lc_spec_t *spec, const lc_run_shared_t *sh, lc_result_t *res);
void lc_sb_run_started(lc_sb_t *c, lc_result_t *res);
void lc_sb_run_finish(lc_sb_t *c, lc_result_t *res, bool started);
/* Kill what is left; remove cgroup, directories and state unless keep. */
void lc_sb_teardown(lc_sb_t *c, bool keep);
void lc_sb_free(lc_sb_t *c);
json_t *lc_sb_state_json(lc_sb_t *c, const char *status);
int lc_sb_save_state(lc_sb_t *c, const char *status, lc_error_t **err);

#endif
