/* oci_state.c — a container's state under --root (ROOT/ID/state.json),
 * its live status, and what several verbs share: signals, teardown, pid
 * files, terminals. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cgroup.h"
#include "console.h"
#include "json.h"
#include "oci.h"
#include "state.h"
#include "util.h"

bool oci_id_valid(const char *id)
{
	if (!id || !*id || strlen(id) > 1024 || id[0] == '.')
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '_' || *p == '-' || *p == '.' || *p == '+'))
			return false;
	return true;
}

char *oci_dir(const char *id)
{
	return lc_strdup_printf("%s/%s", oci_g.root, id);
}

int oci_state_save(const char *id, json_t *state, lc_error_t **err)
{
	_cleanup_free_ char *dir = oci_dir(id);
	_cleanup_free_ char *path = lc_strdup_printf("%s/state.json", dir);
	_cleanup_free_ char *s = json_dumps(state, JSON_COMPACT);
	_cleanup_free_ char *tmp = lc_strdup_printf("%s.tmp", path);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || lc_write_all(fd, s, strlen(s)) < 0 || rename(tmp, path) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot write %s", path);
	return 0;
}

int oci_load(const char *id, oci_container_t *c, lc_error_t **err)
{
	memset(c, 0, sizeof(*c));
	if (!oci_id_valid(id))
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "container \"%s\" does not exist", id);
	c->id = strdup(id);
	c->dir = oci_dir(id);
	_cleanup_free_ char *path = lc_strdup_printf("%s/state.json", c->dir);
	c->state = json_load_file(path, 0, NULL);
	if (!c->state) {
		oci_container_clear(c);
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "container \"%s\" does not exist", id);
	}
	json_t *lc = json_object_get(c->state, "lcrun");
	c->pid = (pid_t)json_integer_value(json_object_get(c->state, "pid"));
	c->cgroup = lc_json_str(lc, "cgroup");
	unsigned long long start = (unsigned long long)json_integer_value(json_object_get(lc, "starttime"));
	const char *st = lc_json_str(c->state, "status");
	if (st && !strcmp(st, "creating")) {
		c->status = "creating";
		return 0;
	}
	if (c->pid <= 0 || !start || lc_proc_starttime(c->pid) != start) {
		c->status = "stopped";
		return 0;
	}
	_cleanup_free_ char *fifo = lc_strdup_printf("%s/exec.fifo", c->dir);
	if (access(fifo, F_OK) == 0) {
		c->status = "created";
		return 0;
	}
	c->status = "running";
	if (c->cgroup && lc_cgroup_read_key(c->cgroup, "cgroup.freeze", NULL) == 1)
		c->status = "paused";
	return 0;
}

void oci_container_clear(oci_container_t *c)
{
	free(c->id);
	free(c->dir);
	if (c->state)
		json_decref(c->state);
	memset(c, 0, sizeof(*c));
}

json_t *oci_state_public(const oci_container_t *c)
{
	json_t *j = json_object();
	json_object_set_new(j, "ociVersion", json_string("1.1.0"));
	json_object_set_new(j, "id", json_string(c->id));
	bool alive = strcmp(c->status, "stopped") != 0;
	json_object_set_new(j, "pid", json_integer(alive ? c->pid : 0));
	json_object_set_new(j, "status", json_string(c->status));
	const char *keys[] = { "bundle", "rootfs", "created", "owner", "annotations" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(c->state, keys[i]);
		if (v)
			json_object_set(j, keys[i], v);
	}
	return j;
}

int oci_signal(const oci_container_t *c, int sig, bool all, lc_error_t **err)
{
	/* As runc: --all reaches what is left in the cgroup of a container
	 * whose process has ended (nothing: success); a signal for the
	 * process alone fails with runc's words, "container not running",
	 * which the containerd shim reads as "already gone" (it sends
	 * kill --all 9 after the exit it has reaped, and fails the task's
	 * delete on any other error). */
	bool stopped = !strcmp(c->status, "stopped");
	if (stopped && !(all && c->cgroup && access(c->cgroup, F_OK) == 0))
		return all ? 0 : lc_error_set(err, LC_EXIT_STATE, 0, "container \"%s\": container not running", c->id);
	if (all && c->cgroup) {
		if (sig == SIGKILL && lc_cgroup_kill(c->cgroup) == 0)
			return 0;
		_cleanup_free_ pid_t *pids = NULL;
		size_t n = 0;
		if (lc_cgroup_pids(c->cgroup, &pids, &n, err) < 0)
			return -1;
		for (size_t i = 0; i < n; i++)
			kill(pids[i], sig);
		return 0;
	}
	if (kill(c->pid, sig) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot signal the container's process %d", c->pid);
	return 0;
}

