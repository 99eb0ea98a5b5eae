/* gwreq.c — the model gateway's checks of a request before it is
 * forwarded (see gwreq.h).  Pure. */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gwreq.h"
#include "json.h"
#include "util.h"

#define SAT_MAX (LLONG_MAX / 4) /* a reservation past this is "more than any budget" */

static long long mul_sat(long long a, long long b)
{
	long long r;
	if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || r > SAT_MAX)
		return SAT_MAX;
	return r;
}

static long long add_sat(long long a, long long b)
{
	long long r;
	if (__builtin_add_overflow(a, b, &r) || r > SAT_MAX)
		return SAT_MAX;
	return r;
}

/* ---- the request-target ---- */

/* RFC 3986 pchar without '%' and '@': unreserved, sub-delims, ':' */
static bool path_char(unsigned char c)
{
	return isalnum(c) || strchr("-._~!$&'()*+,;=:", c);
}

static int hexval(unsigned char c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

int lcd_gw_target_parse(const char *raw, char **path, char **query, const char **why)
{
	*path = *query = NULL;
	if (!raw || raw[0] != '/') {
		*why = "the request-target must be a path starting with / (origin-form)";
		return -1;
	}
	const char *q = strchr(raw, '?');
	size_t plen = q ? (size_t)(q - raw) : strlen(raw);
	/* segments: non-empty, not "." or "..", pchar only */
	for (size_t i = 0; i < plen;) {
		size_t j = i + 1;
		while (j < plen && raw[j] != '/')
			j++;
		size_t n = j - i - 1;
		const char *seg = raw + i + 1;
		if (n == 0) {
			*why = "the request's path has an empty segment (//, or a trailing /)";
			return -1;
		}
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.')) {
			*why = "the request's path has a . or .. segment";
			return -1;
		}
		for (size_t k = 0; k < n; k++)
			if (!path_char((unsigned char)seg[k])) {
				*why = seg[k] == '%' ? "the request's path has a %-escape (none is served)"
				       : seg[k] == '@' ? "the request's path has an @"
				       : seg[k] == '\\' ? "the request's path has a backslash"
				       : "the request's path has a character outside letters, digits and -._~!$&'()*+,;=:";
				return -1;
			}
		i = j;
	}
	if (q) {
		for (const char *c = q + 1; *c; c++) {
			unsigned char u = (unsigned char)*c;
			if (u == '%') {
				int hi = hexval((unsigned char)c[1]), lo = hi < 0 ? -1 : hexval((unsigned char)c[2]);
				if (lo < 0 || hi * 16 + lo < 0x20 || hi * 16 + lo == 0x7f) {
					*why = "the request's query has a bad %-escape, or one of a control character";
					return -1;
				}
				c += 2;
				continue;
			}
			if (!path_char(u) && u != '/' && u != '?') {
				*why = "the request's query has a character outside letters, digits and -._~!$&'()*+,;=:/?";
				return -1;
			}
		}
		*query = strdup(q + 1);
	}
	*path = strndup(raw, plen);
	return 0;
}

/* ---- headers ---- */

bool lcd_gw_header_passes(int prov, const char *name)
{
	static const char *const both[] = { "content-type", "accept", "user-agent", NULL };
	for (size_t i = 0; both[i]; i++)
		if (!strcasecmp(name, both[i]))
			return true;
	return prov == LCD_PROV_ANTHROPIC && !strcasecmp(name, "anthropic-version");
}

bool lcd_gw_header_value_ok(const char *value)
{
	for (const unsigned char *c = (const unsigned char *)value; c && *c; c++)
		if ((*c < 0x20 && *c != '\t') || *c == 0x7f)
			return false;
	return true;
}

char *lcd_gw_betas(const char *value, char *const *allowed)
{
	_cleanup_free_ char *copy = strdup(value);
	char *out = NULL, *save = NULL;
	size_t len = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ' || *t == '\t')
			t++;
		size_t n = strlen(t);
		while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
			t[--n] = '\0';
		bool ok = false;
		for (size_t i = 0; allowed && allowed[i] && !ok; i++)
			ok = !strcmp(allowed[i], t);
		if (!ok)
			continue;
		out = realloc(out, len + n + 2);
		if (len)
			out[len++] = ',';
		memcpy(out + len, t, n + 1);
		len += n;
	}
	return out;
}

/* ---- what a request may cost ---- */

/* A positive integer member, or 0. */
static long long pos_int(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (long long)json_integer_value(v) : 0;
}

static bool has(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return v && !json_is_null(v) && !json_is_false(v);
}

/* A server tool the request names (its name in model-prices.json's
 * server_tools), reserved for calls (0: the table's max_calls). */
