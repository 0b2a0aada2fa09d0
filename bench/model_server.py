"""A scripted model server on 127.0.0.1, to check the real agent CLIs by hand.

    python bench/model_server.py PORT MODE      # MODE: ok | bash | 500 | 429

It speaks just enough of each provider's API for one turn: Anthropic
`/v1/messages` (streaming or not), OpenAI `/v1/responses` (SSE) and
`/v1/chat/completions`, and Gemini `:generateContent` /
`:streamGenerateContent`. In `ok` mode each CLI's first request gets the one
tool call that creates `x.txt` in its working directory, the next a short text:
- Claude Code: a Write tool call (or, for a reviewer, a reject verdict in the
  review file its prompt names);
- Codex: an `exec_command` function call running `printf 'written\n' > x.txt`;
- Gemini CLI: a `write_file` functionCall;
- aider (chat completions): the file in its "whole" edit format (the path, then
  the content fenced); it has no tools, so every request gets it.
`bash` is `ok` but for Claude Code, whose call is to Bash, running the same
command as Codex's (its own sandbox, when its settings turn it on, wraps it).
`500` and `429` (Retry-After: 30) answer every request with that status.

Point the CLIs at it (each with a dummy key), as bench/real_clis.py does:
- Claude Code: `ANTHROPIC_BASE_URL=http://127.0.0.1:PORT` (or `env` in its settings.json)
- Codex: a model provider (`-c model_provider=...` or `$CODEX_HOME/config.toml`)
  with `base_url = "http://127.0.0.1:PORT/v1"`, `wire_api = "responses"`
- Gemini CLI: `GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT`, and its settings
  choosing `"security": {"auth": {"selectedType": "gemini-api-key"}}`
- aider: `--model openai/NAME` with `OPENAI_API_BASE=http://127.0.0.1:PORT/v1`

It listens on 127.0.0.1 only. Not used by the tests: they replay recorded
output (tests/fixtures/agents) through fakes, with no CLI installed.
"""

from __future__ import annotations

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEXT = "Done."
# What a shell tool call runs: the task's x.txt in the working directory.
WRITE_CMD = "printf 'written\\n' > x.txt"
USAGE = {"input_tokens": 10, "output_tokens": 3}


