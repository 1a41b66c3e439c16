"""What a consumer's local redelivery needs (ActiveMQMessageConsumer, RedeliveryPolicy):
the redelivery counters, the next delay, the text of a poison ack's cause."""

from __future__ import annotations

from dovecote.client.options import RedeliveryPolicy
from dovecote.protocol.openwire import Structure


def message_key(dispatch: Structure) -> str:
    mid = dispatch["message"]["messageId"]
    return f"{mid['producerId']}:{mid['producerSequenceId']}"


def rolled_back(dispatch: Structure) -> None:
    dispatch.fields["redeliveryCounter"] = (dispatch.get("redeliveryCounter", 0) or 0) + 1
    message = dispatch["message"]
    message.fields["redeliveryCounter"] = (message.get("redeliveryCounter", 0) or 0) + 1


def next_delay(policy: RedeliveryPolicy, previous: int) -> int:
    """RedeliveryPolicy.getNextRedeliveryDelay: the fixed delay, or the previous one times
    the multiplier under exponential back-off (capped by maximumRedeliveryDelay)."""
    delay = policy.redeliveryDelay
    if previous > 0 and policy.useExponentialBackOff and policy.backOffMultiplier > 1:
        delay = int(previous * policy.backOffMultiplier)
        if policy.maximumRedeliveryDelay != -1 and delay > policy.maximumRedeliveryDelay:
            delay = max(policy.maximumRedeliveryDelay, policy.redeliveryDelay)
    return int(delay)


def counter(dispatch: Structure) -> int:
    return int(dispatch["message"].get("redeliveryCounter", 0) or 0)


def consumer_text(cid: Structure) -> str:
    return f"{cid['connectionId']}:{cid['sessionId']}:{cid['value']}"


def policy_text(policy: RedeliveryPolicy) -> str:
    """RedeliveryPolicy's toString (IntrospectionSupport's "Name {field = value, ...}")."""
    fields = ", ".join(f"{k} = {v}" for k, v in sorted(vars(policy).items()))
    return f"RedeliveryPolicy {{{fields}}}"
