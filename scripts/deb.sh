#!/usr/bin/env bash
# scripts/deb.sh -- `make deb`: build the Debian package, install it into the
# system PostgreSQL 15 with apt-get, and run `make installcheck` (pg_regress
# and isolation suites) against that installation, with a throwaway
# PostgreSQL cluster and Redis.  As root, on Debian 12; .ci/run calls it.
#
# The one thing to know: this replaces redis_primitives in the SYSTEM
# PostgreSQL (/usr/lib/postgresql/15), which is what a user's `apt-get
# install` does; `make test` never touches it.  The package is built in a
# copy of the tree, so the working tree gets no build products.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || { rp_log "make deb installs a package: run it as root."; exit 1; }
DEB_PACKAGES="dpkg-dev debhelper postgresql-server-dev-all rsync"
apt-get update -qq >/dev/null
rp_install_packages $DEB_PACKAGES

build=$(mktemp -d /tmp/redis_primitives-deb.XXXXXX)
trap 'rm -rf "$build"' EXIT
src=$build/redis-primitives
rsync -a --exclude .git --exclude '*.o' --exclude '*.so' --exclude '*.bc' \
	--exclude tmp_check --exclude results --exclude output_iso "$RP_ROOT/" "$src/"
( cd "$src" && make -s clean PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config >/dev/null 2>&1 || true
  dpkg-buildpackage -us -uc -b ) >"$build/build.log" 2>&1 || {
	tail -40 "$build/build.log" >&2; rp_log "dpkg-buildpackage failed."; exit 1; }
deb=$(ls "$build"/postgresql-15-redis-primitives_*.deb)
rp_log "Built $(basename "$deb")"
dpkg-deb --contents "$deb" | awk '{print "  " $6}' | grep -E '\.(so|sql|control)$' >&2

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "$deb" >/dev/null
lib=/usr/lib/postgresql/15/lib/redis_primitives.so
dpkg -S "$lib" | grep -q '^postgresql-15-redis-primitives:' || {
	rp_log "$lib does not belong to the package"; exit 1; }
rp_log "Installed: $(dpkg-query -W -f='${Package} ${Version}' postgresql-15-redis-primitives)"
rm -rf "$build"
trap - EXIT

# A throwaway cluster of the system PostgreSQL, which now has the package's
# library, and a Redis for it; then the suites, as a user would run them.
export PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
PGBIN=$("$PG_CONFIG" --bindir)
export PATH="$PGBIN:$PATH"
rp_start_servers
cd "$RP_ROOT"
make -s installcheck TAP_TESTS= PG_CONFIG="$PG_CONFIG"
