/* Unit tests for net.c, netpool.c and firewall.c: parsing, policy files,
 * the nftables JSON of a sandbox, and the address pool. */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "firewall.h"
#include "net.h"
#include "netpool.h"
#include "util.h"

/* ---- helpers ------------------------------------------------------------ */

static char *tmpdir;

static void tmp_setup(void)
{
	char tmpl[] = "/tmp/lcnet-test.XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	tmpdir = strdup(tmpl);
	char *state = lc_strdup_printf("%s/run", tmpdir);
	char *etc = lc_strdup_printf("%s/etc", tmpdir);
	setenv("LCRUN_STATE_DIR", state, 1);
	setenv("LCRUN_ETC_DIR", etc, 1);
	free(state);
	free(etc);
}

static void tmp_teardown(void)
{
	lc_rm_rf(tmpdir, NULL);
	free(tmpdir);
	tmpdir = NULL;
	unsetenv("LCRUN_STATE_DIR");
	unsetenv("LCRUN_ETC_DIR");
}

static void write_file(const char *path, const char *text)
{
	_cleanup_free_ char *dir = strdup(path);
	*strrchr(dir, '/') = '\0';
	ck_assert_int_eq(lc_mkdir_p(dir, 0755, NULL), 0);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* Parse an --allow value; returns the error message (to free) or NULL. */
static char *allow_err(const char *arg, int *code)
{
	lc_net_rule_t r;
	lc_error_t *e = NULL;
	if (lc_net_parse_allow(arg, &r, &e) == 0)
		return NULL;
	char *m = strdup(e->msg);
	if (code)
		*code = e->exit_code;
	lc_error_free(e);
	return m;
}

static void rule_str(const char *arg, char *buf, size_t len)
{
	lc_net_rule_t r;
	lc_error_t *e = NULL;
	ck_assert_msg(lc_net_parse_allow(arg, &r, &e) == 0, "%s: %s", arg, e ? e->msg : "");
	lc_net_rule_format(&r, buf, len);
}

/* ---- parsing --------------------------------------------------------------- */

START_TEST(test_allow_v4)
{
	lc_net_rule_t r;
	ck_assert_int_eq(lc_net_parse_allow("198.51.100.0/24:443,80", &r, NULL), 0);
	ck_assert_int_eq(r.family, AF_INET);
	ck_assert_int_eq(r.prefix, 24);
	ck_assert_int_eq(r.addr[0], 198);
	ck_assert_int_eq(r.addr[2], 100);
	ck_assert_int_eq(r.n_ports, 2);
	ck_assert_int_eq(r.ports[0], 443);
	ck_assert_int_eq(r.ports[1], 80);
}
END_TEST

START_TEST(test_allow_forms)
{
	/* What --allow takes, and the rule it means (as formatted back). */
	static const struct {
		const char *arg, *rule;
	} cases[] = {
		{"203.0.113.7", "203.0.113.7/32"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"0.0.0.0/0:53", "0.0.0.0/0:53"},
		{"1.2.3.4:22,22,23", "1.2.3.4/32:22,23"}, /* duplicates fold */
		{"[2001:db8::/32]:443", "[2001:db8::/32]:443"},
		{"2001:db8::/32", "[2001:db8::/32]"},
		{"2001:db8::1", "[2001:db8::1/128]"},
		{"[2001:db8:a::10]:80,8080", "[2001:db8:a::10/128]:80,8080"},
		{"2001:db8::/32:443", "[2001:db8::/32]:443"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[256];
		rule_str(cases[i].arg, buf, sizeof(buf));
		ck_assert_str_eq(buf, cases[i].rule);
	}
	lc_net_rule_t r;
	ck_assert_int_eq(lc_net_parse_allow("[::/0]", &r, NULL), 0);
	ck_assert_int_eq(r.family, AF_INET6);
	ck_assert_int_eq(r.prefix, 0);
	ck_assert_int_eq(r.n_ports, 0);
}
END_TEST

START_TEST(test_allow_bad)
{
	static const struct {
		const char *arg, *msg;
	} cases[] = {
		{"300.1.1.1/8", "--allow '300.1.1.1/8': '300.1.1.1' is not an IPv4 or IPv6 address"},
		{"10.0.0.1/8", "--allow '10.0.0.1/8': '10.0.0.1/8' has host bits set"},
		{"10.0.0.0/33", "--allow '10.0.0.0/33': '10.0.0.0/33': prefix length is larger than the address"},
		{"10.0.0.0/", "--allow '10.0.0.0/': '10.0.0.0/' has no prefix length after '/'"},
		{"10.0.0.0/8:0", "--allow '10.0.0.0/8:0': invalid port '0' (expected 1-65535)"},
		{"10.0.0.0/8:65536", "--allow '10.0.0.0/8:65536': invalid port '65536' (expected 1-65535)"},
		{"10.0.0.0/8:80,", "--allow '10.0.0.0/8:80,': invalid port '' (expected 1-65535)"},
		{"10.0.0.0/8:http", "--allow '10.0.0.0/8:http': invalid port 'http' (expected 1-65535)"},
		{"[2001:db8::/32", "--allow '[2001:db8::/32': missing ']'"},
		{"[2001:db8::/32]443", "--allow '[2001:db8::/32]443': expected ':PORT' after ']'"},
		{"2001:db8::/129", "--allow '2001:db8::/129': '2001:db8::/129' has an invalid prefix length"},
		{"example.com:443", "--allow 'example.com:443': 'example.com' is not an IPv4 or IPv6 address"},
		{"", "--allow needs CIDR[:PORT[,PORT...]]"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int code = 0;
		_cleanup_free_ char *m = allow_err(cases[i].arg, &code);
		ck_assert_msg(m != NULL, "'%s' was accepted", cases[i].arg);
		ck_assert_str_eq(m, cases[i].msg);
		ck_assert_int_eq(code, LC_EXIT_USAGE);
	}
	/* 33 distinct ports are one too many. */
	char big[512] = "10.0.0.0/8:";
	for (int p = 1; p <= 33; p++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "%s%d", p > 1 ? "," : "", p);
	_cleanup_free_ char *m = allow_err(big, NULL);
	ck_assert_ptr_nonnull(strstr(m, "more than 32 ports"));
}
END_TEST

START_TEST(test_host_and_mode)
{
	lc_host_entry_t h;
	lc_error_t *e = NULL;
	ck_assert_int_eq(lc_net_parse_host("api.example.com:198.51.100.10", &h, NULL), 0);
	ck_assert_str_eq(h.name, "api.example.com");
	ck_assert_str_eq(h.ip, "198.51.100.10");
	free(h.name);
	free(h.ip);
	ck_assert_int_eq(lc_net_parse_host("v6.example:[2001:db8::10]", &h, NULL), 0);
	ck_assert_str_eq(h.ip, "2001:db8::10");
	free(h.name);
	free(h.ip);
	ck_assert_int_eq(lc_net_parse_host("v6.example:2001:db8::10", &h, NULL), 0);
	ck_assert_str_eq(h.ip, "2001:db8::10");
	free(h.name);
	free(h.ip);
	ck_assert_int_eq(lc_net_parse_host("bad host:1.2.3.4", &h, &e), -1);
	ck_assert_str_eq(e->msg, "--add-host 'bad host:1.2.3.4': 'bad host' is not a valid host name");
	ck_assert_int_eq(e->exit_code, LC_EXIT_USAGE);
	lc_error_free(e);
	e = NULL;
	ck_assert_int_eq(lc_net_parse_host("name:1.2.3", &h, &e), -1);
	ck_assert_str_eq(e->msg, "--add-host 'name:1.2.3': '1.2.3' is not an IPv4 or IPv6 address");
	lc_error_free(e);
	e = NULL;
	ck_assert_int_eq(lc_net_parse_host("justaname", &h, &e), -1);
	lc_error_free(e);
	e = NULL;

	lc_net_mode_t m;
	ck_assert_int_eq(lc_net_parse_mode("open", &m, NULL), 0);
	ck_assert_int_eq(m, LC_NET_OPEN);
	ck_assert_int_eq(lc_net_parse_mode("closed", &m, &e), -1);
	ck_assert_str_eq(e->msg, "--net 'closed': expected none, allow or open");
	lc_error_free(e);
}
END_TEST

/* ---- policies -------------------------------------------------------------------- */

static char *policy_err(const char *text, int *code)
{
	json_error_t jerr;
	json_t *doc = json_loads(text, 0, &jerr);
	ck_assert_msg(doc != NULL, "test JSON: %s", jerr.text);
	lc_net_spec_t spec;
	memset(&spec, 0, sizeof(spec));
	lc_error_t *e = NULL;
	int r = lc_net_policy_from_json(doc, "p.json", &spec, &e);
	json_decref(doc);
	lc_net_spec_clear(&spec);
	if (r == 0)
		return NULL;
	char *m = strdup(e->msg);
	*code = e->exit_code;
	lc_error_free(e);
	return m;
}

START_TEST(test_policy_paths)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{"{\"mode\":\"allow\",\"allow\":[{\"cidr\":\"1.2.3.0/24\"},{\"cidr\":\"1.2.4.0/24\",\"ports\":[\"443\"]}]}",
		 "network policy p.json: allow[1].ports[0]: expected an integer 1-65535"},
		{"{\"mode\":\"allow\",\"allow\":[{\"cidr\":\"1.2.3.0/24\",\"ports\":[443,70000]}]}",
		 "network policy p.json: allow[0].ports[1]: expected an integer 1-65535"},
		{"{\"mode\":\"allow\",\"allow\":[{\"cidr\":\"1.2.3.4/24\"}]}",
		 "network policy p.json: allow[0].cidr: '1.2.3.4/24' has host bits set"},
		{"{\"mode\":\"allow\",\"allow\":[{\"ports\":[443]}]}",
		 "network policy p.json: allow[0].cidr: expected a CIDR string"},
		{"{\"mode\":\"allow\",\"allow\":[{\"cidr\":\"1.2.3.0/24\",\"port\":443}]}",
		 "network policy p.json: allow[0].port: unknown field (expected cidr, ports, description)"},
		{"{\"mode\":\"allow\",\"allow\":{}}", "network policy p.json: allow: expected an array"},
		{"{\"mode\":\"allow\",\"allow\":[\"1.2.3.0/24\"]}",
		 "network policy p.json: allow[0]: expected an object {\"cidr\": ..., \"ports\": [...]}"},
		{"{\"mode\":\"closed\"}", "network policy p.json: mode: expected \"none\", \"allow\" or \"open\""},
		{"{\"allow\":[]}", "network policy p.json: mode: missing (expected none, allow or open)"},
		{"{\"mode\":\"allow\",\"hosts\":{\"api.example\":\"1.2.3\"}}",
		 "network policy p.json: hosts.api.example: expected an IPv4 or IPv6 address"},
		{"{\"mode\":\"allow\",\"hosts\":[\"x\"]}", "network policy p.json: hosts: expected an object {\"name\": \"ip\"}"},
		{"{\"mode\":\"allow\",\"dns\":53}", "network policy p.json: dns: expected an IPv4 or IPv6 address"},
		{"{\"mode\":\"allow\",\"extra\":1}",
		 "network policy p.json: extra: unknown field (expected mode, allow, hosts, dns, description)"},
		{"{\"mode\":\"none\",\"allow\":[{\"cidr\":\"1.2.3.0/24\"}]}",
		 "network policy p.json: allow: rules need mode \"allow\" or \"open\""},
		{"[]", "network policy p.json: expected a JSON object"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int code = 0;
		_cleanup_free_ char *m = policy_err(cases[i].json, &code);
		ck_assert_msg(m != NULL, "policy %zu accepted", i);
		ck_assert_str_eq(m, cases[i].msg);
		ck_assert_int_eq(code, LC_EXIT_INVALID);
	}
}
END_TEST

START_TEST(test_policy_shipped)
{
	/* Every shipped policy loads; model-api pins its host inside its range. */
	static const char *const names[] = {"blocked", "open", "model-api"};
	static const lc_net_mode_t modes[] = {LC_NET_NONE, LC_NET_OPEN, LC_NET_ALLOW};
	for (size_t i = 0; i < 3; i++) {
		lc_net_spec_t spec;
		memset(&spec, 0, sizeof(spec));
		lc_error_t *e = NULL;
		ck_assert_msg(lc_net_policy_load(names[i], &spec, &e) == 0, "%s: %s", names[i], e ? e->msg : "");
		ck_assert_int_eq(spec.mode, modes[i]);
		ck_assert_str_eq(spec.policy, names[i]);
		if (spec.mode == LC_NET_ALLOW) {
			ck_assert_int_ge(spec.n_allow, 1);
			ck_assert_int_ge(spec.n_hosts, 1);
			struct in_addr in;
			ck_assert_int_eq(inet_pton(AF_INET, spec.hosts[0].ip, &in), 1);
			bool inside = false;
			for (size_t j = 0; j < spec.n_allow; j++) {
				const lc_net_rule_t *r = &spec.allow[j];
				if (r->family != AF_INET)
					continue;
				uint32_t a = ntohl(in.s_addr), net = ntohl(*(const uint32_t *)r->addr);
				uint32_t mask = r->prefix ? ~0u << (32 - r->prefix) : 0;
				if ((a & mask) == net && r->n_ports == 1 && r->ports[0] == 443)
					inside = true;
			}
			ck_assert_msg(inside, "%s pins %s outside its 443-only ranges", names[i], spec.hosts[0].ip);
		}
		lc_net_spec_clear(&spec);
	}
}
END_TEST

/* The github policy: its pinned names are inside ranges open on 443 and 22. */
START_TEST(test_policy_github)
{
	lc_net_spec_t spec;
	memset(&spec, 0, sizeof(spec));
	lc_error_t *e = NULL;
	ck_assert_msg(lc_net_policy_load("github", &spec, &e) == 0, "%s", e ? e->msg : "");
	ck_assert_int_eq(spec.mode, LC_NET_ALLOW);
	ck_assert_int_eq(spec.n_hosts, 2);
	for (size_t h = 0; h < spec.n_hosts; h++) {
		ck_assert(!strcmp(spec.hosts[h].name, "github.com") || !strcmp(spec.hosts[h].name, "api.github.com"));
		struct in_addr in;
		ck_assert_int_eq(inet_pton(AF_INET, spec.hosts[h].ip, &in), 1);
		bool inside = false;
		for (size_t j = 0; j < spec.n_allow; j++) {
			const lc_net_rule_t *r = &spec.allow[j];
			ck_assert_int_eq(r->n_ports, 2);
			ck_assert_int_eq(r->ports[0], 443);
			ck_assert_int_eq(r->ports[1], 22);
			if (r->family != AF_INET)
				continue;
			uint32_t a = ntohl(in.s_addr), net = ntohl(*(const uint32_t *)r->addr);
			uint32_t mask = r->prefix ? ~0u << (32 - r->prefix) : 0;
			inside |= (a & mask) == net;
		}
		ck_assert_msg(inside, "github pins %s outside its ranges", spec.hosts[h].ip);
	}
	lc_net_spec_clear(&spec);
}
END_TEST

START_TEST(test_policy_merge_and_override)
{
	/* A site file of the same name wins over the shipped one. */
	_cleanup_free_ char *site = lc_strdup_printf("%s/etc/policies/net/model-api.json", tmpdir);
	write_file(site, "{\"mode\":\"allow\",\"allow\":[{\"cidr\":\"198.51.100.0/24\",\"ports\":[8443]}],"
			 "\"hosts\":{\"api.anthropic.com\":\"198.51.100.10\",\"other.example\":\"198.51.100.11\"},"
			 "\"dns\":\"198.51.100.53\"}");
	lc_net_spec_t spec;
	memset(&spec, 0, sizeof(spec));
	/* The command line already said: a rule, a pinned name, a resolver. */
	lc_net_rule_t r;
	ck_assert_int_eq(lc_net_parse_allow("203.0.113.0/24:22", &r, NULL), 0);
	spec.allow = malloc(sizeof(r));
	spec.allow[0] = r;
	spec.n_allow = 1;
	spec.hosts = malloc(sizeof(lc_host_entry_t));
	ck_assert_int_eq(lc_net_parse_host("api.anthropic.com:203.0.113.9", &spec.hosts[0], NULL), 0);
	spec.n_hosts = 1;
	spec.dns = strdup("203.0.113.53");
	lc_error_t *e = NULL;
	ck_assert_msg(lc_net_policy_load("model-api", &spec, &e) == 0, "%s", e ? e->msg : "");
	ck_assert_int_eq(spec.mode, LC_NET_ALLOW);
	ck_assert_int_eq(spec.n_allow, 2);
	char buf[256];
	lc_net_rule_format(&spec.allow[1], buf, sizeof(buf));
	ck_assert_str_eq(buf, "198.51.100.0/24:8443");
	ck_assert_int_eq(spec.n_hosts, 2);
	ck_assert_str_eq(spec.hosts[0].ip, "203.0.113.9");
	ck_assert_str_eq(spec.hosts[1].name, "other.example");
	ck_assert_str_eq(spec.dns, "203.0.113.53");
	lc_net_spec_clear(&spec);
	ck_assert_ptr_null(spec.allow);

	/* Unknown names and paths; a broken file names its line. */
	memset(&spec, 0, sizeof(spec));
	ck_assert_int_eq(lc_net_policy_load("no-such-policy", &spec, &e), -1);
	ck_assert_int_eq(e->exit_code, LC_EXIT_UNKNOWN);
	ck_assert_ptr_nonnull(strstr(e->msg, "unknown network policy 'no-such-policy'"));
	lc_error_free(e);
	e = NULL;
	ck_assert_int_eq(lc_net_policy_load("/nonexistent/p.json", &spec, &e), -1);
	ck_assert_int_eq(e->exit_code, LC_EXIT_NOENT);
	lc_error_free(e);
	e = NULL;
	_cleanup_free_ char *bad = lc_strdup_printf("%s/bad.json", tmpdir);
	write_file(bad, "{\"mode\": \"allow\",\n \"allow\": [}\n");
	ck_assert_int_eq(lc_net_policy_load(bad, &spec, &e), -1);
	ck_assert_int_eq(e->exit_code, LC_EXIT_INVALID);
	ck_assert_ptr_nonnull(strstr(e->msg, "line 2"));
	lc_error_free(e);
	e = NULL;
	ck_assert_int_eq(lc_net_policy_load("../etc/passwd", &spec, &e), -1);
	lc_error_free(e);
	lc_net_spec_clear(&spec);
}
END_TEST

START_TEST(test_validate)
{
	lc_net_spec_t spec;
	memset(&spec, 0, sizeof(spec));
	lc_error_t *e = NULL;
	ck_assert_int_eq(lc_net_validate(&spec, NULL), 0);
	ck_assert_int_eq(lc_net_spec_add_allow(&spec, "198.51.100.0/24:443", NULL), 0);
	ck_assert_int_eq(lc_net_spec_add_host(&spec, "api.example:198.51.100.10", NULL), 0);
	ck_assert_int_eq(lc_net_spec_add_allow(&spec, "198.51.100.0/24:0", &e), -1);
	lc_error_free(e);
	e = NULL;
	ck_assert_int_eq(spec.n_allow, 1);
	ck_assert_int_eq(spec.n_hosts, 1);
	ck_assert_str_eq(spec.hosts[0].ip, "198.51.100.10");
	ck_assert_int_eq(lc_net_validate(&spec, &e), -1);
	ck_assert_str_eq(e->msg, "--allow needs --net allow or --net open");
	ck_assert_int_eq(e->exit_code, LC_EXIT_USAGE);
	lc_error_free(e);
	e = NULL;
	spec.n_allow = 0;
	spec.dns = strdup("not-an-ip");
	ck_assert_int_eq(lc_net_validate(&spec, &e), -1);
	ck_assert_str_eq(e->msg, "--dns 'not-an-ip': not an IPv4 or IPv6 address");
	lc_error_free(e);
	lc_net_spec_clear(&spec);
}
END_TEST

/* ---- the firewall's JSON ------------------------------------------------------------- */

/* The rules ("expr" arrays) added to a chain, in order. */
static json_t *chain_rules(json_t *doc, const char *chain)
{
	json_t *rules = json_array();
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(doc, "nftables"), i, c) {
		json_t *rule = json_object_get(json_object_get(c, "add"), "rule");
		const char *name = json_string_value(json_object_get(rule, "chain"));
		if (name && !strcmp(name, chain))
			json_array_append(rules, json_object_get(rule, "expr"));
	}
	return rules;
}

static bool has_key(json_t *expr, const char *key)
{
	size_t i;
	json_t *x;
	json_array_foreach(expr, i, x) {
		if (json_object_get(x, key))
			return true;
	}
	return false;
}

/* The "right" of the first match on PROTO.FIELD in a rule, or NULL. */
static json_t *match_right(json_t *expr, const char *proto, const char *field)
{
	size_t i;
	json_t *x;
	json_array_foreach(expr, i, x) {
		json_t *m = json_object_get(x, "match");
		json_t *p = json_object_get(json_object_get(m, "left"), "payload");
		if (p && !strcmp(json_string_value(json_object_get(p, "protocol")), proto) &&
		    !strcmp(json_string_value(json_object_get(p, "field")), field))
			return json_object_get(m, "right");
	}
	return NULL;
}

static json_t *sandbox_doc(lc_net_mode_t mode, const char *const *allow)
{
	lc_net_spec_t spec;
	memset(&spec, 0, sizeof(spec));
	spec.mode = mode;
	for (size_t i = 0; allow && allow[i]; i++) {
		spec.allow = realloc(spec.allow, (spec.n_allow + 1) * sizeof(lc_net_rule_t));
		ck_assert_int_eq(lc_net_parse_allow(allow[i], &spec.allow[spec.n_allow++], NULL), 0);
	}
	lc_fw_target_t t = {
		.id = "0123456789ab", .veth = "lc0123456789ab", .addr4 = "10.200.0.2", .addr6 = "fd6c:6372::2",
		.pool4 = "10.200.0.0/16", .pool6 = "fd6c:6372::/48",
	};
	json_t *doc = lc_fw_sandbox_json(&t, &spec);
	lc_net_spec_clear(&spec);
	return doc;
}

START_TEST(test_fw_allow)
{
	static const char *const allow[] = {"198.51.100.0/24:443,8443", "[2001:db8:a::/48]", NULL};
	_cleanup_json_ json_t *doc = sandbox_doc(LC_NET_ALLOW, allow);
	_cleanup_json_ json_t *out = chain_rules(doc, "out_0123456789ab");
	/* established, 2 anti-spoofing, 2 allow, final counted drop */
	ck_assert_int_eq(json_array_size(out), 6);
	json_t *first = json_array_get(out, 0);
	ck_assert(has_key(first, "accept"));
	json_t *ct = json_object_get(json_object_get(json_object_get(json_array_get(first, 0), "match"), "left"), "ct");
	ck_assert_str_eq(json_string_value(json_object_get(ct, "key")), "state");
	json_t *spoof = json_array_get(out, 1);
	ck_assert_str_eq(json_string_value(match_right(spoof, "ip", "saddr")), "10.200.0.2");
	ck_assert(has_key(spoof, "drop"));

	json_t *v4 = json_array_get(out, 3);
	json_t *pfx = json_object_get(match_right(v4, "ip", "daddr"), "prefix");
	ck_assert_str_eq(json_string_value(json_object_get(pfx, "addr")), "198.51.100.0");
	ck_assert_int_eq(json_integer_value(json_object_get(pfx, "len")), 24);
	json_t *ports = json_object_get(match_right(v4, "th", "dport"), "set");
	ck_assert_int_eq(json_array_size(ports), 2);
	ck_assert_int_eq(json_integer_value(json_array_get(ports, 0)), 443);
	ck_assert(has_key(v4, "accept"));

	json_t *v6 = json_array_get(out, 4);
	pfx = json_object_get(match_right(v6, "ip6", "daddr"), "prefix");
	ck_assert_str_eq(json_string_value(json_object_get(pfx, "addr")), "2001:db8:a::");
	ck_assert_ptr_null(match_right(v6, "th", "dport")); /* every port */

	json_t *last = json_array_get(out, 5);
	ck_assert_int_eq(json_array_size(last), 2);
	ck_assert(has_key(last, "counter"));
	ck_assert(has_key(last, "drop"));

	/* host: replies, neighbour discovery, the same allow list, counted drop */
	_cleanup_json_ json_t *host = chain_rules(doc, "host_0123456789ab");
	ck_assert_int_eq(json_array_size(host), 5);
	ck_assert(has_key(json_array_get(host, 4), "counter"));
	ck_assert(has_key(json_array_get(host, 4), "drop"));
	_cleanup_json_ json_t *in = chain_rules(doc, "in_0123456789ab");
	ck_assert_int_eq(json_array_size(in), 2);
	ck_assert(has_key(json_array_get(in, 1), "drop"));

	/* the veth is wired into all three maps and the NAT set */
	int elems = 0;
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(doc, "nftables"), i, c) {
		json_t *el = json_object_get(json_object_get(c, "add"), "element");
		if (el) {
			json_t *e0 = json_array_get(json_object_get(el, "elem"), 0);
			const char *key = json_string_value(json_is_array(e0) ? json_array_get(e0, 0) : e0);
			ck_assert_str_eq(key, "lc0123456789ab");
			elems++;
		}
	}
	ck_assert_int_eq(elems, 4);
}
END_TEST

