/* routes_devboxes.h — the devbox and disk routes (routes_devboxes.c). */
#ifndef LCD_ROUTES_DEVBOXES_H
#define LCD_ROUTES_DEVBOXES_H

#include <stdbool.h>
#include <jansson.h>
#include <microhttpd.h>

#include "api.h"

/* Everything under /v1/devboxes and /v1/disks (the operator's). */
enum MHD_Result lcd_api_devboxes(call_t *call);

#endif
