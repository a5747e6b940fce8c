"""The constraint judge: does the summary that replaced a rule still state it?

``LexicalJudge`` (the default, no model) calls a constraint *preserved* only when the summary
repeats it word for word, and *lost* otherwise. ``EndpointJudge`` asks any OpenAI-compatible
``/chat/completions`` endpoint, with the prompt pair ``judge_constraints.system.txt`` /
``judge_constraints.user.txt`` (placeholders ``{constraint}`` and ``{summary}``; looked up like
the summary templates, see config/prompts/README.md). Its answer is the first of the words
preserved / lost / contradicted it contains; anything else is *lost*, the default.

Every verdict carries the judge's identity (model, endpoint, SHA-256 of the two template
texts) and is kept in a verdict file keyed by ``verdict_key`` (constraint, summary, template
hash and model), so that re-running the audit with that file reproduces every verdict without
calling the judge again. The HTTP call is the only I/O of ``ctxpolicy.analysis``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.analysis.constraints import restated

VERDICTS = ("preserved", "lost", "contradicted")
DEFAULT_VERDICT = "lost"
TEMPLATE = "judge_constraints"
PLACEHOLDER = re.compile(r"\{constraint\}|\{summary\}")
ANSWER = re.compile(r"\b(preserved|lost|contradicted)\b", re.IGNORECASE)
MAX_TOKENS = 8


class JudgeError(CtxpolicyError, RuntimeError):
    """The judge could not be set up or reached; one line for the command line."""


@dataclass(frozen=True)
class Identity:
    model: str
    endpoint: str | None
    template_sha256: str | None


@dataclass(frozen=True)
class Verdict:
    key: str
    verdict: str
    raw: str
    model: str
    endpoint: str | None
    template_sha256: str | None
    constraint: str
    summary_sha256: str


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def verdict_key(constraint: str, summary: str, template_sha256: str | None, model: str) -> str:
    return sha256(json.dumps([constraint, summary, template_sha256, model], ensure_ascii=False))


def parse_verdict(answer: str) -> str:
    found = ANSWER.search(answer or "")
    return found.group(1).lower() if found else DEFAULT_VERDICT


def load_template(directory: Path | None = None) -> tuple[str, str]:
    from ctxpolicy.policies.prompts import pair_paths, prompt_dirs

    for folder in [directory] if directory else prompt_dirs():
        files = pair_paths(Path(folder), TEMPLATE)
        if all(p.is_file() for p in files.values()):
            return tuple(files[part].read_text(encoding="utf-8").removesuffix("\n") for part in ("system", "user"))
    where = directory or ", ".join(map(str, prompt_dirs()))
    raise JudgeError(f"judge template {TEMPLATE}.system.txt / {TEMPLATE}.user.txt not found in {where}")


def render(template: str, constraint: str, summary: str) -> str:
    values = {"{constraint}": constraint, "{summary}": summary}
    return PLACEHOLDER.sub(lambda m: values[m.group(0)], template)


class VerdictCache:
    """Verdicts by key, read from and appended to a JSON-lines file (None: memory only)."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else None
        self.verdicts: dict[str, Verdict] = {}
        if self.path and self.path.is_file():
            for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    verdict = Verdict(**json.loads(line))
                except (ValueError, TypeError) as exc:
                    raise JudgeError(f"{self.path}: line {number}: not a verdict record ({exc})") from None
                self.verdicts[verdict.key] = verdict

    def get(self, key: str) -> Verdict | None:
        return self.verdicts.get(key)

    def put(self, verdict: Verdict) -> None:
        self.verdicts[verdict.key] = verdict
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:  # a cache: a torn last line is re-asked
                handle.write(json.dumps(asdict(verdict), ensure_ascii=False, sort_keys=True) + "\n")
                handle.flush()


class LexicalJudge:
    identity = Identity(model="lexical", endpoint=None, template_sha256=None)

    def __init__(self, cache: VerdictCache | None = None):
        self.cache = cache or VerdictCache()

    def judge(self, constraint: str, summary: str) -> Verdict:
        verdict = "preserved" if restated(constraint, summary) else DEFAULT_VERDICT
        return _verdict(self.identity, constraint, summary, verdict, "")


class EndpointJudge:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        cache: VerdictCache | None = None,
        template_dir: Path | None = None,
        timeout_s: float = 300.0,
    ):
        self.base_url = base_url.rstrip("/")
        self.system, self.user = load_template(template_dir)
        self.identity = Identity(
            model=model, endpoint=self.base_url, template_sha256=sha256(self.system + "\x00" + self.user)
        )
        self.cache = cache or VerdictCache()
        self.timeout_s = timeout_s

    def judge(self, constraint: str, summary: str) -> Verdict:
        key = verdict_key(constraint, summary, self.identity.template_sha256, self.identity.model)
        known = self.cache.get(key)
        if known is not None:
            return known
        raw = self._ask(constraint, summary) if summary.strip() else ""
        verdict = _verdict(self.identity, constraint, summary, parse_verdict(raw), raw)
        self.cache.put(verdict)
        return verdict

    def _ask(self, constraint: str, summary: str) -> str:
        import httpx

        body = {
            "model": self.identity.model,
            "temperature": 0,
            "seed": 0,
            "max_tokens": MAX_TOKENS,
            "messages": [
                {"role": "system", "content": render(self.system, constraint, summary)},
                {"role": "user", "content": render(self.user, constraint, summary)},
            ],
        }
        try:
            response = httpx.post(f"{self.base_url}/chat/completions", json=body, timeout=self.timeout_s)
            response.raise_for_status()
            return response.json()["choices"][0]["message"].get("content") or ""
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise JudgeError(f"judge {self.base_url}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def _verdict(identity: Identity, constraint: str, summary: str, verdict: str, raw: str) -> Verdict:
    return Verdict(
        key=verdict_key(constraint, summary, identity.template_sha256, identity.model),
        verdict=verdict,
        raw=raw,
        model=identity.model,
        endpoint=identity.endpoint,
        template_sha256=identity.template_sha256,
        constraint=constraint,
        summary_sha256=sha256(summary),
    )
