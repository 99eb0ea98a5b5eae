/* oci_create.c — lcrun-oci create [--bundle DIR] [--pid-file F] [--console-socket S]
 * [--preserve-fds N] [--no-pivot] [--no-new-keyring] ID */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "oci.h"
#include "state.h"
#include "util.h"

static char *rfc3339_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char b[40];
	strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &tm);
	return lc_strdup_printf("%s.%09ldZ", b, ts.tv_nsec);
}

int oci_do_create(const char *id, const char *bundle, const char *pid_file, const char *console_socket,
		  int preserve_fds, bool no_pivot, bool no_new_keyring, int *console_peer, pid_t *pid)
{
	lc_error_t *err = NULL;
	if (!oci_id_valid(id))
		return oci_failf("invalid container id '%s' (letters, digits, '_', '-', '.', '+')", id);
	lc_ctr_spec_t *s = oci_config_load(bundle, id, &err);
	if (!s)
		return oci_fail(err);
	int r = OCI_EXIT_FAIL;
	bool dir_made = false;
	_cleanup_free_ char *dir = oci_dir(id);
	_cleanup_json_ json_t *raw = NULL, *st = NULL;
	_cleanup_free_ char *cfg = NULL, *created = NULL;
	json_t *lc, *v;
	if (lc_mkdir_p(oci_g.root, 0700, &err) < 0)
		goto out;
	if (mkdir(dir, 0700) < 0) {
		if (errno == EEXIST)
			lc_error_set(&err, LC_EXIT_BUSY, 0, "container \"%s\" already exists", id);
		else
			lc_error_set(&err, LC_EXIT_RUNTIME, errno, "cannot create %s", dir);
		goto out;
	}
	dir_made = true;
	s->fifo = lc_strdup_printf("%s/exec.fifo", dir);
	s->preserve_fds = preserve_fds;
	s->no_pivot = no_pivot;
	s->no_new_keyring = no_new_keyring;
	if (s->proc.terminal) {
		if (console_socket) {
			s->console_fd = oci_console_connect(console_socket, &err);
			if (s->console_fd < 0)
				goto out;
		} else if (console_peer) {
			int sp[2];
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
				lc_error_set(&err, LC_EXIT_RUNTIME, errno, "cannot make a socket pair");
				goto out;
			}
			s->console_fd = sp[1];
			*console_peer = sp[0];
		} else {
			lc_error_set(&err, LC_EXIT_USAGE, 0, "process.terminal is true: --console-socket is required");
			goto out;
		}
	} else if (console_socket) {
		lc_error_set(&err, LC_EXIT_USAGE, 0, "--console-socket given but process.terminal is false");
		goto out;
	}
	cfg = lc_strdup_printf("%s/config.json", s->bundle);
	raw = json_load_file(cfg, 0, NULL);
	created = rfc3339_now();
	st = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s}", "ociVersion", "1.1.0", "id", id,
					      "status", "creating", "pid", 0, "bundle", s->bundle, "rootfs", s->rootfs,
					      "created", created, "owner", "");
	json_object_set(st, "annotations", s->annotations ? s->annotations : json_object());
	if (!s->annotations)
		json_decref(json_object_get(st, "annotations"));
	lc = json_object();
	json_object_set_new(st, "lcrun", lc);
	json_object_set_new(lc, "cgroup", json_string(s->cgroup));
	if ((v = json_object_get(raw, "hooks")))
		json_object_set(lc, "hooks", v);
	if ((v = json_object_get(raw, "process")))
		json_object_set(lc, "process", v);
	if (s->seccomp)
		json_object_set_new(lc, "seccomp", json_string(s->seccomp));
	bool own_mnt = false;
	for (size_t i = 0; i < s->n_ns; i++)
		own_mnt |= s->ns[i].type == CLONE_NEWNS;
	/* Its root is then a mount in the host's table: delete detaches it
	 * (the mount create attached, or while creating, what is not base). */
	uint64_t base = own_mnt ? 0 : lc_ctr_mount_id(s->rootfs);
	if (!own_mnt)
		json_object_set_new(lc, "hostRootBase", json_integer((json_int_t)base));
	if (oci_state_save(id, st, &err) < 0)
		goto out;
	if (lc_ctr_create(s, pid, &err) < 0)
		goto out;
	json_object_set_new(st, "status", json_string("created"));
	json_object_set_new(st, "pid", json_integer(*pid));
	json_object_set_new(lc, "starttime", json_integer((json_int_t)lc_proc_starttime(*pid)));
	if (!own_mnt)
		json_object_set_new(lc, "hostRootMount", json_integer((json_int_t)lc_ctr_mount_id(s->rootfs)));
	if (oci_state_save(id, st, &err) < 0 || (pid_file && oci_write_pid_file(pid_file, *pid, &err) < 0)) {
		kill(*pid, SIGKILL);
		lc_cgroup_destroy(s->cgroup, NULL);
		lc_ctr_detach_root(s->rootfs, base, 0, NULL);
		goto out;
	}
	oci_debug("created %s: pid %d", id, *pid);
	r = 0;
