/* cli_fork.c — lcrun fork IMAGE --count N [run options] -- CMD…
 *
 * N sandboxes from one image, in parallel, each with its own upper.  The
 * image is unpacked once, before the first starts; each sandbox runs in a
 * child process of its own and reports its result through a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "image.h"
#include "util.h"

#define FORK_MAX 256

static const char fork_help[] =
	"usage: lcrun fork IMAGE --count N [run options] [--result FILE] -- CMD [ARG…]\n\n"
	"Start N sandboxes from IMAGE in parallel, each with its own upper layer,\n"
	"run CMD in each, and report every exit status (one line each on stderr,\n"
	"all of them as a JSON array with --result).  Exits 0 when every command\n"
	"exited 0, else with the first failing sandbox's code.  Takes the options\n"
	"of lcrun run except --image, --rootfs, --name and --id.\n";

static void child(lc_spec_t *s, const lc_run_shared_t *sh, int fd, pid_t parent)
{
	/* if lcrun fork dies, its sandboxes end too (lc_run forwards TERM) */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(0);
	lc_result_t res;
	lc_error_t *err = NULL;
	json_t *j;
	if (lc_run_with(s, sh, &res, &err) < 0) {
		j = json_pack("{s:s, s:i}", "error", err && err->msg ? err->msg : "failed", "exit_code",
			      err ? err->exit_code : LC_EXIT_RUNTIME);
		lc_error_free(err);
	} else {
		j = lc_result_to_json(&res);
	}
	char *txt = json_dumps(j, JSON_COMPACT);
	if (txt)
		lc_write_all(fd, txt, strlen(txt));
	_exit(0);
}

/* A signal lcrun fork got (INT, TERM, HUP, QUIT): to every sandbox
 * process not yet reaped, which forwards it to its sandbox as run does.
 * Not one the terminal sent (SI_KERNEL): that one reached the whole
 * process group, the sandbox processes too. */
static void forward(int sfd, const pid_t *pids, long count)
{
	struct signalfd_siginfo si;
	if (read(sfd, &si, sizeof(si)) != sizeof(si) || si.ssi_code == SI_KERNEL)
		return;
	for (long j = 0; j < count; j++)
		if (pids[j] > 0)
			kill(pids[j], (int)si.ssi_signo);
}

/* One sandbox's result; meanwhile the signals to forward, and the mount
 * namespaces its staging processes left (lc_run_shared_drop_fd) to let go. */
static json_t *read_result(int fd, int sfd, const lc_run_shared_t *sh, const pid_t *pids, long count)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		struct pollfd p[3] = { { fd, POLLIN, 0 }, { sfd, POLLIN, 0 }, { lc_run_shared_drop_fd(sh), POLLIN, 0 } };
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[2].revents & POLLIN)
			lc_run_shared_drop(sh);
		if (sfd >= 0 && (p[1].revents & POLLIN))
			forward(sfd, pids, count);
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			char *nb = realloc(buf, cap);
			if (!nb)
				abort();
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	json_t *j = buf ? json_loadb(buf, len, 0, NULL) : NULL;
	return j ? j : json_pack("{s:s, s:i}", "error", "the sandbox process ended without a result", "exit_code",
				 LC_EXIT_RUNTIME);
}

