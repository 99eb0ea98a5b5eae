/* sandbox.h — lcctl sandbox VERB … (sandbox.c). */
#ifndef LCCTL_SANDBOX_H
#define LCCTL_SANDBOX_H

/* argv holds what follows "sandbox"; returns the exit code. */
int lcctl_sandbox(int argc, char **argv);

#endif
