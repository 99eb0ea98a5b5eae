/* netpool.c — sandbox addresses: the pool, its lock and its leases. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "net.h"
#include "netpool.h"
#include "util.h"

#define MAX_SLOTS (1u << 20) /* bound on the scan, far above any real use */

bool lc_is_sandbox_id(const char *s)
{
	if (!s || strlen(s) != LC_ID_LEN)
		return false;
	for (const char *p = s; *p; p++)
		if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
			return false;
	return true;
}

const char *lc_net_etc_dir(void)
{
	const char *v = getenv("LCRUN_ETC_DIR");
	return v && *v ? v : "/etc/lcrun";
}

static void __attribute__((format(printf, 3, 4))) reason(char *why, size_t len, const char *fmt, ...)
{
	if (!why || !len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

int lc_cidr_parse(const char *s, int *family, unsigned char addr[16], int *prefix,
		  char *why, size_t whylen)
{
	char buf[INET6_ADDRSTRLEN + 8];
	if (!s || !*s) {
		reason(why, whylen, "empty address");
		return -1;
	}
	if (strlen(s) >= sizeof(buf)) {
		reason(why, whylen, "'%s' is too long for an address", s);
		return -1;
	}
	strcpy(buf, s);
	char *slash = strchr(buf, '/');
	long pfx = -1;
	if (slash) {
		*slash = '\0';
		const char *p = slash + 1;
		char *end = NULL;
		if (!isdigit((unsigned char)*p)) {
			reason(why, whylen, "'%s' has no prefix length after '/'", s);
			return -1;
		}
		errno = 0;
		pfx = strtol(p, &end, 10);
		if (errno || *end || pfx > 128) {
			reason(why, whylen, "'%s' has an invalid prefix length", s);
			return -1;
		}
	}
	unsigned char a[16] = {0};
	int fam;
	if (inet_pton(AF_INET, buf, a) == 1)
		fam = AF_INET;
	else if (inet_pton(AF_INET6, buf, a) == 1)
		fam = AF_INET6;
	else {
		reason(why, whylen, "'%s' is not an IPv4 or IPv6 address", buf);
		return -1;
	}
	int max = fam == AF_INET ? 32 : 128;
	if (pfx < 0)
		pfx = max;
	if (pfx > max) {
		reason(why, whylen, "'%s': prefix length is larger than the address", s);
		return -1;
	}
	/* Host bits must be zero: 10.0.0.1/8 is most likely a typo. */
	for (int bit = (int)pfx; bit < max; bit++) {
		if (a[bit / 8] & (0x80 >> (bit % 8))) {
			reason(why, whylen, "'%s' has host bits set", s);
			return -1;
		}
	}
	*family = fam;
	memcpy(addr, a, 16);
	*prefix = (int)pfx;
	return 0;
}

/* ---- configuration ------------------------------------------------------ */

int lc_netpool_check(const lc_net_pool_t *pool, lc_error_t **err)
{
	char why[160];
	int fam, pfx;
	unsigned char a[16];
	if (lc_cidr_parse(pool->pool4, &fam, a, &pfx, why, sizeof(why)) < 0)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "net_pool: %s", why);
	if (fam != AF_INET || pfx > 30)
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "net_pool: '%s' must be an IPv4 network of /30 or larger", pool->pool4);
	if (!pool->pool6[0])
		return 0;
	if (lc_cidr_parse(pool->pool6, &fam, a, &pfx, why, sizeof(why)) < 0)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "net_pool6: %s", why);
	if (fam != AF_INET6 || pfx > 64)
		return lc_error_set(err, LC_EXIT_INVALID, 0,
				    "net_pool6: '%s' must be an IPv6 network of /64 or larger", pool->pool6);
	return 0;
}

