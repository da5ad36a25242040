#!/usr/bin/env python3
"""Write deploy/base/secrets/stapel.env, the source of the stapel-secrets Secret.

    python3 deploy/make_secrets.py --database-url postgresql://USER:PASSWORD@HOST:5432/stapel

Redis's password, Flower's login and the web's metrics token are made here at random;
the database URL is yours (its password is the database's). The file is written with
mode 600 and never overwritten unless --force is given. Standard library only, so it
runs wherever kubectl does.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "base" / "secrets" / "stapel.env"


def values(database_url: str, flower_user: str) -> dict[str, str]:
    """Return every key of stapel-secrets; token_hex keeps them URL- and shell-safe."""
    return {
        "DATABASE_URL": database_url,
        "REDIS_PASSWORD": secrets.token_hex(32),
        "FLOWER_BASIC_AUTH": f"{flower_user}:{secrets.token_hex(16)}",
        "STAPEL_METRICS_TOKEN": secrets.token_hex(32),
    }


def write(path: Path, entries: dict[str, str], force: bool) -> None:
    """Write KEY=value lines to path, readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if force:
        path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.writelines(f"{key}={value}\n" for key, value in entries.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL"),
        help="postgresql://USER:PASSWORD@HOST:5432/DB (default: $DATABASE_URL)",
    )
    parser.add_argument("--flower-user", default="operator")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--force", action="store_true", help="replace an existing file")
    args = parser.parse_args(argv)
    if not args.database_url or not args.database_url.startswith("postgresql"):
        parser.error("give --database-url postgresql://... (or set DATABASE_URL)")
    try:
        write(args.out, values(args.database_url, args.flower_user), args.force)
    except FileExistsError:
        print(f"{args.out} exists; keep it, or pass --force to make new secrets", file=sys.stderr)
        return 1
    print(f"wrote {args.out} (mode 600)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
