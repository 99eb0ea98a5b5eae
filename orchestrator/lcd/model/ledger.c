/* ledger.c — prices, usage read from answers, and the spend ledger of the
 * model gateway (see ledger.h).  Pure but for lcd_prices_load (a file) and
 * the ledger functions (lcd.db). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "ledger.h"
#include "lcrun.h"
#include "netpool.h"
#include "util.h"

#define MODEL_NAME_MAX 200
#define PRICE_MAX 100000.0          /* dollars per million tokens */
#define OUTPUT_MAX 10000000LL       /* a model's largest answer, tokens */
#define CALL_PRICE_MAX 1000.0       /* dollars per server tool call */
#define CALLS_MAX 1000LL            /* server tool calls a request is reserved for */
#define EVENT_MAX (1 << 20)         /* an SSE event's data we still read */
#define BODY_MAX (16 << 20)         /* a JSON answer we still read */

static const char *const prov_names[LCD_PROV_N] = { "anthropic", "openai" };

const char *lcd_provider_name(int p)
{
	return p >= 0 && p < LCD_PROV_N ? prov_names[p] : "unknown";
}

int lcd_provider_parse(const char *s)
{
	for (int i = 0; s && i < LCD_PROV_N; i++)
		if (!strcmp(s, prov_names[i]))
			return i;
	return -1;
}

/* x >= 0 rounded to the nearest integer (no libm). */
static long long round_pos(double x)
{
	return (long long)(x + 0.5);
}

int lcd_usd_parse(json_t *v, const char *path, double max_usd, long long *pusd, lc_error_t **err)
{
	double x = json_is_number(v) ? json_number_value(v) : -1;
	if (!json_is_number(v) || !(x > 0) || x > max_usd)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: expected an amount of dollars above 0 and at most %g", path,
				    max_usd);
	*pusd = round_pos(x * (double)LCD_PUSD_PER_USD);
	if (*pusd <= 0)
		*pusd = 1;
	return 0;
}

json_t *lcd_usd_json(long long pusd)
{
	return json_real((double)pusd / (double)LCD_PUSD_PER_USD);
}

/* ---- prices ---- */

typedef struct price_entry {
	char *model;
	lcd_price_t price;
} price_entry_t;

typedef struct tool_entry {
	char *name;
	lcd_tool_price_t price;
} tool_entry_t;

struct lcd_prices {
	price_entry_t *e[LCD_PROV_N];
	size_t n[LCD_PROV_N];
	tool_entry_t *t[LCD_PROV_N];
	size_t nt[LCD_PROV_N];
};

void lcd_prices_free(lcd_prices_t *p)
{
	if (!p)
		return;
	for (int i = 0; i < LCD_PROV_N; i++) {
		for (size_t k = 0; k < p->n[i]; k++)
			free(p->e[i][k].model);
		free(p->e[i]);
		for (size_t k = 0; k < p->nt[i]; k++)
			free(p->t[i][k].name);
		free(p->t[i]);
	}
	free(p);
}

/* Dollars per million tokens -> pico-dollars per token (exact: at most 6
 * decimals). */
static int per_token(json_t *v, const char *source, const char *path, long long *out, lc_error_t **err)
{
	double x = json_is_number(v) ? json_number_value(v) : -1;
	if (!json_is_number(v) || x < 0 || x > PRICE_MAX)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: expected dollars per million tokens, 0 to %g", source,
				    path, PRICE_MAX);
	double scaled = x * 1e6;
	long long n = round_pos(scaled);
	double off = scaled - (double)n;
	if (off > 1e-3 || off < -1e-3)
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: at most 6 decimals", source, path);
	*out = n;
	return 0;
}

static bool model_name_ok(const char *s)
{
	return !strcmp(s, "*") || lcd_model_name_ok(s);
}

bool lcd_model_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > MODEL_NAME_MAX)
		return false;
	for (const char *c = s; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("._-:/@", *c))
			return false;
	return true;
}

