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

#include "storage/fd.h"
#include "utils/guc.h"

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

/* As redis_primitives.password: never stored where plain users can read it. */
static bool
rp_sentinel_check_password(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (source == PGC_S_TEST || source == PGC_S_DATABASE ||
		source == PGC_S_USER || source == PGC_S_DATABASE_USER)
	{
		GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
		GUC_check_errmsg("redis_primitives.sentinel_password cannot be stored in a role, database or function setting");
		GUC_check_errdetail("Those settings are readable by every user in pg_db_role_setting and pg_proc.");
		GUC_check_errhint("Set it in postgresql.conf or with ALTER SYSTEM, or use redis_primitives.sentinel_password_file.");
		return false;
	}
	return true;
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
							   rp_sentinel_check_password, rp_sentinel_auth_mark_changed, NULL);
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

static char *
rp_sentinel_read_password_file(void)
{
	FILE	   *f;
	char		buf[1024];
	size_t		len;

	f = AllocateFile(rp_sentinel_password_file, "r");
	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open redis_primitives.sentinel_password_file \"%s\": %m",
						rp_sentinel_password_file)));
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	FreeFile(f);
	len = strlen(buf);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	return pstrdup(buf);
}

int
rp_sentinel_auth_argv(const char *argv[3])
{
	const char *password = rp_sentinel_password;

	if ((password == NULL || password[0] == '\0') &&
		rp_sentinel_password_file && rp_sentinel_password_file[0])
		password = rp_sentinel_read_password_file();
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
