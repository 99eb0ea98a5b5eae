/* ledger.h — the model gateway's books: the price table
 * (policies/model-prices.json), the usage a provider reports in an answer
 * (read from a JSON body or an SSE stream as it passes), and the ledger of
 * spend per sandbox, task and app in lcd.db.
 *
 * Money is counted in integer pico-dollars (1e-12 USD): a price of $0.075
 * per million tokens is 75,000 pico-dollars per token, so a cost is an
 * exact product of tokens and price, and sums never drift. */
#ifndef LCD_LEDGER_H
#define LCD_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "db.h"
#include "error.h"

#define LCD_PUSD_PER_USD 1000000000000LL

typedef enum { LCD_PROV_ANTHROPIC = 0, LCD_PROV_OPENAI, LCD_PROV_N } lcd_provider_t;

const char *lcd_provider_name(int p);
/* The provider named s, or -1. */
int lcd_provider_parse(const char *s);

/* A dollar amount (a JSON number, 0 < v <= max_usd) in pico-dollars;
 * errors name path. */
int lcd_usd_parse(json_t *v, const char *path, double max_usd, long long *pusd, lc_error_t **err);
/* Pico-dollars as a JSON number of dollars. */
json_t *lcd_usd_json(long long pusd);

/* ---- prices ---- */

typedef struct lcd_price {
	long long input, output, cache_read, cache_write; /* pico-dollars per token */
	long long cache_write_1h; /* a cache write kept an hour (Anthropic: 2x input) */
	long long max_output; /* the model's largest answer in tokens; 0: not given */
} lcd_price_t;

/* A server-side tool the provider runs and bills per call (web search):
 * its price per call and the calls a request is reserved for when it
 * does not bound them itself. */
typedef struct lcd_tool_price {
	long long per_call; /* pico-dollars */
	long long max_calls;
} lcd_tool_price_t;

typedef struct lcd_prices lcd_prices_t;

/* {"description", "anthropic": {MODEL: {"input", "output", "cache_read",
 * "cache_write", "max_output"}}, "openai": {...}, "server_tools":
 * {"anthropic": {TOOL: {"per_call", "max_calls"}}, "openai": {...}}},
 * dollars per million tokens with at most 6 decimals; input and output
 * required, the cache prices default to the input price; max_output is
 * the model's largest answer in tokens.  MODEL "*" prices every model not
 * listed.  A server tool's per_call is dollars, max_calls at most 1000.
 * Errors name source and the JSON path. */
int lcd_prices_from_json(json_t *doc, const char *source, lcd_prices_t **out, lc_error_t **err);
/* The site's file ($LCRUN_ETC_DIR/policies/model-prices.json, default
 * /etc/lcrun) if there is one, else the shipped one (lc_policy_dir()). */
int lcd_prices_load(lcd_prices_t **out, char **source, lc_error_t **err);
void lcd_prices_free(lcd_prices_t *p);
/* The price of a model: its own entry, or the entry of which it is a
 * dated version (NAME-20250929, NAME-2024-08-06, NAME-latest), else "*".
 * false when the table has none. */
bool lcd_prices_find(const lcd_prices_t *p, lcd_provider_t prov, const char *model, lcd_price_t *out);
/* A model's name as the table and the gateway take it: 1 to 200 of
 * letters, digits and "._-:/@". */
bool lcd_model_name_ok(const char *s);
/* The price of a server tool by its name (web_search), or false. */
bool lcd_prices_tool(const lcd_prices_t *p, lcd_provider_t prov, const char *tool, lcd_tool_price_t *out);

/* ---- usage ---- */

#define LCD_USAGE_TOOLS 4

typedef struct lcd_usage {
	/* Anthropic's meaning: input excludes the cache reads and writes.
	 * OpenAI reports cached tokens inside its input count; they are
	 * taken out of input here and counted as cache_read. */
	long long input, output, cache_read, cache_write;
	long long cache_write_1h; /* of cache_write, those kept an hour (usage.cache_creation) */
	bool seen;  /* some usage was reported */
	bool final; /* the answer's final usage was reported */
	/* server tools the provider ran and reported (Anthropic's
	 * usage.server_tool_use: web_search_requests -> "web_search") */
	char tool[LCD_USAGE_TOOLS][32];
	long long calls[LCD_USAGE_TOOLS];
	int n_tools;
} lcd_usage_t;

long long lcd_usage_cost(const lcd_usage_t *u, const lcd_price_t *p);
/* {"input", "output", "cache_read", "cache_write"} */
json_t *lcd_usage_json(const lcd_usage_t *u);

/* Reads usage from an answer as it passes: an SSE stream (Anthropic's
 * message_start and message_delta, an OpenAI chat chunk with usage, a
 * responses API response.completed/incomplete/failed) or, for any other
 * content type, the whole JSON body at the end (kept up to a cap). */
typedef struct lcd_meter lcd_meter_t;
lcd_meter_t *lcd_meter_new(lcd_provider_t prov, bool sse);
/* Feed bytes in order; true when the usage changed. */
bool lcd_meter_feed(lcd_meter_t *m, const char *data, size_t len);
/* The answer is complete: a JSON body is parsed now.  true when the
 * usage changed. */
bool lcd_meter_end(lcd_meter_t *m);
const lcd_usage_t *lcd_meter_usage(const lcd_meter_t *m);
/* How many bytes of the data fed so far end on an SSE event boundary
 * (a blank line); everything for a body that is not SSE. */
size_t lcd_meter_boundary(const lcd_meter_t *m);
/* Bytes the meter holds (a JSON body it keeps to read at the end, an SSE
 * line and event). */
size_t lcd_meter_held(const lcd_meter_t *m);
/* Keep no more of a JSON body: its usage will not be read (the answer is
 * unmetered).  For a caller out of memory. */
void lcd_meter_drop_body(lcd_meter_t *m);
void lcd_meter_free(lcd_meter_t *m);

/* ---- the ledger (table gateway_ledger) ---- */

typedef struct lcd_ledger_entry {
	const char *sandbox, *task, *app; /* task and app NULL for the operator's sandboxes */
	const char *provider, *model, *path;
	const char *outcome; /* ok, unmetered, cut, client_gone, upstream_error, timeout */
	int status;          /* the HTTP status the sandbox got */
	lcd_usage_t usage;
	long long cost;      /* pico-dollars */
	long long reserved;  /* pico-dollars the request was admitted for */
	bool budget_exceeded;
	long long at;        /* ms since the epoch */
	long long ms;        /* how long the request took */
} lcd_ledger_entry_t;

int lcd_ledger_add(lcd_db_t *db, const lcd_ledger_entry_t *e, lc_error_t **err);
/* Pico-dollars spent by a sandbox (LCD_LEDGER_SANDBOX), a task or an app
 * since `since` (ms; 0: ever).  -1 with *err on failure. */
enum { LCD_LEDGER_SANDBOX, LCD_LEDGER_TASK, LCD_LEDGER_APP };
long long lcd_ledger_spend(lcd_db_t *db, int scope, const char *key, long long since, lc_error_t **err);
/* {"spend_usd", "tokens": {...}, "requests", "unmetered", "refused",
 * "budget_exceeded"} of a sandbox or a task (refused: requests turned
 * away before the provider, table gateway_refusals; budget_exceeded also
 * when one was for the budget); NULL on failure. */
json_t *lcd_ledger_summary(lcd_db_t *db, int scope, const char *key, lc_error_t **err);

#endif
