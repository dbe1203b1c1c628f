"""One client for the language model, two transports: an OpenAI-compatible endpoint over HTTP (``HttpTransport``)
and the LLM deployment of this application by its Serve handle (``serve_app.handles.ServeChatTransport``). Callers
(the instruction interpreter, the compliance gate) ask ``LlmClient.ask_json`` for one JSON object that follows a
schema and validate it themselves; they never know which transport carried it. No Ray here.

Every failure (unreachable, an HTTP or engine error, past the timeout, a reply or an answer that is not JSON) is an
``LlmFailure`` whose message says why, so each caller falls back the same way.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import SecretStr

from serve_app.llm.config import LlmDeploymentArgs, LlmOptions, LlmRoute, StructuredOutput


class LlmFailure(Exception):
    """The model gave no usable answer; the message says why (callers put it in their notes)."""


class ChatTransport(Protocol):
    """How a chat completion request travels; ``where`` names the endpoint or deployment in messages."""

    where: str

    async def complete(self, body: Mapping[str, Any], timeout_s: float) -> Mapping[str, Any]:
        """The chat completion (OpenAI's JSON shape) for ``body``, or ``LlmFailure``."""
        ...


class HttpTransport:
    """``POST {base_url}/chat/completions`` in a worker thread (the event loop keeps answering)."""

    def __init__(self, base_url: str, api_key: SecretStr | None = None) -> None:
        self.where = base_url
        self._api_key = api_key

    async def complete(self, body: Mapping[str, Any], timeout_s: float) -> Mapping[str, Any]:
        return await asyncio.to_thread(self._post, body, timeout_s)

    def _post(self, body: Mapping[str, Any], timeout_s: float) -> Mapping[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        request = urllib.request.Request(
            f"{self.where}/chat/completions", data=json.dumps(body).encode("utf-8"), headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as reply:
                payload = json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            raise LlmFailure(f"HTTP {exc.code} from {self.where}") from None
        except urllib.error.URLError as exc:
            raise LlmFailure(f"{self.where} unreachable: {exc.reason}") from None
        except TimeoutError:
            raise LlmFailure(f"no answer within {timeout_s:g} s") from None
        except (OSError, http.client.HTTPException) as exc:  # a reply cut short (IncompleteRead), a reset connection
            raise LlmFailure(f"the reply from {self.where} broke off: {type(exc).__name__}") from None
        except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past the parser's depth
            raise LlmFailure("the endpoint's reply is not JSON") from None
        if not isinstance(payload, Mapping):
            raise LlmFailure("the reply has no choices[0].message.content")
        return payload


class LlmClient:
    """The model ``model`` behind ``transport``; ``timeout_s``, ``max_tokens`` and how the schema is sent
    (``structured_output``) are the defaults of each request."""

    def __init__(
        self,
        transport: ChatTransport,
        model: str,
        *,
        timeout_s: float = 8.0,
        max_tokens: int = 400,
        structured_output: StructuredOutput = "response_format",
    ) -> None:
        self.transport = transport
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.structured_output = structured_output

    @classmethod
    def over_http(cls, options: LlmOptions) -> LlmClient:
        return cls(
            HttpTransport(options.base_url, options.api_key),
            options.model,
            timeout_s=options.timeout_s,
            max_tokens=options.max_tokens,
            structured_output=options.structured_output,
        )

    @classmethod
    def over(cls, transport: ChatTransport, args: LlmDeploymentArgs) -> LlmClient:
        """The LLM deployment's client (``transport``: its handle)."""
        return cls(
            transport,
            args.model_id,
            timeout_s=args.timeout_s,
            max_tokens=args.max_tokens,
            structured_output=args.structured_output,
        )

    async def ask_json(
        self,
        messages: Sequence[Mapping[str, Any]],
        schema: Mapping[str, Any],
        *,
        schema_name: str,
        timeout_s: float | None = None,
    ) -> Any:
        """The model's answer to ``messages``, parsed as JSON (not yet validated: the caller does that), within
        ``timeout_s`` (the client's by default)."""
        limit = timeout_s or self.timeout_s
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }
        if self.structured_output == "response_format":
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": schema_name, "schema": schema}}
        elif self.structured_output == "guided_json":
            body["guided_json"] = schema
        else:
            body["structured_outputs"] = {"json": schema}
        try:
            payload = await asyncio.wait_for(self.transport.complete(body, limit), limit)
        except TimeoutError:
            raise LlmFailure(f"no answer within {limit:g} s") from None
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LlmFailure("the reply has no choices[0].message.content") from None
        try:
            return json.loads(content)
        except (ValueError, TypeError, RecursionError):
            raise LlmFailure(f"the model's answer is not JSON: {str(content)[:80]!r}") from None


def language_model(route: LlmRoute, deployment: ChatTransport | None = None) -> LlmClient | None:
    """The app's client: over ``deployment`` (the LLM deployment's handle transport) when ``route`` names the
    deployment, over HTTP when it names an endpoint; None when it names neither."""
    if route.deployment is not None and deployment is not None:
        return LlmClient.over(deployment, route.deployment)
    if route.endpoint is not None:
        return LlmClient.over_http(route.endpoint)
    return None
