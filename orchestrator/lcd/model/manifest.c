/* manifest.c — validate an app manifest and build lcd_app_t from it.
 * Every error names the JSON path of the offending value. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "disk.h"
#include "image.h"
#include "json.h"
#include "ledger.h"
#include "manifest.h"
#include "util.h"

#define DEFAULT_TIMEOUT 3600
#define DEFAULT_CONCURRENCY 1
#define DEFAULT_QUEUE 100
#define MAX_CONCURRENCY 1000
#define MAX_QUEUE 100000

bool lcd_name_valid(const char *s)
{
	if (!s || !*s || strlen(s) > 63)
		return false;
	if (!islower((unsigned char)s[0]) && !isdigit((unsigned char)s[0]))
		return false;
	for (const char *p = s; *p; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '-' && *p != '_')
			return false;
	return true;
}

bool lcd_secret_name_valid(const char *s)
{
	if (!s || !*s || strlen(s) > 127)
		return false;
	if (!isalpha((unsigned char)s[0]) && s[0] != '_')
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return true;
}

static int bad(lc_error_t **err, const char *path, const char *what)
{
	return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s", path, what);
}

/* Refuse keys outside the allowed list (catches typos like "concurency"). */
int lcd_check_keys(json_t *obj, const char *path, const char *const *allowed, lc_error_t **err)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			ok |= strcmp(key, allowed[i]) == 0;
		if (!ok) {
			_cleanup_free_ char *p = lc_strdup_printf("%s%s%s", path, *path ? "." : "", key);
			return bad(err, p, "unknown key");
		}
	}
	return 0;
}

/* An optional integer member >= min; *out keeps its default when absent. */
static int get_int(json_t *obj, const char *key, const char *path, long long min, long long max,
		   long long *out, lc_error_t **err)
{
	json_t *v = json_object_get(obj, key);
	if (!v)
		return 0;
	_cleanup_free_ char *p = lc_strdup_printf("%s.%s", path, key);
	if (!json_is_integer(v) || json_integer_value(v) < min) {
		if (min == 1)
			return bad(err, p, "expected a positive integer");
		if (min == 0)
			return bad(err, p, "expected a non-negative integer");
		return bad(err, p, "expected an integer");
	}
	if (json_integer_value(v) > max) {
		_cleanup_free_ char *what = lc_strdup_printf("at most %lld", max);
		return bad(err, p, what);
	}
	*out = json_integer_value(v);
	return 0;
}

static int get_strv(json_t *v, const char *path, bool (*valid)(const char *), const char *what,
		    char ***out, lc_error_t **err)
{
	if (!json_is_array(v))
		return bad(err, path, "expected an array of strings");
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		_cleanup_free_ char *p = lc_strdup_printf("%s[%zu]", path, i);
		if (!json_is_string(e) || !*json_string_value(e))
			return bad(err, p, "expected a non-empty string");
		if (valid && !valid(json_string_value(e)))
			return bad(err, p, what);
		lc_strv_push(out, json_string_value(e));
	}
	return 0;
}

static int parse_size_value(json_t *v, const char *path, long long *out, lc_error_t **err)
{
	if (json_is_integer(v) && json_integer_value(v) > 0) {
		*out = json_integer_value(v);
		return 0;
	}
	if (json_is_string(v) && lc_parse_size(json_string_value(v), out) == 0 && *out > 0)
		return 0;
	return bad(err, path, "expected a size (bytes, or like \"512M\")");
}

int lcd_config_size(json_t *v, long long *out)
{
	long long n = -1;
	if (json_is_integer(v))
		n = json_integer_value(v);
	else if (json_is_string(v) && lc_parse_size(json_string_value(v), &n) < 0)
		return -1;
	if (n != 0 && n < LC_DISK_MIN)
		return -1;
	*out = n;
	return 0;
}

int lcd_limits_parse(json_t *v, const char *path, lc_limits_t *l, lc_error_t **err)
{
	static const char *const keys[] = { "memory", "memory_swap", "pids", "cpus", "cpu_weight",
		"io_weight", "best_effort", "disk", NULL };
	l->memory = -1;
	l->memory_swap = -1;
	l->pids = -1;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return bad(err, path, "expected an object");
	if (lcd_check_keys(v, path, keys, err) < 0)
		return -1;
	json_t *m;
	if ((m = json_object_get(v, "memory"))) {
		_cleanup_free_ char *p = lc_strdup_printf("%s.memory", path);
		if (parse_size_value(m, p, &l->memory, err) < 0)
			return -1;
	}
	if ((m = json_object_get(v, "memory_swap"))) {
		_cleanup_free_ char *p = lc_strdup_printf("%s.memory_swap", path);
		if (json_is_integer(m) && json_integer_value(m) == 0)
			l->memory_swap = 0;
		else if (parse_size_value(m, p, &l->memory_swap, err) < 0)
			return -1;
	}
	long long n = -1;
	if (get_int(v, "pids", path, 1, 1 << 22, &n, err) < 0)
		return -1;
	l->pids = n;
	if ((m = json_object_get(v, "cpus"))) {
		if (!json_is_number(m) || json_number_value(m) <= 0 || json_number_value(m) > 4096) {
			_cleanup_free_ char *p = lc_strdup_printf("%s.cpus", path);
			return bad(err, p, "expected a positive number of CPUs");
		}
		l->cpus = json_number_value(m);
	}
	n = 0;
	if (get_int(v, "cpu_weight", path, 1, 10000, &n, err) < 0)
		return -1;
	l->cpu_weight = (int)n;
	n = 0;
	if (get_int(v, "io_weight", path, 1, 10000, &n, err) < 0)
		return -1;
	l->io_weight = (int)n;
	if ((m = json_object_get(v, "disk"))) {
		_cleanup_free_ char *p = lc_strdup_printf("%s.disk", path);
		if (parse_size_value(m, p, &l->disk, err) < 0)
			return -1;
		if (l->disk < LC_DISK_MIN)
			return bad(err, p, "at least 16M (room for the filesystem's own tables)");
	}
	if ((m = json_object_get(v, "best_effort"))) {
		if (!json_is_boolean(m)) {
			_cleanup_free_ char *p = lc_strdup_printf("%s.best_effort", path);
			return bad(err, p, "expected true or false");
		}
		l->best_effort = json_is_true(m);
	}
	return 0;
}

