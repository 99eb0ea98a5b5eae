/* config.c — site settings from /etc/lcrun/lcrun.json. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>

#include "config.h"
#include "util.h"

static uid_t uid_base = 1000000000;
static unsigned uid_count = 65536;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	const char *path = getenv("LCRUN_CONFIG");
	json_t *j = json_load_file(path ? path : "/etc/lcrun/lcrun.json", 0, NULL);
	if (!j)
		return;
	json_t *v = json_object_get(j, "uid_base");
	if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 4000000000LL)
		uid_base = (uid_t)json_integer_value(v);
	v = json_object_get(j, "uid_count");
	if (json_is_integer(v) && json_integer_value(v) >= 1024 && json_integer_value(v) <= 65536)
		uid_count = (unsigned)json_integer_value(v);
	json_decref(j);
}

uid_t lc_uid_base(void)
{
	pthread_once(&once, load);
	return uid_base;
}

unsigned lc_uid_count(void)
{
	pthread_once(&once, load);
	return uid_count;
}
