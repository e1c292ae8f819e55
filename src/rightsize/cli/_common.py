"""Helpers shared by command modules: JSON output, consoles, common options."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import typer
from rich.console import Console

from rightsize.jsonout import to_json

if TYPE_CHECKING:
    from rightsize.catalog import Catalog

# Humans read stderr while --json writes stdout, so piping JSON never mixes in progress text.
# Piped output (CI logs, `| tee`) gets $COLUMNS if set, else 200 rather than rich's 80: a table row stays on
# one line.
_PIPE_WIDTH = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else 200
# stderr carries our notes about the user's own text (paths, URLs, hosts, spec names): printed as written, never as
# rich markup (a name or URL with "[/b]" raised MarkupError); a line that colours a word says markup=True
err_console = Console(stderr=True, markup=False, width=None if sys.stderr.isatty() else _PIPE_WIDTH)
out_console = Console(width=None if sys.stdout.isatty() else _PIPE_WIDTH)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")
STORE_OPTION = typer.Option(
    None,
    "--store",
    envvar="RIGHTSIZE_STORE",
    help="SQLite results store (default: user cache dir).",
)
CATALOG_OPTION = typer.Option(
    None,
    "--catalog",
    help="CSV file that adds or overrides catalog rows; repeat for several (e.g. a new GPU's accelerators row and "
    "the instances that carry it). Default: $RIGHTSIZE_CATALOG (several joined by ':').",
)


def load_catalog_option(paths: list[Path] | None) -> Catalog:
    """The catalog a command uses, loaded once: shipped tables plus every ``--catalog`` file, or $RIGHTSIZE_CATALOG
    without one (read by load_catalog: typer split a variable on spaces); ``--catalog ""`` arrives as Path(".") and
    means no user file. Given twice, the option had kept the second file and dropped the first, silently."""
    from rightsize.catalog import load_catalog

    return load_catalog(catalog_paths(paths))


def catalog_paths(paths: list[Path] | None) -> list[Path]:
    """The user catalog files a command reads: the ``--catalog`` ones, else those $RIGHTSIZE_CATALOG names."""
    from rightsize.catalog.load import env_catalog_paths

    if paths:
        return [p for p in paths if str(p) not in ("", ".")]
    return env_catalog_paths()


def given(ctx: typer.Context, param: str) -> bool:
    """Whether the user typed the option of parameter ``param`` on the command line, even at its default value:
    `serve --generate --max-batch 8` (the default) had been served silently where `--max-batch 16` was refused."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name == "COMMANDLINE"


def split_values(values: list[str] | None, option: str) -> list[str]:
    """A repeatable option's values with comma-separated ones split: ``--provider aws,gcp`` is
    ``--provider aws --provider gcp`` (it had been one provider named 'aws,gcp', "Did you mean 'gcp'?").
    A value that names nothing (``--provider ,``) is refused: it had meant every provider, silently."""
    from rightsize.errors import SpecError

    parts = []
    for value in values or []:
        named = [part.strip() for part in value.split(",") if part.strip()]
        if not named:
            example = {"--region": "us-east-1"}.get(option, "aws")
            raise SpecError(option, f"{value!r} names nothing; give a name (e.g. {option} {example}), or leave "
                            f"{option} out for all")  # fmt: skip
        parts += named
    return parts


def check_token(token: str | None) -> None:
    """Refuse an empty --token: `--token "$RIGHTSIZE_TOKEN"` with the variable unset served without auth (serve) or
    locked every request out (dashboard), silently."""
    from rightsize.errors import SpecError

    if token is not None and not token.strip():
        raise SpecError("--token", "is empty (an unset variable?); give the token, or leave --token out to serve "
                        "without auth")  # fmt: skip


def check_providers(providers: list[str] | None, catalog: Catalog) -> None:
    """Refuse a ``--provider`` the catalog has no instance of, naming the known ones (and the closest)."""
    from rightsize.errors import NotFoundError, did_you_mean

    known = sorted({i.provider for i in catalog.instances})
    for p in providers or []:
        if p.lower() not in known:
            hint = did_you_mean(p.lower(), known)
            raise NotFoundError(
                f"--provider: no instances of provider {p!r} in the catalog (known: {', '.join(known)}).{hint} "
                "Add rows with --catalog FILE"
            )