static bool set_has_prefix(json_t *right, const char *addr, int len)
{
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(right, "set"), i, x) {
		json_t *p = json_object_get(x, "prefix");
		if (p && !strcmp(json_string_value(json_object_get(p, "addr")), addr) &&
		    json_integer_value(json_object_get(p, "len")) == len)
			return true;
	}
	return false;
}

START_TEST(test_fw_open)
{
	static const char *const allow[] = {"10.1.2.3:5432", NULL};
	_cleanup_json_ json_t *doc = sandbox_doc(LC_NET_OPEN, allow);
	_cleanup_json_ json_t *out = chain_rules(doc, "out_0123456789ab");
	/* established, 2 anti-spoofing, the punched hole, 2 denied sets, accept */
	ck_assert_int_eq(json_array_size(out), 7);
	json_t *hole = json_array_get(out, 3);
	ck_assert_str_eq(json_string_value(match_right(hole, "ip", "daddr")), "10.1.2.3");
	ck_assert(has_key(hole, "accept"));
	json_t *d4 = match_right(json_array_get(out, 4), "ip", "daddr");
	ck_assert(set_has_prefix(d4, "10.0.0.0", 8));
	ck_assert(set_has_prefix(d4, "172.16.0.0", 12));
	ck_assert(set_has_prefix(d4, "192.168.0.0", 16));
	ck_assert(set_has_prefix(d4, "100.64.0.0", 10));
	ck_assert(set_has_prefix(d4, "169.254.0.0", 16));
	ck_assert(set_has_prefix(d4, "127.0.0.0", 8));
	ck_assert(has_key(json_array_get(out, 4), "counter"));
	ck_assert(has_key(json_array_get(out, 4), "drop"));
	json_t *d6 = match_right(json_array_get(out, 5), "ip6", "daddr");
	ck_assert(set_has_prefix(d6, "fc00::", 7));
	ck_assert(set_has_prefix(d6, "fe80::", 10));
	json_t *last = json_array_get(out, 6);
	ck_assert_int_eq(json_array_size(last), 1);
	ck_assert(has_key(last, "accept"));
}
END_TEST

