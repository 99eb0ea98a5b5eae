/* devbox.c — devboxes: a sandbox you SSH into, on a disk of its own, that
 * runs while a session is open plus keep_warm seconds.
 *
 * A devbox is a row of table devboxes (its definition, from an app's
 * manifest or `lcctl devbox create`) and a disk (disk.c).  Starting it
 * makes a sandbox through lcd_sandbox_make_tuned with the disk as its
 * upper layer, no_new_privs off (sudo works inside), its hostname, a tmpfs
 * at /run/devbox and every port of its network namespace open to it; the
 * sandbox's id is written in the row before the sandbox exists.  Then, as
 * the box's root: host keys made once on the disk, the login user and
 * sshd's privilege separation user made if missing, lcd's sshd_config
 * (keys only; the secrets as SetEnv, read from the store at each start)
 * and the authorized keys written to the tmpfs, sshd started and waited
 * for.  Stopping removes the sandbox: its processes end (tmux sessions
 * too), the disk keeps everything.
 *
 * Sessions are the proxy connections lcd splices into the box's network
 * namespace (api_devbox.c): the keep_warm thread stops a box keep_warm
 * seconds after its last one closed (or after its start, or lcd's start,
 * with none). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "access.h"
#include "devbox.h"
#include "devbox_def.h"
#include "image.h"
#include "json.h"
#include "lcd.h"
#include "net.h"
#include "runner.h"
#include "sandboxes.h"
#include "util.h"

#define SETUP_TIMEOUT_S 120
#define SSHD_WAIT_MS 20000
#define HOLD_MS 30000 /* a connect under way: the box is not stopped meanwhile */
#define ROW_COLUMNS "name, app, def, sandbox_id, host_key, created_at, started_at, stopped_at, stop_reason, node"

typedef struct conn {
	int fd;
	struct conn *next;
} conn_t;

typedef struct dbx {
	char name[64];
	pthread_mutex_t op;    /* one start, stop or disk delete at a time */
	int sessions;          /* open proxy connections (under the registry's lock) */
	long long idle_since;  /* wall ms: the last session closed, or the box / lcd started */
	long long hold_until;  /* wall ms: a connect is under way */
	conn_t *conns;
	struct dbx *next;
} dbx_t;

struct lcd_devboxes {
	pthread_mutex_t lock;
	dbx_t *list;
	pthread_t reaper;
	bool reaper_started;
};

static pthread_mutex_t reg_once = PTHREAD_MUTEX_INITIALIZER;

static struct lcd_devboxes *reg(lcd_t *lcd)
{
	pthread_mutex_lock(&reg_once);
	if (!lcd->devboxes) {
		struct lcd_devboxes *r = lc_xmalloc0(sizeof(*r));
		pthread_mutex_init(&r->lock, NULL);
		lcd->devboxes = r;
	}
	pthread_mutex_unlock(&reg_once);
	return lcd->devboxes;
}

/* The entry of a name (made on first use, kept for lcd's life). */
static dbx_t *get(lcd_t *lcd, const char *name)
{
	struct lcd_devboxes *r = reg(lcd);
	pthread_mutex_lock(&r->lock);
	dbx_t *d = r->list;
	while (d && strcmp(d->name, name))
		d = d->next;
	if (!d) {
		d = lc_xmalloc0(sizeof(*d));
		snprintf(d->name, sizeof(d->name), "%s", name);
		pthread_mutex_init(&d->op, NULL);
		d->idle_since = lc_wall_ms();
		d->next = r->list;
		r->list = d;
	}
	pthread_mutex_unlock(&r->lock);
	return d;
}


static json_t *row_get(lcd_t *lcd, const char *name, lc_error_t **err)
{
	return lcd_db_query_one(lcd->db, err, "devbox", name, "SELECT " ROW_COLUMNS " FROM devboxes WHERE name = ?", "s",
				name);
}

static int row_def(json_t *row, lcd_devbox_def_t *d, lc_error_t **err)
{
	_cleanup_json_ json_t *j = json_loads(lc_json_str(row, "def"), 0, NULL);
	_cleanup_free_ char *path = lc_strdup_printf("devbox %s", lc_json_str(row, "name"));
	if (lcd_devbox_def_parse(path, lc_json_str(row, "name"), j, d, err) < 0) {
		lcd_devbox_def_clear(d);
		return -1;
	}
	return 0;
}

static bool sandbox_running(const char *sid)
{
	lc_error_t *e = NULL;
	_cleanup_json_ json_t *st = sid ? lc_sandbox_inspect(sid, &e) : NULL;
	lc_error_free(e);
	const char *s = lc_json_str(st, "status");
	return s && !strcmp(s, "running");
}

/* ---- a TCP connection to port 22 in the box's network namespace ---- */

struct nsconn {
	int nsfd;
	long long until;
	int fd, err;
};

/* A thread of its own joins the namespace (a network namespace is per
 * thread) and dies with it: no other thread of lcd ever sees it. */
static void *nsconn_thread(void *arg)
{
	struct nsconn *c = arg;
	if (setns(c->nsfd, CLONE_NEWNET) < 0) {
		c->err = errno;
		return NULL;
	}
	for (;;) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0) {
			c->err = errno;
			return NULL;
		}
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(22) };
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0) {
			c->fd = s;
			return NULL;
		}
		c->err = errno;
		close(s);
		if (c->err != ECONNREFUSED || lc_wall_ms() >= c->until)
			return NULL;
		usleep(20 * 1000);
	}
}

/* Connect to 127.0.0.1:22 inside the sandbox, waiting up to wait_ms for
 * something to listen there. */
