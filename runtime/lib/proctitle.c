/* proctitle.c — the command line that processes of a sandbox show.
 *
 * Pid 1 and exec's helper are forks of lcrun (or of lcd), and any process
 * that can see them reads /proc/PID/cmdline: without care that is the
 * host's whole command line (the binary's path, bind sources, -e values,
 * --env-file paths).  The kernel shows the bytes between the mm's
 * arg_start and arg_end, and when the last of them is not a NUL it shows
 * the bytes from arg_start up to the first NUL (the setproctitle
 * convention, which may run on into the environment strings that follow).
 * So the title is written over the argument strings in place, followed by
 * NULs, with a last byte that is not one.  That needs no privilege
 * (PR_SET_MM_ARG_START would need CAP_SYS_RESOURCE, which a rootless
 * caller and many containers lack) and no re-exec, which would cost a
 * whole process start. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "proctitle.h"
#include "util.h"

extern char **environ;

static pthread_mutex_t title_lock = PTHREAD_MUTEX_INITIALIZER;

/* arg_start, arg_end, env_start, env_end: /proc/self/stat fields 48-51. */
static int read_bounds(unsigned long v[4])
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
	int field = 2, got = 0;
	while (p && got < 4) {
		p = strchr(p, ' ');
		if (!p)
			return -1;
		p++;
		if (++field >= 48)
			v[got++] = strtoul(p, NULL, 10);
	}
	return got == 4 && v[0] && v[1] > v[0] ? 0 : -1;
}

/* Write title over [start, end): the title, NULs, a last byte that is not
 * a NUL. */
static void write_title(const char *title, char *start, char *end)
{
	size_t len = (size_t)(end - start), n = strlen(title);
	if (len < 2)
		return;
	if (n > len - 2)
		n = len - 2;
	memset(start, 0, len);
	memcpy(start, title, n);
	end[-1] = ' ';
}

void lc_proc_title(const char *title)
{
	unsigned long b[4];
	prctl(PR_SET_NAME, title, 0, 0, 0);
	if (read_bounds(b) < 0)
		return;
	char *start = (char *)b[0], *end = (char *)b[1];
	/* Too little room (a bare "lcd"): take the environment strings that
	 * follow too, once this process's environ points at copies. */
	if ((size_t)(end - start) < strlen(title) + 2 && b[2] == b[1] && b[3] > b[2]) {
		for (size_t i = 0; environ && environ[i]; i++)
			if ((unsigned long)environ[i] >= b[2] && (unsigned long)environ[i] < b[3])
				environ[i] = strdup(environ[i]);
		end = (char *)b[3];
	}
	write_title(title, start, end);
}

void lc_proc_title_begin(const char *title, lc_proc_args_t *saved)
{
	unsigned long b[4];
	pthread_mutex_lock(&title_lock);
	memset(saved, 0, sizeof(*saved));
	if (read_bounds(b) < 0)
		return;
	size_t len = b[1] - b[0];
	saved->copy = malloc(len);
	if (!saved->copy)
		return;
	memcpy(saved->copy, (void *)b[0], len);
	saved->start = b[0];
	saved->end = b[1];
	write_title(title, (char *)b[0], (char *)b[1]);
}

void lc_proc_title_end(lc_proc_args_t *saved)
{
	if (saved->copy) {
		memcpy((void *)saved->start, saved->copy, saved->end - saved->start);
		free(saved->copy);
		saved->copy = NULL;
	}
	pthread_mutex_unlock(&title_lock);
}

void lc_proc_title_child(const char *title, const lc_proc_args_t *saved)
{
	if (saved->copy && saved->end - saved->start >= strlen(title) + 2) {
		/* the caller wrote the title before the clone: nothing of its
		 * command line is in this copy of the memory */
		prctl(PR_SET_NAME, title, 0, 0, 0);
		return;
	}
	lc_proc_title(title);
}
