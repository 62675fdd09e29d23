"""An MCP server built with the official Python SDK whose tools run as long-running tasks (the
`io.modelcontextprotocol/tasks` extension of protocol 2026-07-28), served through the SDK's own
extension mechanism: `tools/call` answers with a task handle, and the client follows it with
`tasks/get`, answers its questions with `tasks/update` and stops it with `tasks/cancel`.

    python tasks_server.py PORT

Serves Streamable HTTP on http://127.0.0.1:PORT/mcp. Tools:

- `report(topic, steps)`: works through `steps` stages (a status message each), then completes.
- `clarify(topic)`: asks the person which meaning of the topic they want (a form), then
  completes with the answer.
- `broken(topic)`: fails with a JSON-RPC error after one stage.
- `endless(topic)`: works until it is cancelled.
- `cancelled_tasks()` (a plain tool): the ids of the tasks a client cancelled, in order, so a
  test can see that `tasks/cancel` reached the server.

The server and its tools name icons, good and bad, served from `/icons/` beside the endpoint:
the server's a real PNG (carrying a text chunk that must not survive), `report`'s inline, then
an SVG with a script that calls itself a PNG, a file too large, an address on a private network
and an SVG-only one. `GET /icons/seen` says which icon requests arrived and with which headers.

`chime()` returns a sound (a real WAV, and a page calling itself MP3) and a link to a resource
it serves (`music://chime/sheet`).
"""

import asyncio
import base64
import json
import secrets
import struct
import sys
import zlib
from datetime import UTC, datetime
from typing import Any

import uvicorn
from mcp.server import MCPServer
from mcp.server.extension import Extension, MethodBinding
from mcp_types import AudioContent, ContentBlock, Icon, RequestParams, ResourceLink, TextContent

port = int(sys.argv[1])
EXTENSION = "io.modelcontextprotocol/tasks"
POLL_MS = 200
STAGE_SECONDS = 0.4

tasks: dict[str, dict[str, Any]] = {}
cancelled: list[str] = []


def now() -> str:
    return datetime.now(UTC).isoformat()


def wire(task: dict[str, Any]) -> dict[str, Any]:
    """A task as `tasks/get` tells it: its status with what that status carries."""
    shown = {
        "taskId": task["taskId"],
        "status": task["status"],
        "createdAt": task["createdAt"],
        "lastUpdatedAt": task["lastUpdatedAt"],
        "ttlMs": 600000,
        "pollIntervalMs": POLL_MS,
    }
    if task.get("statusMessage"):
        shown["statusMessage"] = task["statusMessage"]
    if task["status"] == "input_required":
        shown["inputRequests"] = task["inputRequests"]
    if task["status"] == "completed":
        shown["result"] = task["result"]
    if task["status"] == "failed":
        shown["error"] = task["error"]
    return shown


def move(task: dict[str, Any], status: str, message: str | None = None) -> None:
    if task["status"] in ("completed", "failed", "cancelled"):
        return
    task["status"] = status
    task["statusMessage"] = message
    task["lastUpdatedAt"] = now()


def text_result(text: str) -> dict[str, Any]:
    # The tools return text, so their output schema (the SDK's) wants it as `result` too.
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"result": text},
        "isError": False,
    }


async def run(task: dict[str, Any], tool: str, arguments: dict[str, Any]) -> None:
    topic = str(arguments.get("topic", "something"))
    if tool == "report":
        steps = int(arguments.get("steps", 3))
        for step in range(1, steps + 1):
            move(task, "working", f"Stage {step} of {steps}: reading about {topic}")
            await asyncio.sleep(STAGE_SECONDS)
        move(task, "completed", "Report ready")
        task["result"] = text_result(f"A report on {topic} in {steps} stages.")
    elif tool == "clarify":
        move(task, "working", "Looking for meanings")
        await asyncio.sleep(STAGE_SECONDS)
        task["inputRequests"] = {
            "meaning": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": f"Which {topic} do you mean?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "meaning": {
                                "type": "string",
                                "title": "Meaning",
                                "oneOf": [
                                    {"const": "language", "title": "The programming language"},
                                    {"const": "snake", "title": "The snake"},
                                ],
                            }
                        },
                        "required": ["meaning"],
                    },
                },
            }
        }
        move(task, "input_required", "Waiting for your choice")
        answered = task["answered"]
        await answered.wait()
        response = task["responses"]["meaning"]
        move(task, "working", "Writing it up")
        await asyncio.sleep(STAGE_SECONDS)
        if response.get("action") == "accept":
            meaning = response.get("content", {}).get("meaning")
            text = f"{topic}, meaning {meaning}."
        else:
            text = f"{topic}: the question was answered with {response.get('action')}."
        move(task, "completed", "Done")
        task["result"] = text_result(text)
    elif tool == "broken":
        move(task, "working", "Trying")
        await asyncio.sleep(STAGE_SECONDS)
        move(task, "failed", "The archive is unreachable")
        task["error"] = {"code": -32603, "message": f"archive for {topic} unreachable"}
    else:  # endless
        while task["status"] == "working":
            move(task, "working", f"Still digging into {topic}")
            await asyncio.sleep(STAGE_SECONDS)


class TaskParams(RequestParams):
    taskId: str


class UpdateParams(RequestParams):
    taskId: str
    inputResponses: dict[str, Any] = {}


def known(task_id: str) -> dict[str, Any]:
    from mcp.shared.exceptions import MCPError

    task = tasks.get(task_id)
    if task is None:
        raise MCPError(code=-32602, message="Failed to retrieve task: Task not found")
    return task


async def get_task(ctx: Any, params: TaskParams) -> dict[str, Any]:
    return {"resultType": "complete", **wire(known(params.taskId))}


