/* lifecycle.c — long-lived sandboxes: create, start, stop, rm, pause,
 * resume, and the monitor that owns each running one.
 *
 * `create` forks a MONITOR (double fork + setsid, stdio on /dev/null, then
 * a log in the state directory).  The monitor calls lc_sb_start with no
 * command, so it becomes pid 1's parent; it reports the id (or the error)
 * to the waiting create over a socket pair and waits for create to
 * acknowledge it: a create killed before it could print the id takes its
 * sandbox with it.  Then the monitor waits for pid 1, enforces --ttl and
 * --idle-timeout, and tears the sandbox down when told to:
 *
 *   SIGTERM  stop: processes killed, cgroup removed, upper layer kept;
 *   SIGUSR1  release: the same, and no ttl timer is left behind (rm, start);
 *   SIGUSR2  read ttl and idle_timeout again from the state (lc_sandbox_claim).
 *
 * A stopped sandbox with a ttl keeps a small timer process (the monitor's
 * child) that removes it when the ttl expires.  Commands that change a
 * sandbox hold an flock on its state directory; a monitor that acts on its
 * own (ttl, idle, pid 1 gone) takes the same lock, and a command that holds
 * it signals the monitor and waits for it to exit.  Pid 1 exits as soon as
 * its monitor dies (init.c), so a killed monitor leaves no running sandbox,
 * only files that `lcrun gc` collects. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "json.h"
#include "lifecycle.h"
#include "net.h"
#include "paths.h"
#include "sandbox_priv.h"
#include "seccomp.h"
#include "state.h"
#include "sync.h"
#include "trash.h"
#include "util.h"

static int patch_status(const char *id, const char *status, lc_error_t **err)
{
	_cleanup_json_ json_t *p = json_pack("{s:s}", "status", status);
	return lc_state_patch(id, p, err);
}

void lc_sandbox_purge(const char *id, json_t *st)
{
	const char *cg = st ? lc_json_str(st, "cgroup") : NULL;
	_cleanup_free_ char *cgp = cg ? strdup(cg) : lc_cgroup_path_for(id);
	lc_error_t *e = NULL;
	if (cgp && lc_cgroup_destroy(cgp, &e) < 0) {
		lc_error_print(e, "lcrun: warning");
		lc_error_free(e);
		e = NULL;
	}
	_cleanup_free_ char *sbdir = lc_sandbox_dir(id);
	struct stat sst;
	if (lstat(sbdir, &sst) == 0 && S_ISDIR(sst.st_mode) && lc_sb_remove_later(sbdir, id) == 0)
		sbdir[0] = '\0'; /* in trash/, removed in the background */
	for (int i = 0; sbdir[0] && i < 100; i++) {
		if (lc_rm_rf(sbdir, i == 99 ? &e : NULL) == 0)
			break;
		usleep(10000); /* the overlay may be mounted for a moment longer */
	}
	if (e) {
		lc_error_print(e, "lcrun: warning");
		lc_error_free(e);
	}
	lc_state_remove(id);
}

/* ---- the monitor -------------------------------------------------------- */

enum { EV_NONE, EV_STOP, EV_RELEASE, EV_EXPIRE, EV_IDLE, EV_PID1 };

typedef struct monitor {
	lc_sb_t c;
	bool restart;
	int sfd;        /* signalfd: TERM, USR1, INT, HUP */
	long long expires_ms; /* wall clock; 0: no ttl */
	int idle_timeout;     /* seconds; 0: none */
} monitor_t;

/* How many processes run in the sandbox besides its pid 1. */
static int busy_count(monitor_t *m)
{
	if (m->c.cg.path) {
		_cleanup_free_ char *p = lc_strdup_printf("%s/cgroup.procs", m->c.cg.path);
		_cleanup_free_ char *s = NULL;
		if (lc_read_file(p, &s, NULL, NULL) < 0)
			return 0;
		int n = 0;
		for (char *l = s; *l; l++)
			if (*l == '\n')
				n++;
		return n > 0 ? n - 1 : 0;
	}
	/* No cgroup (rootless): processes in pid 1's pid namespace. */
	char path[64];
	struct stat ref, st;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", m->c.init);
	if (stat(path, &ref) < 0)
		return 0;
	_cleanup_dir_ DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		int pid = atoi(de->d_name);
		if (pid <= 0 || pid == m->c.init)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
		if (stat(path, &st) == 0 && st.st_ino == ref.st_ino && st.st_dev == ref.st_dev)
			n++;
	}
	return n;
}