static int read_config(lc_net_pool_t *pool, lc_error_t **err)
{
	snprintf(pool->pool4, sizeof(pool->pool4), "%s", LC_NET_POOL4_DEFAULT);
	snprintf(pool->pool6, sizeof(pool->pool6), "%s", LC_NET_POOL6_DEFAULT);
	const char *conf = getenv("LCRUN_CONFIG");
	_cleanup_free_ char *path = conf && *conf ? strdup(conf) : lc_strdup_printf("%s/lcrun.json", lc_net_etc_dir());
	if (access(path, F_OK) < 0)
		return 0;
	json_error_t jerr;
	_cleanup_json_ json_t *doc = json_load_file(path, 0, &jerr);
	if (!doc)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: line %d: %s", path, jerr.line, jerr.text);
	if (!json_is_object(doc))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: expected a JSON object", path);
	json_t *v4 = json_object_get(doc, "net_pool");
	json_t *v6 = json_object_get(doc, "net_pool6");
	if (v4) {
		if (!json_is_string(v4) || json_string_length(v4) >= sizeof(pool->pool4))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: net_pool: expected a CIDR string", path);
		snprintf(pool->pool4, sizeof(pool->pool4), "%s", json_string_value(v4));
	}
	if (v6) {
		if (json_is_null(v6) || (json_is_string(v6) && !json_string_length(v6)))
			pool->pool6[0] = '\0';
		else if (!json_is_string(v6) || json_string_length(v6) >= sizeof(pool->pool6))
			return lc_error_set(err, LC_EXIT_INVALID, 0,
					    "%s: net_pool6: expected a CIDR string or null", path);
		else
			snprintf(pool->pool6, sizeof(pool->pool6), "%s", json_string_value(v6));
	}
	if (lc_netpool_check(pool, err) < 0)
		return lc_error_wrap(err, "%s", path);
	return 0;
}

/* A kernel without IPv6 gets IPv4 only, whatever the pool says. */
static void ipv6_or_off(lc_net_pool_t *pool)
{
	if (access("/proc/sys/net/ipv6", F_OK) < 0)
		pool->pool6[0] = '\0';
}

int lc_netpool_config(lc_net_pool_t *pool, lc_error_t **err)
{
	if (read_config(pool, err) < 0)
		return -1;
	ipv6_or_off(pool);
	return 0;
}

/* ---- slots ---------------------------------------------------------------- */

typedef struct {
	uint32_t base4;
	int prefix4;
	unsigned char base6[16];
	int prefix6; /* -1: no IPv6 */
	unsigned nslots;
} pool_geom_t;

static int pool_geom(const lc_net_pool_t *pool, pool_geom_t *g, lc_error_t **err)
{
	if (lc_netpool_check(pool, err) < 0)
		return -1;
	int fam;
	unsigned char a[16];
	lc_cidr_parse(pool->pool4, &fam, a, &g->prefix4, NULL, 0);
	g->base4 = ntohl(*(uint32_t *)a);
	unsigned long long n = 1ULL << (30 - g->prefix4);
	g->prefix6 = -1;
	if (pool->pool6[0]) {
		lc_cidr_parse(pool->pool6, &fam, g->base6, &g->prefix6, NULL, 0);
		int bits = 64 - g->prefix6;
		unsigned long long n6 = bits >= 40 ? (1ULL << 40) : (1ULL << bits);
		if (n6 < n)
			n = n6;
	}
	g->nslots = n > MAX_SLOTS ? MAX_SLOTS : (unsigned)n;
	return 0;
}

static void slot_v4(const pool_geom_t *g, unsigned slot, unsigned host, char *out)
{
	uint32_t a = htonl(g->base4 + slot * 4u + host);
	inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}

static void slot_v6(const pool_geom_t *g, unsigned slot, unsigned host, char *out)
{
	unsigned char a[16];
	memcpy(a, g->base6, 16);
	/* The slot goes into bits prefix6..63 (the low end of the /64 prefix). */
	uint64_t hi = 0;
	for (int i = 0; i < 8; i++)
		hi = (hi << 8) | a[i];
	hi |= (uint64_t)slot;
	for (int i = 7; i >= 0; i--, hi >>= 8)
		a[i] = (unsigned char)(hi & 0xff);
	memset(a + 8, 0, 8);
	a[15] = (unsigned char)host;
	inet_ntop(AF_INET6, a, out, INET6_ADDRSTRLEN);
}

/* Slot of an IPv4 address in this pool, or -1. */
static long slot_of_v4(const pool_geom_t *g, const char *addr)
{
	struct in_addr in;
	if (!addr || inet_pton(AF_INET, addr, &in) != 1)
		return -1;
	uint32_t a = ntohl(in.s_addr);
	uint32_t mask = g->prefix4 ? ~0u << (32 - g->prefix4) : 0;
	if ((a & mask) != g->base4)
		return -1;
	unsigned long s = (a - g->base4) / 4;
	return s < g->nslots ? (long)s : -1;
}

