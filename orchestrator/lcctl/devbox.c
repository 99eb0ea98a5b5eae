/* devbox.c — lcctl devbox …, lcctl disk …, lcctl ssh-config: devboxes
 * through lcd's API, and the OpenSSH side of them.
 *
 *   devbox create NAME [OPTIONS] | ls | show NAME | start NAME | stop NAME | rm NAME
 *   devbox NAME ssh [SSH-OPTION…] [-- CMD…]   the real ssh, through lcd
 *   devbox NAME proxy [--known-hosts FILE]    ssh's ProxyCommand
 *   ssh-config [--prune]                      Host lcrun-NAME blocks in ~/.ssh/config
 *   disk ls | disk delete NAME
 *
 * The host key: lcd reads it from the box's disk and sends it with every
 * connection; the proxy writes it to ~/.ssh/lcrun_known_hosts (under the
 * alias lcrun-NAME) before ssh checks it, and ssh runs with
 * StrictHostKeyChecking=yes against that file: no first-use prompt, and a
 * box whose key changed is refused. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "devbox.h"
#include "util.h"

#define UPGRADE_PROTO "lcrun-ssh"

static const char help[] =
	"usage: lcctl devbox VERB …\n"
	"  create NAME [--image I] [--disk SIZE] [--cpus X] [--memory SIZE] [--keep-warm SECS]\n"
	"         [--secret NAME]… [--net open|none|POLICY] [--user NAME] [--authorized-keys FILE] [--json]\n"
	"                                     a devbox (keys: FILE, else your ~/.ssh/*.pub)\n"
	"  ls [--json] | show NAME            devboxes\n"
	"  start NAME | stop NAME             start (until sshd answers) / stop (its disk stays)\n"
	"  rm NAME                            stop and forget it (its disk stays: lcctl disk delete)\n"
	"  NAME ssh [SSH-OPTION…] [-- CMD…]   log in with ssh (starts a stopped box)\n"
	"  NAME proxy [--known-hosts FILE]    ssh's ProxyCommand: stdin/stdout to the box's sshd\n"
	"lcctl ssh-config [--prune]           Host lcrun-NAME blocks in ~/.ssh/config (--prune: drop\n"
	"                                     those of boxes that no longer exist)\n"
	"lcctl disk ls [--json] | disk delete NAME   devboxes' disks\n";

static char *home_dir(void)
{
	const char *h = getenv("HOME");
	if (h && *h)
		return strdup(h);
	struct passwd *pw = getpwuid(getuid());
	return strdup(pw && pw->pw_dir ? pw->pw_dir : "/");
}

static char *ssh_dir(bool make)
{
	_cleanup_free_ char *home = home_dir();
	char *d = lc_strdup_printf("%s/.ssh", home);
	if (make && mkdir(d, 0700) < 0 && errno != EEXIST) {
		free(d);
		return NULL;
	}
	return d;
}

static char *known_hosts_path(void)
{
	_cleanup_free_ char *d = ssh_dir(false);
	return lc_strdup_printf("%s/lcrun_known_hosts", d);
}

json_t *lcctl_caller_keys(void)
{
	json_t *keys = json_array();
	_cleanup_free_ char *d = ssh_dir(false);
	_cleanup_free_ char *pat = lc_strdup_printf("%s/*.pub", d);
	glob_t g;
	if (glob(pat, 0, NULL, &g) != 0)
		return keys;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		_cleanup_fclose_ FILE *f = fopen(g.gl_pathv[i], "re");
		char line[16384];
		while (f && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\r\n")] = '\0';
			if (*line && *line != '#')
				json_array_append_new(keys, json_string(line));
		}
	}
	globfree(&g);
	return keys;
}

/* A verb with one option (getopt_long's way, from argv[1]) and no argument:
 * *val gets the option's value ("" for a flag; NULL when not given).
 * Anything else prints "usage: lcctl USE" and returns -1. */
static int one_option(int argc, char **argv, const char *name, bool takes_value, const char **val, const char *use)
{
	const struct option opts[] = {
		{ name, takes_value ? required_argument : no_argument, NULL, 1 },
		{ NULL, 0, NULL, 0 },
	};
	*val = NULL;
	optind = 0;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 1)
			return lcctl_usage_error("usage: lcctl %s", use), -1;
		*val = optarg ? optarg : "";
	}
	if (optind != argc)
		return lcctl_usage_error("usage: lcctl %s", use), -1;
	return 0;
}

