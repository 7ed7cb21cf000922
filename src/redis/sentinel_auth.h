/*-------------------------------------------------------------------------
 *
 * sentinel_auth.h
 *		AUTH for Redis Sentinels: settings and the command built from them.
 *
 * The argv returned points at the settings' storage (or a palloc'd copy of
 * the password file's line): use it at once, never keep it, never log it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_SENTINEL_AUTH_H
#define RP_SENTINEL_AUTH_H

extern void rp_sentinel_auth_init(void);

/* A sentinel credential changed since the last call. */
extern bool rp_sentinel_auth_take_changed(void);

/*
 * Fill argv with AUTH [user] password; returns argc, 0 when none is set, -1
 * when the password file cannot be read (*error says why; never throws).
 */
extern int	rp_sentinel_auth_argv(const char *argv[3], char **error);

#endif							/* RP_SENTINEL_AUTH_H */
