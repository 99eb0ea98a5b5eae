/* net.c — a sandbox's network: flags, policies, the veth pair (libnl-route-3)
 * and the glue between the address pool and the firewall. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include "firewall.h"
#include "netlibs.h"
#include "net.h"
#include "netpool.h"
#include "proctitle.h"
#include "util.h"

/* ---- validation ------------------------------------------------------------------ */

int lc_net_validate(const lc_net_spec_t *spec, lc_error_t **err)
{
	if (lc_net_spec_check(spec, err) < 0)
		return -1;
	if (spec->mode == LC_NET_NONE) {
		if (spec->n_allow)
			return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow needs --net allow or --net open");
		return 0;
	}
	if (geteuid() != 0)
		return lc_error_set(err, LC_EXIT_PERM, 0, "--net %s needs root (a veth pair and nftables rules on the host)",
				    lc_net_mode_name(spec->mode));
	lc_net_pool_t pool;
	if (lc_netpool_config(&pool, err) < 0)
		return -1;
	return lc_fw_check(err);
}

/* ---- links, addresses, routes (libnl-route-3) ---------------------------------------- */

static void nl_sock_freep(struct nl_sock **s)
{
	if (*s)
		nl_socket_free(*s);
}
#define _cleanup_nlsock_ __attribute__((cleanup(nl_sock_freep)))

static struct nl_sock *nl_open(lc_error_t **err)
{
	if (lc_netlibs_load(err) < 0)
		return NULL;
	struct nl_sock *sk = nl_socket_alloc();
	if (!sk) {
		lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot allocate a netlink socket");
		return NULL;
	}
	int r = nl_connect(sk, NETLINK_ROUTE);
	if (r < 0) {
		nl_socket_free(sk);
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot open a netlink socket: %s", nl_geterror(r));
		return NULL;
	}
	return sk;
}

static int __attribute__((format(printf, 3, 4))) nl_fail(lc_error_t **err, int r, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return lc_error_set(err, r == -NLE_EXIST ? LC_EXIT_BUSY : LC_EXIT_RUNTIME, 0, "%s: %s", msg, nl_geterror(r));
}

static int link_index_up(struct nl_sock *sk, const char *name, lc_error_t **err)
{
	struct rtnl_link *link = NULL;
	int r = rtnl_link_get_kernel(sk, 0, name, &link);
	if (r < 0)
		return nl_fail(err, r, "cannot find interface %s", name);
	int idx = rtnl_link_get_ifindex(link);
	struct rtnl_link *req = rtnl_link_alloc();
	rtnl_link_set_flags(req, IFF_UP);
	r = rtnl_link_change(sk, link, req, 0);
	rtnl_link_put(req);
	rtnl_link_put(link);
	if (r < 0)
		return nl_fail(err, r, "cannot bring up interface %s", name);
	return idx;
}

static int addr_add(struct nl_sock *sk, int ifindex, const char *ip, int prefix, lc_error_t **err)
{
	int fam = strchr(ip, ':') ? AF_INET6 : AF_INET;
	struct nl_addr *local = NULL;
	int r = nl_addr_parse(ip, fam, &local);
	if (r < 0)
		return nl_fail(err, r, "invalid address %s", ip);
	nl_addr_set_prefixlen(local, prefix);
	struct rtnl_addr *a = rtnl_addr_alloc();
	rtnl_addr_set_ifindex(a, ifindex);
	rtnl_addr_set_local(a, local);
	if (fam == AF_INET6)
		rtnl_addr_set_flags(a, IFA_F_NODAD); /* usable at once */
	r = rtnl_addr_add(sk, a, 0);
	rtnl_addr_put(a);
	nl_addr_put(local);
	if (r < 0)
		return nl_fail(err, r, "cannot add address %s", ip);
	return 0;
}

