"""The runner: what turns stored objects into results, exactly once, for bucket routes and asynchronous jobs alike.

Uploads to a bucket or folder trigger the same jobs as HTTP, results land in another location; an asynchronous job
(``POST /v1/jobs``, ``serve_app.jobs_api``) is an object in the jobs store, run by one internal route per task.

The worker (no Ray):

- ``routing``: routes as data (input → task + params → output) and the loop check;
- ``folders``: local-folder routes on a cluster (one absolute root, input folders that exist);
- ``config``: the ``BucketRunner`` ``user_config`` (routes, polling, concurrency, retries, SQS);
- ``worker``: ``BucketWorker``, the core (the webhook queue, reconcile/poll in chunks, one object at a time);
- ``attempts``: one object to one record: every step classified (``outcomes``), retried, recorded;
- ``outcomes``: what the worker says about objects and routes, and when it tries again;
- ``pending``: the bounded, deduplicated webhook queue and the per-name locks a reconfigure hands over;
- ``leases``: claims in the output, so two processes (a runner, ``portrait process``) never run one object twice;
- ``records``: the result and error records written beside results (shared with the backfill CLI);
- ``retention``: the sweep that deletes what expired;
- ``background``: work started now and finished later (endings, callbacks), awaited and logged;
- ``callbacks``: signed callbacks (the signature, the address rules, delivery with backoff);
- ``route_callbacks``: a bucket route's per-object callbacks, kept in its output until delivered.

The asynchronous jobs' half (no Ray; the HTTP side, ``serve_app.jobs_api``, imports these, never the reverse):

- ``jobs_config``: ``args.jobs`` (``JobsConfig``): the store, retention, queue depth, callbacks;
- ``jobs_layout``: where a job's pieces live in the jobs store, and what a job id says;
- ``jobs_records``: what the store holds about a job (``JobRecord``, ``JobState``) and its status JSON;
- ``jobs_store``: ``JobStore``, the jobs store over one ``ObjectStore``;
- ``jobs_runner``: ``JobsRunner``: the jobs' routes, admission, endings (callback, input deleted), the sweep.

Triggers (``triggers``): notification bodies (``events``), ``POST /v1/events/s3`` (``webhook``), the S3 → SQS
consumer (``sqs``), and ``portrait buckets setup`` for MinIO (``minio_setup``).

``deployment``: ``BucketRunner``, the only Ray code here.
"""
