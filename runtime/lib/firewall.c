/* firewall.c — per-sandbox nftables chains, built as JSON with jansson and
 * applied with libnftables.  See firewall.h for the layout. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <nftables/libnftables.h>

#include "firewall.h"
#include "json.h"
#include "netlibs.h"
#include "netspec.h"
#include "netpool.h"
#include "util.h"

/* Never reachable under --net open, whatever the allow list punches. */
static const char *const denied4[] = {
	"0.0.0.0/8",      /* "this network" */
	"10.0.0.0/8",     /* private */
	"100.64.0.0/10",  /* carrier-grade NAT */
	"127.0.0.0/8",    /* loopback */
	"169.254.0.0/16", /* link-local, cloud metadata (169.254.169.254) */
	"172.16.0.0/12",  /* private */
	"192.168.0.0/16", /* private */
	"224.0.0.0/4",    /* multicast */
	"240.0.0.0/4",    /* reserved, broadcast */
	NULL,
};
static const char *const denied6[] = {
	"::/127",         /* unspecified and loopback */
	"::ffff:0:0/96",  /* IPv4-mapped */
	"fc00::/7",       /* unique local */
	"fe80::/10",      /* link-local */
	"ff00::/8",       /* multicast */
	NULL,
};

/* ---- whether a rule opens only public addresses ------------------------- */

/* The first min(a, b) prefix bits of two networks agree: one holds the other. */
static bool nets_overlap(int family, const unsigned char *x, int px, const unsigned char *y, int py)
{
	int bits = px < py ? px : py;
	(void)family;
	for (int i = 0; i < bits; i++) {
		int byte = i / 8, bit = 7 - i % 8;
		if (((x[byte] >> bit) & 1) != ((y[byte] >> bit) & 1))
			return false;
	}
	return true;
}

/* r overlaps the network "CIDR" (of r's family, else false). */
static bool overlaps(const lc_net_rule_t *r, const char *cidr)
{
	lc_net_rule_t n;
	lc_error_t *e = NULL;
	if (!cidr || !*cidr || lc_net_parse_allow(cidr, &n, &e) < 0) {
		lc_error_free(e);
		return false;
	}
	return n.family == r->family && nets_overlap(r->family, r->addr, r->prefix, n.addr, n.prefix);
}

bool lc_net_rule_public(const lc_net_rule_t *r, const char **why)
{
	const char *const *denied = r->family == AF_INET ? denied4 : denied6;
	for (size_t i = 0; denied[i]; i++)
		if (overlaps(r, denied[i])) {
			*why = "a private, loopback, link-local, metadata, multicast or reserved range";
			return false;
		}
	lc_net_pool_t pool;
	lc_error_t *e = NULL;
	if (lc_netpool_config(&pool, &e) < 0) {
		lc_error_free(e);
		*why = "the sandboxes' address pool (unreadable)";
		return false;
	}
	if (overlaps(r, pool.pool4) || overlaps(r, pool.pool6)) {
		*why = "the sandboxes' address pool";
		return false;
	}
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) < 0) {
		*why = "the host's own addresses (unreadable)";
		return false;
	}
	bool host = false;
	for (struct ifaddrs *i = ifa; i && !host; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != r->family)
			continue;
		const unsigned char *a = r->family == AF_INET
			? (const unsigned char *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
			: (const unsigned char *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		host = nets_overlap(r->family, r->addr, r->prefix, a, r->family == AF_INET ? 32 : 128);
	}
	freeifaddrs(ifa);
	if (host) {
		*why = "an address of the host itself";
		return false;
	}
	return true;
}

/* ---- JSON building blocks ---------------------------------------------- */

static json_t *obj_base(const char *what, json_t *body)
{
	json_object_set_new(body, "family", json_string("inet"));
	json_object_set_new(body, "table", json_string(LC_FW_TABLE));
	return json_pack("{s:o}", what, body);
}

static json_t *cmd(const char *verb, json_t *object)
{
	return json_pack("{s:o}", verb, object);
}

static json_t *chain_obj(const char *name)
{
	return obj_base("chain", json_pack("{s:s}", "name", name));
}

