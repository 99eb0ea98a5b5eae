/* scheduler.h — the scheduler (scheduler.c): schedules fired at their cron minute. */
#ifndef LCD_SCHEDULER_H
#define LCD_SCHEDULER_H

#include <jansson.h>

#include "lcd.h"

void *lcd_scheduler(void *arg);
/* Fire a schedule now (lcctl run APP:SCHEDULE). */
int lcd_schedule_fire(lcd_t *lcd, const lcd_app_t *app, const lcd_schedule_t *s, json_t *ids, lc_error_t **err);
/* [{app, name, cron, function, paused, last_slot, next}] */
json_t *lcd_schedules_json(lcd_t *lcd, lc_error_t **err);

#endif
