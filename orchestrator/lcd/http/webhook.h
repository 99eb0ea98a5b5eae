/* webhook.h — the webhook listener (webhook.c), never the API's. */
#ifndef LCD_WEBHOOK_H
#define LCD_WEBHOOK_H

#include <stddef.h>

#include "lcd.h"

/* POST /hooks/APP/NAME. */
typedef struct lcd_webhook_srv lcd_webhook_srv_t;
typedef struct lcd_webhook_cfg {
	const char *listen;   /* HOST:PORT */
	const char *tls_cert; /* PEM files: TLS when both are set */
	const char *tls_key;
	size_t max_body;
} lcd_webhook_cfg_t;
int lcd_webhook_start(lcd_t *lcd, const lcd_webhook_cfg_t *cfg, lcd_webhook_srv_t **out, lc_error_t **err);
/* Stop listening and wait for deliveries being handed on. */
void lcd_webhook_stop(lcd_webhook_srv_t *srv);

#endif
