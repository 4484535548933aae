"""`loopkata workshop link`: the one link a workshop room hands its learners.

Opening it on a JupyterHub that has nbgitpuller logs the learner in, starts
their server, pulls the collection into ~/<folder> (a plain clone the first
time, an automatic merge that never overwrites their edits after that) and
opens notebooks/00_start_here.ipynb in JupyterLab. docs/workshop/deploy.md
says how to run such a hub.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath
from urllib.parse import urlencode, urlsplit, urlunsplit

from ..model.catalogue import CatalogueError, project_root

DEFAULT_REPO = "https://github.com/loop-katas/loop-katas"
START_PAGE = "notebooks/00_start_here.ipynb"

# git@github.com:owner/name.git, the form `git clone` over SSH prints
_SCP_LIKE = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?P<path>(?!//)[^\\]+)$")


def link(hub_url: str, repo: str, branch: str = "main", folder: str = "loop-katas") -> str:
    """The nbgitpuller link that gives a learner the collection in ~/<folder> and opens the start page.

    Raises ValueError with one sentence when an argument cannot make a working link.
    """
    base = _hub_base(hub_url)
    if not repo or not repo.strip():
        raise ValueError("The repository to pull is empty: give the URL learners' servers can clone, "
                         "e.g. https://github.com/loop-katas/loop-katas.")
    if not branch or not branch.strip():
        raise ValueError("The branch is empty: name the branch to pull, e.g. main.")
    folder_path = PurePosixPath(folder or "")
    if not folder or folder_path.is_absolute() or ".." in folder_path.parts or folder != folder.strip():
        raise ValueError(f"The folder {folder!r} must be a plain folder name inside the learner's home, "
                         "e.g. loop-katas.")
    query = urlencode({
        "repo": repo.strip(),
        "branch": branch.strip(),
        "targetpath": folder_path.as_posix(),
        "urlpath": f"lab/tree/{folder_path.as_posix()}/{START_PAGE}",
    })
    return f"{base}hub/user-redirect/git-pull?{query}"


def _hub_base(hub_url: str) -> str:
    """The hub's address with a trailing slash, or ValueError with one sentence."""
    text = (hub_url or "").strip()
    try:
        parts = urlsplit(text)
        host = parts.hostname
        parts.port  # noqa: B018  (raises ValueError on a port that is not a number)
    except ValueError:
        parts, host = None, None
    if not parts or parts.scheme not in ("http", "https") or not host:
        raise ValueError(
            f"{hub_url!r} is not a hub address: give the full address learners open in their browser, "
            "with http:// or https:// and a host name, e.g. https://hub.example.org."
        )
    if parts.query or parts.fragment:
        raise ValueError(f"{hub_url!r} has a query or a fragment: give the hub's address only, "
                         "e.g. https://hub.example.org.")
    path = parts.path if parts.path.endswith("/") else parts.path + "/"  # a hub under a path prefix keeps it
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def public_repo_url(url: str) -> str:
    """A URL every learner's server can clone: SSH remotes become https, credentials are dropped."""
    url = url.strip()
    if url.startswith("ssh://"):
        parts = urlsplit(url)
        return urlunsplit(("https", parts.hostname or "", parts.path, "", ""))
    m = _SCP_LIKE.match(url)
    if m and "://" not in url:
        return f"https://{m['host']}/{m['path'].lstrip('/')}"
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and (parts.username or parts.password):
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return url


def default_repo(folder: Path | None = None) -> str:
    """The project's `origin` remote (as a public URL), else the collection's home on GitHub."""
    if folder is None:
        try:
            folder = project_root()
        except CatalogueError:  # not inside a checkout: the published collection is the right default
            return DEFAULT_REPO
    try:
        out = subprocess.run(["git", "-C", str(folder), "remote", "get-url", "origin"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return DEFAULT_REPO
    url = out.stdout.strip()
    return public_repo_url(url) if out.returncode == 0 and url else DEFAULT_REPO


def cmd_link(args) -> int:
    """Print the link; a bad argument gets one sentence on stderr and exit status 2."""
    repo = args.repo or default_repo()
    try:
        print(link(args.hub_url, repo, branch=args.branch, folder=args.folder))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """`loopkata workshop link HUB_URL [--repo URL] [--branch B] [--folder F]`."""
    p = subparsers.add_parser("workshop", help="run the collection in a workshop room on a JupyterHub",
                              description="Tools for a workshop room: see docs/workshop/deploy.md.")
    sub = p.add_subparsers(dest="workshop_command", required=True, metavar="COMMAND")
    s = sub.add_parser(
        "link", help="the nbgitpuller link that gives each learner the collection",
        description="Print the link learners open: it pulls the collection into their home on the hub "
                    f"and opens {START_PAGE}.")
    s.add_argument("hub_url", metavar="HUB_URL", help="the hub's address, e.g. https://hub.example.org")
    s.add_argument("--repo", help="the git repository to pull (default: this checkout's origin remote, "
                                  f"else {DEFAULT_REPO})")
    s.add_argument("--branch", default="main", help="the branch to pull (default: main)")
    s.add_argument("--folder", default="loop-katas",
                   help="the folder in each learner's home (default: loop-katas)")
    s.set_defaults(func=cmd_link)
    return p


def main(argv=None) -> int:
    """`python -m loopkata.room.workshop link ...`: the same command outside the loopkata CLI."""
    p = argparse.ArgumentParser(prog="loopkata")
    add_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