static json_t *base_chain_obj(const char *name, const char *type, const char *hook, int prio)
{
	return obj_base("chain", json_pack("{s:s, s:s, s:s, s:i, s:s}", "name", name, "type", type,
					   "hook", hook, "prio", prio, "policy", "accept"));
}

static json_t *rule_obj(const char *chain, json_t *expr)
{
	return obj_base("rule", json_pack("{s:s, s:o}", "chain", chain, "expr", expr));
}

static json_t *match(const char *op, json_t *left, json_t *right)
{
	return json_pack("{s:{s:s, s:o, s:o}}", "match", "op", op, "left", left, "right", right);
}

static json_t *payload(const char *proto, const char *field)
{
	return json_pack("{s:{s:s, s:s}}", "payload", "protocol", proto, "field", field);
}

static json_t *meta(const char *key)
{
	return json_pack("{s:{s:s}}", "meta", "key", key);
}

static json_t *verdict(const char *v)
{
	return json_pack("{s:n}", v);
}

static json_t *counter(void)
{
	return json_pack("{s:n}", "counter");
}

/* "10.0.0.0/8" -> {"prefix": {"addr": "10.0.0.0", "len": 8}}; a full-length
 * prefix is the bare address. */
static json_t *prefix_json(const char *cidr)
{
	char why[128];
	int fam, pfx;
	unsigned char a[16];
	char s[INET6_ADDRSTRLEN];
	if (lc_cidr_parse(cidr, &fam, a, &pfx, why, sizeof(why)) < 0)
		return NULL;
	inet_ntop(fam, a, s, sizeof(s));
	if (pfx == (fam == AF_INET ? 32 : 128))
		return json_string(s);
	return json_pack("{s:{s:s, s:i}}", "prefix", "addr", s, "len", pfx);
}

static json_t *rule_prefix_json(const lc_net_rule_t *r)
{
	char s[INET6_ADDRSTRLEN + 8];
	char a[INET6_ADDRSTRLEN];
	inet_ntop(r->family, r->addr, a, sizeof(a));
	snprintf(s, sizeof(s), "%s/%d", a, r->prefix);
	return prefix_json(s);
}

static json_t *ct_established(void)
{
	return match("in", json_pack("{s:{s:s}}", "ct", "key", "state"),
		     json_pack("[s, s]", "established", "related"));
}

/* An allow rule: daddr in the prefix [and TCP/UDP to one of the ports]. */
static json_t *allow_expr(const lc_net_rule_t *r)
{
	json_t *expr = json_array();
	json_array_append_new(expr, match("==", payload(r->family == AF_INET ? "ip" : "ip6", "daddr"),
					  rule_prefix_json(r)));
	if (r->n_ports) {
		json_t *ports = json_array();
		for (size_t i = 0; i < r->n_ports; i++)
			json_array_append_new(ports, json_integer(r->ports[i]));
		json_array_append_new(expr, match("==", meta("l4proto"), json_pack("{s:[s, s]}", "set", "tcp", "udp")));
		json_array_append_new(expr, match("==", payload("th", "dport"), json_pack("{s:o}", "set", ports)));
	}
	json_array_append_new(expr, verdict("accept"));
	return expr;
}

static bool cidr_within(const char *inner, const char *outer)
{
	int f1, f2, p1, p2;
	unsigned char a1[16], a2[16];
	if (lc_cidr_parse(inner, &f1, a1, &p1, NULL, 0) < 0 || lc_cidr_parse(outer, &f2, a2, &p2, NULL, 0) < 0)
		return false;
	if (f1 != f2 || p1 < p2)
		return false;
	for (int bit = 0; bit < p2; bit++)
		if ((a1[bit / 8] ^ a2[bit / 8]) & (0x80 >> (bit % 8)))
			return false;
	return true;
}

/* The always-denied set of one family, plus the pool when it lies outside
 * of it (intervals of an anonymous set must not overlap). */
static json_t *denied_set(const char *const *list, const char *pool)
{
	json_t *set = json_array();
	bool covered = !pool || !*pool;
	for (size_t i = 0; list[i]; i++) {
		json_array_append_new(set, prefix_json(list[i]));
		if (!covered && cidr_within(pool, list[i]))
			covered = true;
	}
	if (!covered)
		json_array_append_new(set, prefix_json(pool));
	return json_pack("{s:o}", "set", set);
}

