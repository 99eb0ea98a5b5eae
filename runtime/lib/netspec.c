/* netspec.c — a sandbox's network as it is described: the --net,
 * --allow and --add-host values, a net spec's rules and hosts, and the
 * named policies that fill one.  Parsing only: net.c sets it up. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "netpool.h"
#include "netspec.h"
#include "util.h"

/* ---- small parsers ---------------------------------------------------------- */

const char *lc_net_mode_name(lc_net_mode_t mode)
{
	switch (mode) {
	case LC_NET_NONE: return "none";
	case LC_NET_ALLOW: return "allow";
	case LC_NET_OPEN: return "open";
	}
	return "?";
}

static int mode_from(const char *s, lc_net_mode_t *out)
{
	static const lc_net_mode_t modes[] = {LC_NET_NONE, LC_NET_ALLOW, LC_NET_OPEN};
	for (size_t i = 0; s && i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (!strcmp(s, lc_net_mode_name(modes[i]))) {
			*out = modes[i];
			return 0;
		}
	}
	return -1;
}

int lc_net_parse_mode(const char *arg, lc_net_mode_t *out, lc_error_t **err)
{
	if (mode_from(arg, out) < 0)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--net '%s': expected none, allow or open", arg ? arg : "");
	return 0;
}

/* One port "443"; 0 on bad input. */
static unsigned short port_from(const char *s, size_t len)
{
	if (!len || len > 5)
		return 0;
	unsigned long v = 0;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return 0;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v >= 1 && v <= 65535 ? (unsigned short)v : 0;
}

static int add_port(lc_net_rule_t *r, unsigned short p, char *why, size_t len)
{
	for (size_t i = 0; i < r->n_ports; i++)
		if (r->ports[i] == p)
			return 0;
	if (r->n_ports >= LC_NET_MAX_PORTS) {
		snprintf(why, len, "more than %zu ports in one rule", LC_NET_MAX_PORTS);
		return -1;
	}
	r->ports[r->n_ports++] = p;
	return 0;
}

static int rule_set_cidr(lc_net_rule_t *r, const char *cidr, char *why, size_t len)
{
	return lc_cidr_parse(cidr, &r->family, r->addr, &r->prefix, why, len);
}

int lc_net_parse_allow(const char *arg, lc_net_rule_t *out, lc_error_t **err)
{
	char why[192] = "";
	lc_net_rule_t r;
	memset(&r, 0, sizeof(r));
	if (!arg || !*arg)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow needs CIDR[:PORT[,PORT...]]");
	_cleanup_free_ char *buf = strdup(arg);
	char *addr = buf, *ports = NULL;
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');
		if (!close)
			return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow '%s': missing ']'", arg);
		*close = '\0';
		addr = buf + 1;
		if (close[1] == ':')
			ports = close + 2;
		else if (close[1])
			return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow '%s': expected ':PORT' after ']'", arg);
	} else if (strchr(buf, ':') != strrchr(buf, ':')) {
		/* Bare IPv6: ports only after an explicit prefix ("::/32:443"). */
		char *slash = strchr(buf, '/');
		char *colon = slash ? strchr(slash, ':') : NULL;
		if (colon) {
			*colon = '\0';
			ports = colon + 1;
		}
	} else {
		char *colon = strchr(buf, ':');
		if (colon) {
			*colon = '\0';
			ports = colon + 1;
		}
	}
	if (rule_set_cidr(&r, addr, why, sizeof(why)) < 0)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow '%s': %s", arg, why);
	if (ports) {
		const char *p = ports;
		for (;;) {
			size_t n = strcspn(p, ",");
			unsigned short v = port_from(p, n);
			if (!v)
				return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow '%s': invalid port '%.*s' (expected 1-65535)",
						    arg, (int)n, p);
			if (add_port(&r, v, why, sizeof(why)) < 0)
				return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow '%s': %s", arg, why);
			if (!p[n])
				break;
			p += n + 1;
		}
	}
	*out = r;
	return 0;
}

void lc_net_rule_format(const lc_net_rule_t *r, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	inet_ntop(r->family, r->addr, a, sizeof(a));
	int n = snprintf(buf, len, r->family == AF_INET6 ? "[%s/%d]" : "%s/%d", a, r->prefix);
	for (size_t i = 0; i < r->n_ports && n > 0 && (size_t)n < len; i++)
		n += snprintf(buf + n, len - (size_t)n, "%c%u", i ? ',' : ':', r->ports[i]);
}