static long slot_of_v6(const pool_geom_t *g, const char *addr)
{
	unsigned char a[16];
	if (g->prefix6 < 0 || !addr || inet_pton(AF_INET6, addr, a) != 1)
		return -1;
	for (int bit = 0; bit < g->prefix6; bit++)
		if ((a[bit / 8] ^ g->base6[bit / 8]) & (0x80 >> (bit % 8)))
			return -1;
	uint64_t hi = 0;
	for (int i = 0; i < 8; i++)
		hi = (hi << 8) | a[i];
	uint64_t s = g->prefix6 >= 64 ? 0 : hi & ((1ULL << (64 - g->prefix6)) - 1);
	return s < g->nslots ? (long)s : -1;
}

/* ---- leases ----------------------------------------------------------------- */

char *lc_netpool_dir(void)
{
	return lc_strdup_printf("%s/net", lc_run_dir());
}

/* The pool lock's file, once known: a child forked while another thread
 * holds the lock inherits that hold (flock belongs to the open file) and
 * must drop it (lc_netpool_drop_inherited). */
static _Atomic dev_t lock_dev;
static _Atomic ino_t lock_ino;

int lc_netpool_lock(lc_error_t **err)
{
	_cleanup_free_ char *dir = lc_netpool_dir();
	if (lc_mkdir_p(dir, 0700, err) < 0)
		return -1;
	_cleanup_free_ char *path = lc_strdup_printf("%s/pool.lock", dir);
	int fd = lc_lock_file(path, LOCK_EX, err);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0) {
		lock_dev = st.st_dev;
		lock_ino = st.st_ino;
	}
	return fd;
}

void lc_netpool_drop_inherited(void)
{
	ino_t ino = lock_ino;
	dev_t dev = lock_dev;
	if (!ino) {
		/* no lock taken by this process before the fork ended: another
		 * thread may be taking the first one right now */
		_cleanup_free_ char *dir = lc_netpool_dir();
		_cleanup_free_ char *path = lc_strdup_printf("%s/pool.lock", dir);
		struct stat pst;
		if (stat(path, &pst) < 0)
			return;
		ino = pst.st_ino;
		dev = pst.st_dev;
	}
	_cleanup_dir_ DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		struct stat st;
		if (*end || end == de->d_name || fd < 3 || fd == dirfd(d))
			continue;
		if (fstat((int)fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_ino == ino && st.st_dev == dev)
			close((int)fd);
	}
}

static char *lease_path(const char *id)
{
	return lc_strdup_printf("%s/net/%s.json", lc_run_dir(), id);
}

static unsigned long long proc_starttime(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_free_ char *buf = NULL;
	lc_error_t *e = NULL;
	if (lc_read_file(path, &buf, NULL, &e) < 0) {
		lc_error_free(e);
		return 0;
	}
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* Fields after the command: state is field 3, starttime field 22. */
	p++;
	if (p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X'))
		return 0; /* dead, only not reaped yet: it holds no lease */
	for (int field = 2; field < 21 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

bool lc_lease_owner_alive(const lc_lease_t *lease)
{
	if (lease->pid <= 0)
		return false;
	if (kill(lease->pid, 0) < 0 && errno == ESRCH)
		return false;
	return proc_starttime(lease->pid) == lease->starttime;
}

static json_t *lease_to_json(const lc_lease_t *l)
{
	json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:i, s:i, s:I}",
			      "id", l->id, "slot", (int)l->slot, "veth", l->veth, "mode", l->mode,
			      "pool", l->pool.pool4, "address", l->addr4, "prefix", l->prefix4,
			      "gateway", l->gw4, "pool6", l->pool.pool6, "prefix6", l->prefix6,
			      "pid", (int)l->pid, "starttime", (json_int_t)l->starttime);
	if (l->addr6[0]) {
		json_object_set_new(o, "address6", json_string(l->addr6));
		json_object_set_new(o, "gateway6", json_string(l->gw6));
	}
	if (l->policy[0])
		json_object_set_new(o, "policy", json_string(l->policy));
	return o;
}

static void copy_str(json_t *o, const char *key, char *out, size_t len)
{
	const char *s = lc_json_str(o, key);
	snprintf(out, len, "%s", s ? s : "");
}

static int lease_from_json(json_t *o, lc_lease_t *l)
{
	memset(l, 0, sizeof(*l));
	if (!json_is_object(o))
		return -1;
	copy_str(o, "id", l->id, sizeof(l->id));
	copy_str(o, "veth", l->veth, sizeof(l->veth));
	copy_str(o, "mode", l->mode, sizeof(l->mode));
	copy_str(o, "policy", l->policy, sizeof(l->policy));
	copy_str(o, "pool", l->pool.pool4, sizeof(l->pool.pool4));
	copy_str(o, "pool6", l->pool.pool6, sizeof(l->pool.pool6));
	copy_str(o, "address", l->addr4, sizeof(l->addr4));
	copy_str(o, "gateway", l->gw4, sizeof(l->gw4));
	copy_str(o, "address6", l->addr6, sizeof(l->addr6));
	copy_str(o, "gateway6", l->gw6, sizeof(l->gw6));
	l->slot = (unsigned)json_integer_value(json_object_get(o, "slot"));
	l->prefix4 = (int)json_integer_value(json_object_get(o, "prefix"));
	l->prefix6 = (int)json_integer_value(json_object_get(o, "prefix6"));
	l->pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
	l->starttime = (unsigned long long)json_integer_value(json_object_get(o, "starttime"));
	return lc_is_sandbox_id(l->id) ? 0 : -1;
}

int lc_netpool_read(const char *id, lc_lease_t *out, lc_error_t **err)
{
	if (!lc_is_sandbox_id(id))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "'%s' is not a sandbox id", id);
	_cleanup_free_ char *path = lease_path(id);
	json_error_t jerr;
	_cleanup_json_ json_t *doc = json_load_file(path, 0, &jerr);
	if (!doc) {
		if (access(path, F_OK) < 0 && errno == ENOENT)
			return 1;
		return lc_error_set(err, LC_EXIT_INVALID, 0, "lease %s: %s", path, jerr.text);
	}
	if (lease_from_json(doc, out) < 0 || strcmp(out->id, id))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "lease %s: not a lease of sandbox %s", path, id);
	return 0;
}

