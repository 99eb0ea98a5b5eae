/* agent.c — run a coding agent in a sandbox and read its result (agent.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "json.h"
#include "util.h"

#define AGENT_PROMPT_FILE "/tmp/agent-prompt.md"
#define AGENT_MAX_OUTPUT (16 << 20)

/* codex reports tokens, not money: priced at these list rates (USD per
 * million input, cached input, output tokens) unless AGENT_PRICE_PER_MTOK
 * ("IN,CACHED,OUT") says otherwise.  gpt-5's rates. */
static const double codex_default_price[3] = { 1.25, 0.125, 10.0 };

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && *v ? v : dflt;
}

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

int agent_config_from_env(agent_config_t *cfg, lc_error_t **err)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->agent = strdup(env_or("AGENT", "claude"));
	if (!strcmp(cfg->agent, "claude"))
		cfg->format = AGENT_FORMAT_CLAUDE;
	else if (!strcmp(cfg->agent, "codex"))
		cfg->format = AGENT_FORMAT_CODEX;
	else
		return lc_error_set(err, LC_EXIT_USAGE, 0, "AGENT=%s: expected claude or codex", cfg->agent);
	cfg->command = dup_or_null(getenv("AGENT_COMMAND"));
	cfg->model = dup_or_null(getenv("AGENT_MODEL"));
	const char *b = env_or("AGENT_MAX_BUDGET_USD", "5");
	char *end;
	errno = 0;
	cfg->max_budget_usd = strtod(b, &end);
	if (errno || *end || end == b || !(cfg->max_budget_usd > 0) || !isfinite(cfg->max_budget_usd))
		return lc_error_set(err, LC_EXIT_USAGE, 0, "AGENT_MAX_BUDGET_USD=%s: expected a positive number of dollars", b);
	const char *t = env_or("AGENT_TIMEOUT_SECONDS", "1800");
	errno = 0;
	long tl = strtol(t, &end, 10);
	if (errno || *end || end == t || tl <= 0 || tl > 7 * 86400)
		return lc_error_set(err, LC_EXIT_USAGE, 0, "AGENT_TIMEOUT_SECONDS=%s: expected seconds (1 to 604800)", t);
	cfg->timeout_s = (int)tl;
	cfg->image = strdup(env_or("AGENT_IMAGE", "agent-cli"));
	cfg->user = strdup(env_or("AGENT_USER", "1000:1000"));
	const char *a = env_or("MODEL_ACCESS", "gateway");
	if (!strcmp(a, "direct"))
		cfg->access = AGENT_ACCESS_DIRECT;
	else if (!strcmp(a, "gateway"))
		cfg->access = AGENT_ACCESS_GATEWAY;
	else
		return lc_error_set(err, LC_EXIT_USAGE, 0, "MODEL_ACCESS=%s: expected gateway or direct", a);
	/* through the gateway the sandbox needs no network of its own: lcd
	 * turns "none" into allow-only-the-gateway */
	cfg->net = strdup(env_or("AGENT_NET", cfg->access == AGENT_ACCESS_GATEWAY ? "none" : "model-api"));
	bool codex = cfg->format == AGENT_FORMAT_CODEX;
	cfg->key_secret = strdup(codex ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY");
	cfg->base_url = dup_or_null(getenv(codex ? "OPENAI_BASE_URL" : "ANTHROPIC_BASE_URL"));
	return 0;
}

void agent_config_clear(agent_config_t *cfg)
{
	free(cfg->agent);
	free(cfg->command);
	free(cfg->model);
	free(cfg->image);
	free(cfg->user);
	free(cfg->net);
	free(cfg->key_secret);
	free(cfg->base_url);
	memset(cfg, 0, sizeof(*cfg));
}

