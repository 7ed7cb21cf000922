#!/usr/bin/env bash
# ratelimit_scripts.sh -- the rate-limit scripts are joined at build time
# (each includes src/lua/ratelimit_common.lua; scripts/embed-lua.sh), and
# the SHA1 the library sends with EVALSHA must be that of the joined text
# Redis runs: after Redis forgets its scripts, one call reloads each
# algorithm's script and the next finds it (rp_stats.noscript).
#
# The naive twin is an embedding that hashes the file as written, include
# line and all: Redis never holds a script with that SHA1 (SCRIPT EXISTS
# says 0 after the joined one was loaded), so every EVALSHA would miss and
# every call would send the whole script again.
source "$(dirname "$0")/tap.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
plan 6

# embedded_sha NAME: the SHA1 src/rp_scripts.h gives script NAME.
embedded_sha() {
	sed -n "s/^static const RpScript rp_script_$1 = {.*, \"\([0-9a-f]\{40\}\)\"};$/\1/p" \
		"$ROOT/src/rp_scripts.h"
}

redis SCRIPT FLUSH >/dev/null
for a in sliding_log sliding_window gcra; do
	noscript() { q "SELECT coalesce(sum(noscript), 0) || ' ' || coalesce(sum(calls), 0) FROM rp_stats WHERE primitive = 'ratelimit_$a'"; }
	read -r ns0 c0 <<<"$(noscript)"
	q "SELECT rp_ratelimit('rs-$a', 10, 60000, 1, '$a')" "SELECT rp_ratelimit('rs-$a', 10, 60000, 1, '$a')" >/dev/null
	read -r ns1 c1 <<<"$(noscript)"
	is "$((c1 - c0)) $((ns1 - ns0))" "2 1" \
		"$a: after SCRIPT FLUSH, two calls and one NOSCRIPT reload (the second EVALSHA finds the joined script)"
	emb=$(embedded_sha "ratelimit_$a")
	raw=$(sha1sum "$ROOT/src/lua/ratelimit_$a.lua" | cut -c1-40)
	is "${emb:-none} $(redis SCRIPT EXISTS "${emb:-0}" "$raw" | tr '\n' ' ')" "$emb 1 0 " \
		"$a: Redis holds the embedded SHA1, never the SHA1 of the file as written (the naive twin's)"
done

finish
