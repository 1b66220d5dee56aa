"""Fuzz request generators: case `i` of seed `s` is always the same request
(random.Random(f"{s}:{i}")), so a failure in a report can be replayed by its index.

Most cases are invalid and should be answered 4xx at once; the valid ones ask for at
most 8 tokens so that 10,000 cases finish in minutes.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

CHAT, TEXT = "/v1/chat/completions", "/v1/completions"


@dataclass
class Case:
    index: int
    kind: str
    desc: str
    method: str = "POST"
    path: str = CHAT
    body: bytes = b""
    content_type: str | None = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    expect: str | None = None        # "2xx" / "4xx" when the answer is known in advance
    may_close: bool = False          # HTTP-level abuse: dropping the connection is a fine answer
    read_events: int | None = None   # a stream we leave after this many events (huge max_tokens)
    raw: bool = False                # sent over a bare socket: httpx refuses URLs over 64 KiB

    def describe(self) -> str:
        return f"#{self.index} {self.kind}: {self.method} {_short(self.path, 80)} {self.desc}"


class Raw:
    """JSON text written as is: NaN, Infinity, -0, 1e999, 5000-digit ints, deep nesting."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"raw({_short(self.text, 40)})"


def dumps(obj, ensure_ascii: bool = True) -> bytes:
    raws: list[str] = []

    def conv(o):
        if isinstance(o, Raw):
            raws.append(o.text)
            return f"@@RAW{len(raws) - 1}@@"
        if isinstance(o, dict):
            return {k: conv(v) for k, v in o.items()}
        if isinstance(o, list):
            return [conv(v) for v in o]
        return o

    text = json.dumps(conv(obj), ensure_ascii=ensure_ascii)
    for i, r in enumerate(raws):
        text = text.replace(f'"@@RAW{i}@@"', r, 1)
    return text.encode("utf-8", "surrogatepass")  # ensure_ascii=False keeps lone surrogates raw


def _short(v, n: int = 60) -> str:
    if isinstance(v, str) and len(v) > n:
        return f"str[{len(v)}]{v[:20]!r}..."
    s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


# ---- value pools ---------------------------------------------------------------------------
UNICODE = ["héllo", "😀🔥👍🏽", "\u202eevil\u202c", "مرحبا بالعالم", "\x00", "a\x00b", "\ud800", "\udfff",
           "\ud83d", "\ufeffbom", "e\u0301\u0301\u0301", "\uffff", "\U0010ffff", "\u2028\u2029", "\x1b[31m"]
NUMBERS = [0, -1, 1, 2, 7, 2**31, 2**32, 2**53 + 1, 2**63, 2**64, -2**63, 10**30, 0.5, -0.5, 1e308,
           -1e308, 5e-324, Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("-0"), Raw("1e999"),
           Raw("-1e999"), Raw("1" + "0" * 5000), Raw("0." + "0" * 5000 + "1")]


def huge_string(rng: random.Random) -> str:
    # Mostly small: a 1 MB body costs the server a tokenizer pass, 10k of them minutes.
    roll = rng.random()
    n = rng.randint(1000, 4096) if roll < 0.9 else rng.randint(4096, 65536) if roll < 0.99 \
        else rng.randint(65536, 1 << 20)
    return rng.choice("ab字😀 ") * n