static int connect_box(const char *name, const char *sid, int wait_ms, lc_error_t **err)
{
	struct nsconn c = { .until = lc_wall_ms() + wait_ms, .fd = -1 };
	c.nsfd = lc_sandbox_netns(sid, err);
	if (c.nsfd < 0)
		return lc_error_wrap(err, "devbox %s", name);
	pthread_t th;
	int r = pthread_create(&th, NULL, nsconn_thread, &c);
	if (r == 0)
		pthread_join(th, NULL);
	close(c.nsfd);
	if (r != 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, r, "devbox %s: cannot start a thread", name);
	if (c.fd < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, c.err, "devbox %s: nothing answers on port 22 in the box", name);
	return c.fd;
}

/* Does sshd answer (an "SSH-" banner) within wait_ms? */
static int probe_sshd(const char *name, const char *sid, int wait_ms, lc_error_t **err)
{
	_cleanup_close_ int fd = connect_box(name, sid, wait_ms, err);
	if (fd < 0)
		return -1;
	char buf[64];
	size_t n = 0;
	long long until = lc_wall_ms() + 10000;
	while (n < 4 && lc_wall_ms() < until) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 500) <= 0)
			continue;
		ssize_t r = read(fd, buf + n, sizeof(buf) - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (n < 4 || memcmp(buf, "SSH-", 4))
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "devbox %s: what answers on port 22 is not sshd", name);
	return 0;
}

/* ---- commands in the box ---- */

/* Run argv as the box's root; *out gets stdout and stderr together. */
static int box_exec(lcd_t *lcd, const char *sid, char **argv, char **out, int *status, lc_error_t **err)
{
	_cleanup_close_ int mfd = memfd_create("devbox", MFD_CLOEXEC);
	_cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (mfd < 0 || null < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "memfd");
	lc_exec_opts_t o = { .argv = argv, .user_set = true, .timeout = SETUP_TIMEOUT_S, .cancel_fd = -1,
			     .stdio = { null, mfd, mfd } };
	lc_result_t res;
	if (lcd_runner_exec(lcd, sid, &o, &res, err) < 0)
		return -1;
	*status = res.exit_code;
	off_t size = lseek(mfd, 0, SEEK_END);
	*out = lc_xmalloc0((size_t)(size > 0 ? size : 0) + 1);
	if (size > 0 && pread(mfd, *out, (size_t)size, 0) < 0)
		(*out)[0] = '\0';
	return 0;
}

static int box_write(lcd_t *lcd, const char *sid, const char *path, const char *text, mode_t mode, lc_error_t **err)
{
	_cleanup_close_ int fd = lcd_runner_open_file(lcd, sid, path, O_WRONLY, mode, NULL, err);
	if (fd < 0)
		return -1;
	if (fchmod(fd, mode) < 0 || lc_write_all(fd, text, strlen(text)) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot write %s in the box", path);
	return 0;
}

/* As the box's root, at each start: what sshd needs, made once on the
 * disk (host key, users) or again on the tmpfs.  Prints sshd's path and
 * the host key. */
static const char setup_script[] =
	"set -eu\n"
	"u=$1\n"
	"sshd=$(command -v sshd || true)\n"
	"[ -n \"$sshd\" ] || { echo 'the image has no sshd: install openssh-server in it' >&2; exit 90; }\n"
	"command -v ssh-keygen >/dev/null || { echo 'the image has no ssh-keygen' >&2; exit 90; }\n"
	"command -v useradd >/dev/null || { echo 'the image has no useradd' >&2; exit 90; }\n"
	"mkdir -p /etc/ssh /run/sshd\n"
	"chmod 0755 /run/sshd /run/devbox\n"
	"[ -s /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -C \"$(hostname)\" -f /etc/ssh/ssh_host_ed25519_key\n"
	"getent passwd sshd >/dev/null || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd\n"
	"if ! getent passwd \"$u\" >/dev/null; then\n"
	"  sh=$(command -v bash || echo /bin/sh)\n"
	"  if getent passwd 1000 >/dev/null; then useradd -m -U -s \"$sh\" \"$u\"; else useradd -m -u 1000 -U -s \"$sh\" \"$u\"; fi\n"
	"fi\n"
	/* sshd without PAM refuses a locked password ('!') even for a key;
	 * '*' lets no password in either, and keys do */
	"pw=$( (getent shadow \"$u\" || getent passwd \"$u\") | cut -d: -f2)\n"
	"case \"$pw\" in '!'*) usermod -p '*' \"$u\" ;; esac\n"
	"home=$(getent passwd \"$u\" | cut -d: -f6)\n"
	"[ -d \"$home\" ] || { mkdir -p \"$home\"; chown \"$u:$(id -g \"$u\")\" \"$home\"; }\n"
	"echo \"sshd=$sshd\"\n"
	"echo \"key=$(cut -d' ' -f1,2 /etc/ssh/ssh_host_ed25519_key.pub)\"\n";

/* "NAME=value" quoted for sshd_config's SetEnv, appended to *cfg (sshd
 * takes the first SetEnv line only: every value goes on that one). */
static int setenv_add(char **cfg, const char *kv, lc_error_t **err)
{
	if (strpbrk(kv, "\r\n"))
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "%.*s: a line break cannot pass through sshd's SetEnv (secrets reach a devbox that way)",
				    (int)strcspn(kv, "="), kv);
	size_t n = strlen(kv);
	char *q = lc_xmalloc0(2 * n + 3), *o = q;
	*o++ = '"';
	for (const char *p = kv; *p; p++) {
		if (*p == '"' || *p == '\\')
			*o++ = '\\';
		*o++ = *p;
	}
	*o++ = '"';
	char *next = lc_strdup_printf("%s %s", *cfg, q);
	explicit_bzero(q, strlen(q));
	free(q);
	explicit_bzero(*cfg, strlen(*cfg));
	free(*cfg);
	*cfg = next;
	return 0;
}

