/* main.c — the lcd service's entry point: configuration, state directories,
 * the unix socket, systemd readiness, threads, and orderly shutdown.
 *
 *   lcd [--config FILE] [--socket PATH] [--clock-file FILE]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "apps.h"
#include "archivelib.h"
#include "devbox.h"
#include "e2b.h"
#include "fault.h"
#include "gateway.h"
#include "images.h"
#include "lcd.h"
#include "pool.h"
#include "netlibs.h"
#include "registry.h"
#include "nodes.h"
#include "runner.h"
#include "sandboxes.h"
#include "scheduler.h"
#include "seal.h"
#include "tasks.h"
#include "util.h"
#include "webhook.h"

#define DEFAULT_CONFIG "/etc/lcrun/lcd.json"
#define DEFAULT_MAX_BODY (1024 * 1024)
#define DEFAULT_CATCHUP_MAX 10
#define DEFAULT_TASK_NICE 5
#define STOP_WAIT_S 20

/* sd_notify without libsystemd: one datagram to $NOTIFY_SOCKET. */
static void notify(const char *msg)
{
	const char *p = getenv("NOTIFY_SOCKET");
	if (!p || !*p)
		return;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(p);
	if (len >= sizeof(sa.sun_path) || (p[0] != '/' && p[0] != '@'))
		return;
	memcpy(sa.sun_path, p, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
		lcd_log("cannot notify the service manager: %s", strerror(errno));
	close(fd);
}

struct config {
	char *socket;
	char *socket_group;
	char *listen;
	char *token_file;
	long long listen_idle_timeout, listen_per_ip;
	long long socket_idle_timeout, task_connections, operator_connections;
	long long max_body;
	long long catchup_max;
	int task_nice;
	char **bind_roots;
	char *webhook_listen, *webhook_tls_cert, *webhook_tls_key;
	long long webhook_max_body;
	long long fork_image_ttl, snapshot_image_ttl;
	long long max_upload, exec_memory_max;
	long long task_disk;
	char *workloads_dir, *apps_dir;
	char *database; /* an SQLite path or a PostgreSQL URL (db.h); NULL: lcd.db */
	char *secret_key_file; /* seal.h; NULL: lcd.key beside lcd.db (SQLite only) */
	char *node_name, *node_address; /* nodes.h */
	char *cluster_token_file;       /* forward.h; NULL: token_file */
	char *registry;                 /* images.h */
	long long node_slots;
	char *e2b_listen, *e2b_base_image;
	lcd_gateway_cfg_t gateway;
	json_t *sandbox_pool;
};

/* "bind_roots": absolute directories, resolved where they exist. */
static int config_roots(const char *path, json_t *v, char ***out, lc_error_t **err)
{
	if (!json_is_array(v))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: bind_roots: expected an array of absolute paths", path);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		const char *p = json_string_value(e);
		if (!p || p[0] != '/')
			return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: bind_roots[%zu]: expected an absolute path",
					    path, i);
		_cleanup_free_ char *real = realpath(p, NULL);
		_cleanup_free_ char *copy = strdup(real ? real : p);
		for (size_t n = strlen(copy); n > 1 && copy[n - 1] == '/'; n--)
			copy[n - 1] = '\0';
		lc_strv_push(out, copy);
	}
	return 0;
}

