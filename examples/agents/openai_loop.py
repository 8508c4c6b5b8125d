"""An agent loop with OpenAI's Responses API and its computer tool on a
warmdesk desktop. Needs `pip install openai` and OPENAI_API_KEY."""

import sys

from openai import OpenAI

from warmdesk import Client

W, H = 1280, 800


def confirmed(call) -> list:
    """The safety checks a person at the terminal acknowledges: OpenAI asks
    for a human's confirmation before such a call runs, and hostd refuses it
    (409 confirmation_required) until it is given."""
    ids = []
    for check in call.pending_safety_checks:
        answer = input(f"safety check {check.code}: {check.message}\nrun this action anyway? [y/N] ")
        if answer.strip().lower() != "y":
            raise SystemExit("stopped: a safety check was not acknowledged")
        ids.append(check.id)
    return ids


def main(task: str) -> None:
    desk = Client().create("browser")
    llm = OpenAI()
    tools = [{"type": "computer", "display_width": W, "display_height": H, "environment": "linux"}]
    response = llm.responses.create(model="computer-use", tools=tools, input=task, truncation="auto")
    try:
        while True:
            calls = [item for item in response.output if item.type == "computer_call"]
            if not calls:
                print(response.output_text)
                return
            outputs = [desk.openai(call.model_dump(), display=(W, H),
                                   acknowledge_safety_checks=confirmed(call))
                       for call in calls]
            response = llm.responses.create(model="computer-use", tools=tools, previous_response_id=response.id,
                                            input=outputs, truncation="auto")
    finally:
        desk.delete()


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "Open the start page's form and type hello.")
