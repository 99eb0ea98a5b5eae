/* exec.c — run a command in a running sandbox (lcrun exec).
 *
 * Three processes.  The caller (lcrun exec, or a thread of lcd) clones a
 * HELPER straight into the sandbox's cgroup and pid namespace (it joins the
 * pid namespace through a pidfd of pid 1 just for that clone, then returns
 * to its own).  The helper joins the other namespaces (net first while
 * still privileged on the host, then user, mount, uts, ipc, cgroup) and
 * becomes root of the sandbox's user namespace; the mount namespace's root
 * is the sandbox's root, since pid 1 pivoted into it.  It makes the pty
 * (-t) in the sandbox's own devpts and passes the master back, then forks
 * the COMMAND, which goes through lc_exec_command with the sandbox's spec
 * (uid, capabilities, no_new_privs, seccomp).  The helper passes a pidfd of
 * the command and then its status to the caller over a socket pair; when
 * the caller dies it kills the command.  Whatever either leaves behind is
 * reaped by the sandbox's pid 1.  Without -t the command writes to the
 * caller's own stdout/stderr: output streams live, nothing is copied. */
#include <errno.h>
#include <linux/sched.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "config.h"
#include "console.h"
#include "exec.h"
#include "init.h"
#include "json.h"
#include "lifecycle.h"
#include "proctitle.h"
#include "sandbox_priv.h"
#include "seccomp.h"
#include "state.h"
#include "sync.h"
#include "util.h"

int lc_enter_sandbox(int pidfd, int nstypes, lc_error_t **err)
{
	/* Pid 1 is not dumpable and its memory belongs to the host's user
	 * namespace: joining it takes CAP_SYS_PTRACE there. */
	if (geteuid() != 0)
		return lc_error_set(err, LC_EXIT_PERM, 0, "joining a sandbox needs root (its pid 1 cannot be "
				    "entered without CAP_SYS_PTRACE on the host)");
	int rest = nstypes & ~CLONE_NEWUSER;
	/* As host root, every namespace but the user one first (the network
	 * namespace belongs to the host's user namespace); unprivileged, the
	 * user namespace must come first. */
	if (setns(pidfd, rest) == 0) {
		if ((nstypes & CLONE_NEWUSER) && setns(pidfd, CLONE_NEWUSER) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot join the sandbox's user namespace");
	} else if (errno == EPERM && (nstypes & CLONE_NEWUSER)) {
		if (setns(pidfd, CLONE_NEWUSER) < 0 || setns(pidfd, rest) < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot join the sandbox's namespaces");
	} else {
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot join the sandbox's namespaces");
	}
	if ((nstypes & CLONE_NEWUSER) &&
	    (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0))
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot become root in the sandbox");
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	return 0;
}

#define ALL_NS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWCGROUP)

typedef struct exec_ctx {
	const lc_exec_opts_t *o;
	lc_spec_t *spec;
	lc_seccomp_prog_t prog;
	char **envp;
	const char *cgroup;
	int pidfd;
	int sp[2];
	struct winsize ws;
	bool have_ws;
	bool in_cgroup; /* the helper was cloned into the sandbox's cgroup */
	lc_proc_args_t title; /* the caller's command line, hidden from the helper */
	lc_exec_opts_t own;   /* the options, not pointing into that command line */
} exec_ctx_t;

static void __attribute__((noreturn)) helper_fail(exec_ctx_t *x, lc_error_t *e)
{
	lc_msg_send_error(x->sp[1], e);
	_exit(LC_EXIT_RUNTIME);
}

/* The command's stack until its execve (see helper_main). */
#define CMD_STACK (256 * 1024)

struct cmd_arg {
	exec_ctx_t *x;
	int slave;
};

static int cmd_main(void *arg)
{
	exec_ctx_t *x = ((struct cmd_arg *)arg)->x;
	int slave = ((struct cmd_arg *)arg)->slave;
	const lc_exec_opts_t *o = x->o;
	if (o->new_pgroup && slave < 0)
		setpgid(0, 0);
	if (slave >= 0) {
		setsid();
		ioctl(slave, TIOCSCTTY, 0);
		for (int i = 0; i < 3; i++) {
			dup2(slave, i);
			x->spec->stdio[i] = -1;
		}
	}
	const char *wd = o->workdir ? o->workdir : x->spec->workdir ? x->spec->workdir : "/";
	lc_exec_command(x->spec, o->argv, &x->prog, x->envp, wd);
}

/* A helper forked from a threaded caller (lcd) joins the sandbox's cgroup
 * without the cgroup.procs write that moved it there before: a move waits
 * for an RCU grace period (5-10 ms here, on nearly every exec of an agent,
 * whose commands come seconds apart).  Single-threaded now, it clones the
 * real helper into the cgroup (CLONE_INTO_CGROUP, no wait) and stays as a
 * stand-in that the caller waits for: it ends as the helper ends.  True in
 * the helper, which is in the cgroup; false when the clone was refused
 * (the caller moves it then). */
static bool helper_into_cgroup(exec_ctx_t *x)
{
	int cgfd = open(x->cgroup, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cgfd < 0)
		return false;
	struct clone_args ca = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD, .cgroup = (uint64_t)cgfd };
	pid_t p = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
	close(cgfd);
	if (p <= 0)
		return p == 0;
	/* Never a core of lcd's memory, whatever signal it relays below. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* The stand-in keeps nothing: the caller sees the socket and the
	 * output pipes close when the helper and the command let them go. */
	lc_stdio_to_null();
	syscall(SYS_close_range, 3U, ~0U, 0U);
	int st = 0;
	while (waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(st)) {
		int sig = WTERMSIG(st);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		signal(sig, SIG_DFL);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		kill(getpid(), sig);
	}
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : LC_EXIT_RUNTIME);
}

