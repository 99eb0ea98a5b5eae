/* cgroup.c — one cgroup v2 per sandbox under lcrun/: limits, kill, freeze,
 * accounting.  The v2 hierarchy is found at /sys/fs/cgroup or
 * /sys/fs/cgroup/unified, else from /proc/self/mountinfo. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cgroup.h"
#include "container.h"
#include "util.h"

static char cg_root[4096];
static lc_cg_mode_t cg_mode = LC_CG_NONE;
static pthread_once_t cg_once = PTHREAD_ONCE_INIT, mode_once = PTHREAD_ONCE_INIT;

/* Is there a v1 hierarchy, and where is the first v2 one (root: where
 * to write it, NULL when not wanted)? */
static bool scan_mountinfo(char *root, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[8192];
	bool v1 = false;
	while (fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint opts ... - fstype source superopts */
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		char fstype[64] = "";
		sscanf(sep + 3, "%63s", fstype);
		char mp[4096];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		if (!strcmp(fstype, "cgroup"))
			v1 = true;
		if (!strcmp(fstype, "cgroup2") && root && !root[0])
			snprintf(root, size, "%s", mp);
	}
	fclose(f);
	return v1;
}

static bool is_cgroup2(const char *path)
{
	struct statfs st;
	return statfs(path, &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
}

/* Where the v2 hierarchy is: its two usual places first (a statfs each),
 * /proc/self/mountinfo only if neither is (reading it cost 0.19 ms, on
 * every sandbox's way in). */
static void find_root(void)
{
	const char *env = getenv("LCRUN_CGROUP_ROOT"); /* "": none */
	if (env)
		snprintf(cg_root, sizeof(cg_root), "%s", env);
	else if (is_cgroup2("/sys/fs/cgroup"))
		snprintf(cg_root, sizeof(cg_root), "/sys/fs/cgroup");
	else if (is_cgroup2("/sys/fs/cgroup/unified"))
		snprintf(cg_root, sizeof(cg_root), "/sys/fs/cgroup/unified");
	else
		scan_mountinfo(cg_root, sizeof(cg_root));
}

/* Hybrid or pure: only error messages say it. */
static void find_mode(void)
{
	pthread_once(&cg_once, find_root);
	bool v1 = scan_mountinfo(NULL, 0);
	if (cg_root[0])
		cg_mode = v1 ? LC_CG_HYBRID : LC_CG_UNIFIED;
}

const char *lc_cgroup_root(lc_cg_mode_t *mode)
{
	pthread_once(&cg_once, find_root);
	if (mode) {
		pthread_once(&mode_once, find_mode);
		*mode = cg_mode;
	}
	return cg_root[0] ? cg_root : NULL;
}

const char *lc_cgroup_mode_name(lc_cg_mode_t mode)
{
	switch (mode) {
	case LC_CG_UNIFIED: return "pure cgroup v2";
	case LC_CG_HYBRID: return "hybrid cgroup v1/v2";
	default: return "no cgroup v2";
	}
}

static bool word_in(const char *list, const char *w)
{
	size_t n = strlen(w);
	for (const char *p = list; (p = strstr(p, w)); p += n)
		if ((p == list || p[-1] == ' ' || p[-1] == '\n') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
			return true;
	return false;
}

/* The root's cgroup.controllers ("" when there is none to read): read
 * once by whoever asks several questions of it. */
static char *root_controllers(void)
{
	const char *root = lc_cgroup_root(NULL);
	char *s = NULL;
	if (root) {
		_cleanup_free_ char *p = lc_strdup_printf("%s/cgroup.controllers", root);
		lc_read_file(p, &s, NULL, NULL);
	}
	return s ? s : strdup("");
}

bool lc_cgroup_has_controller(const char *name)
{
	_cleanup_free_ char *s = root_controllers();
	return word_in(s, name);
}

char *lc_cgroup_path_for(const char *id)
{
	const char *root = lc_cgroup_root(NULL);
	return root ? lc_strdup_printf("%s/lcrun/%s", root, id) : NULL;
}

struct want {
	const char *flag;
	const char *controller;
	bool requested;
};

static int missing_controller(const struct want *w, lc_error_t **err)
{
	lc_cg_mode_t mode;
	const char *root = lc_cgroup_root(&mode);
	if (!root)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0,
				    "%s needs cgroup v2, and this host has no cgroup v2 hierarchy mounted", w->flag);
	return lc_error_set(err, LC_EXIT_RUNTIME, 0,
			    "%s needs the cgroup v2 '%s' controller, which this host does not offer "
			    "(%s host, v2 at %s; use --limits best-effort to run without it)",
			    w->flag, w->controller, lc_cgroup_mode_name(mode), root);
}

static void wants(const lc_limits_t *lim, struct want w[5])
{
	w[0] = (struct want){ "--memory", "memory", lim->memory >= 0 || lim->memory_swap >= 0 };
	w[1] = (struct want){ "--pids", "pids", lim->pids >= 0 };
	w[2] = (struct want){ "--cpus", "cpu", lim->cpus > 0 };
	w[3] = (struct want){ "--cpu-weight", "cpu", lim->cpu_weight > 0 };
	w[4] = (struct want){ "--io-weight", "io", lim->io_weight > 0 };
}

int lc_cgroup_check_limits(const lc_limits_t *lim, lc_error_t **err)
{
	struct want w[5];
	wants(lim, w);
	if (lim->best_effort)
		return 0;
	for (int i = 0; i < 5; i++)
		if (w[i].requested && !lc_cgroup_has_controller(w[i].controller))
			return missing_controller(&w[i], err);
	return 0;
}

/* Make sure lcrun/ exists and delegates the controllers we may use. */
static int prepare_parent(const char *root, const char *ctrls, lc_error_t **err)
{
	_cleanup_free_ char *parent = lc_strdup_printf("%s/lcrun", root);
	if (mkdir(parent, 0755) < 0 && errno != EEXIST)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create cgroup %s", parent);
	static const char *ctl[] = { "memory", "pids", "cpu", "io" };
	_cleanup_free_ char *rs = lc_strdup_printf("%s/cgroup.subtree_control", root);
	_cleanup_free_ char *ps = lc_strdup_printf("%s/cgroup.subtree_control", parent);
	_cleanup_free_ char *cur = NULL;
	bool read_cur = false;
	for (int i = 0; i < 4; i++) {
		if (!word_in(ctrls, ctl[i]))
			continue;
		if (!read_cur) { /* once: what is delegated already */
			lc_read_file(ps, &cur, NULL, NULL);
			read_cur = true;
		}
		if (cur && word_in(cur, ctl[i]))
			continue;
		_cleanup_free_ char *val = lc_strdup_printf("+%s", ctl[i]);
		/* Best effort at the root (a container host may have it on already). */
		lc_write_file(rs, val, NULL);
		lc_error_t *e = NULL;
		if (lc_write_file(ps, val, &e) < 0)
			lc_error_free(e);
	}
	return 0;
}

static bool usable(const struct want *w, const char *ctrls, const lc_limits_t *lim, char **skipped, lc_error_t **err,
		   int *st)
{
	if (word_in(ctrls, w->controller))
		return true;
	if (!lim->best_effort) {
		missing_controller(w, err);
		*st = -1;
		return false;
	}
	char *n = lc_strdup_printf("%s%s%s", *skipped ? *skipped : "", *skipped ? ", " : "", w->flag);
	free(*skipped);
	*skipped = n;
	return false;
}

static int set_knob(const char *cg, const char *knob, const char *val, lc_error_t **err)
{
	_cleanup_free_ char *p = lc_strdup_printf("%s/%s", cg, knob);
	return lc_write_file(p, val, err);
}

/* Write the requested limits into the cgroup at path; *skipped lists what
 * best-effort left out. */
static int apply_limits(const char *path, const char *ctrls, const lc_limits_t *lim, char **skipped,
			lc_error_t **err)
{
	struct want w[5];
	wants(lim, w);
	char buf[64];
	/* usable(i): the controller exists; else fail, or note the skip
	 * under best-effort. */
	int st = 0;
#define USABLE(i) usable(&w[i], ctrls, lim, skipped, err, &st)
	if ((lim->memory >= 0 || lim->memory_swap >= 0) && USABLE(0)) {
		if (lim->memory >= 0) {
			snprintf(buf, sizeof(buf), "%lld", lim->memory);
			if (set_knob(path, "memory.max", buf, err) < 0)
				return -1;
		}
		snprintf(buf, sizeof(buf), "%lld", lim->memory_swap >= 0 ? lim->memory_swap : 0);
		_cleanup_free_ char *sw = lc_strdup_printf("%s/memory.swap.max", path);
		if (access(sw, F_OK) == 0 && set_knob(path, "memory.swap.max", buf, err) < 0)
			return -1;
	}
	if (st < 0)
		return -1;
	/* pids: the requested value, else the default 4096 where it can be set. */
	if (lim->pids >= 0 ? USABLE(1) : word_in(ctrls, "pids")) {
		snprintf(buf, sizeof(buf), "%lld", lim->pids >= 0 ? lim->pids : 4096);
		if (set_knob(path, "pids.max", buf, err) < 0)
			return -1;
	}
	if (st < 0)
		return -1;
	if (lim->cpus > 0 && USABLE(2)) {
		long quota = (long)(lim->cpus * 100000.0 + 0.5);
		if (quota < 1000)
			quota = 1000;
		snprintf(buf, sizeof(buf), "%ld 100000", quota);
		if (set_knob(path, "cpu.max", buf, err) < 0)
			return -1;
	}
	if (st < 0)
		return -1;
	if (lim->cpu_weight > 0 && USABLE(3)) {
		snprintf(buf, sizeof(buf), "%d", lim->cpu_weight);
		if (set_knob(path, "cpu.weight", buf, err) < 0)
			return -1;
	}
	if (st < 0)
		return -1;
	if (lim->io_weight > 0 && USABLE(4)) {
		snprintf(buf, sizeof(buf), "default %d", lim->io_weight);
		_cleanup_free_ char *p = lc_strdup_printf("%s/io.weight", path);
		if (access(p, F_OK) == 0 && set_knob(path, "io.weight", buf, err) < 0)
			return -1;
	}
#undef USABLE
	return st;
}

int lc_cgroup_set_limits(const char *path, const lc_limits_t *lim, char **skipped, lc_error_t **err)
{
	_cleanup_free_ char *ctrls = root_controllers();
	return apply_limits(path, ctrls, lim, skipped, err);
}

/* Every state directory's sandboxes have their cgroups side by side under
 * lcrun/, so each cgroup names the state directory that records its
 * sandbox (its real path, in this xattr of the cgroup's directory, set
 * right after the mkdir): lcrun gc of another state directory leaves it
 * alone, even while it is empty, between its mkdir and its first process
 * (an image's layers may be unpacked meanwhile, seconds). */
#define CG_OWNER_XATTR "user.lcrun.state"

int lc_cgroup_owner(const char *path)
{
	char v[4096];
	ssize_t n = getxattr(path, CG_OWNER_XATTR, v, sizeof(v) - 1);
	if (n < 0)
		return errno == EOPNOTSUPP ? -1 : 0;
	v[n] = '\0';
	return !strcmp(v, lc_run_dir_real());
}

int lc_cgroup_create(const char *id, const lc_limits_t *lim, lc_cgroup_t *cg, lc_error_t **err)
{
	memset(cg, 0, sizeof(*cg));
	cg->dirfd = -1;
	const char *root = lc_cgroup_root(NULL);
	if (!root)
		return 0; /* no v2 at all: only requested limits fail (checked earlier) */
	_cleanup_free_ char *ctrls = root_controllers();
	if (prepare_parent(root, ctrls, err) < 0)
		return -1;
	cg->path = lc_cgroup_path_for(id);
	if (mkdir(cg->path, 0755) < 0) {
		int e = errno;
		free(cg->path);
		cg->path = NULL;
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot create cgroup %s/lcrun/%s", root, id);
	}
	const char *owner = lc_run_dir_real();
	if (setxattr(cg->path, CG_OWNER_XATTR, owner, strlen(owner), 0) < 0 && errno != EOPNOTSUPP) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot mark cgroup %s as %s's", cg->path, owner);
		rmdir(cg->path);
		free(cg->path);
		cg->path = NULL;
		return -1;
	}
	_cleanup_free_ char *skipped = NULL;
	if (apply_limits(cg->path, ctrls, lim, &skipped, err) < 0)
		goto fail;
	cg->dirfd = open(cg->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cg->dirfd < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open cgroup %s", cg->path);
		goto fail;
	}
	cg->not_applied = lc_steal(skipped);
	return 0;
fail:
	rmdir(cg->path);
	free(cg->path);
	cg->path = NULL;
	return lc_error_wrap(err, "cgroup for sandbox %s", id);
}

