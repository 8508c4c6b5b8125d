"""A Python client for warmdesk's hostd: desktops, screenshots, actions, the
vendors' computer-use adapters, windows, exec and files.

Standard library only. Every failure of the API raises WarmdeskError with
the API's code, field and message.

    from warmdesk import Client
    wd = Client()                          # WARMDESK_ADDR / WARMDESK_TOKEN, or hostd's files
    desk = wd.create("minimal")
    png = desk.screenshot()
    tool_results = desk.anthropic(tool_use_blocks, display=(1024, 640))
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["Client", "Desktop", "ExecResult", "Window", "WarmdeskError"]

DEFAULT_STATE_DIR = "/var/lib/warmdesk"

Display = Optional[Tuple[int, int]]


class WarmdeskError(Exception):
    """An error answer of the API: status, code, field and message."""

    def __init__(self, status: int, code: str, message: str, field: str = "", body: Any = None):
        super().__init__(f"{message} ({status} {code}" + (f", field {field})" if field else ")"))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        #: The whole answer, e.g. the is_error tool_result of an adapter.
        self.body = body


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_ms: float = 0.0


@dataclass
class Window:
    """A top-level window. x, y, width and height are its client area (the
    application's own pixels, inside the window manager's border and title
    bar), which move_window and resize_window place; frame is the whole
    window as the screen shows it, decorations included, as (x, y, width,
    height). Both in native pixels or the display the call declared."""

    id: str
    title: str
    class_: str
    instance: str
    pid: int
    workspace: int
    x: int
    y: int
    width: int
    height: int
    focused: bool
    frame: Tuple[int, int, int, int]

    @staticmethod
    def _of(d: Mapping[str, Any]) -> "Window":
        f = d.get("frame") or {"x": d["x"], "y": d["y"], "width": d["width"], "height": d["height"]}
        return Window(id=d["id"], title=d.get("title", ""), class_=d.get("class", ""), instance=d.get("instance", ""),
                      pid=d.get("pid", 0), workspace=d.get("workspace", 0), x=d["x"], y=d["y"],
                      width=d["width"], height=d["height"], focused=d.get("focused", False),
                      frame=(f["x"], f["y"], f["width"], f["height"]))


@dataclass
class Desktop:
    """A desktop, with the calls that act on it."""

    client: "Client" = field(repr=False)
    id: str
    name: str
    state: str
    snapshot: str
    screen: Optional[Tuple[int, int]] = None
    setup: Optional[dict] = None
    raw: dict = field(default_factory=dict, repr=False)

    # --- lifecycle ---------------------------------------------------

    def refresh(self) -> "Desktop":
        return self.client.desktop(self.id)

    def delete(self) -> None:
        self.client._call("DELETE", self._path(""))

    def pause(self) -> "Desktop":
        return self._op("pause")

    def resume(self) -> "Desktop":
        return self._op("resume")

    def hibernate(self) -> "Desktop":
        return self._op("hibernate")

    def wake(self) -> "Desktop":
        return self._op("wake")

    def fork(self, count: int = 1) -> list:
        out = self.client._call("POST", self._path("/fork"), {"count": count})
        return [self.client._desktop(d) for d in out.get("desktops", [])]

    def snapshot_as(self, name: str) -> dict:
        """Make a snapshot of this desktop (a template new desktops start from)."""
        return self.client._call("POST", self._path("/snapshot"), {"name": name})

    # --- screen and input ---------------------------------------------

    def screenshot(self, fmt: str = "png", settled: bool = False, width: Optional[int] = None,
                   height: Optional[int] = None) -> bytes:
        q = {"format": fmt}
        if width:
            q["width"] = str(width)
        if height:
            q["height"] = str(height)
        path = self._path("/screenshot/settled" if settled else "/screenshot")
        return self.client._call("GET", path + "?" + urllib.parse.urlencode(q), raw=True)

    def actions(self, actions: Sequence[Mapping[str, Any]], screenshot: bool = False,
                display: Display = None, **options: Any) -> dict:
        """Run canonical actions in order; options are the request's other
        fields (settle_ms, timeout_ms, reaction_ms, format)."""
        body = dict(options, actions=list(actions))
        if screenshot:
            body["screenshot"] = True
        if display:
            body["display_width"], body["display_height"] = display
        return self.client._call("POST", self._path("/actions"), body)

    def anthropic(self, calls: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]],
                  display: Display = None, tools: Optional[Sequence[Mapping[str, Any]]] = None) -> Union[dict, list]:
        """Run what Claude asked for. A list of content blocks, or the whole
        assistant message (a turn of the computer toolset), runs in order,
        stopping at the first failure, and returns the tool_result blocks
        for the next user message; a single input or tool_use block returns its
        tool_result (raising WarmdeskError, whose body holds the is_error
        tool_result, when it fails). tools, the request's tools array, has
        the toolset's configs honoured (a member turned off fails its call)."""
        path = self._path("/computer/anthropic") + _display_query(display, "display_width_px", "display_height_px")
        if tools is not None:
            content = calls.get("content", []) if isinstance(calls, Mapping) else list(calls)
            return self.client._call("POST", path, {"content": content, "tools": list(tools)})["content"]
        if isinstance(calls, Mapping):
            out = self.client._call("POST", path, calls)
            # A whole assistant message answers the next user message.
            return out["content"] if out.get("role") == "user" else out
        return self.client._call("POST", path, list(calls))["content"]

    def openai(self, computer_call: Mapping[str, Any], display: Display = None,
               acknowledge_safety_checks: Optional[Iterable[str]] = None) -> dict:
        """Run an OpenAI computer_call item and return its computer_call_output."""
        path = self._path("/computer/openai") + _display_query(display, "display_width", "display_height")
        if acknowledge_safety_checks is not None:
            path += ("&" if "?" in path else "?") + urllib.parse.urlencode(
                {"acknowledge_safety_checks": ",".join(acknowledge_safety_checks) or "none"})
        return self.client._call("POST", path, computer_call)

    def gemini(self, function_calls: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]],
               display: Display = None, acknowledge_safety: bool = False) -> list:
        """Run Gemini function calls (0-999 grid) in order and return the
        functionResponse parts for the next user Content."""
        path = self._path("/computer/gemini") + _display_query(display, "display_width", "display_height")
        if acknowledge_safety:
            path += ("&" if "?" in path else "?") + "acknowledge_safety=true"
        body = function_calls if isinstance(function_calls, Mapping) else list(function_calls)
        return self.client._call("POST", path, body)["parts"]

    # --- guest --------------------------------------------------------

    def exec(self, shell: str, timeout: float = 30, stdin: Optional[str] = None) -> ExecResult:
        body: dict = {"shell": shell, "timeout": timeout}
        if stdin is not None:
            body["stdin"] = stdin
        out = self.client._call("POST", self._path("/exec"), body)
        return ExecResult(exit_code=out["exit_code"], stdout=out.get("stdout", ""), stderr=out.get("stderr", ""),
                          timed_out=out.get("timed_out", False), duration_ms=out.get("duration_ms", 0.0))

    def read_file(self, path: str) -> bytes:
        return self.client._call("GET", self._path("/files?" + urllib.parse.urlencode({"path": path})), raw=True)

    def write_file(self, path: str, data: Union[bytes, str]) -> int:
        if isinstance(data, str):
            data = data.encode()
        out = self.client._call("PUT", self._path("/files?" + urllib.parse.urlencode({"path": path})), data=data)
        return out["bytes"]

    # --- windows ------------------------------------------------------

    def windows(self, display: Display = None) -> list:
        """The desktop's top-level windows, oldest first, as Window."""
        q = _display_query(display, "display_width", "display_height")
        return [Window._of(w) for w in self.client._call("GET", self._path("/windows" + q))["windows"]]

    def focus_window(self, window_id: str, display: Display = None) -> Window:
        q = _display_query(display, "display_width", "display_height")
        return Window._of(self.client._call("POST", self._window_path(window_id, "focus") + q))

    def close_window(self, window_id: str) -> bool:
        """Asks a window to close; False if it is still open a few seconds
        later (it may be asking to confirm)."""
        return self.client._call("POST", self._window_path(window_id, "close"))["closed"]

    def move_window(self, window_id: str, x: int, y: int, display: Display = None) -> Window:
        body = {"x": x, "y": y, **_display_body(display)}
        return Window._of(self.client._call("POST", self._window_path(window_id, "move"), body))

    def resize_window(self, window_id: str, width: int, height: int, display: Display = None) -> Window:
        body = {"width": width, "height": height, **_display_body(display)}
        return Window._of(self.client._call("POST", self._window_path(window_id, "resize"), body))

    def accessibility(self, scope: str = "focused", max_nodes: Optional[int] = None,
                      max_depth: Optional[int] = None, hidden: bool = False, display: Display = None) -> dict:
        """The accessibility tree (AT-SPI) of the active window, or of every
        application with scope="screen": {"root": node, "nodes", "left_out",
        "not_showing", "note"}; a node has role, name, states, bounds, value,
        children. hidden=True keeps nodes that are not on the screen."""
        q: dict = {"scope": scope}
        if hidden:
            q["hidden"] = "true"
        if max_nodes is not None:
            q["max_nodes"] = max_nodes
        if max_depth is not None:
            q["max_depth"] = max_depth
        if display:
            q["display_width"], q["display_height"] = display
        return self.client._call("GET", self._path("/accessibility?" + urllib.parse.urlencode(q)))

    def _window_path(self, window_id: str, op: str) -> str:
        return self._path("/windows/" + urllib.parse.quote(window_id, safe="") + "/" + op)

    def _op(self, op: str) -> "Desktop":
        return self.client._desktop(self.client._call("POST", self._path("/" + op)))

    def _path(self, rest: str) -> str:
        return "/v1/desktops/" + urllib.parse.quote(self.id, safe="") + rest