static void __attribute__((noreturn)) helper_main(exec_ctx_t *x)
{
	const lc_exec_opts_t *o = x->o;
	lc_error_t *e = NULL;
	close(x->sp[0]);
	lc_proc_title_child("lcrun-exec", &x->title);
	{
		/* Forked from a threaded caller (lcd), the helper would otherwise
		 * hold the other threads' pipes open for as long as it lives. */
		int keep[] = { x->sp[1], x->pidfd, x->spec->stdio[0], x->spec->stdio[1], x->spec->stdio[2] };
		lc_close_fds_except(keep, sizeof(keep) / sizeof(keep[0]));
	}
	if (o->detach) {
		lc_stdio_to_null(); /* the caller's may be a pipe someone reads to EOF */
	}
	if (x->cgroup && !x->in_cgroup && !helper_into_cgroup(x)) {
		_cleanup_free_ char *procs = lc_strdup_printf("%s/cgroup.procs", x->cgroup);
		if (lc_write_file(procs, "0", &e) < 0)
			helper_fail(x, e);
	}
	int ns = ALL_NS & ~CLONE_NEWPID; /* cloned into it already */
	if (!x->cgroup)
		ns &= ~CLONE_NEWCGROUP; /* rootless: no cgroup namespace of its own */
	if (lc_enter_sandbox(x->pidfd, ns, &e) < 0)
		helper_fail(x, e);
	lc_trace("exec helper: in the sandbox's namespaces");
	LC_FAULT("exec-helper-joined");
	int slave = -1;
	if (o->tty) {
		int master;
		if (lc_pty_open(&master, &slave, &e) < 0)
			helper_fail(x, e);
		if (fchown(slave, x->spec->uid, x->spec->gid) < 0) {
			lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot hand the pty to uid %u", (unsigned)x->spec->uid);
			helper_fail(x, e);
		}
		if (x->have_ws)
			ioctl(slave, TIOCSWINSZ, &x->ws);
		if (lc_msg_send_fd(x->sp[1], LC_MSG_READY, 0, master) < 0)
			_exit(LC_EXIT_RUNTIME);
		close(master);
	}
	/* The command shares the helper's memory until its execve (CLONE_VM |
	 * CLONE_VFORK on a stack of its own, as posix_spawn does): a fork
	 * copied lcrun's page tables, and both then took copy-on-write faults,
	 * for a process that execs at once (~0.4 ms of every exec).  The
	 * helper sleeps meanwhile; the command's setup writes only its own
	 * stack, environ (put back below) and fresh allocations. */
	struct cmd_arg ca = { x, slave };
	void *stack = mmap(NULL, CMD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	char **env = environ;
	pid_t cmd = stack == MAP_FAILED ? -1 : clone(cmd_main, (char *)stack + CMD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &ca);
	environ = env;
	if (cmd < 0) {
		lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot fork in the sandbox%s",
				     errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
		helper_fail(x, e);
	}
	munmap(stack, CMD_STACK);
	if (slave >= 0)
		close(slave);
	if (o->new_pgroup && slave < 0)
		setpgid(cmd, cmd); /* also here: a kill may come before the child ran */
	/* The caller knows the command by a pidfd: the helper sees pids of
	 * the sandbox's pid namespace, not the host's. */
	int cfd = (int)syscall(SYS_pidfd_open, cmd, 0);
	lc_msg_send_fd(x->sp[1], LC_MSG_PID, 0, cfd);
	if (o->detach)
		_exit(0); /* the command is pid 1's to reap now */
	{
		/* The caller gone (kill -9), the command goes too.  (A parent-
		 * death signal would not do: changing credentials clears it.) */
		while (cfd >= 0) {
			struct pollfd p[2] = { { cfd, POLLIN, 0 }, { x->sp[1], POLLIN, 0 } };
			if (poll(p, 2, -1) < 0 && errno != EINTR)
				break;
			if (p[0].revents & POLLIN)
				break;
			if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
				kill(-cmd, SIGKILL);
				kill(cmd, SIGKILL);
				break;
			}
		}
	}
	int status;
	while (waitpid(cmd, &status, 0) < 0)
		if (errno != EINTR)
			_exit(LC_EXIT_RUNTIME);
	if (WIFEXITED(status))
		lc_msg_send(x->sp[1], LC_MSG_EXIT, WEXITSTATUS(status), 0, NULL);
	else
		lc_msg_send(x->sp[1], LC_MSG_EXIT, 128 + WTERMSIG(status), WTERMSIG(status), NULL);
	_exit(0);
}

