/* curllib.c — see curllib.h. */
#define LC_CURLLIB_IMPL
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "curllib.h"

struct lc_curllib lc_curllib;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded; /* 1 done, -1 failed (failure is kept to repeat it) */
static char failure[512];

static int load(void)
{
	struct lc_curllib l;
	/* RTLD_NODELETE: pointers into it live as long as the process. */
	void *h = dlopen(LC_LIBCURL, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		snprintf(failure, sizeof(failure), "cannot load %s, which image push and pull need: %s", LC_LIBCURL,
			 dlerror());
		return -1;
	}
#define LC_CURLLIB_GET(name) \
	if (!(*(void **)&l.name = dlsym(h, #name))) { \
		snprintf(failure, sizeof(failure), "cannot find %s in %s", #name, LC_LIBCURL); \
		return -1; \
	}
	LC_CURLLIB_CALLS(LC_CURLLIB_GET)
#undef LC_CURLLIB_GET
	lc_curllib = l;
	return 0;
}

int lc_curllib_load(lc_error_t **err)
{
	int r = __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
	if (!r) {
		pthread_mutex_lock(&lock);
		if (!loaded)
			__atomic_store_n(&loaded, load() == 0 ? 1 : -1, __ATOMIC_RELEASE);
		r = loaded;
		pthread_mutex_unlock(&lock);
	}
	if (r < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s", failure);
	return 0;
}
