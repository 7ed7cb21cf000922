/*-------------------------------------------------------------------------
 *
 * sentinel_auth.c
 *		The credentials sent to Redis Sentinels that require AUTH: the
 *		settings redis_primitives.sentinel_username, .sentinel_password and
 *		.sentinel_password_file, and the AUTH command built from them.
 *
 * Before editing, know this: the password is a secret like
 * redis_primitives.password: superuser-only, not in SHOW ALL, refused in
 * role, database and function settings (world-readable catalogs), and never
 * put into a message.  A sentinel's credentials are often not the master's
 * (sentinels have their own requirepass/ACL), hence settings of their own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "secret.h"
#include "sentinel_auth.h"

static char *rp_sentinel_username = NULL;
static char *rp_sentinel_password = NULL;
static char *rp_sentinel_password_file = NULL;
static bool rp_sentinel_auth_changed = false;

static void
rp_sentinel_auth_mark_changed(const char *newval, void *extra)
{
	rp_sentinel_auth_changed = true;
}

/* A secret, as redis_primitives.password: see secret.c. */
static bool
rp_sentinel_check_password(char **newval, void **extra, GucSource source)
{
	return rp_secret_check("redis_primitives.sentinel_password",
						   "redis_primitives.sentinel_password_file", newval,
						   source);
}

static const char *
rp_sentinel_show_password(void)
{
	return rp_secret_show(rp_sentinel_password);
}

void
rp_sentinel_auth_init(void)
{
	DefineCustomStringVariable("redis_primitives.sentinel_username",
							   "ACL user name sent with AUTH to the Redis Sentinels; empty means the default user.",
							   NULL, &rp_sentinel_username, "", PGC_SUSET, 0,
							   NULL, rp_sentinel_auth_mark_changed, NULL);
	DefineCustomStringVariable("redis_primitives.sentinel_password",
							   "Password sent with AUTH to the Redis Sentinels; visible only to superusers.",
							   "Cannot be stored with ALTER ROLE, ALTER DATABASE or CREATE FUNCTION ... SET.",
							   &rp_sentinel_password, "", PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   rp_sentinel_check_password, rp_sentinel_auth_mark_changed,
							   rp_sentinel_show_password);
	DefineCustomStringVariable("redis_primitives.sentinel_password_file",
							   "File whose first line is the Sentinels' password, read at connect time when redis_primitives.sentinel_password is empty.",
							   "The file must be readable by the database server's operating system user only.",
							   &rp_sentinel_password_file, "", PGC_SUSET, GUC_SUPERUSER_ONLY,
							   NULL, rp_sentinel_auth_mark_changed, NULL);
}

bool
rp_sentinel_auth_take_changed(void)
{
	bool		changed = rp_sentinel_auth_changed;

	rp_sentinel_auth_changed = false;
	return changed;
}

int
rp_sentinel_auth_argv(const char *argv[3], char **error)
{
	const char *password = rp_sentinel_password;

	if ((password == NULL || password[0] == '\0') &&
		rp_sentinel_password_file && rp_sentinel_password_file[0])
	{
		int			sqlstate;

		password = rp_secret_read_file("redis_primitives.sentinel_password_file",
									   rp_sentinel_password_file, &sqlstate,
									   error);
		if (password == NULL)
			return -1;
	}
	if (password == NULL || password[0] == '\0')
		return 0;
	argv[0] = "AUTH";
	if (rp_sentinel_username && rp_sentinel_username[0])
	{
		argv[1] = rp_sentinel_username;
		argv[2] = password;
		return 3;
	}
	argv[1] = password;
	return 2;
}