def _sse(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "ok"

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write("model-server: " + (format % args) + "\n")

    def _send(self, code: int, body: str, ctype: str = "application/json", **headers: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, json.dumps({"data": [], "models": []}))

    def do_HEAD(self) -> None:
        self._send(200, "")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0)).decode(errors="replace")
        try:
            req = json.loads(raw or "{}")
        except ValueError:
            req = {}
        if self.mode == "500":
            err = {"type": "api_error", "message": "Internal server error"}
            return self._send(500, json.dumps({"type": "error", "error": err}))
        if self.mode == "429":
            err = {
                "type": "rate_limit_error",
                "message": "Number of requests has exceeded your rate limit",
            }
            body = json.dumps({"type": "error", "error": err})
            return self._send(429, body, retry_after="30")
        if "/v1/messages" in self.path:
            return self._anthropic(req, raw)
        if "/responses" in self.path:
            return self._openai(req)
        if "/chat/completions" in self.path:
            return self._chat(req)
        if "generatecontent" in self.path.lower():
            return self._gemini(req)
        return self._send(404, "{}")

    def _anthropic(self, req: dict[str, Any], raw: str) -> None:
        content: dict[str, Any] = {"type": "text", "text": TEXT}
        tools = {t.get("name") for t in req.get("tools") or []}
        fresh = "tool_result" not in raw and req.get("stream") and "Write" in tools
        verdict = re.search(r"to the file `([^`]+review\.json)`", raw)
        cwd = re.search(r"working directory: ([^\\\n\"]+)", raw)
        if fresh and self.mode == "bash" and "Bash" in tools:
            run = {"command": WRITE_CMD, "description": "Write x.txt"}
            content = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": run}
        elif fresh and verdict:
            findings = {"verdict": "reject", "findings": "x.txt says nothing useful"}
            write = {"file_path": verdict.group(1), "content": json.dumps(findings)}
            content = {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": write}
        elif fresh and cwd:
            write = {"file_path": cwd.group(1).strip() + "/x.txt", "content": "written\n"}
            content = {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": write}
        stop = "tool_use" if content["type"] == "tool_use" else "end_turn"
        msg = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": req.get("model", "m"),
            "content": [content],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": USAGE,
        }
        if not req.get("stream"):
            return self._send(200, json.dumps(msg))
        if content["type"] == "tool_use":
            first = {**content, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(content["input"])}
        else:
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": TEXT}
        start = {**msg, "content": [], "stop_reason": None}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": first},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop},
                    "usage": {"output_tokens": 3},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return self._send(200, _sse(events), "text/event-stream")

    def _openai(self, req: dict[str, Any]) -> None:
        tools = {t.get("name") for t in req.get("tools") or []}
        item: dict[str, Any] = {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
        }
        answered = any(i.get("type") == "function_call_output" for i in req.get("input", []))
        if "exec_command" in tools and not answered:
            # Codex's shell tool: the command runs in the turn's working directory.
            args = {"cmd": WRITE_CMD}
            item = {
                "type": "function_call",
                "id": "fc1",
                "call_id": "call_1",
                "name": "exec_command",
                "arguments": json.dumps(args),
                "status": "completed",
            }
        usage = {
            **USAGE,
            "total_tokens": 13,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        resp = {"id": "resp_1", "object": "response", "status": "completed", "model": "m"}
        done = {**resp, "output": [item], "usage": usage}
        if item["type"] == "message":
            added = {**item, "content": []}
            delta = {"type": "response.output_text.delta", "content_index": 0, "delta": TEXT}
        else:
            added = {**item, "arguments": ""}
            delta = {"type": "response.function_call_arguments.delta", "delta": item["arguments"]}
        events: list[dict[str, Any]] = [
            {
                "type": "response.created",
                "response": {**resp, "status": "in_progress", "output": []},
            },
            {"type": "response.output_item.added", "output_index": 0, "item": added},
            {**delta, "output_index": 0, "item_id": item["id"]},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": done},
        ]
        return self._send(200, _sse([(e["type"], e) for e in events]), "text/event-stream")

    def _gemini(self, req: dict[str, Any]) -> None:
        names = {
            d.get("name") for t in req.get("tools") or [] for d in t.get("functionDeclarations", [])
        }
        part: dict[str, Any] = {"text": TEXT}
        answered = any("functionResponse" in p for c in req.get("contents", []) for p in c["parts"])
        if "write_file" in names and not answered:
            # Gemini CLI's write_file tool, the path relative to its workspace.
            write = {"file_path": "x.txt", "content": "written\n"}
            part = {"functionCall": {"name": "write_file", "args": write}}
        answer = {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 3,
                "totalTokenCount": 13,
            },
        }
        if "stream" in self.path.lower():
            return self._send(200, f"data: {json.dumps(answer)}\n\n", "text/event-stream")
        return self._send(200, json.dumps(answer))

    def _chat(self, req: dict[str, Any]) -> None:
        # aider's "whole" edit format: the file's path, then its whole content fenced.
        text = "x.txt\n```\nwritten\n```\n"
        usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        base = {"id": "c1", "created": 0, "model": req.get("model", "m")}
        if not req.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": text}}
            done = {**base, "object": "chat.completion", "usage": usage}
            return self._send(
                200, json.dumps({**done, "choices": [{**choice, "finish_reason": "stop"}]})
            )
        chunk = {**base, "object": "chat.completion.chunk"}
        delta = {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}
        last = {"index": 0, "delta": {}, "finish_reason": "stop"}
        body = "".join(
            f"data: {json.dumps(c)}\n\n"
            for c in ({**chunk, "choices": [delta]}, {**chunk, "choices": [last], "usage": usage})
        )
        return self._send(200, body + "data: [DONE]\n\n", "text/event-stream")


def main() -> None:
    port, Handler.mode = int(sys.argv[1]), sys.argv[2]
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
