/* gc.c — lcrun gc: remove what killed lcrun processes or a host crash left
 * behind, and nothing a live sandbox uses.
 *
 * A sandbox is live while its pid 1 or its monitor (or ttl timer) exists
 * and is the process recorded in its state (same start time).  Pid 1 dies
 * with its monitor (init.c), so a dead monitor means a dead sandbox.  Mounts
 * need no collecting: they only ever exist in the sandbox's own mount
 * namespaces, which die with it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "image.h"
#include "json.h"
#include "lifecycle.h"
#include "net.h"
#include "netspare.h"
#include "paths.h"
#include "snapshot.h"
#include "state.h"
#include "trash.h"
#include "util.h"

static void __attribute__((format(printf, 2, 3))) note(json_t *removed, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) >= 0)
		json_array_append_new(removed, json_string(s));
	va_end(ap);
	free(s);
}

static bool has_state_dir(const char *id)
{
	_cleanup_free_ char *d = lc_state_dir(id);
	return access(d, F_OK) == 0;
}

static void gc_state(const char *id, json_t *removed)
{
	_cleanup_free_ char *dir = lc_state_dir(id);
	_cleanup_free_ char *file = lc_strdup_printf("%s/state.json", dir);
	struct stat sb;
	if (stat(file, &sb) < 0) {
		/* An id claimed by a start that never wrote its state: its
		 * maker holds the claim (flock) until it writes the state.
		 * Nobody holds it: the maker was killed. */
		_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && stat(file, &sb) < 0 && lc_rm_rf(dir, NULL) == 0)
			note(removed, "removed state %s (empty)", dir);
		return;
	}
	lc_error_t *e = NULL;
	_cleanup_close_ int lock = lc_state_lock(id, 0, &e);
	lc_error_free(e);
	if (lock < 0)
		return; /* another command is at it */
	_cleanup_json_ json_t *st = lc_state_read(id, NULL);
	if (!st)
		return;
	if (lc_state_pid1_alive(st, id) || lc_state_monitor_alive(st, id) || lc_state_creator_alive(st)) {
		if (lc_sandbox_thaw_left(id, st) == 1)
			note(removed, "thawed sandbox %s (a snapshot of it was killed while it was frozen)", id);
		return;
	}
	const char *status = lc_json_str(st, "status");
	const char *cg = lc_json_str(st, "cgroup");
	status = status ? status : "";
	if (!strcmp(status, "stopped") || !strcmp(status, "exited")) {
		if (cg && access(cg, F_OK) == 0 && lc_cgroup_destroy(cg, NULL) == 0)
			note(removed, "removed cgroup %s", cg);
		return;
	}
	bool confirmed = json_is_true(json_object_get(st, "confirmed"));
	if (confirmed && strcmp(status, "removing")) {
		/* a created sandbox whose monitor was killed: keep its files */
		if (cg && access(cg, F_OK) == 0 && lc_cgroup_destroy(cg, NULL) == 0)
			note(removed, "removed cgroup %s", cg);
		_cleanup_json_ json_t *p = json_pack("{s:s, s:i, s:i, s:s}", "status", "stopped", "pid", 0,
						     "monitor_pid", 0, "stop_reason", "monitor gone");
		lc_state_patch(id, p, NULL);
		note(removed, "marked sandbox %s stopped (its monitor was gone)", id);
		return;
	}
	lc_sandbox_purge(id, st);
	note(removed, "removed sandbox %s (state, directory, cgroup)", id);
}

/* A cgroup of that id with processes in it: a sandbox lives there, even if
 * its state is kept elsewhere (LCRUN_STATE_DIR). */
static bool cgroup_populated(const char *id)
{
	_cleanup_free_ char *cg = lc_cgroup_path_for(id);
	_cleanup_free_ char *ev = cg ? lc_strdup_printf("%s/cgroup.events", cg) : NULL;
	_cleanup_free_ char *s = NULL;
	return ev && lc_read_file(ev, &s, NULL, NULL) == 0 && strstr(s, "populated 1");
}