static int parse_model(json_t *v, const char *source, const char *path, lcd_price_t *p, lc_error_t **err)
{
	static const char *const keys[] = { "input", "output", "cache_read", "cache_write", "cache_write_1h", "max_output" };
	if (!json_is_object(v))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: expected {\"input\", \"output\", \"cache_read\", "
				    "\"cache_write\", \"cache_write_1h\"} in dollars per million tokens", source, path);
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x) {
		bool known = false;
		for (size_t i = 0; i < 6; i++)
			known |= !strcmp(k, keys[i]);
		if (!known)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s.%s: unknown key", source, path, k);
	}
	json_t *mo = json_object_get(v, "max_output");
	if (mo && (!json_is_integer(mo) || json_integer_value(mo) < 1 || json_integer_value(mo) > OUTPUT_MAX))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s.max_output: expected the model's largest answer in "
				    "tokens, 1 to %lld", source, path, OUTPUT_MAX);
	p->max_output = mo ? json_integer_value(mo) : 0;
	long long *dst[] = { &p->input, &p->output, &p->cache_read, &p->cache_write, &p->cache_write_1h };
	for (size_t i = 0; i < 5; i++) {
		json_t *f = json_object_get(v, keys[i]);
		_cleanup_free_ char *fp = lc_strdup_printf("%s.%s", path, keys[i]);
		if (!f) {
			if (i < 2)
				return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: required", source, fp);
			/* an hour's cache write: Anthropic's twice the input; never
			 * less than a 5-minute one */
			*dst[i] = i == 4 ? (2 * p->input > p->cache_write ? 2 * p->input : p->cache_write) : p->input;
			continue;
		}
		if (per_token(f, source, fp, dst[i], err) < 0)
			return -1;
	}
	return 0;
}