int lc_cgroup_kill(const char *path)
{
	if (!path)
		return 0;
	_cleanup_free_ char *p = lc_strdup_printf("%s/cgroup.kill", path);
	if (access(p, F_OK) == 0)
		return lc_write_file(p, "1", NULL);
	/* Pre-5.14 kernels: kill every pid listed, until none is left. */
	_cleanup_free_ char *procs = lc_strdup_printf("%s/cgroup.procs", path);
	for (int round = 0; round < 100; round++) {
		_cleanup_free_ char *s = NULL;
		if (lc_read_file(procs, &s, NULL, NULL) < 0 || !*s)
			return 0;
		for (char *l = strtok(s, "\n"); l; l = strtok(NULL, "\n"))
			kill(atoi(l), SIGKILL);
		usleep(1000);
	}
	return -1;
}

static bool populated(const char *path)
{
	_cleanup_free_ char *p = lc_strdup_printf("%s/cgroup.events", path);
	_cleanup_free_ char *s = NULL;
	if (lc_read_file(p, &s, NULL, NULL) < 0)
		return false;
	return strstr(s, "populated 1") != NULL;
}

int lc_cgroup_freeze(const char *path, bool frozen, lc_error_t **err)
{
	_cleanup_free_ char *p = lc_strdup_printf("%s/cgroup.freeze", path);
	if (lc_write_file(p, frozen ? "1" : "0", err) < 0)
		return -1;
	_cleanup_free_ char *ev = lc_strdup_printf("%s/cgroup.events", path);
	const char *want = frozen ? "frozen 1" : "frozen 0";
	for (int i = 0; i < 5000; i++) {
		_cleanup_free_ char *s = NULL;
		if (lc_read_file(ev, &s, NULL, NULL) < 0)
			break;
		if (strstr(s, want) || !strstr(s, "populated 1"))
			return 0;
		usleep(1000);
	}
	return lc_error_set(err, LC_EXIT_RUNTIME, ETIMEDOUT, "cgroup %s did not %s", path,
			    frozen ? "freeze" : "thaw");
}

