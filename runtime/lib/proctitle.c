/* proctitle.c — the command line that processes of a sandbox show.
 *
 * Pid 1 and exec's helper are forks of lcrun (or of lcd), and any process
 * that can see them reads /proc/PID/cmdline: without care that is the
 * host's whole command line (the binary's path, bind sources, -e values,
 * --env-file paths).  The kernel shows the bytes between the mm's
 * arg_start and arg_end.  As host root, PR_SET_MM points those at a fixed
 * title in a page of its own; without CAP_SYS_RESOURCE (a rootless
 * sandbox) the title is written over the argument strings in place.
 * Either way the original strings are wiped from the process's own copy
 * of the memory.  No re-exec: that would cost a whole process start.
 *
 * The title must live in anonymous memory: /proc/PID/cmdline reads it with
 * FOLL_ANON and shows nothing for a file-backed page (.rodata, .data). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sandbox_priv.h"
#include "util.h"

static pthread_mutex_t title_lock = PTHREAD_MUTEX_INITIALIZER;

/* arg_start, arg_end from /proc/self/stat (fields 48 and 49). */
static int read_args(unsigned long *start, unsigned long *end)
{
	char buf[2048];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = lc_read_all(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* the comm field (2) may hold anything */
	if (!p)
		return -1;
	p++;
	unsigned long v[2];
	for (int field = 3, got = 0; got < 2; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -1;
		char *e;
		unsigned long x = strtoul(p, &e, 10);
		if (field >= 48)
			v[got++] = x;
		p = strchr(p, ' ');
		if (!p && got < 2)
			return -1;
	}
	*start = v[0];
	*end = v[1];
	return *start && *end >= *start ? 0 : -1;
}

/* Point arg_start/arg_end at [start, end), keeping start <= end after each
 * of the two calls as the kernel demands.  Needs CAP_SYS_RESOURCE in the
 * host's user namespace. */
static int set_args(unsigned long start, unsigned long end, unsigned long cur_start, unsigned long cur_end)
{
	if (start <= cur_end) {
		if (prctl(PR_SET_MM, PR_SET_MM_ARG_START, start, 0, 0) < 0)
			return -1;
		if (prctl(PR_SET_MM, PR_SET_MM_ARG_END, end, 0, 0) < 0) {
			prctl(PR_SET_MM, PR_SET_MM_ARG_START, cur_start, 0, 0);
			return -1;
		}
		return 0;
	}
	if (prctl(PR_SET_MM, PR_SET_MM_ARG_END, end, 0, 0) < 0)
		return -1;
	if (prctl(PR_SET_MM, PR_SET_MM_ARG_START, start, 0, 0) < 0) {
		prctl(PR_SET_MM, PR_SET_MM_ARG_END, cur_end, 0, 0);
		return -1;
	}
	return 0;
}

/* A page of its own holding title and its NUL (never freed: the kernel
 * reads it for as long as the process lives). */
static char *title_page(const char *title)
{
	char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return NULL;
	snprintf(page, 4096, "%s", title);
	return page;
}

static int point_at(char *page, unsigned long cur_start, unsigned long cur_end)
{
	unsigned long s = (unsigned long)page, e = s + strlen(page) + 1;
	return set_args(s, e, cur_start, cur_end);
}

/* The title over the strings themselves: NULs after it, and a last byte
 * that is not NUL, which tells the kernel to show the strings up to the
 * first NUL only (the setproctitle convention). */
static void write_in_place(const char *title, unsigned long start, unsigned long end)
{
	char *p = (char *)start;
	size_t len = end - start, n = strlen(title);
	if (len == 0)
		return;
	memset(p, 0, len);
	if (n > len - 1)
		n = len - 1;
	memcpy(p, title, n);
	if (len > n + 1)
		p[len - 1] = ' ';
}

void lc_proc_title(const char *title)
{
	unsigned long start, end;
	prctl(PR_SET_NAME, title, 0, 0, 0);
	if (read_args(&start, &end) < 0)
		return;
	char *page = title_page(title);
	if (page && point_at(page, start, end) == 0) {
		memset((void *)start, 0, end - start);
		return;
	}
	if (page)
		munmap(page, 4096);
	write_in_place(title, start, end);
}

/* The callers' title page, made once (lcd clones helpers all day long). */
static char *begin_page;

void lc_proc_title_begin(const char *title, lc_proc_args_t *saved)
{
	pthread_mutex_lock(&title_lock);
	memset(saved, 0, sizeof(*saved));
	if (!begin_page || strcmp(begin_page, title) != 0) {
		if (begin_page)
			munmap(begin_page, 4096);
		begin_page = title_page(title);
	}
	if (begin_page && read_args(&saved->start, &saved->end) == 0 &&
	    point_at(begin_page, saved->start, saved->end) == 0)
		saved->moved = true;
}

void lc_proc_title_end(const lc_proc_args_t *saved)
{
	if (saved->moved) {
		unsigned long s, e;
		if (read_args(&s, &e) == 0)
			set_args(saved->start, saved->end, s, e);
	}
	pthread_mutex_unlock(&title_lock);
}

void lc_proc_title_child(const char *title, const lc_proc_args_t *saved)
{
	if (!saved->moved) {
		lc_proc_title(title);
		return;
	}
	prctl(PR_SET_NAME, title, 0, 0, 0);
	memset((void *)saved->start, 0, saved->end - saved->start);
}
