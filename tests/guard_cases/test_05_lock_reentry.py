"""The rules service (kata 05), tested as its team would: the store on its own, and an upload through the app."""
import threading

from fastapi.testclient import TestClient

from conftest import submodule

# The bug: store.update() holds the module's threading.Lock (through guard()) and calls load() and
# save(), which take the same non-reentrant lock again: the thread waits for itself, for good.
BUG = [("store.py", "update"), ("store.py", "guard"), ("store.py", "load"), ("store.py", "save")]

RULES = b"# cost_center,account,share\nR&D,6100,0.6\nR&D,6200,0.4\nSales,6100,1.0\n"


def test_update_reads_changes_and_writes_the_document(kata, tmp_path):
    """store.update() applies a change to the document on disk, and load() reads it back (within 5 s)."""
    store = submodule(kata, "store")
    path = tmp_path / "rules.json"
    done = []
    worker = threading.Thread(target=lambda: done.append(store.update(path, lambda doc: doc.update(uploads=1))),
                              daemon=True)
    worker.start()
    worker.join(5)
    assert done == [{"uploads": 1}], "store.update() did not return within 5 s"
    assert store.load(path) == {"uploads": 1}


def test_an_uploaded_rules_file_is_summarized_and_saved(kata, tmp_path):
    """POST /rules with a rules file: the answer counts its rules, the document keeps its summary, /health is ok."""
    app = submodule(kata, "app")
    path = tmp_path / "rules.json"
    client = TestClient(app.create_app(path))
    response = client.post("/rules", files={"file": ("q3.csv", RULES, "text/csv")})
    assert response.status_code == 200, response.text
    assert response.json() == {"file": "q3.csv", "rules": 3, "uploads": 1}
    assert submodule(kata, "store").load(path)["rule_sets"]["q3.csv"]["shares"] == {"R&D": 1.0, "Sales": 1.0}
    assert client.get("/health").json() == {"status": "ok"}
