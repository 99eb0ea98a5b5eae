/* proctitle.h — what /proc/PID/cmdline and comm show for processes
 * the sandbox can see (pid 1, exec's helper): a fixed title, never the
 * host's command line (proctitle.c).  Not part of the stable API. */
#ifndef LC_PROCTITLE_H
#define LC_PROCTITLE_H

/* This process shows title: written over its argument strings (and, when
 * they are too short for it, the environment strings after them, once
 * environ points at copies). */
void lc_proc_title(const char *title);
typedef struct lc_proc_args {
	unsigned long start, end; /* the caller's argument strings */
	char *copy;               /* what they held, while the title is there */
} lc_proc_args_t;
/* Around a clone whose child the sandbox sees from its first instant: the
 * caller shows title from begin to end, which puts its own strings back (a
 * lock is held in between; nothing in the caller may read its argv
 * meanwhile, and the child must not use pointers into it).  The child
 * calls lc_proc_title_child with the same saved. */
void lc_proc_title_begin(const char *title, lc_proc_args_t *saved);
void lc_proc_title_end(lc_proc_args_t *saved);
void lc_proc_title_child(const char *title, const lc_proc_args_t *saved);

#endif
