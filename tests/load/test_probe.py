"""The capability probe's decisions, without a server: what a refusal drops, the method the capabilities
choose, the request body that follows, and a short answer that could not be forbidden (not a wrong length).
The probe against real servers' recordings: tests/testing/test_recordings.py."""

from __future__ import annotations

import json

import pytest

from tokenbench.client.parse import parse_exchange
from tokenbench.client.records import RawExchange
from tokenbench.client.request import Prompt, RequestOptions, prepare
from tokenbench.load.probe import _Ask, assumed
from tokenbench.spec.server_kinds import KINDS, Capabilities
from tokenbench.spec.study import StudySpec
from tokenbench.study.cells import request_options


def ask() -> _Ask:
    return _Ask("completions", "m", token_ids=True)


def test_a_refusal_names_the_fields_it_quotes():
    a = ask()
    assert sorted(a.named("{\"detail\":\"Unexpected fields in the request: {'min_tokens', 'ignore_eos'}\"}")) == \
        ["ignore_eos", "min_tokens"]
    assert a.named('{"detail":"prompt must be a string."}') == ["prompt"]
    assert a.named("bad request") == []


def test_leaving_out_a_part_changes_only_that_part_of_the_body():
    a = ask()
    a.put("min_tokens", False)
    a.put("ignore_eos", False)
    assert "ignore_eos" not in a.body() and "min_tokens" not in a.body() and a.body()["prompt"] == [1000, 1001,
                                                                                                     1002, 1003]
    a.put("prompt", False)
    assert isinstance(a.body()["prompt"], str) and "stream_options" in a.body()
    a.put("stream_options", False)
    assert a.body().keys() == {"model", "max_tokens", "temperature", "stream", "prompt"} and a.optional() == []
    a.put("stream_options", True)
    assert a.body()["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("eos,minimum,method", [(True, True, "ignore_eos+min_tokens"), (True, False, "ignore_eos"),
                                                 (False, True, "min_tokens"), (False, False, "max_tokens"),
                                                 (None, None, "ignore_eos+min_tokens")])
def test_the_strongest_exact_method_the_server_allows(eos, minimum, method):
    caps = Capabilities(ignore_eos=eos, min_tokens=minimum)
    assert caps.length_method == method and caps.exact == (method != "max_tokens")
    assert ("exact by" in caps.method_line()) == caps.exact


def spec(**target) -> StudySpec:
    return StudySpec.model_validate({"target": {"base_url": "http://h:1", **target}, "pairs": [[8, 4]],
                                     "concurrency": [1]})


def body(options: RequestOptions, ids: bool = True) -> dict:
    prompt = Prompt(token_ids=(1, 2, 3) if ids else None, text=None if ids else "a b c", input_len=3, output_len=4,
                    expected_prompt_tokens=3)
    return json.loads(prepare("http://h:1", "completions", "m", prompt, None, options).body)


def test_refused_fields_are_left_out_of_every_request_and_lengths_are_then_not_forced():
    caps = Capabilities(ignore_eos=False, min_tokens=False, token_ids=False, dropped=["ignore_eos", "min_tokens"])
    options = request_options(spec(), caps=caps)
    sent = body(options, ids=False)
    assert "ignore_eos" not in sent and "min_tokens" not in sent and sent["max_tokens"] == 4
    assert not options.exact
    assert body(request_options(spec(), caps=Capabilities()))["ignore_eos"] is True


def test_no_ignore_eos_leaves_it_out_and_min_tokens_still_forces_the_length():
    options = request_options(spec(no_ignore_eos=True), caps=Capabilities())
    sent = body(options)
    assert "ignore_eos" not in sent and sent["min_tokens"] == 4 and options.exact


def test_a_refused_continuous_usage_asks_for_the_final_usage_only():
    caps = Capabilities(dropped=["continuous_usage_stats"])
    assert body(request_options(spec(), caps=caps))["stream_options"] == {"include_usage": True}
    assert "stream_options" not in body(request_options(spec(), caps=Capabilities(stream_options=False)))


def _answer(tokens: int, finish: str) -> RawExchange:
    events = [{"choices": [{"index": 0, "text": f" w{i}"}]} for i in range(tokens)]
    events.append({"choices": [{"index": 0, "text": "", "finish_reason": finish}],
                   "usage": {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": 3 + tokens}})
    chunks = [(1000 * (i + 1), f"data: {json.dumps(e)}\n\n".encode()) for i, e in enumerate(events)]
    return RawExchange(intended_ns=0, sent_ns=1, end_ns=10**6, status=200, chunks=chunks)


@pytest.mark.parametrize("exact", [True, False])
def test_a_short_answer_is_a_wrong_length_only_where_the_length_was_forced(exact):
    options = RequestOptions(ignore_eos=exact, min_tokens=exact)
    req = prepare("http://h:1", "completions", "m", Prompt(token_ids=(1, 2, 3), text=None, input_len=3, output_len=16,
                                                           expected_prompt_tokens=3), None, options)
    rec = parse_exchange(_answer(9, "stop"), req, 0, "measure")
    assert rec.ok and rec.output_tokens == 9
    assert bool(rec.length_error) == exact


def test_a_longer_answer_is_a_wrong_length_either_way():
    req = prepare("http://h:1", "completions", "m", Prompt(token_ids=(1, 2, 3), text=None, input_len=3, output_len=4,
                                                           expected_prompt_tokens=3), None,
                  RequestOptions(ignore_eos=False, min_tokens=False))
    assert parse_exchange(_answer(6, "length"), req, 0, "measure").length_error


def test_without_the_probe_a_kind_is_taken_as_known_and_an_engine_tokenbench_reads_as_accepting_everything():
    target = spec(backend="tgi", no_probe=True).target
    assert assumed(target, "completions") == KINDS["tgi"].known
    assert assumed(target, "completions", "vllm").length_method == "ignore_eos+min_tokens"
    assert assumed(spec().target, "chat").prompt_method == "chat messages"
