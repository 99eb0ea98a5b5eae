/* state.h — a sandbox's state.json, its name, and whether its processes
 * live (state.c).  Not part of the
 * stable API. */
#ifndef LC_STATE_H
#define LC_STATE_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>

#include "lcrun.h"

int lc_state_write(const char *id, json_t *state, lc_error_t **err);
json_t *lc_state_read(const char *id, lc_error_t **err);
int lc_state_remove(const char *id);
/* Remove names/NAME if it still names id. */
void lc_name_unlink(const char *id, const char *name);
bool lc_id_valid(const char *id);
/* Resolve an id or a name to an id. */
int lc_state_resolve(const char *id_or_name, char **id, lc_error_t **err);
/* Resolve an id or a name (*id) and read its state. */
json_t *lc_state_open(const char *id_or_name, char **id, lc_error_t **err);
/* Record name for sandbox id ($run/names/NAME -> id): 1 made, 0 it was
 * id's already; LC_EXIT_BUSY when another live sandbox has it. */
int lc_name_link(const char *id, const char *name, lc_error_t **err);

/* Start time (0: no such process, or a dead one not reaped yet) and
 * resident pages (rss, if not NULL) of a process, from one read of its
 * /proc/PID/stat. */
unsigned long long lc_proc_stat(pid_t pid, long long *rss);
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

#endif