/* "server_tools": {PROVIDER: {TOOL: {"per_call": DOLLARS, "max_calls": N}}} */
static int parse_tools(lcd_prices_t *p, json_t *v, const char *source, lc_error_t **err)
{
	if (!json_is_object(v))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: server_tools: expected {PROVIDER: {TOOL: {\"per_call\", "
				    "\"max_calls\"}}}", source);
	const char *pk;
	json_t *pv;
	json_object_foreach(v, pk, pv) {
		int prov = lcd_provider_parse(pk);
		if (prov < 0)
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: server_tools.%s: unknown provider (anthropic, openai)",
					    source, pk);
		if (!json_is_object(pv))
			return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: server_tools.%s: expected {TOOL: {...}}", source, pk);
		p->t[prov] = lc_xmalloc0((json_object_size(pv) + 1) * sizeof(tool_entry_t));
		const char *tk;
		json_t *tv;
		json_object_foreach(pv, tk, tv) {
			json_t *pc = json_object_get(tv, "per_call"), *mc = json_object_get(tv, "max_calls");
			double d = json_is_number(pc) ? json_number_value(pc) : -1;
			if (!model_name_ok(tk) || !strcmp(tk, "*") || !json_is_object(tv) || json_object_size(tv) != 2 ||
			    !(d >= 0 && d <= CALL_PRICE_MAX) || !json_is_integer(mc) || json_integer_value(mc) < 1 ||
			    json_integer_value(mc) > CALLS_MAX)
				return lc_error_set(err, LC_EXIT_INVALID, 0,
						    "%s: server_tools.%s.%s: expected {\"per_call\": dollars 0 to %g, "
						    "\"max_calls\": 1 to %lld}", source, pk, tk, CALL_PRICE_MAX, CALLS_MAX);
			tool_entry_t *t = &p->t[prov][p->nt[prov]++];
			t->name = strdup(tk);
			t->price.per_call = round_pos(d * (double)LCD_PUSD_PER_USD);
			t->price.max_calls = json_integer_value(mc);
		}
	}
	return 0;
}

int lcd_prices_from_json(json_t *doc, const char *source, lcd_prices_t **out, lc_error_t **err)
{
	if (!json_is_object(doc))
		return lc_error_set(err, LC_EXIT_INVALID, 0, "%s: expected a JSON object", source);
	lcd_prices_t *p = lc_xmalloc0(sizeof(*p));
	const char *k;
	json_t *v;
	json_object_foreach(doc, k, v) {
		if (!strcmp(k, "description")) {
			if (!json_is_string(v))
				goto bad_desc;
			continue;
		}
		if (!strcmp(k, "server_tools")) {
			if (parse_tools(p, v, source, err) < 0)
				goto fail;
			continue;
		}
		int prov = lcd_provider_parse(k);
		if (prov < 0) {
			lc_error_set(err, LC_EXIT_INVALID, 0,
				     "%s: %s: unknown key (expected description, anthropic, openai, server_tools)",
				     source, k);
			goto fail;
		}
		if (!json_is_object(v)) {
			lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: expected an object {MODEL: prices}", source, k);
			goto fail;
		}
		p->e[prov] = lc_xmalloc0((json_object_size(v) + 1) * sizeof(price_entry_t));
		const char *model;
		json_t *m;
		json_object_foreach(v, model, m) {
			_cleanup_free_ char *path = lc_strdup_printf("%s.%s", k, model);
			if (!model_name_ok(model)) {
				lc_error_set(err, LC_EXIT_INVALID, 0, "%s: %s: not a model name", source, path);
				goto fail;
			}
			price_entry_t *e = &p->e[prov][p->n[prov]];
			if (parse_model(m, source, path, &e->price, err) < 0)
				goto fail;
			e->model = strdup(model);
			p->n[prov]++;
		}
	}
	*out = p;
	return 0;
bad_desc:
	lc_error_set(err, LC_EXIT_INVALID, 0, "%s: description: expected a string", source);
fail:
	lcd_prices_free(p);
	return -1;
}

int lcd_prices_load(lcd_prices_t **out, char **source, lc_error_t **err)
{
	_cleanup_free_ char *site = lc_strdup_printf("%s/policies/model-prices.json", lc_net_etc_dir());
	_cleanup_free_ char *shipped = lc_strdup_printf("%s/model-prices.json", lc_policy_dir());
	const char *path = access(site, F_OK) == 0 ? site : shipped;
	json_error_t je;
	_cleanup_json_ json_t *doc = json_load_file(path, 0, &je);
	if (!doc)
		return lc_error_set(err, errno == ENOENT ? LC_EXIT_NOENT : LC_EXIT_INVALID, 0, "%s: %s (line %d)", path,
				    je.text, je.line);
	if (lcd_prices_from_json(doc, path, out, err) < 0)
		return -1;
	if (source)
		*source = strdup(path);
	return 0;
}

static bool digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* NAME-20250929, NAME-2024-08-06, NAME-latest: a dated version of NAME
 * (a different model, NAME-5, is not). */
static bool version_of(const char *model, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(model, name, n) || model[n] != '-')
		return false;
	const char *v = model + n + 1;
	size_t len = strlen(v);
	return !strcmp(v, "latest") || (len == 8 && digits(v, 8)) ||
	       (len == 10 && digits(v, 4) && v[4] == '-' && digits(v + 5, 2) && v[7] == '-' && digits(v + 8, 2));
}

bool lcd_prices_find(const lcd_prices_t *p, lcd_provider_t prov, const char *model, lcd_price_t *out)
{
	if (!p || (int)prov < 0 || prov >= LCD_PROV_N || !model)
		return false;
	const price_entry_t *best = NULL, *any = NULL;
	for (size_t i = 0; i < p->n[prov]; i++) {
		const price_entry_t *e = &p->e[prov][i];
		if (!strcmp(e->model, "*")) {
			any = e;
			continue;
		}
		if (!strcmp(e->model, model)) {
			best = e;
			break;
		}
		if (version_of(model, e->model) && (!best || strlen(e->model) > strlen(best->model)))
			best = e;
	}
	if (!best)
		best = any;
	if (!best)
		return false;
	*out = best->price;
	return true;
}

bool lcd_prices_tool(const lcd_prices_t *p, lcd_provider_t prov, const char *tool, lcd_tool_price_t *out)
{
	if (!p || (int)prov < 0 || prov >= LCD_PROV_N || !tool)
		return false;
	for (size_t i = 0; i < p->nt[prov]; i++)
		if (!strcmp(p->t[prov][i].name, tool)) {
			*out = p->t[prov][i].price;
			return true;
		}
	return false;
}

/* ---- usage ---- */

