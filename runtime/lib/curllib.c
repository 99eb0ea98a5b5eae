/* curllib.c — see curllib.h. */
#define LC_CURLLIB_IMPL
#include <dlfcn.h>
#include <stdio.h>

#include "curllib.h"
#include "lazylib.h"

struct lc_curllib lc_curllib;

static lc_lazylib_t lazy = LC_LAZYLIB_INIT;

static int load(char *failure, size_t len)
{
	struct lc_curllib l;
	/* RTLD_NODELETE: pointers into it live as long as the process. */
	void *h = dlopen(LC_LIBCURL, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		snprintf(failure, len, "cannot load %s, which image push and pull need: %s", LC_LIBCURL,
			 dlerror());
		return -1;
	}
#define LC_CURLLIB_GET(name) \
	if (!(*(void **)&l.name = dlsym(h, #name))) { \
		snprintf(failure, len, "cannot find %s in %s", #name, LC_LIBCURL); \
		return -1; \
	}
	LC_CURLLIB_CALLS(LC_CURLLIB_GET)
#undef LC_CURLLIB_GET
	lc_curllib = l;
	return 0;
}

int lc_curllib_load(lc_error_t **err)
{
	return lc_lazylib_load(&lazy, load, err);
}
