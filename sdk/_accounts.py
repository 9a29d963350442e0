"""Accounts: encrypted keystore files (eth-account's scrypt v3 format) and anvil's dev accounts.

The password comes from an argument, `INTELLECT_KEYSTORE_PASSWORD`, or a file named by
`INTELLECT_KEYSTORE_PASSWORD_FILE`. Dev accounts (anvil's well-known mnemonic) are refused on any
chain that is not a local dev chain. Private keys are never logged or printed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from ._errors import ConfigError

__all__ = ["DEV_MNEMONIC", "create_keystore", "dev_account", "import_keystore", "load_keystore", "read_password"]

DEV_MNEMONIC = "test test test test test test test test test test test junk"  # anvil/hardhat default
Account.enable_unaudited_hdwallet_features()


def dev_account(index: int = 0) -> LocalAccount:
    """Anvil's dev account `index` (the same keys anvil funds with 10 000 ETH)."""
    return Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")


def read_password(password: str | None = None, password_file: Path | str | None = None) -> str:
    if password is not None:
        return password
    pfile = password_file or os.environ.get("INTELLECT_KEYSTORE_PASSWORD_FILE")
    if pfile:
        try:
            return Path(pfile).read_text().rstrip("\r\n")
        except OSError as exc:
            raise ConfigError(f"cannot read the keystore password file {pfile}: {exc.strerror}") from None
    env = os.environ.get("INTELLECT_KEYSTORE_PASSWORD")
    if env is not None:
        return env
    raise ConfigError(
        "the keystore needs a password: set INTELLECT_KEYSTORE_PASSWORD or INTELLECT_KEYSTORE_PASSWORD_FILE"
    )


def load_keystore(path: Path | str, password: str | None = None, password_file: Path | str | None = None
                  ) -> LocalAccount:
    """Decrypt a keystore file into a signing account."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"keystore {path} does not exist: create one with `intellect account new`") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"keystore {path} is unreadable: {exc}") from None
    pw = read_password(password, password_file)
    try:
        key = Account.decrypt(data, pw)
    except ValueError:
        raise ConfigError(f"wrong password for keystore {path} (MAC mismatch)") from None
    return Account.from_key(key)


def _write_keystore(acct: LocalAccount, path: Path, password: str) -> Path:
    if path.exists():
        raise ConfigError(f"{path} already exists: choose another path (keystores are never overwritten)")
    if not password:
        raise ConfigError("refusing an empty keystore password")
    data = Account.encrypt(acct.key, password)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    return path


def create_keystore(path: Path | str, password: str) -> LocalAccount:
    """A new random key, encrypted into `path` (mode 0600). Returns the account."""
    acct: LocalAccount = Account.create()
    _write_keystore(acct, Path(path), password)
    return acct


def import_keystore(path: Path | str, private_key: str, password: str) -> LocalAccount:
    """Encrypt an existing private key (hex) into `path`."""
    try:
        acct: LocalAccount = Account.from_key(private_key.strip())
    except (ValueError, TypeError):
        raise ConfigError("that is not a private key (expected 64 hex digits, with or without 0x)") from None
    _write_keystore(acct, Path(path), password)
    return acct
