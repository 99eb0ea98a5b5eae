/* Unit tests for what the model gateway lets through
 * (orchestrator/lcd/model/gwreq.c): request-targets, the header allow
 * list and betas, what cannot be priced, reservations and the bill of an
 * answer that did not end well; and the price table's max_output and
 * server_tools (ledger.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "gwreq.h"
#include "util.h"

static lcd_prices_t *prices_of(const char *text)
{
	json_error_t je;
	json_t *doc = json_loads(text, 0, &je);
	ck_assert_msg(doc != NULL, "bad test JSON: %s", je.text);
	lcd_prices_t *p = NULL;
	lc_error_t *err = NULL;
	int r = lcd_prices_from_json(doc, "p.json", &p, &err);
	ck_assert_msg(r == 0, "%s", err ? err->msg : "?");
	json_decref(doc);
	return p;
}

static const char *const PRICES =
	"{\"anthropic\": {\"claude-sonnet-4-5\": {\"input\": 3, \"output\": 15, \"cache_read\": 0.3, \"cache_write\": 3.75,"
	" \"max_output\": 64000}},"
	" \"openai\": {\"gpt-4o-mini\": {\"input\": 0.15, \"output\": 0.6, \"cache_read\": 0.075}},"
	" \"server_tools\": {\"anthropic\": {\"web_search\": {\"per_call\": 0.01, \"max_calls\": 5}},"
	" \"openai\": {\"web_search\": {\"per_call\": 0.025, \"max_calls\": 3}}}}";

static void target_ok(const char *raw, const char *path, const char *query)
{
	char *p = NULL, *q = NULL;
	const char *why = NULL;
	ck_assert_msg(lcd_gw_target_parse(raw, &p, &q, &why) == 0, "%s refused: %s", raw, why);
	ck_assert_str_eq(p, path);
	if (query)
		ck_assert_str_eq(q, query);
	else
		ck_assert_ptr_null(q);
	free(p);
	free(q);
}

static void target_bad(const char *raw, const char *want)
{
	char *p = NULL, *q = NULL;
	const char *why = NULL;
	ck_assert_msg(lcd_gw_target_parse(raw, &p, &q, &why) == -1, "%s passed", raw);
	ck_assert_ptr_null(p);
	ck_assert_ptr_null(q);
	ck_assert_msg(strstr(why, want), "%s: '%s' lacks '%s'", raw, why, want);
}

START_TEST(test_targets)
{
	target_ok("/v1/messages", "/v1/messages", NULL);
	target_ok("/v1/messages?beta=true", "/v1/messages", "beta=true");
	target_ok("/v1/models/claude-sonnet-4-5", "/v1/models/claude-sonnet-4-5", NULL);
	target_ok("/v1/models?limit=20&after_id=m%3A1", "/v1/models", "limit=20&after_id=m%3A1");
	target_ok("/v1/models?", "/v1/models", "");
	/* what once sent the key to another host, and its kin */
	target_bad("%2Fv1%2Fmodels%2F@evil.example", "origin-form");
	target_bad("https://evil.example/v1/models", "origin-form");
	target_bad("evil.example:443", "origin-form");
	target_bad("*", "origin-form");
	target_bad("", "origin-form");
	target_bad("//evil.example/v1/models", "empty segment");
	target_bad("/v1/models/", "empty segment");
	target_bad("/v1/models/x@evil.example", "@");
	target_bad("/v1/models/%2F@evil", "%-escape");
	target_bad("/v1/models/x%5C@evil", "%-escape");
	target_bad("/v1/models/x\\y", "backslash");
	target_bad("/v1/models/..", ". or ..");
	target_bad("/v1/models/./x", ". or ..");
	target_bad("/v1/models/%2e%2e", "%-escape");
	target_bad("/v1/mod\nels", "character outside");
	target_bad("/v1/mod els", "character outside");
	target_bad("/v1/mod\xc3\xa9ls", "character outside");
	target_bad("/v1/models#frag", "character outside");
	target_bad("/v1/models?x=1#@evil", "query has a character outside");
	target_bad("/v1/models?x=@evil", "query has a character outside");
	target_bad("/v1/models?x=%0d%0a", "control character");
	target_bad("/v1/models?x=%7f", "control character");
	target_bad("/v1/models?x=%zz", "bad %-escape");
	target_bad("/v1/models?x=%2", "bad %-escape");
	target_bad("/v1/models?x=a b", "query has a character outside");
}
END_TEST

