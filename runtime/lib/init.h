/* init.h — pid 1 and the command's side of its fork (init.c).  Not part
 * of the stable API. */
#ifndef LC_INIT_H
#define LC_INIT_H

#include "lcrun.h"

struct lc_seccomp_prog;
/* pid 1: fork the command, reap, forward signals, exit with its status.
 * envp is the command's complete environment. */
void lc_init_main(const lc_spec_t *spec, const struct lc_seccomp_prog *prog, char **envp, int sync_fd)
	__attribute__((noreturn));
/* The command's side, after fork: credentials, caps, seccomp, exec. */
void lc_exec_command(const lc_spec_t *spec, char *const *argv, const struct lc_seccomp_prog *prog,
		     char **envp, const char *workdir) __attribute__((noreturn));

#endif