def junk(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if roll < 0.1:
        return rng.choice([None, True, False])
    if roll < 0.4:
        return rng.choice(NUMBERS)
    if roll < 0.65:
        return rng.choice(["", "x", "1", "true", "null", "NaN", "user", *UNICODE])
    if roll < 0.7:
        return huge_string(rng)
    if roll < 0.75:
        d = rng.choice([100, 1000, 10_000, 100_000])
        return Raw("[" * d + "]" * d)  # deeper than any parser's recursion limit
    if depth > 2:
        return None
    if roll < 0.88:
        return [junk(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["a", "type", "text", "role", "content", ""]): junk(rng, depth + 1)
            for _ in range(rng.randint(0, 3))}


CHAT_FIELDS = ["model", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options",
               "temperature", "top_p", "n", "stop", "seed", "presence_penalty", "frequency_penalty",
               "logprobs", "top_logprobs", "response_format", "tools", "top_k", "min_p", "repeat_penalty",
               "ignore_eos", "grammar", "logit_bias", "user"]
TEXT_FIELDS = [f for f in CHAT_FIELDS if f not in ("messages", "max_completion_tokens", "top_logprobs",
                                                    "response_format", "tools")] + \
              ["prompt", "echo", "best_of", "suffix"]
LIMITS = ("max_tokens", "max_completion_tokens")


def base(chat: bool, max_tokens: int = 4) -> dict:
    if chat:
        return {"messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens}
    return {"prompt": "hi", "max_tokens": max_tokens}


def json_case(path: str, body, desc: str, expect: str | None = None, **kw) -> dict:
    return dict(path=path, body=dumps(body), desc=desc, expect=expect, **kw)


# ---- generators: rng -> Case fields --------------------------------------------------------
def gen_types(rng):
    """Known fields replaced by values of the wrong type, range or shape."""
    chat = rng.random() < 0.6
    body = base(chat)
    changed = []
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(CHAT_FIELDS if chat else TEXT_FIELDS)
        value = junk(rng)
        if name in LIMITS and isinstance(value, (int, float, Raw)) and not isinstance(value, bool):
            value = rng.choice([0, -1, 0.5, -1e308])  # a valid huge limit would run to the end of the context
        msgs = body.get("messages")
        if chat and rng.random() < 0.3 and isinstance(msgs, list) and msgs and isinstance(msgs[0], dict):
            sub = rng.choice(["role", "content", "name"])
            body["messages"][0][sub] = value
            name = f"messages[0].{sub}"
        else:
            body[name] = value
        changed.append(f"{name}={_short(value, 40)}")
    return json_case(CHAT if chat else TEXT, body, ", ".join(changed))


def gen_limits(rng):
    chat = rng.random() < 0.5
    body = base(chat)
    name, value, expect = rng.choice([
        ("max_tokens", 0, "4xx"), ("max_tokens", -1, "4xx"), ("max_tokens", -2**63, "4xx"),
        ("max_tokens", 2**63, None), ("max_tokens", 10**30, None), ("max_tokens", 2**31, None),
        ("max_tokens", 4.5, "4xx"), ("max_tokens", Raw("1e308"), None), ("max_tokens", True, None),
        ("n", 0, "4xx"), ("n", -1, "4xx"), ("n", 17, "4xx"), ("n", 10**9, "4xx"), ("n", 2**63, "4xx"),
        ("top_k", -1, "4xx"), ("top_k", -2**31, "4xx"), ("top_k", 2**31, None), ("top_k", 2**63, None),
        ("top_k", 10**30, None), ("seed", 2**64, None), ("seed", -1, None), ("seed", -2**63, None),
        ("seed", 10**30, None), ("seed", 2**32, None), ("seed", 2**32 - 1, None), ("seed", 2**63, None),
        ("min_p", -0.1, "4xx"), ("temperature", 1e308, "4xx"), ("repeat_penalty", 0, "4xx"),
        ("repeat_penalty", 1e308, None), ("top_logprobs", 21, "4xx"), ("logprobs", 21, "4xx"),
    ])
    if name in ("logprobs", "top_logprobs"):  # chat: logprobs true + top_logprobs N; text: logprobs N
        name = "top_logprobs" if chat else "logprobs"
        body.update({"logprobs": True, "top_logprobs": 21} if chat else {"logprobs": 21})
    else:
        body[name] = value
    kw = {}
    if name == "max_tokens" and expect is None:
        body["stream"] = True  # a huge limit is valid: read a few events and leave
        kw["read_events"] = 6
    return json_case(CHAT if chat else TEXT, body, f"{name}={_short(value, 40)}", expect, **kw)


def gen_huge(rng):
    chat = rng.random() < 0.5
    body = base(chat)
    name = rng.choice(["content", "model", "stop", "grammar", "name", "role"] if chat
                      else ["prompt", "model", "stop", "grammar", "suffix"])
    s = huge_string(rng)
    if name in ("content", "name", "role"):
        body["messages"][0][name] = s
    else:
        body[name] = s
    return json_case(CHAT if chat else TEXT, body, f"{name}=str[{len(s)}]")


def gen_unicode(rng):
    chat = rng.random() < 0.6
    body = base(chat)
    s = "".join(rng.choice(UNICODE) for _ in range(rng.randint(1, 4)))
    name = rng.choice(["content", "content", "stop", "model", "role", "name", "grammar"] if chat
                      else ["prompt", "prompt", "stop", "model", "grammar"])
    if name in ("content", "role", "name"):
        body["messages"][0][name] = s
    else:
        body[name] = s
    raw = rng.random() < 0.3  # raw UTF-8 (lone surrogates become invalid bytes) vs \u escapes
    return dict(path=CHAT if chat else TEXT, body=dumps(body, ensure_ascii=not raw),
                desc=f"{name}={s!r} ({'raw utf-8' if raw else 'escaped'})")


def gen_bad_utf8(rng):
    junk_bytes = rng.choice([b"\xff\xfe", b"\xc3(", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc", b"\xed\xa0\x80",
                             b"\xc0\xaf", b"\xf8\x88\x80\x80\x80", b"\x80"])
    body = b'{"messages":[{"role":"user","content":"hi' + junk_bytes + b'"}],"max_tokens":4}'
    if rng.random() < 0.3:
        body = b"\xef\xbb\xbf" + body[:-1] + b"}"  # a UTF-8 BOM in front
    return dict(body=body, desc=f"invalid UTF-8 {junk_bytes!r}", expect="4xx")


def gen_truncated(rng):
    full = dumps({**base(rng.random() < 0.5), "temperature": 0.5, "stop": ["\n"]})
    cut = rng.randint(0, len(full) - 1)
    return dict(path=rng.choice([CHAT, TEXT]), body=full[:cut], desc=f"cut at {cut}/{len(full)}", expect="4xx")


def gen_non_object(rng):
    body = rng.choice([b"[]", b"[{}]", b"null", b"true", b"5", b'"hi"', b"1e999", b"NaN", b"[[[[", b"{}}",
                       b'{"a":1} {"b":2}', b"{'messages': []}", b"\x00", b"   ", b'{"messages":1,}'])
    return dict(path=rng.choice([CHAT, TEXT]), body=body, desc=f"body {body!r}", expect="4xx")


def gen_empty(rng):
    return dict(path=rng.choice([CHAT, TEXT]), body=b"", desc="empty body", expect="4xx",
                content_type=rng.choice(["application/json", None]))


def gen_content_type(rng):
    ctype = rng.choice(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                        "application/json; charset=utf-16", "application/xml", "", "*/*;;;", "a" * 5000])
    body = base(rng.random() < 0.5)
    raw = dumps(body).decode()
    data = raw.encode("utf-16") if "utf-16" in ctype else raw.encode()
    return dict(path=CHAT if "messages" in body else TEXT, body=data, content_type=ctype,
                desc=f"content-type {_short(ctype, 40)}")


def gen_method(rng):
    method, path = rng.choice([("GET", CHAT), ("PUT", CHAT), ("DELETE", TEXT), ("PATCH", CHAT), ("HEAD", TEXT),
                               ("OPTIONS", CHAT), ("POST", "/health"), ("POST", "/metrics"),
                               ("DELETE", "/v1/models"), ("FOO", CHAT), ("GETT", "/health"),
                               ("TRACE", CHAT), ("CONNECT", "/health")])
    odd = method in ("FOO", "GETT", "TRACE", "CONNECT")
    return dict(method=method, path=path, body=dumps(base(True)), desc="wrong method",
                expect=None if odd else "4xx", may_close=odd)


def gen_path(rng):
    roll = rng.random()
    if roll < 0.5:
        path = rng.choice(["/v1/nope", "/v2/chat/completions", "/", "/v1/chat/completions/x", "/V1/MODELS",
                           "/v1/%00", "/v1/engines", "/v1/embeddings", "/admin", "/.env", "/v1/chat//completions"])
        return dict(method=rng.choice(["GET", "POST"]), path=path, body=b"{}", desc="unknown path", expect="4xx")
    if roll < 0.8:
        n = rng.choice([2000, 8000, 16000, 70000, 200000])
        return dict(method="GET", path="/v1/models/" + "a" * n, desc=f"path of {n} chars",
                    expect="4xx" if n <= 8000 else None, may_close=n > 8000, raw=n > 60000)
    n = rng.choice([1000, 10000, 100000])
    return dict(method="GET", path="/health?" + "a=1&" * (n // 4), desc=f"query of {n} chars",
                may_close=n > 8000, raw=n > 60000)


BAD_GRAMMARS = [
    'root ::= "a"{5,2}', r'root ::= [^\x00-\U0010FFFF]', "root ::= undefined", 'root ::= "a"\nunused ::= "b"',
    'root ::= root "a"', 'root ::= "a"{0,100000}', "root ::= []", 'root ::= "unterminated', "root ::= [a-", 'root ::= x\nx ::= y x "a" | "b"\ny ::= ""',
    'root ::= "a" root', 'root ::= "a"{100000000000000000000000}', 'root ::= (("a"{2,1000}){2,1000}){2,1000}',
    " ", "\x00", 'root ::= "\\x"', 'root ::= "\\u12"', "::=", 'root ::= ("a"',
    'root ::= "a")', 'root ::= "a"*+*', "root ::= ?", "root ::= {3}", 'root ::= "a"{-1}', 'root ::= "a"{3,}{,2}',
    r"root ::= [\U0010FFFF-\x00]", 'root ::= "\ud800"', 'root ::= "a"\nroot ::= "b"',
    "\n".join(f"r{i} ::= r{i + 1}" for i in range(2000)) + '\nr2000 ::= "a"\nroot ::= r0',
    'root ::= "' + "a" * 70000 + '"', "root ::= <[999999999]>", "root ::= <|nope|>", 'root ::= !"a"',
]
GOOD_GRAMMARS = ['root ::= "yes" | "no"', "root ::= [a-z]{1,4}", 'root ::= "a"{0,3} "b"?']
# Legal but odd (empty grammar = none, a rule matching only "", deep nesting): any non-5xx answer.
ODD_GRAMMARS = ["", "root ::=", "root ::= |", "root ::= " + "(" * 5000 + '"a"' + ")" * 5000,
                "root ::= " + "(" * 30000 + '"a"' + ")" * 30000, "root ::= " + '"a" ' * 15000]


def gen_grammar(rng):
    roll = rng.random()
    pool, expect = (GOOD_GRAMMARS, "2xx") if roll < 0.1 else (ODD_GRAMMARS, None) if roll < 0.2 \
        else (BAD_GRAMMARS, "4xx")
    g = rng.choice(pool)
    body = {**base(rng.random() < 0.5), "grammar": g}
    return json_case(CHAT if "messages" in body else TEXT, body, f"grammar={_short(g, 50)}", expect)


def _schema(s):
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}


BAD_FORMATS = [
    "json", 5, [], {"type": "nope"}, {"type": "json_schema"}, {"type": "json_schema", "json_schema": "x"},
    {"type": "json_schema", "json_schema": {"schema": 5}}, _schema({"type": "nope"}), _schema({"$ref": "#"}),
    _schema({"$ref": "#/definitions/a", "definitions": {"a": {"$ref": "#/definitions/a"}}}),
    _schema({"enum": list(range(20000))}), _schema({"type": "string", "minLength": 100000}),
    _schema({"type": "array", "minItems": 1000000}), _schema({"type": "string", "pattern": "(((("}),
    _schema({"type": "string", "pattern": "a{1000000}"}), _schema({"$ref": "http://evil.example/x.json"}),
    _schema({"$ref": "file:///etc/passwd"}), _schema({"type": "integer", "minimum": 10, "maximum": 1}),
    _schema({"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(3000)},
             "required": [f"p{i}" for i in range(3000)]}),
    _schema({"not": {}}), _schema({"type": ["string", 5]}), _schema({"properties": 5}),
    _schema({"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}, "required": ["a"]}),
]
GOOD_FORMATS = [{"type": "json_object"}, _schema({"type": "object", "properties": {"a": {"type": "integer"}}})]


def gen_schema(rng):
    good = rng.random() < 0.1
    fmt = rng.choice(GOOD_FORMATS if good else BAD_FORMATS)
    return json_case(CHAT, {**base(True), "response_format": fmt}, f"response_format={_short(fmt, 60)}",
                     "2xx" if good else None)


def gen_tokens(rng):
    prompt, expect = rng.choice([
        ([-1], "4xx"), ([10**9], "4xx"), ([2**31], "4xx"), ([2**63], "4xx"), ([2**64], "4xx"), ([-2**63], "4xx"),
        ([1, 2, -5], "4xx"), ([[-1]], "4xx"), ([[1, 2], [10**9]], "4xx"), ([0] * 5000, "4xx"), ([[]], "4xx"),
        ([], "4xx"), ([1.5], "4xx"), ([1, "a"], "4xx"), ([True], None), ([1, 2, 3], "2xx"), ([[1], [2]], "2xx"),
        (["hi"] * 100, None), ([[1]] * 100, None), (["hi", 5], "4xx"), ({"a": 1}, "4xx"), (None, "4xx"),
    ])
    body = {"prompt": prompt, "max_tokens": 2}
    if rng.random() < 0.3:
        body.update(echo=True, logprobs=rng.choice([0, 5]))
    return json_case(TEXT, body, f"prompt={_short(prompt, 50)}", expect)


def gen_logit_bias(rng):
    bias = rng.choice([{"-1": 100}, {"99999999999": 5}, {"abc": 1}, {"1": "x"}, {"1": Raw("NaN")},
                       {"1": 1e308}, [1, 2], "x", {str(i): 100 for i in range(5000)}, {"": None}])
    chat = rng.random() < 0.5
    return json_case(CHAT if chat else TEXT, {**base(chat), "logit_bias": bias}, f"logit_bias={_short(bias)}")


def gen_stop(rng):
    stop, expect = rng.choice([(["x"] * 5, "4xx"), (["x"] * 1000, "4xx"), ("a" * 257, "4xx"), ([""], "2xx"),
                               ([None], "4xx"), ([5], "4xx"), ([["x"]], "4xx"), ("", "2xx"), (["\x00"], "2xx")])
    chat = rng.random() < 0.5
    return json_case(CHAT if chat else TEXT, {**base(chat), "stop": stop}, f"stop={_short(stop)}", expect)


def gen_messages(rng):
    msgs, expect = rng.choice([
        ([], "4xx"), ({}, "4xx"), ("hi", "4xx"), ([{}], "4xx"), ([{"role": "wizard", "content": "x"}], "4xx"),
        ([{"role": "user", "content": 5}], "4xx"), ([{"role": "user", "content": {"text": "x"}}], "4xx"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]}], "4xx"),
        ([{"role": "user", "content": [{"type": "text"}]}], "4xx"), ([None], "4xx"), ([["user", "hi"]], "4xx"),
        ([{"role": "user", "content": [{"type": "text", "text": 5}]}], "4xx"), ([{"content": "x"}], "4xx"),
        ([{"role": "user"}], None), ([{"role": "user", "content": None}], None),
        ([{"role": "tool", "content": "x"}], None), ([{"role": "assistant", "content": "x"}], None),
        ([{"role": "system", "content": "x"}], None), ([{"role": "user", "content": "hi"}] * 2000, None),
        ([{"role": "user", "content": "x", "name": 5}], "4xx"), ([{"role": "user", "content": []}], None),
    ])
    body = {"messages": msgs, "max_tokens": 4}
    return json_case(CHAT, body, f"messages={_short(msgs)}", expect)


