"""``portrait``: the command line. ``portrait models list|pull`` manages the model store; ``portrait process``
runs a job over objects already in a bucket or folder; ``portrait keys create`` makes an API key."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping

from deployments.common.download import plan_pull, pull, read_provenance
from deployments.common.errors import InvalidParameter, PortraitError
from deployments.common.transfer import StreamProgress
from deployments.common.weights import ModelSpec, default_models, group_models
from serve_app.settings import Settings


def _models_list(settings: Settings, args: argparse.Namespace) -> int:
    statuses = settings.open_model_store().statuses()
    if args.json:
        records = []
        for status in statuses:
            record = read_provenance(status.path)
            records.append(status.to_json() | {"provenance": record.to_json() if record is not None else None})
        print(json.dumps(records, indent=2))
    elif args.sources:
        print(f"model store: {settings.model_store}")
        print(f"{'name':<24}{'state':<18}{'via':<8}{'fetched (UTC)':<27}source")
        for status in statuses:
            record = read_provenance(status.path)
            if record is None:
                origin = "-" if status.state.value == "missing" else "no record (not fetched by pull)"
                print(f"{status.spec.name:<24}{status.state.value:<18}{'-':<8}{'-':<27}{origin}")
                continue
            print(
                f"{status.spec.name:<24}{status.state.value:<18}{record.via:<8}{record.fetched_at:<27}{record.source}"
            )
            if status.sha256 is not None and status.sha256 != record.sha256:
                print(f"{'':<24}the file changed since: sha256 {status.sha256}, recorded {record.sha256}")
    else:
        print(f"model store: {settings.model_store}")
        print(f"{'name':<24}{'state':<18}{'task':<20}file")
        for status in statuses:
            print(f"{status.spec.name:<24}{status.state.value:<18}{status.spec.task:<20}{status.path}")
            if status.spec.label:
                print(f"{'':<24}{status.spec.label}")
            if status.state.value == "hash-mismatch":
                print(f"{'':<24}sha256 {status.sha256} != {status.spec.sha256 or 'the recorded hash'}")
    builtin_bad = [s for s in statuses if s.spec.builtin and not s.usable]
    return 1 if any(s.state.value.endswith("mismatch") for s in statuses) or builtin_bad else 0


def _pull_selection(manifest: Mapping[str, ModelSpec], args: argparse.Namespace) -> list[str]:
    """The models a pull names: ``--all``, or the union of ``--builtin``, ``--default``, ``--group`` and explicit
    names."""
    if args.all:  # every file; a whole repository (the LLM's) is vLLM's to fetch, a group is fetched by --group
        return sorted(name for name, spec in manifest.items() if spec.repo is None and spec.group is None)
    names = list(args.names)
    if args.builtin:
        names += sorted(name for name, spec in manifest.items() if spec.builtin)
    if args.default:
        names += default_models(manifest)
    for group in args.group or ():
        found = group_models(manifest, group)
        if not found:
            groups = sorted({spec.group for spec in manifest.values() if spec.group})
            raise InvalidParameter(f"no models in group {group!r}; groups: {', '.join(groups) or 'none'}")
        names += found
    return list(dict.fromkeys(names))


def _models_pull(settings: Settings, args: argparse.Namespace) -> int:
    store = settings.open_model_store()
    try:
        names = _pull_selection(store.manifest, args)
    except InvalidParameter as exc:
        print(exc.message, file=sys.stderr)
        return 2
    if not names:
        print("name a model, or pass --default, --builtin, --group NAME or --all", file=sys.stderr)
        return 2
    try:
        if args.best_effort:
            plan = plan_pull(store, names, mirror=settings.models_mirror)
            if plan.notice:
                print(plan.notice, file=sys.stderr)
            names = plan.fetch
        for name in names:
            spec = store.spec(name)
            if not spec.commercial_use and (args.force or not store.status(name).usable):
                print(f"{name}: licence: {spec.license} (not in --default: check it allows your use)", file=sys.stderr)
        progress = StreamProgress(sys.stderr)
        outcomes = pull(store, names, mirror=settings.models_mirror, progress=progress, force=args.force)
    except PortraitError as exc:
        print(f"pull failed: {exc.message}", file=sys.stderr)
        return 0 if args.best_effort else 1
    for outcome in outcomes:
        print(f"{outcome.status.spec.name:<24}{outcome.status.state.value:<18}{outcome.status.path}")
        if outcome.error is not None:
            print(f"{'':<24}{outcome.error.message}")
    if not all(outcome.ok for outcome in outcomes):
        where = (
            f"add the files to the mirror {settings.models_mirror} (same layout as the store)"
            if settings.models_mirror
            else "set PORTRAIT_MODELS_MIRROR to a mirror of the store"
        )
        print(
            f"without internet: {where}, or copy each file by hand to the path above (`portrait models list` checks)",
            file=sys.stderr,
        )
        return 0 if args.best_effort else 1
    return 0


def _process(settings: Settings, args: argparse.Namespace) -> int:
    """Backfill: every object under ``args.uri`` through a job, results and records beside them in ``--out``."""
    import asyncio

    from serve_app.backfill import ProgressBar, backfill, http_executor
    from serve_app.jobs import job_context
    from serve_app.runner.worker import job_executor
    from storage.base import StoreSettings

    context = job_context(settings)
    try:
        task, params = args.task, json.loads(args.params)
        if args.prompt is not None:
            task, params = _read_prompt(args.prompt, params, context)
        if args.local:
            from serve_app.local_backend import in_process_backend

            execute = job_executor(in_process_backend(settings.open_model_store()), context)
        else:
            execute = http_executor(args.url)
        summary = asyncio.run(
            backfill(
                args.uri,
                task,
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


def _read_prompt(prompt: str, params: dict, context) -> tuple[str, dict]:
    """The job a ``--prompt`` asks for (read by the rules), ``--params`` over its options; says what it understood."""
    from serve_app.instructions import rule_interpreter

    instruction = rule_interpreter(context).interpret_now(prompt)
    fields = {**instruction.fields(), **params}
    print(
        f"{instruction.task} {json.dumps(fields, ensure_ascii=False)}: {'; '.join(instruction.notes)}", file=sys.stderr
    )
    return instruction.task, fields


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="portrait", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    models = commands.add_parser("models", help="manage the model store").add_subparsers(dest="action", required=True)
    listing = models.add_parser("list", help="present / missing / hash mismatch for every model in the manifest")
    listing.add_argument("--json", action="store_true", help="everything, with each file's download record")
    listing.add_argument("--sources", action="store_true", help="where each file came from, and when")
    listing.set_defaults(run=_models_list)
    pull = models.add_parser(
        "pull",
        help="fetch weights into the store and verify their sha256",
        description="Fetch weights into the store and verify them. PORTRAIT_MODELS_MIRROR=http://host/path (or "
        "s3://bucket/prefix) replaces every model's download host: files come from <mirror>/<file>.",
    )
    pull.add_argument("names", nargs="*")
    pull.add_argument(
        "--default", action="store_true", help="every model whose licence allows any use (alternates only when named)"
    )
    pull.add_argument("--builtin", action="store_true", help="the MediaPipe models, from the package registry")
    pull.add_argument("--all", action="store_true", help="every model, restricted licences included (groups aside)")
    pull.add_argument(
        "--group",
        action="append",
        metavar="NAME",
        help="every model of a manifest group: `generative` (the renderer's SDXL, InstructPix2Pix, ControlNets, "
        "IP-Adapter: ~32 GB)",
    )
    pull.add_argument("--force", action="store_true", help="fetch again even when present")
    pull.add_argument(
        "--best-effort",
        action="store_true",
        help="never fail: skip hosts that do not answer within seconds, with a one-line notice (make run)",
    )
    pull.set_defaults(run=_models_pull)
    process = commands.add_parser("process", help="run a job over every object under a prefix or folder (backfill)")
    process.add_argument("uri", help="s3://bucket/prefix or a local folder")
    job = process.add_mutually_exclusive_group(required=True)
    job.add_argument("--task", help="restore, idphoto, cartoon...")
    job.add_argument("--prompt", help="the job in plain language instead of --task, e.g. '蓝底一寸证件照 不超过50KB'")
    process.add_argument("--params", default="{}", help='job params as JSON, e.g. \'{"spec": "us-passport"}\'')
    process.add_argument("--out", help="where results go (default: <uri>-results)")
    process.add_argument("--url", default="http://127.0.0.1:8000", help="the running service")
    process.add_argument("--local", action="store_true", help="run the engines in this process instead of --url")
    process.add_argument("--concurrency", type=int, default=4, help="objects in flight")
    process.add_argument("--endpoint-url", help="S3 endpoint (MinIO, SeaweedFS...); AWS when absent")
    process.set_defaults(run=_process)
    buckets = commands.add_parser("buckets", help="prepare S3/MinIO for bucket routes").add_subparsers(
        dest="action", required=True
    )
    setup = buckets.add_parser(
        "setup", help="a Serve YAML's routes: make their buckets, MinIO's webhook target and the event rules"
    )
    setup.add_argument("config", help="the Serve YAML whose BucketRunner routes to prepare")
    setup.add_argument("--webhook-endpoint", help="where MinIO posts events, e.g. http://serve-host:8000/v1/events/s3")
    setup.add_argument("--token", help="the bearer token the service checks (PORTRAIT_EVENTS_TOKEN)")
    setup.add_argument("--target-id", default="portrait", help="MinIO's webhook target id (arn:minio:sqs::ID:webhook)")
    setup.add_argument("--arn", help="notify this existing target instead (skips the webhook set-up)")
    setup.set_defaults(run=_buckets_setup)
    keys = commands.add_parser("keys", help="API keys (docs/operations.md: Keys and quotas)").add_subparsers(
        dest="action", required=True
    )
    create = keys.add_parser("create", help="print a new key once, and the entry to paste under args.auth.keys")
    create.add_argument("--id", required=True, help="the customer's name: labels metrics, owns jobs")
    create.add_argument("--rate-per-s", type=float, help="sustained requests per second")
    create.add_argument("--burst", type=int, help="requests allowed at once")
    create.add_argument("--daily-quota", type=int, help="jobs per UTC day")
    create.add_argument("--tasks", help="comma-separated jobs the key may run (default: every job)")
    create.add_argument("--callback-secret", action="store_true", help="add a secret that signs this key's callbacks")
    create.set_defaults(run=_keys_create)
    return parser


def _buckets_setup(settings: Settings, args: argparse.Namespace) -> int:
    import yaml

    from serve_app.jobs import job_context
    from serve_app.runner.config import RunnerConfig
    from serve_app.runner.routing import build_routing_table
    from serve_app.runner.triggers.minio_setup import WebhookTarget, setup_buckets

    with open(args.config, encoding="utf-8") as handle:
        serve_config = yaml.safe_load(handle) or {}
    runner = [
        deployment
        for application in serve_config.get("applications", [])
        for deployment in application.get("deployments", [])
        if deployment.get("name") == "BucketRunner"
    ]
    config = RunnerConfig.model_validate((runner[0].get("user_config") if runner else None) or {})
    table = build_routing_table(config.routes, job_context(settings), base_dir=settings.buckets_root)
    webhook = None
    if args.webhook_endpoint and not args.arn:
        if not args.token:
            print("--token is required with --webhook-endpoint (the service's PORTRAIT_EVENTS_TOKEN)", file=sys.stderr)
            return 2
        webhook = WebhookTarget(args.target_id, args.webhook_endpoint, args.token)
    for line in setup_buckets(table.routes, webhook=webhook, arn=args.arn):
        print(line)
    return 0


def _keys_create(settings: Settings, args: argparse.Namespace) -> int:
    """A new API key, printed once, and the entry (its sha256, never the key) to paste under ``args.auth.keys``."""
    import secrets

    import yaml

    from serve_app.auth import ApiKeyIn, hash_key, new_key

    key = new_key()
    entry = {
        "id": args.id,
        "sha256": hash_key(key),
        "rate_per_s": args.rate_per_s,
        "burst": args.burst,
        "daily_quota": args.daily_quota,
        "tasks": args.tasks.split(",") if args.tasks else None,
        "callback_secret": secrets.token_hex(32) if args.callback_secret else None,
    }
    entry = {name: value for name, value in entry.items() if value is not None}
    ApiKeyIn.model_validate(entry)  # the entry the service will read: refused here, not at deploy time
    print(f"key (shown once; give it to {args.id}): {key}")
    if args.callback_secret:  # a secret: never in the Serve arguments, which Ray logs
        print("entry for args.auth.keys_file (a mounted secret; not args.auth.keys, which Ray logs):")
    else:
        print("entry for args.auth.keys (or args.auth.keys_file):")
    print(yaml.safe_dump([entry], sort_keys=False, allow_unicode=True).rstrip())
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return args.run(Settings(), args)


if __name__ == "__main__":
    sys.exit(main())