static int read_signal(int sfd)
{
	struct signalfd_siginfo si;
	if (read(sfd, &si, sizeof(si)) != sizeof(si))
		return 0;
	return (int)si.ssi_signo;
}

static int signal_event(int sig)
{
	return sig == SIGUSR1 ? EV_RELEASE : EV_STOP;
}

/* SIGUSR2: lc_sandbox_claim wrote a ttl and an idle_timeout (counted from
 * the claim) into the state; the state is written whole by rename. */
static void monitor_reload(monitor_t *m, long long *last_busy)
{
	_cleanup_json_ json_t *st = lc_state_read(m->c.id, NULL);
	if (!st)
		return;
	m->idle_timeout = (int)lc_json_int(st, "idle_timeout");
	m->expires_ms = lc_json_int(st, "expires") > 0 ? lc_json_int(st, "expires") : 0;
	if (last_busy)
		*last_busy = lc_now_ms();
}

/* Take the state lock for an action of the monitor's own; a command that
 * holds it will signal us: then its request wins.  Returns the lock fd, or
 * -1 with *ev set to the command's request. */
static int monitor_lock(monitor_t *m, int *ev)
{
	for (;;) {
		int fd = lc_state_lock(m->c.id, 0, NULL);
		if (fd >= 0)
			return fd;
		struct pollfd p = { m->sfd, POLLIN, 0 };
		if (poll(&p, 1, 20) > 0) {
			int sig = read_signal(m->sfd);
			if (sig == SIGUSR2) {
				monitor_reload(m, NULL);
			} else if (sig) {
				*ev = signal_event(sig);
				return -1;
			}
		}
		_cleanup_free_ char *sd = lc_state_dir(m->c.id);
		if (access(sd, F_OK) < 0)
			return -1; /* removed under us */
	}
}

/* A stopped sandbox with a ttl: a process of its own waits for the ttl and
 * removes it, unless told to go first (start, rm). */
static pid_t spawn_ttl_timer(monitor_t *m)
{
	pid_t monitor = getpid();
	pid_t pid = fork();
	if (pid != 0)
		return pid < 0 ? 0 : pid;
	prctl(PR_SET_NAME, "lcrun-ttl", 0, 0, 0);
	/* nothing of the monitor's: not its state lock, not its sockets */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != m->sfd)
			close(fd);
	for (;;) {
		long long left = m->expires_ms - lc_wall_ms();
		if (left <= 0)
			break;
		struct pollfd p = { m->sfd, POLLIN, 0 };
		int r = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (r > 0 && read_signal(m->sfd))
			_exit(0);
	}
	/* act only once the monitor that made us has recorded our pid */
	while (getppid() == monitor)
		usleep(10000);
	int ev = EV_NONE;
	int lock = monitor_lock(m, &ev);
	if (lock < 0)
		_exit(0);
	_cleanup_json_ json_t *st = lc_state_read(m->c.id, NULL);
	if (st && lc_json_int(st, "monitor_pid") == getpid())
		lc_sandbox_purge(m->c.id, st);
	_exit(0);
}

static void __attribute__((noreturn)) monitor_finish(monitor_t *m, int ev, const char *why)
{
	bool expire = ev == EV_EXPIRE;
	lc_sb_teardown(&m->c, !expire);
	if (expire) {
		lc_sandbox_purge(m->c.id, NULL);
		_exit(0);
	}
	pid_t timer = 0;
	if (ev != EV_RELEASE && m->expires_ms > 0)
		timer = spawn_ttl_timer(m);
	_cleanup_json_ json_t *p = json_pack("{s:s, s:i, s:I, s:i, s:I, s:s, s:I}", "status", "stopped", "pid", 0,
					     "pid_start", (json_int_t)0, "monitor_pid", (int)timer,
					     "monitor_start", (json_int_t)lc_proc_starttime(timer),
					     "stop_reason", why, "stopped", (json_int_t)lc_wall_ms());
	lc_state_patch(m->c.id, p, NULL);
	_exit(0);
}