def gen_headers(rng):
    if rng.random() < 0.5:
        n = rng.choice([100, 500, 2000])
        headers = {f"X-Junk-{i}": "v" * 50 for i in range(n)}
        desc = f"{n} extra headers"
    else:
        size = rng.choice([8 << 10, 64 << 10, 256 << 10])
        headers = {"X-Huge": "h" * size}
        desc = f"one header of {size >> 10} KiB"
    return dict(path=CHAT, body=dumps(base(True)), headers=headers, desc=desc, may_close=True)


def gen_nesting(rng):
    d = rng.choice([1000, 10_000, 100_000])
    where = rng.choice(["top", "stop", "messages[0].content", "logit_bias"])
    nested = Raw("[" * d + "]" * d) if rng.random() < 0.5 else Raw('{"a":' * d + "1" + "}" * d)
    body = base(True)
    if where == "top":
        return dict(body=nested.text.encode(), desc=f"body nested {d} deep", expect="4xx")
    if where == "messages[0].content":
        body["messages"][0]["content"] = nested
    else:
        body[where] = nested
    return json_case(CHAT, body, f"{where} nested {d} deep", "4xx" if where != "logit_bias" else None)


def gen_raw_numbers(rng):
    name = rng.choice(["temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty",
                       "repeat_penalty", "max_tokens", "seed", "n", "top_k"])
    value = rng.choice([Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e999"), Raw("-0"), Raw("-0.0"),
                        Raw("1" + "0" * 5000), Raw("1e-400"), True, False])
    chat = rng.random() < 0.5
    return json_case(CHAT if chat else TEXT, {**base(chat), name: value}, f"{name}={value!r}")


