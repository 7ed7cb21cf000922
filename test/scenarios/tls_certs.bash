# test/scenarios/tls_certs.bash -- throwaway certificates for the TLS
# scenarios (sourced; not a test).  tls_make_certs DIR writes, with the
# openssl command:
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
	mkdir -p "$d" && (
		cd "$d" || exit 1
		set -e
		o() { openssl "$@" >/dev/null 2>&1; }
		for ca in ca ca2; do
			o req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout $ca.key -out $ca.crt -days 3 -subj "/CN=rp test $ca"
		done
		csr() { o req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$2"; }
		sign() {  # name ca ext
			printf '%s\n' "$3" >"$1.ext"
			o x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -out "$1.crt" -days 3 -extfile "$1.ext"
		}
		csr server localhost;     sign server ca "subjectAltName=IP:127.0.0.1,DNS:localhost"
		csr other other.example;  sign other ca "subjectAltName=DNS:other.example"
		csr client rp-client;     sign client ca "extendedKeyUsage=clientAuth"
		csr client2 rp-client2;   sign client2 ca2 "extendedKeyUsage=clientAuth"
		# Expired: `openssl ca` takes explicit start and end dates.
		csr expired localhost
		mkdir -p ca.db && : >ca.db/index.txt && echo 01 >ca.db/serial
		cat >ca.cnf <<CNF
[ca]
default_ca = d
[d]
dir = ca.db
database = ca.db/index.txt
serial = ca.db/serial
new_certs_dir = ca.db
default_md = sha256
policy = p
copy_extensions = none
x509_extensions = e
[p]
commonName = supplied
[e]
subjectAltName = IP:127.0.0.1,DNS:localhost
CNF
		o ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in expired.csr -out expired.crt \
			-startdate 20200101000000Z -enddate 20200102000000Z
		chmod 644 ./*.crt; chmod 600 ./*.key
	) || { echo "# could not make the test certificates" >&2; return 1; }
	[ "$(id -u)" -eq 0 ] && chown -R postgres: "$d"
	return 0
}

# tls_redis_args DIR CERT: the redis-server arguments of a TLS-only server.
tls_redis_args() {
	echo --port 0 --tls-cert-file "$1/$2.crt" --tls-key-file "$1/$2.key" --tls-ca-cert-file "$1/ca.crt"
}
