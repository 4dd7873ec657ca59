"""Certificates for the TLS tests, made with `cryptography`: a CA, and
certificates naming a site (DNS SAN) with chosen validity, for both ends
of a link (server and client authentication)."""
import datetime

import pytest

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402

NOW = datetime.datetime.now(datetime.timezone.utc)
DAY = datetime.timedelta(days=1)


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(d, name):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW - DAY).not_valid_after(NOW + DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (d / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def issue(d, ca, site, file=None, not_before=None, not_after=None):
    """A certificate naming `site` (DNS SAN), for both ends of a link,
    signed by `ca`; written as <file>.crt / <file>.key."""
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(site)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(not_before or NOW - DAY).not_valid_after(not_after or NOW + DAY)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(site)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    file = file or site
    (d / f"{file}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / f"{file}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                      serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))




def tls_keys(certs, cert, ca="ca"):
    """The lines of a config section's mutual TLS: `tls = true` and the
    files of certificate `cert` and CA `ca` in directory `certs`."""
    return ["tls = true", f'tls_cert_file = "{certs / cert}.crt"', f'tls_key_file = "{certs / cert}.key"',
            f'tls_ca_cert_file = "{certs / ca}.crt"']