static char *box_path(const char *name, const char *rest)
{
	_cleanup_free_ char *e = lcc_escape(name);
	return lc_strdup_printf("/devboxes/%s%s", e, rest ? rest : "");
}

/* 'text' for a shell, % doubled for ssh's tokens. */
static char *ssh_quote(const char *s)
{
	size_t n = strlen(s);
	char *q = lc_xmalloc0(5 * n + 3), *o = q;
	*o++ = '\'';
	for (const char *p = s; *p; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else if (*p == '%') {
			*o++ = '%';
			*o++ = '%';
		} else {
			*o++ = *p;
		}
	}
	*o++ = '\'';
	return q;
}

static char *self_path(void)
{
	char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return strdup("lcctl");
	buf[n] = '\0';
	return strdup(buf);
}

/* The ProxyCommand that reaches box name through this lcd. */
static char *proxy_command(const char *name, const char *known)
{
	_cleanup_free_ char *self = self_path();
	_cleanup_free_ char *qs = ssh_quote(self), *qe = ssh_quote(lcc_endpoint(lcctl_client())), *qn = ssh_quote(name),
			    *qk = ssh_quote(known);
	return lc_strdup_printf("%s --socket %s devbox %s proxy --known-hosts %s", qs, qe, qn, qk);
}

/* ---- the proxy ---- */

/* Put "lcrun-NAME KEY" into the known-hosts file (atomically, under a
 * lock), replacing what it said of that alias before. */
static int pin_host_key(const char *file, const char *alias, const char *key, lc_error_t **err)
{
	_cleanup_free_ char *dir = strdup(file);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot create %s", dir);
	}
	_cleanup_free_ char *lockp = lc_strdup_printf("%s.lock", file);
	_cleanup_close_ int lock = lc_lock_file(lockp, LOCK_EX, err);
	if (lock < 0)
		return -1;
	_cleanup_free_ char *old = NULL;
	if (lc_read_file(file, &old, NULL, NULL) < 0)
		old = strdup("");
	size_t al = strlen(alias);
	_cleanup_free_ char *out = lc_strdup_printf("%s %s\n", alias, key);
	char *save = NULL;
	for (char *l = strtok_r(old, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(l, alias, al) && l[al] == ' ')
			continue;
		char *n = lc_strdup_printf("%s%s\n", out, l);
		free(out);
		out = n;
	}
	return lc_write_file_atomic(file, out, strlen(out), 0600, err);
}

static int splice_stdio(int fd)
{
	char buf[65536];
	bool in_open = true;
	for (;;) {
		struct pollfd p[2] = { { in_open ? 0 : -1, POLLIN, 0 }, { fd, POLLIN, 0 } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 0;
		}
		if (p[0].revents) {
			ssize_t n = read(0, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				in_open = false;
				shutdown(fd, SHUT_WR);
			} else if (lc_write_all(fd, buf, (size_t)n) < 0) {
				return 0;
			}
		}
		if (p[1].revents) {
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0 || lc_write_all(1, buf, (size_t)n) < 0)
				return 0;
		}
	}
}

static int v_proxy(const char *name, int argc, char **argv)
{
	const char *known = NULL;
	if (one_option(argc, argv, "known-hosts", true, &known, "devbox NAME proxy [--known-hosts FILE]") < 0)
		return LC_EXIT_USAGE;
	signal(SIGPIPE, SIG_IGN);
	_cleanup_free_ char *path = box_path(name, "/connect");
	_cleanup_free_ char *head = NULL;
	lc_error_t *err = NULL;
	int fd = -1;
	if (lcc_upgrade(lcctl_client(), path, UPGRADE_PROTO, &fd, &head, &err) < 0)
		return lcctl_fail(err);
	_cleanup_free_ char *key = lcc_header(head, "X-Lcrun-Host-Key");
	if (known && key && *key) {
		_cleanup_free_ char *alias = lc_strdup_printf("lcrun-%s", name);
		if (pin_host_key(known, alias, key, &err) < 0) {
			close(fd);
			return lcctl_fail(err);
		}
	}
	int r = splice_stdio(fd);
	close(fd);
	return r;
}