/* The common start of a named entry (functions.NAME, schedules.NAME, …):
 * its path, a valid name, an object with only the allowed keys. */
static int entry_start(const char *section, const char *what, const char *name, json_t *v,
		       const char *const *keys, char **path, lc_error_t **err)
{
	*path = lc_strdup_printf("%s.%s", section, name);
	if (!lcd_name_valid(name)) {
		_cleanup_free_ char *m = lc_strdup_printf("bad %s name (lowercase letters, digits, '-', '_'; at most 63)", what);
		return bad(err, *path, m);
	}
	if (!json_is_object(v))
		return bad(err, *path, "expected an object");
	return lcd_check_keys(v, *path, keys, err);
}

/* PATH.function: required, naming one of the app's functions. */
static int function_ref(lcd_app_t *app, json_t *v, const char *path, char **out, lc_error_t **err)
{
	json_t *fn = json_object_get(v, "function");
	_cleanup_free_ char *fp = lc_strdup_printf("%s.function", path);
	if (!json_is_string(fn))
		return bad(err, fp, fn ? "expected a string" : "required");
	if (!lcd_app_function(app, json_string_value(fn)))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: no function '%s' in this app", fp,
				    json_string_value(fn));
	*out = strdup(json_string_value(fn));
	return 0;
}

/* A path a manifest may name: absolute, without "." or ".." components. */
static bool abs_path_ok(const char *p)
{
	if (p[0] != '/' || strstr(p, "//"))
		return false;
	for (const char *c = p; c; c = strchr(c + 1, '/')) {
		const char *n = c + 1;
		size_t len = strcspn(n, "/");
		if ((len == 1 && n[0] == '.') || (len == 2 && n[0] == '.' && n[1] == '.'))
			return false;
	}
	return true;
}

int lcd_idmap_value(json_t *v)
{
	if (!v || (json_is_string(v) && !strcmp(json_string_value(v), "auto")))
		return LC_IDMAP_AUTO;
	if (json_is_boolean(v))
		return json_is_true(v) ? LC_IDMAP_ON : LC_IDMAP_OFF;
	return -1;
}

/* functions.F.mounts: [{"source", "target", "readonly", "idmap"}], as
 * --bind SRC:DST[:ro][:idmap|noidmap]; idmap is true, false or "auto". */
static int parse_mounts(json_t *v, const char *path, lcd_function_t *f, lc_error_t **err)
{
	static const char *const keys[] = { "source", "target", "readonly", "idmap", NULL };
	if (!json_is_array(v))
		return bad(err, path, "expected an array of objects");
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		_cleanup_free_ char *p = lc_strdup_printf("%s[%zu]", path, i);
		if (!json_is_object(e))
			return bad(err, p, "expected an object");
		if (lcd_check_keys(e, p, keys, err) < 0)
			return -1;
		const char *names[2] = { "source", "target" };
		const char *val[2];
		for (int k = 0; k < 2; k++) {
			json_t *x = json_object_get(e, names[k]);
			_cleanup_free_ char *kp = lc_strdup_printf("%s.%s", p, names[k]);
			if (!x)
				return bad(err, kp, "required");
			if (!json_is_string(x) || !abs_path_ok(json_string_value(x)) || strlen(json_string_value(x)) > 4095)
				return bad(err, kp, "expected an absolute path (no '.' or '..' parts)");
			val[k] = json_string_value(x);
		}
		if (!strcmp(val[1], "/") || !strcmp(val[1], "/run/task") || !strncmp(val[1], "/run/task/", 10)) {
			_cleanup_free_ char *kp = lc_strdup_printf("%s.target", p);
			return bad(err, kp, "/ and /run/task are the sandbox's own");
		}
		lc_mount_t m = { .idmap = lcd_idmap_value(json_object_get(e, "idmap")) };
		json_t *ro = json_object_get(e, "readonly");
		if (ro && !json_is_boolean(ro)) {
			_cleanup_free_ char *kp = lc_strdup_printf("%s.readonly", p);
			return bad(err, kp, "expected true or false");
		}
		m.ro = json_is_true(ro);
		if (m.idmap < 0) {
			_cleanup_free_ char *kp = lc_strdup_printf("%s.idmap", p);
			return bad(err, kp, "expected true, false or \"auto\"");
		}
		m.src = strdup(val[0]);
		m.dst = strdup(val[1]);
		f->mounts = realloc(f->mounts, (f->n_mounts + 1) * sizeof(*f->mounts));
		f->mounts[f->n_mounts++] = m;
	}
	return 0;
}

static bool config_ref(json_t *v)
{
	const char *s = json_string_value(v);
	return s && s[0] == '$' && lcd_secret_name_valid(s + 1);
}

