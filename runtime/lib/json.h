/* json.h — small accessors of jansson values, shared by liblcrun, lcd,
 * lcctl and the workloads. */
#ifndef LC_JSON_H
#define LC_JSON_H

#include <jansson.h>

/* The string at key k of object o; NULL when o is no object, k is absent
 * or its value is no string. */
static inline const char *lc_json_str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* The integer at key k of object o; 0 when there is none. */
static inline long long lc_json_int(const json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

#endif