int lc_netpool_list(char ***ids, lc_error_t **err)
{
	*ids = lc_xmalloc0(sizeof(char *));
	_cleanup_free_ char *dir = lc_netpool_dir();
	_cleanup_dir_ DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot read %s", dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		if (n != LC_ID_LEN + 5 || strcmp(de->d_name + LC_ID_LEN, ".json"))
			continue;
		char id[LC_ID_LEN + 1];
		memcpy(id, de->d_name, LC_ID_LEN);
		id[LC_ID_LEN] = '\0';
		if (lc_is_sandbox_id(id))
			lc_strv_push(ids, id);
	}
	return 0;
}

/* l, as this process's (its pid and start time), into path. */
static int lease_write_mine(lc_lease_t *l, const char *path, lc_error_t **err)
{
	l->pid = getpid();
	l->starttime = proc_starttime(l->pid);
	_cleanup_json_ json_t *doc = lease_to_json(l);
	_cleanup_free_ char *text = json_dumps(doc, JSON_SORT_KEYS);
	/* No fsync: a lease means nothing after a reboot (its veth and
	 * chains are gone too), and one a crash left unreadable holds
	 * nothing (gc removes it). */
	if (!text || lc_write_file_replace(path, text, strlen(text), 0600, err) < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot write lease %s", path);
	return 0;
}

/* id's lease, when process pid took it (its start time too: not a pid
 * reused) and nothing was made with it yet; 1 for any other, -1 none. */
static int unused_lease_of(const char *id, pid_t pid, lc_lease_t *out)
{
	lc_error_t *e = NULL;
	int r = lc_netpool_read(id, out, &e);
	lc_error_free(e);
	if (r != 0)
		return -1;
	return out->pid == pid && lc_lease_owner_alive(out) && if_nametoindex(out->veth) == 0 ? 0 : 1;
}

int lc_netpool_alloc(const char *id, const lc_net_pool_t *pool, const char *mode,
		     const char *policy, lc_lease_t *out, lc_error_t **err)
{
	if (!lc_is_sandbox_id(id))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "'%s' is not a sandbox id", id);
	pool_geom_t g;
	if (pool_geom(pool, &g, err) < 0)
		return -1;
	_cleanup_close_ int lock = lc_netpool_lock(err);
	if (lock < 0)
		return -1;
	_cleanup_free_ char *path = lease_path(id);
	if (access(path, F_OK) == 0)
		return lc_error_set(err, LC_EXIT_BUSY, 0, "sandbox %s already holds a network lease (%s)", id, path);

	_cleanup_free_ unsigned char *used = lc_xmalloc0(g.nslots);
	_cleanup_strv_ char **ids = NULL;
	if (lc_netpool_list(&ids, err) < 0)
		return -1;
	for (size_t i = 0; ids[i]; i++) {
		lc_lease_t l;
		lc_error_t *e = NULL;
		/* A lease that cannot be read still holds nothing we can name;
		 * gc removes it. */
		if (lc_netpool_read(ids[i], &l, &e) != 0) {
			lc_error_free(e);
			continue;
		}
		long s4 = slot_of_v4(&g, l.addr4), s6 = slot_of_v6(&g, l.addr6);
		if (s4 >= 0)
			used[s4] = 1;
		if (s6 >= 0)
			used[s6] = 1;
	}
	/* Round robin from the slot after the last one handed out: an
	 * address comes back only after the pool went round, long after the
	 * kernel forgot the connections of its previous holder. */
	_cleanup_free_ char *next_path = lc_strdup_printf("%s/net/next-slot", lc_run_dir());
	_cleanup_free_ char *next_text = NULL;
	unsigned start = 0;
	lc_error_t *ignore = NULL;
	if (lc_read_file(next_path, &next_text, NULL, &ignore) == 0)
		start = (unsigned)strtoul(next_text, NULL, 10) % g.nslots;
	lc_error_free(ignore);
	unsigned slot = g.nslots;
	for (unsigned i = 0; i < g.nslots; i++) {
		unsigned s = (start + i) % g.nslots;
		if (!used[s]) {
			slot = s;
			break;
		}
	}
	if (slot >= g.nslots)
		return lc_error_set(err, LC_EXIT_BUSY, 0,
				    "the sandbox address pool %s is exhausted (%u sandboxes hold a lease); "
				    "free one or set a larger \"net_pool\" in lcrun.json",
				    pool->pool4, g.nslots);

	lc_lease_t l;
	memset(&l, 0, sizeof(l));
	snprintf(l.id, sizeof(l.id), "%s", id);
	l.slot = slot;
	snprintf(l.veth, sizeof(l.veth), "lc%s", id);
	snprintf(l.mode, sizeof(l.mode), "%s", mode ? mode : "");
	snprintf(l.policy, sizeof(l.policy), "%s", policy ? policy : "");
	l.pool = *pool;
	slot_v4(&g, slot, 1, l.gw4);
	slot_v4(&g, slot, 2, l.addr4);
	l.prefix4 = 30;
	if (g.prefix6 >= 0) {
		slot_v6(&g, slot, 1, l.gw6);
		slot_v6(&g, slot, 2, l.addr6);
		l.prefix6 = 64;
	}
	if (lease_write_mine(&l, path, err) < 0)
		return -1;
	/* Only a hint: losing it just restarts the round at slot 0.  So it
	 * is written in place, always 11 bytes: a replace (a new file renamed
	 * over the old) frees the old one's block, and where /run is on a
	 * disk mounted with discard (this kind of machine) that waits for
	 * the discard, 0.5 ms of every networked start. */
	char next[16];
	int n = snprintf(next, sizeof(next), "%010u\n", (slot + 1) % g.nslots);
	_cleanup_close_ int nfd = open(next_path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (nfd >= 0 && pwrite(nfd, next, (size_t)n, 0) != n) {
		/* the round restarts at slot 0 */
	}
	*out = l;
	return 0;
}

int lc_netpool_adopt(const char *id, lc_lease_t *out, lc_error_t **err)
{
	lc_lease_t l;
	int r = unused_lease_of(id, getpid(), &l);
	if (r == 0) {
		*out = l;
		return 0;
	}
	return lc_error_set(err, LC_EXIT_BUSY, 0, "sandbox %s already holds a network lease%s", id,
			    r > 0 ? "" : " (unreadable)");
}

int lc_netpool_take_over(const char *id, pid_t from, lc_error_t **err)
{
	_cleanup_close_ int lock = lc_netpool_lock(err);
	if (lock < 0)
		return -1;
	lc_lease_t l;
	if (unused_lease_of(id, from, &l) != 0)
		return lc_error_set(err, LC_EXIT_BUSY, 0, "sandbox %s: no unused network lease of process %d", id,
				    (int)from);
	_cleanup_free_ char *path = lease_path(id);
	return lease_write_mine(&l, path, err);
}

int lc_netpool_release(const char *id, lc_error_t **err)
{
	if (!lc_is_sandbox_id(id))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "'%s' is not a sandbox id", id);
	_cleanup_free_ char *path = lease_path(id);
	if (unlink(path) < 0 && errno != ENOENT)
		return lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot remove lease %s", path);
	return 0;
}
