/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Every difference between the PostgreSQL majors the extension builds
 *		for (15, 16, 17 and 18), in one place.
 *
 * Before editing, know this: the rest of src/ is written for the newest
 * release.  Each block here gives the older releases that release's form
 * (a macro or an inline under the newest name), guarded by PG_VERSION_NUM;
 * a change in a new major goes here, never as an #if in a primitive.  On 15
 * every block compiles to what the code called before this file existed,
 * with one exception said at its block (MyProcNumber).  A file that uses
 * one of these names includes this header after postgres.h, itself or
 * through args.h or conn.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RP_COMPAT_H
#define RP_COMPAT_H

#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

/*
 * 16 moved the varlena macros (VARDATA_ANY, VARSIZE_ANY_EXHDR, ...) out of
 * postgres.h into varatt.h.
 */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * 16 allocates GUC values in a memory context of its own and frees them,
 * and the *extra a check hook hands over, with guc_free (pfree): a check
 * hook must allocate its *extra with guc_malloc, or the first SET that
 * replaces it frees a pointer pfree does not know ("pfree called with
 * invalid pointer").  Before 16 the same were malloc and free, and
 * guc_malloc was guc.c's own.
 */
#if PG_VERSION_NUM < 160000
static inline void *
guc_malloc(int elevel, size_t size)
{
	void	   *p = malloc(size > 0 ? size : 1);

	if (p == NULL)
		ereport(elevel,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return p;
}
#endif

/*
 * 17 numbers every process by its PGPROC (MyProcNumber: 0 up to
 * MaxBackends - 1 for backends and background workers, auxiliary
 * processes after them) and dropped MyBackendId and PGPROC.pgprocno.
 * Before 17 the same number is MyProc->pgprocno; GetPGProcByNumber takes
 * it on every major.  The exception to "as before" on 15 and 16: a
 * background worker with no database connection has a pgprocno but no
 * backend id, so code that used MyBackendId treated it as having none
 * (stats.c gave it the shared slot; now it has its own).
 */
#if PG_VERSION_NUM < 170000
typedef int ProcNumber;

#define INVALID_PROC_NUMBER		(-1)
#define MyProcNumber			(MyProc != NULL ? MyProc->pgprocno : INVALID_PROC_NUMBER)
#endif

/*
 * 17: CreateWaitEventSet takes the ResourceOwner that releases the set
 * (NULL: it lives until freed, in TopMemoryContext); before, the memory
 * context to allocate it in.  Only the NULL form is given to 15 and 16.
 */
#if PG_VERSION_NUM < 170000
#define CreateWaitEventSet(resowner, nevents) \
	(AssertMacro((resowner) == NULL), CreateWaitEventSet(TopMemoryContext, (nevents)))
#endif

/*
 * 17: custom wait events, shown by name in pg_stat_activity.wait_event
 * (wait_event_type Extension).  Before 17 every extension wait is the one
 * event "Extension".
 */
#if PG_VERSION_NUM < 170000
static inline uint32
WaitEventExtensionNew(const char *wait_event_name)
{
	return PG_WAIT_EXTENSION;
}
#endif

/*
 * 18: pg_noreturn goes before a declaration (C11's _Noreturn); before,
 * pg_attribute_noreturn() went after it.  GCC and Clang take the attribute
 * before a declaration as well.
 */
#if PG_VERSION_NUM < 180000
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * 18: the magic block may name the module and its version, which
 * pg_get_loaded_modules() shows; before, only PG_MODULE_MAGIC.
 */
#if PG_VERSION_NUM < 180000
#define PG_MODULE_MAGIC_EXT(...) PG_MODULE_MAGIC
#endif

#endif							/* RP_COMPAT_H */
