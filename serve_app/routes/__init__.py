"""The HTTP API as a FastAPI app factory that only assembles routers, one per concern. No Ray imports: the backend
arrives through ``app.state``."""

from fastapi import FastAPI

from serve_app import __version__
from serve_app.auth import install_key_guard
from serve_app.auth.routes import router as usage_routes
from serve_app.errors import install_error_handlers
from serve_app.instructions import InstructionsConfig
from serve_app.jobs_api.routes import router as async_job_routes
from serve_app.openai_api import router as plain_language_routes
from serve_app.routes.catalog import router as catalog_routes
from serve_app.routes.health import router as health_routes
from serve_app.routes.hivision import router as hivision_routes
from serve_app.routes.jobs import router as job_routes
from serve_app.runner.triggers.webhook import install_event_routes
from serve_app.upload_budget import install_upload_budget
from serve_app.webpage import install_web_page


def create_api() -> FastAPI:
    """Build the API; the caller attaches ``app.state.backend`` (and optionally the settings, the key gate and the
    instructions config, whose default is attached here): ``serve_app.app_state`` reads them."""
    api = FastAPI(
        title="portrait-serve",
        version=__version__,
        description=(
            "Portrait jobs on Ray Serve: face restoration (restore), ID photos whole or step by step (idphoto, "
            "idphoto-<step>), cartoonization (cartoon) and colorization (colorize); videos, asynchronous jobs, "
            "plain-language and OpenAI-compatible requests, HivisionIDPhotos' API and bucket events."
        ),
    )
    api.state.instructions = InstructionsConfig()
    install_error_handlers(api)
    install_key_guard(api)  # API keys, when configured: before any route
    install_upload_budget(api)  # request bodies admitted by bytes in flight (outermost: released last)
    install_event_routes(api)
    install_web_page(api)
    api.include_router(plain_language_routes)  # /v1/instructions and the OpenAI-compatible routes
    api.include_router(health_routes)
    api.include_router(catalog_routes)
    api.include_router(job_routes)
    api.include_router(usage_routes)
    api.include_router(async_job_routes)  # /v1/jobs: needs app.state.jobs
    api.include_router(hivision_routes)  # HivisionIDPhotos' API at its paths (/idphoto, /human_matting, ...)
    return api
