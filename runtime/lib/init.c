/* init.c — pid 1 inside the sandbox.
 *
 * It forks the command, reaps every process that ends up as its child
 * (zombies of daemons included), forwards SIGINT/TERM/HUP/QUIT/USR1/USR2/
 * WINCH to the command, and exits with the command's status (128+N for a
 * signal).  It is non-dumpable, so the command cannot ptrace it or read its
 * memory even as root in the sandbox. */
#include <alloca.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "caps.h"
#include "init.h"
#include "seccomp.h"
#include "sync.h"
#include "util.h"

extern char **environ;

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };

static void __attribute__((noreturn, format(printf, 2, 0))) die_child(int code, const char *fmt, const char *arg, int errnum)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "lcrun: ");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, fmt, arg);
#pragma GCC diagnostic pop
	if (errnum)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, ": %s", strerror(errnum));
	snprintf(buf + n, sizeof(buf) - (size_t)n, "\n");
	if (write(2, buf, strlen(buf)) < 0) {
		/* nothing more to do */
	}
	_exit(code);
}

static bool env_has(char **envp, const char *key)
{
	size_t k = strlen(key);
	for (size_t i = 0; envp && envp[i]; i++)
		if (!strncmp(envp[i], key, k) && envp[i][k] == '=')
			return true;
	return false;
}

/* The entry of uid in the sandbox's own /etc/passwd: its name and home, in
 * static buffers (this runs in a child forked from a possibly threaded
 * process: no malloc, no NSS).  False when there is none. */
