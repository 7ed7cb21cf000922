# test/scenarios/tls_certs.bash -- throwaway certificates for the TLS
# scenarios (sourced; not a test).  tls_make_certs DIR writes, with the
# openssl command (the recipe is t/lib/RedisPrimitives/Test/Certs.pm):
#   ca.crt/key        the test CA
#   ca2.crt/key       another CA (the "wrong CA")
#   server.crt/key    signed by ca, SAN IP:127.0.0.1, DNS:localhost
#   other.crt/key     signed by ca, SAN DNS:other.example only
#   expired.crt/key   signed by ca, SAN IP:127.0.0.1, valid in 2020 only
#   client.crt/key    client certificate signed by ca
#   client2.crt/key   client certificate signed by ca2
# Keys are unencrypted and owned by the PostgreSQL user (mode 600).
tls_make_certs() {
	local d=$1
	# The recipe lives in one place, the Perl TAP tests' module.
	perl -I "$(dirname "${BASH_SOURCE[0]}")/../../t/lib" -MRedisPrimitives::Test::Certs \
		-e 'RedisPrimitives::Test::Certs::make_certs(@ARGV)' "$d" ||
		{ echo "# could not make the test certificates" >&2; return 1; }
	[ "$(id -u)" -eq 0 ] && chown -R postgres: "$d"
	return 0
}

# tls_redis_args DIR CERT: the redis-server arguments of a TLS-only server.
tls_redis_args() {
	echo --port 0 --tls-cert-file "$1/$2.crt" --tls-key-file "$1/$2.key" --tls-ca-cert-file "$1/ca.crt"
}
