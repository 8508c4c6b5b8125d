"""An agent loop with Google's Gen AI SDK and Gemini's computer use on a
warmdesk desktop. Needs `pip install google-genai` and GEMINI_API_KEY.

The functions' 0-999 grid is mapped onto the screen by warmdesk; each
function response carries its screenshot."""

import sys

from google import genai
from google.genai import types

from warmdesk import Client


def main(task: str) -> None:
    desk = Client().create("browser")
    llm = genai.Client()
    config = types.GenerateContentConfig(tools=[types.Tool(computer_use=types.ComputerUse(
        environment=types.Environment.ENVIRONMENT_BROWSER))])
    contents = [types.Content(role="user", parts=[types.Part(text=task),
                                                   types.Part.from_bytes(data=desk.screenshot(), mime_type="image/png")])]
    try:
        while True:
            reply = llm.models.generate_content(model="gemini-2.5-computer-use-preview-10-2025", contents=contents, config=config)
            turn = reply.candidates[0].content
            contents.append(turn)
            calls = [{"name": p.function_call.name, "args": dict(p.function_call.args or {})}
                     for p in turn.parts if p.function_call]
            if not calls:
                print(reply.text)
                return
            parts = desk.gemini(calls)
            contents.append(types.Content.model_validate({"role": "user", "parts": parts}))
    finally:
        desk.delete()


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "Open the start page's form and type hello.")
