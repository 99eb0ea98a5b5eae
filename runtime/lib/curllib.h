/* curllib.h — libcurl, loaded when lcrun first talks to a registry
 * (`lcrun image push|pull`, registry.c) rather than when lcrun starts.
 *
 * Linked in, libcurl made every lcrun process map some 35 libraries (TLS,
 * Kerberos, LDAP, IDN, compression) at start, for a command few runs use
 * (tests/unit/needed.sh holds lcrun to none of the compression
 * libraries).  registry.c includes this header instead of curl.h: each
 * libcurl function it calls is then a pointer in lc_curllib, filled from
 * the shared library (LC_LIBCURL) by lc_curllib_load(), which the entry
 * points (lc_image_push, lc_image_pull) call before anything else of
 * libcurl; the types come from curl.h, so a changed signature fails to
 * build as before.  libcurl's compile-time checks of curl_easy_setopt's
 * arguments are macros over the function's name, so they are off here
 * (CURL_DISABLE_TYPECHECK).  archivelib.h does the same for
 * libarchive.  A program that links libcurl (lcd) gets the copy it has:
 * dlopen() of a loaded soname returns it. */
#pragma once

#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include "error.h"

/* The soname of the ABI curl.h describes (Debian's libcurl4). */
#define LC_LIBCURL "libcurl.so.4"

#define LC_CURLLIB_CALLS(X) \
	X(curl_easy_cleanup) \
	X(curl_easy_getinfo) \
	X(curl_easy_init) \
	X(curl_easy_perform) \
	X(curl_easy_setopt) \
	X(curl_easy_strerror) \
	X(curl_slist_append) \
	X(curl_slist_free_all)

#define LC_CURLLIB_FIELD(name) __typeof__(name) *name;
struct lc_curllib {
	LC_CURLLIB_CALLS(LC_CURLLIB_FIELD)
};
#undef LC_CURLLIB_FIELD
extern struct lc_curllib lc_curllib;

/* Loads the library once per process (thread-safe); 0, or -1 with an
 * error naming LC_LIBCURL and why it could not be loaded. */
int lc_curllib_load(lc_error_t **err);

#ifndef LC_CURLLIB_IMPL
/* curl.h makes these two macros that call themselves (three arguments) */
#undef curl_easy_getinfo
#undef curl_easy_setopt
#define curl_easy_cleanup (lc_curllib.curl_easy_cleanup)
#define curl_easy_getinfo (lc_curllib.curl_easy_getinfo)
#define curl_easy_init (lc_curllib.curl_easy_init)
#define curl_easy_perform (lc_curllib.curl_easy_perform)
#define curl_easy_setopt (lc_curllib.curl_easy_setopt)
#define curl_easy_strerror (lc_curllib.curl_easy_strerror)
#define curl_slist_append (lc_curllib.curl_slist_append)
#define curl_slist_free_all (lc_curllib.curl_slist_free_all)
#endif
