"""The ID-photo report on the page: what to do comes first, marked as an alert, before the reasons and the checks
(results.js run by Node with a minimal DOM; skipped without Node)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from serve_app.webpage import WEB_DIR

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="Node is not installed")

DOM = r"""
class Element {
  constructor(tag) {
    Object.assign(this, { tag, children: [], attributes: {}, className: "", textContent: "" });
  }
  append(...nodes) { this.children.push(...nodes); }
  setAttribute(name, value) { this.attributes[name] = value; }
  createCaption() { const caption = new Element("caption"); this.append(caption); return caption; }
  createTHead() { const head = new Element("thead"); this.append(head); return head; }
  createTBody() { const body = new Element("tbody"); this.append(body); return body; }
  insertRow() { const row = new Element("tr"); this.append(row); return row; }
  toJSON() { return { tag: this.tag, className: this.className, role: this.attributes.role,
                      text: this.textContent, children: this.children }; }
}
globalThis.document = { createElement: (tag) => new Element(tag) };
globalThis.t = (key) => key;
globalThis.tOr = (key, fallback) => fallback;
globalThis.localName = (chinese, english) => english;
"""


def test_the_advice_to_retake_leads_the_report_as_an_alert():
    report = {
        "verdict": "fail",
        "spec": {"slug": "cn-1inch", "name": "一寸", "name_en": "1 inch"},
        "advice": ["Retake the photo with the whole head in the frame."],
        "reasons": ["the head is cut by the top edge of the source photo"],
        "checks": [
            {
                "name": "head_cropped_in_source",
                "value": True,
                "unit": "bool",
                "range": [False, False],
                "passed": False,
            }
        ],
        "notes": [],
    }
    script = (WEB_DIR / "results.js").read_text(encoding="utf-8")
    run = subprocess.run(
        ["node", "-e", DOM + script + f"console.log(JSON.stringify(reportView({json.dumps(report)})));"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    box = json.loads(run.stdout)
    heading, advice, reasons = box["children"][:3]
    assert (box["className"], heading["text"]) == ("report report-fail", "report.fail")
    assert (advice["className"], advice["role"]) == ("report-advice", "alert")
    assert [child["text"] for child in advice["children"][0:1]] == ["report.advice"]
    assert [line["text"] for line in advice["children"][1]["children"]] == report["advice"]
    assert [line["text"] for line in reasons["children"][1]["children"]] == report["reasons"]


def test_a_report_without_advice_has_no_alert():
    report = {"verdict": "pass", "spec": None, "advice": [], "reasons": [], "checks": [], "notes": []}
    script = (WEB_DIR / "results.js").read_text(encoding="utf-8")
    run = subprocess.run(
        ["node", "-e", DOM + script + f"console.log(JSON.stringify(reportView({json.dumps(report)})));"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    assert [child["className"] for child in json.loads(run.stdout)["children"]] == ["", "table-scroll"]