static int tool_reserve(int prov, const lcd_prices_t *prices, const char *what, const char *name, long long calls,
			long long *pusd, char **why)
{
	lcd_tool_price_t tp;
	if (!lcd_prices_tool(prices, prov, name, &tp)) {
		*why = lc_strdup_printf("%s: %s is not a tool the client runs: the provider runs it and may bill it per "
					"call, and the gateway's price table has no price for it (model-prices.json: "
					"server_tools.%s.%s; a per_call of 0 lets a tool the gateway does not know through)",
					what, name, lcd_provider_name(prov), name);
		return -1;
	}
	*pusd = add_sat(*pusd, mul_sat(tp.per_call, calls ? calls : tp.max_calls));
	return 0;
}

/* An Anthropic tool's type -> the server tool's name, or NULL for a tool
 * the client runs (no type, "custom", bash_*, text_editor_*, computer_*,
 * memory_*).  web_search_20250305 -> web_search. */
static char *anthropic_server_tool(const char *type)
{
	static const char *const client[] = { "bash_", "text_editor_", "computer_", "memory_", NULL };
	if (!type || !strcmp(type, "custom"))
		return NULL;
	for (size_t i = 0; client[i]; i++)
		if (!strncmp(type, client[i], strlen(client[i])))
			return NULL;
	char *name = strdup(type);
	size_t n = strlen(name);
	if (n > 9 && name[n - 9] == '_') {
		bool date = true;
		for (size_t i = n - 8; i < n; i++)
			date &= isdigit((unsigned char)name[i]) != 0;
		if (date)
			name[n - 9] = '\0';
	}
	return name;
}

/* OpenAI tools the client runs (a "namespace" groups more of them). */
/* Whether anything in v asks the provider to keep a cache an hour
 * ("cache_control": {"type": "ephemeral", "ttl": "1h"}): its writes cost
 * cache_write_1h. */
static bool hour_cache(json_t *v, int depth)
{
	if (depth > 64)
		return true; /* deeper than any real request: priced as if it did */
	const char *k;
	size_t i;
	json_t *x;
	if (json_is_object(v)) {
		json_t *cc = json_object_get(v, "cache_control");
		const char *ttl = lc_json_str(cc, "ttl");
		if (ttl && strcmp(ttl, "5m"))
			return true;
		json_object_foreach(v, k, x)
			if (hour_cache(x, depth + 1))
				return true;
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (hour_cache(x, depth + 1))
				return true;
	}
	return false;
}

static bool openai_client_tool(const char *type)
{
	static const char *const client[] = { "function", "custom", "local_shell", "computer_use_preview", "apply_patch",
		"shell", "namespace", NULL };
	for (size_t i = 0; type && client[i]; i++)
		if (!strcmp(type, client[i]))
			return true;
	return false;
}

/* The tools a request offers the model, under path (a namespace's tools
 * under its own), each a client tool or a priced server tool. */
static int check_tool_list(int prov, lcd_gw_api_t api, json_t *body, json_t *list, const char *path,
			   const lcd_prices_t *prices, long long *tools, char **why)
{
	size_t i;
	json_t *t;
	json_array_foreach(list, i, t) {
		const char *type = lc_json_str(t, "type");
		_cleanup_free_ char *what = lc_strdup_printf("%s[%zu]", path, i);
		if (prov == LCD_PROV_OPENAI && type && !strcmp(type, "namespace")) {
			_cleanup_free_ char *sub = lc_strdup_printf("%s.tools", what);
			if (check_tool_list(prov, api, body, json_object_get(t, "tools"), sub, prices, tools, why) < 0)
				return -1;
			continue;
		}
		if (prov == LCD_PROV_ANTHROPIC) {
			_cleanup_free_ char *name = anthropic_server_tool(type);
			if (name && tool_reserve(prov, prices, what, name, pos_int(t, "max_uses"), tools, why) < 0)
				return -1;
			continue;
		}
		if (openai_client_tool(type))
			continue;
		if (type && !strcmp(type, "mcp")) {
			*why = lc_strdup_printf("%s: MCP servers are called by the provider, at hosts the request names: the "
						"gateway does not serve them", what);
			return -1;
		}
		if (!type) {
			*why = lc_strdup_printf("%s.type: required", what);
			return -1;
		}
		long long calls = api == LCD_GW_RESPONSES ? pos_int(body, "max_tool_calls") : 0;
		if (tool_reserve(prov, prices, what, type, calls, tools, why) < 0)
			return -1;
	}
	return 0;
}

static int check_tools(int prov, lcd_gw_api_t api, json_t *body, const lcd_prices_t *prices, long long *tools, char **why)
{
	if (check_tool_list(prov, api, body, json_object_get(body, "tools"), "tools", prices, tools, why) < 0)
		return -1;
	if (api == LCD_GW_CHAT && has(body, "web_search_options") &&
	    tool_reserve(prov, prices, "web_search_options", "web_search", 0, tools, why) < 0)
		return -1;
	return 0;
}