static bool valid_hostname(const char *s)
{
	size_t len = strlen(s), label = 0;
	if (!len || len > 253 || s[0] == '-' || s[0] == '.')
		return false;
	for (const char *p = s; *p; p++) {
		if (*p == '.') {
			if (!label)
				return false;
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
			return false;
		if (++label > 63)
			return false;
	}
	return true;
}

static bool valid_ip(const char *s)
{
	unsigned char a[16];
	return s && (inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1);
}

int lc_net_parse_host(const char *arg, lc_host_entry_t *out, lc_error_t **err)
{
	const char *colon = arg ? strchr(arg, ':') : NULL;
	if (!colon)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--add-host '%s': expected NAME:IP", arg ? arg : "");
	_cleanup_free_ char *name = strndup(arg, (size_t)(colon - arg));
	_cleanup_free_ char *ip = strdup(colon + 1);
	size_t n = strlen(ip);
	if (n >= 2 && ip[0] == '[' && ip[n - 1] == ']') {
		memmove(ip, ip + 1, n - 2);
		ip[n - 2] = '\0';
	}
	if (!valid_hostname(name))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--add-host '%s': '%s' is not a valid host name", arg, name);
	if (!valid_ip(ip))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--add-host '%s': '%s' is not an IPv4 or IPv6 address", arg, ip);
	out->name = lc_steal(name);
	out->ip = lc_steal(ip);
	return 0;
}

void lc_net_spec_clear(lc_net_spec_t *spec)
{
	if (!spec)
		return;
	free(spec->allow);
	for (size_t i = 0; i < spec->n_hosts; i++) {
		free(spec->hosts[i].name);
		free(spec->hosts[i].ip);
	}
	free(spec->hosts);
	free(spec->dns);
	free(spec->policy);
	memset(spec, 0, sizeof(*spec));
}

static void spec_add_rule(lc_net_spec_t *spec, const lc_net_rule_t *r)
{
	lc_net_rule_t *n = realloc(spec->allow, (spec->n_allow + 1) * sizeof(*n));
	if (!n)
		abort();
	n[spec->n_allow++] = *r;
	spec->allow = n;
}

static bool spec_has_host(const lc_net_spec_t *spec, const char *name)
{
	for (size_t i = 0; i < spec->n_hosts; i++)
		if (!strcasecmp(spec->hosts[i].name, name))
			return true;
	return false;
}

static void spec_push_host(lc_net_spec_t *spec, lc_host_entry_t h)
{
	lc_host_entry_t *n = realloc(spec->hosts, (spec->n_hosts + 1) * sizeof(*n));
	if (!n)
		abort();
	n[spec->n_hosts++] = h;
	spec->hosts = n;
}

static void spec_add_host(lc_net_spec_t *spec, const char *name, const char *ip)
{
	spec_push_host(spec, (lc_host_entry_t){.name = strdup(name), .ip = strdup(ip)});
}

int lc_net_spec_add_allow(lc_net_spec_t *spec, const char *arg, lc_error_t **err)
{
	lc_net_rule_t r;
	if (lc_net_parse_allow(arg, &r, err) < 0)
		return -1;
	spec_add_rule(spec, &r);
	return 0;
}

int lc_net_spec_add_host(lc_net_spec_t *spec, const char *arg, lc_error_t **err)
{
	lc_host_entry_t h;
	if (lc_net_parse_host(arg, &h, err) < 0)
		return -1;
	spec_push_host(spec, h);
	return 0;
}

/* ---- policies ---------------------------------------------------------------- */

#define POLICY_FAIL(...) lc_error_set(err, LC_EXIT_INVALID, 0, __VA_ARGS__)

static int policy_rule(json_t *item, size_t i, const char *src, lc_net_rule_t *r, lc_error_t **err)
{
	char why[192];
	memset(r, 0, sizeof(*r));
	if (!json_is_object(item))
		return POLICY_FAIL("network policy %s: allow[%zu]: expected an object {\"cidr\": ..., \"ports\": [...]}", src, i);
	const char *key;
	json_t *v;
	json_object_foreach(item, key, v) {
		if (strcmp(key, "cidr") && strcmp(key, "ports") && strcmp(key, "description"))
			return POLICY_FAIL("network policy %s: allow[%zu].%s: unknown field (expected cidr, ports, description)",
					   src, i, key);
	}
	json_t *cidr = json_object_get(item, "cidr");
	if (!json_is_string(cidr))
		return POLICY_FAIL("network policy %s: allow[%zu].cidr: expected a CIDR string", src, i);
	if (rule_set_cidr(r, json_string_value(cidr), why, sizeof(why)) < 0)
		return POLICY_FAIL("network policy %s: allow[%zu].cidr: %s", src, i, why);
	json_t *ports = json_object_get(item, "ports");
	if (!ports)
		return 0;
	if (!json_is_array(ports))
		return POLICY_FAIL("network policy %s: allow[%zu].ports: expected an array of integers 1-65535", src, i);
	size_t j;
	json_t *p;
	json_array_foreach(ports, j, p) {
		json_int_t n = json_is_integer(p) ? json_integer_value(p) : 0;
		if (n < 1 || n > 65535)
			return POLICY_FAIL("network policy %s: allow[%zu].ports[%zu]: expected an integer 1-65535", src, i, j);
		if (add_port(r, (unsigned short)n, why, sizeof(why)) < 0)
			return POLICY_FAIL("network policy %s: allow[%zu].ports: %s", src, i, why);
	}
	return 0;
}

int lc_net_policy_from_json(json_t *doc, const char *src, lc_net_spec_t *spec, lc_error_t **err)
{
	if (!json_is_object(doc))
		return POLICY_FAIL("network policy %s: expected a JSON object", src);
	const char *key;
	json_t *v;
	json_object_foreach(doc, key, v) {
		if (strcmp(key, "mode") && strcmp(key, "allow") && strcmp(key, "hosts") && strcmp(key, "dns") &&
		    strcmp(key, "description"))
			return POLICY_FAIL("network policy %s: %s: unknown field (expected mode, allow, hosts, dns, description)",
					   src, key);
	}
	json_t *mode = json_object_get(doc, "mode");
	if (!mode)
		return POLICY_FAIL("network policy %s: mode: missing (expected none, allow or open)", src);
	if (!json_is_string(mode) || mode_from(json_string_value(mode), &spec->mode) < 0)
		return POLICY_FAIL("network policy %s: mode: expected \"none\", \"allow\" or \"open\"", src);

	json_t *allow = json_object_get(doc, "allow");
	if (allow && !json_is_array(allow))
		return POLICY_FAIL("network policy %s: allow: expected an array", src);
	size_t i;
	json_t *item;
	json_array_foreach(allow, i, item) {
		lc_net_rule_t r;
		if (policy_rule(item, i, src, &r, err) < 0)
			return -1;
		spec_add_rule(spec, &r);
	}

	json_t *hosts = json_object_get(doc, "hosts");
	if (hosts && !json_is_object(hosts))
		return POLICY_FAIL("network policy %s: hosts: expected an object {\"name\": \"ip\"}", src);
	json_object_foreach(hosts, key, v) {
		if (!valid_hostname(key))
			return POLICY_FAIL("network policy %s: hosts.%s: not a valid host name", src, key);
		if (!json_is_string(v) || !valid_ip(json_string_value(v)))
			return POLICY_FAIL("network policy %s: hosts.%s: expected an IPv4 or IPv6 address", src, key);
		spec_add_host(spec, key, json_string_value(v));
	}

	json_t *dns = json_object_get(doc, "dns");
	if (dns) {
		if (!json_is_string(dns) || !valid_ip(json_string_value(dns)))
			return POLICY_FAIL("network policy %s: dns: expected an IPv4 or IPv6 address", src);
		spec->dns = strdup(json_string_value(dns));
	}
	if (spec->mode == LC_NET_NONE && spec->n_allow)
		return POLICY_FAIL("network policy %s: allow: rules need mode \"allow\" or \"open\"", src);
	return 0;
}

static bool valid_policy_name(const char *s)
{
	if (!*s || *s == '.' || strlen(s) > 100)
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
			return false;
	return true;
}

/* The file of a policy name or path; NULL with *err when there is none. */
static char *policy_path(const char *name_or_path, lc_error_t **err)
{
	size_t n = strlen(name_or_path);
	if (strchr(name_or_path, '/') || (n > 5 && !strcmp(name_or_path + n - 5, ".json"))) {
		if (access(name_or_path, R_OK) < 0) {
			lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_RUNTIME, errno,
				     "network policy %s", name_or_path);
			return NULL;
		}
		return strdup(name_or_path);
	}
	if (!valid_policy_name(name_or_path)) {
		lc_error_set(err, LC_EXIT_USAGE, 0, "--net-policy '%s': not a policy name or a path", name_or_path);
		return NULL;
	}
	char *site = lc_strdup_printf("%s/policies/net/%s.json", lc_net_etc_dir(), name_or_path);
	if (access(site, F_OK) == 0)
		return site;
	free(site);
	char *shipped = lc_strdup_printf("%s/net/%s.json", lc_policy_dir(), name_or_path);
	if (access(shipped, F_OK) == 0)
		return shipped;
	lc_error_set(err, LC_EXIT_UNKNOWN, 0, "unknown network policy '%s' (no %s/policies/net/%s.json nor %s)",
		     name_or_path, lc_net_etc_dir(), name_or_path, shipped);
	free(shipped);
	return NULL;
}

