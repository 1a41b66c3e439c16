"""What the admin API reads from requests (web/inputs.py): each wrong value is refused with
its field named and no Python wording; right values come through typed."""

from __future__ import annotations

import pytest

from dovecote.core.destinations import queue, topic
from dovecote.web import inputs


def test_send_options_typed_from_a_query_string() -> None:
    options = inputs.send_options({
        "persistent": "false", "priority": "9", "delay": "1500", "timeToLive": "60000",
        "correlationId": "c-1", "type": "order", "replyTo": "answers",
        "properties": '{"region": "eu", "n": 2, "ok": true, "share": 0.5}',
    })  # fmt: skip
    assert (options.persistent, options.priority, options.delay_ms) == (False, 9, 1500)
    assert options.time_to_live_ms == 60000 and options.reply_to == queue("answers")
    assert options.properties == {"region": "eu", "n": 2, "ok": True, "share": 0.5}
    assert inputs.send_options({}) == inputs.SendOptions()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"priority": "99"}, "priority: 99 is not a whole number from 0 to 9"),
        ({"priority": "abc"}, "priority: 'abc' is not a whole number from 0 to 9"),
        ({"priority": "-1"}, "priority: -1 is not a whole number from 0 to 9"),
        ({"persistent": "maybe"}, "persistent: 'maybe' is not true or false"),
        ({"delay": "1.5"}, "delay: '1.5' is not a whole number"),
        ({"properties": "{"}, "properties: not a JSON object"),
        ({"properties": "[1]"}, "properties: not a JSON object"),
        ({"properties": '{"a": [1]}'}, "properties: 'a' must be a string, number or boolean"),
        ({"properties": '{"a": NaN}'}, "properties: 'a' is not a finite number"),
    ],
)
def test_a_wrong_send_option_names_its_field(params: dict[str, str], message: str) -> None:
    with pytest.raises(inputs.BadInput) as refused:
        inputs.send_options(params)
    assert str(refused.value).startswith(message)


def test_destinations_and_chosen_messages_in_a_body() -> None:
    assert inputs.destination("to", "topic", " news ") == topic("news")
    with pytest.raises(inputs.BadInput, match=r"^to_type: 'things' is not queue or topic"):
        inputs.destination("to", "things", "x")
    with pytest.raises(inputs.BadInput, match=r"^to: a destination name is needed"):
        inputs.destination("to", "queue", 5)
    assert inputs.message_ids({}, required=False) is None
    assert inputs.message_ids({"messages": ["a"]}, required=True) == ["a"]
    with pytest.raises(inputs.BadInput, match=r"^messages: a list of message ids is needed"):
        inputs.message_ids({}, required=True)
    with pytest.raises(inputs.BadInput, match=r"^messages: not a list"):
        inputs.message_ids({"messages": [1]}, required=False)
    with pytest.raises(inputs.BadInput, match=r"^body: not JSON"):
        inputs.json_object(b"{nope")
    assert inputs.json_object(b"  ") == {}