/* A function's "model_gateway", its shape only: what lcd must have (the
 * gateway, the provider's upstream, the secret) is checked at deploy
 * (lcd_gateway_parse), the "$KEY"s once the config is read. */
static int parse_gateway(json_t *v, const char *path, lc_error_t **err)
{
	static const char *const keys[] = { "provider", "secret", "budget_usd", "access", NULL };
	if (!json_is_object(v))
		return bad(err, path,
			   "expected {\"provider\": \"openai\", \"secret\": NAME, \"budget_usd\": N, \"access\": \"gateway\"}");
	if (lcd_check_keys(v, path, keys, err) < 0)
		return -1;
	_cleanup_free_ char *pp = lc_strdup_printf("%s.provider", path);
	if (lcd_provider_parse(lc_json_str(v, "provider")) < 0)
		return bad(err, pp, "expected \"anthropic\" or \"openai\"");
	_cleanup_free_ char *sp = lc_strdup_printf("%s.secret", path);
	json_t *sec = json_object_get(v, "secret");
	if (!sec)
		return bad(err, sp, "required (the secret holding the provider's key)");
	if (!lcd_secret_name_valid(json_string_value(sec)))
		return bad(err, sp, "expected a secret name");
	json_t *b = json_object_get(v, "budget_usd");
	_cleanup_free_ char *bp = lc_strdup_printf("%s.budget_usd", path);
	long long pusd;
	if (b && !config_ref(b) && lcd_usd_parse(b, bp, LCD_BUDGET_MAX_USD, &pusd, err) < 0)
		return -1;
	json_t *a = json_object_get(v, "access");
	const char *as = json_string_value(a);
	if (a && !config_ref(a) && (!as || (strcmp(as, "gateway") && strcmp(as, "direct")))) {
		_cleanup_free_ char *ap = lc_strdup_printf("%s.access", path);
		return bad(err, ap, "expected \"gateway\", \"direct\" or \"$CONFIG_KEY\"");
	}
	return 0;
}

static int parse_function(const char *name, json_t *v, lcd_function_t *f, lc_error_t **err)
{
	static const char *const keys[] = { "command", "image", "limits", "net", "timeout", "retries",
		"concurrency", "queue", "secrets", "optional_secrets", "mounts", "budget_usd", "model_gateway", "description",
		"retry_on_node_loss", NULL };
	_cleanup_free_ char *path = NULL;
	f->name = strdup(name);
	if (entry_start("functions", "function", name, v, keys, &path, err) < 0)
		return -1;

	json_t *cmd = json_object_get(v, "command");
	_cleanup_free_ char *cpath = lc_strdup_printf("%s.command", path);
	if (!cmd)
		return bad(err, cpath, "required");
	if (json_is_string(cmd)) {
		if (!*json_string_value(cmd))
			return bad(err, cpath, "expected a non-empty string or array of strings");
		/* A string is a shell command line, run by the sandbox's /bin/sh. */
		lc_strv_push(&f->argv, "/bin/sh");
		lc_strv_push(&f->argv, "-c");
		lc_strv_push(&f->argv, json_string_value(cmd));
	} else {
		if (!json_is_array(cmd) || json_array_size(cmd) == 0)
			return bad(err, cpath, "expected a non-empty string or array of strings");
		if (get_strv(cmd, cpath, NULL, NULL, &f->argv, err) < 0)
			return -1;
	}

	json_t *img = json_object_get(v, "image");
	if (img) {
		if (!json_is_string(img) || !*json_string_value(img)) {
			_cleanup_free_ char *p = lc_strdup_printf("%s.image", path);
			return bad(err, p, "expected an image name or \"host\"");
		}
		if (strcmp(json_string_value(img), "host") != 0)
			f->image = strdup(json_string_value(img));
	}

	_cleanup_free_ char *lpath = lc_strdup_printf("%s.limits", path);
	if (lcd_limits_parse(json_object_get(v, "limits"), lpath, &f->limits, err) < 0)
		return -1;

	json_t *net = json_object_get(v, "net");
	if (net) {
		/* "$KEY": the policy named by the app's config KEY (resolved
		 * once the config is read: resolve_net) */
		const char *ns = json_string_value(net);
		if (!ns || !(lcd_name_valid(ns) || (ns[0] == '$' && lcd_secret_name_valid(ns + 1)))) {
			_cleanup_free_ char *p = lc_strdup_printf("%s.net", path);
			return bad(err, p, "expected \"none\", a network policy name or \"$CONFIG_KEY\"");
		}
		f->net = strdup(ns);
	} else {
		f->net = strdup("none");
	}

	long long n = DEFAULT_TIMEOUT;
	if (get_int(v, "timeout", path, 1, 7 * 86400, &n, err) < 0)
		return -1;
	f->timeout = (int)n;
	n = 0;
	json_t *rnl = json_object_get(v, "retry_on_node_loss");
	if (rnl && !json_is_boolean(rnl)) {
		_cleanup_free_ char *rp = lc_strdup_printf("%s.retry_on_node_loss", path);
		return bad(err, rp, "expected true or false");
	}
	f->retry_on_node_loss = json_is_true(rnl);
	if (get_int(v, "retries", path, 0, 100, &n, err) < 0)
		return -1;
	f->retries = (int)n;
	n = DEFAULT_CONCURRENCY;
	if (get_int(v, "concurrency", path, 1, MAX_CONCURRENCY, &n, err) < 0)
		return -1;
	f->concurrency = (int)n;
	n = DEFAULT_QUEUE;
	if (get_int(v, "queue", path, 0, MAX_QUEUE, &n, err) < 0)
		return -1;
	f->queue = (int)n;

	json_t *sec = json_object_get(v, "secrets");
	if (sec) {
		_cleanup_free_ char *p = lc_strdup_printf("%s.secrets", path);
		if (get_strv(sec, p, lcd_secret_name_valid,
			     "bad secret name (letters, digits, '_'; not starting with a digit)", &f->secrets, err) < 0)
			return -1;
	}
	/* optional_secrets: given when set, left out when not (one of two
	 * ways to authenticate, say); they join secrets for every check */
	json_t *opt = json_object_get(v, "optional_secrets");
	if (opt) {
		_cleanup_free_ char *p = lc_strdup_printf("%s.optional_secrets", path);
		if (get_strv(opt, p, lcd_secret_name_valid,
			     "bad secret name (letters, digits, '_'; not starting with a digit)", &f->optional_secrets, err) < 0)
			return -1;
		for (size_t i = 0; f->optional_secrets[i]; i++) {
			for (char **s = f->secrets; s && *s; s++)
				if (!strcmp(*s, f->optional_secrets[i])) {
					_cleanup_free_ char *pi = lc_strdup_printf("%s[%zu]", p, i);
					return bad(err, pi, "also in secrets");
				}
			lc_strv_push(&f->secrets, f->optional_secrets[i]);
		}
	}

	json_t *mounts = json_object_get(v, "mounts");
	if (mounts) {
		_cleanup_free_ char *p = lc_strdup_printf("%s.mounts", path);
		if (parse_mounts(mounts, p, f, err) < 0)
			return -1;
	}
	json_t *budget = json_object_get(v, "budget_usd");
	if (budget) {
		_cleanup_free_ char *p = lc_strdup_printf("%s.budget_usd", path);
		if (lcd_usd_parse(budget, p, LCD_BUDGET_MAX_USD, &f->budget_pusd, err) < 0)
			return -1;
	}
	json_t *gw = json_object_get(v, "model_gateway");
	if (gw) {
		_cleanup_free_ char *p = lc_strdup_printf("%s.model_gateway", path);
		if (parse_gateway(gw, p, err) < 0)
			return -1;
		f->gateway_raw = json_incref(gw);
	}
	return 0;
}