START_TEST(test_headers_betas)
{
	ck_assert(lcd_gw_header_passes(LCD_PROV_ANTHROPIC, "Content-Type"));
	ck_assert(lcd_gw_header_passes(LCD_PROV_ANTHROPIC, "anthropic-version"));
	ck_assert(lcd_gw_header_passes(LCD_PROV_OPENAI, "User-Agent"));
	ck_assert(!lcd_gw_header_passes(LCD_PROV_OPENAI, "anthropic-version"));
	static const char *const dropped[] = { "x-api-key", "Authorization", "OpenAI-Organization", "OpenAI-Project",
		"OpenAI-Beta", "anthropic-beta", "Host", "Cookie", "X-Forwarded-For", "X-Forwarded-Host", "Forwarded",
		"Proxy-Authorization", "Transfer-Encoding", "Content-Length", "X-Stainless-OS", "x-custom", NULL };
	for (size_t i = 0; dropped[i]; i++) {
		ck_assert_msg(!lcd_gw_header_passes(LCD_PROV_ANTHROPIC, dropped[i]), "%s passes", dropped[i]);
		ck_assert_msg(!lcd_gw_header_passes(LCD_PROV_OPENAI, dropped[i]), "%s passes", dropped[i]);
	}
	char *allowed[] = { "interleaved-thinking-2025-05-14", "fine-grained-tool-streaming-2025-05-14", NULL };
	char *b = lcd_gw_betas(" context-1m-2025-08-07,interleaved-thinking-2025-05-14 , mcp-client-2025-04-04,"
			       "fine-grained-tool-streaming-2025-05-14",
			       allowed);
	ck_assert_str_eq(b, "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14");
	free(b);
	ck_assert_ptr_null(lcd_gw_betas("context-1m-2025-08-07", allowed));
	ck_assert_ptr_null(lcd_gw_betas("interleaved-thinking-2025-05-14", NULL));
	ck_assert_ptr_null(lcd_gw_betas(",,", allowed));
	/* a value goes on only without a control byte: a bare CR would end
	 * the header line at a lenient parser */
	ck_assert(lcd_gw_header_value_ok("claude-cli/2.0.1 (external, cli)"));
	ck_assert(lcd_gw_header_value_ok("a\tb \xc3\xa9"));
	ck_assert(lcd_gw_header_value_ok(""));
	static const char *const bad[] = { "x\ranthropic-beta: context-1m-2025-08-07", "x\nX-A: 1", "x\x0b", "\x01",
		"x\x7f", NULL };
	for (size_t i = 0; bad[i]; i++)
		ck_assert_msg(!lcd_gw_header_value_ok(bad[i]), "value %zu passes", i);
}
END_TEST

static int reserve(lcd_prices_t *p, int prov, lcd_gw_api_t api, const char *body, lcd_reservation_t *r, char **why)
{
	json_t *b = json_loads(body, 0, NULL);
	ck_assert_ptr_nonnull(b);
	lcd_price_t price;
	const char *model = json_string_value(json_object_get(b, "model"));
	ck_assert(lcd_prices_find(p, prov, model, &price));
	int rc = lcd_gw_reserve(prov, api, b, strlen(body), &price, p, r, why);
	json_decref(b);
	return rc;
}

static void refused(lcd_prices_t *p, int prov, lcd_gw_api_t api, const char *body, const char *want)
{
	lcd_reservation_t r;
	char *why = NULL;
	ck_assert_msg(reserve(p, prov, api, body, &r, &why) == -1, "%s passed", body);
	ck_assert_msg(why && strstr(why, want), "%s: '%s' lacks '%s'", body, why, want);
	free(why);
}

