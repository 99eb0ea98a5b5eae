/* lazylib.c — see lazylib.h. */
#include "lazylib.h"

int lc_lazylib_load(lc_lazylib_t *l, int (*load)(char *failure, size_t len), lc_error_t **err)
{
	int r = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);
	if (!r) {
		pthread_mutex_lock(&l->lock);
		if (!l->state)
			__atomic_store_n(&l->state, load(l->failure, sizeof(l->failure)) == 0 ? 1 : -1, __ATOMIC_RELEASE);
		r = l->state;
		pthread_mutex_unlock(&l->lock);
	}
	if (r < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s", l->failure);
	return 0;
}

const char *lc_lazylib_failure(lc_lazylib_t *l)
{
	return __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) < 0 ? l->failure : NULL;
}