static int parse_schedule(lcd_app_t *app, const char *name, json_t *v, void *elem, lc_error_t **err)
{
	lcd_schedule_t *s = elem;
	static const char *const keys[] = { "cron", "function", "args", "catchup", "description", NULL };
	_cleanup_free_ char *path = NULL;
	s->name = strdup(name);
	if (entry_start("schedules", "schedule", name, v, keys, &path, err) < 0)
		return -1;
	if (lcd_app_function(app, name))
		return bad(err, path, "a function has the same name");
	json_t *c = json_object_get(v, "cron");
	_cleanup_free_ char *cp = lc_strdup_printf("%s.cron", path);
	if (!json_is_string(c))
		return bad(err, cp, c ? "expected a string" : "required");
	_cleanup_free_ char *msg = NULL;
	if (lcd_cron_parse(json_string_value(c), &s->cron, &msg) < 0)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: bad cron expression '%s': %s", cp,
				    json_string_value(c), msg ? msg : "invalid");
	s->cron_expr = strdup(json_string_value(c));
	if (function_ref(app, v, path, &s->function, err) < 0)
		return -1;
	json_t *args = json_object_get(v, "args");
	s->args = args ? json_incref(args) : json_object();
	json_t *cu = json_object_get(v, "catchup");
	if (cu) {
		const char *cs = json_string_value(cu);
		if (cs && !strcmp(cs, "all"))
			s->catchup = LCD_CATCHUP_ALL;
		else if (cs && !strcmp(cs, "one"))
			s->catchup = LCD_CATCHUP_ONE;
		else if (cs && !strcmp(cs, "none"))
			s->catchup = LCD_CATCHUP_NONE;
		else {
			_cleanup_free_ char *p = lc_strdup_printf("%s.catchup", path);
			return bad(err, p, "expected \"all\", \"one\" or \"none\"");
		}
	}
	return 0;
}

static int parse_webhook(lcd_app_t *app, const char *name, json_t *v, void *elem, lc_error_t **err)
{
	lcd_webhook_t *w = elem;
	static const char *const keys[] = { "function", "secret", "events", "description", NULL };
	_cleanup_free_ char *path = NULL;
	w->name = strdup(name);
	if (entry_start("webhooks", "webhook", name, v, keys, &path, err) < 0 ||
	    function_ref(app, v, path, &w->function, err) < 0)
		return -1;
	/* Deliveries are verified with it before anything else: a webhook
	 * without one would let anyone who finds the URL spawn tasks. */
	json_t *sec = json_object_get(v, "secret");
	_cleanup_free_ char *sp = lc_strdup_printf("%s.secret", path);
	if (!sec)
		return bad(err, sp, "required (the name of the secret that signs deliveries)");
	if (!json_is_string(sec) || !lcd_secret_name_valid(json_string_value(sec)))
		return bad(err, sp, "expected a secret name");
	w->secret = strdup(json_string_value(sec));
	json_t *ev = json_object_get(v, "events");
	if (ev) {
		_cleanup_free_ char *p = lc_strdup_printf("%s.events", path);
		if (get_strv(ev, p, NULL, NULL, &w->events, err) < 0)
			return -1;
		if (!w->events)
			return bad(err, p, "expected at least one event (leave it out to take every event)");
	}
	return 0;
}

