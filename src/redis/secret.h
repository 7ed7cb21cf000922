/*-------------------------------------------------------------------------
 *
 * secret.h
 *		Settings that hold a secret (redis_primitives.password and
 *		.sentinel_password) and the files a secret may be read from.
 *
 * Before editing, know this: every secret setting gets all three of these,
 * or a role, a monitoring agent or an error message shows it in clear.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_SECRET_H
#define RP_SECRET_H

#include "utils/guc.h"

/*
 * The body of a secret setting's check hook: refuses (42501) a value stored
 * where plain users can read it.  name is the setting, file_setting the
 * *_file setting to suggest instead.
 */
extern bool rp_secret_check(const char *name, const char *file_setting,
							char **newval, GucSource source);

/* The body of its show hook: the value for superusers, a mask for others. */
extern const char *rp_secret_show(const char *value);

/*
 * The first line of a password file, palloc'd; NULL when it cannot be
 * opened, with *sqlstate and *message (palloc'd, naming setting and path,
 * never the content) filled in.  Never throws for what the file system does.
 */
extern char *rp_secret_read_file(const char *setting, const char *path,
								 int *sqlstate, char **message);

#endif							/* RP_SECRET_H */
