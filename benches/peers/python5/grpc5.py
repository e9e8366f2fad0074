"""Apache RocketMQ 5's Python gRPC client (``rocketmq-python-client``), run in its own venv by
``benches/peers/python5.py``: one line of JSON per command.

    send ENDPOINT TOPIC DELAY_MS     {"message_id": ..., "delivery_ms": ..., "recall_handle": ...}
    recall ENDPOINT TOPIC HANDLE     {"message_id": ...} or {"error": "..."}
"""

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer


def main() -> None:
    command, endpoint, topic = sys.argv[1:4]
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    producer.startup()
    try:
        if command == "send":
            msg = Message()
            msg.topic = topic
            msg.body = b"python-grpc"
            # The client takes whole epoch seconds (the protobuf Timestamp's), whatever its
            # docstring says: the next whole second at or after the delay.
            seconds = -(-(int(time.time() * 1000) + int(sys.argv[4])) // 1000)
            msg.delivery_timestamp = seconds
            due = seconds * 1000
            receipt = producer.send(msg)
            handle = getattr(receipt, "recall_handle", None)
            out = {"message_id": receipt.message_id, "delivery_ms": due, "recall_handle": handle}
        else:
            try:
                result = producer.recall_message(topic, sys.argv[4])
                out = {"message_id": getattr(result, "message_id", str(result))}
            except Exception as e:
                out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)
    finally:
        producer.shutdown()


if __name__ == "__main__":
    main()