static void __attribute__((noreturn)) monitor_loop(monitor_t *m)
{
	long long last_busy = lc_now_ms();
	for (;;) {
		int timeout = -1;
		if (m->idle_timeout > 0)
			timeout = 1000;
		if (m->expires_ms > 0) {
			long long left = m->expires_ms - lc_wall_ms();
			if (left <= 0)
				left = 0;
			if (timeout < 0 || left < timeout)
				timeout = (int)left;
		}
		struct pollfd p[2] = { { m->c.pidfd, POLLIN, 0 }, { m->sfd, POLLIN, 0 } };
		int n = poll(p, 2, timeout);
		if (n < 0 && errno != EINTR)
			monitor_finish(m, EV_STOP, "monitor error");
		int ev = EV_NONE;
		const char *why = NULL;
		if (n > 0 && (p[1].revents & POLLIN)) {
			int sig = read_signal(m->sfd);
			if (sig == SIGUSR2) {
				monitor_reload(m, &last_busy);
				continue;
			}
			if (sig) {
				/* a command holds the lock and waits for us */
				monitor_finish(m, signal_event(sig), sig == SIGUSR1 ? "removed" : "stopped");
			}
		}
		if (n > 0 && (p[0].revents & POLLIN)) {
			ev = EV_PID1;
			why = "pid 1 exited";
		} else if (m->expires_ms > 0 && lc_wall_ms() >= m->expires_ms) {
			ev = EV_EXPIRE;
			why = "ttl expired";
		} else if (m->idle_timeout > 0) {
			if (busy_count(m) > 0)
				last_busy = lc_now_ms();
			else if (lc_now_ms() - last_busy >= (long long)m->idle_timeout * 1000) {
				ev = EV_IDLE;
				why = "idle timeout";
			}
		}
		if (ev == EV_NONE)
			continue;
		int cmd_ev = EV_NONE;
		int lock = monitor_lock(m, &cmd_ev);
		if (lock < 0 && cmd_ev != EV_NONE)
			monitor_finish(m, cmd_ev, cmd_ev == EV_RELEASE ? "removed" : "stopped");
		if (ev == EV_IDLE && busy_count(m) > 0) {
			/* an exec came in while we waited for the lock */
			close(lock);
			last_busy = lc_now_ms();
			continue;
		}
		monitor_finish(m, ev, why);
	}
}

static void redirect_stdio(const char *log)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int out = log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
	if (null >= 0)
		dup2(null, 0);
	dup2(out >= 0 ? out : null, 1);
	dup2(out >= 0 ? out : null, 2);
	if (null > 2)
		close(null);
	if (out > 2)
		close(out);
}

static void __attribute__((noreturn)) monitor_main(monitor_t *m, int sock)
{
	prctl(PR_SET_NAME, "lcrun-monitor", 0, 0, 0);
	redirect_stdio(NULL);
	/* keep only the socket to the waiting create/start */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != sock)
			close(fd);
	signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	m->sfd = signalfd(-1, &set, SFD_CLOEXEC);

	lc_error_t *err = NULL;
	lc_sb_t *c = &m->c;
	if (m->sfd < 0)
		lc_error_set(&err, LC_EXIT_RUNTIME, errno, "cannot create a signalfd");
	if (!err && lc_sb_start(c, &err) < 0 && !err)
		lc_error_set(&err, LC_EXIT_RUNTIME, 0, "sandbox could not be started");
	if (!err) {
		/* Its execs get the very filter pid 1 got, whatever becomes of
		 * the profile, and read it back without hashing anything. */
		_cleanup_free_ char *bpf = lc_strdup_printf("%s/%s/seccomp.bpf", lc_run_dir(), c->id);
		lc_seccomp_save(&c->prog, bpf, &err);
	}
	if (err) {
		lc_sb_teardown(c, m->restart);
		if (m->restart)
			patch_status(c->id, "stopped", NULL);
		lc_msg_send_error(sock, err);
		_exit(1);
	}
	_cleanup_free_ char *log = lc_strdup_printf("%s/%s/monitor.log", lc_run_dir(), c->id);
	redirect_stdio(log);
	if (c->spec->ttl > 0)
		m->expires_ms = c->created_ms + (long long)c->spec->ttl * 1000;
	m->idle_timeout = c->spec->idle_timeout;
	json_t *p = json_pack("{s:i, s:I, s:I, s:I, s:b}", "monitor_pid", (int)getpid(),
			      "monitor_start", (json_int_t)lc_proc_starttime(getpid()),
			      "pid_start", (json_int_t)lc_proc_starttime(c->init),
			      "started", (json_int_t)lc_wall_ms(), "confirmed", m->restart);
	json_object_set_new(p, "expires", m->expires_ms ? json_integer(m->expires_ms) : json_null());
	json_object_set_new(p, "idle_timeout", json_integer(c->spec->idle_timeout));
	json_object_set_new(p, "ttl", json_integer(c->spec->ttl));
	int r = lc_state_patch(c->id, p, &err);
	json_decref(p);
	char ack = 0;
	if (r < 0) {
		lc_sb_teardown(c, m->restart);
		lc_msg_send_error(sock, err);
		_exit(1);
	}
	LC_FAULT("create-recorded");
	if (lc_msg_send(sock, LC_MSG_READY, 0, 0, c->id) < 0 || read(sock, &ack, 1) != 1) {
		/* nobody learnt the id: leave nothing behind */
		lc_sb_teardown(c, m->restart);
		if (m->restart)
			patch_status(c->id, "stopped", NULL);
		_exit(1);
	}
	close(sock);
	LC_FAULT("create-acked");
	if (!m->restart) {
		_cleanup_json_ json_t *ok = json_pack("{s:b}", "confirmed", 1);
		lc_state_patch(c->id, ok, NULL);
	}
	LC_FAULT("create-confirmed");
	monitor_loop(m);
}

