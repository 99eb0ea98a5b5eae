/* delivery.h — webhook deliveries: the signature check (HMAC-SHA256 of the
 * raw body, GitHub's X-Hub-Signature-256) and the record of delivery ids
 * already handed on, which makes a redelivery a no-op.  The listener that
 * uses them is webhook.c. */
#ifndef LCD_DELIVERY_H
#define LCD_DELIVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "db.h"

/* A delivery id is remembered this long (GitHub lets an operator redeliver
 * for 3 days); older ids are forgotten and would be handed on again. */
#define LCD_DELIVERY_KEEP_DAYS 7

/* header is "sha256=" and 64 hex digits; true when it is the HMAC-SHA256
 * of body under secret.  The comparison takes the same time whatever
 * bytes differ. */
bool lcd_delivery_signature_ok(const char *secret, size_t secret_len, const void *body, size_t len,
			       const char *header);

/* Delivery ids (GitHub sends a GUID): 1 to 128 of [A-Za-z0-9._:-]. */
bool lcd_delivery_id_valid(const char *s);
/* Event names (X-GitHub-Event): 1 to 64 of [a-z0-9_.-]. */
bool lcd_delivery_event_valid(const char *s);

/* Record delivery for app/hook, with its body's SHA-256 (hex; NULL:
 * none).  Returns 1 when this call recorded it (hand it on), 0 when the
 * delivery id or the body was recorded before (*task_id, if given, gets the
 * task it started, malloc'd, or NULL), -1 with *err. */
int lcd_delivery_claim(lcd_db_t *db, const char *app, const char *hook, const char *delivery, const char *body_sha,
		       const char *event, long long now_ms, char **task_id, lc_error_t **err);
/* The task a claimed delivery started. */
int lcd_delivery_set_task(lcd_db_t *db, const char *app, const char *hook, const char *delivery,
			  const char *task_id, lc_error_t **err);
/* Drop the record (the delivery could not be handed on: a redelivery may
 * try again). */
int lcd_delivery_forget(lcd_db_t *db, const char *app, const char *hook, const char *delivery, lc_error_t **err);
/* Whether payload has the shape GitHub's event has (issues: an "issue"
 * and a "repository" object and an "action"; issue_comment: "issue" and
 * "comment"; pull_request*, push, release likewise); an event it does not
 * know passes.  Else *missing names the member it lacks. */
bool lcd_delivery_shape_ok(const char *event, json_t *payload, const char **missing);
/* Drop records received before cutoff_ms; returns how many. */
int lcd_delivery_gc(lcd_db_t *db, long long cutoff_ms, lc_error_t **err);

#endif