long long lcd_usage_cost(const lcd_usage_t *u, const lcd_price_t *p)
{
	long long hour = u->cache_write_1h < u->cache_write ? u->cache_write_1h : u->cache_write;
	return u->input * p->input + u->output * p->output + u->cache_read * p->cache_read +
	       (u->cache_write - hour) * p->cache_write + hour * p->cache_write_1h;
}

json_t *lcd_usage_json(const lcd_usage_t *u)
{
	return json_pack("{s:I, s:I, s:I, s:I}", "input", (json_int_t)u->input, "output", (json_int_t)u->output,
			 "cache_read", (json_int_t)u->cache_read, "cache_write", (json_int_t)u->cache_write);
}

struct lcd_meter {
	lcd_provider_t prov;
	bool sse;
	lcd_usage_t u;
	/* SSE: the line being read, the current event's data */
	char *line;
	size_t line_len;
	bool line_over;
	char *data;
	size_t data_len;
	bool data_over;
	size_t fed, boundary;
	/* not SSE: the body */
	char *body;
	size_t body_len;
	bool body_over;
};

lcd_meter_t *lcd_meter_new(lcd_provider_t prov, bool sse)
{
	lcd_meter_t *m = lc_xmalloc0(sizeof(*m));
	m->prov = prov;
	m->sse = sse;
	return m;
}

size_t lcd_meter_held(const lcd_meter_t *m)
{
	return m->body_len + m->line_len + m->data_len;
}

void lcd_meter_drop_body(lcd_meter_t *m)
{
	free(m->body);
	m->body = NULL;
	m->body_len = 0;
	m->body_over = true;
}

void lcd_meter_free(lcd_meter_t *m)
{
	if (!m)
		return;
	free(m->line);
	free(m->data);
	free(m->body);
	free(m);
}

const lcd_usage_t *lcd_meter_usage(const lcd_meter_t *m)
{
	return &m->u;
}

size_t lcd_meter_boundary(const lcd_meter_t *m)
{
	return m->sse ? m->boundary : m->fed;
}

static bool grow(char **buf, size_t *len, const char *p, size_t n, size_t max)
{
	if (*len + n > max)
		return false;
	char *b = realloc(*buf, *len + n + 1);
	if (!b)
		return false;
	memcpy(b + *len, p, n);
	*len += n;
	b[*len] = '\0';
	*buf = b;
	return true;
}

static long long tok(json_t *o, const char *k, long long def)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) && json_integer_value(v) >= 0 ? (long long)json_integer_value(v) : def;
}

/* Anthropic's usage object: input_tokens, output_tokens,
 * cache_read_input_tokens, cache_creation_input_tokens.  Fields a later
 * report leaves out keep their earlier values (message_delta often
 * carries output_tokens only). */
static bool anthropic_usage(lcd_usage_t *u, json_t *o, bool final)
{
	if (!json_is_object(o))
		return false;
	u->input = tok(o, "input_tokens", u->input);
	u->output = tok(o, "output_tokens", u->output);
	u->cache_read = tok(o, "cache_read_input_tokens", u->cache_read);
	u->cache_write = tok(o, "cache_creation_input_tokens", u->cache_write);
	/* the writes kept an hour, of cache_creation_input_tokens */
	json_t *cc = json_object_get(o, "cache_creation");
	if (json_is_object(cc))
		u->cache_write_1h = tok(cc, "ephemeral_1h_input_tokens", u->cache_write_1h);
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(o, "server_tool_use"), k, v) {
		size_t n = strlen(k);
		if (n <= 9 || n - 9 >= sizeof(u->tool[0]) || strcmp(k + n - 9, "_requests") || !json_is_integer(v) ||
		    json_integer_value(v) < 0)
			continue;
		int i = 0;
		while (i < u->n_tools && (strlen(u->tool[i]) != n - 9 || strncmp(u->tool[i], k, n - 9)))
			i++;
		if (i == u->n_tools) {
			if (i == LCD_USAGE_TOOLS)
				continue;
			memcpy(u->tool[i], k, n - 9);
			u->tool[i][n - 9] = '\0';
			u->n_tools++;
		}
		u->calls[i] = json_integer_value(v);
	}
	u->seen = true;
	u->final |= final;
	return true;
}