START_TEST(test_fw_open_outside_pool)
{
	/* A pool outside the private ranges is denied too (other sandboxes). */
	lc_net_spec_t spec;
	memset(&spec, 0, sizeof(spec));
	spec.mode = LC_NET_OPEN;
	lc_fw_target_t t = {.id = "0123456789ab", .veth = "lc0123456789ab", .addr4 = "198.18.0.2",
			    .pool4 = "198.18.0.0/15"};
	_cleanup_json_ json_t *doc = lc_fw_sandbox_json(&t, &spec);
	_cleanup_json_ json_t *out = chain_rules(doc, "out_0123456789ab");
	json_t *d4 = NULL;
	for (size_t i = 0; i < json_array_size(out) && !d4; i++)
		if (has_key(json_array_get(out, i), "drop"))
			d4 = json_object_get(match_right(json_array_get(out, i), "ip", "daddr"), "set") ?
				match_right(json_array_get(out, i), "ip", "daddr") : NULL;
	ck_assert_ptr_nonnull(d4);
	ck_assert(set_has_prefix(d4, "198.18.0.0", 15));
}
END_TEST

START_TEST(test_fw_skeleton)
{
	_cleanup_json_ json_t *doc = lc_fw_skeleton_json(LC_FW_ALL);
	int hooks = 0;
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(doc, "nftables"), i, c) {
		json_t *ch = json_object_get(json_object_get(c, "add"), "chain");
		if (ch && json_object_get(ch, "hook")) {
			ck_assert_str_eq(json_string_value(json_object_get(ch, "policy")), "accept");
			hooks++;
		}
	}
	ck_assert_int_eq(hooks, 3);
	_cleanup_json_ json_t *fwd = chain_rules(doc, "forward");
	ck_assert_int_eq(json_array_size(fwd), 2);
	/* replies-only to a sandbox comes before a sandbox's own rules */
	json_t *vm = json_object_get(json_array_get(json_array_get(fwd, 0), 0), "vmap");
	ck_assert_str_eq(json_string_value(json_object_get(vm, "data")), "@fwd_in");
	/* Only a missing base chain is added again, with its rules. */
	_cleanup_json_ json_t *part = lc_fw_skeleton_json(LC_FW_INPUT);
	_cleanup_json_ json_t *fwd2 = chain_rules(part, "forward");
	_cleanup_json_ json_t *in2 = chain_rules(part, "input");
	ck_assert_int_eq(json_array_size(fwd2), 0);
	ck_assert_int_eq(json_array_size(in2), 1);
}
END_TEST

