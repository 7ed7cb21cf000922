#!/usr/bin/env bash
# test/scenarios/harness_build.sh -- the build knows which PostgreSQL its
# objects were compiled for.  make test PG_CONFIG=... builds in the work
# tree, and .ci/run runs it once per installed major, one after the other:
# objects compiled against one major's headers that make takes as up to
# date for the next would be linked into that major's library (which then
# does not load, or worse, loads with another major's struct layouts).
# In a copy of the tree, one object is built, then asked about (make -q):
#   1. for the same pg_config it is up to date (the naive control: make's
#      own dependencies say nothing about the server's headers);
#   2. for a pg_config of another PostgreSQL it is not;
#   3. built for that one, it is not up to date for the first again.
# The other PostgreSQL is the same installation with another --version,
# which is all a machine with one major can show.
source "$(dirname "$0")/tap.bash"
plan 3

tree=$RP_TMP/build-tree
mkdir -p "$tree"
( cd "$RP_ROOT" && tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
	--exclude=results --exclude=output_iso --exclude=tmp_check -cf - Makefile redis_primitives.control src scripts ) |
	tar -C "$tree" -xf -
other=$RP_TMP/other-pg_config
cat >"$other" <<SH
#!/bin/sh
[ "\$1" = --version ] && { echo "PostgreSQL 0.0 (another build)"; exit 0; }
exec "$PG_CONFIG" "\$@"
SH
chmod +x "$other"
obj=src/common/args.o
mk() { make -s -C "$tree" "$@" >/dev/null 2>&1; }

mk "$obj" PG_CONFIG="$PG_CONFIG"
mk -q "$obj" PG_CONFIG="$PG_CONFIG"
is "$?" "0" "built for this PostgreSQL, $obj is up to date for it"
mk -q "$obj" PG_CONFIG="$other"
is "$?" "1" "for another PostgreSQL's pg_config it is not up to date: it is compiled again"
mk "$obj" PG_CONFIG="$other"
mk -q "$obj" PG_CONFIG="$PG_CONFIG"
is "$?" "1" "built for the other, it is not up to date for the first again"
finish
