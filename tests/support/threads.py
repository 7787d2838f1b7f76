"""Threads working on one database while another maintains it (sync, compact, refresh).

Each worker keeps a model of the keys it wrote, which are its own: once
the threads are done, the database must hold every model's items.
"""

import queue
import threading


def run_beside_a_maintainer(work, maintain, workers=4):
    """Run ``work(number)`` in ``workers`` threads while ``maintain()`` runs again and again in
    one more, until they are done; return the exceptions any of them raised (each thread
    stops at its first)."""
    errors = []
    stop = threading.Event()

    def guarded(function, *args):
        try:
            function(*args)
        except BaseException as exc:
            errors.append(exc)

    def maintainer():
        while not stop.is_set():
            maintain()
            stop.wait(0.001)  # a moment for the workers: a lock is no queue

    threads = [threading.Thread(target=guarded, args=(work, n)) for n in range(workers)]
    helper = threading.Thread(target=guarded, args=(maintainer,))
    helper.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    helper.join()
    return errors


def check_models_stored(dbopen, dbpath, database, models):
    """The database holds the items of the threads' ``models`` (keys of their own), also once
    closed and opened again with every checksum read."""
    expected = {key: value for model in models for key, value in model.items()}
    assert dict(database.items()) == expected
    database.close()
    with dbopen(dbpath, verify_checksums=True) as again:
        assert dict(again.items()) == expected


class Worker:
    """A thread that runs the calls it is given, one at a time, and stays alive between them."""

    def __init__(self):
        self._calls, self._results = queue.Queue(), queue.Queue()
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()

    def _serve(self):
        for call in iter(self._calls.get, None):
            try:
                self._results.put((call(), None))
            except BaseException as exc:
                self._results.put((None, exc))

    def run(self, call):
        """Run ``call()`` in the thread: its result, or the exception it raised, raised here."""
        self._calls.put(call)
        result, error = self._results.get(timeout=60)
        if error is not None:
            raise error
        return result

    def stop(self):
        self._calls.put(None)
        self.thread.join()
