/* gateway.h — the model gateway (gateway.c): a sandbox asks for it at
 * create ("model_gateway": {"provider", "secret", "budget_usd"}) and gets
 * ANTHROPIC_BASE_URL/OPENAI_BASE_URL pointing at lcd on the host side of
 * its own veth, with a token of its own in place of the provider's key.
 * lcd swaps the token for the key from its secret store, forwards to the
 * provider over verified HTTPS, passes answers through as they stream,
 * meters their usage into the ledger (ledger.c) and enforces the budgets
 * of the sandbox, its task and its app. */
#ifndef LCD_GATEWAY_H
#define LCD_GATEWAY_H

#include "access.h"
#include "lcd.h"
#include "ledger.h"

#define LCD_GATEWAY_PORT 7071

/* lcd.json "gateway". */
typedef struct lcd_gateway_cfg {
	bool set;
	char *upstream[LCD_PROV_N]; /* https:// base URLs; NULL: that provider is not served */
	/* each upstream's parts, as the key may only go to them */
	char *up_host[LCD_PROV_N], *up_path[LCD_PROV_N];
	long up_port[LCD_PROV_N];
	char *organization[LCD_PROV_N], *project[LCD_PROV_N]; /* OpenAI-Organization, OpenAI-Project */
	char **betas[LCD_PROV_N];   /* anthropic-beta values passed on (NULL-terminated) */
	char *ca_file;              /* PEM bundle to verify the providers with (default: the system's) */
	int port;
	int connect_timeout;        /* seconds */
	int idle_timeout;           /* seconds without a byte from the provider */
	int timeout;                /* seconds for a whole request */
	long long max_body;         /* request bodies */
	int max_inflight;           /* requests under way per sandbox */
	int header_timeout;         /* seconds a connection has to send a request with a live token */
	long long memory_max;       /* bytes the gateway holds for requests in all */
} lcd_gateway_cfg_t;

/* Parse lcd.json's "gateway" object; errors name source and the key. */
int lcd_gateway_config(json_t *v, const char *source, lcd_gateway_cfg_t *cfg, lc_error_t **err);
void lcd_gateway_cfg_clear(lcd_gateway_cfg_t *cfg);
/* Load the price table, start serving, and take the gateway sandboxes
 * that survived a restart back (each gets a new token). */
int lcd_gateway_start(lcd_t *lcd, const lcd_gateway_cfg_t *cfg, lc_error_t **err);
/* End every request under way and stop serving. */
void lcd_gateway_stop(lcd_t *lcd);

/* A create request's "model_gateway", validated. */
typedef struct lcd_gw_spec {
	int provider;
	char *secret;
	long long budget_pusd; /* 0: none of its own */
} lcd_gw_spec_t;

/* Validate "model_gateway" for who (a task may name only a secret its
 * function declares; secrets: the request's own secret names, which may
 * not include it) and open the gateway's port in net. */
int lcd_gateway_parse(lcd_t *lcd, const lcd_caller_t *who, json_t *v, json_t *secrets, lcd_gw_spec_t *out,
		      lc_net_spec_t *net, lc_error_t **err);
void lcd_gw_spec_clear(lcd_gw_spec_t *g);
/* The sandbox id is made: its token, its record and its listener. */
int lcd_gateway_attach(lcd_t *lcd, const lcd_caller_t *who, const char *id, const lcd_gw_spec_t *g, lc_error_t **err);
/* The sandbox is gone: its token dies.  Idempotent. */
void lcd_gateway_forget(lcd_t *lcd, const char *id);
/* BASE_URL and API_KEY entries for a command run in the sandbox (none
 * when it does not use the gateway). */
int lcd_gateway_env(lcd_t *lcd, const char *id, char ***env, lc_error_t **err);
/* A function's "model_gateway" (lcd_function_t.model_gateway): the task's
 * own sandbox gets the gateway as a sandbox made with it does.
 *
 * Deploy: every function of app that uses it can (the gateway, the
 * provider's upstream, the secret set); one line naming the function
 * otherwise. */
int lcd_gateway_check_app(lcd_t *lcd, const lcd_app_t *app, lc_error_t **err);
/* Before lc_run() makes the task's sandbox sandbox_id: the allow rule to
 * the gateway in spec->net, the sandbox's network lease taken now (its
 * address is the listener's; liblcrun's set-up adopts it), its token,
 * record and listener, and the base URL and token in spec->secret_env.
 * All undone on error. */
int lcd_gateway_task_begin(lcd_t *lcd, const lcd_caller_t *task, const lcd_function_t *fn, const char *sandbox_id,
			   lc_spec_t *spec, lc_error_t **err);
/* The task's sandbox is gone (or was never made): its token dies, and its
 * lease goes if lc_run() left it.  Idempotent. */
void lcd_gateway_task_end(lcd_t *lcd, const char *sandbox_id);
/* Add "model_gateway", "spend_usd", "tokens" to a sandbox's view, and
 * "spend_usd", "tokens", "model_requests", "budget_exceeded" to a task's. */
void lcd_gateway_view(lcd_t *lcd, const char *id, json_t *view);
/* The ids of the sandboxes that have a gateway, as the keys of an object
 * (one query for a listing, instead of lcd_gateway_view's two for each
 * sandbox); NULL when the database cannot say. */
json_t *lcd_gateway_sandbox_ids(lcd_t *lcd);
void lcd_gateway_task_view(lcd_t *lcd, json_t *task);

#endif