/* As root, the JSON goes through libnftables for real, in a network
 * namespace of the test's own (nothing on the host changes). */
static int fw_roundtrip(void)
{
	if (unshare(CLONE_NEWNET) < 0)
		return 10;
	if (lc_fw_check(NULL) < 0)
		return 11;
	lc_net_spec_t allow = {.mode = LC_NET_ALLOW}, open = {.mode = LC_NET_OPEN};
	lc_net_rule_t r[2];
	if (lc_net_parse_allow("198.51.100.0/24:443", &r[0], NULL) < 0 ||
	    lc_net_parse_allow("[2001:db8::/32]", &r[1], NULL) < 0)
		return 12;
	allow.allow = r;
	allow.n_allow = 2;
	lc_fw_target_t a = {.id = "aaaaaaaaaaaa", .veth = "lcaaaaaaaaaaaa", .addr4 = "10.200.0.2",
			    .addr6 = "fd6c:6372::2", .pool4 = "10.200.0.0/16", .pool6 = "fd6c:6372::/48"};
	lc_fw_target_t b = {.id = "bbbbbbbbbbbb", .veth = "lcbbbbbbbbbbbb", .addr4 = "198.18.0.6",
			    .pool4 = "198.18.0.0/15"};
	lc_error_t *e = NULL;
	if (lc_fw_add(&a, &allow, &e) < 0 || lc_fw_add(&b, &open, &e) < 0) {
		fprintf(stderr, "%s\n", e->msg);
		return 13;
	}
	char **ids = NULL;
	if (lc_fw_list_ids(&ids, NULL) < 0 || lc_strv_len(ids) != 2)
		return 14;
	lc_strv_free(ids);
	/* Someone deletes a base chain: the next sandbox brings it back and
	 * the others keep their chains. */
	if (system("nft delete chain inet lcrun input") != 0)
		return 20;
	lc_fw_target_t c = {.id = "cccccccccccc", .veth = "lccccccccccccc", .addr4 = "10.200.0.10",
			    .pool4 = "10.200.0.0/16"};
	if (lc_fw_add(&c, &allow, &e) < 0 || lc_fw_remove("cccccccccccc", &e) < 0)
		return 21;
	if (system("nft list chain inet lcrun input | grep -q 'iifname vmap @host_in'") != 0 ||
	    system("nft list chain inet lcrun out_aaaaaaaaaaaa >/dev/null") != 0 ||
	    system("test $(nft list chain inet lcrun forward | grep -c vmap) = 2") != 0)
		return 22;
	if (lc_fw_dropped("bbbbbbbbbbbb") != 0)
		return 15;
	if (lc_fw_remove("aaaaaaaaaaaa", &e) < 0 || lc_fw_remove("aaaaaaaaaaaa", &e) < 0) {
		fprintf(stderr, "%s\n", e->msg);
		return 16;
	}
	if (lc_fw_list_ids(&ids, NULL) < 0 || lc_strv_len(ids) != 1 || strcmp(ids[0], "bbbbbbbbbbbb"))
		return 17;
	lc_strv_free(ids);
	if (lc_fw_remove("bbbbbbbbbbbb", NULL) < 0 || lc_fw_list_ids(&ids, NULL) < 0 || ids[0])
		return 18;
	lc_strv_free(ids);
	return 0;
}

