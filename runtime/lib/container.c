/* container.c — OCI containers on liblcrun: create, start, exec, hooks.
 *
 * Processes.  The caller (lcrun-oci create) makes the cgroup and clones
 * STAGE 1 straight into it.  Stage 1 joins the namespaces given by path
 * (all but user and pid first, as host root; then the user namespace),
 * or makes a user namespace whose maps the caller writes; it unshares the
 * new namespaces and joins or makes the pid namespace, then clones STAGE 2
 * with CLONE_PARENT (so it is the caller's child, and its pid 1 when the
 * pid namespace is new) and exits.  Stage 2 builds the root from the
 * bundle's directory and the config's mounts, devices, masks and sysctls,
 * runs the createContainer hooks, pivots, checks that the program exists,
 * says READY and blocks opening the exec fifo.  `start` opens the other
 * end; stage 2 runs the startContainer hooks and becomes the program.
 *
 * Exec: a helper cloned into the cgroup joins the container's namespaces
 * and clones the process with CLONE_PARENT, so that the caller (or, once
 * it exits, the caller's subreaper) is its parent. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "caps.h"
#include "cgroup.h"
#include "console.h"
#include "container.h"
#include "mounts.h"
#include "net.h"
#include "seccomp.h"
#include "sync.h"
#include "util.h"

extern char **environ;

enum { MSG_HOOKS = 40 }; /* stage 2 -> caller: run prestart/createRuntime, then GO */

/* ---- the description ------------------------------------------------------ */

lc_ctr_spec_t *lc_ctr_spec_new(void)
{
	lc_ctr_spec_t *s = lc_xmalloc0(sizeof(*s));
	s->proc.umask = -1;
	s->limits.memory = s->limits.memory_swap = s->limits.pids = -1;
	s->console_fd = -1;
	return s;
}

void lc_ctr_process_clear(lc_ctr_process_t *p)
{
	lc_strv_free(p->args);
	lc_strv_free(p->env);
	free(p->cwd);
	free(p->gids);
	free(p->rlimits);
	memset(p, 0, sizeof(*p));
	p->umask = -1;
}

void lc_ctr_spec_free(lc_ctr_spec_t *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->bundle);
	free(s->rootfs);
	lc_ctr_process_clear(&s->proc);
	free(s->hostname);
	free(s->domainname);
	for (size_t i = 0; i < s->n_mounts; i++) {
		free(s->mounts[i].dst);
		free(s->mounts[i].type);
		free(s->mounts[i].src);
		free(s->mounts[i].data);
	}
	free(s->mounts);
	for (size_t i = 0; i < s->n_ns; i++)
		free(s->ns[i].path);
	free(s->uid_map);
	free(s->gid_map);
	for (size_t i = 0; i < s->n_devices; i++)
		free(s->devices[i].path);
	free(s->devices);
	free(s->devrules);
	lc_strv_free(s->sysctl);
	lc_strv_free(s->masked);
	lc_strv_free(s->readonly);
	free(s->cgroup);
	lc_strv_free(s->unified);
	free(s->seccomp);
	for (int k = 0; k < LC_HOOK_KINDS; k++) {
		for (size_t i = 0; i < s->n_hooks[k]; i++) {
			free(s->hooks[k][i].path);
			lc_strv_free(s->hooks[k][i].args);
			lc_strv_free(s->hooks[k][i].env);
		}
		free(s->hooks[k]);
	}
	if (s->annotations)
		json_decref(s->annotations);
	free(s->fifo);
	if (s->console_fd >= 0)
		close(s->console_fd);
	free(s);
}

json_t *lc_ctr_state_json(const lc_ctr_spec_t *s, const char *status, pid_t pid)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "ociVersion", "1.1.0", "id", s->id, "status", status,
			      "bundle", s->bundle ? s->bundle : "");
	if (pid > 0)
		json_object_set_new(j, "pid", json_integer(pid));
	json_object_set(j, "annotations", s->annotations ? s->annotations : json_object());
	if (!s->annotations)
		json_decref(json_object_get(j, "annotations"));
	return j;
}

static bool has_ns(const lc_ctr_spec_t *s, int type, const char **path)
{
	for (size_t i = 0; i < s->n_ns; i++)
		if (s->ns[i].type == type) {
			if (path)
				*path = s->ns[i].path;
			return true;
		}
	return false;
}

/* ---- hooks ---------------------------------------------------------------- */

static const char *hook_names[LC_HOOK_KINDS] = {
	"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
};

static int run_hook(const lc_ctr_hook_t *h, const char *kind, const char *state, lc_error_t **err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "hooks.%s: cannot make a pipe", kind);
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "hooks.%s: cannot fork", kind);
	}
	if (pid == 0) {
		dup2(p[0], 0);
		char *dflt[] = { h->path, NULL };
		char *noenv[] = { NULL };
		execve(h->path, h->args ? h->args : dflt, h->env ? h->env : noenv);
		dprintf(2, "lcrun-oci: hooks.%s: cannot execute %s: %s\n", kind, h->path, strerror(errno));
		_exit(127);
	}
	close(p[0]);
	signal(SIGPIPE, SIG_IGN);
	lc_write_all(p[1], state, strlen(state));
	close(p[1]);
	long long deadline = h->timeout > 0 ? lc_now_ms() + h->timeout * 1000LL : -1;
	int status = 0;
	for (;;) {
		pid_t r = waitpid(pid, &status, deadline < 0 ? 0 : WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "hooks.%s: %s", kind, h->path);
		if (deadline >= 0 && lc_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return lc_error_set(err, LC_EXIT_RUNTIME, ETIMEDOUT, "hooks.%s: %s did not finish in %d s", kind,
					    h->path, h->timeout);
		}
		if (r == 0)
			usleep(2000);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "hooks.%s: %s was killed by signal %d", kind, h->path,
				    WTERMSIG(status));
	return lc_error_set(err, LC_EXIT_RUNTIME, 0, "hooks.%s: %s exited %d", kind, h->path, WEXITSTATUS(status));
}

int lc_ctr_run_hooks(const lc_ctr_spec_t *s, lc_hook_kind_t kind, const json_t *state, lc_error_t **err)
{
	if (!s->n_hooks[kind])
		return 0;
	_cleanup_free_ char *text = json_dumps(state, JSON_COMPACT);
	for (size_t i = 0; i < s->n_hooks[kind]; i++)
		if (run_hook(&s->hooks[kind][i], hook_names[kind], text, err) < 0)
			return -1;
	return 0;
}

/* ---- stage 2: the root ------------------------------------------------------ */

