"""`intellect shardcast publish|serve|relay|fetch`: the distribution on its own.

    intellect shardcast publish ckpt/step-3 --step 3 --model-name tiny --data-dir /srv/origin --port 8600
    intellect shardcast relay --upstream http://origin:8600 --data-dir /srv/relay --port 8601
    intellect shardcast fetch manifest.json out/step-3 --relay http://relay:8601
    intellect shardcast fetch bafkrei... out/step-3 --relay http://relay:8601 --ipfs embedded:~/.intellect/ipfs

Mount with `cli.add_command(shardcast)` from `intellect.sdk.shardcast.cli`; also runnable as
`python -m intellect.sdk.shardcast.cli`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import click

from .._errors import IntellectError
from ..ipfs import open_ipfs
from ._client import Client
from ._download import http_get
from ._errors import ManifestError, ShardcastError
from ._manifest import Manifest
from ._origin import DEFAULT_SHARD_SIZE, IpfsLike, Origin
from ._relay import Relay

__all__ = ["shardcast"]


def _open_ipfs(spec: str | None) -> IpfsLike | None:
    if not spec:
        return None
    return open_ipfs(spec)  # type: ignore[no-any-return]


def _write_url(url_file: Path | None, url: str) -> None:
    if url_file is not None:
        tmp = url_file.with_suffix(url_file.suffix + ".tmp")
        tmp.write_text(url + "\n")
        tmp.replace(url_file)


def _block_until_signal(stop: Any) -> None:
    ev = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: ev.set())
    ev.wait()
    stop()


@click.group(short_help="Distribute checkpoints through a Shardcast relay tree.")
@click.option("-v", "--verbose", count=True, help="-v for info logs, -vv for debug.")
def shardcast(verbose: int) -> None:
    """Publish, relay and fetch checkpoints (sha256-verified shards, IPFS manifests)."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


_common_server = [
    click.option("--data-dir", type=click.Path(path_type=Path), required=True, help="Where shards are kept."),
    click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on."),
    click.option("--port", default=0, show_default=True, help="Port to listen on (0: any free port)."),
    click.option("--keep", default=3, show_default=True, help="How many versions to keep; older are deleted."),
    click.option("--max-rate", type=int, default=None, help="Cap each response at this many bytes/s."),
    click.option("--url-file", type=click.Path(path_type=Path), default=None,
                 help="Write the listening URL to this file once serving."),
]


def _server_options(f: Any) -> Any:
    for opt in reversed(_common_server):
        f = opt(f)
    return f


@shardcast.command(short_help="Shard a checkpoint directory and serve it as an origin.")
@click.argument("checkpoint_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--step", type=int, required=True, help="Policy step of this checkpoint.")
@click.option("--model-name", required=True, help="Model name recorded in the manifest.")
@click.option("--shard-size", type=int, default=DEFAULT_SHARD_SIZE, show_default=True, help="Bytes per shard.")
@click.option("--relay-hint", "relay_hints", multiple=True, help="Relay URL to list in the manifest (repeat).")
@click.option("--ipfs", "ipfs_spec", default=None, help="IPFS to publish the manifest to (open_ipfs spec).")
@click.option("--manifest-out", type=click.Path(path_type=Path), default=None, help="Also write the manifest here.")
@click.option("--serve/--no-serve", default=True, show_default=True, help="Keep serving after publishing.")
@_server_options
def publish(checkpoint_dir: Path, step: int, model_name: str, shard_size: int, relay_hints: tuple[str, ...],
            ipfs_spec: str | None, manifest_out: Path | None, serve: bool, data_dir: Path, host: str, port: int,
            keep: int, max_rate: int | None, url_file: Path | None) -> None:
    """Shard CHECKPOINT_DIR, print the manifest id (and CID with --ipfs), and serve it."""
    origin = Origin(data_dir, ipfs=_open_ipfs(ipfs_spec), host=host, port=port, keep=keep, shard_size=shard_size,
                    relay_hints=relay_hints, max_rate=max_rate)
    try:
        manifest, cid = origin.publish(checkpoint_dir, step, model_name)
    except ShardcastError as e:
        raise click.ClickException(str(e)) from e
    if manifest_out is not None:
        manifest_out.write_bytes(manifest.to_bytes())
    click.echo(json.dumps({"manifest_id": manifest.id, "cid": cid, "shards": len(manifest.shards),
                           "total_size": manifest.total_size,
                           "delta_size": manifest.delta.size if manifest.delta is not None else None}))
    if serve:
        origin.start()
        click.echo(f"origin serving on {origin.url}", err=True)
        _write_url(url_file, origin.url)
        _block_until_signal(origin.stop)


@shardcast.command(short_help="Serve an origin data directory without publishing.")
@_server_options
def serve(data_dir: Path, host: str, port: int, keep: int, max_rate: int | None, url_file: Path | None) -> None:
    """Serve the versions already sharded into DATA_DIR (e.g. by `publish --no-serve`)."""
    origin = Origin(data_dir, host=host, port=port, keep=keep, max_rate=max_rate).start()
    click.echo(f"origin serving on {origin.url}", err=True)
    _write_url(url_file, origin.url)
    _block_until_signal(origin.stop)