/* Fork the monitor of a new (or restarted) sandbox and wait for its word. */
static int spawn_monitor(const lc_spec_t *spec, bool restart, long long created_ms, char id[LC_ID_LEN + 1],
			 lc_error_t **err)
{
	/* The monitor sets the network up: load its libraries here, not in a
	 * child forked from a possibly threaded process (lcd). */
	if (spec->net.mode != LC_NET_NONE && lc_netlibs_load(err) < 0)
		return -1;
	/* The monitor checks an image's blobs by their SHA-256 when they were
	 * not checked before (image.c, load_blob_json): from a possibly
	 * threaded process (lcd), libcrypto is loaded here, not in a child of
	 * it.  Single-threaded (lcrun create), the monitor loads it itself if
	 * it hashes at all: 1.1-1.3 ms that a checked image does not cost.
	 * The seccomp cache and the host skeleton need no libcrypto. */
	if (spec->image && !lc_single_threaded())
		lc_crypto_load();
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a socket pair");
	pid_t mid = fork();
	if (mid < 0) {
		close(sp[0]);
		close(sp[1]);
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot fork%s",
				     errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
	}
	if (mid == 0) {
		close(sp[0]);
		setsid();
		pid_t pid = fork();
		if (pid != 0)
			_exit(pid < 0 ? 1 : 0);
		monitor_t m;
		memset(&m, 0, sizeof(m));
		lc_sb_init(&m.c, spec);
		m.c.no_command = true;
		m.c.reuse_dir = restart;
		m.restart = restart;
		if (created_ms > 0)
			m.c.created_ms = created_ms;
		monitor_main(&m, sp[1]);
	}
	close(sp[1]);
	_cleanup_close_ int sock = sp[0];
	while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
		;
	lc_msg_t msg;
	int r = lc_msg_recv(sock, &msg);
	if (r != 1)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "the sandbox monitor ended without a word (see lcrun gc)");
	if (msg.type == LC_MSG_ERROR) {
		lc_error_from_buf(err, msg.text, strlen(msg.text));
		return -1;
	}
	memcpy(id, msg.text, LC_ID_LEN);
	id[LC_ID_LEN] = '\0';
	LC_FAULT("create-id-received");
	char ack = 1;
	if (send(sock, &ack, 1, MSG_NOSIGNAL) != 1)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "sandbox %s: cannot confirm to its monitor", id);
	return 0;
}

int lc_sandbox_create(const lc_spec_t *spec, char id[LC_ID_LEN + 1], lc_error_t **err)
{
	if (spec->argv && spec->argv[0])
		return lc_error_set(err, LC_EXIT_USAGE, 0, "create takes no command; use lcrun exec ID -- CMD");
	/* The monitor is a fork: it owns a copy of spec. */
	return spawn_monitor(spec, false, 0, id, err);
}

/* ---- commands on an existing sandbox ----------------------------------- */

/* A sandbox resolved, locked and read by a command. */
typedef struct held {
	char *id;
	json_t *st;
	int lock;
} held_t;

static void held_release(held_t *h)
{
	free(h->id);
	if (h->st)
		json_decref(h->st);
	if (h->lock >= 0)
		close(h->lock);
}
#define _cleanup_held_ __attribute__((cleanup(held_release)))
#define HELD_INIT { NULL, NULL, -1 }

static int hold(const char *id_or_name, held_t *h, lc_error_t **err)
{
	if (lc_state_resolve(id_or_name, &h->id, err) < 0)
		return -1;
	h->lock = lc_state_lock(h->id, 15000, err);
	if (h->lock < 0)
		return -1;
	h->st = lc_state_read(h->id, err);
	return h->st ? 0 : -1;
}