typedef struct ctx {
	const lc_ctr_spec_t *s;
	int sp[2];
	int nsfd[8];         /* per s->ns[i] with a path: an open fd */
	int fifo_fd;         /* O_PATH fd of the exec fifo (stage 2) */
	int rootfs_fd;       /* O_PATH fd of root.path, opened as host root */
	bool mnt_joined;     /* the mount namespace is joined by path, not new */
	bool host_mnt;       /* no mount namespace: the runtime's (the host's) is shared */
	int tty_slave;
	char *exe;           /* args[0] resolved in the container */
	lc_seccomp_prog_t prog;
	bool have_prog;
	bool userns;         /* the process runs in a user namespace other than the host's */
} ctx_t;

static void __attribute__((noreturn)) fail(ctx_t *c, lc_error_t *e)
{
	lc_msg_send_error(c->sp[1], e);
	_exit(1);
}

/* MS_BIND|MS_REMOUNT with flags; where the kernel has locked flags on the
 * mount (a user namespace may not clear them), keep those. */
static int remount_bind(const char *t, unsigned long flags)
{
	if (mount(NULL, t, NULL, MS_BIND | MS_REMOUNT | flags, NULL) == 0)
		return 0;
	if (errno != EPERM)
		return -1;
	if (flags & MS_RDONLY)
		return lc_remount_ro(t);
	return -1;
}

static int sys_mount_setattr(int dfd, const char *path, unsigned flags, struct mount_attr *attr)
{
	return (int)syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof(*attr));
}

static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
	return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to, unsigned flags)
{
	return (int)syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}

/* tmpcopyup: what lay under a new tmpfs is copied into it (owners, modes,
 * links; devices where mknod is allowed). */