def gen_valid(rng):
    chat = rng.random() < 0.5
    body = base(chat, rng.randint(1, 8))
    if rng.random() < 0.5:
        body["stream"] = True
    if rng.random() < 0.3:
        body.update(temperature=rng.choice([0, 0.7, 2]), top_k=rng.choice([0, 1, 40]), seed=rng.randint(0, 99))
    if rng.random() < 0.2:
        body["n"] = rng.randint(1, 3)
    if rng.random() < 0.2:
        body.update(logprobs=True, top_logprobs=3) if chat else body.update(logprobs=3, echo=True)
    return json_case(CHAT if chat else TEXT, body, f"valid {_short(body, 80)}", "2xx")


GENERATORS = [  # (weight, generator)
    (28, gen_types), (8, gen_limits), (4, gen_huge), (8, gen_unicode), (3, gen_bad_utf8), (4, gen_truncated),
    (3, gen_non_object), (2, gen_empty), (3, gen_content_type), (3, gen_method), (3, gen_path),
    (8, gen_grammar), (4, gen_schema), (4, gen_tokens), (2, gen_logit_bias), (2, gen_stop), (5, gen_messages),
    (1, gen_headers), (1, gen_nesting), (3, gen_raw_numbers), (6, gen_valid),
]


def generators(routes: str) -> list:
    """openai: the OpenAI routes' cases; agents: Anthropic's, Responses, infill and the token
    utilities (fuzz_agents); all: both."""
    from .fuzz_agents import gen_agent_route

    agents = [(40, gen_agent_route)]
    return {"openai": GENERATORS, "agents": agents, "all": GENERATORS + agents}[routes]


def make_case(seed: int, index: int, routes: str = "openai") -> Case:
    rng = random.Random(f"{seed}:{index}")
    weights, gens = zip(*generators(routes))
    gen = rng.choices(gens, weights)[0]
    return Case(index=index, kind=gen.__name__.removeprefix("gen_"), **gen(rng))


def cases(seed: int, n: int, routes: str = "openai"):
    for i in range(n):
        yield make_case(seed, i, routes)
