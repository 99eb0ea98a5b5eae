/* devbox.h — lcctl devbox …, disk … and ssh-config (devbox.c). */
#ifndef LCCTL_DEVBOX_H
#define LCCTL_DEVBOX_H

#include <jansson.h>

/* argv[0] is "devbox", "disk" or "ssh-config"; returns the exit code. */
int lcctl_devbox(int argc, char **argv);
/* The caller's public keys (each line of ~/.ssh/NAME.pub), for devboxes
 * (lcctl devbox create, and lcctl deploy of an app with devboxes). */
json_t *lcctl_caller_keys(void);

#endif