async def update_task(ctx: Any, params: UpdateParams) -> dict[str, Any]:
    task = known(params.taskId)
    if task["status"] == "input_required":
        for key, response in params.inputResponses.items():
            if key in task.get("inputRequests", {}):
                task["responses"][key] = response
        if all(k in task["responses"] for k in task["inputRequests"]):
            task["answered"].set()
    return {"resultType": "complete"}


async def cancel_task(ctx: Any, params: TaskParams) -> dict[str, Any]:
    task = known(params.taskId)
    cancelled.append(params.taskId)
    move(task, "cancelled", "Cancelled by the client")
    return {"resultType": "complete"}


class Tasks(Extension):
    identifier = EXTENSION

    def methods(self):
        return (
            MethodBinding("tasks/get", TaskParams, get_task),
            MethodBinding("tasks/update", UpdateParams, update_task),
            MethodBinding("tasks/cancel", TaskParams, cancel_task),
        )

    async def intercept_tool_call(self, params, ctx, call_next):
        declared = (ctx.session.client_capabilities.extensions or {}) if ctx.session.client_capabilities else {}
        if params.name not in ("report", "clarify", "broken", "endless") or EXTENSION not in declared:
            return await call_next(ctx)
        task_id = secrets.token_urlsafe(16)
        stamp = now()
        task = {
            "taskId": task_id,
            "status": "working",
            "statusMessage": "Queued",
            "createdAt": stamp,
            "lastUpdatedAt": stamp,
            "responses": {},
            "answered": asyncio.Event(),
        }
        tasks[task_id] = task
        asyncio.get_running_loop().create_task(run(task, params.name, params.arguments or {}))
        return {"resultType": "task", **wire(task)}


def png(side: int, rgb: tuple[int, int, int], text: bytes | None = None) -> bytes:
    """A square PNG of one colour, with a text chunk when given."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * side for _ in range(side))
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
    if text is not None:
        out += chunk(b"tEXt", b"Comment\x00" + text)
    return out + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


ORIGIN = f"http://127.0.0.1:{port}"
ICON_FILES = {
    "/icons/runner.png": ("image/png", png(64, (200, 40, 40), b"secret-metadata-of-the-icon")),
    "/icons/fake.png": ("image/png", b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'),
    "/icons/huge.png": ("image/png", png(8, (0, 0, 0))[:16] + b"\x00" * (600 * 1024)),
}
icon_requests: list[dict[str, str]] = []


def icon(src: str, mime: str | None = "image/png") -> list[Icon]:
    return [Icon(src=src, mime_type=mime, sizes=["64x64"])]


inline = "data:image/png;base64," + base64.b64encode(png(16, (40, 160, 40))).decode()

server = MCPServer(
    "task-runner",
    version="1.0.0",
    extensions=[Tasks()],
    icons=icon(f"{ORIGIN}/icons/runner.png"),
)


@server.tool(name="report", description="Writes a report on a topic, in stages.", icons=icon(inline))
def report(topic: str, steps: int = 3) -> str:
    return f"A report on {topic} in {steps} stages (not as a task)."


@server.tool(
    name="clarify",
    description="Asks which meaning of a topic is meant, then reports.",
    icons=icon(f"{ORIGIN}/icons/fake.png"),
)
def clarify(topic: str) -> str:
    return f"{topic} (not as a task)."


@server.tool(name="broken", description="Fails after a while.", icons=icon(f"{ORIGIN}/icons/huge.png"))
def broken(topic: str) -> str:
    return "not as a task"


@server.tool(
    name="endless",
    description="Works until it is cancelled.",
    icons=icon("http://169.254.169.254/latest/meta-data/icon.png"),
)
def endless(topic: str) -> str:
    return "not as a task"


@server.tool(
    name="cancelled_tasks",
    description="The ids of the tasks a client cancelled.",
    icons=icon(f"{ORIGIN}/icons/vector.svg", "image/svg+xml"),
)
def cancelled_tasks() -> list[str]:
    return cancelled


def wav(seconds: float) -> bytes:
    """A quiet 8 kHz mono tone as a WAV file."""
    frames = bytes((128 + (20 if (i // 8) % 2 else -20)) for i in range(int(8000 * seconds)))
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(frames), b"WAVE", b"fmt ", 16, 1, 1,
                         8000, 8000, 1, 8, b"data", len(frames))
    return header + frames


@server.tool(name="chime", description="Plays a chime and links to the sheet music.", structured_output=False)
def chime() -> list[ContentBlock]:
    return [
        TextContent(type="text", text="A chime, and its sheet music."),
        # Ten seconds: more than the text a model is given of a result, less than a sound kept.
        AudioContent(type="audio", data=base64.b64encode(wav(10.0)).decode(), mime_type="audio/wav"),
        # Audio that is no such thing: a page calling itself a sound.
        AudioContent(type="audio", data=base64.b64encode(b"<html><script>x</script></html>" * 4).decode(),
                     mime_type="audio/mpeg"),
        ResourceLink(type="resource_link", uri="music://chime/sheet", name="Chime sheet music",
                     mime_type="text/plain"),
    ]


@server.resource("music://chime/sheet", name="chime-sheet", mime_type="text/plain")
def chime_sheet() -> str:
    return "C E G C, softly."


mcp_app = server.streamable_http_app()


async def app(scope, receive, send):
    path = scope.get("path", "") if scope["type"] == "http" else ""
    if not path.startswith("/icons/"):
        await mcp_app(scope, receive, send)
        return
    if path == "/icons/seen":
        kind, body = "application/json", json.dumps(icon_requests).encode()
    else:
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers") or []}
        icon_requests.append({"path": path, **headers})
        kind, body = ICON_FILES.get(path, ("text/plain", b""))
    status = 200 if body else 404
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind.encode())]})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