int lc_net_policy_load(const char *name_or_path, lc_net_spec_t *spec, lc_error_t **err)
{
	if (!name_or_path || !*name_or_path)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--net-policy needs a name or a path");
	_cleanup_free_ char *path = policy_path(name_or_path, err);
	if (!path)
		return -1;
	json_error_t jerr;
	_cleanup_json_ json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc)
		return POLICY_FAIL("network policy %s: line %d: %s", path, jerr.line, jerr.text);
	lc_net_spec_t pol;
	memset(&pol, 0, sizeof(pol));
	if (lc_net_policy_from_json(doc, path, &pol, err) < 0) {
		lc_net_spec_clear(&pol);
		return -1;
	}
	/* Merge: what the command line said wins. */
	if (spec->mode == LC_NET_NONE)
		spec->mode = pol.mode;
	for (size_t i = 0; i < pol.n_allow; i++)
		spec_add_rule(spec, &pol.allow[i]);
	for (size_t i = 0; i < pol.n_hosts; i++)
		if (!spec_has_host(spec, pol.hosts[i].name))
			spec_add_host(spec, pol.hosts[i].name, pol.hosts[i].ip);
	if (!spec->dns && pol.dns)
		spec->dns = lc_steal(pol.dns);
	free(spec->policy);
	spec->policy = strdup(name_or_path);
	lc_net_spec_clear(&pol);
	return 0;
}