static bool passwd_lookup(uid_t uid, const char **name, const char **home)
{
	static char buf[1 << 18];
	int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	ssize_t n = lc_read_all(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (char *line = buf; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		/* name:password:uid:gid:gecos:home:shell */
		char *f[7];
		int nf = 0;
		for (char *p = line; nf < 7; nf++) {
			f[nf] = p;
			char *colon = strchr(p, ':');
			if (!colon) {
				nf++;
				break;
			}
			*colon = '\0';
			p = colon + 1;
		}
		char *end;
		if (nf >= 6 && *f[0] && *f[2]) {
			unsigned long u = strtoul(f[2], &end, 10);
			if (!*end && u == uid && f[5][0] == '/') {
				*name = f[0];
				*home = f[5];
				return true;
			}
		}
		line = next;
	}
	return false;
}

void lc_exec_command(const lc_spec_t *spec, char *const *argv, const lc_seccomp_prog_t *prog, char **envp,
		     const char *workdir)
{
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);

	for (int i = 0; i < 3; i++)
		if (spec->stdio[i] >= 0 && spec->stdio[i] != i && dup2(spec->stdio[i], i) < 0)
			die_child(LC_EXIT_RUNTIME, "cannot set up stdio%s", "", errno);
	syscall(SYS_close_range, 3U, ~0U, 0U);
	/* A session of its own when not attached to a terminal, so that the
	 * command cannot reach the caller's controlling terminal. */
	if (!isatty(0))
		setsid();

	for (size_t i = 0; i < spec->n_rlimits; i++) {
		struct rlimit rl = { spec->rlimits[i].soft, spec->rlimits[i].hard };
		if (setrlimit(spec->rlimits[i].resource, &rl) < 0)
			die_child(LC_EXIT_RUNTIME, "cannot set rlimit %s", "--ulimit", errno);
	}
	lc_error_t *err = NULL;
	if (lc_caps_drop_bounding(spec->caps, &err) < 0)
		die_child(LC_EXIT_RUNTIME, "%s", err->msg, 0);
	/* Without no_new_privs the kernel takes a seccomp filter only from a
	 * task with CAP_SYS_ADMIN in its user namespace: install it now, while
	 * still the sandbox's root with every capability (the profile allows
	 * what follows: setgroups, setres[ug]id, capset, chdir, execve). */
	if (spec->new_privs && prog && lc_seccomp_install(prog, &err) < 0)
		die_child(LC_EXIT_RUNTIME, "%s", err->msg, 0);
	gid_t gid = spec->gid;
	/* A rootless sandbox has setgroups denied: its one group is all it has. */
	if (setgroups(1, &gid) < 0 && setgroups(0, NULL) < 0 && errno != EPERM)
		die_child(LC_EXIT_RUNTIME, "cannot set supplementary groups%s", "", errno);
	if (setresgid(spec->gid, spec->gid, spec->gid) < 0)
		die_child(LC_EXIT_RUNTIME, "cannot switch to the sandbox group%s", "", errno);
	if (setresuid(spec->uid, spec->uid, spec->uid) < 0)
		die_child(LC_EXIT_RUNTIME, "cannot switch to the sandbox user%s", "", errno);
	if (lc_caps_apply(spec->caps, spec->uid == 0, &err) < 0)
		die_child(LC_EXIT_RUNTIME, "%s", err->msg, 0);
	/* The credential changes above made the memory, shared with pid 1
	 * until the exec (spawn_command), dumpable again per fs.suid_dumpable;
	 * the exec gives the command memory of its own with its own flag. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (chdir(workdir) < 0)
		die_child(LC_EXIT_NOENT, "workdir %s in the sandbox", workdir, errno);
	if (!spec->new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die_child(LC_EXIT_RUNTIME, "cannot set no_new_privs%s", "", errno);
	/* HOME, USER and LOGNAME the caller did not set come from the
	 * sandbox's own /etc/passwd for the uid (else HOME is /root for root
	 * and /home/user for anyone else, as before). */
	size_t nenv = 0;
	while (envp && envp[nenv])
		nenv++;
	char **full = alloca((nenv + 4) * sizeof(*full));
	memcpy(full, envp, nenv * sizeof(*full));
	static char home_kv[4096 + 8], user_kv[512], logname_kv[512];
	const char *pw_name = NULL, *pw_home = NULL;
	bool found = passwd_lookup(spec->uid, &pw_name, &pw_home);
	if (!env_has(envp, "HOME")) {
		snprintf(home_kv, sizeof(home_kv), "HOME=%s", found ? pw_home : spec->uid == 0 ? "/root" : "/home/user");
		full[nenv++] = home_kv;
	}
	if (found && !env_has(envp, "USER")) {
		snprintf(user_kv, sizeof(user_kv), "USER=%s", pw_name);
		full[nenv++] = user_kv;
	}
	if (found && !env_has(envp, "LOGNAME")) {
		snprintf(logname_kv, sizeof(logname_kv), "LOGNAME=%s", pw_name);
		full[nenv++] = logname_kv;
	}
	full[nenv] = NULL;
	environ = full;
	if (!spec->new_privs && prog && lc_seccomp_install(prog, &err) < 0)
		die_child(LC_EXIT_RUNTIME, "%s", err->msg, 0);
	lc_trace("command: exec");
	execvp(argv[0], argv);
	int e = errno;
	if (e == ENOENT || e == ENOTDIR)
		die_child(LC_EXIT_NOT_FOUND, "%s: command not found", argv[0], 0);
	die_child(LC_EXIT_CANNOT_EXEC, "cannot execute %s", argv[0], e);
}

struct command_args {
	const lc_spec_t *spec;
	const lc_seccomp_prog_t *prog;
	char **envp;
	const char *workdir;
};

static int command_main(void *arg)
{
	const struct command_args *a = arg;
	lc_exec_command(a->spec, a->spec->argv, a->prog, a->envp, a->workdir);
	return LC_EXIT_RUNTIME; /* not reached: it execs or _exits */
}

/* The command, started the way posix_spawn does: in pid 1's memory
 * (CLONE_VM, on a stack of its own) with pid 1 stopped until it has
 * exec'd (CLONE_VFORK).  A fork would copy pid 1's page tables and fault
 * in a copy of every page the child then writes (0.2-0.3 ms here), for a
 * process that only sets itself up and execs.  What the child changes in
 * the shared memory (environ, a static buffer) pid 1 never reads; its
 * credentials, signal dispositions, limits and filter are its own.  Its
 * setresuid makes the shared memory's dumpable flag the kernel's default
 * for a changed uid (fs.suid_dumpable): pid 1 sets itself non-dumpable
 * again once the child has exec'd. */
