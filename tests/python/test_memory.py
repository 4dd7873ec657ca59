"""Memory a node gives back: after FLUSHALL its resident set falls by most
of what the keys took (the partition maps let go of their room and the
allocator's free pages go back to the system), and `used_memory` falls to
about where it started. A real server process, loaded through redis-py."""
import pytest
import redis

from helpers_wan import rss_bytes

pytestmark = pytest.mark.deltagrid_only


def test_flushall_gives_the_memory_back(server):
    r = redis.Redis(host=server.host, port=server.port)
    base, base_used = rss_bytes(server), r.info("memory")["used_memory"]
    p = r.pipeline(transaction=False)
    for i in range(100_000):
        p.set(f"key:{i:012d}", "x" * 50)
        if i % 5_000 == 4_999:
            p.execute()
    for i in range(5_000):
        p.hset(f"h:{i}", mapping={f"field{j}": "v" * 10 for j in range(5)})
    p.execute()
    assert r.dbsize() == 105_000
    loaded, loaded_used = rss_bytes(server), r.info("memory")["used_memory"]
    assert loaded - base > 10 << 20, (base, loaded)

    assert r.flushall()
    assert r.dbsize() == 0
    after, after_used = rss_bytes(server), r.info("memory")["used_memory"]
    assert loaded - after >= (loaded - base) / 2, (base >> 20, loaded >> 20, after >> 20)
    # What the keys took is counted as freed (the logs of their deletes,
    # bounded by their budget, may stay).
    assert after_used - base_used < (loaded_used - base_used) / 4, (base_used, loaded_used, after_used)
    assert r.memory_purge()
