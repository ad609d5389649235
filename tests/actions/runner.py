#!/usr/bin/env python3
"""Runs a composite action's steps the way a GitHub runner does, for tests.

    runner.py ACTION_DIR REQUEST.json RESULT.json

REQUEST.json: {"inputs": {...}, "env": {...}, "workspace": DIR, "runner_temp": DIR,
               "runner": {"os": "Linux", "arch": "X64"}}

For each step of `runs.steps`:
  * `if:` is evaluated (a subset of GitHub expressions: literals, inputs/steps/runner/
    github/env contexts, == != && || !, parentheses, always()/success()/failure());
  * `uses:` steps are recorded and skipped (no network in tests): their outputs are empty;
  * `run:` steps run with `bash --noprofile --norc -eo pipefail SCRIPT`, the env being the
    caller's env, then variables exported through earlier GITHUB_ENV files, then the
    step's evaluated `env:`; GITHUB_ACTION_PATH, GITHUB_WORKSPACE, RUNNER_TEMP and fresh
    GITHUB_OUTPUT / GITHUB_ENV / GITHUB_STEP_SUMMARY / GITHUB_PATH files are set per step;
  * afterwards the files are parsed (`name=value` and `name<<DELIM` blocks) into
    steps.<id>.outputs and the job environment; GITHUB_PATH lines are prepended to PATH;
  * workflow commands on stdout/stderr are processed: `::add-mask::V` registers V and is
    not logged; every later log line has masked values replaced by `***`.
A failing step (exit != 0) stops the action, as on a runner. Action outputs are the
evaluated `outputs.<name>.value` expressions.

RESULT.json: {"outputs", "env" (exported), "path" (added), "summary", "log" (masked, as the
runner would show it), "raw_stdout", "raw_stderr" (unmasked, to prove secrets appear only
in add-mask commands), "steps": [{"id", "ran", "exit_code"}], "exit_code"}.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import yaml


class Expr:
    """A small GitHub expression evaluator."""

    TOKEN = re.compile(
        r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\)|,)"
        r"|(?P<ident>[A-Za-z_][A-Za-z0-9_.\-]*))"
    )

    def __init__(self, contexts):
        self.contexts = contexts

    def tokens(self, text):
        pos, out = 0, []
        text = text.strip()
        while pos < len(text):
            m = self.TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(f"cannot parse expression {text!r} at {pos}")
            pos = m.end()
            kind = m.lastgroup
            out.append((kind, m.group(kind)))
        return out

    def evaluate(self, text):
        self.toks = self.tokens(text)
        self.i = 0
        value = self.or_expr()
        if self.i != len(self.toks):
            raise ValueError(f"trailing tokens in {text!r}")
        return value

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def or_expr(self):
        left = self.and_expr()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.and_expr()
            left = left if truthy(left) else right
        return left

    def and_expr(self):
        left = self.cmp_expr()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.cmp_expr()
            left = right if truthy(left) else left
        return left

    def cmp_expr(self):
        left = self.unary()
        while self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            right = self.unary()
            equal = as_text(left).lower() == as_text(right).lower()
            left = equal if op == "==" else not equal
        return left

    def unary(self):
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.primary()

    def primary(self):
        kind, value = self.take()
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value)
        if (kind, value) == ("op", "("):
            inner = self.or_expr()
            if self.take() != ("op", ")"):
                raise ValueError("missing )")
            return inner
        if kind == "ident":
            if value in ("true", "false"):
                return value == "true"
            if value == "null":
                return None
            if self.peek() == ("op", "("):
                self.take()
                if self.take() != ("op", ")"):
                    raise ValueError(f"{value}() takes no arguments here")
                return {"always": True, "success": True, "failure": False}.get(value, False)
            return self.lookup(value)
        raise ValueError(f"unexpected token {value!r}")

    def lookup(self, dotted):
        node = self.contexts
        for part in dotted.split("."):
            if isinstance(node, dict):
                node = node.get(part)
            else:
                return None
        return node


def truthy(value):
    return value not in (None, False, "", 0)


def as_text(value):
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def substitute(text, contexts):
    """Replaces every ${{ expr }} in text."""
    if not isinstance(text, str):
        return as_text(text)
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: as_text(Expr(contexts).evaluate(m.group(1))), text)


def parse_file_commands(path):
    """Parses a GITHUB_OUTPUT / GITHUB_ENV file."""
    values = {}
    if not os.path.exists(path):
        return values
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            while i < len(lines) and lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ValueError(f"{path}: no closing delimiter {delimiter!r} for {name}")
            i += 1
            values[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            values[name] = value
        else:
            raise ValueError(f"{path}: malformed line {line!r}")
    return values


def main():
    action_dir, request_path, result_path = sys.argv[1:4]
    action_dir = os.path.abspath(action_dir)
    request = json.load(open(request_path))
    action = yaml.safe_load(open(os.path.join(action_dir, "action.yml")))
    runner = request.get("runner", {"os": "Linux", "arch": "X64"})
    workspace = request["workspace"]
    runner_temp = request["runner_temp"]
    base_env = dict(request.get("env", {}))
    contexts = {
        "runner": {"os": runner["os"], "arch": runner["arch"], "temp": runner_temp},
        "github": {"action_path": action_dir, "workspace": workspace},
        "env": base_env,
        "steps": {},
        "inputs": {},
    }
    given = request.get("inputs", {})
    for name, spec in (action.get("inputs") or {}).items():
        spec = spec or {}
        if name in given:
            contexts["inputs"][name] = given[name]
        else:
            if spec.get("required") and "default" not in spec:
                print(f"input {name} is required", file=sys.stderr)
            contexts["inputs"][name] = substitute(spec.get("default", ""), contexts)
    unknown = set(given) - set(action.get("inputs") or {})
    if unknown:
        raise SystemExit(f"unknown inputs: {sorted(unknown)}")

    exported, added_path, masks = {}, [], []
    summary, log, raw_stdout, raw_stderr, steps_report = [], [], [], [], []
    exit_code = 0

    def mask(text):
        for value in masks:
            text = text.replace(value, "***")
        return text

    def process_stream(text, raw):
        raw.append(text)
        for line in text.splitlines():
            if line.startswith("::add-mask::"):
                value = line[len("::add-mask::"):]
                if value:
                    masks.append(value)
                continue
            log.append(mask(line))

    for index, step in enumerate(action["runs"]["steps"]):
        step_id = step.get("id", f"__step{index}")
        contexts["env"] = {**base_env, **exported}
        condition = step.get("if")
        if condition is not None:
            text = condition.strip()
            if text.startswith("${{") and text.endswith("}}"):
                text = text[3:-2]
            if not truthy(Expr(contexts).evaluate(text)):
                steps_report.append({"id": step_id, "ran": False, "exit_code": None})
                contexts["steps"][step_id] = {"outputs": {}, "outcome": "skipped"}
                continue
        if "uses" in step:
            steps_report.append({"id": step_id, "ran": False, "exit_code": None, "uses": step["uses"]})
            contexts["steps"][step_id] = {"outputs": {}, "outcome": "skipped"}
            continue
        if step.get("shell") != "bash":
            raise SystemExit(f"step {step_id}: only shell: bash is supported")
        with tempfile.TemporaryDirectory(dir=runner_temp) as files:
            paths = {name: os.path.join(files, name) for name in ("output", "env", "summary", "path")}
            for p in paths.values():
                open(p, "w").close()
            env = {**base_env, **exported}
            if added_path:
                env["PATH"] = ":".join(reversed(added_path)) + ":" + env.get("PATH", "")
            for name, value in (step.get("env") or {}).items():
                env[name] = substitute(value, contexts)
            env.update({
                "GITHUB_ACTION_PATH": action_dir,
                "GITHUB_WORKSPACE": workspace,
                "RUNNER_TEMP": runner_temp,
                "GITHUB_OUTPUT": paths["output"],
                "GITHUB_ENV": paths["env"],
                "GITHUB_STEP_SUMMARY": paths["summary"],
                "GITHUB_PATH": paths["path"],
                "GITHUB_ACTIONS": "true",
            })
            script = os.path.join(files, "step.sh")
            with open(script, "w") as f:
                f.write(substitute(step["run"], contexts))
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", script],
                cwd=workspace, env=env, capture_output=True, text=True,
            )
            process_stream(proc.stdout, raw_stdout)
            process_stream(proc.stderr, raw_stderr)
            outputs = parse_file_commands(paths["output"])
            exported.update(parse_file_commands(paths["env"]))
            for line in open(paths["path"]).read().splitlines():
                if line:
                    added_path.append(line)
            summary.append(open(paths["summary"]).read())
        contexts["steps"][step_id] = {"outputs": outputs, "outcome": "success" if proc.returncode == 0 else "failure"}
        steps_report.append({"id": step_id, "ran": True, "exit_code": proc.returncode})
        if proc.returncode != 0:
            exit_code = proc.returncode
            break

    contexts["env"] = {**base_env, **exported}
    outputs = {}
    if exit_code == 0:
        for name, spec in (action.get("outputs") or {}).items():
            outputs[name] = substitute(spec.get("value", ""), contexts)
    result = {
        "outputs": outputs, "env": exported, "path": added_path, "summary": mask("".join(summary)),
        "log": log, "raw_stdout": "".join(raw_stdout), "raw_stderr": "".join(raw_stderr),
        "steps": steps_report, "exit_code": exit_code,
    }
    json.dump(result, open(result_path, "w"), indent=1)


if __name__ == "__main__":
    main()