/* Signal the monitor (or ttl timer) and wait for it to exit. */
static int tell_monitor(json_t *st, const char *id, int sig, lc_error_t **err)
{
	pid_t m = (pid_t)lc_json_int(st, "monitor_pid");
	_cleanup_close_ int pfd = m > 0 ? (int)syscall(SYS_pidfd_open, m, 0) : -1;
	if (pfd < 0 || !lc_state_monitor_alive(st, id))
		return 0;
	if (syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0) < 0)
		return errno == ESRCH ? 0 : lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot signal the monitor of %s", id);
	struct pollfd p = { pfd, POLLIN, 0 };
	for (;;) {
		int r = poll(&p, 1, 60000);
		if (r > 0)
			return 0;
		if (r == 0)
			return lc_error_set(err, LC_EXIT_TIMEOUT, 0, "the monitor of sandbox %s did not finish in 60 s", id);
		if (errno != EINTR)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot wait for the monitor of %s", id);
	}
}

/* A sandbox run by `lcrun run` (no monitor): kill it; its lcrun cleans up. */
static int kill_unmonitored(json_t *st, const char *id, lc_error_t **err)
{
	if (lc_sandbox_kill(id, err) < 0)
		return -1;
	for (int i = 0; i < 500 && lc_state_pid1_alive(st, id); i++)
		usleep(10000);
	return 0;
}

int lc_sandbox_stop(const char *id_or_name, lc_error_t **err)
{
	_cleanup_held_ held_t h = HELD_INIT;
	if (hold(id_or_name, &h, err) < 0)
		return -1;
	const char *id = h.id, *status = lc_state_status(h.st, id);
	json_t *st = h.st;
	if (!strcmp(status, "running") || !strcmp(status, "paused") || !strcmp(status, "stopping")) {
		if (!json_object_get(st, "monitor_pid"))
			return kill_unmonitored(st, id, err);
		return tell_monitor(st, id, SIGTERM, err);
	}
	if (!strcmp(status, "dead")) {
		/* its monitor was killed: finish what it could not */
		const char *cg = lc_json_str(st, "cgroup");
		if (cg)
			lc_cgroup_destroy(cg, NULL);
		_cleanup_json_ json_t *p = json_pack("{s:s, s:i, s:s}", "status", "stopped", "pid", 0,
						     "stop_reason", "monitor gone");
		return lc_state_patch(id, p, err);
	}
	return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is already %s", id, status);
}

