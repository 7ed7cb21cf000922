# test/t/lib/RedisPrimitives/Test/Certs.pm -- throwaway certificates for the TLS
# tests, with the openssl command.  make_certs($dir) writes:
#   ca.crt/key        the test CA
#   ca2.crt/key       another CA (the "wrong CA")
#   server.crt/key    signed by ca, SAN IP:127.0.0.1, DNS:localhost
#   other.crt/key     signed by ca, SAN DNS:other.example only
#   expired.crt/key   signed by ca, SAN IP:127.0.0.1, DNS:localhost, expired: it ends a day before it starts
#   client.crt/key    client certificate signed by ca
#   client2.crt/key   client certificate signed by ca2
#
# The one thing to know before editing: this is the only copy of the
# recipe; the bash tests' tls_make_certs (scripts/lib.sh) runs it as
#   perl -I test/t/lib -MRedisPrimitives::Test::Certs -e 'RedisPrimitives::Test::Certs::make_certs(@ARGV)' DIR
# so it must not use the PostgreSQL::Test modules (IPC::Run only).  Keys are unencrypted,
# mode 600 (openssl writes them so), owned by whoever ran it.
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

sub make_certs
{
	my ($d) = @_;
	make_path($d);
	my @ec = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes');
	# A request (-config /dev/null: no extensions but these; the default
	# configuration would make each one a CA), signed by x509 -req, which
	# takes the request's extensions and a negative -days: the expired one
	# ends a day before it starts (OpenSSL's own tests make theirs so; req
	# -x509 refuses it, and only `openssl ca` takes dates).  A CA signs its
	# own (-signkey), and comes first in name order: ca, ca2, then the rest.
	my %certs = (
		ca => [ 'rp test ca', 'ca', 'basicConstraints=critical,CA:TRUE' ],
		ca2 => [ 'rp test ca2', 'ca2', 'basicConstraints=critical,CA:TRUE' ],
		server => [ 'localhost', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost' ],
		other => [ 'other.example', 'ca', 'subjectAltName=DNS:other.example' ],
		expired => [ 'localhost', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost', -1 ],
		client => [ 'rp-client', 'ca', 'extendedKeyUsage=clientAuth' ],
		client2 => [ 'rp-client2', 'ca2', 'extendedKeyUsage=clientAuth' ]);
	for my $name (sort keys %certs)
	{
		my ($cn, $ca, $ext, $days) = @{ $certs{$name} };
		_openssl('req', '-config', '/dev/null', @ec, '-keyout', "$d/$name.key", '-out', "$d/$name.csr",
			'-subj', "/CN=$cn", '-addext', $ext);
		_openssl('x509', '-req', '-in', "$d/$name.csr",
			$ca eq $name ? ('-signkey', "$d/$ca.key") : ('-CA', "$d/$ca.crt", '-CAkey', "$d/$ca.key"),
			'-days', $days // 3, '-copy_extensions', 'copy', '-out', "$d/$name.crt");
	}
	return $d;
}

1;
