/* oci_exec.c — lcrun-oci exec [OPTIONS] ID [CMD ARGS…] | --process FILE ID */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json.h"
#include "oci.h"
#include "util.h"

static const struct option opts[] = {
	{ "process", required_argument, NULL, 'p' },
	{ "console-socket", required_argument, NULL, 'C' },
	{ "cwd", required_argument, NULL, 'w' },
	{ "env", required_argument, NULL, 'e' },
	{ "tty", no_argument, NULL, 't' },
	{ "user", required_argument, NULL, 'u' },
	{ "additional-gids", required_argument, NULL, 'g' },
	{ "detach", no_argument, NULL, 'd' },
	{ "pid-file", required_argument, NULL, 'P' },
	{ "no-new-privs", no_argument, NULL, 'n' },
	{ "cap", required_argument, NULL, 'c' },
	{ "preserve-fds", required_argument, NULL, 'f' },
	{ "ignore-paused", no_argument, NULL, 'i' },
	{ "process-label", required_argument, NULL, 'L' },
	{ "apparmor", required_argument, NULL, 'A' },
	{ "cgroup", required_argument, NULL, 'G' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int parse_id(const char *s, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > 0xfffffffeUL)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int oci_cmd_exec(int argc, char **argv)
{
	const char *process = NULL, *console = NULL, *cwd = NULL, *user = NULL, *pid_file = NULL;
	_cleanup_strv_ char **env = NULL, **caps = NULL, **gids = NULL;
	bool tty = false, detach = false, nnp = false, ignore_paused = false;
	int preserve = 0, c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+p:e:tu:g:dc:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': process = optarg; break;
		case 'C': console = optarg; break;
		case 'w': cwd = optarg; break;
		case 'e':
			if (!strchr(optarg, '='))
				return oci_failf("exec: --env '%s': expected KEY=VALUE", optarg);
			lc_strv_push(&env, optarg);
			break;
		case 't': tty = true; break;
		case 'u': user = optarg; break;
		case 'g': lc_strv_push(&gids, optarg); break;
		case 'd': detach = true; break;
		case 'P': pid_file = optarg; break;
		case 'n': nnp = true; break;
		case 'c': lc_strv_push(&caps, optarg); break;
		case 'f': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 0 || v > 1000)
				return oci_failf("exec: --preserve-fds '%s': expected a number", optarg);
			preserve = (int)v;
			break;
		}
		case 'i': ignore_paused = true; break;
		case 'L': return oci_failf("exec: --process-label is not supported by lcrun-oci (no SELinux)");
		case 'A': return oci_failf("exec: --apparmor is not supported by lcrun-oci (no AppArmor)");
		case 'G': return oci_failf("exec: --cgroup is not supported by lcrun-oci (the container's cgroup is used)");
		case 'h':
			printf("usage: lcrun-oci exec [--process FILE | OPTIONS] ID [CMD ARGS...]\n");
			return 0;
		default:
			return oci_failf("exec: unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return oci_failf("exec: no container id given");
	const char *id = argv[optind++];
	lc_error_t *err = NULL;
	oci_container_t ct;
	if (oci_load(id, &ct, &err) < 0)
		return oci_fail(err);
	int r = OCI_EXIT_FAIL;
	lc_ctr_process_t p;
	memset(&p, 0, sizeof(p));
	p.umask = -1;
	json_t *lc = json_object_get(ct.state, "lcrun");
	if (!strcmp(ct.status, "stopped") || !strcmp(ct.status, "creating")) {
		lc_error_set(&err, LC_EXIT_STATE, 0, "cannot exec in a %s container", ct.status);
		goto out;
	}
	if (!strcmp(ct.status, "paused") && !ignore_paused) {
		lc_error_set(&err, LC_EXIT_STATE, 0, "cannot exec in a paused container (use --ignore-paused)");
		goto out;
	}
	if (process) {
		json_error_t je;
		_cleanup_json_ json_t *pj = json_load_file(process, 0, &je);
		if (!pj) {
			lc_error_set(&err, LC_EXIT_INVALID, 0, "--process %s: %s", process, je.text);
			goto out;
		}
		if (oci_process_parse(pj, &p, "process", &err) < 0)
			goto out;
	} else {
		/* The container's own process is the default, as runc's. */
		json_t *base = json_object_get(lc, "process");
		if (base && oci_process_parse(base, &p, "process", &err) < 0)
			goto out;
		lc_strv_free(p.args);
		p.args = NULL;
		p.terminal = tty;
		p.oom_set = false;
		for (int i = optind; i < argc; i++)
			lc_strv_push(&p.args, argv[i]);
		for (size_t i = 0; env && env[i]; i++)
			lc_strv_push(&p.env, env[i]);
		if (cwd) {
			free(p.cwd);
			p.cwd = strdup(cwd);
		}
		if (user) {
			unsigned u, g;
			_cleanup_free_ char *us = strdup(user);
			char *colon = strchr(us, ':');
			if (colon)
				*colon = '\0';
			if (parse_id(us, &u) < 0 || (colon && parse_id(colon + 1, &g) < 0)) {
				lc_error_set(&err, LC_EXIT_USAGE, 0, "exec: --user '%s': expected UID[:GID] (numbers)", user);
				goto out;
			}
			p.uid = u;
			p.gid = colon ? g : 0;
		}
		for (size_t i = 0; gids && gids[i]; i++) {
			unsigned g;
			if (parse_id(gids[i], &g) < 0) {
				lc_error_set(&err, LC_EXIT_USAGE, 0, "exec: --additional-gids '%s': expected a number", gids[i]);
				goto out;
			}
			p.gids = realloc(p.gids, (p.n_gids + 1) * sizeof(gid_t));
			p.gids[p.n_gids++] = g;
		}
		for (size_t i = 0; caps && caps[i]; i++) {
			int cv = lc_cap_from_name(caps[i]);
			if (cv < 0 || cv > 63) {
				lc_error_set(&err, LC_EXIT_USAGE, 0, "exec: --cap '%s': unknown capability", caps[i]);
				goto out;
			}
			for (int k = 0; k < LC_CAP_SETS; k++)
				if (k != LC_CAP_AMBIENT)
					p.caps[k] |= 1ULL << cv;
		}
		if (nnp)
			p.no_new_privs = true;
	}
	if (!p.args || !p.args[0]) {
		lc_error_set(&err, LC_EXIT_USAGE, 0, "exec: no command given");
		goto out;
	}
	int peer = -1;
	lc_ctr_exec_opts_t o = { .cgroup = ct.cgroup, .console_fd = -1, .preserve_fds = preserve, .detach = true,
				 .seccomp = lc_json_str(lc, "seccomp") };
	if (p.terminal) {
		if (console) {
			o.console_fd = oci_console_connect(console, &err);
			if (o.console_fd < 0)
				goto out;
		} else if (!detach) {
			int sp[2];
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
				lc_error_set(&err, LC_EXIT_RUNTIME, errno, "cannot make a socket pair");
				goto out;
			}
			o.console_fd = sp[1];
			peer = sp[0];
		} else {
			lc_error_set(&err, LC_EXIT_USAGE, 0, "exec: a terminal with --detach needs --console-socket");
			goto out;
		}
	}
	pid_t pid;
	int rr = lc_ctr_exec(ct.pid, &p, &o, &pid, NULL, &err);
	if (o.console_fd >= 0)
		close(o.console_fd);
	if (rr < 0) {
		if (peer >= 0)
			close(peer);
		goto out;
	}
	if (pid_file && oci_write_pid_file(pid_file, pid, &err) < 0)
		goto out;
	if (detach) {
		r = 0;
		goto out;
	}
	r = peer >= 0 ? oci_tty_relay(peer, pid) : oci_wait_forward(pid);
	err = NULL;
out:
	lc_ctr_process_clear(&p);
	oci_container_clear(&ct);
	return err ? oci_fail(err) : r;
}
