"""``kmirror broker``'s listener security flags, and the users file they name.

The users file holds one ``user:password`` per line (``#`` comments and blank lines are
skipped; the password is everything after the first colon). Passwords are never flags: a
command line is visible to every user of the machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .settings import MECHANISMS, ListenerSecurity, ListenerTls, SaslUser, SecuritySettingsError
from .tls import server_context

__all__ = ["add_security_arguments", "listener_security", "read_users"]


def add_security_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("listener security (docs/broker.md#listener-security)")
    group.add_argument("--tls-cert-file", type=Path, metavar="FILE",
                       help="PEM certificate of the listener: clients must use TLS (SSL / SASL_SSL)")
    group.add_argument("--tls-key-file", type=Path, metavar="FILE",
                       help="PEM private key of the certificate (default: in --tls-cert-file)")
    group.add_argument("--tls-client-ca-file", type=Path, metavar="FILE",
                       help="PEM CA that must have signed every client's certificate (mTLS, ssl.client.auth=required)")
    group.add_argument("--sasl-mechanisms", metavar="LIST",
                       help=f"comma-separated SASL mechanisms to require ({', '.join(MECHANISMS)}); needs --sasl-users-file")
    group.add_argument("--sasl-users-file", type=Path, metavar="FILE",
                       help="users who may log in, one user:password per line")


def listener_security(args: argparse.Namespace) -> ListenerSecurity:
    """The flags as :class:`ListenerSecurity`, its TLS files loaded once to check them; settings
    that cannot work end the command with one line naming the problem (exit code 2)."""
    try:
        if args.tls_cert_file is None and (args.tls_key_file or args.tls_client_ca_file):
            raise SecuritySettingsError("--tls-key-file and --tls-client-ca-file need --tls-cert-file")
        tls = (ListenerTls(args.tls_cert_file, args.tls_key_file or args.tls_cert_file, args.tls_client_ca_file)
               if args.tls_cert_file is not None else None)
        if tls is not None:
            server_context(tls)
        mechanisms = tuple(m.strip() for m in (args.sasl_mechanisms or "").split(",") if m.strip())
        users = read_users(args.sasl_users_file) if args.sasl_users_file is not None else ()
        return ListenerSecurity(tls=tls, sasl_mechanisms=mechanisms, users=users)
    except SecuritySettingsError as exc:
        print(f"kmirror broker: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def read_users(path: Path) -> tuple[SaslUser, ...]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise SecuritySettingsError(f"cannot read the SASL users file {path}: {exc.strerror or exc}") from exc
    users = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, password = line.partition(":")
        if not sep or not name.strip():
            raise SecuritySettingsError(f"{path} line {number}: expected user:password")  # the line may hold a password
        users.append(SaslUser(name.strip(), password))
    return tuple(users)