/* lcd's sshd_config: keys only, the one login user, secrets and the
 * image's environment as SetEnv (on the box's tmpfs, never its disk). */
static char *sshd_config(lcd_t *lcd, const lcd_devbox_def_t *def, const char *sid, lc_error_t **err)
{
	char *cfg = lc_strdup_printf(
		"# written by lcd at each start of devbox %s (on a tmpfs: never on the disk)\n"
		"Port 22\nListenAddress 127.0.0.1\nHostKey /etc/ssh/ssh_host_ed25519_key\n"
		"AuthorizedKeysFile /run/devbox/authorized_keys .ssh/authorized_keys\n"
		"PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
		"PermitEmptyPasswords no\nUsePAM no\nPermitRootLogin no\nAllowUsers %s\n"
		"PrintMotd no\nX11Forwarding no\nAllowTcpForwarding yes\nAllowAgentForwarding yes\n"
		"Subsystem sftp internal-sftp\nPidFile /run/devbox/sshd.pid\nSetEnv LCRUN_DEVBOX=%s",
		def->name, def->user, def->name);
	/* The image's environment (its LANG, NODE_EXTRA_CA_CERTS, …): sshd
	 * gives a login a fresh one otherwise. */
	lc_error_t *e = NULL;
	_cleanup_json_ json_t *st = lc_sandbox_inspect(sid, &e);
	lc_error_free(e);
	static const char *const skip[] = { "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "MAIL", "PWD", NULL };
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(json_object_get(st, "spec"), "env"), i, v) {
		const char *kv = json_string_value(v);
		size_t kl = kv ? strcspn(kv, "=") : 0;
		bool keep = kv && kv[kl] == '=';
		for (size_t k = 0; keep && skip[k]; k++)
			keep = !(strlen(skip[k]) == kl && !strncmp(kv, skip[k], kl));
		if (keep && setenv_add(&cfg, kv, NULL) < 0)
			continue;
	}
	for (size_t k = 0; def->secrets && def->secrets[k]; k++) {
		_cleanup_free_ char *val = lcd_store_secret_get(lcd->db, def->secrets[k], err);
		if (!val) {
			if (!err || !*err)
				lc_error_set(err, LC_EXIT_UNKNOWN, 0, "devbox %s: secret %s is not set (lcctl secret set %s)",
					     def->name, def->secrets[k], def->secrets[k]);
			goto fail;
		}
		_cleanup_free_ char *kv = lc_strdup_printf("%s=%s", def->secrets[k], val);
		explicit_bzero(val, strlen(val));
		int r = setenv_add(&cfg, kv, err);
		explicit_bzero(kv, strlen(kv));
		if (r < 0) {
			lc_error_wrap(err, "devbox %s: secret", def->name);
			goto fail;
		}
	}
	char *done = lc_strdup_printf("%s\n", cfg);
	explicit_bzero(cfg, strlen(cfg));
	free(cfg);
	return done;
fail:
	explicit_bzero(cfg, strlen(cfg));
	free(cfg);
	return NULL;
}

static char *out_value(const char *out, const char *key)
{
	size_t kl = strlen(key);
	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == '=')
			return strndup(l + kl + 1, strcspn(l + kl + 1, "\n"));
	return NULL;
}

static const char *last_line(char *out)
{
	size_t n = strlen(out);
	while (n && out[n - 1] == '\n')
		out[--n] = '\0';
	char *nl = strrchr(out, '\n');
	return nl ? nl + 1 : out;
}

/* Configure and start sshd in the running sandbox; wait until it answers. */
static int setup_box(lcd_t *lcd, const lcd_devbox_def_t *def, const char *sid, lc_error_t **err)
{
	char *argv[] = { "/bin/sh", "-c", (char *)setup_script, "lcd-devbox-setup", def->user, NULL };
	_cleanup_free_ char *out = NULL;
	int status = 0;
	if (box_exec(lcd, sid, argv, &out, &status, err) < 0)
		return lc_error_wrap(err, "devbox %s: setting up sshd", def->name);
	if (status != 0)
		return lc_error_set(err, status == 90 ? LC_EXIT_INVALID : LC_EXIT_RUNTIME, 0,
				    "devbox %s: setting up sshd failed (exit %d): %s", def->name, status, last_line(out));
	_cleanup_free_ char *sshd = out_value(out, "sshd"), *key = out_value(out, "key");
	if (!sshd || !key || strncmp(key, "ssh-", 4))
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "devbox %s: setting up sshd said nothing of sshd or its key", def->name);
	_cleanup_free_ char *keys = strdup("");
	for (size_t i = 0; def->authorized_keys && def->authorized_keys[i]; i++) {
		char *n = lc_strdup_printf("%s%s\n", keys, def->authorized_keys[i]);
		free(keys);
		keys = n;
	}
	if (box_write(lcd, sid, "/run/devbox/authorized_keys", keys, 0644, err) < 0)
		return lc_error_wrap(err, "devbox %s", def->name);
	char *cfg = sshd_config(lcd, def, sid, err);
	if (!cfg)
		return -1;
	int r = box_write(lcd, sid, "/run/devbox/sshd_config", cfg, 0600, err);
	explicit_bzero(cfg, strlen(cfg));
	free(cfg);
	if (r < 0)
		return lc_error_wrap(err, "devbox %s", def->name);
	char *sargv[] = { sshd, "-D", "-e", "-f", "/run/devbox/sshd_config", NULL };
	lc_exec_opts_t o = { .argv = sargv, .user_set = true, .detach = true, .cancel_fd = -1, .stdio = { -1, -1, -1 } };
	lc_result_t res;
	if (lcd_runner_exec(lcd, sid, &o, &res, err) < 0)
		return lc_error_wrap(err, "devbox %s: starting sshd", def->name);
	if (probe_sshd(def->name, sid, SSHD_WAIT_MS, err) < 0)
		return lc_error_wrap(err, "sshd did not come up (its log: lcrun logs %s)", sid);
	if (lcd_db_exec(lcd->db, err, "UPDATE devboxes SET host_key = ? WHERE name = ?", "ss", key, def->name) < 0)
		return -1;
	return 0;
}