/* OpenAI's: chat (prompt_tokens, completion_tokens,
 * prompt_tokens_details.cached_tokens) or responses (input_tokens,
 * output_tokens, input_tokens_details.cached_tokens).  Cached tokens are
 * part of the input count there. */
static bool openai_usage(lcd_usage_t *u, json_t *o)
{
	if (!json_is_object(o))
		return false;
	bool chat = json_object_get(o, "prompt_tokens") != NULL;
	long long in = tok(o, chat ? "prompt_tokens" : "input_tokens", 0);
	long long out = tok(o, chat ? "completion_tokens" : "output_tokens", 0);
	long long cached = tok(json_object_get(o, chat ? "prompt_tokens_details" : "input_tokens_details"), "cached_tokens", 0);
	if (cached > in)
		cached = in;
	u->input = in - cached;
	u->cache_read = cached;
	u->cache_write = 0;
	u->output = out;
	u->seen = u->final = true;
	return true;
}

static bool sse_event(lcd_meter_t *m)
{
	if (m->data_over || !m->data_len || !strcmp(m->data, "[DONE]"))
		return false;
	_cleanup_json_ json_t *j = json_loadb(m->data, m->data_len, 0, NULL);
	if (!json_is_object(j))
		return false;
	const char *type = lc_json_str(j, "type");
	if (m->prov == LCD_PROV_ANTHROPIC) {
		if (type && !strcmp(type, "message_start"))
			return anthropic_usage(&m->u, json_object_get(json_object_get(j, "message"), "usage"), false);
		if (type && !strcmp(type, "message_delta"))
			return anthropic_usage(&m->u, json_object_get(j, "usage"), true);
		return false;
	}
	if (type && !strncmp(type, "response.", 9)) {
		if (strcmp(type, "response.completed") && strcmp(type, "response.incomplete") && strcmp(type, "response.failed"))
			return false;
		return openai_usage(&m->u, json_object_get(json_object_get(j, "response"), "usage"));
	}
	return openai_usage(&m->u, json_object_get(j, "usage"));
}

/* One line of an SSE stream (without its end of line). */
static bool sse_line(lcd_meter_t *m, const char *s, size_t n, bool over)
{
	if (n == 0 && !over) {
		bool changed = sse_event(m);
		m->data_len = 0;
		m->data_over = false;
		if (m->data)
			m->data[0] = '\0';
		return changed;
	}
	if (over) {
		m->data_over = true;
		return false;
	}
	if (n >= 5 && !strncmp(s, "data:", 5)) {
		s += 5;
		n -= 5;
		if (n && *s == ' ') {
			s++;
			n--;
		}
		if (m->data_len && !grow(&m->data, &m->data_len, "\n", 1, EVENT_MAX))
			m->data_over = true;
		if (!m->data_over && !grow(&m->data, &m->data_len, s, n, EVENT_MAX))
			m->data_over = true;
	}
	return false;
}

bool lcd_meter_feed(lcd_meter_t *m, const char *data, size_t len)
{
	if (!m->sse) {
		m->fed += len;
		if (!m->body_over && !grow(&m->body, &m->body_len, data, len, BODY_MAX))
			m->body_over = true;
		return false;
	}
	bool changed = false;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(data + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (data + i)) : len - i;
		if (!m->line_over && !grow(&m->line, &m->line_len, data + i, n, EVENT_MAX))
			m->line_over = true;
		i += n;
		if (!nl)
			break;
		i++; /* the '\n' */
		size_t ll = m->line_len;
		if (ll && m->line[ll - 1] == '\r')
			ll--;
		bool blank = ll == 0 && !m->line_over;
		changed |= sse_line(m, m->line ? m->line : "", ll, m->line_over);
		m->line_len = 0;
		m->line_over = false;
		if (blank)
			m->boundary = m->fed + i;
	}
	m->fed += len;
	return changed;
}