static int copy_tree(int from, int to, int depth)
{
	if (depth > 64)
		return -1;
	int dfd = dup(from);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		const char *n = de->d_name;
		struct stat st;
		if (!strcmp(n, ".") || !strcmp(n, "..") || fstatat(from, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (mkdirat(to, n, st.st_mode & 07777) < 0 && errno != EEXIST)
				r = -1;
			_cleanup_close_ int sfd = openat(from, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			_cleanup_close_ int tfd = openat(to, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (r == 0 && (sfd < 0 || tfd < 0 || copy_tree(sfd, tfd, depth + 1) < 0))
				r = -1;
		} else if (S_ISREG(st.st_mode)) {
			_cleanup_close_ int sfd = openat(from, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			_cleanup_close_ int tfd = openat(to, n, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
							 st.st_mode & 07777);
			if (sfd < 0 || tfd < 0)
				r = -1;
			while (r == 0 && lc_pump(sfd, tfd))
				;
		} else if (S_ISLNK(st.st_mode)) {
			char t[4096];
			ssize_t k = readlinkat(from, n, t, sizeof(t) - 1);
			if (k < 0)
				continue;
			t[k] = '\0';
			if (symlinkat(t, to, n) < 0)
				r = -1;
		} else if (mknodat(to, n, st.st_mode, st.st_rdev) < 0) {
			continue; /* a device or socket a user namespace cannot make */
		}
		if (r == 0) {
			fchownat(to, n, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
			if (!S_ISLNK(st.st_mode))
				fchmodat(to, n, st.st_mode & 07777, 0);
		}
	}
	closedir(d);
	return r;
}

static int mount_one(ctx_t *c, int rootfd, const lc_ctr_mount_t *m, lc_error_t **err)
{
	struct stat st;
	bool is_file = false;
	if (m->bind) {
		if (stat(m->src, &st) < 0)
			return lc_error_set(err, LC_EXIT_NOENT, errno, "mounts: %s: source %s", m->dst, m->src);
		is_file = !S_ISDIR(st.st_mode);
	}
	_cleanup_close_ int fd = lc_target_in_root(rootfd, m->dst, is_file, err);
	if (fd < 0)
		return lc_error_wrap(err, "mounts: %s", m->dst);
	_cleanup_free_ char *t = lc_strdup_printf("/proc/self/fd/%d", fd);
	const char *type = m->type && *m->type ? m->type : NULL;
	if (m->bind) {
		if (mount(m->src, t, NULL, MS_BIND | (m->rec ? MS_REC : 0), NULL) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "mounts: cannot bind %s to %s", m->src, m->dst);
	} else if (type && (!strcmp(type, "cgroup") || !strcmp(type, "cgroup2"))) {
		/* cgroup v2 only: the container's own cgroup when it has a cgroup namespace. */
		if (mount("cgroup2", t, "cgroup2", m->flags & ~(MS_BIND | MS_REC), NULL) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "mounts: cannot mount cgroup2 on %s", m->dst);
	} else {
		/* tmpcopyup: keep a handle on what the tmpfs will hide */
		_cleanup_close_ int under = m->copyup ? lc_open_in_root(rootfd, m->dst, O_RDONLY | O_DIRECTORY) : -1;
		int r = mount(m->src ? m->src : type, t, type, m->flags, m->data);
		if (r == 0 && under >= 0) {
			_cleanup_close_ int top = lc_open_in_root(rootfd, m->dst, O_RDONLY | O_DIRECTORY);
			struct stat ust;
			if (top < 0 || copy_tree(under, top, 0) < 0 || fstat(under, &ust) < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "mounts: tmpcopyup of %s", m->dst);
			if (fchown(top, ust.st_uid, ust.st_gid) < 0 || fchmod(top, ust.st_mode & 07777) < 0)
				return lc_error_set(err, LC_EXIT_RUNTIME, errno, "mounts: tmpcopyup of %s", m->dst);
		}
		if (r < 0 && errno == EPERM && type && !strcmp(type, "sysfs") && c->userns) {
			/* sysfs needs a network namespace of the user namespace's own:
			 * as runc does, bind the host's read-only instead. */
			r = mount("/sys", t, NULL, MS_BIND | MS_REC, NULL);
			if (r == 0) {
				_cleanup_close_ int top = lc_open_in_root(rootfd, m->dst, O_PATH);
				_cleanup_free_ char *tt = lc_strdup_printf("/proc/self/fd/%d", top);
				r = top < 0 ? -1 : lc_remount_ro(tt);
			}
		}
		if (r < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "mounts: cannot mount %s on %s", type ? type : "?",
					    m->dst);
	}
	/* The fd names what lies under the new mount: look again. */
	_cleanup_close_ int top = lc_open_in_root(rootfd, m->dst, O_PATH);
	if (top < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "mounts: cannot open %s", m->dst);
	_cleanup_free_ char *tt = lc_strdup_printf("/proc/self/fd/%d", top);
	unsigned long extra = m->flags & ~(MS_BIND | MS_REC | MS_REMOUNT);
	if (m->bind && extra && remount_bind(tt, extra) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "mounts: cannot apply the options of %s", m->dst);
	if (m->propagation && mount(NULL, tt, NULL, m->propagation, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "mounts: cannot set the propagation of %s", m->dst);
	if (m->rec_set) {
		struct mount_attr a = { .attr_set = m->rec_set };
		if (sys_mount_setattr(top, "", AT_EMPTY_PATH | AT_RECURSIVE, &a) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "mounts: cannot apply the recursive options of %s",
					    m->dst);
	}
	return 0;
}

static const lc_ctr_device_t default_devices[] = {
	{ "/dev/null", 'c', 1, 3, 0666, 0, 0 }, { "/dev/zero", 'c', 1, 5, 0666, 0, 0 },
	{ "/dev/full", 'c', 1, 7, 0666, 0, 0 }, { "/dev/random", 'c', 1, 8, 0666, 0, 0 },
	{ "/dev/urandom", 'c', 1, 9, 0666, 0, 0 }, { "/dev/tty", 'c', 5, 0, 0666, 0, 0 },
};

static int make_device(ctx_t *c, int rootfd, const lc_ctr_device_t *d, lc_error_t **err)
{
	const char *slash = strrchr(d->path, '/');
	_cleanup_free_ char *dir = strndup(d->path, (size_t)(slash - d->path));
	_cleanup_close_ int dfd = lc_target_in_root(rootfd, *dir ? dir : "/", false, err);
	if (dfd < 0)
		return lc_error_wrap(err, "devices: %s", d->path);
	const char *name = slash + 1;
	if (c->userns) {
		/* No mknod in a user namespace: bind the host's node. */
		struct stat st;
		if (stat(d->path, &st) < 0)
			return lc_error_set(err, LC_EXIT_NOENT, errno, "devices: %s (a user namespace binds the host's)",
					    d->path);
		_cleanup_close_ int f = lc_target_in_root(rootfd, d->path, true, err);
		if (f < 0)
			return -1;
		_cleanup_free_ char *t = lc_strdup_printf("/proc/self/fd/%d", f);
		if (mount(d->path, t, NULL, MS_BIND, NULL) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "devices: cannot bind %s", d->path);
		return 0;
	}
	mode_t type = d->type == 'b' ? S_IFBLK : d->type == 'p' ? S_IFIFO : S_IFCHR;
	unlinkat(dfd, name, 0);
	if (mknodat(dfd, name, type | (d->mode & 07777), makedev(d->major, d->minor)) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "devices: cannot create %s", d->path);
	if (fchownat(dfd, name, d->uid, d->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchmodat(dfd, name, d->mode & 07777, 0) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "devices: cannot set the owner and mode of %s", d->path);
	return 0;
}

static int setup_devices(ctx_t *c, int rootfd, lc_error_t **err)
{
	const lc_ctr_spec_t *s = c->s;
	for (size_t i = 0; i < sizeof(default_devices) / sizeof(default_devices[0]); i++) {
		bool given = false;
		for (size_t k = 0; k < s->n_devices; k++)
			given |= !strcmp(s->devices[k].path, default_devices[i].path);
		if (!given && make_device(c, rootfd, &default_devices[i], err) < 0)
			return -1;
	}
	for (size_t k = 0; k < s->n_devices; k++)
		if (make_device(c, rootfd, &s->devices[k], err) < 0)
			return -1;
	_cleanup_close_ int dev = lc_open_in_root(rootfd, "/dev", O_PATH | O_DIRECTORY);
	if (dev < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open /dev in the container");
	struct { const char *target, *name; } links[] = {
		{ "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" }, { "/proc/self/fd/1", "stdout" },
		{ "/proc/self/fd/2", "stderr" }, { "pts/ptmx", "ptmx" }, { "/proc/kcore", "core" },
	};
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		struct stat st;
		if (fstatat(dev, links[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			/* ptmx: the rootfs's own node would reach the host's devpts */
			if (strcmp(links[i].name, "ptmx") || S_ISLNK(st.st_mode) || unlinkat(dev, "ptmx", 0) < 0)
				continue;
		}
		if (symlinkat(links[i].target, dev, links[i].name) < 0 && errno != EEXIST)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create /dev/%s", links[i].name);
	}
	return 0;
}

static int setup_console(ctx_t *c, int rootfd, lc_error_t **err)
{
	const lc_ctr_spec_t *s = c->s;
	/* exec (no rootfd): the container's root is ours already */
	_cleanup_close_ int m = rootfd >= 0 ? lc_open_in_root(rootfd, "/dev/ptmx", O_RDWR | O_NOCTTY)
					    : open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "process.terminal: cannot open /dev/ptmx in the container "
				    "(is /dev/pts mounted?)");
	struct stat st;
	if (fstat(m, &st) < 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 5 || minor(st.st_rdev) != 2)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "process.terminal: /dev/ptmx in the container is not the "
				    "pty multiplexer");
	int unlock = 0, n = 0;
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0 || ioctl(m, TIOCGPTN, &n) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "process.terminal: cannot unlock the pty");
	int sl = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY);
	if (sl < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "process.terminal: cannot open the pty");
	c->tty_slave = sl;
	if (s->proc.cols && s->proc.rows) {
		struct winsize ws = { .ws_row = s->proc.rows, .ws_col = s->proc.cols };
		ioctl(sl, TIOCSWINSZ, &ws);
	}
	if (fchown(sl, s->proc.uid, s->proc.gid) < 0 && errno != EINVAL)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "process.terminal: cannot hand the pty to uid %u",
				    (unsigned)s->proc.uid);
	if (rootfd >= 0) {
		_cleanup_close_ int f = lc_target_in_root(rootfd, "/dev/console", true, err);
		if (f < 0)
			return -1;
		_cleanup_free_ char *t = lc_strdup_printf("/proc/self/fd/%d", f);
		_cleanup_free_ char *src = lc_strdup_printf("/proc/self/fd/%d", sl);
		if (mount(src, t, NULL, MS_BIND, NULL) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot bind the pty to /dev/console");
	}
	char name[32];
	snprintf(name, sizeof(name), "/dev/pts/%d", n);
	if (s->console_fd < 0 || lc_send_fd(s->console_fd, name, strlen(name), m, 0) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "process.terminal: cannot send the pty to the console socket");
	/* The pty is the process's stdio from now on: the runtime's own stdio
	 * (pipes its caller may wait on to close) must not stay open here. */
	if (setsid() < 0 || ioctl(sl, TIOCSCTTY, 0) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "process.terminal: cannot make the pty the controlling terminal");
	for (int i = 0; i < 3; i++)
		if (dup2(sl, i) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "process.terminal: cannot attach the pty");
	if (sl > 2)
		close(sl);
	c->tty_slave = -1;
	return 0;
}

static int write_sysctls(const lc_ctr_spec_t *s, lc_error_t **err)
{
	for (size_t i = 0; s->sysctl && s->sysctl[i]; i++) {
		const char *eq = strchr(s->sysctl[i], '=');
		_cleanup_free_ char *key = strndup(s->sysctl[i], (size_t)(eq - s->sysctl[i]));
		for (char *p = key; *p; p++)
			if (*p == '.')
				*p = '/';
		_cleanup_free_ char *path = lc_strdup_printf("/proc/sys/%s", key);
		if (lc_write_file(path, eq + 1, err) < 0)
			return lc_error_wrap(err, "linux.sysctl");
	}
	return 0;
}

/* args[0] as execvp would find it with the process's PATH; NULL and *err
 * as runc words it when it is not there. */
static char *find_program(const lc_ctr_process_t *p, lc_error_t **err)
{
	const char *a0 = p->args[0];
	if (strchr(a0, '/')) {
		struct stat st;
		if (stat(a0, &st) < 0) {
			lc_error_set(err, LC_EXIT_NOT_FOUND, 0, "exec: \"%s\": stat %s: %s", a0, a0, strerror(errno));
			return NULL;
		}
		if (S_ISDIR(st.st_mode) || access(a0, X_OK) < 0) {
			lc_error_set(err, LC_EXIT_CANNOT_EXEC, 0, "exec: \"%s\": permission denied", a0);
			return NULL;
		}
		return strdup(a0);
	}
	const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (size_t i = 0; p->env && p->env[i]; i++)
		if (!strncmp(p->env[i], "PATH=", 5))
			path = p->env[i] + 5;
	_cleanup_free_ char *dirs = strdup(path);
	char *save = NULL;
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char *cand = lc_strdup_printf("%s/%s", *d ? d : ".", a0);
		struct stat st;
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
			return cand;
		free(cand);
	}
	lc_error_set(err, LC_EXIT_NOT_FOUND, 0, "exec: \"%s\": executable file not found in $PATH", a0);
	return NULL;
}

static int pivot(const lc_ctr_spec_t *s, int rootfd, bool host_mnt, lc_error_t **err)
{
	if (fchdir(rootfd) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot enter the root %s", s->rootfs);
	if (host_mnt) {
		/* pivot_root or a move onto / would change the host's root for
		 * every process that shares this mount namespace. */
		if (chroot(".") < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot enter the root %s", s->rootfs);
	} else if (s->no_pivot) {
		if (mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot move into the root %s", s->rootfs);
	} else {
		if (syscall(SYS_pivot_root, ".", ".") < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "pivot_root into %s (--no-pivot avoids it)", s->rootfs);
		if (umount2(".", MNT_DETACH) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot detach the old root");
	}
	if (chdir("/") < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot chdir to /");
	/* A shared root was set up as a slave (pivot_root refuses shared
	 * mounts); it becomes what was asked once it is the root. */
	if (!host_mnt && (s->rootfs_propagation & MS_SHARED) && mount(NULL, "/", NULL, s->rootfs_propagation, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "linux.rootfsPropagation: cannot make / shared");
	if (s->rootfs_ro && lc_remount_ro("/") < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "root.readonly: cannot remount / read-only");
	return 0;
}

static int build_root(ctx_t *c, lc_error_t **err)
{
	const lc_ctr_spec_t *s = c->s;
	unsigned long prop = s->rootfs_propagation ? s->rootfs_propagation : MS_SLAVE | MS_REC;
	if (prop & MS_SHARED)
		prop = MS_SLAVE | MS_REC; /* made shared after pivot_root (see pivot) */
	if (!c->host_mnt && mount(NULL, "/", NULL, prop, NULL) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot set the propagation of /");
	/* A copy of the root's mount tree, attached on top of it.  Stage 1
	 * entered the root as host root, and the new mount namespace carried
	 * that working directory over: a user namespace's root need not be
	 * able to walk the host's path to the bundle. */
	_cleanup_close_ int here = c->mnt_joined ? open(s->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC)
						 : open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (here < 0)
		return lc_error_set(err, LC_EXIT_NOENT, errno, "root.path %s", s->rootfs);
	_cleanup_close_ int rootfd = sys_open_tree(here, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
							  AT_EMPTY_PATH);
	if (rootfd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "root.path: cannot copy the mount of %s", s->rootfs);
	if (c->host_mnt) {
		/* In the host's mount table: what the container mounts under its
		 * root must not propagate to the host's peers of the bundle's mount. */
		struct mount_attr a = { .propagation = MS_PRIVATE };
		if (sys_mount_setattr(rootfd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "root.path: cannot make the copy of %s private",
					    s->rootfs);
	}
	if (sys_move_mount(rootfd, "", here, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "root.path: cannot attach %s", s->rootfs);
	for (size_t i = 0; i < s->n_mounts; i++)
		if (mount_one(c, rootfd, &s->mounts[i], err) < 0)
			return -1;
	if (setup_devices(c, rootfd, err) < 0)
		return -1;
	if (s->proc.terminal && setup_console(c, rootfd, err) < 0)
		return -1;
	if (write_sysctls(s, err) < 0)
		return -1;
	for (size_t i = 0; s->masked && s->masked[i]; i++)
		if (lc_mask_path(rootfd, s->masked[i], err) < 0)
			return lc_error_wrap(err, "linux.maskedPaths");
	for (size_t i = 0; s->readonly && s->readonly[i]; i++)
		if (lc_readonly_path(rootfd, s->readonly[i], err) < 0)
			return lc_error_wrap(err, "linux.readonlyPaths");
	if (s->proc.cwd && s->proc.cwd[0] == '/') {
		_cleanup_close_ int wd = lc_target_in_root(rootfd, s->proc.cwd, false, err);
		if (wd < 0)
			return lc_error_wrap(err, "process.cwd");
	}
	if (s->hostname && sethostname(s->hostname, strlen(s->hostname)) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot set the hostname");
	if (s->domainname && setdomainname(s->domainname, strlen(s->domainname)) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot set the domain name");
	return pivot(s, rootfd, c->host_mnt, err);
}

/* ---- the process ------------------------------------------------------------ */

static void __attribute__((noreturn)) die(int code, const char *what, int e)
{
	dprintf(2, "lcrun-oci: %s%s%s\n", what, e ? ": " : "", e ? strerror(e) : "");
	_exit(code);
}

/* Credentials, capabilities, seccomp, exec: as runc orders them.  Without
 * noNewPrivileges the filter goes in while CAP_SYS_ADMIN is still held. */
static void __attribute__((noreturn)) become(const lc_ctr_process_t *p, const char *exe, const lc_seccomp_prog_t *prog,
					      int preserve_fds, int tty_slave, bool new_keyring)
{
	lc_error_t *e = NULL;
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	if (tty_slave >= 0) {
		setsid();
		if (ioctl(tty_slave, TIOCSCTTY, 0) < 0)
			die(LC_EXIT_RUNTIME, "cannot make the pty the controlling terminal", errno);
		for (int i = 0; i < 3; i++)
			dup2(tty_slave, i);
		if (tty_slave > 2)
			close(tty_slave);
	}
	if (new_keyring)
		syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, NULL); /* best effort, as runc */
	for (size_t i = 0; i < p->n_rlimits; i++) {
		struct rlimit rl = { p->rlimits[i].soft, p->rlimits[i].hard };
		if (setrlimit(p->rlimits[i].resource, &rl) < 0) {
			int er = errno;
			struct rlimit cur = { 0, 0 };
			getrlimit(p->rlimits[i].resource, &cur);
			dprintf(2, "lcrun-oci: process.rlimits: cannot set limit %d to %llu:%llu (hard limit now %llu%s): %s\n",
				p->rlimits[i].resource, (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
				(unsigned long long)cur.rlim_max, er == EPERM ? "; raising it needs CAP_SYS_RESOURCE" : "",
				strerror(er));
			_exit(LC_EXIT_RUNTIME);
		}
	}
	if (prog && !p->no_new_privs && lc_seccomp_install(prog, &e) < 0)
		die(LC_EXIT_RUNTIME, e->msg, 0);
	if (lc_caps_drop_bounding(p->caps[LC_CAP_BOUNDING], &e) < 0)
		die(LC_EXIT_RUNTIME, e->msg, 0);
	prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0);
	if (setgroups(p->n_gids, p->gids) < 0 && (p->n_gids || errno != EPERM))
		die(LC_EXIT_RUNTIME, "process.user.additionalGids: cannot set the groups", errno);
	if (setresgid(p->gid, p->gid, p->gid) < 0)
		die(LC_EXIT_RUNTIME, "process.user.gid: cannot switch group", errno);
	if (setresuid(p->uid, p->uid, p->uid) < 0)
		die(LC_EXIT_RUNTIME, "process.user.uid: cannot switch user", errno);
	prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
	if (lc_caps_apply_sets(p->caps[LC_CAP_EFFECTIVE], p->caps[LC_CAP_PERMITTED], p->caps[LC_CAP_INHERITABLE],
			       p->caps[LC_CAP_AMBIENT], &e) < 0)
		die(LC_EXIT_RUNTIME, e->msg, 0);
	if (p->umask >= 0)
		umask((mode_t)p->umask);
	if (chdir(p->cwd ? p->cwd : "/") < 0)
		die(LC_EXIT_RUNTIME, "process.cwd: cannot enter it", errno);
	if (p->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die(LC_EXIT_RUNTIME, "cannot set no_new_privs", errno);
	syscall(SYS_close_range, 3U + (unsigned)preserve_fds, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
	if (prog && p->no_new_privs && lc_seccomp_install(prog, &e) < 0)
		die(LC_EXIT_RUNTIME, e->msg, 0);
	static char *noenv[] = { NULL };
	execve(exe, p->args, p->env ? p->env : noenv);
	int er = errno;
	die(er == ENOENT ? LC_EXIT_NOT_FOUND : LC_EXIT_CANNOT_EXEC, exe, er);
}

static int prepare_seccomp(const char *text, const lc_ctr_process_t *p, lc_seccomp_prog_t *prog, lc_error_t **err)
{
	return lc_seccomp_prepare_buf("linux.seccomp", text, strlen(text), p->caps[LC_CAP_BOUNDING],
				      LC_SECCOMP_SKIP_UNKNOWN, prog, err);
}

static void __attribute__((noreturn)) stage2(ctx_t *c, pid_t self)
{
	const lc_ctr_spec_t *s = c->s;
	lc_error_t *e = NULL;
	(void)self;
	if (build_root(c, &e) < 0)
		fail(c, e);
	c->exe = find_program(&s->proc, &e);
	if (!c->exe)
		fail(c, e);
	lc_msg_t m;
	bool hooks = s->n_hooks[LC_HOOK_PRESTART] || s->n_hooks[LC_HOOK_CREATE_RUNTIME] ||
		     s->n_hooks[LC_HOOK_CREATE_CONTAINER] || s->n_hooks[LC_HOOK_START_CONTAINER];
	pid_t hostpid = 0;
	if (hooks) {
		lc_msg_send(c->sp[1], MSG_HOOKS, 0, 0, NULL);
		if (lc_msg_recv(c->sp[1], &m) != 1 || m.type != LC_MSG_GO)
			_exit(1);
		hostpid = m.a;
		/* createContainer runs in the container's namespaces; its path is
		 * the runtime's (we have pivoted already, so it is resolved in the
		 * container: the spec allows either; runc resolves it there too). */
		_cleanup_json_ json_t *st = lc_ctr_state_json(s, "created", hostpid);
		if (lc_ctr_run_hooks(s, LC_HOOK_CREATE_CONTAINER, st, &e) < 0)
			fail(c, e);
	}
	lc_msg_send(c->sp[1], LC_MSG_READY, 0, 0, NULL);
	close(c->sp[1]);
	/* Blocks until `start` opens the fifo for reading. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", c->fifo_fd);
	int w;
	do
		w = open(path, O_WRONLY | O_CLOEXEC);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		die(LC_EXIT_RUNTIME, "cannot open the exec fifo (is /proc mounted in the container?)", errno);
	if (write(w, "0", 1) != 1)
		die(LC_EXIT_RUNTIME, "cannot write the exec fifo", errno);
	/* w stays open (close-on-exec): `start` sees EOF once the program
	 * runs, and only then runs the poststart hooks. */
	close(c->fifo_fd);
	if (s->n_hooks[LC_HOOK_START_CONTAINER]) {
		_cleanup_json_ json_t *st = lc_ctr_state_json(s, "running", hostpid);
		if (lc_ctr_run_hooks(s, LC_HOOK_START_CONTAINER, st, &e) < 0)
			die(LC_EXIT_RUNTIME, e->msg, 0);
	}
	become(&s->proc, c->exe, c->have_prog ? &c->prog : NULL, s->preserve_fds, c->tty_slave, !s->no_new_keyring);
}

/* ---- stage 1: namespaces --------------------------------------------------- */

static const char *ns_name(int type)
{
	switch (type) {
	case CLONE_NEWNS: return "mount";
	case CLONE_NEWUTS: return "uts";
	case CLONE_NEWIPC: return "ipc";
	case CLONE_NEWNET: return "network";
	case CLONE_NEWPID: return "pid";
	case CLONE_NEWUSER: return "user";
	case CLONE_NEWCGROUP: return "cgroup";
	case CLONE_NEWTIME: return "time";
	default: return "?";
	}
}

static void __attribute__((noreturn)) stage1(ctx_t *c)
{
	const lc_ctr_spec_t *s = c->s;
	lc_error_t *e = NULL;
	close(c->sp[0]);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	int user_i = -1, pid_i = -1, fresh = 0;
	const char *mp = NULL;
	for (size_t i = 0; i < s->n_ns; i++) {
		int t = s->ns[i].type;
		if (t == CLONE_NEWUSER) {
			user_i = (int)i;
			continue;
		}
		if (t == CLONE_NEWPID) {
			pid_i = (int)i;
			continue;
		}
		if (!s->ns[i].path) {
			fresh |= t;
			continue;
		}
		if (setns(c->nsfd[i], t) < 0) {
			lc_error_set(&e, LC_EXIT_RUNTIME, errno, "namespaces: cannot join the %s namespace %s", ns_name(t),
				     s->ns[i].path);
			fail(c, e);
		}
	}
	/* Into the root while still host root (see build_root). */
	c->mnt_joined = has_ns(s, CLONE_NEWNS, &mp) && mp;
	c->host_mnt = !has_ns(s, CLONE_NEWNS, NULL);
	if (!c->mnt_joined && fchdir(c->rootfs_fd) < 0) {
		lc_error_set(&e, LC_EXIT_RUNTIME, errno, "root.path: cannot enter %s", s->rootfs);
		fail(c, e);
	}
	if (user_i >= 0) {
		c->userns = true;
		if (s->ns[user_i].path) {
			if (setns(c->nsfd[user_i], CLONE_NEWUSER) < 0) {
				lc_error_set(&e, LC_EXIT_RUNTIME, errno, "namespaces: cannot join the user namespace %s",
					     s->ns[user_i].path);
				fail(c, e);
			}
		} else {
			if (unshare(CLONE_NEWUSER) < 0) {
				lc_error_set(&e, LC_EXIT_RUNTIME, errno, "namespaces: cannot create a user namespace");
				fail(c, e);
			}
			lc_msg_t m;
			lc_msg_send(c->sp[1], LC_MSG_USERNS, 0, 0, NULL);
			if (lc_msg_recv(c->sp[1], &m) != 1 || m.type != LC_MSG_GO)
				_exit(1);
		}
		if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
			lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot become root of the container's user namespace "
				     "(do the mappings hold id 0?)");
			fail(c, e);
		}
	}
	if (fresh && unshare(fresh) < 0) {
		lc_error_set(&e, LC_EXIT_RUNTIME, errno, "namespaces: cannot create the container's namespaces");
		fail(c, e);
	}
	if ((fresh & CLONE_NEWNET) && lc_loopback_up() < 0) {
		lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot bring up the loopback interface");
		fail(c, e);
	}
	if (pid_i >= 0) {
		if (s->ns[pid_i].path ? setns(c->nsfd[pid_i], CLONE_NEWPID) : unshare(CLONE_NEWPID)) {
			lc_error_set(&e, LC_EXIT_RUNTIME, errno, "namespaces: cannot %s the pid namespace%s%s",
				     s->ns[pid_i].path ? "join" : "create", s->ns[pid_i].path ? " " : "",
				     s->ns[pid_i].path ? s->ns[pid_i].path : "");
			fail(c, e);
		}
	}
	for (size_t i = 0; i < s->n_ns; i++)
		if (c->nsfd[i] >= 0)
			close(c->nsfd[i]);
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid < 0) {
		lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot start the container's process");
		fail(c, e);
	}
	if (pid == 0)
		stage2(c, 0);
	lc_msg_send(c->sp[1], LC_MSG_PID, pid, 0, NULL);
	_exit(0);
}

/* ---- create ------------------------------------------------------------------ */

uint64_t lc_ctr_mount_id(const char *path)
{
	_cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char p[64], b[512];
	snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", fd);
	_cleanup_close_ int f = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = f < 0 ? -1 : read(f, b, sizeof(b) - 1);
	if (n <= 0)
		return 0;
	b[n] = '\0';
	const char *m = strstr(b, "mnt_id:");
	return m ? strtoull(m + 7, NULL, 10) : 0;
}

int lc_ctr_detach_root(const char *rootfs, uint64_t base, uint64_t ours, lc_error_t **err)
{
	uint64_t now = lc_ctr_mount_id(rootfs);
	if (!now || (ours ? now != ours : !base || now == base))
		return 0;
	if (umount2(rootfs, MNT_DETACH) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot unmount the container's root %s", rootfs);
	return 0;
}

static int write_map(pid_t pid, const char *file, const char *map, lc_error_t **err)
{
	_cleanup_free_ char *p = lc_strdup_printf("/proc/%d/%s", pid, file);
	if (lc_write_file(p, map, err) < 0)
		return lc_error_wrap(err, "linux.%s", !strcmp(file, "uid_map") ? "uidMappings" : "gidMappings");
	return 0;
}

/* After an error from a process cloned by a helper (stage 1, exec's
 * helper) that says the process's pid once its clone returns: the helper
 * ends right after its word, which is then in the socket.  Reap the
 * helper and return the pid it said (-1: none), for the caller to reap. */
static pid_t pid_said(pid_t helper, int sock)
{
	waitpid(helper, NULL, 0);
	pid_t pid = -1;
	struct pollfd pf = { sock, POLLIN, 0 };
	lc_msg_t m;
	while (poll(&pf, 1, 0) == 1 && lc_msg_recv(sock, &m) == 1)
		if (m.type == LC_MSG_PID)
			pid = m.a;
	return pid;
}

/* Clone into the cgroup when we can (no cgroup.procs write, no RCU wait). */
static pid_t fork_into(const char *cgroup, lc_error_t **err)
{
	pid_t pid = -1;
	bool moved = false;
	if (cgroup && lc_single_threaded()) {
		_cleanup_close_ int cfd = open(cgroup, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (cfd >= 0) {
			struct clone_args ca = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD, .cgroup = (uint64_t)cfd };
			pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
			moved = pid >= 0;
		}
	}
	if (!moved)
		pid = fork();
	if (pid < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot fork%s",
				     errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
	if (pid > 0 && cgroup && !moved) {
		char b[32];
		snprintf(b, sizeof(b), "%d", pid);
		_cleanup_free_ char *procs = lc_strdup_printf("%s/cgroup.procs", cgroup);
		if (lc_write_file(procs, b, err) < 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return -1;
		}
	}
	return pid;
}

int lc_ctr_create(const lc_ctr_spec_t *s, pid_t *out, lc_error_t **err)
{
	ctx_t c;
	memset(&c, 0, sizeof(c));
	c.s = s;
	c.sp[0] = c.sp[1] = -1;
	c.tty_slave = -1;
	c.fifo_fd = -1;
	c.rootfs_fd = open(s->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < 8; i++)
		c.nsfd[i] = -1;
	c.userns = has_ns(s, CLONE_NEWUSER, NULL);
	uint64_t root_mnt = has_ns(s, CLONE_NEWNS, NULL) ? 0 : lc_ctr_mount_id(s->rootfs);
	pid_t st1 = -1, init = -1;
	bool cg_made = false, fifo_made = false, child_failed = false;
	int r = -1;
	if (!s->proc.args || !s->proc.args[0]) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "process.args: no program given");
		goto out;
	}
	if (c.rootfs_fd < 0) {
		lc_error_set(err, LC_EXIT_NOENT, errno, "root.path %s", s->rootfs);
		goto out;
	}
	for (size_t i = 0; i < s->n_ns; i++) {
		if (!s->ns[i].path)
			continue;
		c.nsfd[i] = open(s->ns[i].path, O_RDONLY | O_CLOEXEC);
		if (c.nsfd[i] < 0) {
			lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno,
				     "namespaces: %s namespace path %s", ns_name(s->ns[i].type), s->ns[i].path);
			goto out;
		}
	}
	if (s->seccomp) {
		if (prepare_seccomp(s->seccomp, &s->proc, &c.prog, err) < 0)
			goto out;
		c.have_prog = true;
	}
	if (mkfifo(s->fifo, 0622) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot make the exec fifo %s", s->fifo);
		goto out;
	}
	fifo_made = true;
	chmod(s->fifo, 0622);
	/* The fifo by fd, opened as host root: its path is out of reach after
	 * pivot_root (and maybe for the container's root before). */
	c.fifo_fd = open(s->fifo, O_PATH | O_CLOEXEC);
	if (c.fifo_fd < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", s->fifo);
		goto out;
	}
	if (s->cgroup) {
		if (lc_cgroup_create_path(s->cgroup, &s->limits, s->unified, err) < 0)
			goto out;
		cg_made = true;
		if (s->n_devrules) {
			_cleanup_close_ int cfd = open(s->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (cfd < 0 || lc_devfilter_attach(cfd, s->devrules, s->n_devrules, err) < 0) {
				if (cfd < 0)
					lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open cgroup %s", s->cgroup);
				goto out;
			}
		}
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, c.sp) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a socket pair");
		goto out;
	}
	st1 = fork_into(s->cgroup, err);
	if (st1 < 0)
		goto out;
	if (st1 == 0)
		stage1(&c);
	close(c.sp[1]);
	c.sp[1] = -1;
	/* Stage 1 says the process's pid after its clone returns, and the
	 * process runs meanwhile: its HOOKS or READY may come first, on a
	 * busy machine.  Both wait until the pid is known. */
	bool ready = false, hooks = false;
	while (!ready || init <= 0) {
		lc_msg_t m;
		int rr = lc_msg_recv(c.sp[0], &m);
		if (rr <= 0) {
			lc_error_set(err, LC_EXIT_RUNTIME, 0, "container %s: set-up ended without a word", s->id);
			goto out;
		}
		if (m.type == LC_MSG_ERROR) {
			lc_error_from_buf(err, m.text, strlen(m.text));
			child_failed = true;
			goto out;
		} else if (m.type == LC_MSG_USERNS) {
			if ((s->uid_map && write_map(st1, "uid_map", s->uid_map, err) < 0) ||
			    (s->gid_map && write_map(st1, "gid_map", s->gid_map, err) < 0))
				goto out;
			lc_msg_send(c.sp[0], LC_MSG_GO, 0, 0, NULL);
		} else if (m.type == LC_MSG_PID) {
			init = m.a;
			waitpid(st1, NULL, 0);
			st1 = -1;
		} else if (m.type == MSG_HOOKS) {
			hooks = true;
		} else if (m.type == LC_MSG_READY) {
			ready = true;
		}
		if (hooks && init > 0) {
			hooks = false;
			_cleanup_json_ json_t *state = lc_ctr_state_json(s, "creating", init);
			if (lc_ctr_run_hooks(s, LC_HOOK_PRESTART, state, err) < 0 ||
			    lc_ctr_run_hooks(s, LC_HOOK_CREATE_RUNTIME, state, err) < 0)
				goto out;
			lc_msg_send(c.sp[0], LC_MSG_GO, init, 0, NULL);
		}
	}
	if (s->proc.oom_set) {
		_cleanup_free_ char *p = lc_strdup_printf("/proc/%d/oom_score_adj", init);
		char v[16];
		snprintf(v, sizeof(v), "%d", s->proc.oom_score_adj);
		if (lc_write_file(p, v, err) < 0) {
			lc_error_wrap(err, "process.oomScoreAdj");
			goto out;
		}
	}
	*out = init;
	r = 0;
out:
	if (r < 0) {
		if (child_failed && st1 > 0 && init <= 0) {
			/* from stage 1, or from the process before stage 1
			 * said its pid */
			init = pid_said(st1, c.sp[0]);
			st1 = -1;
		}
		if (st1 > 0) {
			kill(st1, SIGKILL);
			waitpid(st1, NULL, 0);
		}
		if (init > 0) {
			kill(init, SIGKILL);
			waitpid(init, NULL, 0);
		}
		if (cg_made)
			lc_cgroup_destroy(s->cgroup, NULL);
		if (fifo_made)
			unlink(s->fifo);
		lc_ctr_detach_root(s->rootfs, root_mnt, 0, NULL);
	}
	for (int i = 0; i < 8; i++)
		if (c.nsfd[i] >= 0)
			close(c.nsfd[i]);
	if (c.sp[0] >= 0)
		close(c.sp[0]);
	if (c.rootfs_fd >= 0)
		close(c.rootfs_fd);
	if (c.fifo_fd >= 0)
		close(c.fifo_fd);
	lc_seccomp_prog_free(&c.prog);
	return r;
}

int lc_ctr_start(const char *fifo, lc_error_t **err)
{
	_cleanup_close_ int fd = open(fifo, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return lc_error_set(err, errno == ENOENT ? LC_EXIT_STATE : LC_EXIT_RUNTIME, errno, "cannot open the exec fifo");
	char b;
	ssize_t n = read(fd, &b, 1);
	unlink(fifo);
	if (n != 1)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "the container's process is gone before it started");
	/* EOF: the process has run its startContainer hooks and exec'd (or died). */
	for (;;) {
		ssize_t k = read(fd, &b, 1);
		if (k == 0 || (k < 0 && errno != EINTR))
			break;
	}
	return 0;
}

/* ---- exec -------------------------------------------------------------------- */

static const struct { const char *file; int type; } ns_files[] = {
	{ "user", CLONE_NEWUSER }, { "ipc", CLONE_NEWIPC }, { "uts", CLONE_NEWUTS }, { "net", CLONE_NEWNET },
	{ "pid", CLONE_NEWPID }, { "cgroup", CLONE_NEWCGROUP }, { "mnt", CLONE_NEWNS },
};

int lc_ctr_exec(pid_t pid, const lc_ctr_process_t *p, const lc_ctr_exec_opts_t *o, pid_t *out_pid, int *status,
		lc_error_t **err)
{
	int fds[7];
	for (int i = 0; i < 7; i++)
		fds[i] = -1;
	int sp[2] = { -1, -1 }, r = -1;
	_cleanup_close_ int root = -1;
	pid_t helper = -1, proc = -1;
	lc_seccomp_prog_t prog = { 0 };
	if (!p->args || !p->args[0])
		return lc_error_set(err, LC_EXIT_USAGE, 0, "exec: no program given");
	for (int i = 0; i < 7; i++) {
		char a[64], b[64];
		snprintf(a, sizeof(a), "/proc/%d/ns/%s", pid, ns_files[i].file);
		snprintf(b, sizeof(b), "/proc/self/ns/%s", ns_files[i].file);
		struct stat sa, sb;
		if (stat(a, &sa) < 0) {
			lc_error_set(err, LC_EXIT_STATE, errno, "the container's process %d is gone", pid);
			goto out;
		}
		if (stat(b, &sb) == 0 && sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev)
			continue; /* shared with us: nothing to join */
		fds[i] = open(a, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", a);
			goto out;
		}
	}
	if (fds[6] < 0) {
		/* The container shares our mount namespace: its root is a chroot. */
		char a[64];
		snprintf(a, sizeof(a), "/proc/%d/root", pid);
		struct stat sa, sb;
		if (stat(a, &sa) == 0 && stat("/", &sb) == 0 && (sa.st_ino != sb.st_ino || sa.st_dev != sb.st_dev))
			root = open(a, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	if (o->seccomp) {
		if (prepare_seccomp(o->seccomp, p, &prog, err) < 0)
			goto out;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a socket pair");
		goto out;
	}
	helper = fork_into(o->cgroup, err);
	if (helper < 0)
		goto out;
	if (helper == 0) {
		lc_error_t *e = NULL;
		close(sp[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (p->oom_set) {
			char v[16];
			snprintf(v, sizeof(v), "%d", p->oom_score_adj);
			if (lc_write_file("/proc/self/oom_score_adj", v, &e) < 0) {
				lc_msg_send_error(sp[1], e);
				_exit(1);
			}
		}
		/* Everything but the user namespace first, as host root. */
		for (int i = 1; i < 7; i++)
			if (fds[i] >= 0 && setns(fds[i], ns_files[i].type) < 0) {
				lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot join the container's %s namespace",
					     ns_files[i].file);
				lc_msg_send_error(sp[1], e);
				_exit(1);
			}
		if (root >= 0 && (fchdir(root) < 0 || chroot(".") < 0 || chdir("/") < 0)) {
			lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot enter the container's root");
			lc_msg_send_error(sp[1], e);
			_exit(1);
		}
		if (fds[0] >= 0) {
			if (setns(fds[0], CLONE_NEWUSER) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
				lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot join the container's user namespace");
				lc_msg_send_error(sp[1], e);
				_exit(1);
			}
		}
		pid_t c2 = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL, NULL, 0);
		if (c2 < 0) {
			lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot start the process");
			lc_msg_send_error(sp[1], e);
			_exit(1);
		}
		if (c2 > 0) {
			lc_msg_send(sp[1], LC_MSG_PID, c2, 0, NULL);
			_exit(0);
		}
		ctx_t c;
		memset(&c, 0, sizeof(c));
		lc_ctr_spec_t fake = { .proc = *p, .console_fd = o->console_fd };
		c.s = &fake;
		c.sp[1] = sp[1];
		c.tty_slave = -1;
		if (p->terminal && setup_console(&c, -1, &e) < 0)
			fail(&c, e);
		char *exe = find_program(p, &e);
		if (!exe)
			fail(&c, e);
		/* sp[1] is close-on-exec: the caller's EOF says the exec happened. */
		become(p, exe, o->seccomp ? &prog : NULL, o->preserve_fds, c.tty_slave, !o->no_new_keyring);
	}
	close(sp[1]);
	sp[1] = -1;
	for (;;) {
		lc_msg_t m;
		int rr = lc_msg_recv(sp[0], &m);
		if (rr <= 0)
			break;
		if (m.type == LC_MSG_ERROR) {
			lc_error_from_buf(err, m.text, strlen(m.text));
			if (proc <= 0 && helper > 0) {
				proc = pid_said(helper, sp[0]);
				helper = -1;
			}
			if (proc > 0) {
				waitpid(proc, NULL, 0);
				proc = -1;
			}
			goto out;
		}
		if (m.type == LC_MSG_PID) {
			proc = m.a;
			waitpid(helper, NULL, 0);
			helper = -1;
		}
	}
	if (proc < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "exec: the process could not be started");
		goto out;
	}
	if (out_pid)
		*out_pid = proc;
	if (!o->detach && status) {
		int ws;
		while (waitpid(proc, &ws, 0) < 0)
			if (errno != EINTR) {
				lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot wait for the process");
				goto out;
			}
		*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	}
	r = 0;
out:
	if (helper > 0) {
		kill(helper, SIGKILL);
		waitpid(helper, NULL, 0);
	}
	for (int i = 0; i < 7; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (sp[0] >= 0)
		close(sp[0]);
	if (sp[1] >= 0)
		close(sp[1]);
	lc_seccomp_prog_free(&prog);
	return r;
}