/* ---- start and stop ---- */

struct tune_ctx {
	lcd_t *lcd;
	const char *name;
	const char *dir;
};

static int tune(lc_spec_t *spec, const char *id, void *ud, lc_error_t **err)
{
	struct tune_ctx *t = ud;
	/* Recorded before the sandbox exists: after a crash at any moment
	 * the row names the sandbox that may use the disk. */
	int n = lcd_db_exec(t->lcd->db, err, "UPDATE devboxes SET sandbox_id = ? WHERE name = ?", "ss", id, t->name);
	if (n <= 0)
		return n < 0 ? -1 : lc_error_set(err, LC_EXIT_UNKNOWN, 0, "devbox %s was removed meanwhile", t->name);
	free(spec->upper_dir);
	spec->upper_dir = strdup(t->dir);
	spec->new_privs = true; /* sudo */
	free(spec->hostname);
	spec->hostname = strdup(t->name);
	spec->uid = 0; /* sshd and the set-up run as the box's root */
	spec->gid = 0;
	/* No process in the box holds CAP_NET_BIND_SERVICE over its network
	 * namespace (the host's user namespace owns it): open every port to
	 * the box's own processes, sshd's 22 included. */
	lc_strv_push(&spec->sysctls, "net.ipv4.ip_unprivileged_port_start=0");
	spec->mounts = realloc(spec->mounts, (spec->n_mounts + 1) * sizeof(*spec->mounts));
	spec->mounts[spec->n_mounts++] = (lc_mount_t){ NULL, strdup("/run/devbox"), false, true };
	return 0;
}

/* Forget the sandbox of a box that is not running (dead, removed behind
 * lcd's back, gone with a reboot). */
static void retire(lcd_t *lcd, const char *name, const char *sid, const char *why)
{
	lc_error_t *e = NULL;
	if (lcd_sandbox_delete(lcd, sid, &e) < 0) {
		lcd_log("devbox %s: cannot remove sandbox %s: %s", name, sid, e->msg);
		lc_error_free(e);
	}
	lcd_db_exec(lcd->db, NULL,
		    "UPDATE devboxes SET sandbox_id = NULL, stopped_at = ?, stop_reason = ? WHERE name = ? AND sandbox_id = ?",
		    "isss", lc_wall_ms(), why, name, sid);
	lcd_log("devbox %s: stopped (%s)", name, why);
}

static void touch(lcd_t *lcd, dbx_t *d, long long hold_ms)
{
	struct lcd_devboxes *r = reg(lcd);
	pthread_mutex_lock(&r->lock);
	d->idle_since = lc_wall_ms();
	d->hold_until = hold_ms ? lc_wall_ms() + hold_ms : 0;
	pthread_mutex_unlock(&r->lock);
}

/* A new sandbox for the box on its disk, with sshd answering. */
static int make_box(lcd_t *lcd, dbx_t *d, const lcd_devbox_def_t *def, lc_error_t **err)
{
	long long t0 = lc_wall_ms();
	_cleanup_free_ char *dir = NULL;
	if (lcd_disk_ready(lcd, d->name, def->disk, &dir, err) < 0)
		return -1;
	_cleanup_json_ json_t *req = json_pack("{s:s, s:s, s:{s:s}}", "image", def->image, "net", def->net, "labels",
					       "lcrun.devbox", d->name);
	if (def->cpus > 0 || def->memory > 0) {
		/* best effort: a host without the controller (hybrid cgroup
		 * v1/v2) still runs the box, and `devbox show` says so */
		json_t *lim = json_pack("{s:b}", "best_effort", 1);
		if (def->cpus > 0)
			json_object_set_new(lim, "cpus", json_real(def->cpus));
		if (def->memory > 0)
			json_object_set_new(lim, "memory", json_integer(def->memory));
		json_object_set_new(req, "limits", lim);
	}
	struct tune_ctx t = { lcd, d->name, dir };
	_cleanup_json_ json_t *ids = json_array();
	lcd_caller_t op = { .operator = true };
	if (lcd_sandbox_make_tuned(lcd, &op, req, 1, NULL, ids, tune, &t, err) < 0) {
		lcd_db_exec(lcd->db, NULL, "UPDATE devboxes SET sandbox_id = NULL WHERE name = ?", "s", d->name);
		return lc_error_wrap(err, "devbox %s", d->name);
	}
	const char *made = json_string_value(json_array_get(ids, 0));
	LC_FAULT("lcd-devbox-made");
	if (setup_box(lcd, def, made, err) < 0) {
		retire(lcd, d->name, made, "its set-up failed");
		return -1;
	}
	lcd_db_exec(lcd->db, NULL, "UPDATE devboxes SET started_at = ?, stop_reason = NULL WHERE name = ?", "is",
		    lc_wall_ms(), d->name);
	lcd_log("devbox %s: started (sandbox %s, image %s) in %lld ms", d->name, made, def->image, lc_wall_ms() - t0);
	return 0;
}

/* Make the box run with sshd answering (d->op held). */
static int ensure_running(lcd_t *lcd, dbx_t *d, lc_error_t **err)
{
	_cleanup_json_ json_t *row = row_get(lcd, d->name, err);
	if (!row)
		return -1;
	lcd_devbox_def_t def;
	if (row_def(row, &def, err) < 0)
		return -1;
	int rc;
	const char *sid = lc_json_str(row, "sandbox_id");
	if (sid && sandbox_running(sid)) {
		lc_error_t *e = NULL;
		if (lc_json_str(row, "host_key") && probe_sshd(d->name, sid, 0, &e) == 0) {
			rc = 0;
		} else {
			/* sshd ended (killed inside?): set it up again */
			lcd_log("devbox %s: sshd does not answer (%s): starting it again", d->name, e ? e->msg : "no host key");
			rc = setup_box(lcd, &def, sid, err);
		}
		lc_error_free(e);
	} else {
		if (sid)
			retire(lcd, d->name, sid, "its sandbox was not running");
		rc = make_box(lcd, d, &def, err);
	}
	lcd_devbox_def_clear(&def);
	return rc;
}

