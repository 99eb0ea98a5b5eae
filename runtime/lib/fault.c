/* fault.c — the LCRUN_FAULT hook of test builds (fault.h). */
#include "fault.h"

#ifdef LC_FAULT_INJECTION
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
	int ready;        /* 0: environment not read yet */
	char step[96];    /* LCRUN_FAULT without ":N" */
	long nth;         /* kill at this passage */
	long passed;      /* passages so far (this process and its forks) */
	const char *log;  /* LCRUN_FAULT_LOG */
} f;

static void fault_init(void)
{
	const char *v = getenv("LCRUN_FAULT");
	f.log = getenv("LCRUN_FAULT_LOG");
	f.nth = 1;
	if (v && *v) {
		snprintf(f.step, sizeof(f.step), "%s", v);
		char *colon = strchr(f.step, ':');
		if (colon) {
			*colon = '\0';
			f.nth = strtol(colon + 1, NULL, 10);
			if (f.nth < 1)
				f.nth = 1;
		}
	}
	__atomic_store_n(&f.ready, 1, __ATOMIC_RELEASE);
}

static void log_line(const char *step, const char *what)
{
	if (!f.log || !*f.log)
		return;
	int fd = open(f.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	char line[160];
	int n = snprintf(line, sizeof(line), "%s%s\n", step, what);
	if (n > 0 && write(fd, line, (size_t)n) < 0) {
		/* best effort: the log is for the test's own listing */
	}
	close(fd);
}

void lc_fault_at(const char *step)
{
	/* A race of two threads here reads the same environment twice. */
	if (!__atomic_load_n(&f.ready, __ATOMIC_ACQUIRE))
		fault_init();
	log_line(step, "");
	if (!f.step[0] || strcmp(step, f.step) || __atomic_add_fetch(&f.passed, 1, __ATOMIC_SEQ_CST) != f.nth)
		return;
	/* on stderr, and in the log: a helper's stderr may go nowhere (a
	 * sandbox's monitor) */
	log_line(step, " killed");
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "lcrun: fault injected at %s\n", step);
	if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0) {
		/* dying anyway */
	}
	kill(getpid(), SIGKILL);
	_exit(137); /* not reached */
}
#endif
