"""An MCP server built with the official Python SDK whose catalogue looks like a gateway's
(MCPHub, MCPJungle): tools of several servers behind one endpoint, told apart by prefixes,
plus names with dots and odd characters, a resource, a template, a prompt and instructions.
Tools named `gateway-*` change the catalogue at run time (add, remove, redescribe a tool, replace
the instructions), as a gateway does when a server is plugged in behind it.

    python gateway_server.py PORT [TOKEN]

Serves Streamable HTTP on http://127.0.0.1:PORT/mcp. With TOKEN, every request must carry
`Authorization: Bearer TOKEN` (401 otherwise), as a gateway with an access token does.
"""

import sys

import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)

port = int(sys.argv[1])
token = sys.argv[2] if len(sys.argv) > 2 else None

server = MCPServer(
    "fake-gateway",
    version="9.8.7",
    instructions="Tools of three servers: Chatto, home-assistant and Infomaniak_Mail.",
)


@server.tool(name="Chatto-send_message", description="Send a message to a Chatto room.")
def send_message(room: str, text: str) -> str:
    return f"sent to {room}: {text}"


@server.tool(name="Chatto-list_rooms", description="List the Chatto rooms.")
def list_rooms() -> list[str]:
    return ["general", "random"]


@server.tool(
    name="home-assistant-turn_on",
    title="Switch a device on",
    description="Turn on a device.",
    annotations=ToolAnnotations(destructiveHint=False, idempotentHint=True, openWorldHint=False),
)
def turn_on(entity_id: str) -> str:
    return f"{entity_id} is on"


@server.tool(
    name="home-assistant-turn_off",
    description="Turn off a device.",
    annotations=ToolAnnotations(title="Switch a device off", destructiveHint=True),
)
def turn_off(entity_id: str) -> str:
    return f"{entity_id} is off"


@server.tool(
    name="home-assistant-set_thermostat",
    description="Set a room's thermostat; asks the person which temperature.",
)
async def set_thermostat(room: str, ctx: Context):
    # Protocol 2026-07-28: the question goes back as an `input_required` result, and the
    # client calls again with the answer.
    answers = ctx.input_responses or {}
    if "temperature" not in answers:
        schema = {
            "type": "object",
            "properties": {
                "celsius": {"type": "integer", "title": "Temperature (°C)", "minimum": 10,
                            "maximum": 30, "default": 20},
                "mode": {"type": "string", "title": "Mode",
                         "oneOf": [{"const": "comfort", "title": "Comfort"},
                                   {"const": "eco", "title": "Eco"}]},
            },
            "required": ["mode"],
        }
        question = ElicitRequest(params=ElicitRequestFormParams(
            message=f"Which temperature for the {room}?", requested_schema=schema))
        return InputRequiredResult(input_requests={"temperature": question})
    answer = answers["temperature"]
    if not isinstance(answer, dict):
        answer = answer.model_dump(by_alias=True, exclude_none=True)
    if answer.get("action") != "accept":
        return f"thermostat of the {room} left alone: the person chose {answer.get('action')}"
    content = answer.get("content") or {}
    return f"thermostat of the {room} set to {content.get('celsius')} °C, {content.get('mode')}"


@server.tool(
    name="gateway-summarize",
    description="Summarize a text; asks the client's model (sampling, on 2026-07-28).",
)
async def summarize(text: str, ctx: Context):
    answers = ctx.input_responses or {}
    if "summary" not in answers:
        request = CreateMessageRequest(params=CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(text=f"Summarize: {text}"))],
            system_prompt="Answer in one sentence.",
            max_tokens=40,
        ))
        return InputRequiredResult(input_requests={"summary": request})
    answer = answers["summary"]
    if not isinstance(answer, dict):
        answer = answer.model_dump(by_alias=True, exclude_none=True)
    if "error" in answer:
        return f"no summary: {answer['error'].get('message')}"
    return f"summary by {answer.get('model')}: {answer.get('content', {}).get('text')}"


@server.tool(name="Infomaniak_Mail-search.messages", description="Search mail.")
def search_messages(query: str) -> str:
    return f"no mail matches {query}"


@server.tool(name="odd.name-with_mixed.Chars", description="A name with dots and mixed case.")
def odd() -> str:
    return "odd"


@server.tool(name="gateway-fail", description="Always fails.")
def fail() -> str:
    raise ValueError("the device is unreachable")


@server.tool(name="gateway-add_tool", description="Adds a tool and announces the change.")
async def add_tool(name: str, ctx: Context) -> str:
    def added() -> str:
        return "new"

    server.add_tool(added, name=name, description="Added at run time.")
    await ctx.notify_tools_changed()
    return f"added {name}"


@server.tool(name="gateway-remove_tool", description="Removes a tool and announces the change.")
async def remove_tool(name: str, ctx: Context, announce: bool = True) -> str:
    # announce=False: a gateway that changes its catalogue without a word (clients learn of
    # it when the list's freshness, ttlMs, runs out).
    server.remove_tool(name)
    if announce:
        await ctx.notify_tools_changed()
    return f"removed {name}"


@server.tool(
    name="gateway-redescribe_tool",
    description="Gives a tool a new description (its definition changes) and announces it.",
)
async def redescribe_tool(name: str, description: str, ctx: Context) -> str:
    server.remove_tool(name)

    def redescribed() -> str:
        return "redescribed"

    server.add_tool(redescribed, name=name, description=description)
    await ctx.notify_tools_changed()
    return f"redescribed {name}"


@server.tool(name="gateway-set_instructions", description="Replaces the server's instructions.")
def set_instructions(text: str) -> str:
    server._lowlevel_server.instructions = text
    return "instructions replaced"


@server.resource("gateway://status", name="status", mime_type="text/plain")
def status() -> str:
    return "all servers up"


@server.resource("gateway://rooms/{room}/messages", name="room_messages", mime_type="text/plain")
def room_messages(room: str) -> str:
    return f"messages of {room}"


@server.prompt(name="summarize_room", description="Summarize a room.")
def summarize_room(room: str) -> str:
    return f"Summarize the room {room}."


app = server.streamable_http_app()

if token is not None:
    inner = app

    async def app(scope, receive, send):  # noqa: F811 - wraps the app on purpose
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await inner(scope, receive, send)

uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