START_TEST(test_fw_nft_roundtrip)
{
	if (geteuid() != 0)
		return; /* needs CAP_NET_ADMIN; the integration suite covers it too */
	pid_t pid = fork();
	if (pid == 0)
		_exit(fw_roundtrip());
	int st;
	waitpid(pid, &st, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "step %d failed", WEXITSTATUS(st));
}
END_TEST

/* ---- the pool -------------------------------------------------------------------------- */

START_TEST(test_pool_distinct_and_exhausted)
{
	lc_net_pool_t pool = {.pool4 = "10.99.0.0/28", .pool6 = "fd00:1:2::/48"};
	lc_lease_t a, b, c, d, x;
	lc_error_t *e = NULL;
	ck_assert_int_eq(lc_netpool_alloc("aaaaaaaaaaaa", &pool, "allow", NULL, &a, NULL), 0);
	ck_assert_int_eq(lc_netpool_alloc("bbbbbbbbbbbb", &pool, "open", "x", &b, NULL), 0);
	ck_assert_int_eq(lc_netpool_alloc("cccccccccccc", &pool, "allow", NULL, &c, NULL), 0);
	ck_assert_int_eq(lc_netpool_alloc("dddddddddddd", &pool, "allow", NULL, &d, NULL), 0);
	ck_assert_str_eq(a.gw4, "10.99.0.1");
	ck_assert_str_eq(a.addr4, "10.99.0.2");
	ck_assert_str_eq(b.gw4, "10.99.0.5");
	ck_assert_str_eq(b.addr4, "10.99.0.6");
	ck_assert_str_eq(d.addr4, "10.99.0.14");
	ck_assert_str_eq(a.addr6, "fd00:1:2::2");
	ck_assert_str_eq(b.addr6, "fd00:1:2:1::2");
	ck_assert_str_eq(b.gw6, "fd00:1:2:1::1");
	ck_assert_str_eq(c.veth, "lccccccccccccc");
	/* Four /30s in a /28: the fifth sandbox gets none. */
	ck_assert_int_eq(lc_netpool_alloc("eeeeeeeeeeee", &pool, "allow", NULL, &x, &e), -1);
	ck_assert_int_eq(e->exit_code, LC_EXIT_BUSY);
	ck_assert_ptr_nonnull(strstr(e->msg, "the sandbox address pool 10.99.0.0/28 is exhausted"));
	lc_error_free(e);
	e = NULL;
	/* One id, one lease. */
	ck_assert_int_eq(lc_netpool_alloc("aaaaaaaaaaaa", &pool, "allow", NULL, &x, &e), -1);
	ck_assert_int_eq(e->exit_code, LC_EXIT_BUSY);
	lc_error_free(e);
	e = NULL;
	/* A released slot is handed out again (the only free one); the
	 * lease reads back. */
	ck_assert_int_eq(lc_netpool_release("bbbbbbbbbbbb", NULL), 0);
	ck_assert_int_eq(lc_netpool_read("bbbbbbbbbbbb", &x, NULL), 1);
	ck_assert_int_eq(lc_netpool_alloc("eeeeeeeeeeee", &pool, "open", "model-api", &x, NULL), 0);
	ck_assert_str_eq(x.addr4, "10.99.0.6");
	lc_lease_t back;
	ck_assert_int_eq(lc_netpool_read("eeeeeeeeeeee", &back, NULL), 0);
	ck_assert_str_eq(back.addr4, "10.99.0.6");
	ck_assert_str_eq(back.addr6, "fd00:1:2:1::2");
	ck_assert_str_eq(back.policy, "model-api");
	ck_assert_str_eq(back.mode, "open");
	ck_assert(lc_lease_owner_alive(&back));
	json_t *desc = lc_net_describe("eeeeeeeeeeee");
	ck_assert_ptr_nonnull(desc);
	ck_assert_str_eq(json_string_value(json_object_get(desc, "address")), "10.99.0.6");
	ck_assert_str_eq(json_string_value(json_object_get(desc, "veth")), "lceeeeeeeeeeee");
	json_decref(desc);
	ck_assert_ptr_null(lc_net_describe("ffffffffffff"));
	char **ids = NULL;
	ck_assert_int_eq(lc_netpool_list(&ids, NULL), 0);
	ck_assert_int_eq(lc_strv_len(ids), 4);
	lc_strv_free(ids);
}
END_TEST