static void close_sessions(lcd_t *lcd, dbx_t *d)
{
	struct lcd_devboxes *r = reg(lcd);
	pthread_mutex_lock(&r->lock);
	for (conn_t *c = d->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&r->lock);
}

/* d->op held. */
static int stop_locked(lcd_t *lcd, dbx_t *d, const char *why, lc_error_t **err)
{
	_cleanup_json_ json_t *row = row_get(lcd, d->name, err);
	if (!row)
		return -1;
	const char *sid = lc_json_str(row, "sandbox_id");
	if (!sid)
		return lc_error_set(err, LC_EXIT_STATE, 0, "devbox %s is not running", d->name);
	close_sessions(lcd, d);
	if (lcd_sandbox_delete(lcd, sid, err) < 0)
		return lc_error_wrap(err, "devbox %s", d->name);
	lcd_db_exec(lcd->db, NULL, "UPDATE devboxes SET sandbox_id = NULL, stopped_at = ?, stop_reason = ? WHERE name = ?",
		    "iss", lc_wall_ms(), why, d->name);
	lcd_log("devbox %s: stopped (%s)", d->name, why);
	return 0;
}

int lcd_devbox_start(lcd_t *lcd, const char *name, json_t **out, lc_error_t **err)
{
	dbx_t *d = get(lcd, name);
	pthread_mutex_lock(&d->op);
	int r = ensure_running(lcd, d, err);
	if (r == 0)
		touch(lcd, d, 0);
	pthread_mutex_unlock(&d->op);
	if (r < 0)
		return -1;
	*out = lcd_devbox_show(lcd, name, err);
	return *out ? 0 : -1;
}

int lcd_devbox_stop(lcd_t *lcd, const char *name, const char *reason, lc_error_t **err)
{
	dbx_t *d = get(lcd, name);
	pthread_mutex_lock(&d->op);
	int r = stop_locked(lcd, d, reason, err);
	pthread_mutex_unlock(&d->op);
	return r;
}

int lcd_devbox_connect(lcd_t *lcd, const char *name, int *fd, char **host_key, lc_error_t **err)
{
	dbx_t *d = get(lcd, name);
	pthread_mutex_lock(&d->op);
	int r = ensure_running(lcd, d, err);
	_cleanup_json_ json_t *row = r == 0 ? row_get(lcd, name, err) : NULL;
	if (r == 0 && !row)
		r = -1;
	if (r == 0)
		touch(lcd, d, HOLD_MS); /* not stopped before the session begins */
	pthread_mutex_unlock(&d->op);
	if (r < 0)
		return -1;
	*fd = connect_box(name, lc_json_str(row, "sandbox_id"), SSHD_WAIT_MS, err);
	if (*fd < 0)
		return -1;
	*host_key = strdup(lc_json_str(row, "host_key"));
	return 0;
}

void lcd_devbox_session_begin(lcd_t *lcd, const char *name, int fd)
{
	dbx_t *d = get(lcd, name);
	struct lcd_devboxes *r = reg(lcd);
	conn_t *c = lc_xmalloc0(sizeof(*c));
	c->fd = fd;
	pthread_mutex_lock(&r->lock);
	c->next = d->conns;
	d->conns = c;
	int n = ++d->sessions;
	d->hold_until = 0;
	pthread_mutex_unlock(&r->lock);
	lcd_log("devbox %s: session opened (%d open)", name, n);
}

void lcd_devbox_session_end(lcd_t *lcd, const char *name, int fd)
{
	dbx_t *d = get(lcd, name);
	struct lcd_devboxes *r = reg(lcd);
	pthread_mutex_lock(&r->lock);
	for (conn_t **p = &d->conns; *p; p = &(*p)->next) {
		if ((*p)->fd == fd) {
			conn_t *c = *p;
			*p = c->next;
			free(c);
			break;
		}
	}
	int n = --d->sessions;
	if (n == 0)
		d->idle_since = lc_wall_ms();
	pthread_mutex_unlock(&r->lock);
	lcd_log("devbox %s: session closed (%d open)", name, n);
}

/* ---- keep_warm ---- */

/* d->op held: stop the box if keep_warm has passed with no session, or
 * forget its sandbox if that ended. */
static void reap_locked(lcd_t *lcd, dbx_t *d, const char *sid)
{
	_cleanup_json_ json_t *row = row_get(lcd, d->name, NULL);
	if (!row || !lc_json_str(row, "sandbox_id") || strcmp(lc_json_str(row, "sandbox_id"), sid))
		return;
	if (!sandbox_running(sid)) {
		retire(lcd, d->name, sid, "its sandbox ended");
		return;
	}
	_cleanup_json_ json_t *def = json_loads(lc_json_str(row, "def"), 0, NULL);
	long long keep = json_integer_value(json_object_get(def, "keep_warm"));
	struct lcd_devboxes *r = reg(lcd);
	pthread_mutex_lock(&r->lock);
	long long now = lc_wall_ms();
	bool due = d->sessions == 0 && now >= d->hold_until && now - d->idle_since >= keep * 1000;
	pthread_mutex_unlock(&r->lock);
	if (!due)
		return;
	_cleanup_free_ char *why = lc_strdup_printf("keep_warm: no session for %lld s", keep);
	lc_error_t *e = NULL;
	if (stop_locked(lcd, d, why, &e) < 0) {
		lcd_log("devbox %s: cannot stop it: %s", d->name, e->msg);
		lc_error_free(e);
	}
}