out:
	if (r && dir_made)
		lc_rm_rf(dir, NULL);
	lc_ctr_spec_free(s);
	return r ? oci_fail(err) : 0;
}

static const struct option opts[] = {
	{ "bundle", required_argument, NULL, 'b' },
	{ "pid-file", required_argument, NULL, 'p' },
	{ "console-socket", required_argument, NULL, 'c' },
	{ "preserve-fds", required_argument, NULL, 'f' },
	{ "no-pivot", no_argument, NULL, 'P' },
	{ "no-new-keyring", no_argument, NULL, 'k' },
	{ "detach", no_argument, NULL, 'd' },
	{ "keep", no_argument, NULL, 'K' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* create and run share their options; run adds --detach/--keep. */
typedef struct create_opts {
	const char *bundle, *pid_file, *console, *id;
	int preserve;
	bool no_pivot, no_keyring, detach, keep;
} create_opts_t;

static int parse(int argc, char **argv, bool run, create_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->bundle = ".";
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+b:dh", opts, NULL)) != -1) {
		switch (c) {
		case 'b': o->bundle = optarg; break;
		case 'p': o->pid_file = optarg; break;
		case 'c': o->console = optarg; break;
		case 'f': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 0 || v > 1000)
				return -oci_failf("--preserve-fds '%s': expected a number", optarg);
			o->preserve = (int)v;
			break;
		}
		case 'P': o->no_pivot = true; break;
		case 'k': o->no_keyring = true; break;
		case 'd':
			if (!run)
				goto bad;
			o->detach = true;
			break;
		case 'K':
			if (!run)
				goto bad;
			o->keep = true;
			break;
		case 'h':
			printf("usage: lcrun-oci %s [--bundle DIR] [--pid-file FILE] [--console-socket PATH] "
			       "[--preserve-fds N] [--no-pivot] [--no-new-keyring]%s ID\n", run ? "run" : "create",
			       run ? " [--detach] [--keep]" : "");
			return 1;
		default:
		bad:
			return -oci_failf("%s: unknown option '%s'", run ? "run" : "create", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return -oci_failf("%s: expected exactly one container id", run ? "run" : "create");
	o->id = argv[optind];
	return 0;
}

int oci_cmd_create(int argc, char **argv)
{
	create_opts_t o;
	int r = parse(argc, argv, false, &o);
	if (r)
		return r < 0 ? -r : 0;
	pid_t pid;
	return oci_do_create(o.id, o.bundle, o.pid_file, o.console, o.preserve, o.no_pivot, o.no_keyring, NULL, &pid);
}

int oci_cmd_run(int argc, char **argv)
{
	create_opts_t o;
	int r = parse(argc, argv, true, &o);
	if (r)
		return r < 0 ? -r : 0;
	pid_t pid;
	int peer = -1;
	r = oci_do_create(o.id, o.bundle, o.pid_file, o.console, o.preserve, o.no_pivot, o.no_keyring,
			  o.detach ? NULL : &peer, &pid);
	if (r)
		return r;
	lc_error_t *err = NULL;
	oci_container_t c;
	if (oci_load(o.id, &c, &err) < 0)
		return oci_fail(err);
	if (oci_start_loaded(&c, &err) < 0) {
		oci_destroy(&c, NULL);
		oci_container_clear(&c);
		return oci_fail(err);
	}
	if (o.detach) {
		oci_container_clear(&c);
		return 0;
	}
	int status = peer >= 0 ? oci_tty_relay(peer, pid) : oci_wait_forward(pid);
	if (!o.keep) {
		oci_container_clear(&c);
		if (oci_load(o.id, &c, &err) == 0)
			oci_destroy(&c, NULL);
		else
			lc_error_free(err);
	}
	oci_container_clear(&c);
	return status;
}