int lc_cgroup_destroy(const char *path, lc_error_t **err)
{
	if (!path)
		return 0;
	if (access(path, F_OK) < 0)
		return 0;
	/* A frozen cgroup still dies from SIGKILL, but thaw it to be safe. */
	_cleanup_free_ char *fz = lc_strdup_printf("%s/cgroup.freeze", path);
	if (access(fz, F_OK) == 0)
		lc_write_file(fz, "0", NULL);
	for (int i = 0; i < 10000; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot remove cgroup %s", path);
		if (populated(path) || i % 50 == 0)
			lc_cgroup_kill(path);
		usleep(i < 100 ? 200 : 1000);
	}
	return lc_error_set(err, LC_EXIT_RUNTIME, EBUSY, "cgroup %s does not empty", path);
}

long long lc_cgroup_read_key(const char *path, const char *file, const char *key)
{
	/* One open and one read (a listing reads cpu.stat for each sandbox):
	 * the files read here are of one record, a few hundred bytes. */
	char p[PATH_MAX], buf[4096];
	if (snprintf(p, sizeof(p), "%s/%s", path, file) >= (int)sizeof(p))
		return -1;
	_cleanup_free_ char *big = NULL;
	char *s = buf;
	ssize_t got = lc_read_small(AT_FDCWD, p, buf, sizeof(buf), true);
	if (got < 0)
		return -1;
	if ((size_t)got + 1 >= sizeof(buf)) {
		if (lc_read_file(p, &big, NULL, NULL) < 0)
			return -1;
		s = big;
	}
	if (!key)
		return strtoll(s, NULL, 10);
	size_t n = strlen(key);
	for (char *l = s; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, n) && l[n] == ' ')
			return strtoll(l + n + 1, NULL, 10);
	return -1;
}