static void reap_one(lcd_t *lcd, json_t *row)
{
	dbx_t *d = get(lcd, lc_json_str(row, "name"));
	if (pthread_mutex_trylock(&d->op) != 0)
		return; /* being started or stopped */
	reap_locked(lcd, d, lc_json_str(row, "sandbox_id"));
	pthread_mutex_unlock(&d->op);
}

static void *reaper(void *arg)
{
	lcd_t *lcd = arg;
	while (!lcd_sleep(lcd, &lcd->tick, 1000)) {
		/* this node's boxes only: another node's box runs there */
		_cleanup_json_ json_t *rows =
			lcd_db_query(lcd->db, NULL, "SELECT name, sandbox_id FROM devboxes WHERE sandbox_id IS NOT NULL AND "
				     "(node IS NULL OR node = ?)", "s", lcd_db_node(lcd->db));
		size_t i;
		json_t *row;
		json_array_foreach(rows, i, row)
			reap_one(lcd, row);
	}
	return NULL;
}

int lcd_devboxes_start(lcd_t *lcd, lc_error_t **err)
{
	struct lcd_devboxes *r = reg(lcd);
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, err,
		"SELECT " ROW_COLUMNS " FROM devboxes WHERE node IS NULL OR node = ?", "s", lcd_db_node(lcd->db));
	if (!rows)
		return -1;
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		const char *sid = lc_json_str(row, "sandbox_id");
		get(lcd, lc_json_str(row, "name")); /* keep_warm counts from now */
		if (sid && !sandbox_running(sid))
			retire(lcd, lc_json_str(row, "name"), sid, "not running when lcd started");
	}
	/* A sandbox of a box that is not the one its row names (none should
	 * be: the row names it before it is made) would share the disk. */
	_cleanup_json_ json_t *sbs = lcd_db_query(lcd->db, err,
		"SELECT s.id, json_extract(s.labels, '$.\"lcrun.devbox\"') AS box FROM sandboxes s "
		"WHERE json_extract(s.labels, '$.\"lcrun.devbox\"') IS NOT NULL AND NOT EXISTS "
		"(SELECT 1 FROM devboxes d WHERE d.sandbox_id = s.id) AND (s.node IS NULL OR s.node = ?)", "s",
		lcd_db_node(lcd->db));
	json_array_foreach(sbs, i, row) {
		lc_error_t *e = NULL;
		if (lcd_sandbox_delete(lcd, lc_json_str(row, "id"), &e) == 0)
			lcd_log("devbox %s: removed sandbox %s, which its row does not name", lc_json_str(row, "box"), lc_json_str(row, "id"));
		lc_error_free(e);
	}
	int rc = pthread_create(&r->reaper, NULL, reaper, lcd);
	if (rc != 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, rc, "cannot start the devbox thread");
	r->reaper_started = true;
	return 0;
}

void lcd_devboxes_stop(lcd_t *lcd)
{
	struct lcd_devboxes *r = reg(lcd);
	pthread_mutex_lock(&r->lock);
	for (dbx_t *d = r->list; d; d = d->next)
		for (conn_t *c = d->conns; c; c = c->next)
			shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&r->lock);
	if (r->reaper_started)
		pthread_join(r->reaper, NULL);
	r->reaper_started = false;
}

/* ---- views ---- */

/* "SHA256:…" as ssh-keygen -l prints it. */
static char *fingerprint(const char *key)
{
	const char *b = key ? strchr(key, ' ') : NULL;
	if (!b)
		return NULL;
	b++;
	size_t n = strcspn(b, " ");
	if (n == 0 || n % 4)
		return NULL;
	_cleanup_free_ unsigned char *blob = lc_xmalloc0(n);
	int len = EVP_DecodeBlock(blob, (const unsigned char *)b, (int)n);
	if (len < 0)
		return NULL;
	while (n > 0 && b[n - 1] == '=') {
		n--;
		len--;
	}
	lc_sha256_t *h = lc_sha256_new();
	lc_sha256_update(h, blob, (size_t)len);
	unsigned char md[32];
	lc_sha256_final(h, md);
	char enc[64];
	int e = EVP_EncodeBlock((unsigned char *)enc, md, 32);
	while (e > 0 && enc[e - 1] == '=')
		enc[--e] = '\0';
	return lc_strdup_printf("SHA256:%s", enc);
}