/* ---- what the provider would fetch, or look up ---- */

/* Input the provider takes from somewhere other than the body: a URL it
 * would fetch (an address the sandbox names, whatever its query carries
 * sent out by the provider; a document priced far above the URL's bytes)
 * or a file or item kept at the provider (no bound on its price).  Only
 * what the body holds passes: base64 and text sources, data: URLs. */

static bool data_url(json_t *v)
{
	const char *s = json_string_value(v);
	return s && !strncmp(s, "data:", 5);
}

static int fetched(const char *what, const char *member, char **why)
{
	*why = lc_strdup_printf("%s.%s: the provider would fetch it from a URL the request names: the gateway serves "
				"only input the body holds (base64, a data: URL)", what, member);
	return -1;
}

static int kept(const char *what, const char *member, char **why)
{
	*why = lc_strdup_printf("%s.%s: input kept at the provider has no bound the gateway can price: send it in the "
				"body", what, member);
	return -1;
}

/* Anthropic content blocks (a message's, a tool result's, a content
 * source's). */
static int anthropic_blocks(json_t *list, const char *path, char **why)
{
	size_t i;
	json_t *b;
	json_array_foreach(list, i, b) {
		_cleanup_free_ char *what = lc_strdup_printf("%s[%zu]", path, i);
		if (has(b, "file_id"))
			return kept(what, "file_id", why);
		json_t *src = json_object_get(b, "source");
		if (json_is_object(src)) {
			const char *t = lc_json_str(src, "type");
			if (t && !strcmp(t, "url"))
				return fetched(what, "source", why);
			if (!t || (strcmp(t, "base64") && strcmp(t, "text") && strcmp(t, "content")))
				return kept(what, "source", why);
			_cleanup_free_ char *sub = lc_strdup_printf("%s.source.content", what);
			if (anthropic_blocks(json_object_get(src, "content"), sub, why) < 0)
				return -1;
		}
		_cleanup_free_ char *sub = lc_strdup_printf("%s.content", what);
		if (anthropic_blocks(json_object_get(b, "content"), sub, why) < 0) /* a tool result's */
			return -1;
	}
	return 0;
}

/* OpenAI content parts (a chat message's, a responses item's, a function
 * call's output). */
static int openai_parts(json_t *list, const char *path, char **why)
{
	size_t i;
	json_t *part;
	json_array_foreach(list, i, part) {
		_cleanup_free_ char *what = lc_strdup_printf("%s[%zu]", path, i);
		json_t *img = json_object_get(part, "image_url"); /* chat: {"url"}; responses: the URL */
		json_t *file = json_object_get(part, "file");     /* chat: {"file_id" or "file_data"} */
		if (has(part, "file_id") || has(file, "file_id"))
			return kept(what, "file_id", why);
		if (img && !json_is_null(img) && !data_url(json_is_object(img) ? json_object_get(img, "url") : img))
			return fetched(what, "image_url", why);
		if (has(part, "file_url"))
			return fetched(what, "file_url", why);
	}
	return 0;
}

static int check_inputs(int prov, lcd_gw_api_t api, json_t *body, char **why)
{
	size_t i;
	json_t *m;
	if (prov == LCD_PROV_ANTHROPIC) {
		if (anthropic_blocks(json_object_get(body, "system"), "system", why) < 0)
			return -1;
		json_array_foreach(json_object_get(body, "messages"), i, m) {
			_cleanup_free_ char *what = lc_strdup_printf("messages[%zu].content", i);
			if (anthropic_blocks(json_object_get(m, "content"), what, why) < 0)
				return -1;
		}
		return 0;
	}
	if (api == LCD_GW_CHAT) {
		json_array_foreach(json_object_get(body, "messages"), i, m) {
			_cleanup_free_ char *what = lc_strdup_printf("messages[%zu]", i);
			_cleanup_free_ char *content = lc_strdup_printf("%s.content", what);
			if (has(json_object_get(m, "audio"), "id"))
				return kept(what, "audio.id", why);
			if (openai_parts(json_object_get(m, "content"), content, why) < 0)
				return -1;
		}
		return 0;
	}
	json_array_foreach(json_object_get(body, "input"), i, m) {
		_cleanup_free_ char *what = lc_strdup_printf("input[%zu]", i);
		const char *type = lc_json_str(m, "type");
		if (type && !strcmp(type, "item_reference"))
			return kept(what, "type", why);
		_cleanup_free_ char *content = lc_strdup_printf("%s.content", what);
		_cleanup_free_ char *output = lc_strdup_printf("%s.output", what);
		if (openai_parts(json_object_get(m, "content"), content, why) < 0 ||
		    openai_parts(json_object_get(m, "output"), output, why) < 0)
			return -1;
	}
	return 0;
}