static void add_rule(json_t *cmds, const char *chain, json_t *expr)
{
	json_array_append_new(cmds, cmd("add", rule_obj(chain, expr)));
}

static json_t *element(const char *map, json_t *elem)
{
	return obj_base("element", json_pack("{s:s, s:[o]}", "name", map, "elem", elem));
}

static json_t *jump_elem(const char *ifname, const char *chain)
{
	return json_pack("[s, {s:{s:s}}]", ifname, "jump", "target", chain);
}

static void chain_names(const char *id, char out[64], char in[64], char host[64])
{
	snprintf(out, 64, "out_%s", id);
	snprintf(in, 64, "in_%s", id);
	snprintf(host, 64, "host_%s", id);
}

/* ---- documents ------------------------------------------------------------ */

json_t *lc_fw_skeleton_json(unsigned missing)
{
	json_t *cmds = json_array();
	/* "add" of a table, map or set that exists changes nothing. */
	json_array_append_new(cmds, cmd("add", json_pack("{s:{s:s, s:s}}", "table", "family", "inet", "name", LC_FW_TABLE)));
	static const char *const vmaps[] = {"fwd_in", "fwd_out", "host_in", NULL};
	for (size_t i = 0; vmaps[i]; i++)
		json_array_append_new(cmds, cmd("add", obj_base("map", json_pack("{s:s, s:s, s:s}", "name", vmaps[i],
										      "type", "ifname", "map", "verdict"))));
	json_array_append_new(cmds, cmd("add", obj_base("set", json_pack("{s:s, s:s}", "name", "masq", "type", "ifname"))));
	/* A base chain comes with its rules, so it is added only when it is
	 * missing: never a rule twice. */
	if (missing & LC_FW_FORWARD) {
		json_array_append_new(cmds, cmd("add", base_chain_obj("forward", "filter", "forward", 0)));
		/* Packets to a sandbox first: replies only, whatever the
		 * sender's own policy says; then packets from a sandbox. */
		add_rule(cmds, "forward", json_pack("[{s:{s:o, s:s}}]", "vmap", "key", meta("oifname"), "data", "@fwd_in"));
		add_rule(cmds, "forward", json_pack("[{s:{s:o, s:s}}]", "vmap", "key", meta("iifname"), "data", "@fwd_out"));
	}
	if (missing & LC_FW_INPUT) {
		json_array_append_new(cmds, cmd("add", base_chain_obj("input", "filter", "input", 0)));
		add_rule(cmds, "input", json_pack("[{s:{s:o, s:s}}]", "vmap", "key", meta("iifname"), "data", "@host_in"));
	}
	if (missing & LC_FW_POSTROUTING) {
		json_array_append_new(cmds, cmd("add", base_chain_obj("postrouting", "nat", "postrouting", 100)));
		add_rule(cmds, "postrouting", json_pack("[o, o]", match("==", meta("iifname"), json_string("@masq")),
							verdict("masquerade")));
	}
	return json_pack("{s:o}", "nftables", cmds);
}