/* config: {"KEY": "value"}, handed to every function as environment.  The
 * names lcd sets itself (LC_TASK_*, LCD_*) and the secrets' names are
 * refused, so that no value can shadow another. */
#define CONFIG_MAX_KEYS 128
#define CONFIG_MAX_VALUE 16384

static bool config_name_reserved(const char *k)
{
	return !strncmp(k, "LC_TASK_", 8) || !strncmp(k, "LCD_", 4);
}

static int parse_config(lcd_app_t *app, json_t *cfg, lc_error_t **err)
{
	if (!cfg)
		return 0;
	if (!json_is_object(cfg))
		return bad(err, "config", "expected an object of strings {\"NAME\": \"value\"}");
	if (json_object_size(cfg) > CONFIG_MAX_KEYS)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "config: at most %d keys", CONFIG_MAX_KEYS);
	const char *key;
	json_t *v;
	json_object_foreach(cfg, key, v) {
		_cleanup_free_ char *p = lc_strdup_printf("config.%s", key);
		if (!lcd_secret_name_valid(key))
			return bad(err, p, "bad name (an environment variable name: letters, digits, '_'; not starting with a digit)");
		if (config_name_reserved(key))
			return bad(err, p, "names starting with LC_TASK_ or LCD_ are set by lcd");
		if (!json_is_string(v))
			return bad(err, p, "expected a string");
		if (strlen(json_string_value(v)) != json_string_length(v))
			return bad(err, p, "must not contain NUL bytes");
		if (json_string_length(v) > CONFIG_MAX_VALUE)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: at most %d bytes", p, CONFIG_MAX_VALUE);
		for (size_t i = 0; i < app->n_functions; i++)
			for (char **s = app->functions[i].secrets; s && *s; s++)
				if (!strcmp(*s, key)) {
					_cleanup_free_ char *m = lc_strdup_printf("also a secret of functions.%s (config is not secret)",
										  app->functions[i].name);
					return bad(err, p, m);
				}
		_cleanup_free_ char *kv = lc_strdup_printf("%s=%s", key, json_string_value(v));
		lc_strv_push(&app->config, kv);
	}
	return 0;
}

static const char *config_value(const lcd_app_t *app, const char *key)
{
	size_t klen = strlen(key);
	for (char **c = app->config; c && *c; c++)
		if (!strncmp(*c, key, klen) && (*c)[klen] == '=')
			return *c + klen + 1;
	return NULL;
}

/* A function's "net": "$KEY" names the policy in the app's config, so
 * that a deploy (--config KEY=POLICY) chooses it. */
static int resolve_net(lcd_app_t *app, lc_error_t **err)
{
	for (size_t i = 0; i < app->n_functions; i++) {
		lcd_function_t *f = &app->functions[i];
		if (f->net[0] != '$')
			continue;
		_cleanup_free_ char *p = lc_strdup_printf("functions.%s.net", f->name);
		const char *val = config_value(app, f->net + 1);
		if (!val) {
			_cleanup_free_ char *m = lc_strdup_printf("%s is not a key of config", f->net);
			return bad(err, p, m);
		}
		if (!lcd_name_valid(val)) {
			_cleanup_free_ char *m = lc_strdup_printf("config.%s: expected \"none\" or a network policy name, not '%s'",
							  f->net + 1, val);
			return bad(err, p, m);
		}
		free(f->net);
		f->net = strdup(val);
	}
	return 0;
}

/* A function's "model_gateway" with its "$KEY"s read from the config:
 * "access" (gateway or direct) and "budget_usd" (a number of dollars; ""
 * for none). */
static int resolve_gateway(lcd_app_t *app, lc_error_t **err)
{
	for (size_t i = 0; i < app->n_functions; i++) {
		lcd_function_t *f = &app->functions[i];
		if (!f->gateway_raw)
			continue;
		_cleanup_free_ char *p = lc_strdup_printf("functions.%s.model_gateway", f->name);
		const char *access = "gateway";
		json_t *a = json_object_get(f->gateway_raw, "access");
		if (config_ref(a)) {
			const char *key = json_string_value(a) + 1;
			access = config_value(app, key);
			_cleanup_free_ char *ap = lc_strdup_printf("%s.access", p);
			if (!access) {
				_cleanup_free_ char *m = lc_strdup_printf("%s is not a key of config", json_string_value(a));
				return bad(err, ap, m);
			}
			if (strcmp(access, "gateway") && strcmp(access, "direct")) {
				_cleanup_free_ char *m = lc_strdup_printf("config.%s: expected gateway or direct, not '%s'", key, access);
				return bad(err, ap, m);
			}
			f->gateway_access_key = strdup(key);
		} else if (a) {
			access = json_string_value(a);
		}
		if (strcmp(access, "gateway"))
			continue;
		json_t *g = json_pack("{s:O, s:O}", "provider", json_object_get(f->gateway_raw, "provider"), "secret",
				      json_object_get(f->gateway_raw, "secret"));
		f->model_gateway = g;
		json_t *b = json_object_get(f->gateway_raw, "budget_usd");
		if (config_ref(b)) {
			const char *key = json_string_value(b) + 1;
			const char *val = config_value(app, key);
			_cleanup_free_ char *bp = lc_strdup_printf("%s.budget_usd", p);
			if (!val) {
				_cleanup_free_ char *m = lc_strdup_printf("%s is not a key of config", json_string_value(b));
				return bad(err, bp, m);
			}
			if (!*val)
				continue; /* no budget of its own */
			char *end;
			double d = strtod(val, &end);
			_cleanup_free_ char *cp = lc_strdup_printf("%s: config.%s", bp, key);
			long long pusd;
			_cleanup_json_ json_t *num = json_real(d);
			if (*end || end == val || lcd_usd_parse(num, cp, LCD_BUDGET_MAX_USD, &pusd, err) < 0) {
				if (err && *err)
					return -1;
				_cleanup_free_ char *m = lc_strdup_printf("expected a number of dollars, not '%s'", val);
				return bad(err, cp, m);
			}
			json_object_set(g, "budget_usd", num);
		} else if (b) {
			json_object_set(g, "budget_usd", b);
		}
	}
	return 0;
}