@shardcast.command(short_help="Run a relay that follows one or more upstreams.")
@click.option("--upstream", "upstreams", multiple=True, required=True, help="Origin or relay URL (repeat).")
@click.option("--workers", default=4, show_default=True, help="Parallel shard downloads from upstreams.")
@click.option("--ram-mib", default=0, show_default=True, type=click.IntRange(min=0),
              help="RAM arena for the newest shards, allocated at start (0: all through the disk). "
                   "Shards in it are served from memory and written to disk when the relay is idle.")
@_server_options
def relay(upstreams: tuple[str, ...], workers: int, ram_mib: int, data_dir: Path, host: str, port: int, keep: int,
          max_rate: int | None, url_file: Path | None) -> None:
    """Follow UPSTREAMs, verify every shard, and serve them to clients and other relays."""
    try:
        r = Relay(list(upstreams), data_dir, keep=keep, host=host, port=port, workers=workers,
                  max_rate=max_rate, ram_bytes=ram_mib * 2**20).start()
    except OSError as e:
        raise click.ClickException(f"cannot set up the relay: {e}") from e
    click.echo(f"relay serving on {r.url}", err=True)
    _write_url(url_file, r.url)
    _block_until_signal(r.stop)


def _manifest_arg(spec: str, relays: list[str], client: Client) -> Manifest | str:
    if spec == "latest":
        if not relays:
            raise click.UsageError("'latest' needs --relay to ask")
        doc = json.loads(http_get(relays[0], "/versions"))
        if not doc.get("versions"):
            raise click.ClickException(f"{relays[0]} has no versions yet")
        vid = doc["versions"][-1]["id"]
        m = Manifest.from_bytes(http_get(relays[0], f"/versions/{vid}/manifest"))
        if m.id != vid:
            raise click.ClickException(f"{relays[0]} served a manifest that does not hash to {vid}")
        return m
    p = Path(spec)
    if p.is_file():
        return Manifest.from_bytes(p.read_bytes())
    if client.ipfs is None:
        raise click.UsageError(f"{spec!r} is not a manifest file; to fetch it as a CID pass --ipfs")
    return spec


@shardcast.command(short_help="Download a checkpoint from relays, verified, atomically.")
@click.argument("manifest")
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--relay", "relays", multiple=True, help="Relay (or origin) URL to fetch from (repeat).")
@click.option("--ipfs", "ipfs_spec", default=None, help="IPFS to read a manifest CID from (open_ipfs spec).")
@click.option("--workers", default=4, show_default=True, help="Parallel shard downloads.")
@click.option("--overwrite", is_flag=True, help="Replace OUT_DIR if it exists.")
@click.option("--verify-total/--no-verify-total", default=False, show_default=True,
              help="Also re-hash the written files against the whole-stream sha256 (a second pass; every "
                   "shard is always checked, and with them the manifest's root).")
@click.option("--fsync/--no-fsync", default=True, show_default=True, help="fsync files before the rename.")
@click.option("--direct-io/--buffered-io", default=True, show_default=True,
              help="Write shards with O_DIRECT where the file system allows it (no page-cache copy).")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a tty).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@click.option("--base", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="A local earlier checkpoint (the previous step): fetch only the manifest's delta against it "
                   "when it has one for exactly those files, else the full checkpoint.")
def fetch(manifest: str, out_dir: Path, relays: tuple[str, ...], ipfs_spec: str | None, workers: int,
          overwrite: bool, verify_total: bool, fsync: bool, direct_io: bool, progress: bool | None,
          as_json: bool, base: Path | None) -> None:
    """Fetch MANIFEST (a manifest JSON file, an IPFS CID with --ipfs, or 'latest' from the first relay)."""
    show = progress if progress is not None else sys.stderr.isatty()
    bar: Any = contextlib.nullcontext()
    on_progress = None
    if show:  # rich is imported only for a visible bar: every fetch process pays the import otherwise
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                       TransferSpeedColumn(), TimeRemainingColumn(), transient=False)
        task = bar.add_task("fetch", total=None)

        def on_progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

    client = Client(list(relays), ipfs=_open_ipfs(ipfs_spec), workers=workers, verify_total=verify_total,
                    fsync=fsync, direct_io=direct_io, on_progress=on_progress)
    try:
        m = _manifest_arg(manifest, list(relays), client)
        with bar:
            result = client.fetch_detailed(m, out_dir, overwrite=overwrite, base=base)
    except ManifestError as e:
        raise click.ClickException(f"manifest refused: {e}") from e
    except IntellectError as e:  # shardcast errors, and IPFS errors when resolving a CID
        raise click.ClickException(str(e)) from e
    summary = {"path": str(result.path), "manifest_id": result.manifest.id, "step": result.manifest.step,
               "downloaded_shards": result.downloaded_shards, "resumed_shards": result.resumed_shards,
               "downloaded_bytes": result.downloaded_bytes, "corrupt_dropped": result.corrupt_dropped,
               "failures": result.failures, "delta": result.delta, "delta_error": result.delta_error,
               "seconds": round(result.seconds, 3), "per_source": result.per_source}
    if as_json:
        click.echo(json.dumps(summary))
    else:
        click.echo(f"{result.path}: {result.manifest.total_size} bytes in {result.seconds:.2f} s "
                   f"({result.downloaded_shards} shards downloaded, {result.resumed_shards} resumed)", err=True)


def main() -> None:
    shardcast(auto_envvar_prefix="INTELLECT_SHARDCAST", prog_name="intellect shardcast")


if __name__ == "__main__":
    main()
