# t/lib/RedisPrimitives/Test/Certs.pm -- throwaway certificates for the TLS
# tests, with the openssl command.  make_certs($dir) writes:
#   ca.crt/key        the test CA
#   ca2.crt/key       another CA (the "wrong CA")
#   server.crt/key    signed by ca, SAN IP:127.0.0.1, DNS:localhost
#   other.crt/key     signed by ca, SAN DNS:other.example only
#   expired.crt/key   signed by ca, SAN IP:127.0.0.1, valid in 2020 only
#   client.crt/key    client certificate signed by ca
#   client2.crt/key   client certificate signed by ca2
#
# The one thing to know before editing: this is the only copy of the
# recipe; the bash tests' tls_make_certs (scripts/lib.sh) runs it as
#   perl -I t/lib -MRedisPrimitives::Test::Certs -e 'RedisPrimitives::Test::Certs::make_certs(@ARGV)' DIR
# so it must not use the PostgreSQL::Test modules (IPC::Run only).  Keys are unencrypted,
# mode 600, owned by whoever ran it.
package RedisPrimitives::Test::Certs;

use strict;
use warnings;

use File::Path qw(make_path);
use IPC::Run;

sub _openssl
{
	IPC::Run::run([ 'openssl', @_ ], '<', \undef, '>', '/dev/null', '2>', '/dev/null')
	  or die "openssl @_ failed\n";
	return;
}

sub _write
{
	my ($file, $text) = @_;
	open(my $fh, '>', $file) or die "$file: $!";
	print $fh $text;
	close $fh;
	return;
}

sub make_certs
{
	my ($d) = @_;
	make_path("$d/ca.db");
	my @ec = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes');
	for my $ca ('ca', 'ca2')
	{
		_openssl('req', '-x509', @ec, '-keyout', "$d/$ca.key", '-out', "$d/$ca.crt",
			'-days', '3', '-subj', "/CN=rp test $ca");
	}
	# Signed in one step by req -x509 -CA; -config /dev/null: no extensions
	# but these (the default configuration would make each one a CA).
	my %certs = (
		server => [ 'localhost', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost' ],
		other => [ 'other.example', 'ca', 'subjectAltName=DNS:other.example' ],
		client => [ 'rp-client', 'ca', 'extendedKeyUsage=clientAuth' ],
		client2 => [ 'rp-client2', 'ca2', 'extendedKeyUsage=clientAuth' ]);
	for my $name (sort keys %certs)
	{
		my ($cn, $ca, $ext) = @{ $certs{$name} };
		_openssl('req', '-config', '/dev/null', '-x509', @ec, '-keyout', "$d/$name.key", '-out', "$d/$name.crt",
			'-subj', "/CN=$cn", '-CA', "$d/$ca.crt", '-CAkey', "$d/$ca.key", '-days', '3', '-addext', $ext);
	}

	# Expired: only `openssl ca` takes explicit start and end dates.
	_openssl('req', '-config', '/dev/null', @ec, '-keyout', "$d/expired.key", '-out', "$d/expired.csr",
		'-subj', '/CN=localhost');
	_write("$d/ca.db/index.txt", '');
	_write("$d/ca.cnf", <<"CNF");
[d]
database = $d/ca.db/index.txt
serial = $d/ca.db/serial
policy = p
x509_extensions = e
[p]
commonName = supplied
[e]
subjectAltName = IP:127.0.0.1,DNS:localhost
CNF
	_openssl('ca', '-batch', '-config', "$d/ca.cnf", '-name', 'd', '-cert', "$d/ca.crt", '-keyfile', "$d/ca.key",
		'-outdir', "$d/ca.db", '-rand_serial', '-md', 'sha256', '-in', "$d/expired.csr", '-out', "$d/expired.crt",
		'-startdate', '20200101000000Z', '-enddate', '20200102000000Z');
	chmod 0644, glob("$d/*.crt");
	chmod 0600, glob("$d/*.key");
	return $d;
}

1;
