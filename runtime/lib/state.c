/* state.c — /run/lcrun/ID/state.json, written atomically, and names. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "json.h"
#include "paths.h"
#include "state.h"
#include "util.h"

bool lc_id_valid(const char *id)
{
	if (!id || strlen(id) != LC_ID_LEN)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

int lc_state_write(const char *id, json_t *state, lc_error_t **err)
{
	_cleanup_free_ char *dir = lc_state_dir(id);
	if (lc_mkdir_p(dir, 0700, err) < 0)
		return -1;
	_cleanup_free_ char *path = lc_strdup_printf("%s/state.json", dir);
	_cleanup_free_ char *s = json_dumps(state, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!s)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot serialize state of %s", id);
	/* /run is volatile: rename is all the atomicity it needs, no fsync. */
	_cleanup_free_ char *tmp = lc_strdup_printf("%s.tmp.%d", path, getpid());
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || lc_write_all(fd, s, strlen(s)) < 0 || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot write %s", path);
	}
	return 0;
}

json_t *lc_state_read(const char *id, lc_error_t **err)
{
	_cleanup_free_ char *path = lc_strdup_printf("%s/%s/state.json", lc_run_dir(), id);
	/* One open and one read for a state of the usual size (1-3 KiB; a
	 * listing reads one per sandbox), parsed from memory; a larger one
	 * from the file. */
	char buf[8192];
	json_error_t je = { .text = "" };
	json_t *j = NULL;
	ssize_t n = lc_read_small(AT_FDCWD, path, buf, sizeof(buf), true);
	if (n >= 0 && (size_t)n + 1 < sizeof(buf))
		j = json_loadb(buf, (size_t)n, 0, &je);
	else if (n >= 0)
		j = json_load_file(path, 0, &je);
	else
		snprintf(je.text, sizeof(je.text), "%s", strerror(errno));
	if (!j) {
		if (access(path, F_OK) < 0)
			lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no such sandbox: %s", id);
		else
			lc_error_set(err, LC_EXIT_RUNTIME, 0, "state of sandbox %s is unreadable: %s", id, je.text);
		return NULL;
	}
	return j;
}

void lc_name_unlink(const char *id, const char *name)
{
	_cleanup_free_ char *link = lc_strdup_printf("%s/names/%s", lc_run_dir(), name);
	char target[64];
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		if (!strcmp(target, id))
			unlink(link);
	}
}

int lc_name_link(const char *id, const char *name, lc_error_t **err)
{
	if (!*name || strchr(name, '/') || name[0] == '.' || strlen(name) > 64 || lc_id_valid(name))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "invalid sandbox name '%s'", name);
	_cleanup_free_ char *dir = lc_strdup_printf("%s/names", lc_run_dir());
	if (lc_mkdir_p(dir, 0700, err) < 0)
		return -1;
	_cleanup_free_ char *link = lc_strdup_printf("%s/%s", dir, name);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (symlink(id, link) == 0)
			return 1;
		if (errno != EEXIST)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot record name %s", name);
		char target[64];
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			if (!strcmp(target, id))
				return 0; /* start again: the name is already ours */
			_cleanup_free_ char *sd = lc_state_dir(target);
			if (access(sd, F_OK) == 0)
				return lc_error_set(err, LC_EXIT_BUSY, 0, "name '%s' is taken by sandbox %s", name, target);
		}
		unlink(link); /* stale: its sandbox is gone */
	}
	return lc_error_set(err, LC_EXIT_BUSY, 0, "name '%s' is taken", name);
}

int lc_state_remove(const char *id)
{
	_cleanup_free_ char *dir = lc_state_dir(id);
	json_t *st = lc_state_read(id, NULL);
	if (st) {
		const char *name = lc_json_str(st, "name");
		if (name)
			lc_name_unlink(id, name);
		json_decref(st);
	}
	return lc_rm_rf(dir, NULL);
}

int lc_state_resolve(const char *id_or_name, char **id, lc_error_t **err)
{
	if (lc_id_valid(id_or_name)) {
		_cleanup_free_ char *dir = lc_state_dir(id_or_name);
		if (access(dir, F_OK) == 0) {
			*id = strdup(id_or_name);
			return 0;
		}
	}
	if (strchr(id_or_name, '/') || !*id_or_name || id_or_name[0] == '.')
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no such sandbox: %s", id_or_name);
	_cleanup_free_ char *link = lc_strdup_printf("%s/names/%s", lc_run_dir(), id_or_name);
	char target[64];
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		if (lc_id_valid(target)) {
			*id = strdup(target);
			return 0;
		}
	}
	/* A unique id prefix of at least 4 characters. */
	if (strlen(id_or_name) >= 4 && strlen(id_or_name) < LC_ID_LEN) {
		_cleanup_dir_ DIR *d = opendir(lc_run_dir());
		struct dirent *de;
		char *found = NULL;
		int count = 0;
		while (d && (de = readdir(d))) {
			if (lc_id_valid(de->d_name) && !strncmp(de->d_name, id_or_name, strlen(id_or_name))) {
				count++;
				free(found);
				found = strdup(de->d_name);
			}
		}
		if (count == 1) {
			*id = found;
			return 0;
		}
		free(found);
		if (count > 1)
			return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "sandbox id prefix '%s' is ambiguous", id_or_name);
	}
	return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no such sandbox: %s", id_or_name);
}