def check_writable(path: Path, option: str, store: Path | None = None, *, only_ours: bool = False) -> None:
    """Refuse (exit 2, naming ``option``) an output ``path`` that cannot be written, before the work that ends in
    writing it: its folder is made when missing and the file opened for appending, then both removed again
    (a probe left nowhere; the writer makes the folder).

    Also refused: anything but a regular file where one exists (a FIFO would hang the write, a device would be
    replaced by an atomic rename), and the results store itself or its SQLite side files (``store``, default
    ``$RIGHTSIZE_STORE`` or the user cache's): writing a report over the store would destroy every stored run.
    With ``only_ours``, an existing non-empty file rightsize did not write (``written_by_rightsize``): `report -o
    mine.html` and `results --export data.csv` had replaced a user's own page and data, silently."""
    from rightsize.errors import SpecError
    from rightsize.inputfile import short
    from rightsize.store.opening import default_store_path

    def refuse(why: str, fix: str = "pass a writable path") -> SpecError:
        return SpecError(option, f"cannot write {short(str(given))} ({why}); {fix}")

    given, path = path, path.resolve()  # a symlink's target: the probe had created it and then deleted the link
    made: list[Path] = []
    existed = True  # until known: nothing is unlinked that the probe did not make
    try:
        existed = path.exists()
        if path.is_dir():
            raise refuse("is a directory", "name a file (in it, or beside it)")
        if existed and not path.is_file():
            raise refuse("is not a regular file")
        db = store if store is not None else default_store_path()
        if any(same_file(path, Path(f"{db}{tail}")) for tail in ("", "-wal", "-shm", "-journal")):
            raise refuse(f"it is the results store {short(str(db))}; every stored run would be lost")
        if existed and _is_sqlite(path):  # another results store (or any database): never written over
            raise refuse("it is an SQLite database, perhaps a results store; its contents would be lost")
        if existed and only_ours:
            check_ours(path, option, shown=given)
        made = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a"):
            pass
    except OSError as exc:
        raise refuse(exc.strerror or str(exc)) from None
    finally:
        if not existed:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        for d in made:  # deepest first: the probe leaves no folders behind, whether the output is refused here or
            with contextlib.suppress(OSError):  # the command fails later; its writer makes them (write_whole)
                d.rmdir()


# The first bytes of what rightsize writes: a report's "· rightsize 0.1.0" stamp or generator tag, an export's JSON
# head or one of its CSV headers (results._export; an export of no measurements is the header "model" alone). A bare
# "rightsize 1.0" in a user's notes had let `report -o notes.md` replace them.
_OURS = re.compile(
    rb'\xc2\xb7 rightsize \d+\.\d+\.\d+|<meta name="generator" content="rightsize|^\{\s*"measurements":'
    rb"|^(model,mode,device,precision,batch_size|id,created_at,name,model,kind|artifact_id,run_id,created_at,name,"
    rb"model|id,kind,created_at,url,mode),|^model\r?\n?$"
    rb'|^\{"id": -?\d+, "label": -?\d+, "score": '  # a pipeline's JSON lines (cluster.pipeline.ResultWriter)
)


def check_ours(path: Path, option: str, shown: Path | None = None) -> None:
    """Refuse (naming ``option``) to replace an existing non-empty ``path`` rightsize did not write."""
    from rightsize.errors import SpecError
    from rightsize.inputfile import short

    if path.is_file() and not written_by_rightsize(path):
        raise SpecError(option, f"{short(str(shown or path))} exists and was not written by rightsize; its contents "
                        "would be lost: choose another file, or remove it first")  # fmt: skip


def written_by_rightsize(path: Path) -> bool:
    """Whether ``path`` is empty or one of rightsize's own reports or exports (its first 64 KiB say so)."""
    with path.open("rb") as f:
        head = f.read(65536)
    if head.startswith(b"PAR1"):  # a pipeline's Parquet: its id, label, score columns (`--output` had replaced any)
        try:
            import pyarrow.parquet as pq

            return pq.read_schema(path).names == ["id", "label", "score"]
        except Exception:  # no pyarrow, or not a whole Parquet file: not known to be ours
            return False
    return not head or _OURS.search(head) is not None


def _is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with the SQLite 3 file header (https://www.sqlite.org/fileformat.html, 1.3)."""
    with path.open("rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file (through links and relative paths), existing or not."""
    try:
        if a.exists() and b.exists():
            return a.samefile(b)
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False


_json_stdout: TextIO | None = None  # the real stdout while a --json command runs (``json_stdout``)


@contextlib.contextmanager
def options_named(names: dict[str, str]) -> Iterator[None]:
    """Re-raise a SpecError naming an API argument (``batch``) as this command's option (``--batch``): every
    other error names the option the user typed."""
    from rightsize.errors import SpecError

    try:
        yield
    except SpecError as exc:
        if exc.field not in names:
            raise
        raise SpecError(names[exc.field], exc.problem) from None


@contextlib.contextmanager
def json_stdout(active: bool) -> Iterator[None]:
    """With --json, stdout holds one JSON document: what else writes to ``sys.stdout`` meanwhile (a user model's
    print in forward(), a library's banner) goes to stderr, and ``emit_json`` writes to the real stdout. Only a
    factory's own prints had been sent aside, so ``memory --json`` on a model that prints in forward() was no JSON."""
    global _json_stdout
    if not active:
        yield
        return
    real = sys.stdout
    _json_stdout, sys.stdout = real, sys.stderr
    try:
        yield
    finally:
        sys.stdout, _json_stdout = real, None


def emit_json(obj: Any, one_line: bool = False) -> None:
    """``obj`` as JSON on stdout (the real one under ``json_stdout``); ``one_line`` for a line a caller reads while
    the command keeps running (a server's address)."""
    out = _json_stdout or sys.stdout
    out.write((json.dumps(json.loads(to_json(obj))) if one_line else to_json(obj)) + "\n")
    out.flush()