/* ---- ssh ---- */

static int v_ssh(const char *name, int argc, char **argv)
{
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *box = NULL;
	_cleanup_free_ char *p = box_path(name, NULL);
	if (lcctl_request("GET", p, NULL, &box, &err) < 0)
		return lcctl_fail(err);
	_cleanup_free_ char *dir = ssh_dir(true);
	if (!dir)
		return lcctl_fail_errno("cannot create ~/.ssh");
	_cleanup_free_ char *known = known_hosts_path();
	_cleanup_free_ char *proxy = proxy_command(name, known);
	_cleanup_free_ char *alias = lc_strdup_printf("lcrun-%s", name);
	_cleanup_free_ char *o_proxy = lc_strdup_printf("ProxyCommand=%s", proxy);
	_cleanup_free_ char *o_alias = lc_strdup_printf("HostKeyAlias=%s", alias);
	_cleanup_free_ char *o_known = lc_strdup_printf("UserKnownHostsFile=%s", known);
	_cleanup_free_ char *o_user = lc_strdup_printf("User=%s", lcctl_str(box, "user"));
	char **args = NULL;
	lc_strv_push(&args, "ssh");
	int i = 0;
	for (; i < argc && strcmp(argv[i], "--"); i++)
		lc_strv_push(&args, argv[i]); /* ssh's own options: the user's come first and win */
	const char *ours[] = { o_proxy, o_alias, o_known, "StrictHostKeyChecking=yes", "CheckHostIP=no", o_user };
	for (size_t k = 0; k < sizeof(ours) / sizeof(ours[0]); k++) {
		lc_strv_push(&args, "-o");
		lc_strv_push(&args, ours[k]);
	}
	lc_strv_push(&args, alias);
	for (i++; i < argc; i++)
		lc_strv_push(&args, argv[i]); /* the command: run by the login shell, as ssh does */
	fflush(stdout);
	execvp("ssh", args);
	lc_error_set(&err, LC_EXIT_NOT_FOUND, errno, "cannot run ssh (the OpenSSH client)");
	lc_strv_free(args);
	return lcctl_fail(err);
}

/* ---- ssh-config ---- */

#define BEGIN_MARK "# lcrun devbox "
#define END_MARK "# end lcrun devbox "

static char *block(const char *name, const char *user, const char *known)
{
	_cleanup_free_ char *proxy = proxy_command(name, known);
	return lc_strdup_printf(BEGIN_MARK "%s (written by lcctl ssh-config)\n"
				"Host lcrun-%s\n"
				"  User %s\n"
				"  HostKeyAlias lcrun-%s\n"
				"  UserKnownHostsFile \"%s\"\n"
				"  StrictHostKeyChecking yes\n"
				"  CheckHostIP no\n"
				"  ProxyCommand %s\n" END_MARK "%s\n",
				name, name, user, name, known, proxy, name);
}

static bool in_list(json_t *boxes, const char *name)
{
	size_t i;
	json_t *b;
	json_array_foreach(boxes, i, b)
		if (!strcmp(lcctl_str(b, "name"), name))
			return true;
	return false;
}

