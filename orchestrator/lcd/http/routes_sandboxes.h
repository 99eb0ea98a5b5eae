/* routes_sandboxes.h — the sandbox API's routes (routes_sandboxes.c):
 * records, lifecycle, files. */
#ifndef LCD_ROUTES_SANDBOXES_H
#define LCD_ROUTES_SANDBOXES_H

#include <stdbool.h>
#include <jansson.h>
#include <microhttpd.h>

#include "api.h"

/* Everything under /v1/sandboxes. */
enum MHD_Result lcd_api_sandboxes(call_t *call);
/* Uploads (PUT /v1/sandboxes/ID/files) are not buffered: the sandbox side
 * is opened when the headers are in (begin: false when it answered an
 * error already, *r being its result), each piece of the body is written
 * as it comes, and end answers. */
bool lcd_upload_wanted(const char *method, const char *url);
bool lcd_upload_begin(struct MHD_Connection *c, lcd_t *lcd, const lcd_caller_t *who, const char *url,
		      lcd_upload_t **out, enum MHD_Result *r);
void lcd_upload_data(lcd_upload_t *u, const char *data, size_t len);
enum MHD_Result lcd_upload_end(struct MHD_Connection *c, lcd_upload_t *u);
void lcd_upload_free(lcd_upload_t *u);

#endif