json_t *lc_state_open(const char *id_or_name, char **id, lc_error_t **err)
{
	if (lc_state_resolve(id_or_name, id, err) < 0)
		return NULL;
	return lc_state_read(*id, err);
}

/* ---- processes and state ----------------------------------------------- */

/* Start time (0: no such process, or a dead one not reaped yet) and
 * resident pages (rss, if not NULL) of a process, from one read of its
 * /proc/PID/stat. */
unsigned long long lc_proc_stat(pid_t pid, long long *rss)
{
	if (pid <= 0)
		return 0;
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	_cleanup_free_ char *big = NULL;
	char *s = buf;
	ssize_t n = lc_read_small(AT_FDCWD, path, buf, sizeof(buf), true);
	if (n <= 0)
		return 0;
	if ((size_t)n + 1 >= sizeof(buf)) { /* longer than any seen: read it whole */
		if (lc_read_file(path, &big, NULL, NULL) < 0)
			return 0;
		s = big;
	}
	char *p = strrchr(s, ')'); /* comm may hold spaces */
	if (!p)
		return 0;
	/* after ")": state(3) ppid(4) ... starttime(22) vsize(23) rss(24) */
	unsigned long long v = 0;
	int field = 2;
	char *save = NULL;
	for (char *t = strtok_r(p + 1, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (++field == 3 && (t[0] == 'Z' || t[0] == 'X'))
			return 0; /* dead, only not reaped yet */
		if (field == 22) {
			v = strtoull(t, NULL, 10);
			if (!rss)
				break;
		}
		if (field == 24) {
			*rss = strtoll(t, NULL, 10);
			break;
		}
	}
	return v;
}

unsigned long long lc_proc_starttime(pid_t pid)
{
	return lc_proc_stat(pid, NULL);
}

bool lc_proc_is(pid_t pid, unsigned long long start, const char *id)
{
	if (pid <= 0)
		return false;
	unsigned long long now = lc_proc_starttime(pid);
	if (!now)
		return false;
	if (start)
		return now == start;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	_cleanup_free_ char *cg = NULL;
	if (lc_read_file(path, &cg, NULL, NULL) < 0)
		return false;
	/* Without a cgroup v2 there is nothing to compare: assume it is. */
	return strstr(cg, id) != NULL || !lc_cgroup_root(NULL);
}

bool lc_state_pid1_alive(json_t *st, const char *id)
{
	return lc_proc_is((pid_t)lc_json_int(st, "pid"), (unsigned long long)lc_json_int(st, "pid_start"), id);
}

bool lc_state_monitor_alive(json_t *st, const char *id)
{
	pid_t m = (pid_t)lc_json_int(st, "monitor_pid");
	return m > 0 && lc_proc_is(m, (unsigned long long)lc_json_int(st, "monitor_start"), id);
}

/* The process that started the sandbox (lcrun run, or the monitor) is
 * alive: its pid exists and it started before the sandbox did. */
bool lc_state_creator_alive(json_t *st)
{
	unsigned long long start = lc_proc_starttime((pid_t)lc_json_int(st, "lcrun_pid"));
	if (!start)
		return false;
	static long long boot_ms = -1;
	if (boot_ms < 0) {
		_cleanup_free_ char *s = NULL;
		char *p;
		boot_ms = 0;
		if (lc_read_file("/proc/stat", &s, NULL, NULL) == 0 && (p = strstr(s, "\nbtime ")))
			boot_ms = strtoll(p + 7, NULL, 10) * 1000;
	}
	long long started_ms = boot_ms + (long long)(start * 1000 / (unsigned long long)sysconf(_SC_CLK_TCK));
	return started_ms <= lc_json_int(st, "created") + 2000;
}

const char *lc_state_status(json_t *st, const char *id)
{
	const char *s = lc_json_str(st, "status");
	if (!s)
		return "unknown";
	if (!strcmp(s, "running") || !strcmp(s, "paused") || !strcmp(s, "creating")) {
		if (lc_state_pid1_alive(st, id))
			return s;
		if (lc_state_monitor_alive(st, id) || lc_state_creator_alive(st))
			return !strcmp(s, "creating") ? s : "stopping";
		return "dead";
	}
	return s;
}

int lc_state_pid1_pidfd(json_t *st, const char *id, lc_error_t **err)
{
	pid_t pid = (pid_t)lc_json_int(st, "pid");
	int fd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	if (fd >= 0 && lc_state_pid1_alive(st, id)) {
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		return fd;
	}
	if (fd >= 0)
		close(fd);
	return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is not running", id);
}

int lc_state_lock(const char *id, int wait_ms, lc_error_t **err)
{
	_cleanup_free_ char *dir = lc_state_dir(id);
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no such sandbox: %s", id);
	long long deadline = lc_now_ms() + wait_ms;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot lock %s", dir);
		if (lc_now_ms() >= deadline)
			return lc_error_set(err, LC_EXIT_BUSY, 0,
					    "sandbox %s is busy: another lcrun command is changing it", id);
		usleep(10000);
	}
	struct stat sb;
	if (fstatat(fd, "state.json", &sb, 0) < 0)
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no such sandbox: %s (removed meanwhile)", id);
	return lc_steal_fd(fd);
}

int lc_state_patch(const char *id, json_t *patch, lc_error_t **err)
{
	_cleanup_json_ json_t *st = lc_state_read(id, err);
	if (!st)
		return -1;
	json_object_update(st, patch);
	return lc_state_write(id, st, err);
}