static int v_ssh_config(int argc, char **argv)
{
	const char *prune = NULL;
	if (one_option(argc, argv, "prune", false, &prune, "ssh-config [--prune]") < 0)
		return LC_EXIT_USAGE;
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (lcctl_request("GET", "/devboxes", NULL, &out, &err) < 0)
		return lcctl_fail(err);
	json_t *boxes = json_object_get(out, "devboxes");
	_cleanup_free_ char *dir = ssh_dir(true);
	if (!dir)
		return lcctl_fail_errno("cannot create ~/.ssh");
	_cleanup_free_ char *file = lc_strdup_printf("%s/config", dir);
	_cleanup_free_ char *known = known_hosts_path();
	_cleanup_free_ char *old = NULL;
	if (lc_read_file(file, &old, NULL, NULL) < 0)
		old = strdup("");
	/* The file without our blocks (but those kept when not pruning), then
	 * a block per box at the end. */
	_cleanup_free_ char *keep = strdup(""), *kept_blocks = strdup("");
	int written = 0, pruned = 0;
	const char *l = old;
	while (*l) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) + 1 : strlen(l);
		if (!strncmp(l, BEGIN_MARK, strlen(BEGIN_MARK))) {
			_cleanup_free_ char *name = strndup(l + strlen(BEGIN_MARK), strcspn(l + strlen(BEGIN_MARK), " \n"));
			_cleanup_free_ char *end = lc_strdup_printf("\n" END_MARK "%s\n", name);
			const char *e = strstr(l, end);
			size_t blen = e ? (size_t)(e - l) + strlen(end) : len;
			if (!in_list(boxes, name)) {
				if (prune)
					pruned++;
				else {
					char *n = lc_strdup_printf("%s%.*s", kept_blocks, (int)blen, l);
					free(kept_blocks);
					kept_blocks = n;
				}
			}
			l += blen;
			continue;
		}
		char *n = lc_strdup_printf("%s%.*s", keep, (int)len, l);
		free(keep);
		keep = n;
		l += len;
	}
	size_t kl = strlen(keep);
	_cleanup_free_ char *text = lc_strdup_printf("%s%s%s", keep, kl && keep[kl - 1] != '\n' ? "\n" : "", kept_blocks);
	size_t i;
	json_t *b;
	json_array_foreach(boxes, i, b) {
		_cleanup_free_ char *blk = block(lcctl_str(b, "name"), lcctl_str(b, "user"), known);
		char *n = lc_strdup_printf("%s%s", text, blk);
		free(text);
		text = n;
		written++;
	}
	struct stat st;
	mode_t mode = stat(file, &st) == 0 ? st.st_mode & 07777 : 0600;
	if (lc_write_file_atomic(file, text, strlen(text), mode, &err) < 0)
		return lcctl_fail(err);
	printf("%s: %d devbox%s (ssh lcrun-NAME)\n", file, written, written == 1 ? "" : "es");
	if (pruned)
		printf("pruned %d block%s of boxes that no longer exist\n", pruned, pruned == 1 ? "" : "s");
	return 0;
}

/* ---- the verbs ---- */

enum { O_IMAGE = 256, O_DISK, O_CPUS, O_MEMORY, O_KEEP_WARM, O_SECRET, O_NET, O_USER, O_KEYS, O_JSON };

static const struct option create_opts[] = {
	{ "image", required_argument, NULL, O_IMAGE },     { "disk", required_argument, NULL, O_DISK },
	{ "cpus", required_argument, NULL, O_CPUS },       { "memory", required_argument, NULL, O_MEMORY },
	{ "keep-warm", required_argument, NULL, O_KEEP_WARM }, { "secret", required_argument, NULL, O_SECRET },
	{ "net", required_argument, NULL, O_NET },         { "user", required_argument, NULL, O_USER },
	{ "authorized-keys", required_argument, NULL, O_KEYS }, { "json", no_argument, NULL, O_JSON },
	{ NULL, 0, NULL, 0 },
};