json_t *lc_fw_sandbox_json(const lc_fw_target_t *t, const lc_net_spec_t *spec)
{
	char out[64], in[64], host[64];
	chain_names(t->id, out, in, host);
	json_t *cmds = json_array();
	json_array_append_new(cmds, cmd("add", chain_obj(out)));
	json_array_append_new(cmds, cmd("add", chain_obj(in)));
	json_array_append_new(cmds, cmd("add", chain_obj(host)));

	/* out: from the sandbox through the host. */
	add_rule(cmds, out, json_pack("[o, o]", ct_established(), verdict("accept")));
	/* Only the sandbox's own source addresses leave (no spoofing). */
	add_rule(cmds, out, json_pack("[o, o, o]", match("!=", payload("ip", "saddr"), json_string(t->addr4)),
				      counter(), verdict("drop")));
	if (t->addr6 && *t->addr6)
		add_rule(cmds, out, json_pack("[o, o, o]", match("!=", payload("ip6", "saddr"), json_string(t->addr6)),
					      counter(), verdict("drop")));
	else
		add_rule(cmds, out, json_pack("[o, o, o]", match("==", meta("nfproto"), json_string("ipv6")),
					      counter(), verdict("drop")));
	for (size_t i = 0; i < spec->n_allow; i++)
		add_rule(cmds, out, allow_expr(&spec->allow[i]));
	if (spec->mode == LC_NET_OPEN) {
		add_rule(cmds, out, json_pack("[o, o, o]", match("==", payload("ip", "daddr"), denied_set(denied4, t->pool4)),
					      counter(), verdict("drop")));
		add_rule(cmds, out, json_pack("[o, o, o]", match("==", payload("ip6", "daddr"), denied_set(denied6, t->pool6)),
					      counter(), verdict("drop")));
		add_rule(cmds, out, json_pack("[o]", verdict("accept")));
	} else {
		add_rule(cmds, out, json_pack("[o, o]", counter(), verdict("drop")));
	}

	/* in: to the sandbox; nobody opens a connection into it. */
	add_rule(cmds, in, json_pack("[o, o]", ct_established(), verdict("accept")));
	add_rule(cmds, in, json_pack("[o, o]", counter(), verdict("drop")));

	/* host: from the sandbox to the host's own addresses. */
	add_rule(cmds, host, json_pack("[o, o]", ct_established(), verdict("accept")));
	add_rule(cmds, host, json_pack("[o, o]",
				       match("==", payload("icmpv6", "type"),
					     json_pack("{s:[s, s]}", "set", "nd-neighbor-solicit", "nd-neighbor-advert")),
				       verdict("accept")));
	for (size_t i = 0; i < spec->n_allow; i++)
		add_rule(cmds, host, allow_expr(&spec->allow[i]));
	add_rule(cmds, host, json_pack("[o, o]", counter(), verdict("drop")));

	json_array_append_new(cmds, cmd("add", element("fwd_out", jump_elem(t->veth, out))));
	json_array_append_new(cmds, cmd("add", element("fwd_in", jump_elem(t->veth, in))));
	json_array_append_new(cmds, cmd("add", element("host_in", jump_elem(t->veth, host))));
	json_array_append_new(cmds, cmd("add", element("masq", json_string(t->veth))));
	return json_pack("{s:o}", "nftables", cmds);
}

/* ---- running ------------------------------------------------------------------ */

static void nft_freep(struct nft_ctx **c)
{
	if (*c)
		nft_ctx_free(*c);
}
#define _cleanup_nft_ __attribute__((cleanup(nft_freep)))

static struct nft_ctx *nft_open(lc_error_t **err)
{
	if (lc_netlibs_load(err) < 0)
		return NULL;
	/* libnftables ends the whole process when it cannot open its netlink
	 * socket; find out first, and fail like a library should. */
	int probe = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (probe < 0) {
		lc_error_set(err, errno == EPERM || errno == EACCES ? LC_EXIT_PERM : LC_EXIT_RUNTIME, errno,
			     "this host has no usable nftables (nfnetlink)");
		return NULL;
	}
	close(probe);
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx) {
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot initialise libnftables");
		return NULL;
	}
	/* JSON in and out; messages into buffers so they reach the error. */
	nft_ctx_output_set_flags(ctx, NFT_CTX_OUTPUT_JSON);
	nft_ctx_buffer_output(ctx);
	nft_ctx_buffer_error(ctx);
	return ctx;
}

/* The first line of libnftables' error text, for a one-line message. */
static char *nft_errline(struct nft_ctx *ctx)
{
	const char *e = nft_ctx_get_error_buffer(ctx);
	if (!e || !*e)
		return strdup("unknown error");
	size_t n = strcspn(e, "\n");
	return strndup(e, n);
}

static int nft_run(struct nft_ctx *ctx, const char *buf, const char *what, lc_error_t **err)
{
	if (nft_run_cmd_from_buffer(ctx, buf) == 0)
		return 0;
	int e = errno;
	_cleanup_free_ char *line = nft_errline(ctx);
	int code = LC_EXIT_RUNTIME;
	if (strstr(line, "Operation not permitted") || e == EPERM)
		code = LC_EXIT_PERM;
	return lc_error_set(err, code, 0, "nftables: cannot %s: %s", what, line);
}

