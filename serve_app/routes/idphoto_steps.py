"""``POST /v1/idphoto/<step>``: the ID photo one step at a time (``serve_app.jobs.idphoto_steps``), on the same
upload reader, errors and answers as the job routes (image bytes, or ``return=json`` with the metadata).

(No ``from __future__ import annotations`` here: FastAPI resolves the route annotations at run time.)
"""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from serve_app.app_state import backend_of, settings_of
from serve_app.auth.caller import require_task
from serve_app.deadlines import within_request_timeout
from serve_app.jobs import job_context
from serve_app.jobs.idphoto_steps import STEPS, Step, parse_step, run_step
from serve_app.schemas import ErrorOut
from serve_app.uploads import read_upload

_ERRORS = {status: {"model": ErrorOut} for status in (400, 403, 413, 415, 422, 503, 504)}

router = APIRouter(tags=["ID photo steps"])


def _step_route(step: Step):
    async def run(request: Request) -> Response:
        require_task("idphoto")  # a key limited to other tasks may not run its steps either
        settings = settings_of(request)
        upload = await read_upload(request, settings)
        context = job_context(settings)
        params = parse_step(step, upload.fields, context)
        result = await within_request_timeout(
            run_step(backend_of(request), step, upload.data, params, context), settings
        )
        if params.return_ == "json":
            return JSONResponse(result.to_json(), headers=result.headers())
        return Response(content=result.body, media_type=result.media_type, headers=result.headers())

    return run


for _step in STEPS.values():
    router.add_api_route(
        _step.route,
        _step_route(_step),
        methods=["POST"],
        name=f"idphoto_{_step.name}",
        summary=f"ID photo step: {_step.name}",
        description=(_step.run.__doc__ or "").strip() or None,
        responses={200: {"content": {"image/png": {}, "image/jpeg": {}}}, **_ERRORS},
    )
