"""HivisionIDPhotos' endpoints at its paths (``/idphoto``, ``/human_matting``, ...), for the clients written against
its ``deploy_api.py``: a wire mapping and nothing more. Its form -> our options (``serve_app.hivision_wire``) ->
``run_job`` of the matching registry job (``/idphoto`` -> ``idphoto``, ``/human_matting`` -> ``idphoto-matte``,
``/idphoto_crop`` -> ``idphoto-crop``, ...: ``ENDPOINTS``) -> its JSON keys. So its calls are counted in the job
metrics, pass the registry's media check and resolve ID specs as ``/v1/<job>`` calls do; what they do differently
from ours is an option of the job (e.g. ``hd_dpi``: its HD copy at the request's ``dpi``, where ``/v1/idphoto`` keeps
the physical size), never image work here.

Its answers are always HTTP 200 with ``status``; ours keep that for what its server answers with ``status: false``
(no face, or more than one) and give the caller's mistakes their 4xx (422, 413, 415...) with the same body shape:
``{"status": false, "error": {"code", "message"}}``, so a client that reads ``status`` keeps working and one that
reads the HTTP status learns more. Our bugs stay 500 with a request id.

(No ``from __future__ import annotations`` here: FastAPI resolves the route annotations at run time.)
"""

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from deployments.common.errors import InvalidParameter, NoFaceFound, PortraitError
from serve_app.app_state import backend_of, settings_of
from serve_app.auth.caller import require_task
from serve_app.byte_caps import media_caps
from serve_app.deadlines import within_request_timeout
from serve_app.errors import error_body
from serve_app.hivision_wire import ENDPOINTS, Endpoint, FaceCount, base64_image, parse_form
from serve_app.jobs import job_context, parse_job_params, run_job
from serve_app.uploads import UploadCap, media_type, parsed_form, read_body

TASK = "idphoto"  # an API key limited to other tasks may not call these routes
FILE_FIELD = "input_image"

router = APIRouter(tags=["HivisionIDPhotos compatibility"])


async def _answer(request: Request, endpoint: Endpoint) -> JSONResponse:
    """Read its form, run the endpoint's job within the request timeout, answer in its shape (module docstring)."""
    try:
        require_task(TASK)
        settings = settings_of(request)
        context = job_context(settings)
        data, fields = await _read_form(request, settings.max_image_bytes, settings.body_timeout_s)
        form, ignored = parse_form(endpoint.form, fields)
        if data is None:
            if form.input_image_base64 is None:
                raise InvalidParameter(f"send the image as file field '{FILE_FIELD}' or as 'input_image_base64'")
            data = base64_image(form.input_image_base64)
        params = parse_job_params(endpoint.job, endpoint.options(form), context)
        job = run_job(backend_of(request), endpoint.job, data, params, context)
        answer = endpoint.answer(form, await within_request_timeout(job, settings))
    except NoFaceFound as exc:
        return _face_count(FaceCount(exc.details.get("face_count", 0)))
    except FaceCount as exc:
        return _face_count(exc)
    except PortraitError as exc:
        if exc.http_status >= 500:
            raise  # our fault: the app's handler answers 500/503 with the request id
        body = {"status": False, **error_body(exc.code, exc.message, exc.details)}
        return JSONResponse(body, status_code=exc.http_status)
    return JSONResponse({"status": True, **answer, **({"ignored_fields": ignored} if ignored else {})})


def _face_count(exc: FaceCount) -> JSONResponse:
    """Not one face: HTTP 200 ``status: false``, as its server answers, saying how many."""
    return JSONResponse({"status": False, **error_body("face_count", str(exc), {"face_count": exc.count})})


async def _read_form(request: Request, max_image_bytes: int, timeout_s: float) -> tuple[bytes | None, dict]:
    """The file ``input_image`` (if sent) and the text fields, query-string ones first (its watermark style options
    and its crop example's ratios arrive there); a form field of the same name wins."""
    content_type = media_type(request)
    if content_type not in ("multipart/form-data", "application/x-www-form-urlencoded"):
        raise InvalidParameter(
            f"send a form (multipart or urlencoded), as HivisionIDPhotos' API takes; got {content_type!r}"
        )
    # The image may arrive as base64 in a text field: allow for its growth as the JSON routes do.
    cap = UploadCap(media_caps(max_image_bytes, None), content_type, base64_fields=True)
    body = await read_body(request, cap=cap, timeout_s=timeout_s)
    fields: dict[str, Any] = dict(request.query_params)
    data = None
    async with parsed_form(request, body) as form:
        for key, value in form.multi_items():
            if isinstance(value, UploadFile):
                if key == FILE_FIELD:
                    data = await value.read()
            else:
                fields[key] = value
    return data, fields


def _route(endpoint: Endpoint):
    async def hivision_route(request: Request) -> JSONResponse:
        return await _answer(request, endpoint)

    return hivision_route


for _path, _endpoint in ENDPOINTS.items():
    router.add_api_route(_path, _route(_endpoint), methods=["POST"], summary=_endpoint.summary, name=f"hivision{_path}")
