"""API keys: stored as SHA-256 digests, each with a scope that owns what it creates.

A key is ``tl_<id>_<secret>``; only its digest is kept, so a leaked database gives no key.
Two keys with the same scope see the same threads, runs, assistants and store items (a shared
scope); a key created without one gets a scope of its own.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass

from threadline.clock import now_iso
from threadline.server.db import Database, Tx

LOCAL_SCOPE = ""  # requests from loopback without a key, when the config allows them


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    name: str
    scope: str
    created_at: str
    revoked_at: str | None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(db: Database, name: str, scope: str | None = None) -> tuple[KeyInfo, str]:
    """A new key; the secret is returned once and never stored."""
    key_id = secrets.token_hex(6)
    secret = f"tl_{key_id}_{secrets.token_urlsafe(24)}"
    info = KeyInfo(key_id, name, scope or f"key:{key_id}", now_iso(), None)
    db.do(
        lambda tx: tx.run(
            "INSERT INTO tl_keys VALUES (?,?,?,?,?,?)",
            key_id,
            _digest(secret),
            info.scope,
            name,
            info.created_at,
            None,
        )
    )
    return info, secret


def revoke_key(db: Database, key_id: str) -> bool:
    """Revoke a key by id; False when there is no such live key."""
    return (
        db.do(
            lambda tx: tx.run(
                "UPDATE tl_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
                now_iso(),
                key_id,
            )
        )
        > 0
    )


def list_keys(db: Database) -> list[KeyInfo]:
    rows = db.do(
        lambda tx: tx.rows(
            "SELECT key_id, name, scope, created_at, revoked_at FROM tl_keys ORDER BY created_at"
        )
    )
    return [KeyInfo(**r) for r in rows]


def scope_of(tx: Tx, secret: str) -> str | None:
    """The scope of a live key, or None when the key is unknown or revoked."""
    row = tx.row(
        "SELECT digest, scope FROM tl_keys WHERE digest = ? AND revoked_at IS NULL", _digest(secret)
    )
    if row is None or not hmac.compare_digest(row["digest"], _digest(secret)):
        return None
    return str(row["scope"])


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