/* An optional object of named entries (schedules, webhooks): an array of
 * n elements of `size` bytes, each filled by parse. */
static int parse_named(lcd_app_t *app, json_t *m, const char *key, size_t size, void **arr, size_t *n,
		       int (*parse)(lcd_app_t *, const char *, json_t *, void *, lc_error_t **), lc_error_t **err)
{
	json_t *obj = json_object_get(m, key);
	if (!obj)
		return 0;
	if (!json_is_object(obj))
		return bad(err, key, "expected an object");
	*arr = lc_xmalloc0((json_object_size(obj) + 1) * size);
	const char *name;
	json_t *v;
	json_object_foreach(obj, name, v) {
		if (parse(app, name, v, (char *)*arr + (*n)++ * size, err) < 0)
			return -1;
	}
	return 0;
}

static bool grant_net_ok(const char *s)
{
	return lcd_name_valid(s) || (s[0] == '$' && lcd_secret_name_valid(s + 1));
}

/* "sandboxes": {"max", "net", "images", "limits", "model_gateway"}: what
 * the app's tasks may make (lcd_grant_t). */
static int parse_sandboxes(json_t *m, lcd_app_t *app, lc_error_t **err)
{
	static const char *const keys[] = { "max", "net", "images", "limits", "model_gateway", NULL };
	lcd_grant_t *g = &app->grant;
	app->sandboxes_max = g->max = LCD_SANDBOXES_MAX_DEFAULT;
	g->limits = (lc_limits_t){ .memory = LCD_GRANT_MEMORY_DEFAULT, .memory_swap = -1, .pids = LCD_GRANT_PIDS_DEFAULT };
	lc_strv_push(&g->net, "none");
	json_t *v = json_object_get(m, "sandboxes");
	if (v && !json_is_object(v))
		return bad(err, "sandboxes", "expected an object {\"max\", \"net\", \"images\", \"limits\", \"model_gateway\"}");
	if (v && lcd_check_keys(v, "sandboxes", keys, err) < 0)
		return -1;
	long long n = LCD_SANDBOXES_MAX_DEFAULT;
	if (v && get_int(v, "max", "sandboxes", 0, 10000, &n, err) < 0)
		return -1;
	app->sandboxes_max = g->max = (int)n;
	json_t *x = v ? json_object_get(v, "net") : NULL;
	if (x && get_strv(x, "sandboxes.net", grant_net_ok,
			  "expected a network policy name (\"allow\": allow lists of the task's own) or \"$CONFIG_KEY\"",
			  &g->net_raw, err) < 0)
		return -1;
	x = v ? json_object_get(v, "images") : NULL;
	if (x && get_strv(x, "sandboxes.images", NULL, NULL, &g->images_raw, err) < 0)
		return -1;
	for (size_t i = 0; g->images_raw && g->images_raw[i]; i++) {
		const char *s = g->images_raw[i];
		if (!(s[0] == '$' ? lcd_secret_name_valid(s + 1) : !strcmp(s, "host") || lc_image_name_valid(s))) {
			_cleanup_free_ char *p = lc_strdup_printf("sandboxes.images[%zu]", i);
			return bad(err, p, "expected an image name, \"host\" or \"$CONFIG_KEY\"");
		}
	}
	x = v ? json_object_get(v, "limits") : NULL;
	if (x) {
		/* what it names replaces the default; what it leaves out keeps it */
		lc_limits_t l = { 0 };
		if (lcd_limits_parse(x, "sandboxes.limits", &l, err) < 0)
			return -1;
		if (l.memory >= 0)
			g->limits.memory = l.memory;
		if (l.memory_swap >= 0)
			g->limits.memory_swap = l.memory_swap;
		if (l.pids >= 0)
			g->limits.pids = l.pids;
		g->limits.cpus = l.cpus;
		g->limits.cpu_weight = l.cpu_weight;
		g->limits.io_weight = l.io_weight;
		g->limits.disk = l.disk;
		if (l.best_effort)
			return bad(err, "sandboxes.limits.best_effort", "not here: a task's sandbox gets what the host enforces of "
				   "these (the rest is logged)");
	}
	x = v ? json_object_get(v, "model_gateway") : NULL;
	if (x && !json_is_boolean(x))
		return bad(err, "sandboxes.model_gateway", "expected true or false");
	g->model_gateway = json_is_true(x);
	if (!x)
		for (size_t i = 0; i < app->n_functions; i++)
			g->model_gateway |= app->functions[i].gateway_raw != NULL;
	return 0;
}

/* The grant's entries of list raw (sandboxes.KEY) into *out, "$KEY"s read
 * from the config (an empty value adds nothing), each checked by ok. */