static json_t *nullable(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *view(lcd_t *lcd, json_t *row)
{
	const char *name = lc_json_str(row, "name"), *sid = lc_json_str(row, "sandbox_id");
	json_t *v = json_loads(lc_json_str(row, "def"), 0, NULL);
	if (!v)
		v = json_object();
	dbx_t *d = get(lcd, name);
	/* another node's box (a list through this node; the rest of its
	 * calls go to its node, http/forward.c): the store says whether its
	 * sandbox is live; its sessions are counted there */
	const char *node = lc_json_str(row, "node"), *me = lcd_db_node(lcd->db);
	bool here = !node || !me || !strcmp(node, me);
	bool running = false;
	if (sid && here) {
		running = sandbox_running(sid);
	} else if (sid) {
		_cleanup_json_ json_t *sb =
			lcd_db_query(lcd->db, NULL, "SELECT 1 AS live FROM sandboxes WHERE id = ? AND state = 'live'", "s", sid);
		running = json_array_size(sb) > 0;
	}
	struct lcd_devboxes *r = reg(lcd);
	pthread_mutex_lock(&r->lock);
	int sessions = d->sessions;
	long long idle = d->idle_since;
	pthread_mutex_unlock(&r->lock);
	long long keep = json_integer_value(json_object_get(v, "keep_warm"));
	json_object_set_new(v, "name", json_string(name));
	json_object_set_new(v, "app", nullable(lc_json_str(row, "app")));
	json_object_set_new(v, "state", json_string(running ? "running" : "stopped"));
	json_object_set_new(v, "sandbox", running ? json_string(sid) : json_null());
	json_object_set_new(v, "node", nullable(node));
	json_object_set_new(v, "sessions", !here ? json_null() : json_integer(running ? sessions : 0));
	json_object_set_new(v, "stops_at",
			    here && running && sessions == 0 ? json_integer(idle + keep * 1000) : json_null());
	json_object_set_new(v, "ssh_host", json_sprintf("lcrun-%s", name));
	json_object_set_new(v, "host_key", nullable(lc_json_str(row, "host_key")));
	_cleanup_free_ char *fp = fingerprint(lc_json_str(row, "host_key"));
	json_object_set_new(v, "host_key_fingerprint", nullable(fp));
	static const char *const times[] = { "created_at", "started_at", "stopped_at" };
	for (size_t i = 0; i < 3; i++)
		json_object_set(v, times[i], json_object_get(row, times[i]) ? json_object_get(row, times[i]) : json_null());
	json_object_set_new(v, "stop_reason", running ? json_null() : nullable(lc_json_str(row, "stop_reason")));
	json_t *disk = lcd_disk_info(lcd, name);
	json_object_set_new(v, "disk_size", json_object_get(v, "disk") ? json_incref(json_object_get(v, "disk")) : json_null());
	json_object_set_new(v, "disk", disk ? disk : json_null());
	if (running && here) {
		/* what the runtime could not enforce on this host (best effort) */
		lc_error_t *e = NULL;
		_cleanup_json_ json_t *st = lc_sandbox_inspect(sid, &e);
		lc_error_free(e);
		json_t *na = json_object_get(st, "limits_not_applied");
		if (na)
			json_object_set(v, "limits_not_applied", na);
	}
	return v;
}

json_t *lcd_devbox_show(lcd_t *lcd, const char *name, lc_error_t **err)
{
	_cleanup_json_ json_t *row = row_get(lcd, name, err);
	return row ? view(lcd, row) : NULL;
}

json_t *lcd_devbox_list(lcd_t *lcd, lc_error_t **err)
{
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, err, "SELECT " ROW_COLUMNS " FROM devboxes ORDER BY name", "");
	if (!rows)
		return NULL;
	json_t *out = json_array();
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row)
		json_array_append_new(out, view(lcd, row));
	return out;
}

/* ---- definitions: create, remove, apps ---- */

static int check_net(const lcd_devbox_def_t *def, const char *path, lc_error_t **err)
{
	if (!strcmp(def->net, "none") || !strcmp(def->net, "open"))
		return 0;
	lc_net_spec_t net = { 0 };
	int r = lc_net_policy_load(def->net, &net, err);
	lc_net_spec_clear(&net);
	return r < 0 ? lc_error_wrap(err, "%s.net", path) : 0;
}

static int insert(lcd_t *lcd, const char *app, const lcd_devbox_def_t *def, lc_error_t **err)
{
	_cleanup_json_ json_t *j = lcd_devbox_def_json(def);
	_cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	return lcd_db_exec(lcd->db, err, "INSERT INTO devboxes (name, app, def, created_at, node) VALUES (?, ?, ?, ?, ?)",
			   "sssis", def->name, app, text, lc_wall_ms(), lcd_db_node(lcd->db));
}

int lcd_devbox_create(lcd_t *lcd, json_t *req, json_t **out, lc_error_t **err)
{
	if (!json_is_object(req))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "request body: expected a JSON object");
	const char *name = lc_json_str(req, "name");
	if (!name)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "name: required");
	_cleanup_json_ json_t *v = json_deep_copy(req);
	json_object_del(v, "name");
	lcd_devbox_def_t def;
	int r = lcd_devbox_def_parse("", name, v, &def, err);
	if (r == 0)
		r = check_net(&def, "", err);
	for (size_t i = 0; r == 0 && def.secrets && def.secrets[i]; i++)
		if (lcd_db_query_int(lcd->db, err, 0, "SELECT count(*) FROM secrets WHERE name = ?", "s", def.secrets[i]) == 0)
			r = lc_error_set(err, LC_EXIT_UNKNOWN, 0, "secrets[%zu]: no secret named '%s'", i, def.secrets[i]);
	if (r == 0 && strcmp(def.image, "host")) {
		lc_image_resolved_t *img = NULL;
		if (lc_image_resolve(def.image, &img, err) < 0)
			r = lc_error_wrap(err, "image");
		lc_image_resolved_free(img);
	}
	if (r == 0) {
		dbx_t *d = get(lcd, name);
		pthread_mutex_lock(&d->op);
		if (lcd_db_query_int(lcd->db, err, 0, "SELECT count(*) FROM devboxes WHERE name = ?", "s", name) != 0)
			r = lc_error_set(err, LC_EXIT_BUSY, 0, "a devbox named '%s' exists already", name);
		else
			r = insert(lcd, NULL, &def, err) < 0 ? -1 : 0;
		pthread_mutex_unlock(&d->op);
	}
	if (r == 0)
		lcd_log("devbox %s: created (image %s, disk %lld MiB%s)", name, def.image, def.disk >> 20,
			lcd_disk_exists(lcd, name) ? ", on the disk kept from before" : "");
	lcd_devbox_def_clear(&def);
	if (r < 0)
		return -1;
	*out = lcd_devbox_show(lcd, name, err);
	return *out ? 0 : -1;
}

