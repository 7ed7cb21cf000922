# redis_primitives -- PGXS build.
#
# The install script is assembled from src/sql/*.sql (one file per primitive,
# in file-name order) and the Lua scripts in src/lua/*.lua are embedded into
# the library through the generated header src/rp_scripts.h, so adding a
# primitive means adding files, not editing lists here.  Text shared by
# several of them is written once and joined at build time by
# scripts/expand-includes.sh (`-- #include NAME [BLOCK]`): src/lua/*_common.lua
# are such parts, not scripts of their own, and the upgrade scripts take the
# definitions they share with the install script from src/sql/*.sql.

EXTENSION    = redis_primitives
MODULE_big   = redis_primitives
EXT_VERSION  = 1.2

# The layers (src/README.md): each folder one floor, the module on top.
SRC_DIRS     = src/common src/redis src/lease src/worker src/prim
SRCS         = src/module.c $(sort $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c)))
OBJS         = $(SRCS:.c=.o)
LUA_COMMON   = $(wildcard src/lua/*_common.lua)
LUA          = $(sort $(filter-out $(LUA_COMMON),$(wildcard src/lua/*.lua)))
SQL_PARTS    = $(sort $(wildcard src/sql/*.sql))
UPGRADES     = $(sort $(notdir $(wildcard src/sql/upgrade/*.sql)))

# The current version's install script is built from the parts; earlier
# versions' install scripts are kept as shipped (src/sql/history/), and the
# A--B scripts ALTER EXTENSION ... UPDATE runs are built from their sources
# in src/sql/upgrade/, which include what they share with src/sql/*.sql.
DATA_built   = $(EXTENSION)--$(EXT_VERSION).sql $(UPGRADES)
DATA         = $(wildcard src/sql/history/*.sql)
EXTRA_CLEAN  = src/rp_scripts.h src/pg_build

# Every suite lives under test/ (docs/testing.md).  pg_regress: every
# test/sql/*.sql, against a server the test runner configured.
REGRESS      = $(sort $(basename $(notdir $(wildcard test/sql/*.sql))))
REGRESS_OPTS = --inputdir=test --load-extension=$(EXTENSION)

ISOLATION    = $(sort $(basename $(notdir $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=$(EXTENSION)

# Tests that need several servers (a standby, a second node, Sentinel, TLS):
# test/t/*.pl on PostgreSQL::Test::Cluster, with our Redis helper in
# test/t/lib.  Each test starts its own PostgreSQL nodes and Redis;
# test/t/README.md says more.
TAP_TESTS    = 1
PROVE_TESTS  = test/t/*.pl

# RP_VERSION: the library's version, as PostgreSQL 18 shows it
# (pg_get_loaded_modules()).
PG_CPPFLAGS  = -I$(srcdir)/src $(foreach d,$(SRC_DIRS),-I$(srcdir)/$(d)) -DRP_VERSION='"$(EXT_VERSION)"'
# Warnings for everyone; errors only where the project itself builds (make
# test, CI: scripts/lib.sh passes RP_WERROR=-Werror), so a user's newer
# compiler with a new warning does not fail the build.
PG_CFLAGS    = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers $(RP_WERROR)
SHLIB_LINK   = -lhiredis -lssl -lcrypto

PG_CONFIG   ?= pg_config
PGXS        := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

PG_PROVE_FLAGS += -I $(srcdir)/test/t/lib

$(EXTENSION)--$(EXT_VERSION).sql: $(SQL_PARTS)
	cat $^ > $@

# Written to a temporary file first: a failed include must not leave a
# half-written target that the next make takes as up to date.
$(UPGRADES): %.sql: src/sql/upgrade/%.sql $(SQL_PARTS) scripts/expand-includes.sh
	sh scripts/expand-includes.sh src/sql $< > $@.tmp && mv $@.tmp $@

src/rp_scripts.h: $(LUA) $(LUA_COMMON) scripts/embed-lua.sh scripts/expand-includes.sh
	sh scripts/embed-lua.sh $(LUA) > $@.tmp && mv $@.tmp $@

# The objects are compiled against one PostgreSQL's headers: src/pg_build
# names that PostgreSQL (pg_config --version and --includedir-server) and
# is rewritten only when PG_CONFIG names another, so building for another
# major compiles everything again instead of linking the objects of the
# last one into its library (test/scenarios/harness_build.sh).
RP_PG_BUILD := $(shell $(PG_CONFIG) --version) $(shell $(PG_CONFIG) --includedir-server)
$(shell [ "$$(cat src/pg_build 2>/dev/null)" = '$(RP_PG_BUILD)' ] || echo '$(RP_PG_BUILD)' > src/pg_build)

# The bitcode (.bc, for JIT inlining) is compiled from the same sources.
$(OBJS) $(OBJS:.o=.bc): src/rp_scripts.h src/pg_build $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.h))

# Project targets.  All of them start throwaway servers and clean up.
.PHONY: test test-timing demo bench deb bench-quick bench-track soak soak-memory bench-fence bench-tls bench-apps bench-semaphore bench-profile test-semaphore-long
# Every suite, against the PostgreSQL PG_CONFIG names (PG_CONFIG=... picks
# another major, docs/testing.md) and the redis-server on PATH.
test:
	bash scripts/test.sh
# The timing suite alone (test/timing/: bounds on elapsed time only), which
# fails on any failure: for a machine with nothing else running (CI).
# make test runs it last and reports it apart, its failures not failing
# the run (docs/testing.md).
test-timing:
	RP_SUITES=timing bash scripts/test.sh
soak-memory:
	bash scripts/soak-memory.sh
# A randomized run: workers, a nemesis injecting faults, a history and an
# independent checker (test/soak/, docs/testing.md).  SOAK_SECONDS (default 90),
# SOAK_SEED (default random), SOAK_OUT (where the history is kept).
soak:
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_SEED=$(SOAK_SEED) bash test/soak/run.sh
SOAK_SECONDS ?= 90
SOAK_SEED ?=
# The semaphore scenario with its races repeated 3x as often (15 rounds, 40
# waiting holders); make test runs the short form, which checks the same.
test-semaphore-long:
	RP_SEMAPHORE_LONG=1 RP_SUITES=scenarios RP_ONLY=semaphore.sh bash scripts/test.sh
# Build the Debian package, install it into the system PostgreSQL 15 and run
# installcheck against it (root, Debian 12; see docs/lifecycle.md).
deb:
	bash scripts/deb.sh
demo:
	bash scripts/demo.sh
# The benchmark (bench/README.md): bench/run.sh measures the workloads in
# bench/workloads and writes a CSV; bench/report.py writes the report from
# it.  The filtered targets are the same runner on a subset.
bench:
	bash bench/run.sh --report
bench-quick:
	bash bench/run.sh --quick --report
bench-semaphore:
	bash bench/run.sh --filter '^(select1|lock_pair|sem_.*)$$' --out bench/results/semaphore.csv --report

# Mutation testing (test/mutation/run.sh, docs/testing.md): every mutant
# breaks one rule of the extension in a scratch copy and the suites it names
# must fail.  The full list takes long; the sample (after a --check of every
# mutant) is a few fast ones for CI.
.PHONY: mutation mutation-sample
mutation:
	bash test/mutation/run.sh
mutation-sample:
	bash test/mutation/run.sh --check
	bash test/mutation/run.sh --sample

# What rp_stats costs: track on vs off, repetitions round robin.
bench-track:
	bash bench/run.sh --filter '^track' --reps 5 --out bench/results/track.csv --report
bench-fence:
	bash bench/run.sh --filter '^fence_' --reps 3 --out bench/results/fence.csv --report
bench-tls:
	bash bench/run.sh --filter '^tls_' --reps 3 --out bench/results/tls.csv --report
# CPU accounting plus perf's shares of the acquire/release backend's CPU.
bench-profile:
	RP_BENCH_PERF=1 bash bench/run.sh --filter '^profile$$' --out bench/results/profile.csv --report
# node-redlock and rate-limiter-flexible against this extension (npm; bench/apps/).
bench-apps:
	bash bench/apps/run.sh

# Where TLS's cost goes, in instructions per call (callgrind; on demand, several
# minutes): bench/tls_profile.sh writes bench/results/tls_profile.md.
.PHONY: bench-tls-profile
bench-tls-profile:
	bash bench/tls_profile.sh