static int v_create(int argc, char **argv)
{
	_cleanup_json_ json_t *req = json_object();
	bool json = false;
	const char *keyfile = NULL;
	optind = 0;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", create_opts, NULL)) != -1) {
		switch (c) {
		case O_IMAGE: json_object_set_new(req, "image", json_string(optarg)); break;
		case O_DISK: json_object_set_new(req, "disk", json_string(optarg)); break;
		case O_MEMORY: json_object_set_new(req, "memory", json_string(optarg)); break;
		case O_CPUS: {
			double x;
			if (!lcctl_parse_number(optarg, &x))
				return lcctl_usage_error("--cpus: expected a number, got '%s'", optarg);
			json_object_set_new(req, "cpus", json_real(x));
			break;
		}
		case O_KEEP_WARM: {
			long long n;
			if (!lcctl_parse_int(optarg, &n))
				return lcctl_usage_error("--keep-warm: expected seconds, got '%s'", optarg);
			json_object_set_new(req, "keep_warm", json_integer(n));
			break;
		}
		case O_SECRET: {
			json_t *s = json_object_get(req, "secrets");
			if (!s)
				json_object_set_new(req, "secrets", s = json_array());
			json_array_append_new(s, json_string(optarg));
			break;
		}
		case O_NET: json_object_set_new(req, "net", json_string(optarg)); break;
		case O_USER: json_object_set_new(req, "user", json_string(optarg)); break;
		case O_KEYS: keyfile = optarg; break;
		case O_JSON: json = true; break;
		default:
			return lcctl_usage_error("devbox create: unknown option '%s' (see lcctl devbox --help)", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		return lcctl_usage_error("usage: lcctl devbox create NAME [OPTIONS] (see lcctl devbox --help)");
	json_object_set_new(req, "name", json_string(argv[optind]));
	lc_error_t *err = NULL;
	if (keyfile) {
		_cleanup_free_ char *text = NULL;
		if (lc_read_file(keyfile, &text, NULL, NULL) < 0) {
			lc_error_set(&err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno, "--authorized-keys %s", keyfile);
			return lcctl_fail(err);
		}
		json_object_set_new(req, "authorized_keys", json_string(text));
	} else {
		json_t *keys = lcctl_caller_keys();
		if (json_array_size(keys) == 0) {
			json_decref(keys);
			return lcctl_usage_error("no public key in ~/.ssh/*.pub: make one (ssh-keygen) or give --authorized-keys FILE");
		}
		json_object_set_new(req, "authorized_keys", keys);
	}
	_cleanup_json_ json_t *out = NULL;
	if (lcctl_request("POST", "/devboxes", req, &out, &err) < 0)
		return lcctl_fail(err);
	if (json)
		lcctl_print_json(out);
	else
		printf("devbox %s created (ssh: lcctl devbox %s ssh, or lcctl ssh-config and ssh lcrun-%s)\n", argv[optind],
		       argv[optind], argv[optind]);
	return 0;
}

static void fmt_size(json_t *v, char *buf, size_t len)
{
	if (!json_is_integer(v)) {
		snprintf(buf, len, "-");
		return;
	}
	double b = (double)json_integer_value(v);
	const char *u[] = { "B", "K", "M", "G", "T" };
	int i = 0;
	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f%s" : "%.0f%s", b, u[i]);
}

static int v_ls(int argc, char **argv)
{
	const char *json = NULL;
	if (one_option(argc, argv, "json", false, &json, "devbox ls [--json]") < 0)
		return LC_EXIT_USAGE;
	_cleanup_json_ json_t *out = NULL;
	json_t *list;
	int code = lcctl_get_list("/devboxes", "devboxes", json, &out, &list);
	if (code >= 0)
		return code;
	printf("%-20s %-16s %-8s %-16s %-15s %-8s %s\n", "NAME", "APP", "STATE", "IMAGE", "DISK USED/SIZE", "SESSIONS",
	       "STOPS AT");
	size_t i;
	json_t *b;
	json_array_foreach(list, i, b) {
		char used[16], size[16], du[40], stops[32];
		json_t *disk = json_object_get(b, "disk");
		fmt_size(json_object_get(disk, "fs_used"), used, sizeof(used));
		fmt_size(json_object_get(b, "disk_size"), size, sizeof(size));
		snprintf(du, sizeof(du), "%s/%s", used, size);
		lcctl_fmt_time(json_object_get(b, "stops_at"), stops, sizeof(stops));
		printf("%-20s %-16s %-8s %-16s %-15s %-8lld %s\n", lcctl_str(b, "name"), lcctl_str(b, "app"), lcctl_str(b, "state"),
		       lcctl_str(b, "image"), du, (long long)json_integer_value(json_object_get(b, "sessions")), stops);
	}
	return 0;
}

static int v_simple(const char *verb, int argc, char **argv)
{
	if (argc != 2)
		return lcctl_usage_error("usage: lcctl devbox %s NAME", verb);
	const char *name = argv[1];
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	bool show = !strcmp(verb, "show"), rm = !strcmp(verb, "rm") || !strcmp(verb, "delete");
	_cleanup_free_ char *rest = show || rm ? NULL : lc_strdup_printf("/%s", verb);
	_cleanup_free_ char *p = box_path(name, rest);
	if (lcctl_request(show ? "GET" : rm ? "DELETE" : "POST", p, NULL, &out, &err) < 0)
		return lcctl_fail(err);
	if (show)
		lcctl_print_json(out);
	else if (rm)
		printf("removed devbox %s (its disk is kept: lcctl disk delete %s)\n", name, name);
	else if (!strcmp(verb, "start"))
		printf("devbox %s is running (sandbox %s, host key %s)\n", name, lcctl_str(out, "sandbox"),
		       lcctl_str(out, "host_key_fingerprint"));
	else
		printf("stopped devbox %s\n", name);
	return 0;
}

static int v_disk(int argc, char **argv)
{
	const char *verb = argc > 1 ? argv[1] : "";
	lc_error_t *err = NULL;
	_cleanup_json_ json_t *out = NULL;
	if (!strcmp(verb, "ls") || !strcmp(verb, "list")) {
		const char *json = NULL;
		if (one_option(argc - 1, argv + 1, "json", false, &json, "disk ls [--json]") < 0)
			return LC_EXIT_USAGE;
		json_t *list;
		int code = lcctl_get_list("/disks", "disks", json, &out, &list);
		if (code >= 0)
			return code;
		printf("%-20s %-8s %-10s %-8s %-8s %-20s %s\n", "NAME", "SIZE", "ALLOCATED", "USED", "MOUNTED", "DEVBOX", "STATE");
		size_t i;
		json_t *d;
		json_array_foreach(list, i, d) {
			char size[16], alloc[16], used[16];
			fmt_size(json_object_get(d, "size"), size, sizeof(size));
			fmt_size(json_object_get(d, "allocated"), alloc, sizeof(alloc));
			fmt_size(json_object_get(d, "fs_used"), used, sizeof(used));
			printf("%-20s %-8s %-10s %-8s %-8s %-20s %s\n", lcctl_str(d, "name"), size, alloc, used,
			       json_is_true(json_object_get(d, "mounted")) ? "yes" : "no", lcctl_str(d, "devbox"), lcctl_str(d, "state"));
		}
		return 0;
	}
	if (!strcmp(verb, "delete") || !strcmp(verb, "rm")) {
		if (argc != 3)
			return lcctl_usage_error("usage: lcctl disk delete NAME");
		_cleanup_free_ char *e = lcc_escape(argv[2]);
		_cleanup_free_ char *p = lc_strdup_printf("/disks/%s", e);
		if (lcctl_request("DELETE", p, NULL, &out, &err) < 0)
			return lcctl_fail(err);
		printf("deleted disk %s\n", argv[2]);
		return 0;
	}
	return lcctl_usage_error("usage: lcctl disk ls [--json] | disk delete NAME");
}

int lcctl_devbox(int argc, char **argv)
{
	if (!strcmp(argv[0], "disk"))
		return v_disk(argc, argv);
	if (!strcmp(argv[0], "ssh-config"))
		return v_ssh_config(argc, argv);
	int h = lcctl_help(argc < 2 ? NULL : argv[1], help);
	if (h >= 0)
		return h;
	const char *verb = argv[1];
	if (!strcmp(verb, "create"))
		return v_create(argc - 1, argv + 1);
	if (!strcmp(verb, "ls") || !strcmp(verb, "list"))
		return v_ls(argc - 1, argv + 1);
	static const char *const simple[] = { "show", "start", "stop", "rm", "delete", NULL };
	for (size_t i = 0; simple[i]; i++)
		if (!strcmp(verb, simple[i]))
			return v_simple(verb, argc - 1, argv + 1);
	/* devbox NAME ssh|proxy …, and devbox ssh|proxy NAME … */
	if (argc >= 3 && (!strcmp(verb, "ssh") || !strcmp(verb, "proxy")) && strcmp(argv[2], "ssh") && strcmp(argv[2], "proxy")) {
		const char *name = argv[2];
		argv[2] = argv[1];
		argv[1] = (char *)name;
	}
	if (argc >= 3 && !strcmp(argv[2], "ssh"))
		return v_ssh(argv[1], argc - 3, argv + 3);
	if (argc >= 3 && !strcmp(argv[2], "proxy"))
		return v_proxy(argv[1], argc - 2, argv + 2);
	return lcctl_usage_error("unknown devbox verb '%s' (create, ls, show, start, stop, rm, NAME ssh, NAME proxy)", verb);
}
