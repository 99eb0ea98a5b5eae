/* state.h — a sandbox's state.json and its name (state.c).  Not part of the
 * stable API. */
#ifndef LC_STATE_H
#define LC_STATE_H

#include <stdbool.h>
#include <jansson.h>

#include "lcrun.h"

int lc_state_write(const char *id, json_t *state, lc_error_t **err);
json_t *lc_state_read(const char *id, lc_error_t **err);
int lc_state_remove(const char *id);
/* Remove names/NAME if it still names id. */
void lc_name_unlink(const char *id, const char *name);
bool lc_id_valid(const char *id);
/* Resolve an id or a name to an id. */
int lc_state_resolve(const char *id_or_name, char **id, lc_error_t **err);
/* Resolve an id or a name (*id) and read its state. */
json_t *lc_state_open(const char *id_or_name, char **id, lc_error_t **err);
/* Record name for sandbox id ($run/names/NAME -> id): 1 made, 0 it was
 * id's already; LC_EXIT_BUSY when another live sandbox has it. */
int lc_name_link(const char *id, const char *name, lc_error_t **err);

#endif