int lc_net_spec_check(const lc_net_spec_t *spec, lc_error_t **err)
{
	if (spec->mode != LC_NET_NONE && spec->mode != LC_NET_ALLOW && spec->mode != LC_NET_OPEN)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "unknown network mode %d", (int)spec->mode);
	for (size_t i = 0; i < spec->n_allow; i++) {
		const lc_net_rule_t *r = &spec->allow[i];
		int max = r->family == AF_INET ? 32 : r->family == AF_INET6 ? 128 : -1;
		if (max < 0 || r->prefix < 0 || r->prefix > max)
			return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow rule %zu: invalid address family or prefix", i + 1);
		if (r->n_ports > LC_NET_MAX_PORTS)
			return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow rule %zu: more than %zu ports", i + 1, LC_NET_MAX_PORTS);
		for (size_t j = 0; j < r->n_ports; j++)
			if (!r->ports[j])
				return lc_error_set(err, LC_EXIT_USAGE, 0, "--allow rule %zu: port 0 (expected 1-65535)", i + 1);
	}
	for (size_t i = 0; i < spec->n_hosts; i++) {
		const lc_host_entry_t *h = &spec->hosts[i];
		if (!h->name || !valid_hostname(h->name))
			return lc_error_set(err, LC_EXIT_USAGE, 0, "--add-host: '%s' is not a valid host name",
					    h->name ? h->name : "");
		if (!valid_ip(h->ip))
			return lc_error_set(err, LC_EXIT_USAGE, 0, "--add-host %s: '%s' is not an IPv4 or IPv6 address",
					    h->name, h->ip ? h->ip : "");
	}
	if (spec->dns && !valid_ip(spec->dns))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "--dns '%s': not an IPv4 or IPv6 address", spec->dns);
	return 0;
}