static int resolve_list(lcd_app_t *app, char **raw, const char *key, bool (*ok)(const char *), const char *what,
			char ***out, lc_error_t **err)
{
	for (size_t i = 0; raw && raw[i]; i++) {
		const char *s = raw[i];
		if (s[0] == '$') {
			const char *val = config_value(app, s + 1);
			_cleanup_free_ char *p = lc_strdup_printf("sandboxes.%s[%zu]", key, i);
			if (!val) {
				_cleanup_free_ char *m = lc_strdup_printf("%s is not a key of config", s);
				return bad(err, p, m);
			}
			if (!*val)
				continue;
			if (!ok(val)) {
				_cleanup_free_ char *m = lc_strdup_printf("config.%s: expected %s, not '%s'", s + 1, what, val);
				return bad(err, p, m);
			}
			s = val;
		}
		if (strcmp(s, "none"))
			lc_strv_push(out, s);
	}
	return 0;
}

static bool image_ok(const char *s)
{
	return !strcmp(s, "host") || lc_image_name_valid(s);
}

/* The grant's policies and images: "none" and "host", those it lists
 * ("$KEY"s read from the config), the functions' and the devboxes' own
 * images. */
static int resolve_grant(lcd_app_t *app, lc_error_t **err)
{
	lcd_grant_t *g = &app->grant;
	lc_strv_push(&g->images, "host");
	if (resolve_list(app, g->net_raw, "net", lcd_name_valid, "a network policy name", &g->net, err) < 0 ||
	    resolve_list(app, g->images_raw, "images", image_ok, "an image name", &g->images, err) < 0)
		return -1;
	for (size_t i = 0; i < app->n_functions; i++)
		if (app->functions[i].image)
			lc_strv_push(&g->images, app->functions[i].image);
	for (size_t i = 0; i < app->n_devboxes; i++)
		if (app->devboxes[i].image)
			lc_strv_push(&g->images, app->devboxes[i].image);
	return 0;
}

/* "budget": {"daily_usd": N}: what the model gateway lets the app's tasks
 * spend per day (UTC). */
static int parse_budget(json_t *m, lcd_app_t *app, lc_error_t **err)
{
	static const char *const keys[] = { "daily_usd", NULL };
	json_t *v = json_object_get(m, "budget");
	if (!v)
		return 0;
	if (!json_is_object(v))
		return bad(err, "budget", "expected an object {\"daily_usd\": N}");
	if (lcd_check_keys(v, "budget", keys, err) < 0)
		return -1;
	json_t *d = json_object_get(v, "daily_usd");
	if (d && lcd_usd_parse(d, "budget.daily_usd", LCD_BUDGET_MAX_USD, &app->daily_budget_pusd, err) < 0)
		return -1;
	return 0;
}

static bool map_name_ok(const char *s)
{
	return lcd_name_valid(s);
}

int lcd_app_parse(json_t *m, lcd_app_t **out, lc_error_t **err)
{
	static const char *const keys[] = { "name", "description", "functions", "schedules", "maps",
		"webhooks", "budget", "repository", "config", "sandboxes", "devboxes", NULL };
	if (!json_is_object(m))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "manifest: expected a JSON object");
	if (lcd_check_keys(m, "", keys, err) < 0)
		return -1;
	lcd_app_t *app = lc_xmalloc0(sizeof(*app));
	app->refs = 1;
	app->manifest = json_incref(m);
	int r = -1;

	json_t *name = json_object_get(m, "name");
	if (!json_is_string(name)) {
		bad(err, "name", name ? "expected a string" : "required");
		goto out;
	}
	if (!lcd_name_valid(json_string_value(name))) {
		bad(err, "name", "bad app name (lowercase letters, digits, '-', '_'; at most 63)");
		goto out;
	}
	app->name = strdup(json_string_value(name));

	/* An app of devboxes only needs no function. */
	json_t *fns = json_object_get(m, "functions");
	json_t *dbx = json_object_get(m, "devboxes");
	if (dbx && (!json_is_object(dbx) || json_object_size(dbx) == 0)) {
		bad(err, "devboxes", "expected an object with at least one devbox");
		goto out;
	}
	const char *key;
	json_t *v;
	if (fns || !dbx) {
		if (!json_is_object(fns) || json_object_size(fns) == 0) {
			bad(err, "functions", fns ? "expected an object with at least one function" : "required");
			goto out;
		}
		app->functions = lc_xmalloc0(json_object_size(fns) * sizeof(*app->functions));
		json_object_foreach(fns, key, v) {
			if (parse_function(key, v, &app->functions[app->n_functions++], err) < 0)
				goto out;
		}
	}

	json_t *maps = json_object_get(m, "maps");
	if (maps) {
		if (json_is_object(maps)) {
			json_object_foreach(maps, key, v) {
				if (!map_name_ok(key)) {
					_cleanup_free_ char *p = lc_strdup_printf("maps.%s", key);
					bad(err, p, "bad map name (lowercase letters, digits, '-', '_'; at most 63)");
					goto out;
				}
				lc_strv_push(&app->maps, key);
			}
		} else if (get_strv(maps, "maps", map_name_ok,
				    "bad map name (lowercase letters, digits, '-', '_'; at most 63)", &app->maps, err) < 0) {
			goto out;
		}
	}

	if (dbx) {
		app->devboxes = lc_xmalloc0(json_object_size(dbx) * sizeof(*app->devboxes));
		json_object_foreach(dbx, key, v) {
			_cleanup_free_ char *p = lc_strdup_printf("devboxes.%s", key);
			if (lcd_devbox_def_parse(p, key, v, &app->devboxes[app->n_devboxes++], err) < 0)
				goto out;
		}
	}
	if (parse_sandboxes(m, app, err) < 0 || parse_budget(m, app, err) < 0)
		goto out;

	if (parse_config(app, json_object_get(m, "config"), err) < 0 || resolve_net(app, err) < 0 ||
	    resolve_gateway(app, err) < 0 || resolve_grant(app, err) < 0 ||
	    parse_named(app, m, "schedules", sizeof(lcd_schedule_t), (void **)&app->schedules, &app->n_schedules,
			parse_schedule, err) < 0 ||
	    parse_named(app, m, "webhooks", sizeof(lcd_webhook_t), (void **)&app->webhooks, &app->n_webhooks,
			parse_webhook, err) < 0)
		goto out;
	r = 0;
