/* grant.h — what an app's tasks may make through the sandbox API (the
 * manifest's "sandboxes", lcd_grant_t in manifest.h), held against a
 * create request.  Every refusal is LC_EXIT_PERM (403) with one line
 * naming the request's key and the manifest's.  The operator is bound by
 * none of it. */
#ifndef LCD_GRANT_H
#define LCD_GRANT_H

#include "manifest.h"

/* The request's "net" (NULL: none): a policy name the grant lists, or
 * "none"; a policy object only when the grant lists "allow" (mode allow)
 * or "open" (mode open). */
int lcd_grant_net(const lcd_grant_t *g, const char *app, json_t *net, lc_error_t **err);
/* A task's own allow list (a policy object, parsed into net): every rule
 * public (lc_net_rule_public). */
int lcd_grant_rules(const lc_net_spec_t *net, lc_error_t **err);
/* image: "host", one the grant lists, or the app's own ("APP/..."). */
int lcd_grant_image(const lcd_grant_t *g, const char *app, const char *image, lc_error_t **err);
/* The limits of a task's sandbox: asked (what the request gave; NULL: it
 * gave none) within the grant, the grant's for what it leaves out.  A
 * sandbox that names none gets the grant's as best effort (what the host
 * cannot enforce is skipped and logged).  Its disk (the upper layer's
 * size) is the grant's, else disk_default (lcd.json task_disk; 0: none),
 * as default and ceiling alike. */
int lcd_grant_limits(const lcd_grant_t *g, const char *app, const lc_limits_t *asked, long long disk_default,
		     lc_limits_t *out, lc_error_t **err);
/* A name a task gives a snapshot: in its app's namespace, "APP/...". */
int lcd_grant_snapshot_name(const char *app, const char *name, lc_error_t **err);

#endif