static int config_load(const char *path, bool must_exist, struct config *c, lc_error_t **err)
{
	if (access(path, F_OK) < 0 && !must_exist)
		return 0;
	json_error_t je;
	_cleanup_json_ json_t *j = json_load_file(path, 0, &je);
	if (!j)
		return lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_INVALID, 0, "config %s: %s (line %d)",
				    path, je.text, je.line);
	if (!json_is_object(j))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: expected a JSON object", path);
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v) {
		char **s = NULL;
		long long *n = NULL;
		if (!strcmp(key, "socket"))
			s = &c->socket;
		else if (!strcmp(key, "socket_group"))
			s = &c->socket_group;
		else if (!strcmp(key, "listen"))
			s = &c->listen;
		else if (!strcmp(key, "token_file"))
			s = &c->token_file;
		else if (!strcmp(key, "listen_idle_timeout"))
			n = &c->listen_idle_timeout;
		else if (!strcmp(key, "listen_per_ip"))
			n = &c->listen_per_ip;
		else if (!strcmp(key, "socket_idle_timeout"))
			n = &c->socket_idle_timeout;
		else if (!strcmp(key, "task_connections"))
			n = &c->task_connections;
		else if (!strcmp(key, "operator_connections"))
			n = &c->operator_connections;
		else if (!strcmp(key, "max_body"))
			n = &c->max_body;
		else if (!strcmp(key, "catchup_max"))
			n = &c->catchup_max;
		else if (!strcmp(key, "webhook_listen"))
			s = &c->webhook_listen;
		else if (!strcmp(key, "webhook_tls_cert"))
			s = &c->webhook_tls_cert;
		else if (!strcmp(key, "webhook_tls_key"))
			s = &c->webhook_tls_key;
		else if (!strcmp(key, "webhook_max_body"))
			n = &c->webhook_max_body;
		else if (!strcmp(key, "max_upload"))
			n = &c->max_upload;
		else if (!strcmp(key, "exec_memory_max"))
			n = &c->exec_memory_max;
		else if (!strcmp(key, "fork_image_ttl"))
			n = &c->fork_image_ttl;
		else if (!strcmp(key, "snapshot_image_ttl"))
			n = &c->snapshot_image_ttl;
		else if (!strcmp(key, "workloads_dir"))
			s = &c->workloads_dir;
		else if (!strcmp(key, "apps_dir"))
			s = &c->apps_dir;
		else if (!strcmp(key, "database"))
			s = &c->database;
		else if (!strcmp(key, "secret_key_file"))
			s = &c->secret_key_file;
		else if (!strcmp(key, "node_name"))
			s = &c->node_name;
		else if (!strcmp(key, "node_address"))
			s = &c->node_address;
		else if (!strcmp(key, "node_slots"))
			n = &c->node_slots;
		else if (!strcmp(key, "cluster_token_file"))
			s = &c->cluster_token_file;
		else if (!strcmp(key, "registry"))
			s = &c->registry;
		else if (!strcmp(key, "e2b_listen"))
			s = &c->e2b_listen;
		else if (!strcmp(key, "e2b_base_image"))
			s = &c->e2b_base_image;
		else if (!strcmp(key, "task_nice")) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 19)
				return lc_error_set(err, LC_EXIT_INVALID, 0,
						    "config %s: task_nice: expected an integer from 0 to 19", path);
			c->task_nice = (int)json_integer_value(v);
			continue;
		} else if (!strcmp(key, "task_disk")) {
			if (lcd_config_size(v, &c->task_disk) < 0)
				return lc_error_set(err, LC_EXIT_INVALID, 0,
						    "config %s: task_disk: expected a size of at least 16M (like \"8G\"), or 0 "
						    "for none", path);
			continue;
		} else if (!strcmp(key, "bind_roots")) {
			if (config_roots(path, v, &c->bind_roots, err) < 0)
				return -1;
			continue;
		} else if (!strcmp(key, "sandbox_pool")) {
			if (lcd_pool_config(v, path, &c->sandbox_pool, err) < 0)
				return -1;
			continue;
		} else if (!strcmp(key, "gateway")) {
			if (lcd_gateway_config(v, path, &c->gateway, err) < 0)
				return -1;
			continue;
		} else
			return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: %s: unknown key", path, key);
		if (s) {
			if (!json_is_string(v) || !*json_string_value(v))
				return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: %s: expected a string", path, key);
			free(*s);
			*s = strdup(json_string_value(v));
		} else {
			if (!json_is_integer(v) || json_integer_value(v) <= 0)
				return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: %s: expected a positive integer", path, key);
			*n = json_integer_value(v);
			bool secs = n == &c->listen_idle_timeout || n == &c->socket_idle_timeout;
			bool conns = n == &c->listen_per_ip || n == &c->task_connections || n == &c->operator_connections ||
				     n == &c->node_slots;
			if ((secs && *n > 86400) || (conns && *n > 65535))
				return lc_error_set(err, LC_EXIT_INVALID, 0, "config %s: %s: at most %d", path, key,
						    conns ? 65535 : 86400);
		}
	}
	return 0;
}

