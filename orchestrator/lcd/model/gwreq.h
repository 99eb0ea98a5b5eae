/* gwreq.h — what a sandbox may ask of the model gateway, decided before
 * anything goes to the provider: the request-target (origin-form only,
 * nothing that could move the URL's host), the headers that pass, and the
 * most a request can cost (its reservation), with the refusal of what the
 * gateway cannot price.  Pure: core/gateway.c applies it. */
#ifndef LCD_GWREQ_H
#define LCD_GWREQ_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "ledger.h"

/* A model's largest answer when the price table does not give it. */
#define LCD_GW_MAX_OUTPUT_DEFAULT 128000LL

typedef enum { LCD_GW_MESSAGES, LCD_GW_COUNT, LCD_GW_MODELS, LCD_GW_CHAT, LCD_GW_RESPONSES } lcd_gw_api_t;

/* The request-target as it came (libmicrohttpd's undecoded URI).  Only
 * origin-form passes: one leading '/', path segments of letters, digits
 * and "-._~!$&'()*+,;=:" (no '%' at all, no '@', no '\', no empty, "." or
 * ".." segment), then optionally '?' and a query of the same characters,
 * '/', '?' and %XX escapes that decode to no control character.  Nothing
 * but ASCII; no '#'.  0 with *path and *query
 * (NULL without one) allocated, or -1 with *why (static text). */
int lcd_gw_target_parse(const char *raw, char **path, char **query, const char **why);

/* Whether a request header of the sandbox's goes to the provider: an
 * allow list (content type, accept, user agent, anthropic-version; the
 * betas through lcd_gw_betas); the key, the organisation and project,
 * cookies, forwarding headers and everything unknown are dropped. */
bool lcd_gw_header_passes(int prov, const char *name);
/* Whether a header's value may go to the provider as it is: visible
 * ASCII, space, tab and bytes past ASCII; no control byte (libmicrohttpd
 * keeps a bare CR in a value, libcurl sends it on, and a provider's
 * parser may end the header line there: a header the allow list did not
 * pass). */
bool lcd_gw_header_value_ok(const char *value);
/* The members of an anthropic-beta list (comma-separated) that allowed
 * (NULL-terminated) names, comma-joined; NULL when none is. */
char *lcd_gw_betas(const char *value, char *const *allowed);

typedef struct lcd_reservation {
	long long in_tokens;  /* a bound on the input: the body's bytes */
	long long out_tokens; /* max_tokens (times n), else the model's largest answer */
	long long tools_pusd; /* server tools: their price per call times the calls allowed */
	long long pusd;       /* all of it at the request's prices */
} lcd_reservation_t;

/* A billable request's body (api MESSAGES, CHAT or RESPONSES, body_len
 * bytes), checked against what the gateway can price, and its
 * reservation: every input token at the dearest of the model's input
 * prices, every output token it may be given, every server tool call it
 * may make.  -1 with *why (allocated, naming the member) for what cannot
 * be priced: a background response, input kept at the provider
 * (previous_response_id, conversation, prompt), MCP servers, a server
 * tool model-prices.json has no price for. */
int lcd_gw_reserve(int prov, lcd_gw_api_t api, json_t *body, size_t body_len, const lcd_price_t *price,
		   const lcd_prices_t *prices, lcd_reservation_t *out, char **why);

/* What an answer cost: its usage at the price, and the server tool calls
 * it reports at theirs.  OpenAI's answers do not count their server tool
 * calls: with resv (an answer the provider gave), those cost their
 * reservation; without (a refusal), nothing. */
long long lcd_gw_cost(int prov, const lcd_usage_t *u, const lcd_reservation_t *resv, const lcd_price_t *price,
		      const lcd_prices_t *prices);
/* What an answer that did not end with its final usage costs (a stream
 * cut or left by its client, an answer without usage or too big to read):
 * the reservation, but with the input the provider already reported (an
 * Anthropic stream's message_start) billed as reported. */
long long lcd_gw_cost_incomplete(int prov, const lcd_reservation_t *r, const lcd_usage_t *u, const lcd_price_t *price,
				 const lcd_prices_t *prices);

#endif
