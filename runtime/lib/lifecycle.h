/* lifecycle.h — internals shared by lifecycle.c, exec.c, copy.c, console.c
 * and gc.c (long-lived sandboxes).  Not part of the stable API. */
#ifndef LC_LIFECYCLE_H
#define LC_LIFECYCLE_H

#include <stdbool.h>
#include <sys/types.h>
#include <termios.h>

#include "lcrun.h"
#include "sync.h"

/* Start time of a process (field 22 of /proc/PID/stat), 0 if it is gone
 * or a zombie. */
unsigned long long lc_proc_starttime(pid_t pid);
/* Does pid still name the process recorded with start time `start`?  With
 * start == 0 (not recorded), fall back to its cgroup naming the sandbox. */
bool lc_proc_is(pid_t pid, unsigned long long start, const char *id);

/* Lock a sandbox's state directory (flock, waiting up to wait_ms).  Fails
 * with LC_EXIT_UNKNOWN when the sandbox is gone once the lock is held, and
 * LC_EXIT_BUSY when another lcrun command keeps holding it. */
int lc_state_lock(const char *id, int wait_ms, lc_error_t **err);
/* Read-modify-write of state.json: set every key of patch. */
int lc_state_patch(const char *id, json_t *patch, lc_error_t **err);

/* The sandbox's status as it is now: creating, running, paused, stopped,
 * exited, removing, or dead (its processes are gone without a clean stop). */
const char *lc_state_status(json_t *st, const char *id);
bool lc_state_pid1_alive(json_t *st, const char *id);
bool lc_state_monitor_alive(json_t *st, const char *id);
/* The process that called lc_sb_start (lcrun run, or the monitor) lives. */
bool lc_state_creator_alive(json_t *st);

/* Open a pidfd on the sandbox's pid 1 after checking it is still the same
 * process; -1 with *err (LC_EXIT_STATE) when it is not running. */
int lc_state_pid1_pidfd(json_t *st, const char *id, lc_error_t **err);

/* Remove what a sandbox leaves on the host: cgroup, sandbox dir, state and
 * name (the caller holds the lock or the sandbox is known dead). */
void lc_sandbox_purge(const char *id, json_t *st);

/* ---- snapshot.c */
/* A running sandbox left frozen by a snapshot that was killed (its cgroup
 * frozen, its state not "paused", no snapshot holding its freeze.lock):
 * thaw it; 1 when it did.  The caller holds the state lock. */
int lc_sandbox_thaw_left(const char *id, json_t *st);

/* Enter a sandbox's user and mount namespaces (and become its root) in the
 * calling, single-threaded process.  Used by exec and cp children. */
int lc_enter_sandbox(int pidfd, int nstypes, lc_error_t **err);

/* ---- console.c */
/* Put fd's terminal in raw mode; saved gets the old settings.  0 if fd is
 * a terminal and was changed, 1 if it is no terminal, -1 on error. */
int lc_tty_raw(int fd, struct termios *saved);
void lc_tty_restore(int fd, const struct termios *saved);
/* Open a new pty in the current mount namespace's /dev/pts (through
 * /dev/ptmx, checked to be the real ptmx): master and peer (slave). */
int lc_pty_open(int *master, int *slave, lc_error_t **err);
/* An lc_msg (type, a) carrying one fd (SCM_RIGHTS), and the receiving side of any
 * lc_msg that may carry one (*fd = -1 when none); returns as lc_msg_recv. */
int lc_msg_send_fd(int sock, int type, int a, int fd);
/* Any bytes with one fd (the pty master to an OCI console socket). */
/* flags: sendmsg's, besides MSG_NOSIGNAL (MSG_DONTWAIT: never block). */
int lc_send_fd(int sock, const void *data, size_t len, int fd, int flags);
/* Its receiving side: up to len bytes and *fd (-1 when none came); flags
 * are recvmsg's (MSG_CMSG_CLOEXEC always); returns recvmsg's result. */
ssize_t lc_recv_fd(int sock, void *data, size_t len, int *fd, int flags);
int lc_msg_recv_fd(int sock, lc_msg_t *m, int *fd);

#endif