/* The Python client bound into tasks: installed, else the source tree's. */
static char *python_dir(void)
{
	if (access(LC_PKGDATADIR "/python/lcrun_client/__init__.py", R_OK) == 0)
		return strdup(LC_PKGDATADIR "/python");
	if (access(LC_SRCDIR "/contrib/python/lcrun_client/__init__.py", R_OK) == 0)
		return strdup(LC_SRCDIR "/contrib/python");
	return NULL;
}

/* Is this lcd the one in the build tree (run from a checkout, as the
 * tests do)?  Then the build tree's workloads and apps go into tasks, not
 * whatever an earlier `make install` left. */
static bool from_build_tree(void)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	size_t b = strlen(LC_BUILDDIR);
	return !strncmp(exe, LC_BUILDDIR, b) && exe[b] == '/';
}

/* A directory bound read-only into every task: the configured one (which
 * must exist), else the build tree's when lcd runs from it, else the
 * installed one, else none (NULL). */
static int task_dir(const char *key, const char *configured, const char *installed, const char *built, char **out,
		    lc_error_t **err)
{
	struct stat st;
	*out = NULL;
	if (configured) {
		if (configured[0] != '/')
			return lc_error_set(err, LC_EXIT_NOENT, 0, "config: %s: %s: expected an absolute path", key, configured);
		if (stat(configured, &st) < 0)
			return lc_error_set(err, LC_EXIT_NOENT, errno, "config: %s: %s", key, configured);
		if (!S_ISDIR(st.st_mode))
			return lc_error_set(err, LC_EXIT_NOENT, ENOTDIR, "config: %s: %s", key, configured);
		*out = strdup(configured);
		return 0;
	}
	const char *order[2] = { installed, built };
	if (from_build_tree()) {
		order[0] = built;
		order[1] = installed;
	}
	for (size_t i = 0; i < 2; i++)
		if (stat(order[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			*out = strdup(order[i]);
			return 0;
		}
	return 0;
}

static int open_socket(const char *path, const char *group, lc_error_t **err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "socket path %s is too long", path);
	strcpy(sa.sun_path, path);
	_cleanup_free_ char *dir = strdup(path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (lc_mkdir_p(dir, 0755, err) < 0)
			return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "socket");
	/* A live lcd answers on it; a stale socket file is removed. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return lc_error_set(err, LC_EXIT_BUSY, 0, "another lcd is already serving %s", path);
	}
	close(fd);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "socket");
	mode_t old = umask(0117);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0) {
		int e = errno;
		close(fd);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot bind %s", path);
	}
	gid_t gid = 0;
	struct group *gr = getgrnam(group ? group : "lcrun");
	if (gr)
		gid = gr->gr_gid;
	else if (group)
		lcd_log("group %s does not exist: %s stays root-only", group, path);
	if (chown(path, 0, gid) < 0 || chmod(path, 0660) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		unlink(path);
		return lc_error_set(err, LC_EXIT_RUNTIME, e, "cannot set up %s", path);
	}
	return fd;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: lcd [--config FILE] [--socket PATH] [--clock-file FILE]\n"
		   "  --config FILE      configuration (default " DEFAULT_CONFIG ", optional)\n"
		   "  --socket PATH      API socket (default $LCRUN_STATE_DIR/lcd.sock, /run/lcrun/lcd.sock)\n"
		   "  --clock-file FILE  test hook: the scheduler reads the current time from FILE\n"
		   "                     (epoch seconds or YYYY-MM-DDTHH:MM[:SS]Z); also LCD_TEST_CLOCK\n");
}

static int fail(lc_error_t *err)
{
	int code = err ? err->exit_code : LC_EXIT_RUNTIME;
	lc_error_print(err, "lcd");
	lc_error_free(err);
	return code;
}

/* A start that failed part-way: stop what had started (each stop does
 * nothing for what had not), remove the sockets, say why. */
static int start_failed(lcd_t *lcd, lcd_webhook_srv_t *hooks, lcd_api_t *api, lcd_e2b_t *e2b, const char *sock,
			lc_error_t *err)
{
	lcd_e2b_stop(e2b);
	lcd_api_stop(api);
	lcd_devboxes_stop(lcd);
	lcd_pool_stop(lcd);
	lcd_gateway_stop(lcd);
	lcd_webhook_stop(hooks);
	unlink(sock);
	return fail(err);
}

/* What a killed lcd (or its runner's children) left on the host: the
 * cgroup, network and directories of a task's sandbox, a snapshot's
 * temporary blob, a sandbox a snapshot left frozen.  liblcrun's gc, which
 * removes nothing a live sandbox uses (lcrun gc does the same). */
static void collect_leftovers(void)
{
	json_t *removed = NULL;
	lc_error_t *e = NULL;
	if (lc_gc(&removed, &e) < 0) {
		lcd_log("cannot collect what a crash left: %s", e ? e->msg : "?");
		lc_error_free(e);
		return;
	}
	size_t i;
	json_t *what;
	json_array_foreach(removed, i, what)
		lcd_log("at start: %s", json_string_value(what));
	json_decref(removed);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "clock-file", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL, *sock_opt = NULL, *clock_opt = NULL;
	int o;
	/* glibc gives each thread that allocates an arena of its own (up to
	 * eight per core), and each keeps the pages it touched: lcd's request
	 * threads made its RSS grow from 19 to 78 MB over an hour of churn
	 * with 1.8 MB of heap in use throughout; two arenas held it at 30 MB
	 * where sixteen reached 61 (docs/design/faults.md).  MALLOC_ARENA_MAX
	 * in the environment still decides. */
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, 2);
	while ((o = getopt_long(argc, argv, "c:s:k:hV", opts, NULL)) != -1) {
		switch (o) {
		case 'c': config_path = optarg; break;
		case 's': sock_opt = optarg; break;
		case 'k': clock_opt = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("lcd %s%s\n", PACKAGE_VERSION, LC_FAULT_BUILD ? " (fault-injection: a test build)" : ""); return 0;
		default: usage(stderr); return LC_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lcd: unexpected argument '%s'\n", argv[optind]);
		return LC_EXIT_USAGE;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "lcd: must run as root (it makes sandboxes and keeps secrets)\n");
		return LC_EXIT_PERM;
	}
	/* liblcrun makes sandbox directories the sandbox's own uid must
	 * reach: keep the usual umask and give lcd's private files explicit
	 * modes instead (lcd.db 0600, logs 0600 in a 0700 dir). */
	umask(022);
	signal(SIGPIPE, SIG_IGN);
	/* Every connection is an fd: lcd takes the hard limit (each caller's
	 * share of them is bounded: api.c). */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nofile);
	}

	lc_error_t *err = NULL;
	struct config cfg = { .max_body = DEFAULT_MAX_BODY, .catchup_max = DEFAULT_CATCHUP_MAX,
			      .webhook_max_body = DEFAULT_MAX_BODY, .task_nice = DEFAULT_TASK_NICE,
			      .listen_idle_timeout = LCD_TCP_IDLE_TIMEOUT_S, .listen_per_ip = LCD_TCP_PER_IP,
			      .fork_image_ttl = LCD_FORK_IMAGE_TTL_DEFAULT, .socket_idle_timeout = LCD_UNIX_IDLE_TIMEOUT_S,
			      .task_connections = LCD_TASK_CONNECTIONS, .operator_connections = LCD_OPERATOR_CONNECTIONS,
			      .max_upload = 1LL << 30, .exec_memory_max = 256LL << 20, .task_disk = LCD_TASK_DISK_DEFAULT };
	if (config_load(config_path ? config_path : DEFAULT_CONFIG, config_path != NULL, &cfg, &err) < 0)
		return fail(err);
	/* liblcrun loads libnl and libnftables when a network is first set
	 * up.  lcd forks sandboxes' monitors and tasks from many threads: a
	 * fork while another thread is inside dlopen() gives a child whose
	 * loader lock is held for ever.  Load them now, before any thread;
	 * libarchive too (images, snapshots, cp), and libcrypto, which
	 * liblcrun loads on its first hash. */
	if (lc_netlibs_load(&err) < 0 || lc_archivelib_load(&err) < 0)
		return fail(err);
	lc_crypto_load();
	if (cfg.catchup_max > 100000 || cfg.max_body > (1LL << 30) || cfg.webhook_max_body > (1LL << 30)) {
		fprintf(stderr, "lcd: config: catchup_max is at most 100000, max_body and webhook_max_body at most 1 GiB\n");
		return LC_EXIT_INVALID;
	}
	if ((cfg.webhook_tls_cert || cfg.webhook_tls_key || cfg.webhook_max_body != DEFAULT_MAX_BODY) && !cfg.webhook_listen) {
		fprintf(stderr, "lcd: config: webhook_tls_cert, webhook_tls_key and webhook_max_body need webhook_listen\n");
		return LC_EXIT_USAGE;
	}
	if (cfg.e2b_base_image && !cfg.e2b_listen) {
		fprintf(stderr, "lcd: config: e2b_base_image needs e2b_listen\n");
		return LC_EXIT_USAGE;
	}

	lcd_t lcd;
	lcd_init(&lcd);
	lcd.max_body = (size_t)cfg.max_body;
	lcd.max_upload = (unsigned long long)cfg.max_upload;
	lcd.exec_memory_max = cfg.exec_memory_max;
	lcd.fork_image_ttl = cfg.fork_image_ttl;
	if (cfg.registry) {
		/* REGISTRY/REPOSITORY, no tag: lcd tags each image by its name */
		_cleanup_free_ char *b = NULL, *r = NULL, *t = NULL;
		if (lc_registry_ref(cfg.registry, &b, &r, &t, &err) < 0 || strchr(cfg.registry + strcspn(cfg.registry, "/"), ':') ||
		    strchr(cfg.registry, '@')) {
			lc_error_free(err);
			fprintf(stderr, "lcd: config: registry: expected REGISTRY/REPOSITORY (no tag), e.g. 127.0.0.1:5000/lcrun\n");
			return LC_EXIT_INVALID;
		}
		lcd.registry = cfg.registry;
	}
	lcd.snapshot_image_ttl = cfg.snapshot_image_ttl;
	lcd.task_disk = cfg.task_disk;
	lcd.catchup_max = (int)cfg.catchup_max;
	lcd.task_nice = cfg.task_nice;
	errno = 0;
	lcd.nice = getpriority(PRIO_PROCESS, 0);
	if (lcd.nice == -1 && errno)
		lcd.nice = 0;
	lcd.bind_roots = cfg.bind_roots;
	const char *clock = clock_opt ? clock_opt : getenv("LCD_TEST_CLOCK");
	if (clock && *clock) {
		lcd.clock_file = strdup(clock);
		lcd_log("scheduler clock read from %s (test hook)", clock);
	}
	lcd.state_dir = lc_strdup_printf("%s/lcd", lc_lib_dir());
	lcd.tasks_dir = lc_strdup_printf("%s/tasks", lcd.state_dir);
	lcd.logs_dir = lc_strdup_printf("%s/logs", lcd.state_dir);
	if (cfg.database && !lcd_db_is_url(cfg.database) && cfg.database[0] != '/') {
		fprintf(stderr, "lcd: config: database: expected a postgresql:// URL or an absolute path\n");
		return LC_EXIT_INVALID;
	}
	_cleanup_free_ char *dbpath = cfg.database ? strdup(cfg.database) : lc_strdup_printf("%s/lcd.db", lc_lib_dir());
	/* lc_lib_dir() is shared with liblcrun (images, sandboxes) and held
	 * to root alone as it holds it (lc_lib_dir_hold), the state directory
	 * (the sockets' by default) too.  lcd/ and lcd/tasks/ are 0711, but
	 * nobody can list them; logs/ and lcd.db are 0700/0600. */
	int mk = lc_lib_dir_hold(&err) < 0 || lc_run_dir_hold(&err) < 0 ? -1 : 0;
	if (mk < 0 || lc_mkdir_p(lcd.tasks_dir, 0700, &err) < 0 || lc_mkdir_p(lcd.logs_dir, 0700, &err) < 0)
		return fail(err);
	if (chmod(lcd.state_dir, 0711) < 0 || chmod(lcd.tasks_dir, 0711) < 0 || chmod(lcd.logs_dir, 0700) < 0) {
		lc_error_set(&err, LC_EXIT_RUNTIME, errno, "cannot set the mode of %s", lcd.state_dir);
		return fail(err);
	}

	/* Before lcd reads a secret (the token below, lcd.db) or starts a
	 * thread: the runner's children, which make the sandboxes, carry a
	 * copy of what lcd holds now, and no more. */
	if (lcd_runner_start(&lcd, &err) < 0)
		return fail(err);

	_cleanup_free_ char *token = NULL;
	if (cfg.listen || cfg.e2b_listen) {
		if (!cfg.token_file) {
			fprintf(stderr, "lcd: %s %s needs token_file (%s) in the config\n", cfg.listen ? "listen" : "e2b_listen",
				cfg.listen ? cfg.listen : cfg.e2b_listen, cfg.listen ? "a bearer token" : "the API key");
			return LC_EXIT_USAGE;
		}
		if (lc_read_file(cfg.token_file, &token, NULL, &err) < 0)
			return fail(err);
		token[strcspn(token, "\r\n")] = '\0';
		if (strlen(token) < 16) {
			fprintf(stderr, "lcd: token in %s is too short (at least 16 characters)\n", cfg.token_file);
			return LC_EXIT_INVALID;
		}
	}
	/* The token the nodes of a cluster present to each other (and take
	 * as the operator's): its own file, else the listener's. */
	_cleanup_free_ char *cluster_token = NULL;
	if (cfg.cluster_token_file) {
		if (lc_read_file(cfg.cluster_token_file, &cluster_token, NULL, &err) < 0)
			return fail(err);
		cluster_token[strcspn(cluster_token, "\r\n")] = '\0';
		if (strlen(cluster_token) < 16) {
			fprintf(stderr, "lcd: token in %s is too short (at least 16 characters)\n", cfg.cluster_token_file);
			return LC_EXIT_INVALID;
		}
	} else if (token) {
		cluster_token = strdup(token);
	}

	/* The key secrets are sealed with.  With SQLite lcd makes one beside
	 * lcd.db the first time; nodes sharing a PostgreSQL store must be
	 * given the same one. */
	unsigned char seal_key[LCD_SEAL_KEY_LEN];
	_cleanup_free_ char *key_default = lc_strdup_printf("%s/lcd.key", lc_lib_dir());
	const char *key_path = cfg.secret_key_file ? cfg.secret_key_file : key_default;
	if (!cfg.secret_key_file && lcd_db_is_url(dbpath)) {
		fprintf(stderr, "lcd: config: database is PostgreSQL: secret_key_file is needed (the same key on every "
				"node; openssl rand -hex 32 makes one)\n");
		return LC_EXIT_USAGE;
	}
	if (!cfg.secret_key_file && access(key_path, F_OK) < 0 && errno == ENOENT) {
		if (lcd_seal_key_create(key_path, &err) < 0)
			return fail(err);
	}
	if (lcd_seal_key_read(key_path, seal_key, &err) < 0) {
		lc_error_wrap(&err, "config: secret_key_file");
		return fail(err);
	}

	/* One lcd per state directory: a second one must not "recover" the
	 * first one's running tasks.  The lock lives as long as the process. */
	_cleanup_free_ char *lockpath = lc_strdup_printf("%s/lock", lcd.state_dir);
	int lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lockfd < 0 || flock(lockfd, LOCK_EX | LOCK_NB) < 0) {
		lc_error_set(&err, errno == EWOULDBLOCK ? LC_EXIT_BUSY : LC_EXIT_RUNTIME, 0,
			     "another lcd is running on %s (%s)", lc_lib_dir(), lockpath);
		return fail(err);
	}

	_cleanup_free_ char *sock_default = lc_strdup_printf("%s/lcd.sock", lc_run_dir());
	const char *sock = sock_opt ? sock_opt : cfg.socket ? cfg.socket : sock_default;
	int fd = open_socket(sock, cfg.socket_group, &err);
	if (fd < 0)
		return fail(err);

	/* Each task reaches the API through a socket of its own (api.c), bound
	 * into its sandbox. */
	lcd_webhook_srv_t *hooks = NULL;
	lcd_api_t *api = NULL;
	lcd_e2b_t *e2b = NULL;
	lcd.python_dir = python_dir();
	if (task_dir("workloads_dir", cfg.workloads_dir, LC_PKGLIBEXECDIR, LC_BUILDDIR "/orchestrator/workloads",
		     &lcd.workloads_dir, &err) < 0 ||
	    task_dir("apps_dir", cfg.apps_dir, LC_PKGDATADIR "/apps", LC_SRCDIR "/contrib/apps", &lcd.apps_dir, &err) < 0)
		return start_failed(&lcd, hooks, api, e2b, sock, err);

	if (lcd_db_open(dbpath, &lcd.db, &err) < 0)
		return start_failed(&lcd, hooks, api, e2b, sock, err);
	lcd_db_set_seal_key(lcd.db, seal_key);
	explicit_bzero(seal_key, sizeof(seal_key));
	int sealed = lcd_store_secrets_seal(lcd.db, &err);
	if (sealed < 0) {
		lc_error_wrap(&err, "secret key %s", key_path);
		return start_failed(&lcd, hooks, api, e2b, sock, err);
	}
	if (sealed > 0)
		lcd_log("%d secret(s) stored before secrets were sealed are sealed now", sealed);
	/* Before recovery: what this node recovers is what names it. */
	lcd_node_cfg_t ncfg = { cfg.node_name, cfg.node_address ? cfg.node_address : cfg.listen, (int)cfg.node_slots };
	if (lcd_node_start(&lcd, &ncfg, &err) < 0)
		return start_failed(&lcd, hooks, api, e2b, sock, err);
	lcd_node_set_token(&lcd, cluster_token);
	if (lcd_apps_load(&lcd, &err) < 0 || lcd_recover(&lcd, &err) < 0 || lcd_sandboxes_recover(&lcd, &err) < 0)
		return start_failed(&lcd, hooks, api, e2b, sock, err);
	lcd_images_recover(&lcd);
	collect_leftovers();

	/* Every thread started below inherits this mask; main waits for them. */
	sigset_t sigs;
	lcd_stop_signals(&sigs);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	/* The webhook listener before any other thread: a bad address or
	 * certificate ends lcd here, with nothing running yet. */
	if (cfg.webhook_listen) {
		lcd_webhook_cfg_t wc = { cfg.webhook_listen, cfg.webhook_tls_cert, cfg.webhook_tls_key,
					 (size_t)cfg.webhook_max_body };
		if (lcd_webhook_start(&lcd, &wc, &hooks, &err) < 0)
			return start_failed(&lcd, hooks, api, e2b, sock, err);
	}

	/* The model gateway before any task runs: a sandbox of a task may use it. */
	if (lcd_gateway_start(&lcd, &cfg.gateway, &err) < 0)
		return start_failed(&lcd, hooks, api, e2b, sock, err);
	lcd_gateway_cfg_clear(&cfg.gateway);

	/* The pool before the API: a create may take from it at once. */
	if (lcd_pool_start(&lcd, cfg.sandbox_pool, &err) < 0)
		return start_failed(&lcd, hooks, api, e2b, sock, err);
	json_decref(cfg.sandbox_pool);

	/* The API and the devboxes before the dispatcher and the scheduler:
	 * a listen address that cannot be bound ends lcd here, with no task
	 * started and no thread of ours to stop.  (A spawn answered before
	 * the dispatcher runs waits in the queue for it.) */
	lcd_api_cfg_t acfg = { cfg.listen, token, (unsigned)cfg.listen_idle_timeout, (unsigned)cfg.listen_per_ip,
			       (unsigned)cfg.socket_idle_timeout, (int)cfg.task_connections, (int)cfg.operator_connections,
			       cluster_token };
	if (lcd_api_start(&lcd, fd, &acfg, &api, &err) < 0 ||
	    lcd_devboxes_start(&lcd, &err) < 0)
		return start_failed(&lcd, hooks, api, e2b, sock, err);
	if (cfg.e2b_listen) {
		lcd_e2b_cfg_t ec = { cfg.e2b_listen, token, cfg.e2b_base_image, (unsigned)cfg.listen_idle_timeout,
				     LCD_E2B_PER_IP };
		if (lcd_e2b_start(&lcd, &ec, &e2b, &err) < 0)
			return start_failed(&lcd, hooks, api, e2b, sock, err);
	}
	pthread_t disp, sched, node;
	pthread_create(&disp, NULL, lcd_dispatcher, &lcd);
	pthread_create(&sched, NULL, lcd_scheduler, &lcd);
	pthread_create(&node, NULL, lcd_node_thread, &lcd);
	if (lcd_node_listen_start(&lcd, &err) < 0) {
		/* the heartbeat and the dispatcher's 1 s look do without it */
		lcd_log("%s", err->msg);
		lc_error_free(err);
		err = NULL;
	}
	if (token)
		explicit_bzero(token, strlen(token));
	if (cluster_token)
		explicit_bzero(cluster_token, strlen(cluster_token));

	lcd_log("serving on %s%s%s (database %s, node %s with %d slots, %zu apps)", sock, cfg.listen ? " and " : "",
		cfg.listen ? cfg.listen : "", lcd_db_where(lcd.db), lcd_db_node(lcd.db), lcd_node_slots(&lcd), lcd.n_apps);
	notify("READY=1");

	int sig = 0;
	while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP)
		lcd_log("SIGHUP ignored (redeploy apps with lcctl deploy)");
	lcd_log("signal %d: stopping", sig);
	notify("STOPPING=1");

	pthread_mutex_lock(&lcd.lock);
	lcd.stopping = true;
	pthread_cond_broadcast(&lcd.wake);
	pthread_cond_broadcast(&lcd.changed);
	pthread_cond_broadcast(&lcd.tick);
	pthread_mutex_unlock(&lcd.lock);
	lcd_webhook_stop(hooks);
	lcd_devboxes_stop(&lcd); /* sessions end (the boxes keep running) */
	lcd_e2b_stop(e2b);       /* its streams end, then its commands */
	lcd_api_stop(api);
	unlink(sock);
	lcd_pool_stop(&lcd); /* no create can take from it now */
	pthread_join(disp, NULL);
	pthread_join(sched, NULL);
	pthread_join(node, NULL);
	lcd_node_listen_stop(&lcd);
	/* Running tasks end now: failed (or queued again, per retries).  Kill
	 * again while waiting: a sandbox still being made was not there yet. */
	int left;
	for (int i = 0; i < STOP_WAIT_S * 2; i++) {
		lcd_kill_running(&lcd, false);
		struct timespec ts;
		lcd_deadline(&ts, 500);
		pthread_mutex_lock(&lcd.lock);
		if (lcd.workers > 0)
			pthread_cond_timedwait(&lcd.idle, &lcd.lock, &ts);
		left = lcd.workers;
		pthread_mutex_unlock(&lcd.lock);
		if (left == 0)
			break;
	}
	if (left > 0) {
		/* Their rows stay "running": the next start recovers them. */
		lcd_log("%d task(s) did not end within %d s; the next start recovers them", left, STOP_WAIT_S);
		return 0;
	}
	/* Last: the tasks' sandboxes (the gateway's clients) are gone now. */
	lcd_gateway_stop(&lcd);
	lcd_apps_free(&lcd);
	lcd_node_stop(&lcd);
	lcd_fini(&lcd);
	lcd_log("stopped");
	return 0;
}
