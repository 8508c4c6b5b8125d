"""The Python client against a running hostd API (WARMDESK_ADDR and
WARMDESK_TOKEN; WARMDESK_TEST_SNAPSHOT names a snapshot to create from).
web/python_client_test.go runs these against hostd's API on the fake
driver; they run as they are against a real hostd too."""

import json
import os
import struct
import unittest

from warmdesk import Client, WarmdeskError

HERE = os.path.dirname(os.path.abspath(__file__))


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.wd = Client()
        cls.desk = cls.wd.create(os.environ.get("WARMDESK_TEST_SNAPSHOT", "minimal"), name="python-test")

    @classmethod
    def tearDownClass(cls):
        cls.desk.delete()

    def test_lifecycle_and_screenshot(self):
        self.assertIn(self.desk.id, [d.id for d in self.wd.desktops()])
        self.assertEqual(self.desk.refresh().state, "running")
        w, h = png_size(self.desk.screenshot())
        self.assertEqual((w, h), self.desk.screen)
        self.assertEqual(png_size(self.desk.screenshot(width=640, height=400)), (640, 400))

    def test_actions(self):
        out = self.desk.actions([{"action": "move", "x": 10, "y": 10}, {"action": "screenshot"}], settle_ms=0)
        self.assertEqual(len(out["results"]), 2)

    def test_errors_carry_code_and_field(self):
        with self.assertRaises(WarmdeskError) as cm:
            self.desk.actions([{"action": "click", "x": 99999, "y": 1}])
        e = cm.exception
        self.assertEqual((e.status, e.code), (400, "invalid"))
        self.assertEqual(e.field, "actions[0].x")
        with self.assertRaises(WarmdeskError) as cm:
            self.wd.desktop("d-nonexistent")
        self.assertEqual(cm.exception.status, 404)

    def test_anthropic_single_call(self):
        tr = self.desk.anthropic({"action": "left_click", "coordinate": [100, 100]}, display=(640, 400))
        self.assertEqual(tr["type"], "tool_result")
        self.assertEqual(tr["content"][0]["type"], "image")
        with self.assertRaises(WarmdeskError) as cm:
            self.desk.anthropic({"action": "fly"})
        self.assertTrue(cm.exception.body["tool_result"]["is_error"])

    def test_anthropic_recorded_turn_with_a_failure(self):
        # A recorded assistant turn of the computer toolset whose second
        # call is malformed: the first runs, the rest answer is_error.
        with open(os.path.join(HERE, "anthropic_turn.json")) as f:
            turn = json.load(f)
        results = self.desk.anthropic(turn["content"], display=(1280, 800))
        self.assertEqual([r["tool_use_id"] for r in results], ["toolu_01", "toolu_02", "toolu_03"])
        self.assertFalse(results[0].get("is_error", False))
        self.assertTrue(results[1]["is_error"])
        self.assertIn("coordinate", results[1]["content"][0]["text"])
        self.assertEqual(results[2]["content"][0]["text"], "Not executed: an earlier computer action in this turn failed.")
        # The whole message answers the same.
        again = self.desk.anthropic(turn, display=(1280, 800))
        self.assertEqual([r["tool_use_id"] for r in again], ["toolu_01", "toolu_02", "toolu_03"])

    def test_openai(self):
        out = self.desk.openai({"type": "computer_call", "call_id": "call_1",
                                "actions": [{"type": "move", "x": 5, "y": 5}, {"type": "screenshot"}]})
        self.assertEqual(out["type"], "computer_call_output")
        self.assertEqual(out["call_id"], "call_1")

    def test_gemini(self):
        parts = self.desk.gemini([{"name": "click_at", "args": {"x": 500, "y": 500}},
                                  {"name": "key_down", "args": {"key": "shift"}}])
        self.assertEqual(len(parts), 2)
        first = parts[0]["functionResponse"]
        self.assertEqual(first["name"], "click_at")
        self.assertEqual(first["parts"][0]["inlineData"]["mimeType"], "image/png")
        self.assertIn("not supported", parts[1]["functionResponse"]["response"]["error"])

    def test_anthropic_toolset_configs(self):
        blocks = [{"type": "tool_use", "id": "t1", "name": "zoom", "input": {"region": [0, 0, 100, 100]}},
                  {"type": "tool_use", "id": "t2", "name": "mouse_move", "input": {"coordinate": [5, 5]}}]
        tools = [{"type": "computer_toolset_20260801", "configs": {"zoom": {"enabled": False}}}]
        results = self.desk.anthropic(blocks, tools=tools)
        self.assertEqual([r["tool_use_id"] for r in results], ["t1", "t2"])
        self.assertTrue(results[0]["is_error"])
        self.assertIn("turned off", results[0]["content"][0]["text"])
        self.assertIn("Not executed", results[1]["content"][0]["text"])

    def test_windows(self):
        wins = self.desk.windows()
        self.assertGreaterEqual(len(wins), 1)
        win = wins[0]
        self.assertTrue(win.id.startswith("0x"))
        fx, fy, fw, fh = win.frame
        self.assertTrue(fx <= win.x and fy <= win.y and fx + fw >= win.x + win.width and fy + fh >= win.y + win.height, win)
        moved = self.desk.move_window(win.id, 100, 80)
        self.assertEqual((moved.id, moved.x, moved.y), (win.id, 100, 80))
        # The frame moves with the client area.
        self.assertEqual((moved.frame[0] - moved.x, moved.frame[1] - moved.y), (fx - win.x, fy - win.y))
        # A window may keep whole character cells: at most what was asked.
        sized = self.desk.resize_window(win.id, 400, 300)
        self.assertTrue(380 <= sized.width <= 400 and 280 <= sized.height <= 300, sized)
        half = self.desk.windows(display=(self.desk.screen[0] // 2, self.desk.screen[1] // 2))
        self.assertEqual((half[0].x, half[0].y), (50, 40))
        self.assertTrue(self.desk.focus_window(win.id).focused)
        with self.assertRaises(WarmdeskError) as e:
            self.desk.close_window("not-a-window")
        self.assertEqual((e.exception.status, e.exception.field), (400, "window"))

    def test_accessibility(self):
        try:
            tree = self.desk.accessibility(max_nodes=50)
        except WarmdeskError as e:
            # An image without the accessibility bus (minimal) says so.
            self.assertEqual(e.status, 409)
            self.assertIn("accessibility bus", e.message)
            return
        self.assertLessEqual(tree["nodes"], 50)
        with self.assertRaises(WarmdeskError) as e:
            self.desk.accessibility(scope="window")
        self.assertEqual((e.exception.status, e.exception.field), (400, "scope"))

    def test_files_and_exec(self):
        self.assertEqual(self.desk.write_file("/root/py.txt", "from python"), 11)
        self.assertEqual(self.desk.read_file("/root/py.txt"), b"from python")
        res = self.desk.exec("echo hi")
        self.assertEqual((res.exit_code, res.stdout), (0, "hi\n"))


if __name__ == "__main__":
    unittest.main()