int lcd_gw_reserve(int prov, lcd_gw_api_t api, json_t *body, size_t body_len, const lcd_price_t *price,
		   const lcd_prices_t *prices, lcd_reservation_t *out, char **why)
{
	memset(out, 0, sizeof(*out));
	*why = NULL;
	if (prov == LCD_PROV_ANTHROPIC) {
		if (has(body, "mcp_servers")) {
			*why = strdup("mcp_servers: MCP servers are called by the provider, at hosts the request names: "
				      "the gateway does not serve them");
			return -1;
		}
		if (has(body, "container")) {
			*why = strdup("container: the provider's code execution containers are not served by the gateway");
			return -1;
		}
	}
	if (api == LCD_GW_RESPONSES) {
		if (has(body, "background")) {
			*why = strdup("background: a background response is answered later, outside this request: the "
				      "gateway could not meter it");
			return -1;
		}
		static const char *const kept[] = { "previous_response_id", "conversation", "prompt", NULL };
		for (size_t i = 0; kept[i]; i++)
			if (has(body, kept[i])) {
				*why = lc_strdup_printf("%s: the input kept at the provider has no bound the gateway can "
							"price: send the whole input", kept[i]);
				return -1;
			}
	}
	if (prov == LCD_PROV_OPENAI) {
		/* priority processing is billed above the table's rates */
		json_t *t = json_object_get(body, "service_tier");
		const char *tier = json_string_value(t);
		if (t && !json_is_null(t) &&
		    (!tier || (strcmp(tier, "auto") && strcmp(tier, "default") && strcmp(tier, "flex")))) {
			*why = lc_strdup_printf("service_tier: %.40s is billed above the rates of the gateway's price table "
						"(auto, default and flex pass)", tier ? tier : "not a string");
			return -1;
		}
	}
	if (check_inputs(prov, api, body, why) < 0 || check_tools(prov, api, body, prices, &out->tools_pusd, why) < 0)
		return -1;
	long long max_out = price->max_output ? price->max_output : LCD_GW_MAX_OUTPUT_DEFAULT;
	long long asked = api == LCD_GW_MESSAGES    ? pos_int(body, "max_tokens")
			  : api == LCD_GW_RESPONSES ? pos_int(body, "max_output_tokens")
			  : pos_int(body, "max_completion_tokens") ? pos_int(body, "max_completion_tokens")
								   : pos_int(body, "max_tokens");
	if (!asked || (price->max_output && asked > price->max_output))
		asked = max_out;
	long long n = api == LCD_GW_CHAT ? pos_int(body, "n") : 0;
	out->out_tokens = mul_sat(asked, n ? n : 1);
	out->in_tokens = (long long)body_len;
	long long in_price = price->input;
	if (price->cache_read > in_price)
		in_price = price->cache_read;
	if (price->cache_write > in_price)
		in_price = price->cache_write;
	if (prov == LCD_PROV_ANTHROPIC && price->cache_write_1h > in_price && hour_cache(body, 0))
		in_price = price->cache_write_1h;
	out->pusd = add_sat(add_sat(mul_sat(out->in_tokens, in_price), mul_sat(out->out_tokens, price->output)),
			    out->tools_pusd);
	return 0;
}

static long long tools_cost(int prov, const lcd_usage_t *u, const lcd_prices_t *prices)
{
	long long c = 0;
	for (int i = 0; i < u->n_tools; i++) {
		lcd_tool_price_t tp;
		if (lcd_prices_tool(prices, prov, u->tool[i], &tp))
			c = add_sat(c, mul_sat(tp.per_call, u->calls[i]));
	}
	return c;
}

long long lcd_gw_cost(int prov, const lcd_usage_t *u, const lcd_reservation_t *resv, const lcd_price_t *price,
		      const lcd_prices_t *prices)
{
	long long tools = tools_cost(prov, u, prices);
	if (resv && prov == LCD_PROV_OPENAI && resv->tools_pusd > tools)
		tools = resv->tools_pusd;
	return add_sat(lcd_usage_cost(u, price), tools);
}

long long lcd_gw_cost_incomplete(int prov, const lcd_reservation_t *r, const lcd_usage_t *u, const lcd_price_t *price,
				 const lcd_prices_t *prices)
{
	if (!u || !u->seen)
		return r->pusd;
	lcd_usage_t in = *u;
	in.output = u->output > r->out_tokens ? u->output : r->out_tokens;
	long long tools = tools_cost(prov, u, prices);
	return add_sat(lcd_usage_cost(&in, price), tools > r->tools_pusd ? tools : r->tools_pusd);
}
