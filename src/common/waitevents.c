/*-------------------------------------------------------------------------
 *
 * waitevents.c
 *		The wait events of the extension: one name per kind of wait, on
 *		PostgreSQL 17 and later.
 *
 * Before editing, know this: WaitEventExtensionNew takes a shared lock and
 * can fail (too many custom wait events in the cluster), so every name is
 * registered at once, at the first wait of a process or, preloaded, in the
 * postmaster: a wait inside a cleanup path then finds the numbers known.
 * Before 17 (compat.h) every name is PG_WAIT_EXTENSION.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "compat.h"
#include "waitevents.h"

static const char *const rp_wait_event_names[RP_NUM_WAIT_EVENTS] = {
#define RP_WAIT_EVENT_NAME(id, name) name,
	RP_WAIT_EVENTS(RP_WAIT_EVENT_NAME)
#undef RP_WAIT_EVENT_NAME
};

/* 0 (no wait event's number) until registered in this process. */
static uint32 rp_wait_event_info[RP_NUM_WAIT_EVENTS];

static void
rp_wait_events_register(void)
{
	for (int i = 0; i < RP_NUM_WAIT_EVENTS; i++)
		rp_wait_event_info[i] = WaitEventExtensionNew(rp_wait_event_names[i]);
}

uint32
rp_wait_event(RpWaitEvent e)
{
	if (rp_wait_event_info[e] == 0)
		rp_wait_events_register();
	return rp_wait_event_info[e];
}

/*
 * A restart after a crash sets shared memory up afresh: the names are
 * registered again, not taken from before.
 */
void
rp_wait_events_startup(void)
{
	rp_wait_events_register();
}