/* The pid (in our namespace) a pidfd refers to, from its fdinfo. */
static pid_t pidfd_pid(int pidfd)
{
	if (pidfd < 0)
		return -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	_cleanup_free_ char *s = NULL;
	if (lc_read_file(path, &s, NULL, NULL) < 0)
		return -1;
	char *p = strstr(s, "\nPid:");
	return p ? (pid_t)atoi(p + 5) : -1;
}

static const int fwd_signals[] = LC_FORWARD_SIGNALS;

/* A signal for the command (forwarded, or from opts->signal_fd): SIGWINCH
 * resizes its pty to the caller's terminal (in, else out); any other goes
 * to the command. */
static void relay_signal(int sig, int master, int in, int out, int cmdfd)
{
	if (sig == SIGWINCH) {
		struct winsize ws;
		if (master >= 0 && (ioctl(in, TIOCGWINSZ, &ws) == 0 || ioctl(out, TIOCGWINSZ, &ws) == 0))
			ioctl(master, TIOCSWINSZ, &ws);
	} else if (sig > 0 && sig < 65 && cmdfd >= 0) {
		syscall(SYS_pidfd_send_signal, cmdfd, sig, NULL, 0);
	}
}


static int prepare(exec_ctx_t *x, const char *id, json_t *st, lc_error_t **err)
{
	const lc_exec_opts_t *o = x->o;
	x->spec = lc_spec_from_json(json_object_get(st, "spec"));
	for (size_t i = 0; o->env && o->env[i]; i++)
		lc_strv_push(&x->spec->env, o->env[i]);
	if (o->user_set) {
		x->spec->uid = o->uid;
		x->spec->gid = o->gid;
	}
	uid_t count = json_is_integer(json_object_get(st, "uid_count"))
			      ? (uid_t)json_integer_value(json_object_get(st, "uid_count")) : lc_uid_count();
	if (x->spec->uid >= count || x->spec->gid >= count)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--user %u:%u is outside sandbox %s's %u ids",
				    (unsigned)x->spec->uid, (unsigned)x->spec->gid, id, (unsigned)count);
	if (o->workdir && o->workdir[0] != '/')
		return lc_error_set(err, LC_EXIT_USAGE, 0, "workdir '%s' must be an absolute path", o->workdir);
	x->envp = lc_build_env(x->spec);
	/* The filter the sandbox was created with (lifecycle.c saved it);
	 * from the profile only for a sandbox made before that copy existed. */
	_cleanup_free_ char *bpf = lc_strdup_printf("%s/%s/seccomp.bpf", lc_run_dir(), id);
	if (!lc_seccomp_load_saved(bpf, &x->prog) &&
	    lc_seccomp_prepare_caps(x->spec->seccomp, x->spec->caps, &x->prog, err) < 0)
		return -1;
	x->cgroup = lc_json_str(st, "cgroup");
	x->pidfd = lc_state_pid1_pidfd(st, id, err);
	if (x->pidfd < 0)
		return -1;
	for (int i = 0; i < 3; i++)
		x->spec->stdio[i] = o->stdio[i];
	if (o->detach) {
		_cleanup_free_ char *log = lc_strdup_printf("%s/%s/exec.log", lc_run_dir(), id);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open %s", log);
		x->spec->stdio[1] = fd;
		x->spec->stdio[2] = fd;
	}
	if (!o->interactive || o->detach || o->tty) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (null < 0)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open /dev/null");
		x->spec->stdio[0] = null;
	}
	if (o->tty) {
		int tfd = o->stdio[0] >= 0 ? o->stdio[0] : 0;
		if (ioctl(tfd, TIOCGWINSZ, &x->ws) == 0 || ioctl(o->stdio[1] >= 0 ? o->stdio[1] : 1, TIOCGWINSZ, &x->ws) == 0)
			x->have_ws = true;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, x->sp) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create a socket pair");
	return 0;
}