static int default_route(struct nl_sock *sk, int ifindex, const char *gw, lc_error_t **err)
{
	int fam = strchr(gw, ':') ? AF_INET6 : AF_INET;
	struct nl_addr *dst = NULL, *via = NULL;
	int r = nl_addr_parse("default", fam, &dst);
	if (r >= 0)
		r = nl_addr_parse(gw, fam, &via);
	if (r < 0) {
		nl_addr_put(dst);
		return nl_fail(err, r, "invalid gateway %s", gw);
	}
	struct rtnl_route *rt = rtnl_route_alloc();
	rtnl_route_set_family(rt, (uint8_t)fam);
	rtnl_route_set_table(rt, RT_TABLE_MAIN);
	rtnl_route_set_protocol(rt, RTPROT_STATIC);
	rtnl_route_set_scope(rt, RT_SCOPE_UNIVERSE);
	rtnl_route_set_dst(rt, dst);
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	rtnl_route_nh_set_ifindex(nh, ifindex);
	rtnl_route_nh_set_gateway(nh, via);
	rtnl_route_add_nexthop(rt, nh);
	r = rtnl_route_add(sk, rt, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_route_put(rt);
	nl_addr_put(dst);
	nl_addr_put(via);
	if (r < 0)
		return nl_fail(err, r, "cannot add a default route via %s", gw);
	return 0;
}

/* A netlink socket that lives in the sandbox's network namespace; also
 * lets unprivileged ICMP echo sockets be used there (ping works without
 * CAP_NET_RAW, as on most distributions' hosts). */
static struct nl_sock *nl_open_in(int netns_fd, lc_error_t **err)
{
	_cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot open /proc/thread-self/ns/net");
		return NULL;
	}
	if (setns(netns_fd, CLONE_NEWNET) < 0) {
		lc_error_set(err, LC_EXIT_RUNTIME, errno, "cannot enter the sandbox's network namespace");
		return NULL;
	}
	struct nl_sock *sk = nl_open(err);
	if (sk && lc_write_file("/proc/sys/net/ipv4/ping_group_range", "0 2147483647", err) < 0) {
		nl_socket_free(sk);
		sk = NULL;
	}
	if (setns(self, CLONE_NEWNET) < 0) {
		/* Never go on in the wrong namespace. */
		abort();
	}
	return sk;
}

static int set_sysctl_on(const char *path, lc_error_t **err)
{
	_cleanup_free_ char *cur = NULL;
	lc_error_t *e = NULL;
	if (lc_read_file(path, &cur, NULL, &e) == 0 && cur[0] == '1') {
		return 0;
	}
	lc_error_free(e);
	return lc_write_file(path, "1", err);
}

/* Creates the veth pair; *created tells the caller whether there is one
 * to remove again on error. */
static int setup_links(const lc_lease_t *l, int netns_fd, bool *created, lc_error_t **err)
{
	_cleanup_nlsock_ struct nl_sock *sk = nl_open(err);
	if (!sk)
		return -1;
	struct rtnl_link *veth = rtnl_link_veth_alloc();
	if (!veth)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot allocate veth %s", l->veth);
	rtnl_link_set_name(veth, l->veth);
	struct rtnl_link *peer = rtnl_link_veth_get_peer(veth);
	rtnl_link_set_name(peer, "eth0");
	rtnl_link_set_ns_fd(peer, netns_fd);
	rtnl_link_put(peer);
	int r = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_link_veth_release(veth);
	if (r < 0)
		return nl_fail(err, r, "cannot create veth pair %s", l->veth);
	*created = true;

	int idx = link_index_up(sk, l->veth, err);
	if (idx < 0 || addr_add(sk, idx, l->gw4, l->prefix4, err) < 0)
		return -1;
	if (l->gw6[0] && addr_add(sk, idx, l->gw6, l->prefix6, err) < 0)
		return -1;

	_cleanup_nlsock_ struct nl_sock *in = nl_open_in(netns_fd, err);
	if (!in)
		return -1;
	int eth = link_index_up(in, "eth0", err);
	if (eth < 0 || addr_add(in, eth, l->addr4, l->prefix4, err) < 0 || default_route(in, eth, l->gw4, err) < 0)
		return lc_error_wrap(err, "in the sandbox");
	if (l->addr6[0] && (addr_add(in, eth, l->addr6, l->prefix6, err) < 0 || default_route(in, eth, l->gw6, err) < 0))
		return lc_error_wrap(err, "in the sandbox");
	return 0;
}

static int delete_link(const char *name, lc_error_t **err)
{
	_cleanup_nlsock_ struct nl_sock *sk = nl_open(err);
	if (!sk)
		return -1;
	struct rtnl_link *link = NULL;
	int r = rtnl_link_get_kernel(sk, 0, name, &link);
	if (r == -NLE_OBJ_NOTFOUND || r == -NLE_NODEV)
		return 0;
	if (r < 0)
		return nl_fail(err, r, "cannot look up interface %s", name);
	r = rtnl_link_delete(sk, link);
	rtnl_link_put(link);
	/* Gone meanwhile (the sandbox's namespace died and took the pair). */
	if (r < 0 && r != -NLE_OBJ_NOTFOUND && r != -NLE_NODEV)
		return nl_fail(err, r, "cannot delete interface %s", name);
	return 0;
}

