"""The baseline of the Azure client benchmark: the same operations through Microsoft's
Python SDK (azure-data-tables) against the same Azurite. Prints one JSON object of
operations per second. Run by core/benches/azure_vs_python.rs."""

import json
import sys
import time

from azure.data.tables import TableServiceClient, UpdateMode

CONNECTION = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;"
)


def main():
    table_name, gets, upserts, batches, queries = sys.argv[1], *map(int, sys.argv[2:6])
    service = TableServiceClient.from_connection_string(CONNECTION)
    table = service.get_table_client(table_name)
    rates = {}

    started = time.perf_counter()
    for _ in range(gets):
        table.get_entity("query", "r000500")
    rates["point get"] = gets / (time.perf_counter() - started)

    started = time.perf_counter()
    for i in range(upserts):
        table.upsert_entity({"PartitionKey": "upsert", "RowKey": f"r{i:06d}", "N": i, "Name": "python"},
                            mode=UpdateMode.REPLACE)
    rates["upsert"] = upserts / (time.perf_counter() - started)

    started = time.perf_counter()
    for b in range(batches):
        ops = [("upsert", {"PartitionKey": f"batch{b}", "RowKey": f"r{i:03d}", "N": i, "Name": "python"},
                {"mode": UpdateMode.REPLACE}) for i in range(100)]
        table.submit_transaction(ops)
    rates["100-op batch"] = batches / (time.perf_counter() - started)

    started = time.perf_counter()
    for _ in range(queries):
        rows = list(table.query_entities("PartitionKey eq 'query'", results_per_page=1000))
        assert len(rows) == 1000, len(rows)
    rates["1,000-entity query"] = queries / (time.perf_counter() - started)

    print(json.dumps(rates))


if __name__ == "__main__":
    main()
