"""stdout callback ``swell_json``: one JSON document of every task's per-host results.

ansible-core no longer ships a JSON callback (it moved to the ansible.posix
collection); swell needs only this much of it: ``{"plays": [{"play": {"name"},
"tasks": [{"task": {"name"}, "hosts": {HOST: result}}]}], "stats": {HOST: {...}}}``,
read by ``swell.experiments.testbed_run`` to report failures one line per host.
"""

from __future__ import annotations

import json
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: swell_json
type: stdout
short_description: per-task, per-host results as one JSON document
description: Prints one JSON document at the end of the run.
"""

KEEP = ("changed", "failed", "unreachable", "skipped", "msg", "stdout", "stderr", "rc")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "swell_json"

    def __init__(self) -> None:
        super().__init__()
        self.plays: list[dict] = []

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self.plays.append({"play": {"name": play.get_name()}, "tasks": []})

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self.plays[-1]["tasks"].append({"task": {"name": task.get_name()}, "hosts": {}})

    def _record(self, result: Any, **flags: bool) -> None:
        res = {k: v for k, v in result._result.items() if k in KEEP}
        res.update(flags)
        if self.plays and self.plays[-1]["tasks"]:
            self.plays[-1]["tasks"][-1]["hosts"][result._host.get_name()] = res

    def v2_runner_on_ok(self, result: Any) -> None:
        self._record(result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._record(result, failed=not ignore_errors)

    def v2_runner_item_on_failed(self, result: Any) -> None:
        item = result._result.get("item", {})
        label = item.get("path", item) if isinstance(item, dict) else item
        self._record(result, failed=True)
        host = result._host.get_name()
        rec = self.plays[-1]["tasks"][-1]["hosts"][host]
        rec["msg"] = f"{label}: {result._result.get('msg', 'failed')}"

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._record(result, unreachable=True)

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._record(result, skipped=True)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        hosts = sorted(stats.processed)
        summary = {h: stats.summarize(h) for h in hosts}
        self._display.display(json.dumps({"plays": self.plays, "stats": summary}))
