"""The baseline an Azure user would write with the Python SDK (azure-storage-queue): send N
messages, then receive them 32 at a time and delete each. Prints {"rate": messages/s}.

    python azure_queue_python_baseline.py CONNECTION-STRING QUEUE N
"""

import json
import sys
import time

from azure.storage.queue import QueueClient


def main() -> None:
    connection, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    queue = QueueClient.from_connection_string(connection, name)
    queue.create_queue()
    try:
        started = time.perf_counter()
        for i in range(n):
            queue.send_message(json.dumps({"i": i}))
        done = 0
        while done < n:
            for message in queue.receive_messages(messages_per_page=32, visibility_timeout=60):
                queue.delete_message(message)
                done += 1
        elapsed = time.perf_counter() - started
    finally:
        queue.delete_queue()
    print(json.dumps({"rate": n / elapsed}))


if __name__ == "__main__":
    main()