/* Stop (if running) and forget; d->op is taken here. */
static int forget(lcd_t *lcd, const char *name, lc_error_t **err)
{
	dbx_t *d = get(lcd, name);
	pthread_mutex_lock(&d->op);
	lc_error_t *e = NULL;
	int r = 0;
	if (stop_locked(lcd, d, "removed", &e) < 0 && e->exit_code != LC_EXIT_STATE) {
		*err = lc_steal(e);
		r = -1;
	}
	lc_error_free(e);
	if (r == 0 && lcd_db_exec(lcd->db, err, "DELETE FROM devboxes WHERE name = ?", "s", name) < 0)
		r = -1;
	pthread_mutex_unlock(&d->op);
	if (r == 0)
		lcd_log("devbox %s: removed (its disk is kept: lcctl disk delete %s)", name, name);
	return r;
}

int lcd_devbox_remove(lcd_t *lcd, const char *name, lc_error_t **err)
{
	_cleanup_json_ json_t *row = row_get(lcd, name, err);
	if (!row)
		return -1;
	if (lc_json_str(row, "app"))
		return lc_error_set(err, LC_EXIT_PERM, 0,
				    "devbox %s belongs to app %s: take it out of the manifest and deploy again, or delete the app",
				    name, lc_json_str(row, "app"));
	return forget(lcd, name, err);
}

int lcd_devboxes_check_app(lcd_t *lcd, const lcd_app_t *app, lc_error_t **err)
{
	for (size_t i = 0; i < app->n_devboxes; i++) {
		const lcd_devbox_def_t *def = &app->devboxes[i];
		_cleanup_free_ char *path = lc_strdup_printf("devboxes.%s", def->name);
		if (check_net(def, path, err) < 0)
			return -1;
		_cleanup_json_ json_t *row = row_get(lcd, def->name, NULL);
		if (row && (!lc_json_str(row, "app") || strcmp(lc_json_str(row, "app"), app->name)))
			return lc_error_set(err, LC_EXIT_BUSY, 0, "%s: a devbox named '%s' exists already (%s%s)", path, def->name,
					    lc_json_str(row, "app") ? "of app " : "made with lcctl devbox create",
					    lc_json_str(row, "app") ? lc_json_str(row, "app") : "");
	}
	return 0;
}

void lcd_devboxes_sync_app(lcd_t *lcd, const lcd_app_t *app)
{
	for (size_t i = 0; i < app->n_devboxes; i++) {
		const lcd_devbox_def_t *def = &app->devboxes[i];
		_cleanup_json_ json_t *j = lcd_devbox_def_json(def);
		_cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
		lc_error_t *e = NULL;
		int n = lcd_db_exec(lcd->db, &e, "UPDATE devboxes SET def = ? WHERE name = ? AND app = ?", "sss", text, def->name,
				    app->name);
		if (n == 0 && insert(lcd, app->name, def, &e) == 0)
			lcd_log("devbox %s: declared by app %s", def->name, app->name);
		if (n < 0 || e) {
			lcd_log("devbox %s: cannot record it: %s", def->name, e ? e->msg : "?");
			lc_error_free(e);
		}
	}
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, NULL, "SELECT name FROM devboxes WHERE app = ?", "s", app->name);
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		bool kept = false;
		for (size_t k = 0; k < app->n_devboxes; k++)
			kept |= !strcmp(app->devboxes[k].name, lc_json_str(row, "name"));
		lc_error_t *e = NULL;
		if (!kept && forget(lcd, lc_json_str(row, "name"), &e) < 0) {
			lcd_log("devbox %s: cannot remove it: %s", lc_json_str(row, "name"), e->msg);
			lc_error_free(e);
		}
	}
}

void lcd_devboxes_drop_app(lcd_t *lcd, const char *app)
{
	_cleanup_json_ json_t *rows = lcd_db_query(lcd->db, NULL, "SELECT name FROM devboxes WHERE app = ?", "s", app);
	size_t i;
	json_t *row;
	json_array_foreach(rows, i, row) {
		lc_error_t *e = NULL;
		if (forget(lcd, lc_json_str(row, "name"), &e) < 0) {
			lcd_log("devbox %s: cannot remove it: %s", lc_json_str(row, "name"), e->msg);
			lc_error_free(e);
		}
	}
}

/* ---- disks ---- */

int lcd_disk_delete(lcd_t *lcd, const char *name, lc_error_t **err)
{
	if (!lcd_name_valid(name) || !lcd_disk_exists(lcd, name))
		return lc_error_set(err, LC_EXIT_UNKNOWN, 0, "no disk named '%s'", name);
	dbx_t *d = get(lcd, name);
	pthread_mutex_lock(&d->op);
	int r = 0;
	_cleanup_json_ json_t *row = row_get(lcd, name, NULL);
	const char *sid = row ? lc_json_str(row, "sandbox_id") : NULL;
	if (sid && sandbox_running(sid))
		r = lc_error_set(err, LC_EXIT_STATE, 0, "disk %s is in use: devbox %s runs (lcctl devbox stop %s first)", name,
				 name, name);
	else if (sid)
		retire(lcd, name, sid, "its sandbox was not running");
	if (r == 0)
		r = lcd_disk_remove_files(lcd, name, err);
	pthread_mutex_unlock(&d->op);
	return r;
}

json_t *lcd_disks_json(lcd_t *lcd, lc_error_t **err)
{
	json_t *disks = lcd_disk_list(lcd, err);
	size_t i;
	json_t *disk;
	json_array_foreach(disks, i, disk) {
		_cleanup_json_ json_t *row = row_get(lcd, lc_json_str(disk, "name"), NULL);
		json_object_set_new(disk, "devbox", row ? json_string(lc_json_str(row, "name")) : json_null());
		json_object_set_new(disk, "state", !row ? json_null()
						   : json_string(sandbox_running(lc_json_str(row, "sandbox_id")) ? "running" : "stopped"));
	}
	return disks;
}
