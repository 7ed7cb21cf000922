/*-------------------------------------------------------------------------
 *
 * secret.c
 *		What the secret settings (redis_primitives.password and
 *		.sentinel_password) share: refusing a value stored in a
 *		world-readable catalog, masking it from non-superusers who may read
 *		settings, and reading it from a password file.
 *
 * Before editing, know this: the reader is called from the Redis core,
 * which may run in a COMMIT callback or at backend exit, so it reports a
 * file it cannot open as a status and never ereports.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/fd.h"

#include "secret.h"

/*
 * ALTER ROLE/DATABASE ... SET and CREATE FUNCTION ... SET write to
 * world-readable catalogs (they are validated with source PGC_S_TEST, and
 * applied at login with the DATABASE/USER sources).  postgresql.conf,
 * ALTER SYSTEM, a session SET by a superuser, or the password file are the
 * places for a secret.
 */
bool
rp_secret_check(const char *name, const char *file_setting, char **newval,
				GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (source == PGC_S_TEST || source == PGC_S_DATABASE ||
		source == PGC_S_USER || source == PGC_S_DATABASE_USER)
	{
		GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
		GUC_check_errmsg("%s cannot be stored in a role, database or function setting",
						 name);
		GUC_check_errdetail("Those settings are readable by every user in pg_db_role_setting and pg_proc.");
		GUC_check_errhint("Set it in postgresql.conf or with ALTER SYSTEM, or use %s.",
						  file_setting);
		return false;
	}
	return true;
}

/*
 * SHOW, current_setting() and pg_settings print a secret through its show
 * hook.  GUC_SUPERUSER_ONLY keeps plain users out, but lets members of
 * pg_read_all_settings (and so pg_monitor, which monitoring agents run as)
 * read it: they see a mask.  Superusers see the value: they can read
 * postgresql.auto.conf anyway (docs/security.md).
 */
const char *
rp_secret_show(const char *value)
{
	if (value == NULL || value[0] == '\0')
		return "";
	if (IsTransactionState() && superuser())
		return value;
	return "********";
}

char *
rp_secret_read_file(const char *setting, const char *path, int *sqlstate,
					char **message)
{
	FILE	   *f;
	char		buf[1024];
	size_t		len;
	char	   *result;

	f = AllocateFile(path, "r");
	if (f == NULL)
	{
		/* The SQLSTATE errcode_for_file_access() would give. */
		*sqlstate = (errno == ENOENT || errno == ENOTDIR) ? ERRCODE_UNDEFINED_FILE
			: (errno == EACCES || errno == EPERM) ? ERRCODE_INSUFFICIENT_PRIVILEGE
			: ERRCODE_IO_ERROR;
		*message = psprintf("could not open %s \"%s\": %m", setting, path);
		return NULL;
	}
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	FreeFile(f);
	len = strlen(buf);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	result = pstrdup(buf);
	explicit_bzero(buf, sizeof(buf));
	return result;
}