def _display_query(display: Display, w: str, h: str) -> str:
    if not display:
        return ""
    return "?" + urllib.parse.urlencode({w: display[0], h: display[1]})


def _display_body(display: Display) -> dict:
    if not display:
        return {}
    return {"display_width": display[0], "display_height": display[1]}


class Client:
    """A client of one hostd. Without arguments it reads WARMDESK_ADDR and
    WARMDESK_TOKEN, or the address and token files hostd keeps in its state
    directory."""

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None,
                 state_dir: str = DEFAULT_STATE_DIR, timeout: float = 120):
        base_url = base_url or os.environ.get("WARMDESK_ADDR") or _read(os.path.join(state_dir, "address"))
        token = token or os.environ.get("WARMDESK_TOKEN") or _read(os.path.join(state_dir, "token"))
        if not base_url:
            raise WarmdeskError(0, "unavailable", "hostd's address is unknown: set WARMDESK_ADDR or run hostd serve")
        if not token:
            raise WarmdeskError(0, "unauthorized", "no token: set WARMDESK_TOKEN or read hostd's token file")
        if "://" not in base_url:
            base_url = "http://" + base_url
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def desktops(self) -> list:
        return [self._desktop(d) for d in self._call("GET", "/v1/desktops")["desktops"]]

    def desktop(self, desktop_id: str) -> Desktop:
        return self._desktop(self._call("GET", "/v1/desktops/" + urllib.parse.quote(desktop_id, safe="")))

    def create(self, snapshot: str = "minimal", name: Optional[str] = None, ttl: Optional[str] = None,
               network: Any = None) -> Desktop:
        body: dict = {"snapshot": snapshot}
        if name:
            body["name"] = name
        if ttl:
            body["ttl"] = ttl
        if network is not None:
            body["network"] = network
        return self._desktop(self._call("POST", "/v1/desktops", body))

    def snapshots(self) -> list:
        return self._call("GET", "/v1/snapshots")["snapshots"]

    def images(self) -> list:
        return self._call("GET", "/v1/images")["images"]

    def _desktop(self, d: dict) -> Desktop:
        screen = d.get("screen")
        return Desktop(client=self, id=d["id"], name=d.get("name", ""), state=d.get("state", ""),
                       snapshot=d.get("snapshot", ""), screen=(screen["width"], screen["height"]) if screen else None,
                       setup=d.get("setup"), raw=d)

    def _call(self, method: str, path: str, body: Any = None, raw: bool = False, data: Optional[bytes] = None) -> Any:
        headers = {"Authorization": "Bearer " + self.token}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif data is not None:
            headers["Content-Type"] = "application/octet-stream"
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as e:
            payload = e.read()
            try:
                answer = json.loads(payload)
            except ValueError:
                raise WarmdeskError(e.code, "http", payload.decode(errors="replace") or e.reason) from None
            err = answer.get("error", {}) if isinstance(answer, dict) else {}
            raise WarmdeskError(e.code, err.get("code", "http"), err.get("message", str(e.reason)), err.get("field", ""),
                                answer) from None
        except urllib.error.URLError as e:
            raise WarmdeskError(0, "unavailable", f"hostd at {self.base_url} did not answer: {e.reason}") from None
        if raw:
            return payload
        return json.loads(payload) if payload else None


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None
