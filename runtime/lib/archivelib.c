/* archivelib.c — see archivelib.h. */
#define LC_ARCHIVELIB_IMPL
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "archivelib.h"
#include "lazylib.h"

struct lc_archivelib lc_archivelib;

static lc_lazylib_t lazy = LC_LAZYLIB_INIT;

static int load(char *failure, size_t len)
{
	struct lc_archivelib l;
	/* RTLD_NODELETE: pointers into it live as long as the process. */
	void *h = dlopen(LC_LIBARCHIVE, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		snprintf(failure, len, "cannot load %s, which images, layers and cp need: %s",
			 LC_LIBARCHIVE, dlerror());
		return -1;
	}
#define LC_ARCHIVELIB_GET(name) \
	if (!(*(void **)&l.name = dlsym(h, #name))) { \
		snprintf(failure, len, "cannot find %s in %s", #name, LC_LIBARCHIVE); \
		return -1; \
	}
	LC_ARCHIVELIB_NEW(LC_ARCHIVELIB_GET)
	LC_ARCHIVELIB_FREE(LC_ARCHIVELIB_GET)
	LC_ARCHIVELIB_CALLS(LC_ARCHIVELIB_GET)
#undef LC_ARCHIVELIB_GET
	lc_archivelib = l;
	return 0;
}

int lc_archivelib_load(lc_error_t **err)
{
	/* The constructors call this for every entry: no lock once done. */
	return lc_lazylib_load(&lazy, load, err);
}

const char *lc_archivelib_failure(void)
{
	return lc_lazylib_failure(&lazy);
}

int lc_archivelib_error(lc_error_t **err)
{
	const char *f = lc_archivelib_failure();
	if (f)
		return lc_error_set(err, LC_EXIT_RUNTIME, 0, "%s", f);
	return lc_error_set(err, LC_EXIT_RUNTIME, ENOMEM, "cannot create a libarchive object");
}

#define LC_ARCHIVELIB_NEW_DEF(name) \
	__typeof__(name()) lc_##name(void) \
	{ \
		if (lc_archivelib_load(NULL) < 0) { \
			errno = ELIBACC; \
			return NULL; \
		} \
		return lc_archivelib.name(); \
	}
LC_ARCHIVELIB_NEW(LC_ARCHIVELIB_NEW_DEF)
#undef LC_ARCHIVELIB_NEW_DEF

/* A non-NULL object means the library is loaded. */
int lc_archive_read_free(struct archive *a)
{
	return a ? lc_archivelib.archive_read_free(a) : ARCHIVE_OK;
}

int lc_archive_write_free(struct archive *a)
{
	return a ? lc_archivelib.archive_write_free(a) : ARCHIVE_OK;
}

void lc_archive_entry_free(struct archive_entry *e)
{
	if (e)
		lc_archivelib.archive_entry_free(e);
}

void lc_archive_entry_linkresolver_free(struct archive_entry_linkresolver *lr)
{
	if (lr)
		lc_archivelib.archive_entry_linkresolver_free(lr);
}