int oci_destroy(oci_container_t *c, lc_error_t **err)
{
	if (strcmp(c->status, "stopped")) {
		if (c->cgroup)
			lc_cgroup_kill(c->cgroup);
		if (c->pid > 0 && strcmp(c->status, "creating"))
			kill(c->pid, SIGKILL);
		/* The process is someone else's child: wait until it is a zombie or gone. */
		for (int i = 0; i < 5000 && c->pid > 0 && lc_proc_starttime(c->pid); i++)
			usleep(1000);
	}
	if (c->cgroup) {
		lc_error_t *e = NULL;
		if (lc_cgroup_destroy(c->cgroup, &e) < 0) {
			oci_debug("%s", e->msg);
			lc_error_free(e);
		}
	}
	json_t *lc = json_object_get(c->state, "lcrun");
	json_t *base = json_object_get(lc, "hostRootBase");
	const char *rootfs = lc_json_str(c->state, "rootfs");
	if (base && rootfs) {
		lc_error_t *e = NULL;
		if (lc_ctr_detach_root(rootfs, (uint64_t)json_integer_value(base),
				       (uint64_t)json_integer_value(json_object_get(lc, "hostRootMount")), &e) < 0) {
			fprintf(stderr, "lcrun-oci: warning: %s\n", e->msg);
			lc_error_free(e);
		}
	}
	json_t *hooks = json_object_get(lc, "hooks");
	int r = 0;
	if (hooks) {
		lc_ctr_spec_t *s = lc_ctr_spec_new();
		s->id = strdup(c->id);
		s->bundle = strdup(lc_json_str(c->state, "bundle") ?: "");
		json_t *ann = json_object_get(c->state, "annotations");
		s->annotations = ann ? json_incref(ann) : NULL;
		if (oci_hooks_parse(hooks, s, err) == 0) {
			json_t *st = lc_ctr_state_json(s, "stopped", 0);
			/* poststop failures are warnings: the container is gone anyway */
			lc_error_t *e = NULL;
			if (lc_ctr_run_hooks(s, LC_HOOK_POSTSTOP, st, &e) < 0) {
				fprintf(stderr, "lcrun-oci: warning: %s\n", e->msg);
				lc_error_free(e);
			}
			json_decref(st);
		} else {
			r = -1;
		}
		lc_ctr_spec_free(s);
	}
	lc_rm_rf(c->dir, NULL);
	return r;
}

int oci_write_pid_file(const char *path, pid_t pid, lc_error_t **err)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "%d", pid);
	return lc_write_file_atomic(path, b, (size_t)n, 0644, err);
}

int oci_console_connect(const char *path, lc_error_t **err)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(a.sun_path))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--console-socket %s: path too long", path);
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "--console-socket %s", path);
	}
	return fd;
}

static int recv_master(int sock)
{
	char name[256];
	struct iovec iov = { name, sizeof(name) };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) <= 0)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	int fd = -1;
	if (cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}


static int wait_status(pid_t pid)
{
	int ws = 0;
	while (waitpid(pid, &ws, 0) < 0)
		if (errno != EINTR)
			return 255;
	return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

int oci_tty_relay(int sock, pid_t pid)
{
	int master = recv_master(sock);
	if (master < 0) {
		fprintf(stderr, "lcrun-oci: no terminal came back from the container\n");
		return wait_status(pid);
	}
	struct winsize ws;
	if (ioctl(0, TIOCGWINSZ, &ws) == 0)
		ioctl(master, TIOCSWINSZ, &ws);
	struct termios saved;
	bool raw = lc_tty_raw(0, &saved) == 0;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGWINCH);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC);
	bool in_open = true;
	for (;;) {
		struct pollfd p[3] = { { master, POLLIN, 0 }, { in_open ? 0 : -1, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
			if (!lc_pump(master, 1))
				break;
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
			in_open = lc_pump(0, master);
		if (p[2].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) > 0 && ioctl(0, TIOCGWINSZ, &ws) == 0)
				ioctl(master, TIOCSWINSZ, &ws);
		}
	}
	if (raw)
		lc_tty_restore(0, &saved);
	close(master);
	if (sfd >= 0)
		close(sfd);
	return wait_status(pid);
}

int oci_wait_forward(pid_t pid)
{
	static const int fwd[] = LC_FORWARD_SIGNALS;
	sigset_t old;
	int sfd = lc_signals_to_fd(fwd, sizeof(fwd) / sizeof(fwd[0]), &old);
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		struct pollfd p[2] = { { pfd, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		if (poll(p, 2, pfd < 0 ? 50 : -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				kill(pid, (int)si.ssi_signo);
		}
		if (pfd >= 0 && (p[0].revents & POLLIN))
			break;
		if (pfd < 0) {
			siginfo_t si = { 0 };
			if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
				break;
		}
	}
	if (pfd >= 0)
		close(pfd);
	if (sfd >= 0)
		close(sfd);
	int st = wait_status(pid);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return st;
}
