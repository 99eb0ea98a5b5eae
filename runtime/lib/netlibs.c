/* netlibs.c — see netlibs.h. */
#define LC_NETLIBS_IMPL
#include <dlfcn.h>
#include <pthread.h>

#include "netlibs.h"
#include "util.h"

struct lc_netlibs lc_netlibs;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded; /* 1 done, -1 failed (the error is kept to repeat it) */
static char failure[512];

static void *open_lib(const char *soname)
{
	/* RTLD_NODELETE: pointers into it live as long as the process. */
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h)
		snprintf(failure, sizeof(failure), "cannot load %s: %s", soname, dlerror());
	return h;
}

static int resolve(void *h, const char *soname, const char *name, void **out)
{
	*out = dlsym(h, name);
	if (*out)
		return 0;
	snprintf(failure, sizeof(failure), "cannot find %s in %s", name, soname);
	return -1;
}

static int load(void)
{
	struct lc_netlibs l;
	void *nl = open_lib(LC_LIBNL), *route = nl ? open_lib(LC_LIBNL_ROUTE) : NULL,
	     *nft = route ? open_lib(LC_LIBNFTABLES) : NULL;
	if (!nft)
		return -1;
#define LC_NETLIBS_GET(h, soname, name) \
	if (resolve(h, soname, #name, (void **)&l.name) < 0) \
		return -1;
#define GET_NL(name) LC_NETLIBS_GET(nl, LC_LIBNL, name)
#define GET_ROUTE(name) LC_NETLIBS_GET(route, LC_LIBNL_ROUTE, name)
#define GET_NFT(name) LC_NETLIBS_GET(nft, LC_LIBNFTABLES, name)
	LC_NETLIBS_NL(GET_NL)
	LC_NETLIBS_ROUTE(GET_ROUTE)
	LC_NETLIBS_NFT(GET_NFT)
	lc_netlibs = l;
	return 0;
}

int lc_netlibs_load(lc_error_t **err)
{
	pthread_mutex_lock(&lock);
	if (!loaded)
		loaded = load() == 0 ? 1 : -1;
	int r = loaded;
	pthread_mutex_unlock(&lock);
	if (r < 0)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s", failure);
	return 0;
}