static int nft_run_json(struct nft_ctx *ctx, json_t *doc, const char *what, lc_error_t **err)
{
	_cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT);
	if (!text)
		return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "nftables: cannot %s", what);
	return nft_run(ctx, text, what, err);
}

/* ---- raw nfnetlink questions ---------------------------------------------------
 *
 * Two questions need no libnftables (and none of its context, nor its
 * fetch of the ruleset, milliseconds each here): is nf_tables there and
 * may we use it, and does a chain exist.  One request with an ACK each. */

static int nfnl_socket(void)
{
	return socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
}

/* Send req (its seq set), read up to its ACK: 0, or the negative errno
 * the kernel answered (a read or send that failed: its -errno). */
static int nfnl_ask(int s, struct nlmsghdr *req)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	req->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	if (sendto(s, req, req->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	for (;;) {
		char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		int len = (int)n; /* signed: NLMSG_NEXT may take it below 0 */
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq != req->nlmsg_seq)
				continue; /* the answer's data (NEWGEN, NEWCHAIN) */
			const struct nlmsgerr *e = NLMSG_DATA(h);
			return h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)) ? -EBADMSG : e->error;
		}
	}
}

struct nfnl_req {
	struct nlmsghdr nh;
	struct nfgenmsg g;
	char attrs[128];
};

static void nfnl_req_init(struct nfnl_req *r, int type, int family, unsigned seq)
{
	memset(r, 0, sizeof(*r));
	r->nh.nlmsg_len = NLMSG_LENGTH(sizeof(r->g));
	r->nh.nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
	r->nh.nlmsg_seq = seq;
	r->g.nfgen_family = (uint8_t)family;
	r->g.version = NFNETLINK_V0;
}

static void nfnl_put_str(struct nfnl_req *r, int type, const char *v)
{
	size_t len = strlen(v) + 1;
	struct nlattr *a = (struct nlattr *)((char *)&r->nh + NLMSG_ALIGN(r->nh.nlmsg_len));
	a->nla_type = (uint16_t)type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, v, len);
	r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/* One NFT_MSG_GETGEN: what "list tables" through libnftables told
 * (nf_tables there, and the right to use it), without loading libnftables
 * and without its listing of the whole ruleset (about 8 ms of a --net
 * run's start here, before anything of the sandbox was made). */
int lc_fw_check(lc_error_t **err)
{
	_cleanup_close_ int s = nfnl_socket();
	if (s < 0)
		return lc_error_set(err, errno == EPERM || errno == EACCES ? LC_EXIT_PERM : LC_EXIT_RUNTIME, errno,
				    "this host has no usable nftables (nfnetlink)");
	struct nfnl_req r;
	nfnl_req_init(&r, NFT_MSG_GETGEN, AF_UNSPEC, 1);
	int e = -nfnl_ask(s, &r.nh);
	if (e == 0)
		return 0;
	if (e == EPERM || e == EACCES)
		return lc_error_set(err, LC_EXIT_PERM, e,
				    "network modes allow and open need root (CAP_NET_ADMIN on the host): nftables");
	return lc_error_set(err, LC_EXIT_RUNTIME, e, "this host has no usable nftables (nf_tables)");
}

/* Which of the table's base chains are missing (LC_FW_* bits), or -1
 * when nfnetlink did not say (the caller lists them with libnftables). */
static const struct {
	const char *name;
	unsigned bit;
} base_chains[] = { { "forward", LC_FW_FORWARD }, { "input", LC_FW_INPUT }, { "postrouting", LC_FW_POSTROUTING } };
#define N_BASE_CHAINS (sizeof(base_chains) / sizeof(base_chains[0]))

static int base_chains_missing(void)
{
	_cleanup_close_ int s = nfnl_socket();
	if (s < 0)
		return -1;
	int missing = 0;
	for (unsigned i = 0; i < N_BASE_CHAINS; i++) {
		struct nfnl_req r;
		nfnl_req_init(&r, NFT_MSG_GETCHAIN, NFPROTO_INET, i + 1);
		nfnl_put_str(&r, NFTA_CHAIN_TABLE, LC_FW_TABLE);
		nfnl_put_str(&r, NFTA_CHAIN_NAME, base_chains[i].name);
		int e = nfnl_ask(s, &r.nh);
		if (e == -ENOENT)
			missing |= (int)base_chains[i].bit;
		else if (e != 0)
			return -1;
	}
	return missing;
}