static pid_t spawn_command(const lc_spec_t *spec, const lc_seccomp_prog_t *prog, char **envp, const char *workdir)
{
	/* execvp's fallback for a script without #! copies argv on this
	 * stack (as glibc's posix_spawn sizes its stack for). */
	size_t argc = 0;
	while (spec->argv[argc])
		argc++;
	const size_t stack_size = (256 * 1024 + (argc + 3) * sizeof(char *) + 4095) & ~(size_t)4095;
	void *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return -1;
	struct command_args a = { spec, prog, envp, workdir };
	char **env = environ; /* the child points it at its own stack */
	pid_t pid = clone(command_main, (char *)stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	int e = errno;
	environ = env;
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	munmap(stack, stack_size);
	errno = e;
	return pid;
}

void lc_init_main(const lc_spec_t *spec, const lc_seccomp_prog_t *prog, char **envp, int sync_fd)
{
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_SET_NAME, "lcrun-init", 0, 0, 0);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&mask, forwarded[i]);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC);

	const char *workdir = spec->workdir ? spec->workdir : "/";
	pid_t cmd = -1;
	if (spec->argv && spec->argv[0]) {
		cmd = spawn_command(spec, prog, envp, workdir);
		if (cmd < 0) {
			lc_error_t *e = NULL;
			lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot start the command%s",
				     errno == EAGAIN ? ": out of processes (a pids or RLIMIT_NPROC limit, or kernel.pid_max)" : "");
			lc_msg_send_error(sync_fd, e);
			_exit(LC_EXIT_RUNTIME);
		}
	}
	/* Keep only the sync socket and stdio: three close_range calls, not
	 * a close(2) for each of a thousand numbers. */
	int lo = sync_fd < sfd ? sync_fd : sfd, hi = sync_fd < sfd ? sfd : sync_fd;
	unsigned from = 3;
	int keep[2] = { lo, hi };
	for (int i = 0; i < 2; i++) {
		if (keep[i] < 3)
			continue;
		if ((unsigned)keep[i] > from)
			syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0U);
		from = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0U);
	if (sfd < 0)
		_exit(LC_EXIT_RUNTIME);

	for (;;) {
		/* The sync socket's other end is held by the process that
		 * waits for the sandbox (lcrun run, or the monitor of a
		 * created sandbox): if that process dies, so does the sandbox,
		 * and lcrun gc finds nothing running to leave alone. */
		struct pollfd pf[2] = { { sfd, POLLIN, 0 }, { sync_fd, POLLIN, 0 } };
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(LC_EXIT_RUNTIME);
		}
		if (pf[1].revents & (POLLIN | POLLHUP | POLLERR))
			_exit(LC_EXIT_RUNTIME);
		if (!(pf[0].revents & POLLIN))
			continue;
		struct signalfd_siginfo si;
		ssize_t r = read(sfd, &si, sizeof(si));
		if (r < 0 && errno == EINTR)
			continue;
		if (r != sizeof(si))
			_exit(LC_EXIT_RUNTIME);
		if (si.ssi_signo != SIGCHLD) {
			if (cmd > 0)
				kill(cmd, (int)si.ssi_signo);
			continue;
		}
		for (;;) {
			int status;
			pid_t p = waitpid(-1, &status, WNOHANG);
			if (p <= 0)
				break;
			if (p != cmd)
				continue;
			int code, sig = 0;
			if (WIFEXITED(status)) {
				code = WEXITSTATUS(status);
			} else {
				sig = WTERMSIG(status);
				code = 128 + sig;
			}
			lc_trace("pid 1: command exited");
			lc_msg_send(sync_fd, LC_MSG_EXIT, code, sig, NULL);
			_exit(code);
		}
	}
}