int lc_loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	int r = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (r == 0) {
		ifr.ifr_flags |= IFF_UP;
		r = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
	return r;
}

/* ---- lifecycle --------------------------------------------------------------------- */

/* False when the interface went away by itself within a moment: a
 * sandbox's veth pair goes with its network namespace, which the kernel
 * frees in the background once pid 1 is gone.  Deleting the pair
 * ourselves costs about 35 ms in the kernel (unregistering waits on RCU),
 * racing that clean-up 10-40 ms more; it usually finishes within 1-15 ms.
 * Past 100 ms (something still holds the namespace: a socket passed out
 * of the sandbox) the caller deletes it, as before. */
static bool outlives_namespace(const char *name)
{
	for (int i = 0; i < 200; i++) {
		if (if_nametoindex(name) == 0 && errno == ENODEV)
			return false;
		usleep(500);
	}
	return true;
}

static int fw_locked(int (*fn)(const lc_fw_target_t *, const lc_net_spec_t *, lc_error_t **),
		     const lc_fw_target_t *t, const lc_net_spec_t *spec, lc_error_t **err)
{
	_cleanup_close_ int lock = lc_netpool_lock(err);
	if (lock < 0)
		return -1;
	return fn(t, spec, err);
}

static int fw_remove_cb(const lc_fw_target_t *t, const lc_net_spec_t *spec, lc_error_t **err)
{
	return lc_fw_remove(t->id, err);
}

static int wait_pending(const char *id, int timeout_ms, lc_error_t **err);

int lc_net_prepare(const char *id, const lc_net_spec_t *spec, struct lc_lease **out, lc_error_t **err)
{
	*out = NULL;
	if (spec->mode == LC_NET_NONE)
		return 0;
	if (!lc_is_sandbox_id(id))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "'%s' is not a sandbox id", id);
	/* libnftables' context and its cache take about 1 MiB of fresh
	 * memory (among it 128 KiB hash tables, mmap'd one by one), a page
	 * fault for each of its pages: 230 of lcrun's 500 in a --net run,
	 * 13 us each where page-table work is dear.  One call faults it in
	 * beforehand.  Not in a threaded caller (lcd): it changes malloc's
	 * thresholds for the process's life. */
	if (lc_single_threaded())
		lc_heap_prefault(1 << 20);
	lc_net_pool_t pool;
	if (lc_netpool_config(&pool, err) < 0)
		return -1;
	lc_lease_t l;
	lc_error_t *busy = NULL;
	/* A stopped sandbox started again at once: the remainder of its last
	 * run (veth, chains, lease) may still be on its way out with an
	 * lcrun-net helper.  Wait for it rather than find the lease taken. */
	if (wait_pending(id, LC_NET_PENDING_WAIT_MS, err) < 0)
		return -1;
	if (lc_netpool_alloc(id, &pool, lc_net_mode_name(spec->mode), spec->policy, &l, &busy) < 0) {
		/* a lease this process took for id beforehand (lcd) is used */
		if (busy->exit_code != LC_EXIT_BUSY || lc_netpool_adopt(id, &l, NULL) < 0) {
			if (err)
				*err = busy;
			else
				lc_error_free(busy);
			return -1;
		}
		lc_error_free(busy);
	}
	lc_trace("net: address leased");
	/* From here on what was made is undone on error: the chains (added
	 * in one transaction, so all or nothing), the lease.  They come
	 * before the veth: its rules are in force from its first moment. */
	lc_fw_target_t t = {
		.id = id, .veth = l.veth, .addr4 = l.addr4, .addr6 = l.addr6,
		.pool4 = l.pool.pool4, .pool6 = l.pool.pool6,
	};
	if (set_sysctl_on("/proc/sys/net/ipv4/ip_forward", err) < 0)
		goto fail;
	if (l.addr6[0] && set_sysctl_on("/proc/sys/net/ipv6/conf/all/forwarding", err) < 0)
		goto fail;
	if (fw_locked(lc_fw_add, &t, spec, err) < 0)
		goto fail;
	lc_trace("net: chains added");
	*out = lc_xmalloc0(sizeof(**out));
	**out = l;
	return 0;
fail:
	fw_locked(fw_remove_cb, &t, NULL, NULL);
	lc_netpool_release(id, NULL);
	return lc_error_wrap(err, "cannot set up the network of sandbox %s", id);
}