/* What the last command listed, as JSON. */
static json_t *listing(struct nft_ctx *ctx, lc_error_t **err)
{
	json_error_t jerr;
	json_t *doc = json_loads(nft_ctx_get_output_buffer(ctx), 0, &jerr);
	if (!doc)
		lc_error_set(err, LC_EXIT_RUNTIME, 0, "nftables: unreadable listing: %s", jerr.text);
	return doc;
}

/* The table as libnftables lists it, or NULL (with *absent) when there is
 * no table. */
static json_t *list_table(struct nft_ctx *ctx, bool *absent, lc_error_t **err)
{
	*absent = false;
	if (nft_run_cmd_from_buffer(ctx, "list table inet " LC_FW_TABLE) != 0) {
		_cleanup_free_ char *line = nft_errline(ctx);
		if (strstr(line, "No such file or directory")) {
			*absent = true;
			return NULL;
		}
		lc_error_set(err, strstr(line, "Operation not permitted") ? LC_EXIT_PERM : LC_EXIT_RUNTIME, 0,
			     "nftables: cannot list table inet %s: %s", LC_FW_TABLE, line);
		return NULL;
	}
	return listing(ctx, err);
}

/* libnftables opened and the table listed: 0 with *doc, 1 when there is
 * no table yet, -1 on error. */
static int open_and_list(struct nft_ctx **ctx, json_t **doc, lc_error_t **err)
{
	*doc = NULL;
	*ctx = nft_open(err);
	if (!*ctx)
		return -1;
	bool absent;
	*doc = list_table(*ctx, &absent, err);
	return *doc ? 0 : absent ? 1 : -1;
}

/* Walk the listing: call fn for every chain name and every element key of
 * the maps and the set. */
typedef void (*walk_fn)(const char *kind, const char *container, const char *name, void *ud);

static void walk_table(json_t *doc, walk_fn fn, void *ud)
{
	json_t *items = json_object_get(doc, "nftables");
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it) {
		json_t *c = json_object_get(it, "chain");
		if (c) {
			fn("chain", NULL, lc_json_str(c, "name"), ud);
			continue;
		}
		json_t *m = json_object_get(it, "map");
		if (!m)
			m = json_object_get(it, "set");
		if (!m)
			continue;
		const char *mname = lc_json_str(m, "name");
		size_t j;
		json_t *e;
		json_array_foreach(json_object_get(m, "elem"), j, e) {
			json_t *key = json_is_array(e) ? json_array_get(e, 0) : e;
			if (json_is_string(key))
				fn("element", mname, json_string_value(key), ud);
		}
	}
}

/* Sandbox id named by a chain ("out_ID") or an element ("lcID"), or NULL. */
static const char *id_of(const char *kind, const char *name, char buf[LC_ID_LEN + 1])
{
	if (!name)
		return NULL;
	const char *p = NULL;
	if (!strcmp(kind, "chain")) {
		const char *us = strchr(name, '_');
		if (us && (!strncmp(name, "out_", 4) || !strncmp(name, "in_", 3) || !strncmp(name, "host_", 5)))
			p = us + 1;
	} else if (!strncmp(name, "lc", 2)) {
		p = name + 2;
	}
	if (!p || !lc_is_sandbox_id(p))
		return NULL;
	memcpy(buf, p, LC_ID_LEN + 1);
	return buf;
}

struct removal {
	const char *id;
	json_t *cmds;
	json_t *chains; /* flushed and deleted after the elements */
};

static void collect_removal(const char *kind, const char *container, const char *name, void *ud)
{
	struct removal *r = ud;
	char buf[LC_ID_LEN + 1];
	const char *id = id_of(kind, name, buf);
	if (!id || strcmp(id, r->id))
		return;
	if (!strcmp(kind, "chain")) {
		json_array_append_new(r->chains, cmd("flush", chain_obj(name)));
		json_array_append_new(r->chains, cmd("delete", chain_obj(name)));
		return;
	}
	json_t *key = json_string(name);
	json_array_append_new(r->cmds, cmd("delete", element(container, key)));
}