void lc_cgroup_stats(const char *path, lc_result_t *res)
{
	res->cpu_user_us = res->cpu_system_us = res->memory_peak = res->pids_peak = -1;
	if (!path)
		return;
	res->cpu_user_us = lc_cgroup_read_key(path, "cpu.stat", "user_usec");
	res->cpu_system_us = lc_cgroup_read_key(path, "cpu.stat", "system_usec");
	res->memory_peak = lc_cgroup_read_key(path, "memory.peak", NULL);
	res->pids_peak = lc_cgroup_read_key(path, "pids.peak", NULL);
	long long oom = lc_cgroup_read_key(path, "memory.events", "oom_kill");
	if (oom > 0)
		res->oom_killed = true;
}

void lc_cgroup_clear(lc_cgroup_t *cg)
{
	if (cg->dirfd >= 0)
		close(cg->dirfd);
	cg->dirfd = -1;
	free(cg->path);
	free(cg->not_applied);
	cg->path = cg->not_applied = NULL;
}

/* ---- arbitrary cgroup paths (lcrun-oci's cgroupsPath) ---------------------- */

int lc_cgroup_create_path(const char *path, const lc_limits_t *lim, char **unified, lc_error_t **err)
{
	const char *root = lc_cgroup_root(NULL);
	if (!root)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "this host has no cgroup v2 hierarchy mounted");
	size_t rl = strlen(root);
	if (strncmp(path, root, rl) || path[rl] != '/' || strstr(path, "/../") || strstr(path, "/./"))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "cgroup %s is not under the cgroup v2 root %s", path, root);
	_cleanup_free_ char *p = strdup(path);
	_cleanup_free_ char *ctrls = root_controllers();
	/* Every level from the root down to the parent delegates the
	 * controllers we have. */
	char *s = p + rl;
	for (;;) {
		bool last = !*s;
		if (*s != '/' && !last) {
			s++;
			continue;
		}
		*s = '\0';
		if (s > p + rl && mkdir(p, 0755) < 0 && (errno != EEXIST || last))
			return lc_error_set(err, errno == EEXIST ? LC_EXIT_BUSY : LC_EXIT_RUNTIME, errno,
					    "cannot create cgroup %s", p);
		if (last)
			break;
		static const char *ctl[] = { "memory", "pids", "cpu", "io", "cpuset" };
		for (int i = 0; i < 5; i++) {
			if (!word_in(ctrls, ctl[i]))
				continue;
			_cleanup_free_ char *sc = lc_strdup_printf("%s/cgroup.subtree_control", p);
			_cleanup_free_ char *cur = NULL;
			if (lc_read_file(sc, &cur, NULL, NULL) == 0 && word_in(cur, ctl[i]))
				continue;
			_cleanup_free_ char *val = lc_strdup_printf("+%s", ctl[i]);
			lc_write_file(sc, val, NULL); /* a level with processes refuses: limits then fail below */
		}
		*s++ = '/';
	}
	_cleanup_free_ char *skipped = NULL;
	if (apply_limits(path, ctrls, lim, &skipped, err) < 0)
		goto fail;
	for (size_t i = 0; unified && unified[i]; i++) {
		const char *eq = strchr(unified[i], '=');
		_cleanup_free_ char *file = strndup(unified[i], eq ? (size_t)(eq - unified[i]) : strlen(unified[i]));
		if (!eq || !*file || strchr(file, '/') || file[0] == '.') {
			lc_error_set(err, LC_EXIT_INVALID, 0, "linux.resources.unified: invalid key '%s'", file);
			goto fail;
		}
		_cleanup_free_ char *fp = lc_strdup_printf("%s/%s", path, file);
		if (access(fp, F_OK) < 0) {
			lc_error_set(err, LC_EXIT_RUNTIME, errno, "linux.resources.unified: %s: the cgroup has no such file "
				     "(is its controller enabled on this host?)", file);
			goto fail;
		}
		if (lc_write_file(fp, eq + 1, err) < 0)
			goto fail;
	}
	return 0;
