# redis_primitives -- PGXS build.
#
# The install script is assembled from src/sql/*.sql (one file per primitive,
# in file-name order) and the Lua scripts in src/lua/*.lua are embedded into
# the library through the generated header src/rp_scripts.h, so adding a
# primitive means adding files, not editing lists here.

EXTENSION    = redis_primitives
MODULE_big   = redis_primitives
EXT_VERSION  = 1.1

SRCS         = $(sort $(wildcard src/*.c))
OBJS         = $(SRCS:.c=.o)
LUA          = $(sort $(wildcard src/lua/*.lua))
SQL_PARTS    = $(sort $(wildcard src/sql/*.sql))

# The current version's install script is built from the parts; earlier
# versions' install scripts are kept as shipped (src/sql/history/), and
# src/sql/upgrade/ holds the A--B scripts ALTER EXTENSION ... UPDATE runs.
DATA_built   = $(EXTENSION)--$(EXT_VERSION).sql
DATA         = $(wildcard src/sql/history/*.sql) $(wildcard src/sql/upgrade/*.sql)
EXTRA_CLEAN  = src/rp_scripts.h

# pg_regress: every sql/*.sql, against a server the test runner configured.
REGRESS      = $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)

ISOLATION    = $(sort $(basename $(notdir $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=$(EXTENSION)

PG_CPPFLAGS  = -I$(srcdir)/src
# Warnings for everyone; errors only where the project itself builds (make
# test, CI: scripts/lib.sh passes RP_WERROR=-Werror), so a user's newer
# compiler with a new warning does not fail the build.
PG_CFLAGS    = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers $(RP_WERROR)
SHLIB_LINK   = -lhiredis

PG_CONFIG   ?= pg_config
PGXS        := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(EXTENSION)--$(EXT_VERSION).sql: $(SQL_PARTS)
	cat $^ > $@

src/rp_scripts.h: $(LUA) scripts/embed-lua.sh
	sh scripts/embed-lua.sh $(LUA) > $@

# The bitcode (.bc, for JIT inlining) is compiled from the same sources.
$(OBJS) $(OBJS:.o=.bc): src/rp_scripts.h $(wildcard src/*.h)

# Project targets.  All of them start throwaway servers and clean up.
.PHONY: test demo bench soak-memory
test:
	bash scripts/test.sh
soak-memory:
	bash scripts/soak-memory.sh
demo:
	bash scripts/demo.sh
bench:
	bash bench/run.sh