int lc_cmd_fork(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(fork_help, stdout);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-')
		return lc_cli_usage_error("usage: lcrun fork IMAGE --count N [run options] -- CMD (see lcrun fork --help)");
	const char *image = argv[1];
	long count = 0;
	/* take --count out; the rest are run options */
	_cleanup_free_ char **nargv = lc_xmalloc0((size_t)(argc + 1) * sizeof(char *));
	int nargc = 0;
	nargv[nargc++] = argv[0];
	for (int i = 2; i < argc; i++) {
		const char *v = NULL;
		if (!strcmp(argv[i], "--")) {
			while (i < argc)
				nargv[nargc++] = argv[i++];
			break;
		}
		if (!strcmp(argv[i], "--count") || !strcmp(argv[i], "-n")) {
			if (i + 1 >= argc)
				return lc_cli_usage_error("fork: --count needs a number");
			v = argv[++i];
		} else if (!strncmp(argv[i], "--count=", 8)) {
			v = argv[i] + 8;
		}
		if (v) {
			char *end;
			errno = 0;
			count = strtol(v, &end, 10);
			if (errno || *end || count < 1 || count > FORK_MAX)
				return lc_cli_usage_error("fork: --count '%s': a number from 1 to %d", v, FORK_MAX);
			continue;
		}
		nargv[nargc++] = argv[i];
	}
	if (!count)
		return lc_cli_usage_error("fork: --count N is required");
	lc_spec_t *s = lc_spec_new();
	_cleanup_free_ char *result_path = NULL;
	int idx = lc_cli_parse_run(nargc, nargv, s, &result_path, true);
	if (idx == -1000) {
		lc_spec_free(s);
		fputs(fork_help, stdout);
		return 0;
	}
	if (idx < 0) {
		lc_spec_free(s);
		return -idx;
	}
	if (s->image || s->rootfs || s->name || s->id) {
		lc_spec_free(s);
		return lc_cli_usage_error("fork: --image, --rootfs, --name and --id cannot be given (the image is "
					  "the first argument; each sandbox draws its own id)");
	}
	if (idx >= nargc) {
		lc_spec_free(s);
		return lc_cli_usage_error("fork: no command given (lcrun fork IMAGE --count N -- CMD)");
	}
	for (int i = idx; i < nargc; i++)
		lc_strv_push(&s->argv, nargv[i]);
	s->image = strdup(image);
	s->forward_signals = true;

	/* unpack once, before any sandbox wants it */
	lc_error_t *err = NULL;
	lc_image_resolved_t *img = NULL;
	if (lc_image_resolve(image, &img, &err) < 0 || lc_image_apply_config(s, img, &err) < 0) {
		lc_image_resolved_free(img);
		lc_spec_free(s);
		return lc_cli_fail(err);
	}
	lc_image_resolved_free(img);
	/* What every sandbox would prepare alike (its seccomp program, the
	 * idmap user namespace), made once here and inherited; their
	 * directories go to one trash directory, emptied after the last. */
	lc_run_shared_t *sh = NULL;
	if (lc_run_shared_new(s, &sh, &err) < 0) {
		lc_spec_free(s);
		return lc_cli_fail(err);
	}

	/* Signals go to the sandboxes, and lcrun fork stays to collect
	 * their results and start the batch's removal. */
	static const int fwd_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	sigset_t old;
	int sfd = lc_signals_to_fd(fwd_signals, sizeof(fwd_signals) / sizeof(fwd_signals[0]), &old);

	pid_t pids[FORK_MAX];
	int fds[FORK_MAX];
	/* one clock for the whole trace: the children inherit its start */
	lc_trace("fork: image resolved");
	fflush(NULL);
	pid_t self = getpid();
	for (long i = 0; i < count; i++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0) {
			lc_error_set(&err, LC_EXIT_RUNTIME, errno, "fork: cannot make a pipe");
			count = i;
			break;
		}
		pids[i] = fork();
		if (pids[i] == 0) {
			close(p[0]);
			if (sfd >= 0)
				close(sfd);
			child(s, sh, p[1], self);
		}
		close(p[1]);
		if (pids[i] < 0) {
			close(p[0]);
			lc_error_set(&err, LC_EXIT_RUNTIME, errno, "fork: cannot start sandbox %ld", i + 1);
			count = i;
			break;
		}
		fds[i] = p[0];
	}
	lc_trace("fork: all started");
	json_t *all = json_array();
	int code = 0;
	for (long i = 0; i < count; i++) {
		json_t *r = read_result(fds[i], sfd, sh, pids, count);
		close(fds[i]);
		while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
			;
		pids[i] = 0; /* reaped: its number may be another's now */
		int ec = (int)json_integer_value(json_object_get(r, "exit_code"));
		const char *e = json_string_value(json_object_get(r, "error"));
		const char *id = json_string_value(json_object_get(r, "id"));
		if (e)
			fprintf(stderr, "lcrun: fork %ld/%ld: %s\n", i + 1, count, e);
		else
			fprintf(stderr, "lcrun: fork %ld/%ld: sandbox %s exited %d\n", i + 1, count, id ? id : "?", ec);
		if (ec && !code)
			code = ec;
		json_object_set_new(r, "index", json_integer(i + 1));
		json_array_append_new(all, r);
	}
	lc_trace("fork: all results in");
	if (result_path && json_dump_file(all, result_path, JSON_INDENT(2)) < 0)
		fprintf(stderr, "lcrun: cannot write --result %s\n", result_path);
	json_decref(all);
	lc_run_shared_free(sh);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	lc_spec_free(s);
	if (err)
		return lc_cli_fail(err);
	return code;
}