fail:
	rmdir(path);
	return -1;
}

int lc_cgroup_pids(const char *path, pid_t **pids, size_t *n, lc_error_t **err)
{
	*pids = NULL;
	*n = 0;
	size_t cap = 0;
	/* cgroup.procs of the cgroup and of every cgroup below it. */
	_cleanup_strv_ char **todo = NULL;
	lc_strv_push(&todo, path);
	for (size_t t = 0; todo[t]; t++) {
		_cleanup_free_ char *procs = lc_strdup_printf("%s/cgroup.procs", todo[t]);
		_cleanup_free_ char *s = NULL;
		if (lc_read_file(procs, &s, NULL, t ? NULL : err) < 0) {
			if (t)
				continue;
			free(*pids);
			*pids = NULL;
			return -1;
		}
		for (char *l = strtok(s, "\n"); l; l = strtok(NULL, "\n")) {
			if (*n == cap) {
				cap = cap ? cap * 2 : 16;
				*pids = realloc(*pids, cap * sizeof(pid_t));
			}
			(*pids)[(*n)++] = (pid_t)atoi(l);
		}
		_cleanup_dir_ DIR *d = opendir(todo[t]);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (de->d_type == DT_DIR && de->d_name[0] != '.') {
				_cleanup_free_ char *sub = lc_strdup_printf("%s/%s", todo[t], de->d_name);
				lc_strv_push(&todo, sub);
			}
	}
	return 0;
}
