#!/usr/bin/env bash
# scripts/private-pg.sh DIR -- a private, relocated copy of the Debian
# PostgreSQL 15 installation under DIR, for developers who test several work
# trees at once: each tree builds and installs the extension into its own
# copy, so one tree's `make install` never replaces the library another
# tree's servers are running.  PostgreSQL finds its share and lib folders
# relative to its binaries, so the copy needs no configuration.
#
#   bash scripts/private-pg.sh /opt/pg-mine
#   export PG_CONFIG=/opt/pg-mine/usr/lib/postgresql/15/bin/pg_config
#   make test
set -euo pipefail
dir=${1:?usage: private-pg.sh DIR}
bindir=$(pg_config --bindir)
pgroot=$(dirname "$bindir")          # /usr/lib/postgresql/15
share=$(pg_config --sharedir)        # /usr/share/postgresql/15
mkdir -p "$dir$(dirname "$pgroot")" "$dir$(dirname "$share")"
cp -a "$pgroot" "$dir$(dirname "$pgroot")/"
cp -a "$share" "$dir$(dirname "$share")/"
# The server headers too: the copy's pg_config names them relative to itself.
include=$(dirname "$(pg_config --includedir)")   # /usr/include
mkdir -p "$dir$include"
cp -a "$(pg_config --includedir)" "$dir$include/"
chmod -R a+rX "$dir"
echo "export PG_CONFIG=$dir$bindir/pg_config"