out:
	if (r < 0) {
		lcd_app_unref(app);
		return -1;
	}
	*out = app;
	return 0;
}

lcd_app_t *lcd_app_ref(lcd_app_t *app)
{
	if (app)
		__atomic_add_fetch(&app->refs, 1, __ATOMIC_SEQ_CST);
	return app;
}

void lcd_app_unref(lcd_app_t *app)
{
	if (!app || __atomic_sub_fetch(&app->refs, 1, __ATOMIC_SEQ_CST) > 0)
		return;
	for (size_t i = 0; i < app->n_functions; i++) {
		lcd_function_t *f = &app->functions[i];
		free(f->name);
		lc_strv_free(f->argv);
		free(f->image);
		free(f->net);
		lc_strv_free(f->secrets);
		lc_strv_free(f->optional_secrets);
		json_decref(f->model_gateway);
		json_decref(f->gateway_raw);
		free(f->gateway_access_key);
		for (size_t k = 0; k < f->n_mounts; k++) {
			free(f->mounts[k].src);
			free(f->mounts[k].dst);
		}
		free(f->mounts);
	}
	free(app->functions);
	for (size_t i = 0; i < app->n_schedules; i++) {
		lcd_schedule_t *s = &app->schedules[i];
		free(s->name);
		free(s->cron_expr);
		free(s->function);
		json_decref(s->args);
	}
	free(app->schedules);
	for (size_t i = 0; i < app->n_webhooks; i++) {
		free(app->webhooks[i].name);
		free(app->webhooks[i].function);
		free(app->webhooks[i].secret);
		lc_strv_free(app->webhooks[i].events);
	}
	free(app->webhooks);
	for (size_t i = 0; i < app->n_devboxes; i++)
		lcd_devbox_def_clear(&app->devboxes[i]);
	free(app->devboxes);
	lc_strv_free(app->maps);
	lc_strv_free(app->grant.net);
	lc_strv_free(app->grant.images);
	lc_strv_free(app->grant.images_raw);
	lc_strv_free(app->grant.net_raw);
	lc_strv_free(app->config);
	free(app->name);
	json_decref(app->manifest);
	free(app);
}

const lcd_function_t *lcd_app_function(const lcd_app_t *app, const char *name)
{
	for (size_t i = 0; name && i < app->n_functions; i++)
		if (app->functions[i].name && !strcmp(app->functions[i].name, name))
			return &app->functions[i];
	return NULL;
}

const lcd_schedule_t *lcd_app_schedule(const lcd_app_t *app, const char *name)
{
	for (size_t i = 0; name && i < app->n_schedules; i++)
		if (app->schedules[i].name && !strcmp(app->schedules[i].name, name))
			return &app->schedules[i];
	return NULL;
}

const lcd_webhook_t *lcd_app_webhook(const lcd_app_t *app, const char *name)
{
	for (size_t i = 0; name && i < app->n_webhooks; i++)
		if (app->webhooks[i].name && !strcmp(app->webhooks[i].name, name))
			return &app->webhooks[i];
	return NULL;
}

bool lcd_webhook_wants(const lcd_webhook_t *w, const char *event)
{
	if (!w->events)
		return true;
	for (char **e = w->events; *e; e++)
		if (!strcmp(*e, event))
			return true;
	return false;
}

bool lcd_app_has_map(const lcd_app_t *app, const char *name)
{
	for (size_t i = 0; name && app->maps && app->maps[i]; i++)
		if (!strcmp(app->maps[i], name))
			return true;
	return false;
}

size_t lcd_schedule_due(const lcd_schedule_t *s, long long last, long long now, size_t max, long long *out,
			long long *newest, size_t *skipped)
{
	size_t n = 0, total = 0;
	*newest = 0;
	*skipped = 0;
	if (max == 0)
		return 0;
	/* Keep the newest max slots in out as a sliding window. */
	for (long long t = last;;) {
		long long next = lcd_cron_next(&s->cron, (time_t)t);
		if (next < 0 || next > now)
			break;
		if (n == max) {
			memmove(out, out + 1, (n - 1) * sizeof(*out));
			n--;
		}
		out[n++] = next;
		total++;
		t = next;
	}
	if (n == 0)
		return 0;
	*newest = out[n - 1];
	size_t first = 0;
	if (s->catchup == LCD_CATCHUP_ONE)
		first = n - 1;
	else if (s->catchup == LCD_CATCHUP_NONE)
		first = now - *newest < 60 ? n - 1 : n; /* only a slot due this very minute */
	memmove(out, out + first, (n - first) * sizeof(*out));
	*skipped = total - (n - first);
	return n - first;
}
