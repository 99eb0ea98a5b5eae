/* net-harness — drives liblcrun's network code around a network namespace
 * it creates itself, for tests that run before (or beside) the full
 * sandbox lifecycle.  Not installed.
 *
 *   net-harness run [--id ID] [--net MODE] [--allow R]... [--net-policy P]
 *                   [--add-host N:IP]... [--dns IP] -- CMD [ARG...]
 *       CMD runs as host root in a new network namespace with lo up, after
 *       lc_net_setup(); lc_net_teardown() follows when it exits.
 *   net-harness teardown ID
 *   net-harness gc [LIVE_ID...]      prints how many sandboxes it cleaned
 *   net-harness describe ID
 *   net-harness validate [flags as for run]
 * run also takes --no-ipv6-inside (IPv6 disabled in the namespace, which
 * makes setup fail half-way: the rollback test).
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"
#include "util.h"

static int fail(lc_error_t *err)
{
	lc_error_print(err, "net-harness");
	int code = err ? err->exit_code : 1;
	lc_error_free(err);
	return code;
}

/* --no-ipv6-inside: the namespace has IPv6 disabled, so setup fails after
 * the veth exists (to test the rollback). */
static bool no_ipv6_inside;

static int parse_flags(int argc, char **argv, int *i, char *id, lc_net_spec_t *spec, lc_error_t **err)
{
	const char *policy = NULL;
	for (; *i < argc; (*i)++) {
		const char *a = argv[*i];
		const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
		if (!strcmp(a, "--")) {
			(*i)++;
			break;
		}
		if (!strcmp(a, "--no-ipv6-inside")) {
			no_ipv6_inside = true;
			continue;
		}
		if (!v)
			return lc_error_set(err, LC_EXIT_USAGE, 0, "%s needs a value", a);
		(*i)++;
		if (!strcmp(a, "--id")) {
			snprintf(id, LC_ID_LEN + 1, "%s", v);
		} else if (!strcmp(a, "--net")) {
			if (lc_net_parse_mode(v, &spec->mode, err) < 0)
				return -1;
		} else if (!strcmp(a, "--allow")) {
			if (lc_net_spec_add_allow(spec, v, err) < 0)
				return -1;
		} else if (!strcmp(a, "--add-host")) {
			if (lc_net_spec_add_host(spec, v, err) < 0)
				return -1;
		} else if (!strcmp(a, "--dns")) {
			free(spec->dns);
			spec->dns = strdup(v);
		} else if (!strcmp(a, "--net-policy")) {
			policy = v;
		} else {
			return lc_error_set(err, LC_EXIT_USAGE, 0, "unknown option %s", a);
		}
	}
	if (policy && lc_net_policy_load(policy, spec, err) < 0)
		return -1;
	return lc_net_validate(spec, err);
}

static void lo_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	if (s >= 0)
		close(s);
}

/* TERM/INT/HUP go to the command, as lcrun forwards them, so that the
 * harness itself lives on to tear the network down. */
static pid_t child_pid;

static void forward_signal(int sig)
{
	if (child_pid > 0)
		kill(child_pid, sig);
}

static int cmd_run(int argc, char **argv)
{
	lc_error_t *err = NULL;
	lc_net_spec_t spec;
	memset(&spec, 0, sizeof(spec));
	char id[LC_ID_LEN + 1];
	lc_random_hex(id, LC_ID_LEN);
	int i = 2;
	if (parse_flags(argc, argv, &i, id, &spec, &err) < 0)
		return fail(err);
	if (i >= argc) {
		lc_error_set(&err, LC_EXIT_USAGE, 0, "run needs -- CMD");
		return fail(err);
	}
	int ready[2], go[2];
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)
		return 125;
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		close(go[1]);
		if (unshare(CLONE_NEWNET) < 0)
			_exit(125);
		lo_up();
		if (no_ipv6_inside) {
			int fd = open("/proc/sys/net/ipv6/conf/default/disable_ipv6", O_WRONLY);
			if (fd < 0 || write(fd, "1", 1) != 1)
				_exit(125);
			close(fd);
		}
		char c = 1;
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(125);
		setenv("LCNET_ID", id, 1);
		execvp(argv[i], argv + i);
		_exit(127);
	}
	child_pid = pid;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	close(ready[1]);
	close(go[0]);
	char c;
	if (read(ready[0], &c, 1) != 1) {
		waitpid(pid, NULL, 0);
		return 125;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || lc_net_setup(id, &spec, fd, &err) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		lc_net_spec_clear(&spec);
		return fail(err);
	}
	close(fd);
	if (write(go[1], &c, 1) != 1)
		return 125;
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (lc_net_teardown_exited(id, &err) < 0)
		rc = fail(err);
	lc_net_spec_clear(&spec);
	return rc;
}

static bool listed_live(const char *id, void *ud)
{
	for (char **p = ud; *p; p++)
		if (!strcmp(*p, id))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	lc_error_t *err = NULL;
	const char *verb = argc > 1 ? argv[1] : "";
	if (!strcmp(verb, "run"))
		return cmd_run(argc, argv);
	if (!strcmp(verb, "teardown") && argc == 3)
		return lc_net_teardown(argv[2], &err) < 0 ? fail(err) : 0;
	if (!strcmp(verb, "gc")) {
		int n = lc_net_gc(listed_live, argv + 2, &err);
		if (n < 0)
			return fail(err);
		printf("%d\n", n);
		return 0;
	}
	if (!strcmp(verb, "describe") && argc == 3) {
		json_t *d = lc_net_describe(argv[2]);
		if (!d)
			return 1;
		json_dumpf(d, stdout, JSON_SORT_KEYS);
		putchar('\n');
		json_decref(d);
		return 0;
	}
	if (!strcmp(verb, "validate")) {
		lc_net_spec_t spec;
		memset(&spec, 0, sizeof(spec));
		char id[LC_ID_LEN + 1];
		int i = 2;
		int r = parse_flags(argc, argv, &i, id, &spec, &err);
		lc_net_spec_clear(&spec);
		return r < 0 ? fail(err) : 0;
	}
	fprintf(stderr, "usage: net-harness run|teardown|gc|describe|validate ...\n");
	return LC_EXIT_USAGE;
}
