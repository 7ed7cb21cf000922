/*-------------------------------------------------------------------------
 *
 * ratelimit.h
 *		What the rate limiter offers other modules: its Init, and an observer
 *		hook that statistics (rp_stats) is set on, by _PG_init, to count the
 *		refusals of limits in shadow mode.
 *
 * The hook runs inside the SQL call, after Redis answered: it must be cheap
 * and must not talk to Redis.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_RATELIMIT_H
#define RP_RATELIMIT_H

/* Settings; called by _PG_init. */
extern void rp_ratelimit_init(void);

/*
 * algorithm: "sliding_log", "sliding_window" or "gcra"; allowed: the call
 * admitted; would_refuse: the limit refused (equal to !allowed in enforce
 * mode; in shadow mode allowed is always true); shadow: the call's mode.
 */
typedef void (*rp_ratelimit_observer_hook_type) (const char *algorithm,
												 bool allowed,
												 bool would_refuse,
												 bool shadow);

extern PGDLLIMPORT rp_ratelimit_observer_hook_type rp_ratelimit_observer_hook;

#endif							/* RP_RATELIMIT_H */