START_TEST(test_reserve)
{
	lcd_prices_t *p = prices_of(PRICES);
	lcd_reservation_t r;
	char *why = NULL;
	/* every body byte an input token at the dearest input price ($3.75 cache
	 * write), max_tokens at $15 */
	const char *b = "{\"model\": \"claude-sonnet-4-5\", \"max_tokens\": 1000, \"messages\": []}";
	ck_assert_int_eq(reserve(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, b, &r, &why), 0);
	ck_assert_int_eq(r.in_tokens, (long long)strlen(b));
	ck_assert_int_eq(r.out_tokens, 1000);
	ck_assert_int_eq(r.pusd, (long long)strlen(b) * 3750000 + 1000LL * 15000000);
	/* a cache kept an hour: its writes at twice the input price ($6) */
	b = "{\"model\": \"claude-sonnet-4-5\", \"max_tokens\": 1000, \"system\": [{\"type\": \"text\", \"text\": \"s\", "
	    "\"cache_control\": {\"type\": \"ephemeral\", \"ttl\": \"1h\"}}], \"messages\": []}";
	ck_assert_int_eq(reserve(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, b, &r, &why), 0);
	ck_assert_int_eq(r.pusd, (long long)strlen(b) * 6000000 + 1000LL * 15000000);
	b = "{\"model\": \"claude-sonnet-4-5\", \"max_tokens\": 1000, \"system\": [{\"type\": \"text\", \"text\": \"s\", "
	    "\"cache_control\": {\"type\": \"ephemeral\", \"ttl\": \"5m\"}}], \"messages\": []}";
	ck_assert_int_eq(reserve(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, b, &r, &why), 0);
	ck_assert_int_eq(r.pusd, (long long)strlen(b) * 3750000 + 1000LL * 15000000);
	/* no max_tokens, or more than the model gives: its max_output */
	b = "{\"model\": \"claude-sonnet-4-5\", \"messages\": []}";
	ck_assert_int_eq(reserve(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, b, &r, &why), 0);
	ck_assert_int_eq(r.out_tokens, 64000);
	b = "{\"model\": \"claude-sonnet-4-5\", \"max_tokens\": 99999999, \"messages\": []}";
	ck_assert_int_eq(reserve(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, b, &r, &why), 0);
	ck_assert_int_eq(r.out_tokens, 64000);
	b = "{\"model\": \"claude-sonnet-4-5\", \"max_tokens\": -5, \"messages\": []}";
	ck_assert_int_eq(reserve(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, b, &r, &why), 0);
	ck_assert_int_eq(r.out_tokens, 64000);
	/* a model without max_output: the default */
	b = "{\"model\": \"gpt-4o-mini\", \"messages\": []}";
	ck_assert_int_eq(reserve(p, LCD_PROV_OPENAI, LCD_GW_CHAT, b, &r, &why), 0);
	ck_assert_int_eq(r.out_tokens, LCD_GW_MAX_OUTPUT_DEFAULT);
	/* chat: max_completion_tokens first, then max_tokens; n answers */
	b = "{\"model\": \"gpt-4o-mini\", \"max_tokens\": 50, \"max_completion_tokens\": 70, \"n\": 3, \"messages\": []}";
	ck_assert_int_eq(reserve(p, LCD_PROV_OPENAI, LCD_GW_CHAT, b, &r, &why), 0);
	ck_assert_int_eq(r.out_tokens, 210);
	ck_assert_int_eq(r.pusd, (long long)strlen(b) * 150000 + 210LL * 600000);
	b = "{\"model\": \"gpt-4o-mini\", \"max_output_tokens\": 40, \"input\": \"x\"}";
	ck_assert_int_eq(reserve(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES, b, &r, &why), 0);
	ck_assert_int_eq(r.out_tokens, 40);
	/* a reservation never wraps around */
	b = "{\"model\": \"gpt-4o-mini\", \"max_tokens\": 9000000000000000000, \"n\": 9000000000000000000, \"messages\": []}";
	ck_assert_int_eq(reserve(p, LCD_PROV_OPENAI, LCD_GW_CHAT, b, &r, &why), 0);
	ck_assert(r.pusd > 1000000LL * LCD_PUSD_PER_USD);
	/* server tools: priced per call, times max_uses or the table's max_calls */
	b = "{\"model\": \"claude-sonnet-4-5\", \"max_tokens\": 10, \"messages\": [], \"tools\": [{\"type\": "
	    "\"web_search_20250305\", \"name\": \"web_search\", \"max_uses\": 2}]}";
	ck_assert_int_eq(reserve(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, b, &r, &why), 0);
	ck_assert_int_eq(r.tools_pusd, 2 * 10000000000LL);
	b = "{\"model\": \"gpt-4o-mini\", \"input\": \"x\", \"tools\": [{\"type\": \"web_search\"}, {\"type\": \"function\", "
	    "\"name\": \"f\"}]}";
	ck_assert_int_eq(reserve(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES, b, &r, &why), 0);
	ck_assert_int_eq(r.tools_pusd, 3 * 25000000000LL);
	/* client tools cost nothing of their own */
	b = "{\"model\": \"claude-sonnet-4-5\", \"max_tokens\": 10, \"messages\": [], \"tools\": [{\"name\": \"Bash\", "
	    "\"input_schema\": {}}, {\"type\": \"bash_20250124\", \"name\": \"bash\"}, {\"type\": \"custom\", \"name\": \"x\"}, "
	    "{\"type\": \"text_editor_20250728\", \"name\": \"e\"}]}";
	ck_assert_int_eq(reserve(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, b, &r, &why), 0);
	ck_assert_int_eq(r.tools_pusd, 0);
	/* what cannot be priced */
	refused(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES,
		"{\"model\": \"claude-sonnet-4-5\", \"messages\": [], \"tools\": [{\"type\": \"code_execution_20250522\", "
		"\"name\": \"c\"}]}",
		"tools[0]: code_execution is not a tool the client runs");
	refused(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES,
		"{\"model\": \"claude-sonnet-4-5\", \"messages\": [], \"mcp_servers\": [{\"url\": \"https://e\"}]}",
		"mcp_servers: MCP servers");
	refused(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, "{\"model\": \"claude-sonnet-4-5\", \"messages\": [], \"container\": \"c\"}",
		"container");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES, "{\"model\": \"gpt-4o-mini\", \"input\": \"x\", \"background\": true}",
		"background");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES,
		"{\"model\": \"gpt-4o-mini\", \"input\": \"x\", \"previous_response_id\": \"resp_1\"}", "previous_response_id");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES, "{\"model\": \"gpt-4o-mini\", \"conversation\": \"c\"}", "conversation");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES, "{\"model\": \"gpt-4o-mini\", \"prompt\": {\"id\": \"p\"}}", "prompt");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES,
		"{\"model\": \"gpt-4o-mini\", \"input\": \"x\", \"tools\": [{\"type\": \"mcp\", \"server_url\": \"https://e\"}]}",
		"MCP servers");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES,
		"{\"model\": \"gpt-4o-mini\", \"input\": \"x\", \"tools\": [{\"type\": \"code_interpreter\"}]}",
		"code_interpreter is not a tool the client runs");
	refused(p, LCD_PROV_OPENAI, LCD_GW_CHAT, "{\"model\": \"gpt-4o-mini\", \"messages\": [], \"tools\": [{\"name\": \"f\"}]}",
		"tools[0].type: required");
	/* a namespace's tools are checked as its own */
	b = "{\"model\": \"gpt-4o-mini\", \"input\": \"x\", \"tools\": [{\"type\": \"namespace\", \"name\": \"n\", "
	    "\"tools\": [{\"type\": \"function\", \"name\": \"f\"}]}]}";
	ck_assert_int_eq(reserve(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES, b, &r, &why), 0);
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES,
		"{\"model\": \"gpt-4o-mini\", \"input\": \"x\", \"tools\": [{\"type\": \"namespace\", \"tools\": "
		"[{\"type\": \"image_generation\"}]}]}",
		"tools[0].tools[0]: image_generation is not a tool the client runs");
	/* input the provider would fetch from a URL, or look up by id */
	refused(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES,
		"{\"model\": \"claude-sonnet-4-5\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", "
		"\"text\": \"a\"}, {\"type\": \"image\", \"source\": {\"type\": \"url\", \"url\": \"https://e/?d=1\"}}]}]}",
		"messages[0].content[1].source: the provider would fetch it");
	refused(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES,
		"{\"model\": \"claude-sonnet-4-5\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": "
		"\"tool_result\", \"tool_use_id\": \"t\", \"content\": [{\"type\": \"document\", \"source\": {\"type\": "
		"\"content\", \"content\": [{\"type\": \"image\", \"source\": {\"type\": \"url\", \"url\": \"https://e\"}}]}}]}]}]}",
		"messages[0].content[0].content[0].source.content[0].source: the provider would fetch it");
	refused(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES,
		"{\"model\": \"claude-sonnet-4-5\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": "
		"\"document\", \"source\": {\"type\": \"file\", \"file_id\": \"file_1\"}}]}]}",
		"messages[0].content[0].source: input kept at the provider");
	refused(p, LCD_PROV_OPENAI, LCD_GW_CHAT,
		"{\"model\": \"gpt-4o-mini\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", "
		"\"image_url\": {\"url\": \"https://e/x.png\"}}]}]}",
		"messages[0].content[0].image_url: the provider would fetch it");
	refused(p, LCD_PROV_OPENAI, LCD_GW_CHAT,
		"{\"model\": \"gpt-4o-mini\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"file\", "
		"\"file\": {\"file_id\": \"file-1\"}}]}]}",
		"messages[0].content[0].file_id: input kept at the provider");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES,
		"{\"model\": \"gpt-4o-mini\", \"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_file\", "
		"\"file_url\": \"https://e/x.pdf\"}]}]}",
		"input[0].content[0].file_url: the provider would fetch it");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES,
		"{\"model\": \"gpt-4o-mini\", \"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c\", "
		"\"output\": [{\"type\": \"input_image\", \"image_url\": \"http://e/\"}]}]}",
		"input[0].output[0].image_url: the provider would fetch it");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES,
		"{\"model\": \"gpt-4o-mini\", \"input\": [{\"type\": \"item_reference\", \"id\": \"msg_1\"}]}",
		"input[0].type: input kept at the provider");
	/* what the body holds passes: base64, text, data: URLs */
	b = "{\"model\": \"claude-sonnet-4-5\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", "
	    "\"source\": {\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": \"AA==\"}}, {\"type\": "
	    "\"search_result\", \"source\": \"https://e/\", \"title\": \"t\", \"content\": [{\"type\": \"text\", "
	    "\"text\": \"x\"}]}, {\"type\": \"document\", \"source\": {\"type\": \"text\", \"media_type\": \"text/plain\", "
	    "\"data\": \"x\"}}]}]}";
	ck_assert_int_eq(reserve(p, LCD_PROV_ANTHROPIC, LCD_GW_MESSAGES, b, &r, &why), 0);
	b = "{\"model\": \"gpt-4o-mini\", \"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\", "
	    "\"image_url\": \"data:image/png;base64,AA==\"}, {\"type\": \"input_file\", \"filename\": \"a.pdf\", "
	    "\"file_data\": \"data:application/pdf;base64,AA==\"}]}]}";
	ck_assert_int_eq(reserve(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES, b, &r, &why), 0);
	/* a service tier billed above the table's rates */
	refused(p, LCD_PROV_OPENAI, LCD_GW_CHAT, "{\"model\": \"gpt-4o-mini\", \"messages\": [], \"service_tier\": \"priority\"}",
		"service_tier: priority is billed above");
	refused(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES, "{\"model\": \"gpt-4o-mini\", \"input\": \"x\", \"service_tier\": 1}",
		"service_tier: not a string");
	b = "{\"model\": \"gpt-4o-mini\", \"messages\": [], \"service_tier\": \"flex\"}";
	ck_assert_int_eq(reserve(p, LCD_PROV_OPENAI, LCD_GW_CHAT, b, &r, &why), 0);
	/* null and false members are no request for them */
	b = "{\"model\": \"gpt-4o-mini\", \"input\": \"x\", \"background\": false, \"previous_response_id\": null}";
	ck_assert_int_eq(reserve(p, LCD_PROV_OPENAI, LCD_GW_RESPONSES, b, &r, &why), 0);
	lcd_prices_free(p);
	/* without a price, web search in chat is refused */
	p = prices_of("{\"openai\": {\"gpt-4o-mini\": {\"input\": 1, \"output\": 1}}}");
	refused(p, LCD_PROV_OPENAI, LCD_GW_CHAT, "{\"model\": \"gpt-4o-mini\", \"messages\": [], \"web_search_options\": {}}",
		"web_search_options: web_search is not a tool the client runs");
	lcd_prices_free(p);
}
END_TEST