int lc_sandbox_exec(const char *id_or_name, const lc_exec_opts_t *o, lc_result_t *res, lc_error_t **err)
{
	memset(res, 0, sizeof(*res));
	res->cpu_user_us = res->cpu_system_us = res->memory_peak = res->pids_peak = -1;
	long long t0 = lc_now_ms();
	lc_trace("exec: start");
	if (!o->argv || !o->argv[0])
		return lc_error_set(err, LC_EXIT_USAGE, 0, "exec: no command given");
	_cleanup_free_ char *id = NULL;
	if (lc_state_resolve(id_or_name, &id, err) < 0)
		return -1;
	snprintf(res->id, sizeof(res->id), "%s", id);
	_cleanup_json_ json_t *st = lc_state_read(id, err);
	if (!st)
		return -1;
	const char *status = lc_state_status(st, id);
	if (!strcmp(status, "paused"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is paused (lcrun resume %s)", id, id);
	if (strcmp(status, "running"))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s is %s, not running", id, status);

	exec_ctx_t x;
	memset(&x, 0, sizeof(x));
	x.o = o;
	x.pidfd = x.sp[0] = x.sp[1] = -1;
	int r = -1, master = -1, sigfd = -1;
	pid_t helper = -1, cmd = -1;
	int cmdfd = -1, ownpid = -1;
	sigset_t old;
	struct termios saved;
	bool raw = false;
	int in = o->stdio[0] >= 0 ? o->stdio[0] : 0, out = o->stdio[1] >= 0 ? o->stdio[1] : 1;
	if (prepare(&x, id, st, err) < 0)
		goto out;
	lc_trace("exec: state, filter and options ready");
	LC_FAULT("exec-prepared");
	if (o->forward_signals || o->tty)
		sigfd = lc_signals_to_fd(fwd_signals, sizeof(fwd_signals) / sizeof(fwd_signals[0]), &old);
	/* The helper and the command live in the sandbox's pid namespace, so
	 * that its pid 1 reaps whatever they leave behind.  Only this thread's
	 * children are affected, and only until the clone. */
	ownpid = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
	if (ownpid < 0 || setns(x.pidfd, CLONE_NEWPID) < 0) {
		lc_error_set(err, geteuid() ? LC_EXIT_PERM : LC_EXIT_RUNTIME, errno,
			     "cannot join the pid namespace of sandbox %s", id);
		goto out;
	}
	/* The sandbox sees the helper from its first instant: it must never
	 * show the caller's command line (-e values, paths).  The caller's
	 * strings are the title until the clone is done, so the helper uses
	 * copies of the options (they may point into them). */
	x.own = *o;
	x.own.argv = NULL;
	for (size_t i = 0; o->argv && o->argv[i]; i++)
		lc_strv_push(&x.own.argv, o->argv[i]);
	x.own.env = NULL; /* merged into x.spec already */
	x.own.workdir = o->workdir ? strdup(o->workdir) : NULL;
	x.o = &x.own;
	lc_proc_title_begin("lcrun-exec", &x.title);
	/* Moving a process into a cgroup afterwards waits for an RCU grace
	 * period (~10 ms); clone3(CLONE_INTO_CGROUP) does not.  A raw clone3 is
	 * only safe while no other thread may hold libc locks. */
	if (x.cgroup && lc_single_threaded()) {
		int cgfd = open(x.cgroup, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (cgfd >= 0) {
			struct clone_args ca = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD,
						 .cgroup = (uint64_t)cgfd };
			x.in_cgroup = true;
			helper = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
			if (helper < 0)
				x.in_cgroup = false;
			if (helper != 0)
				close(cgfd);
		}
	}
	if (!x.in_cgroup)
		helper = fork();
	if (helper != 0)
		lc_proc_title_end(&x.title);
	if (helper != 0 && setns(ownpid, CLONE_NEWPID) < 0 && helper > 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot return to lcrun's own pid namespace");
		goto out;
	}
	if (helper < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot fork%s",
				     errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
		goto out;
	}
	if (helper == 0)
		helper_main(&x);
	close(x.sp[1]);
	x.sp[1] = -1;

	bool got_exit = false, in_open = o->tty, master_open = false, kill_it = false;
	long long deadline = o->timeout > 0 ? t0 + (long long)o->timeout * 1000 : -1;
	int code = 0, sig = 0, cancel = o->cancel_fd > 0 ? o->cancel_fd : -1;
	int sigin = o->signal_fd > 0 ? o->signal_fd : -1;
	for (;;) {
		struct pollfd p[6] = { { x.sp[0], POLLIN, 0 }, { sigfd, POLLIN, 0 },
				       { in_open && master >= 0 ? in : -1, POLLIN, 0 },
				       { master_open ? master : -1, POLLIN, 0 }, { cancel, POLLIN, 0 },
				       { sigin, POLLIN, 0 } };
		int timeout = -1;
		if (deadline >= 0 && !res->timed_out) {
			long long left = deadline - lc_now_ms();
			timeout = left > 0 ? (int)left : 0;
		}
		int n = poll(p, 6, timeout);
		if (n < 0 && errno == EINTR)
			continue;
		bool kill_now = false;
		if (n == 0 && deadline >= 0 && !res->timed_out)
			res->timed_out = kill_now = true;
		if (n > 0 && (p[4].revents & (POLLIN | POLLHUP | POLLERR))) {
			cancel = -1; /* once */
			kill_now = true;
		}
		if (kill_now) {
			kill_it = true; /* also when its pid arrives later */
			if (cmd > 0) {
				kill(-cmd, SIGKILL);
				kill(cmd, SIGKILL);
			}
		}
		if (n == 0)
			continue;
		if (p[5].revents & (POLLIN | POLLHUP | POLLERR)) {
			unsigned char sigs[64];
			ssize_t k = read(sigin, sigs, sizeof(sigs));
			if (k <= 0 && !(k < 0 && (errno == EINTR || errno == EAGAIN)))
				sigin = -1; /* the caller closed it: no more signals */
			for (ssize_t i = 0; i < k; i++)
				relay_signal(sigs[i], master, in, out, cmdfd);
		}
		if (p[3].revents & (POLLIN | POLLHUP | POLLERR))
			master_open = lc_pump(master, out);
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (!lc_pump(in, master)) {
				in_open = false;
				if (!isatty(in) && master >= 0) /* end of input: ^D to the pty */
					lc_write_all(master, "\004", 1);
			}
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sigfd, &si, sizeof(si)) == sizeof(si)) {
				relay_signal((int)si.ssi_signo, master, in, out, cmdfd);
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			lc_msg_t m;
			int fd = -1;
			int rr = lc_msg_recv_fd(x.sp[0], &m, &fd);
			if (rr <= 0)
				break; /* helper gone */
			if (m.type == LC_MSG_ERROR) {
				lc_error_from_buf(err, m.text, strlen(m.text));
				goto out;
			} else if (m.type == LC_MSG_READY && fd >= 0) {
				master = fd;
				master_open = true;
				if (o->tty && lc_tty_raw(in, &saved) == 0)
					raw = true;
			} else if (m.type == LC_MSG_PID) {
				cmdfd = fd;
				fd = -1;
				cmd = pidfd_pid(cmdfd);
				if (kill_it && cmd > 0) {
					kill(-cmd, SIGKILL);
					kill(cmd, SIGKILL);
				}
				if (o->detach) {
					got_exit = true;
					while (waitpid(helper, NULL, 0) < 0 && errno == EINTR)
						;
					helper = -1;
					break;
				}
			} else if (m.type == LC_MSG_EXIT) {
				lc_trace("exec: the command's status came");
				LC_FAULT("exec-status");
				got_exit = true;
				code = m.a;
				sig = m.b;
				break;
			}
			if (fd >= 0 && fd != master)
				close(fd);
		}
	}
	if (master >= 0 && !o->detach) {
		/* the command is gone: what it wrote is in the pty */
		fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
		char buf[16384];
		ssize_t n;
		while ((n = read(master, buf, sizeof(buf))) > 0)
			if (lc_write_all(out, buf, (size_t)n) < 0)
				break;
	}
	if (!o->detach) {
		int hs = 0;
		while (waitpid(helper, &hs, 0) < 0 && errno == EINTR)
			;
		helper = -1;
		if (!got_exit) {
			/* the helper was killed: the sandbox stopped under us */
			sig = WIFSIGNALED(hs) ? WTERMSIG(hs) : SIGKILL;
			code = 128 + sig;
			fprintf(stderr, "lcrun: sandbox %s: the command was killed (sandbox stopped or removed)\n", id);
		}
	} else if (!got_exit) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "sandbox %s: the command could not be started", id);
		goto out;
	}
	res->exit_code = res->timed_out ? LC_EXIT_TIMEOUT : code;
	res->signal = sig;
	r = 0;
out:
	if (raw)
		lc_tty_restore(in, &saved);
	if (helper > 0) {
		kill(helper, SIGKILL);
		waitpid(helper, NULL, 0);
	}
	if (sigfd >= 0) {
		close(sigfd);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (master >= 0)
		close(master);
	if (cmdfd >= 0)
		close(cmdfd);
	if (ownpid >= 0)
		close(ownpid);
	for (int i = 0; i < 3; i++)
		if (x.spec && x.spec->stdio[i] >= 0 && x.spec->stdio[i] != o->stdio[i])
			close(x.spec->stdio[i]);
	if (x.sp[0] >= 0)
		close(x.sp[0]);
	if (x.sp[1] >= 0)
		close(x.sp[1]);
	if (x.pidfd >= 0)
		close(x.pidfd);
	lc_seccomp_prog_free(&x.prog);
	lc_strv_free(x.envp);
	lc_spec_free(x.spec);
	lc_strv_free(x.own.argv);
	free((char *)x.own.workdir);
	res->wall_us = (lc_now_ms() - t0) * 1000;
	return r;
}