/* Cgroups (rmdir of an empty one) and sandbox directories (rm -rf) whose
 * id has no state: what a crash left between the steps of a teardown.
 * Cgroups only where they are marked as this state directory's (another's
 * sandbox may be between its cgroup's mkdir and its first process), or
 * where cgroups take no marks. */
static void gc_orphans(const char *parent, bool cgroups, json_t *removed)
{
	_cleanup_dir_ DIR *d = opendir(parent);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		/* a populated cgroup has processes: not ours to judge */
		if (!lc_id_valid(de->d_name) || has_state_dir(de->d_name) || cgroup_populated(de->d_name))
			continue;
		_cleanup_free_ char *path = lc_strdup_printf("%s/%s", parent, de->d_name);
		if (cgroups && lc_cgroup_owner(path) == 0)
			continue;
		if (cgroups ? rmdir(path) == 0 : lc_rm_rf(path, NULL) == 0)
			note(removed, "removed %s %s", cgroups ? "cgroup" : "directory", path);
	}
}

/* Call fn for each entry of parent whose name does not start with a dot. */
static void each_entry(const char *parent, void (*fn)(const char *path, json_t *removed), json_t *removed)
{
	_cleanup_dir_ DIR *d = opendir(parent);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		_cleanup_free_ char *path = lc_strdup_printf("%s/%s", parent, de->d_name);
		fn(path, removed);
	}
}

/* A sandbox directory a background removal left (its process was killed):
 * a live one holds a flock on its entry. */
static void gc_trash_entry(const char *path, json_t *removed)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
		return;
	const char *base = strrchr(path, '/');
	if (base && !strncmp(base + 1, LC_BATCH_TRASH_PREFIX, strlen(LC_BATCH_TRASH_PREFIX)))
		lc_state_trash_rm_ids(path); /* its sandboxes' state, as its remover would */
	if (lc_rm_rf(path, NULL) == 0)
		note(removed, "removed directory %s", path);
}

/* Remove path, a directory untouched for more than age seconds. */
static bool rm_stale_dir(const char *path, time_t age)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && time(NULL) - st.st_mtime > age &&
	       lc_rm_rf(path, NULL) == 0;
}

/* A run's state directory its remover left (killed); older than 10 s,
 * not one a remover is at. */
static void gc_state_trash_entry(const char *path, json_t *removed)
{
	const char *base = strrchr(path, '/');
	if (base && lc_id_valid(base + 1) && rm_stale_dir(path, 10))
		note(removed, "removed state %s", path);
}

/* A spare sandbox directory a killed remover left half made (tmp.*,
 * older than a minute). */
static void gc_spare_entry(const char *path, json_t *removed)
{
	const char *base = strrchr(path, '/');
	if (base && !strncmp(base + 1, "tmp.", 4) && rm_stale_dir(path, 60))
		note(removed, "removed directory %s", path);
}

int lc_gc_spares(json_t *removed, lc_error_t **err)
{
	if (lc_netspare_release() == 1)
		note(removed, "let the spare network namespaces go");
	_cleanup_free_ char *dir = lc_spare_dir();
	struct stat st;
	if (lstat(dir, &st) < 0)
		return 0;
	/* Out of the way first, in one step: a start may be renaming a spare
	 * out of it into sandboxes/, and a removal that went on through that
	 * tree would empty a live sandbox's. */
	_cleanup_free_ char *trash = lc_trash_dir();
	char tag[9];
	lc_random_hex(tag, 8);
	_cleanup_free_ char *aside = lc_strdup_printf("%s/spare.%s", trash, tag);
	if ((mkdir(trash, 0700) < 0 && errno != EEXIST) || rename(dir, aside) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot move %s aside to remove it", dir);
	if (lc_rm_rf(aside, err) < 0)
		return -1;
	note(removed, "removed the spare sandbox directories in %s", dir);
	return 0;
}

/* A name whose sandbox has no state. */
static void gc_name_entry(const char *path, json_t *removed)
{
	char target[64];
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return;
	target[n] = '\0';
	if (lc_id_valid(target) && has_state_dir(target))
		return;
	if (unlink(path) == 0)
		note(removed, "removed name %s -> %s", strrchr(path, '/') + 1, target);
}

/* For the network's gc: a sandbox whose processes or monitor live. */
static bool net_is_live(const char *id, void *ud)
{
	(void)ud;
	if (cgroup_populated(id))
		return true;
	_cleanup_json_ json_t *st = lc_state_read(id, NULL);
	if (!st)
		return false;
	return lc_state_pid1_alive(st, id) || lc_state_monitor_alive(st, id) || lc_state_creator_alive(st);
}

/* A trash entry lcrun-rm is still removing (it holds the flock). */
static bool trash_busy(const char *trash)
{
	_cleanup_dir_ DIR *d = opendir(trash);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		_cleanup_close_ int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
			return true;
	}
	return false;
}