static bool is_nfnetlink(int fd)
{
	int dom = 0, proto = 0;
	socklen_t l = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 || dom != AF_NETLINK)
		return false;
	l = sizeof(int);
	return getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) == 0 && proto == NETLINK_NETFILTER;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Closing the last reference to a netfilter netlink socket makes the
 * kernel finish freeing what earlier transactions deleted (nf_tables'
 * destroy work, which waits for an RCU grace period: 10-15 ms here) before
 * close(2) returns.  The chains are gone once the commit is acknowledged;
 * only the freeing is left.  So after a deleting commit a grandchild takes
 * a reference to the socket and drops it when the caller has closed its
 * own: the wait happens there, off the caller's path.  It keeps no other
 * descriptor (not even stdio), lives one grace period, and is reaped by
 * init (the middle process exits at once).  Returns the fd whose close
 * releases it, or -1 (then the caller waits as before). */
static int release_elsewhere(void)
{
	/* The descriptors the grandchild keeps: the netfilter sockets (found
	 * here, where opendir may allocate) and the pipe's read end. */
	int keep[9], n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	struct dirent *de;
	while ((de = readdir(d)) && n < 8) {
		int fd = atoi(de->d_name);
		if (fd > 2 && fd != dirfd(d) && is_nfnetlink(fd))
			keep[n++] = fd;
	}
	closedir(d);
	int p[2];
	if (!n || pipe2(p, O_CLOEXEC) < 0)
		return -1;
	keep[n++] = p[0];
	qsort(keep, (size_t)n, sizeof(int), cmp_int);
	pid_t mid = fork();
	if (mid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (mid == 0) {
		/* Only async-signal-safe calls from here: the caller may be
		 * a thread of lcd. */
		if (fork() != 0)
			_exit(0);
		unsigned from = 0; /* stdio too: a caller reading lcrun's
				      output to its end must not wait for us */
		for (int i = 0; i < n; i++) {
			if ((unsigned)keep[i] > from)
				syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0U);
			from = (unsigned)keep[i] + 1;
		}
		syscall(SYS_close_range, from, ~0U, 0U);
		char c;
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
		;
	return p[1];
}

/* Everything lc_fw_sandbox_json() adds for id, as one deleting batch: it
 * fails as a whole when any of it is missing. */
static json_t *removal_of_all(const char *id)
{
	struct removal r = {.id = id, .cmds = json_array(), .chains = json_array()};
	char veth[LC_ID_LEN + 3], names[3][64];
	snprintf(veth, sizeof(veth), "lc%s", id);
	static const char *const maps[] = {"fwd_out", "fwd_in", "host_in", "masq"};
	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
		collect_removal("element", maps[i], veth, &r);
	chain_names(id, names[0], names[1], names[2]);
	for (size_t i = 0; i < 3; i++)
		collect_removal("chain", NULL, names[i], &r);
	json_array_extend(r.cmds, r.chains);
	json_decref(r.chains);
	return json_pack("{s:o}", "nftables", r.cmds);
}

int lc_fw_remove(const char *id, lc_error_t **err)
{
	_cleanup_close_ int release = -1; /* closed after ctx (declared first) */
	_cleanup_nft_ struct nft_ctx *ctx = nft_open(err);
	if (!ctx)
		return -1;
	/* A whole sandbox, as teardown finds it: no listing of the table
	 * (1-2 ms, growing with the sandboxes).  Only what a failed set-up or
	 * a crash left in part needs the listing below. */
	_cleanup_json_ json_t *all = removal_of_all(id);
	if (nft_run_json(ctx, all, "remove the chains of sandbox", NULL) == 0) {
		release = release_elsewhere();
		return 0;
	}
	bool absent;
	_cleanup_json_ json_t *doc = list_table(ctx, &absent, err);
	if (!doc)
		return absent ? 0 : -1;
	struct removal r = {.id = id, .cmds = json_array(), .chains = json_array()};
	walk_table(doc, collect_removal, &r);
	json_array_extend(r.cmds, r.chains);
	json_decref(r.chains);
	_cleanup_json_ json_t *batch = json_pack("{s:o}", "nftables", r.cmds);
	if (!json_array_size(r.cmds))
		return 0;
	if (nft_run_json(ctx, batch, "remove the chains of sandbox", err) < 0)
		return lc_error_wrap(err, "sandbox %s", id);
	release = release_elsewhere();
	return 0;
}

static void collect_ids(const char *kind, const char *container, const char *name, void *ud)
{
	char ***ids = ud;
	char buf[LC_ID_LEN + 1];
	const char *id = id_of(kind, name, buf);
	if (!id)
		return;
	for (size_t i = 0; (*ids)[i]; i++)
		if (!strcmp((*ids)[i], id))
			return;
	lc_strv_push(ids, id);
}

int lc_fw_list_ids(char ***ids, lc_error_t **err)
{
	*ids = lc_xmalloc0(sizeof(char *));
	_cleanup_nft_ struct nft_ctx *ctx = nft_open(err);
	if (!ctx)
		return -1;
	bool absent;
	_cleanup_json_ json_t *doc = list_table(ctx, &absent, err);
	if (!doc)
		return absent ? 0 : -1;
	walk_table(doc, collect_ids, ids);
	return 0;
}

/* Every inet chain (no rules, sets or elements), or NULL. */
static json_t *list_chains(struct nft_ctx *ctx, lc_error_t **err)
{
	if (nft_run(ctx, "list chains inet", "list the chains of table inet " LC_FW_TABLE, err) < 0)
		return NULL;
	return listing(ctx, err);
}

static bool has_chain(json_t *doc, const char *name)
{
	size_t i;
	json_t *it;
	json_array_foreach(json_object_get(doc, "nftables"), i, it) {
		json_t *c = json_object_get(it, "chain");
		const char *t = lc_json_str(c, "table");
		const char *n = lc_json_str(c, "name");
		if (t && n && !strcmp(t, LC_FW_TABLE) && !strcmp(n, name))
			return true;
	}
	return false;
}

int lc_fw_add(const lc_fw_target_t *t, const lc_net_spec_t *spec, lc_error_t **err)
{
	_cleanup_nft_ struct nft_ctx *ctx = NULL;
	_cleanup_json_ json_t *doc = NULL;
	ctx = nft_open(err);
	if (!ctx)
		return -1;
	/* A new table, or one whose base chains someone deleted: add what
	 * is missing, leaving the other sandboxes' chains as they are.
	 * Three GETCHAINs (0.1 ms) say which; libnftables' listing of the
	 * chains (3 ms here) only where they could not. */
	int found = base_chains_missing();
	unsigned missing = found > 0 ? (unsigned)found : 0;
	if (found < 0) {
		if (!(doc = list_chains(ctx, err)))
			return -1;
		for (unsigned i = 0; i < N_BASE_CHAINS; i++)
			if (!has_chain(doc, base_chains[i].name))
				missing |= base_chains[i].bit;
	}
	if (missing) {
		_cleanup_json_ json_t *skel = lc_fw_skeleton_json(missing);
		if (nft_run_json(ctx, skel, "create table inet " LC_FW_TABLE, err) < 0)
			return -1;
	}
	_cleanup_json_ json_t *add = lc_fw_sandbox_json(t, spec);
	if (nft_run_json(ctx, add, "add the chains of sandbox", err) < 0)
		return lc_error_wrap(err, "sandbox %s", t->id);
	return 0;
}

long long lc_fw_dropped(const char *id)
{
	_cleanup_error_ lc_error_t *e = NULL;
	_cleanup_nft_ struct nft_ctx *ctx = NULL;
	_cleanup_json_ json_t *doc = NULL;
	if (open_and_list(&ctx, &doc, &e) != 0)
		return -1;
	char out[64], in[64], host[64];
	chain_names(id, out, in, host);
	long long n = 0;
	size_t i, j;
	json_t *it, *x;
	json_array_foreach(json_object_get(doc, "nftables"), i, it) {
		json_t *rule = json_object_get(it, "rule");
		const char *chain = lc_json_str(rule, "chain");
		if (!chain || (strcmp(chain, out) && strcmp(chain, host)))
			continue;
		json_array_foreach(json_object_get(rule, "expr"), j, x) {
			json_t *c = json_object_get(x, "counter");
			if (c)
				n += json_integer_value(json_object_get(c, "packets"));
		}
	}
	return n;
}
