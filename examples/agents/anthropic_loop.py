"""An agent loop with Anthropic's SDK and the computer toolset on a warmdesk
desktop. Needs `pip install anthropic` and ANTHROPIC_API_KEY; the warmdesk
side is clients/python (standard library only).

Every assistant turn's computer calls go to warmdesk in one request, run in
order and stop at the first failure; the answer is the next user message's
content.
"""

import sys

import anthropic

from warmdesk import Client

W, H = 1280, 800


def main(task: str) -> None:
    desk = Client().create("browser")
    llm = anthropic.Anthropic()
    tools = [{"type": "computer_toolset_20260801", "name": "computer", "display_width_px": W, "display_height_px": H}]
    messages = [{"role": "user", "content": task}]
    try:
        while True:
            reply = llm.messages.create(model="claude-sonnet-5-5", max_tokens=2048, tools=tools, messages=messages)
            content = [block.model_dump() for block in reply.content]
            messages.append({"role": "assistant", "content": content})
            if reply.stop_reason != "tool_use":
                print("".join(b.get("text", "") for b in content))
                return
            messages.append({"role": "user", "content": desk.anthropic(content, display=(W, H))})
    finally:
        desk.delete()


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "Open the start page's form and type hello.")