int lc_net_attach(const char *id, const struct lc_lease *l, int netns_fd, lc_error_t **err)
{
	if (!l)
		return 0;
	bool veth = false;
	if (setup_links(l, netns_fd, &veth, err) < 0) {
		if (veth)
			delete_link(l->veth, NULL);
		return lc_error_wrap(err, "cannot set up the network of sandbox %s", id);
	}
	lc_trace("net: veth, addresses, routes");
	return 0;
}

void lc_net_unprepare(const char *id)
{
	lc_fw_target_t t = {.id = id};
	fw_locked(fw_remove_cb, &t, NULL, NULL);
	lc_netpool_release(id, NULL);
}

int lc_net_setup(const char *id, const lc_net_spec_t *spec, int netns_fd, lc_error_t **err)
{
	struct lc_lease *l = NULL;
	if (lc_net_prepare(id, spec, &l, err) < 0)
		return -1;
	int r = lc_net_attach(id, l, netns_fd, err);
	if (r < 0)
		lc_net_unprepare(id);
	free(l);
	return r;
}

/* The veth first (waiting for it to go with the namespace when the
 * sandbox's processes are gone), so that its chains stay in force for as
 * long as it exists; then the chains; the lease last: while anything else
 * might remain, gc can still find the sandbox by it, and its slot is
 * handed out again only when nothing of it is left. */
static int teardown(const char *id, bool exited, lc_error_t **err)
{
	if (!lc_is_sandbox_id(id))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "'%s' is not a sandbox id", id);
	int ret = 0;
	char veth[IF_NAMESIZE];
	snprintf(veth, sizeof(veth), "lc%s", id);
	if ((!exited || outlives_namespace(veth)) && delete_link(veth, err) < 0)
		ret = -1;
	lc_trace("net: veth gone");
	/* A veth that could not be deleted keeps its chains (gc's to
	 * remove with it later): its rules hold as long as it exists. */
	lc_fw_target_t t = {.id = id};
	if (ret == 0 && fw_locked(fw_remove_cb, &t, NULL, err) < 0)
		ret = -1;
	lc_trace("net: chains removed");
	if (ret == 0 && lc_netpool_release(id, err) < 0)
		ret = -1;
	return ret;
}

int lc_net_teardown(const char *id, lc_error_t **err)
{
	return teardown(id, false, err);
}

/* ---- the remainder: what a run leaves behind for a moment ------------------ */

/* When pid 1 is gone, what is left of the network is the veth pair,
 * which the kernel frees with the namespace (1-15 ms, up to 100 ms and
 * more under load), the chains and the lease.  None of it can carry a
 * packet of the sandbox any more, and the lease keeps its slot from
 * anyone else, so a helper takes it over and the caller returns at once.
 * The helper holds an flock on one of LC_NET_PENDING_MAX files
 * lc_run_dir()/net/pending.N holding the id: gc leaves that id alone
 * while the lock is held, and lc_net_wait_pending() waits for it.  All
 * taken: the caller does it itself, as it did before. */
static char *pending_path(unsigned k)
{
	return lc_strdup_printf("%s/net/pending.%u", lc_run_dir(), k);
}

/* A free pending file, locked, with id written into it; -1 if none. */
static int pending_take(const char *id)
{
	for (unsigned k = 0; k < LC_NET_PENDING_MAX; k++) {
		_cleanup_free_ char *path = pending_path(k);
		int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return -1;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			if (ftruncate(fd, 0) == 0 && pwrite(fd, id, LC_ID_LEN, 0) == LC_ID_LEN)
				return fd;
			close(fd);
			return -1;
		}
		close(fd);
	}
	return -1;
}

/* The id a live helper holds pending file k for, into id; false if none. */
static bool pending_held(unsigned k, char id[LC_ID_LEN + 1])
{
	_cleanup_free_ char *path = pending_path(k);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_SH | LOCK_NB) == 0)
		return false;
	ssize_t n = pread(fd, id, LC_ID_LEN, 0);
	id[n == LC_ID_LEN ? LC_ID_LEN : 0] = '\0';
	return lc_is_sandbox_id(id);
}

int lc_net_pending_take(const char *id)
{
	return lc_is_sandbox_id(id) && lc_single_threaded() ? pending_take(id) : -1;
}

int lc_net_remainder(const char *id, int slot)
{
	/* stderr is /dev/null in a helper: whatever fails stays for gc,
	 * under a lease nobody holds. */
	int ret = teardown(id, true, NULL);
	if (ret == 0 && ftruncate(slot, 0) < 0)
		ret = -1;
	return ret;
}

