/* init.c — pid 1 inside the sandbox.
 *
 * It forks the command, reaps every process that ends up as its child
 * (zombies of daemons included), forwards SIGINT/TERM/HUP/QUIT/USR1/USR2/
 * WINCH to the command, and exits with the command's status (128+N for a
 * signal).  It is non-dumpable, so the command cannot ptrace it or read its
 * memory even as root in the sandbox. */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "sandbox_priv.h"
#include "seccomp.h"
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
	if (chdir(workdir) < 0)
		die_child(LC_EXIT_NOENT, "workdir %s in the sandbox", workdir, errno);
	if (!spec->new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die_child(LC_EXIT_RUNTIME, "cannot set no_new_privs%s", "", errno);
	environ = envp;
	if (!spec->new_privs && prog && lc_seccomp_install(prog, &err) < 0)
		die_child(LC_EXIT_RUNTIME, "%s", err->msg, 0);
	execvp(argv[0], argv);
	int e = errno;
	if (e == ENOENT || e == ENOTDIR)
		die_child(LC_EXIT_NOT_FOUND, "%s: command not found", argv[0], 0);
	die_child(LC_EXIT_CANNOT_EXEC, "cannot execute %s", argv[0], e);
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
		cmd = fork();
		if (cmd < 0) {
			lc_error_t *e = NULL;
			lc_error_set(&e, LC_EXIT_RUNTIME, errno, "cannot start the command");
			lc_msg_send_error(sync_fd, e);
			_exit(LC_EXIT_RUNTIME);
		}
		if (cmd == 0)
			lc_exec_command(spec, spec->argv, prog, envp, workdir);
	}
	/* Keep only the sync socket and stdio. */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != sync_fd && fd != sfd)
			close(fd);
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
			lc_msg_send(sync_fd, LC_MSG_EXIT, code, sig, NULL);
			_exit(code);
		}
	}
}
