"""The one-entry launch cache: hits only on an equal key, and threads never get each other's launch."""
import threading

from tlx.kernels.launch_cache import LaunchCache


def test_hit_miss_and_failed_build():
    cache, builds = LaunchCache(), []
    assert cache.get(("a",), lambda: builds.append("a") or "A") == "A"
    assert cache.get(("a",), lambda: builds.append("a2") or "A2") == "A"
    assert cache.get(("b",), lambda: builds.append("b") or "B") == "B"
    try:
        cache.get(("c",), lambda: 1 / 0)
    except ZeroDivisionError:
        pass
    assert cache.get(("b",), lambda: "B2") == "B" and builds == ["a", "b"]


def test_threads_get_their_own_launch():
    cache, wrong = LaunchCache(), []

    def worker(name):
        for _ in range(2000):
            if cache.get((name,), lambda: name) != name:
                wrong.append(name)
    threads = [threading.Thread(target=worker, args=(n,)) for n in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