START_TEST(test_bill)
{
	lcd_prices_t *p = prices_of(PRICES);
	lcd_price_t price;
	ck_assert(lcd_prices_find(p, LCD_PROV_ANTHROPIC, "claude-sonnet-4-5", &price));
	lcd_reservation_t r = { .in_tokens = 100, .out_tokens = 2000, .tools_pusd = 0 };
	r.pusd = 100 * 3750000LL + 2000 * 15000000LL;
	/* nothing reported: the reservation */
	lcd_usage_t u = { 0 };
	ck_assert_int_eq(lcd_gw_cost_incomplete(LCD_PROV_ANTHROPIC, &r, &u, &price, p), r.pusd);
	ck_assert_int_eq(lcd_gw_cost_incomplete(LCD_PROV_ANTHROPIC, &r, NULL, &price, p), r.pusd);
	/* message_start reported 1000 in, 1 out: the input as reported, the output reserved */
	u.seen = true;
	u.input = 1000;
	u.output = 1;
	u.cache_read = 10;
	ck_assert_int_eq(lcd_gw_cost_incomplete(LCD_PROV_ANTHROPIC, &r, &u, &price, p),
			 1000 * 3000000LL + 10 * 300000LL + 2000 * 15000000LL);
	/* an output reported past its reservation is billed as reported */
	u.output = 3000;
	ck_assert_int_eq(lcd_gw_cost_incomplete(LCD_PROV_ANTHROPIC, &r, &u, &price, p),
			 1000 * 3000000LL + 10 * 300000LL + 3000 * 15000000LL);
	/* a complete answer: its usage, and its server tool calls */
	lcd_usage_t done = { .input = 10, .output = 20, .seen = true, .final = true };
	snprintf(done.tool[0], sizeof(done.tool[0]), "web_search");
	done.calls[0] = 3;
	done.n_tools = 1;
	ck_assert_int_eq(lcd_gw_cost(LCD_PROV_ANTHROPIC, &done, &r, &price, p),
			 10 * 3000000LL + 20 * 15000000LL + 3 * 10000000000LL);
	/* OpenAI does not count its server tool calls: an answer costs their
	 * reservation, a refusal (no reservation given) nothing */
	lcd_price_t mini;
	ck_assert(lcd_prices_find(p, LCD_PROV_OPENAI, "gpt-4o-mini", &mini));
	lcd_usage_t oa = { .input = 10, .output = 20, .seen = true, .final = true };
	lcd_reservation_t ro = { .in_tokens = 100, .out_tokens = 20, .tools_pusd = 2 * 10000000000LL };
	ck_assert_int_eq(lcd_gw_cost(LCD_PROV_OPENAI, &oa, &ro, &mini, p), lcd_usage_cost(&oa, &mini) + 2 * 10000000000LL);
	ck_assert_int_eq(lcd_gw_cost(LCD_PROV_OPENAI, &oa, NULL, &mini, p), lcd_usage_cost(&oa, &mini));
	lcd_prices_free(p);
}
END_TEST