int lc_net_teardown_exited(const char *id, lc_error_t **err)
{
	if (!lc_is_sandbox_id(id))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "'%s' is not a sandbox id", id);
	int slot = lc_net_pending_take(id);
	int r = slot >= 0 ? lc_fork_detached(&slot, 1) : -1;
	if (r == 0) {
		lc_proc_title("lcrun-net");
		_exit(lc_net_remainder(id, slot) < 0 ? 1 : 0);
	}
	if (slot >= 0)
		close(slot); /* the lock stays with the helper */
	if (r > 0)
		return 0;
	return teardown(id, true, err);
}

/* Wait up to timeout_ms while helpers hold pending files: any (id NULL),
 * or the one for id. */
static int wait_pending(const char *id, int timeout_ms, lc_error_t **err)
{
	long long deadline = lc_now_ms() + timeout_ms;
	char held[LC_ID_LEN + 1];
	for (unsigned k = 0; k < LC_NET_PENDING_MAX; k++) {
		while (pending_held(k, held) && (!id || !strcmp(held, id))) {
			if (lc_now_ms() >= deadline)
				return lc_error_set(err, LC_EXIT_BUSY, 0,
						    "the network of sandbox %s is still being removed after %d ms", held,
						    timeout_ms);
			usleep(1000);
		}
	}
	return 0;
}

int lc_net_wait_pending(int timeout_ms, lc_error_t **err)
{
	return wait_pending(NULL, timeout_ms, err);
}

static bool strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v[i]; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

static void push_unique(char ***v, const char *s)
{
	if (!strv_has(*v, s))
		lc_strv_push(v, s);
}

int lc_net_gc(bool (*is_live)(const char *id, void *ud), void *ud, lc_error_t **err)
{
	/* Only root makes sandbox networks; a rootless gc has none to find. */
	if (geteuid() != 0)
		return 0;
	_cleanup_strv_ char **ids = NULL;
	_cleanup_strv_ char **fw = NULL;
	if (lc_netpool_list(&ids, err) < 0)
		return -1;
	if (lc_fw_list_ids(&fw, err) < 0)
		return -1;
	for (size_t i = 0; fw[i]; i++)
		push_unique(&ids, fw[i]);
	struct if_nameindex *ifs = if_nameindex();
	for (struct if_nameindex *p = ifs; p && p->if_name; p++)
		if (!strncmp(p->if_name, "lc", 2) && lc_is_sandbox_id(p->if_name + 2))
			push_unique(&ids, p->if_name + 2);
	if (ifs)
		if_freenameindex(ifs);

	_cleanup_strv_ char **pending = lc_xmalloc0(sizeof(char *));
	char held[LC_ID_LEN + 1];
	for (unsigned k = 0; k < LC_NET_PENDING_MAX; k++)
		if (pending_held(k, held))
			lc_strv_push(&pending, held);

	int cleaned = 0, ret = 0;
	for (size_t i = 0; ids[i]; i++) {
		if (is_live && is_live(ids[i], ud))
			continue;
		/* Its remainder, being removed by a live helper. */
		if (strv_has(pending, ids[i]))
			continue;
		/* A sandbox still being set up by another running lcrun has a
		 * lease before it has state; leave it to its owner. */
		lc_lease_t l;
		lc_error_t *e = NULL;
		int r = lc_netpool_read(ids[i], &l, &e);
		lc_error_free(e);
		if (r == 0 && l.pid != getpid() && lc_lease_owner_alive(&l))
			continue;
		if (lc_net_teardown(ids[i], ret < 0 ? NULL : err) < 0)
			ret = -1;
		else
			cleaned++;
	}
	return ret < 0 ? -1 : cleaned;
}

json_t *lc_net_describe(const char *id)
{
	lc_lease_t l;
	lc_error_t *e = NULL;
	if (!lc_is_sandbox_id(id) || lc_netpool_read(id, &l, &e) != 0) {
		lc_error_free(e);
		return NULL;
	}
	json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "mode", l.mode, "veth", l.veth, "address", l.addr4,
			      "gateway", l.gw4);
	if (l.addr6[0]) {
		json_object_set_new(o, "address6", json_string(l.addr6));
		json_object_set_new(o, "gateway6", json_string(l.gw6));
	}
	if (l.policy[0])
		json_object_set_new(o, "policy", json_string(l.policy));
	long long dropped = geteuid() == 0 ? lc_fw_dropped(id) : -1;
	if (dropped >= 0)
		json_object_set_new(o, "dropped_packets", json_integer(dropped));
	return o;
}
