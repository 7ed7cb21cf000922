#!/usr/bin/env bash
# scripts/private-pg.sh DIR -- a private, relocated copy of a PostgreSQL
# installation under DIR, for developers who test several work trees at
# once: each tree builds and installs the extension into its own copy, so
# one tree's `make install` never replaces the library another tree's
# servers are running.  The installation copied is PG_CONFIG's (default:
# pg_config on PATH, Debian's PostgreSQL 15): Debian's keeps its binaries,
# share and headers in three places, one built from source
# (/usr/local/pgsql-N) in one.  PostgreSQL finds its share and lib folders
# relative to its binaries, so the copy needs no configuration.
#
#   bash scripts/private-pg.sh /opt/pg-mine
#   export PG_CONFIG=/opt/pg-mine/usr/lib/postgresql/15/bin/pg_config
#   make test
set -euo pipefail
dir=${1:?usage: private-pg.sh DIR}
src=${PG_CONFIG:-pg_config}
bindir=$("$src" --bindir)
pgroot=$(dirname "$bindir")          # /usr/lib/postgresql/15, /usr/local/pgsql-18
# copy FOLDER: FOLDER at the same place under $dir, unless it is inside
# pgroot (copied with it)
copy() {
	case $1/ in "$pgroot"/*) return 0 ;; esac
	mkdir -p "$dir$(dirname "$1")"
	cp -a "$1" "$dir$(dirname "$1")/"
}
mkdir -p "$dir$(dirname "$pgroot")"
cp -a "$pgroot" "$dir$(dirname "$pgroot")/"
copy "$("$src" --sharedir)"          # /usr/share/postgresql/15
# The server headers too: the copy's pg_config names them relative to itself.
copy "$("$src" --includedir)"        # /usr/include/postgresql
chmod -R a+rX "$dir"
echo "export PG_CONFIG=$dir$bindir/pg_config"