START_TEST(test_meter_server_tools)
{
	lcd_meter_t *m = lcd_meter_new(LCD_PROV_ANTHROPIC, false);
	const char *body = "{\"usage\": {\"input_tokens\": 5, \"output_tokens\": 6, \"server_tool_use\": "
			   "{\"web_search_requests\": 2, \"web_fetch_requests\": 1, \"bad\": 3, \"x_requests\": -1}}}";
	lcd_meter_feed(m, body, strlen(body));
	ck_assert(lcd_meter_end(m));
	const lcd_usage_t *u = lcd_meter_usage(m);
	ck_assert_int_eq(u->n_tools, 2);
	ck_assert_str_eq(u->tool[0], "web_search");
	ck_assert_int_eq(u->calls[0], 2);
	ck_assert_str_eq(u->tool[1], "web_fetch");
	ck_assert_int_eq(u->calls[1], 1);
	lcd_meter_free(m);
	/* a body dropped for memory: no usage read, nothing held */
	m = lcd_meter_new(LCD_PROV_ANTHROPIC, false);
	lcd_meter_feed(m, body, 10);
	ck_assert_int_eq(lcd_meter_held(m), 10);
	lcd_meter_drop_body(m);
	ck_assert_int_eq(lcd_meter_held(m), 0);
	lcd_meter_feed(m, body + 10, strlen(body) - 10);
	ck_assert(!lcd_meter_end(m));
	ck_assert(!lcd_meter_usage(m)->seen);
	lcd_meter_free(m);
}
END_TEST