bool lcd_meter_end(lcd_meter_t *m)
{
	if (m->sse) {
		/* a last event without its blank line */
		bool changed = false;
		if (m->line_len)
			changed |= sse_line(m, m->line, m->line_len, m->line_over);
		m->line_len = 0;
		changed |= sse_line(m, "", 0, false);
		m->boundary = m->fed;
		return changed;
	}
	if (m->body_over || !m->body_len)
		return false;
	_cleanup_json_ json_t *j = json_loadb(m->body, m->body_len, 0, NULL);
	if (!json_is_object(j))
		return false;
	json_t *u = json_object_get(j, "usage");
	if (m->prov == LCD_PROV_ANTHROPIC)
		return anthropic_usage(&m->u, u, true);
	return openai_usage(&m->u, u);
}

/* ---- the ledger ---- */

int lcd_ledger_add(lcd_db_t *db, const lcd_ledger_entry_t *e, lc_error_t **err)
{
	return lcd_db_exec(db, err,
			   "INSERT INTO gateway_ledger (at, sandbox_id, task_id, app, provider, model, path, status, outcome, "
			   "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_pusd, reserved_pusd, "
			   "budget_exceeded, ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			   "issssssisiiiiiiii", e->at, e->sandbox, e->task, e->app, e->provider, e->model, e->path,
			   (long long)e->status, e->outcome, e->usage.input, e->usage.output, e->usage.cache_read,
			   e->usage.cache_write, e->cost, e->reserved, (long long)e->budget_exceeded, e->ms) < 0
		       ? -1
		       : 0;
}

static const char *scope_column(int scope)
{
	return scope == LCD_LEDGER_SANDBOX ? "sandbox_id" : scope == LCD_LEDGER_TASK ? "task_id" : "app";
}

long long lcd_ledger_spend(lcd_db_t *db, int scope, const char *key, long long since, lc_error_t **err)
{
	_cleanup_free_ char *sql = lc_strdup_printf(
		"SELECT coalesce(sum(cost_pusd), 0) FROM gateway_ledger WHERE %s = ? AND at >= ?", scope_column(scope));
	return lcd_db_query_int(db, err, 0, sql, "si", key, since);
}

json_t *lcd_ledger_summary(lcd_db_t *db, int scope, const char *key, lc_error_t **err)
{
	_cleanup_free_ char *sql = lc_strdup_printf(
		"SELECT coalesce(sum(cost_pusd), 0) AS c, coalesce(sum(input_tokens), 0) AS i, "
		"coalesce(sum(output_tokens), 0) AS o, coalesce(sum(cache_read_tokens), 0) AS r, "
		"coalesce(sum(cache_write_tokens), 0) AS w, count(CASE WHEN outcome <> 'refused' THEN 1 END) AS n, "
		"count(CASE WHEN outcome = 'unmetered' THEN 1 END) AS um, "
		"CASE WHEN coalesce(max(budget_exceeded), 0) > 0 OR EXISTS (SELECT 1 FROM gateway_refusals WHERE %s = ?1 AND "
		"reason = 'budget') THEN 1 ELSE 0 END AS b, "
		"(SELECT coalesce(sum(count), 0) FROM gateway_refusals WHERE %s = ?1) AS rf "
		"FROM gateway_ledger WHERE %s = ?1",
		scope_column(scope), scope_column(scope), scope_column(scope));
	_cleanup_json_ json_t *rows = lcd_db_query(db, err, sql, "s", key);
	json_t *r = json_array_get(rows, 0);
	if (!r)
		return NULL;
	lcd_usage_t u = {
		.input = json_integer_value(json_object_get(r, "i")),
		.output = json_integer_value(json_object_get(r, "o")),
		.cache_read = json_integer_value(json_object_get(r, "r")),
		.cache_write = json_integer_value(json_object_get(r, "w")),
	};
	return json_pack("{s:o, s:o, s:I, s:I, s:I, s:b}", "spend_usd",
			 lcd_usd_json(json_integer_value(json_object_get(r, "c"))), "tokens", lcd_usage_json(&u), "requests",
			 json_integer_value(json_object_get(r, "n")), "unmetered", json_integer_value(json_object_get(r, "um")),
			 "refused", json_integer_value(json_object_get(r, "rf")), "budget_exceeded",
			 json_integer_value(json_object_get(r, "b")) != 0);
}