START_TEST(test_pool_adopt)
{
	/* lcd takes a task's lease before lc_run: the network set-up of this
	 * process adopts it, never one another process took, nor one that
	 * already has its veth, nor none at all. */
	lc_net_pool_t pool = {.pool4 = "10.96.0.0/28", .pool6 = ""};
	lc_lease_t mine, got;
	lc_error_t *e = NULL;
	ck_assert_int_eq(lc_netpool_alloc("aaaaaaaaaaaa", &pool, "allow", NULL, &mine, NULL), 0);
	ck_assert_int_eq(lc_netpool_adopt("aaaaaaaaaaaa", &got, NULL), 0);
	ck_assert_str_eq(got.addr4, mine.addr4);
	ck_assert_str_eq(got.gw4, mine.gw4);
	ck_assert_int_eq(lc_netpool_adopt("bbbbbbbbbbbb", &got, &e), -1);
	ck_assert_int_eq(e->exit_code, LC_EXIT_BUSY);
	lc_error_free(e);
	e = NULL;
	pid_t pid = fork();
	if (pid == 0)
		_exit(lc_netpool_alloc("cccccccccccc", &pool, "allow", NULL, &got, NULL) == 0 ? 0 : 1);
	int st;
	waitpid(pid, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_int_eq(lc_netpool_read("cccccccccccc", &got, NULL), 0);
	ck_assert_int_eq(lc_netpool_adopt("cccccccccccc", &got, &e), -1);
	ck_assert_int_eq(e->exit_code, LC_EXIT_BUSY);
	lc_error_free(e);
	/* adopting holds no second slot */
	lc_lease_t next;
	ck_assert_int_eq(lc_netpool_alloc("dddddddddddd", &pool, "allow", NULL, &next, NULL), 0);
	ck_assert_str_ne(next.addr4, mine.addr4);
	ck_assert_str_ne(next.addr4, got.addr4);
}
END_TEST

START_TEST(test_pool_round_robin)
{
	/* A freed address is not the next one handed out while others are
	 * free: it comes back only after the pool went round. */
	lc_net_pool_t pool = {.pool4 = "10.97.0.0/28", .pool6 = ""};
	lc_lease_t l;
	ck_assert_int_eq(lc_netpool_alloc("aaaaaaaaaaaa", &pool, "allow", NULL, &l, NULL), 0);
	ck_assert_str_eq(l.addr4, "10.97.0.2");
	ck_assert_int_eq(lc_netpool_release("aaaaaaaaaaaa", NULL), 0);
	ck_assert_int_eq(lc_netpool_alloc("bbbbbbbbbbbb", &pool, "allow", NULL, &l, NULL), 0);
	ck_assert_str_eq(l.addr4, "10.97.0.6");
	ck_assert_int_eq(lc_netpool_release("bbbbbbbbbbbb", NULL), 0);
	ck_assert_int_eq(lc_netpool_alloc("cccccccccccc", &pool, "allow", NULL, &l, NULL), 0);
	ck_assert_str_eq(l.addr4, "10.97.0.10");
	ck_assert_int_eq(lc_netpool_alloc("dddddddddddd", &pool, "allow", NULL, &l, NULL), 0);
	ck_assert_str_eq(l.addr4, "10.97.0.14");
	ck_assert_int_eq(lc_netpool_alloc("eeeeeeeeeeee", &pool, "allow", NULL, &l, NULL), 0);
	ck_assert_str_eq(l.addr4, "10.97.0.2"); /* wrapped */
}
END_TEST

START_TEST(test_pool_concurrent)
{
	/* 16 processes at once take 16 distinct slots of a /26. */
	lc_net_pool_t pool = {.pool4 = "10.98.0.0/26", .pool6 = ""};
	pid_t pids[16];
	for (int i = 0; i < 16; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			char id[LC_ID_LEN + 1];
			snprintf(id, sizeof(id), "%012x", i + 1);
			lc_lease_t l;
			_exit(lc_netpool_alloc(id, &pool, "allow", NULL, &l, NULL) == 0 ? 0 : 1);
		}
	}
	for (int i = 0; i < 16; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	char seen[16][INET_ADDRSTRLEN];
	for (int i = 0; i < 16; i++) {
		char id[LC_ID_LEN + 1];
		snprintf(id, sizeof(id), "%012x", i + 1);
		lc_lease_t l;
		ck_assert_int_eq(lc_netpool_read(id, &l, NULL), 0);
		ck_assert_str_eq(l.addr6, "");
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(seen[j], l.addr4);
		strcpy(seen[i], l.addr4);
	}
	/* The pool's 16 slots are all taken now. */
	lc_lease_t l;
	lc_error_t *e = NULL;
	ck_assert_int_eq(lc_netpool_alloc("ffffffffffff", &pool, "allow", NULL, &l, &e), -1);
	ck_assert_int_eq(e->exit_code, LC_EXIT_BUSY);
	lc_error_free(e);
}
END_TEST

START_TEST(test_pool_config)
{
	lc_net_pool_t pool;
	lc_error_t *e = NULL;
	ck_assert_int_eq(lc_netpool_config(&pool, NULL), 0);
	ck_assert_str_eq(pool.pool4, "10.200.0.0/16");
	ck_assert_str_eq(pool.pool6, "fd6c:6372::/48");
	_cleanup_free_ char *conf = lc_strdup_printf("%s/etc/lcrun.json", tmpdir);
	write_file(conf, "{\"net_pool\": \"172.30.0.0/24\", \"net_pool6\": null, \"other\": 1}");
	ck_assert_int_eq(lc_netpool_config(&pool, NULL), 0);
	ck_assert_str_eq(pool.pool4, "172.30.0.0/24");
	ck_assert_str_eq(pool.pool6, "");
	write_file(conf, "{\"net_pool\": \"172.30.0.0/31\"}");
	ck_assert_int_eq(lc_netpool_config(&pool, &e), -1);
	ck_assert_int_eq(e->exit_code, LC_EXIT_INVALID);
	ck_assert_ptr_nonnull(strstr(e->msg, "net_pool: '172.30.0.0/31' must be an IPv4 network of /30 or larger"));
	lc_error_free(e);
	e = NULL;
	write_file(conf, "{\"net_pool6\": \"fd00::/96\"}");
	ck_assert_int_eq(lc_netpool_config(&pool, &e), -1);
	ck_assert_ptr_nonnull(strstr(e->msg, "net_pool6"));
	lc_error_free(e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net");
	TCase *parse = tcase_create("parse");
	tcase_add_checked_fixture(parse, tmp_setup, tmp_teardown);
	tcase_add_test(parse, test_allow_v4);
	tcase_add_test(parse, test_allow_forms);
	tcase_add_test(parse, test_allow_bad);
	tcase_add_test(parse, test_host_and_mode);
	tcase_add_test(parse, test_policy_paths);
	tcase_add_test(parse, test_policy_shipped);
	tcase_add_test(parse, test_policy_github);
	tcase_add_test(parse, test_policy_merge_and_override);
	tcase_add_test(parse, test_validate);
	suite_add_tcase(s, parse);
	TCase *fw = tcase_create("firewall");
	tcase_add_test(fw, test_fw_allow);
	tcase_add_test(fw, test_fw_open);
	tcase_add_test(fw, test_fw_open_outside_pool);
	tcase_add_test(fw, test_fw_skeleton);
	tcase_add_test(fw, test_fw_nft_roundtrip);
	suite_add_tcase(s, fw);
	TCase *pool = tcase_create("pool");
	tcase_add_checked_fixture(pool, tmp_setup, tmp_teardown);
	tcase_add_test(pool, test_pool_distinct_and_exhausted);
	tcase_add_test(pool, test_pool_round_robin);
	tcase_add_test(pool, test_pool_adopt);
	tcase_add_test(pool, test_pool_concurrent);
	tcase_add_test(pool, test_pool_config);
	suite_add_tcase(s, pool);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