START_TEST(test_price_table_keys)
{
	json_t *doc = json_loads("{\"anthropic\": {\"m\": {\"input\": 1, \"output\": 1, \"max_output\": 0}}}", 0, NULL);
	lcd_prices_t *p = NULL;
	lc_error_t *err = NULL;
	ck_assert_int_eq(lcd_prices_from_json(doc, "p.json", &p, &err), -1);
	ck_assert_str_eq(err->msg, "p.json: anthropic.m.max_output: expected the model's largest answer in tokens, 1 to 10000000");
	lc_error_free(err);
	err = NULL;
	json_decref(doc);
	doc = json_loads("{\"server_tools\": {\"anthropic\": {\"web_search\": {\"per_call\": 0.01}}}}", 0, NULL);
	ck_assert_int_eq(lcd_prices_from_json(doc, "p.json", &p, &err), -1);
	ck_assert_str_eq(err->msg, "p.json: server_tools.anthropic.web_search: expected {\"per_call\": dollars 0 to 1000, "
				   "\"max_calls\": 1 to 1000}");
	lc_error_free(err);
	err = NULL;
	json_decref(doc);
	doc = json_loads("{\"server_tools\": {\"google\": {}}}", 0, NULL);
	ck_assert_int_eq(lcd_prices_from_json(doc, "p.json", &p, &err), -1);
	ck_assert_str_eq(err->msg, "p.json: server_tools.google: unknown provider (anthropic, openai)");
	lc_error_free(err);
	json_decref(doc);
	/* the shipped table gives every model it lists a max_output */
	setenv("LCRUN_POLICY_DIR", LC_SRCDIR "/policies", 1);
	setenv("LCRUN_ETC_DIR", "/nonexistent-lcrun-etc", 1);
	err = NULL;
	ck_assert_int_eq(lcd_prices_load(&p, NULL, &err), 0);
	lcd_price_t pr;
	ck_assert(lcd_prices_find(p, LCD_PROV_ANTHROPIC, "claude-sonnet-4-5-20250929", &pr));
	ck_assert_int_eq(pr.max_output, 64000);
	ck_assert(lcd_prices_find(p, LCD_PROV_OPENAI, "gpt-4o-mini", &pr));
	ck_assert_int_eq(pr.max_output, 16384);
	lcd_prices_free(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gwreq");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_targets);
	tcase_add_test(tc, test_headers_betas);
	tcase_add_test(tc, test_reserve);
	tcase_add_test(tc, test_bill);
	tcase_add_test(tc, test_meter_server_tools);
	tcase_add_test(tc, test_price_table_keys);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