int lc_gc_wait(int timeout_ms, lc_error_t **err)
{
	long long deadline = lc_now_ms() + timeout_ms;
	if (geteuid() == 0 && lc_net_wait_pending(timeout_ms, err) < 0)
		return -1;
	_cleanup_free_ char *trash = lc_trash_dir();
	while (trash_busy(trash)) {
		if (lc_now_ms() >= deadline)
			return lc_error_set(err, LC_EXIT_BUSY, 0, "%s: a sandbox directory is still being removed after %d ms",
					    trash, timeout_ms);
		usleep(2000);
	}
	return 0;
}

int lc_gc(json_t **removed_out, lc_error_t **err)
{
	/* What it reads there decides what it removes: not from a directory
	 * another user may write. */
	if (lc_run_dir_hold(err) < 0 || lc_lib_dir_hold(err) < 0)
		return -1;
	json_t *removed = json_array();
	_cleanup_dir_ DIR *d = opendir(lc_run_dir());
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (lc_id_valid(de->d_name))
			gc_state(de->d_name, removed);
	const char *cgroot = lc_cgroup_root(NULL);
	_cleanup_free_ char *cgparent = cgroot ? lc_strdup_printf("%s/lcrun", cgroot) : NULL;
	_cleanup_free_ char *sbparent = lc_strdup_printf("%s/sandboxes", lc_lib_dir());
	if (cgparent)
		gc_orphans(cgparent, true, removed);
	/* Another state directory's sandboxes have no state here: their
	 * directories are not orphans. */
	_cleanup_free_ char *owner = lc_sandboxes_owner(sbparent);
	if (owner)
		fprintf(stderr, "lcrun: gc: left the directories of %s alone: their sandboxes are recorded in %s, not in %s\n",
			sbparent, owner, lc_run_dir());
	else
		gc_orphans(sbparent, false, removed);
	_cleanup_free_ char *names = lc_strdup_printf("%s/names", lc_run_dir());
	each_entry(names, gc_name_entry, removed);
	_cleanup_free_ char *trash = lc_trash_dir();
	each_entry(trash, gc_trash_entry, removed);
	_cleanup_free_ char *state_trash = lc_state_trash(NULL);
	each_entry(state_trash, gc_state_trash_entry, removed);
	_cleanup_free_ char *spare = lc_spare_dir();
	each_entry(spare, gc_spare_entry, removed);
	/* the image store: what a killed snapshot, build or import wrote */
	_cleanup_json_ json_t *store = json_array();
	lc_image_gc(store);
	size_t si;
	json_t *sp;
	json_array_foreach(store, si, sp)
		note(removed, "removed %s (its writer was gone)", json_string_value(sp));
	lc_error_t *e = NULL;
	int n = lc_net_gc(net_is_live, NULL, &e);
	if (n > 0)
		note(removed, "removed the network (veth, firewall chains, address lease) of %d sandbox%s", n,
		     n == 1 ? "" : "es");
	lc_error_free(e);
	if (removed_out)
		*removed_out = removed;
	else
		json_decref(removed);
	return 0;
}
