/* lazylib.h — a shared library loaded with dlopen at its first use, once
 * per process (archivelib.c, curllib.c): a program that never needs it
 * never maps it. */
#ifndef LC_LAZYLIB_H
#define LC_LAZYLIB_H

#include <pthread.h>
#include <stddef.h>

#include "error.h"

typedef struct lc_lazylib {
	pthread_mutex_t lock;
	int state;         /* 0 not yet, 1 loaded, -1 failed (failure repeats it) */
	char failure[512]; /* why, once failed */
} lc_lazylib_t;

#define LC_LAZYLIB_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* load (which says why in failure[0..len) when it returns < 0) the first
 * time; every later call gives its outcome again, without a lock once it
 * is known. */
int lc_lazylib_load(lc_lazylib_t *l, int (*load)(char *failure, size_t len), lc_error_t **err);

/* Why the library could not be loaded, or NULL (loaded, or not tried). */
const char *lc_lazylib_failure(lc_lazylib_t *l);

#endif