int agent_sandbox_create(lcc_t *c, const agent_config_t *cfg, const agent_sandbox_opts_t *o, char **id,
			 lc_error_t **err)
{
	bool codex = cfg->format == AGENT_FORMAT_CODEX;
	json_t *env = json_pack("{s:s}", "IS_SANDBOX", "1");
	if (!codex)
		/* no update checks, telemetry or error reports: the sandbox
		 * reaches the model API and nothing else */
		json_object_set_new(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", json_string("1"));
	/* through the gateway lcd sets the base URL (its own) and the token */
	if (cfg->base_url && cfg->access == AGENT_ACCESS_DIRECT)
		json_object_set_new(env, codex ? "OPENAI_BASE_URL" : "ANTHROPIC_BASE_URL", json_string(cfg->base_url));
	_cleanup_json_ json_t *req = json_pack("{s:s, s:s, s:s, s:o}", "image", o->image, "user", cfg->user, "net",
					       cfg->net, "env", env);
	if (o->workdir)
		json_object_set_new(req, "workdir", json_string(o->workdir));
	if (o->limits)
		json_object_set(req, "limits", o->limits);
	if (o->labels)
		json_object_set(req, "labels", o->labels);
	if (cfg->access == AGENT_ACCESS_DIRECT)
		json_object_set_new(req, "secrets", json_pack("[s]", cfg->key_secret));
	else
		json_object_set_new(req, "model_gateway",
				    json_pack("{s:s, s:s, s:f}", "provider", codex ? "openai" : "anthropic", "secret",
					      cfg->key_secret, "budget_usd", cfg->max_budget_usd));
	if (lcc_sandbox_create(c, req, id, NULL, err) < 0) {
		if (cfg->access == AGENT_ACCESS_GATEWAY && strstr((*err)->msg, "serves no model gateway")) {
			lc_error_free(*err);
			*err = NULL;
			return lc_error_set(err, LC_EXIT_STATE, 0,
					    "MODEL_ACCESS=gateway, but this lcd serves no model gateway: configure "
					    "\"gateway\" in lcd.json, or deploy with MODEL_ACCESS=direct");
		}
		return lc_error_wrap(err, "cannot make the agent's sandbox (image %s)", o->image);
	}
	return 0;
}

int agent_gateway_usage(lcc_t *c, const char *id, agent_gateway_usage_t *u, lc_error_t **err)
{
	memset(u, 0, sizeof(*u));
	_cleanup_json_ json_t *info = NULL;
	if (lcc_sandbox_get(c, id, &info, err) < 0)
		return lc_error_wrap(err, "cannot read the model gateway's spend of sandbox %s", id);
	json_t *g = json_object_get(info, "model_gateway");
	if (!json_is_object(g))
		return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s does not use the model gateway", id);
	u->spend_usd = json_number_value(json_object_get(info, "spend_usd"));
	u->budget_exceeded = json_is_true(json_object_get(g, "budget_exceeded")) ||
			     json_integer_value(json_object_get(g, "budget_exceeded")) > 0;
	u->requests = json_integer_value(json_object_get(g, "requests"));
	u->tokens = json_incref(json_object_get(info, "tokens"));
	const char *b = lc_json_str(g, "base_url");
	u->base_url = b ? strdup(b) : NULL;
	return 0;
}

void agent_result_gateway_stop(agent_result_t *r, const agent_gateway_usage_t *u, double budget_usd)
{
	if (!u->budget_exceeded || r->status == AGENT_OK || r->status == AGENT_TIMED_OUT || r->status == AGENT_OVER_BUDGET)
		return;
	char *why = lc_strdup_printf("the model gateway stopped the agent: its budget of $%g is spent%s%s", budget_usd,
				     r->error ? "; " : "", r->error ? r->error : "");
	free(r->error);
	r->error = why;
	r->status = AGENT_OVER_BUDGET;
}

void agent_gateway_usage_clear(agent_gateway_usage_t *u)
{
	json_decref(u->tokens);
	free(u->base_url);
	memset(u, 0, sizeof(*u));
}

const char *agent_status_name(agent_status_t s)
{
	switch (s) {
	case AGENT_OK: return "ok";
	case AGENT_ERROR: return "error";
	case AGENT_OVER_BUDGET: return "over-budget";
	case AGENT_TIMED_OUT: return "timed-out";
	case AGENT_CRASHED: return "crashed";
	case AGENT_FAILED: return "failed";
	case AGENT_NO_RESULT: return "no-result";
	}
	return "unknown";
}

char *agent_tail(const char *s, size_t len, int n)
{
	if (!s)
		return strdup("");
	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	size_t start = len;
	int lines = 0;
	while (start > 0) {
		if (s[start - 1] == '\n' && ++lines == n)
			break;
		start--;
	}
	return strndup(s + start, len - start);
}

static long long int_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* Each line of out that is a JSON object, in order. */
static json_t *json_lines(const char *out, size_t len)
{
	json_t *all = json_array();
	const char *p = out, *e = out + len;
	while (p < e) {
		const char *nl = memchr(p, '\n', (size_t)(e - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(e - p);
		while (n && (*p == ' ' || *p == '\t'))
			p++, n--;
		if (n && *p == '{') {
			json_t *j = json_loadb(p, n, 0, NULL);
			if (json_is_object(j))
				json_array_append_new(all, j);
			else
				json_decref(j);
		}
		p += n + (nl ? 1 : 0);
		if (!nl)
			break;
	}
	return all;
}

static void parse_claude(const char *out, size_t len, agent_result_t *r)
{
	/* The result object: the whole output, or its last object line of
	 * type "result" (a wrapper may print other lines before it). */
	json_t *res = json_loadb(out, len, 0, NULL);
	if (!json_is_object(res) || !json_object_get(res, "type")) {
		json_decref(res);
		res = NULL;
		_cleanup_json_ json_t *lines = json_lines(out, len);
		for (size_t i = json_array_size(lines); i-- > 0 && !res;) {
			json_t *o = json_array_get(lines, i);
			if (json_is_string(json_object_get(o, "type")) &&
			    !strcmp(lc_json_str(o, "type"), "result"))
				res = json_incref(o);
		}
	}
	if (!res)
		return;
	r->raw = res;
	const char *txt = lc_json_str(res, "result");
	if (txt)
		r->summary = strdup(txt);
	json_t *t = json_object_get(res, "num_turns");
	if (json_is_integer(t))
		r->turns = (int)json_integer_value(t);
	json_t *cost = json_object_get(res, "total_cost_usd");
	if (json_is_number(cost))
		r->spend_usd = json_number_value(cost);
	json_t *u = json_object_get(res, "usage");
	r->input_tokens = int_of(u, "input_tokens") + int_of(u, "cache_creation_input_tokens") +
			  int_of(u, "cache_read_input_tokens");
	r->cached_tokens = int_of(u, "cache_read_input_tokens");
	r->output_tokens = int_of(u, "output_tokens");
	const char *sub = lc_json_str(res, "subtype");
	if (json_is_true(json_object_get(res, "is_error")) || (sub && strncmp(sub, "error", 5) == 0)) {
		if (sub && strstr(sub, "budget"))
			r->status = AGENT_OVER_BUDGET;
		else
			r->status = AGENT_ERROR;
		/* its message, else why it stopped ("api_error"; not "completed") */
		const char *why = lc_json_str(res, "terminal_reason");
		if (!(txt && *txt))
			txt = why && strcmp(why, "completed") != 0 ? why : NULL;
		r->error = lc_strdup_printf("the agent reported an error: %s%s%s", sub ? sub : "error", txt ? ": " : "",
					    txt ? txt : "");
	} else {
		r->status = AGENT_OK;
	}
}

static double codex_price(int i)
{
	const char *p = getenv("AGENT_PRICE_PER_MTOK");
	double v[3];
	if (p && sscanf(p, "%lf,%lf,%lf", &v[0], &v[1], &v[2]) == 3)
		return v[i];
	return codex_default_price[i];
}

static void parse_codex(const char *out, size_t len, agent_result_t *r)
{
	_cleanup_json_ json_t *lines = json_lines(out, len);
	size_t i;
	json_t *o;
	bool done = false, failed = false;
	int items = 0;
	const char *failure = NULL;
	json_array_foreach(lines, i, o) {
		const char *type = lc_json_str(o, "type");
		if (!type)
			continue;
		if (!strcmp(type, "item.completed")) {
			json_t *item = json_object_get(o, "item");
			const char *it = lc_json_str(item, "type");
			/* an error item (a retry, missing model metadata) or
			 * the model's reasoning is not a turn of work */
			if (!it || (strcmp(it, "error") && strcmp(it, "reasoning")))
				items++;
			if (it && !strcmp(it, "agent_message") && json_is_string(json_object_get(item, "text"))) {
				free(r->summary);
				r->summary = strdup(lc_json_str(item, "text"));
			}
		} else if (!strcmp(type, "turn.completed")) {
			json_t *u = json_object_get(o, "usage");
			r->input_tokens += int_of(u, "input_tokens");
			r->cached_tokens += int_of(u, "cached_input_tokens");
			r->output_tokens += int_of(u, "output_tokens");
			json_decref(r->raw);
			r->raw = json_incref(o);
			done = true;
		} else if (!strcmp(type, "turn.failed") || !strcmp(type, "error")) {
			json_t *e = json_object_get(o, "error");
			const char *m = lc_json_str(e, "message");
			if (!m)
				m = lc_json_str(o, "message");
			/* codex prints an "error" item about unknown model
			 * metadata and goes on: only turn.failed ends a run. */
			if (!strcmp(type, "turn.failed")) {
				failed = true;
				failure = m;
				json_decref(r->raw);
				r->raw = json_incref(o);
			}
		}
	}
	if (!done && !failed)
		return;
	r->turns = items;
	long long uncached = r->input_tokens - r->cached_tokens;
	if (uncached < 0)
		uncached = 0;
	r->spend_usd = ((double)uncached * codex_price(0) + (double)r->cached_tokens * codex_price(1) +
			(double)r->output_tokens * codex_price(2)) / 1e6;
	if (failed) {
		r->status = AGENT_ERROR;
		r->error = lc_strdup_printf("the agent reported an error: %s", failure ? failure : "turn.failed");
	} else {
		r->status = AGENT_OK;
	}
	r->raw = r->raw ? r->raw : NULL;
}

void agent_parse_output(agent_format_t fmt, const char *out, size_t len, int exit_code, bool timed_out,
			double budget_usd, agent_result_t *r)
{
	r->turns = -1;
	r->spend_usd = -1;
	r->exit_code = exit_code;
	r->status = AGENT_NO_RESULT;
	if (fmt == AGENT_FORMAT_CODEX)
		parse_codex(out ? out : "", out ? len : 0, r);
	else
		parse_claude(out ? out : "", out ? len : 0, r);
	bool have = r->raw != NULL;
	if (timed_out) {
		r->status = AGENT_TIMED_OUT;
		free(r->error);
		r->error = strdup("the agent was killed: it ran past AGENT_TIMEOUT_SECONDS");
		return;
	}
	if (budget_usd > 0 && r->spend_usd > budget_usd && r->status != AGENT_OVER_BUDGET) {
		r->status = AGENT_OVER_BUDGET;
		free(r->error);
		r->error = lc_strdup_printf("the agent spent $%.2f, over the budget of $%.2f", r->spend_usd, budget_usd);
		return;
	}
	if (have)
		return;
	free(r->error);
	if (exit_code > 128 && exit_code < 128 + 65) {
		r->status = AGENT_CRASHED;
		r->error = lc_strdup_printf("the agent was killed by signal %d and printed no result", exit_code - 128);
	} else if (exit_code != 0) {
		r->status = AGENT_FAILED;
		r->error = lc_strdup_printf("the agent exited with status %d and printed no result", exit_code);
	} else {
		r->status = AGENT_NO_RESULT;
		r->error = strdup("the agent exited 0 but printed no result");
	}
}

/* The built-in command line for cfg->agent. */
static char *builtin_command(const agent_config_t *cfg)
{
	_cleanup_free_ char *model = cfg->model ? lc_shell_quote(cfg->model) : NULL;
	if (cfg->format == AGENT_FORMAT_CODEX)
		return lc_strdup_printf("exec codex exec --json --dangerously-bypass-approvals-and-sandbox "
					"--skip-git-repo-check%s%s \"$(cat \"$AGENT_PROMPT_FILE\")\" </dev/null",
					model ? " -m " : "", model ? model : "");
	return lc_strdup_printf("exec claude -p \"$(cat \"$AGENT_PROMPT_FILE\")\" --output-format json "
				"--dangerously-skip-permissions --max-budget-usd \"$AGENT_MAX_BUDGET_USD\"%s%s </dev/null",
				model ? " --model " : "", model ? model : "");
}

/* codex ignores OPENAI_BASE_URL: a provider of its own in
 * ~/.codex/config.toml points it at the base URL (a proxy, a double). */
static int codex_provider(lcc_t *c, const char *id, const agent_config_t *cfg, lc_error_t **err)
{
	if (cfg->format != AGENT_FORMAT_CODEX || cfg->command)
		return 0;
	_cleanup_free_ char *gw_url = NULL;
	if (cfg->access == AGENT_ACCESS_GATEWAY) {
		/* the gateway's base URL, the one lcd puts in OPENAI_BASE_URL */
		agent_gateway_usage_t u;
		if (agent_gateway_usage(c, id, &u, err) < 0)
			return -1;
		gw_url = u.base_url;
		u.base_url = NULL;
		agent_gateway_usage_clear(&u);
		if (!gw_url)
			return lc_error_set(err, LC_EXIT_STATE, 0, "sandbox %s: lcd gives no base URL of its model gateway", id);
	}
	const char *base_url = gw_url ? gw_url : cfg->base_url;
	if (!base_url)
		return 0;
	for (const char *p = base_url; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			return lc_error_set(err, LC_EXIT_USAGE, 0, "OPENAI_BASE_URL: quotes, backslashes and controls are not allowed");
	_cleanup_free_ char *toml = lc_strdup_printf(
		/* web search is a tool the provider runs (and bills, and reaches
		 * the web with): lcd's gateway refuses it unless priced, and the
		 * agent's sandbox has no network of its own to lend it */
		"model_provider = \"lcrun\"\nweb_search = \"disabled\"\n%s%s%s"
		"[model_providers.lcrun]\nname = \"lcrun\"\nbase_url = \"%s\"\nenv_key = \"OPENAI_API_KEY\"\n"
		"wire_api = \"responses\"\n[analytics]\nenabled = false\n",
		cfg->model ? "model = \"" : "", cfg->model ? cfg->model : "", cfg->model ? "\"\n" : "", base_url);
	_cleanup_json_ json_t *req = json_pack("{s:s, s:s, s:i}", "cmd", "mkdir -p \"$HOME/.codex\" && printf %s \"$HOME\"",
					       "user", cfg->user, "timeout", 30);
	lcc_exec_result_t res = { 0 };
	int r = lcc_sandbox_exec(c, id, req, &res, err);
	if (r == 0 && (res.exit_code != 0 || !res.out || res.out[0] != '/'))
		r = lc_error_set(err, LC_EXIT_RUNTIME, 0, "cannot make ~/.codex in the agent's sandbox: %s",
				 res.err ? res.err : "");
	if (r == 0) {
		_cleanup_free_ char *path = lc_strdup_printf("%s/.codex/config.toml", res.out);
		r = lcc_sandbox_upload(c, id, path, toml, strlen(toml), 0600, err);
	}
	lcc_exec_result_clear(&res);
	return r;
}

int agent_run(lcc_t *c, const char *id, const agent_config_t *cfg, const char *workdir, const char *prompt,
	      agent_result_t *res, lc_error_t **err)
{
	memset(res, 0, sizeof(*res));
	res->turns = -1;
	res->spend_usd = -1;
	if (lcc_sandbox_upload(c, id, AGENT_PROMPT_FILE, prompt, strlen(prompt), 0600, err) < 0)
		return lc_error_wrap(err, "cannot write the prompt into the agent's sandbox");
	if (codex_provider(c, id, cfg, err) < 0)
		return -1;
	_cleanup_free_ char *cmd = cfg->command ? strdup(cfg->command) : builtin_command(cfg);
	_cleanup_free_ char *budget = lc_strdup_printf("%g", cfg->max_budget_usd);
	json_t *env = json_pack("{s:s, s:s}", "AGENT_PROMPT_FILE", AGENT_PROMPT_FILE, "AGENT_MAX_BUDGET_USD", budget);
	if (cfg->model)
		json_object_set_new(env, "AGENT_MODEL", json_string(cfg->model));
	_cleanup_json_ json_t *req = json_pack("{s:s, s:o, s:s, s:s, s:i, s:i}", "cmd", cmd, "env", env, "user", cfg->user,
					       "workdir", workdir, "timeout", cfg->timeout_s, "max_output", AGENT_MAX_OUTPUT);
	lcc_exec_result_t ex = { 0 };
	long long t0 = lc_now_ms();
	if (lcc_sandbox_exec(c, id, req, &ex, err) < 0)
		return lc_error_wrap(err, "cannot run the agent");
	res->duration_ms = lc_now_ms() - t0;
	agent_parse_output(cfg->format, ex.out, ex.out_len, ex.exit_code, ex.timed_out, cfg->max_budget_usd, res);
	res->stderr_tail = agent_tail(ex.err, ex.err_len, 20);
	lcc_exec_result_clear(&ex);
	return 0;
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *agent_result_json(const agent_result_t *r)
{
	json_t *j = json_pack("{s:s, s:i, s:o, s:o, s:o, s:I, s:I, s:I, s:o, s:I}", "status", agent_status_name(r->status),
			      "exit_code", r->exit_code, "summary", str_or_null(r->summary), "turns",
			      r->turns >= 0 ? json_integer(r->turns) : json_null(), "spend_usd",
			      r->spend_usd >= 0 ? json_real(round(r->spend_usd * 1e6) / 1e6) : json_null(),
			      "input_tokens", (json_int_t)r->input_tokens, "output_tokens", (json_int_t)r->output_tokens,
			      "cached_tokens", (json_int_t)r->cached_tokens, "error", str_or_null(r->error),
			      "duration_ms", (json_int_t)r->duration_ms);
	return j;
}

void agent_result_clear(agent_result_t *r)
{
	free(r->summary);
	free(r->error);
	free(r->stderr_tail);
	json_decref(r->raw);
	memset(r, 0, sizeof(*r));
}