int lc_sandbox_claim(const char *id, const lc_spec_t *spec, lc_error_t **err)
{
	_cleanup_held_ held_t h = HELD_INIT;
	if (hold(id, &h, err) < 0)
		return -1;
	const char *status = lc_state_status(h.st, h.id);
	if (strcmp(status, "running"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is %s, not running", h.id, status);
	if (lc_json_str(h.st, "name") || !json_object_get(h.st, "monitor_pid"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s was not made to be claimed", h.id);
	/* Its monitor records "confirmed" once create has returned, by a
	 * write of the whole state: wait for it, or that write would undo ours. */
	for (int i = 0; !json_is_true(json_object_get(h.st, "confirmed")); i++) {
		if (i == 1000)
			return lc_error_set(err, LC_EXIT_TIMEOUT, 0, "sandbox %s: its monitor did not confirm it", h.id);
		usleep(1000);
		json_decref(h.st);
		if (!(h.st = lc_state_read(h.id, err)))
			return -1;
	}
	/* Its disk is what it was made with: a claim cannot change it. */
	const lc_limits_t *lim = &spec->limits;
	long long disk = lc_json_int(json_object_get(json_object_get(h.st, "spec"), "limits"), "disk");
	if ((lim->disk > 0 ? lim->disk : 0) != disk)
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s has a disk of %lld bytes, not the %lld asked for",
				    h.id, disk, lim->disk > 0 ? lim->disk : 0);
	/* Limits the claim asks for (a member was made with none): written into
	 * its cgroup before it is handed out. */
	bool limited = lim->memory >= 0 || lim->memory_swap >= 0 || lim->pids >= 0 || lim->cpus > 0 ||
		       lim->cpu_weight > 0 || lim->io_weight > 0;
	_cleanup_free_ char *skipped = NULL;
	if (limited) {
		const char *cg = lc_json_str(h.st, "cgroup");
		if (!cg && !lim->best_effort)
			return lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s has no cgroup to limit", h.id);
		if (cg && (lc_cgroup_check_limits(lim, err) < 0 || lc_cgroup_set_limits(cg, lim, &skipped, err) < 0))
			return lc_error_wrap(err, "sandbox %s: its limits", h.id);
	}
	int linked = spec->name ? lc_name_link(h.id, spec->name, err) : 0;
	if (linked < 0)
		return -1;
	long long now = lc_wall_ms();
	json_t *sj = json_object_get(h.st, "spec");
	if (limited) {
		_cleanup_json_ json_t *full = lc_spec_to_json(spec);
		json_object_set(sj, "limits", json_object_get(full, "limits"));
		if (skipped)
			json_object_set_new(h.st, "limits_not_applied", json_string(skipped));
	}
	json_object_set_new(sj, "name", spec->name ? json_string(spec->name) : json_null());
	json_object_set_new(sj, "env", lc_strv_to_json(spec->env));
	json_object_set_new(sj, "ttl", json_integer(spec->ttl));
	json_object_set_new(sj, "idle_timeout", json_integer(spec->idle_timeout));
	json_object_set_new(h.st, "name", spec->name ? json_string(spec->name) : json_null());
	json_object_set_new(h.st, "created", json_integer(now));
	json_object_set_new(h.st, "ttl", json_integer(spec->ttl));
	json_object_set_new(h.st, "idle_timeout", json_integer(spec->idle_timeout));
	json_object_set_new(h.st, "expires", spec->ttl > 0 ? json_integer(now + (long long)spec->ttl * 1000) : json_null());
	int r = lc_state_write(h.id, h.st, err);
	if (r == 0 && (spec->ttl > 0 || spec->idle_timeout > 0)) {
		pid_t m = (pid_t)lc_json_int(h.st, "monitor_pid");
		_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, m, 0);
		if (pfd < 0 || !lc_state_monitor_alive(h.st, h.id) || syscall(SYS_pidfd_send_signal, pfd, SIGUSR2, NULL, 0) < 0)
			r = lc_error_set(err, LC_EXIT_RUNTIME, errno, "sandbox %s: cannot hand its ttl to its monitor", h.id);
	}
	if (r < 0 && linked > 0) {
		_cleanup_free_ char *link = lc_strdup_printf("%s/names/%s", lc_run_dir(), spec->name);
		unlink(link);
	}
	return r;
}

int lc_sandbox_set_expiry(const char *id_or_name, long long expires_ms, lc_error_t **err)
{
	_cleanup_held_ held_t h = HELD_INIT;
	if (hold(id_or_name, &h, err) < 0)
		return -1;
	const char *status = lc_state_status(h.st, h.id);
	if (strcmp(status, "running") && strcmp(status, "paused"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is %s: its ttl changes while it runs or is paused",
				    h.id, status);
	if (!json_object_get(h.st, "monitor_pid"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s has no monitor to keep a ttl (lcrun run --keep)", h.id);
	if (expires_ms < 0)
		expires_ms = 0;
	/* The ttl, counted from "created" as a (re)start computes it, covers
	 * the new end; a start after a stop keeps it that way. */
	long long created = lc_json_int(h.st, "created"), ttl = 0;
	if (expires_ms > 0) {
		ttl = (expires_ms - created + 999) / 1000;
		if (ttl < 1)
			ttl = 1;
		if (ttl > INT_MAX)
			return lc_error_set(err, LC_EXIT_USAGE, 0, "sandbox %s: a ttl that long does not fit", h.id);
	}
	json_t *sj = json_object_get(h.st, "spec");
	json_object_set_new(sj, "ttl", json_integer(ttl));
	json_object_set_new(h.st, "ttl", json_integer(ttl));
	json_object_set_new(h.st, "expires", expires_ms > 0 ? json_integer(expires_ms) : json_null());
	if (lc_state_write(h.id, h.st, err) < 0)
		return -1;
	pid_t m = (pid_t)lc_json_int(h.st, "monitor_pid");
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, m, 0);
	if (pfd < 0 || !lc_state_monitor_alive(h.st, h.id) || syscall(SYS_pidfd_send_signal, pfd, SIGUSR2, NULL, 0) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "sandbox %s: cannot hand its new ttl to its monitor", h.id);
	return 0;
}

int lc_sandbox_start(const char *id_or_name, lc_error_t **err)
{
	_cleanup_held_ held_t h = HELD_INIT;
	if (hold(id_or_name, &h, err) < 0)
		return -1;
	const char *id = h.id, *status = lc_state_status(h.st, id);
	json_t *st = h.st;
	if (strcmp(status, "stopped") && strcmp(status, "exited") && strcmp(status, "dead"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is %s, not stopped", id, status);
	if (tell_monitor(st, id, SIGUSR1, err) < 0) /* its ttl timer */
		return -1;
	const char *cg = lc_json_str(st, "cgroup");
	if (cg && lc_cgroup_destroy(cg, err) < 0)
		return -1;
	lc_spec_t *spec = lc_spec_from_json(json_object_get(st, "spec"));
	free(spec->id);
	spec->id = strdup(id);
	lc_strv_free(spec->argv);
	spec->argv = NULL;
	char got[LC_ID_LEN + 1];
	int r = spawn_monitor(spec, true, lc_json_int(st, "created"), got, err);
	lc_spec_free(spec);
	return r < 0 ? lc_error_wrap(err, "cannot start sandbox %s", id) : 0;
}

int lc_sandbox_remove(const char *id_or_name, bool force, lc_error_t **err)
{
	_cleanup_held_ held_t h = HELD_INIT;
	if (hold(id_or_name, &h, err) < 0)
		return -1;
	const char *id = h.id, *status = lc_state_status(h.st, id);
	json_t *st = h.st;
	bool running = !strcmp(status, "running") || !strcmp(status, "paused") || !strcmp(status, "stopping") ||
		       !strcmp(status, "creating");
	if (running && !force)
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is %s (lcrun stop it first, or rm -f)", id, status);
	if (running && !json_object_get(st, "monitor_pid"))
		return kill_unmonitored(st, id, err);
	if (tell_monitor(st, id, SIGUSR1, err) < 0)
		return -1;
	patch_status(id, "removing", NULL);
	json_decref(h.st);
	h.st = lc_state_read(id, NULL);
	lc_sandbox_purge(id, h.st);
	return 0;
}

static int set_frozen(const char *id_or_name, bool frozen, lc_error_t **err)
{
	_cleanup_held_ held_t h = HELD_INIT;
	if (hold(id_or_name, &h, err) < 0)
		return -1;
	const char *id = h.id, *status = lc_state_status(h.st, id);
	json_t *st = h.st;
	const char *want = frozen ? "running" : "paused";
	if (strcmp(status, want))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is %s, not %s", id, status, want);
	const char *cg = lc_json_str(st, "cgroup");
	if (!cg)
		return lc_error_set(err, LC_EXIT_PERM, 0, "sandbox %s has no cgroup (rootless): pause needs one", id);
	if (lc_cgroup_freeze(cg, frozen, err) < 0)
		return -1;
	return patch_status(id, frozen ? "paused" : "running", err);
}

int lc_sandbox_pause(const char *id_or_name, lc_error_t **err)
{
	return set_frozen(id_or_name, true, err);
}

int lc_sandbox_resume(const char *id_or_name, lc_error_t **err)
{
	return set_frozen(id_or_name, false, err);
}

/* ---- listing ------------------------------------------------------------- */

/* Memory in use: memory.current, or the resident memory of its processes
 * (pid1_rss: the resident pages of pid1, read already, or -1).  A file a
 * listing reads for each sandbox: one open and one read each, no more. */
static long long memory_in_use(const char *cg, pid_t pid1, long long pid1_rss)
{
	char path[PATH_MAX], buf[4096];
	/* No memory.current to look for where the host's cgroup v2 has no
	 * memory controller (a hybrid host's is v1's): asked once. */
	static int v2_memory = -1;
	int has = __atomic_load_n(&v2_memory, __ATOMIC_RELAXED);
	if (has < 0) {
		has = lc_cgroup_has_controller("memory");
		__atomic_store_n(&v2_memory, has, __ATOMIC_RELAXED);
	}
	if (snprintf(path, sizeof(path), "%s/memory.current", cg) >= (int)sizeof(path))
		return -1;
	if (has && lc_read_small(AT_FDCWD, path, buf, sizeof(buf), true) >= 0)
		return strtoll(buf, NULL, 10);
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	_cleanup_free_ char *big = NULL;
	char *procs = buf;
	ssize_t n = lc_read_small(AT_FDCWD, path, buf, sizeof(buf), false);
	if (n < 0)
		return -1;
	if ((size_t)n + 1 >= sizeof(buf)) { /* many processes */
		if (lc_read_file(path, &big, NULL, NULL) < 0)
			return -1;
		procs = big;
	}
	long long sum = 0;
	long page = sysconf(_SC_PAGESIZE);
	char *save = NULL;
	for (char *l = strtok_r(procs, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		long long size, rss;
		if (pid1_rss >= 0 && atoi(l) == pid1) {
			sum += pid1_rss * page;
			continue;
		}
		char sp[64], sm[256];
		snprintf(sp, sizeof(sp), "/proc/%s/statm", l);
		if (lc_read_small(AT_FDCWD, sp, sm, sizeof(sm), true) > 0 && sscanf(sm, "%lld %lld", &size, &rss) == 2)
			sum += rss * page;
	}
	return sum;
}

json_t *lc_sandbox_info(const char *id, json_t *st)
{
	/* The state as lc_state_status tells it, with pid 1's /proc/PID/stat
	 * read once: the start time that says it is alive, and its resident
	 * memory for the sum below. */
	const char *status = lc_json_str(st, "status");
	pid_t pid1 = (pid_t)lc_json_int(st, "pid");
	unsigned long long pid1_start = (unsigned long long)lc_json_int(st, "pid_start");
	long long pid1_rss = -1;
	bool alive = status && pid1_start && (!strcmp(status, "running") || !strcmp(status, "paused")) &&
		     lc_proc_stat(pid1, &pid1_rss) == pid1_start;
	if (!alive) {
		status = lc_state_status(st, id);
		pid1_rss = -1;
	}
	const char *image = lc_json_str(st, "image") ?: lc_json_str(st, "rootfs") ?: "host";
	const char *cg = lc_json_str(st, "cgroup");
	bool live = !strcmp(status, "running") || !strcmp(status, "paused");
	json_t *j = json_pack("{s:s, s:o, s:s, s:s, s:I, s:s}", "id", id,
			      "name", json_deep_copy(json_object_get(st, "name") ? json_object_get(st, "name") : json_null()),
			      "image", image, "state", status, "created", (json_int_t)lc_json_int(st, "created"),
			      "net", lc_json_str(st, "net") ?: "none");
	long long cpu = live && cg ? lc_cgroup_read_key(cg, "cpu.stat", "usage_usec") : -1;
	long long mem = live && cg ? memory_in_use(cg, pid1, pid1_rss) : -1;
	json_object_set_new(j, "cpu_usec", cpu >= 0 ? json_integer(cpu) : json_null());
	json_object_set_new(j, "memory_bytes", mem >= 0 ? json_integer(mem) : json_null());
	json_t *addr = json_object_get(st, "address");
	json_object_set_new(j, "address", addr ? json_deep_copy(addr) : json_null());
	return j;
}

json_t *lc_sandbox_list(lc_error_t **err)
{
	json_t *a = json_array();
	_cleanup_dir_ DIR *d = opendir(lc_run_dir());
	if (!d) {
		if (errno == ENOENT)
			return a;
		json_decref(a);
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read %s", lc_run_dir());
		return NULL;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!lc_id_valid(de->d_name))
			continue;
		_cleanup_json_ json_t *st = lc_state_read(de->d_name, NULL);
		if (st)
			json_array_append_new(a, lc_sandbox_info(de->d_name, st));
	}
	return a;
}

json_t *lc_sandbox_state(const char *id, lc_error_t **err)
{
	if (!lc_id_valid(id)) {
		lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no such sandbox: %s", id);
		return NULL;
	}
	return lc_state_read(id, err);
}

json_t *lc_sandbox_inspect(const char *id_or_name, lc_error_t **err)
{
	_cleanup_free_ char *id = NULL;
	json_t *st = lc_state_open(id_or_name, &id, err);
	if (!st)
		return NULL;
	json_object_set_new(st, "status", json_string(lc_state_status(st, id)));
	return st;
}

int lc_sandbox_logs(const char *id_or_name, int out, bool follow, lc_error_t **err)
{
	_cleanup_free_ char *id = NULL;
	if (lc_state_resolve(id_or_name, &id, err) < 0)
		return -1;
	_cleanup_free_ char *path = lc_strdup_printf("%s/%s/exec.log", lc_run_dir(), id);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", path);
	char buf[65536];
	for (;;) {
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read %s", path);
		if (n > 0) {
			if (lc_write_all(out, buf, (size_t)n) < 0)
				return 0; /* reader went away */
			continue;
		}
		if (!follow)
			return 0;
		_cleanup_json_ json_t *st = lc_state_read(id, NULL);
		if (!st)
			return 0;
		if (fd < 0)
			fd = open(path, O_RDONLY | O_CLOEXEC);
		usleep(200000);
	}
}

int lc_sandbox_netns(const char *id_or_name, lc_error_t **err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_json_ json_t *st = lc_state_open(id_or_name, &id, err);
	if (!st)
		return -1;
	if (strcmp(lc_state_status(st, id), "running"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is not running", id);
	_cleanup_close_ int pidfd = lc_state_pid1_pidfd(st, id, err);
	if (pidfd < 0)
		return -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)lc_json_int(st, "pid"));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	/* pid 1 still the same process after the open: the namespace is its */
	struct pollfd p = { pidfd, POLLIN, 0 };
	if (fd < 0 || poll(&p, 1, 0) != 0) {
		if (fd >= 0)
			close(fd);
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is not running", id);
	}
	return fd;
}
