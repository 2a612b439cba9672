import pytest

from tests.gpu.sharding import in_shard, parse_shard


def test_shards_cover_every_test_once():
    n = 3
    owners = [[i for i in range(1, n + 1) if in_shard(index, parse_shard(f"{i}/{n}"))] for index in range(10)]
    assert all(len(o) == 1 for o in owners)
    assert [o[0] for o in owners] == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]


@pytest.mark.parametrize("spec", ["2", "0/2", "3/2", "a/b", "1/2/3"])
def test_bad_shard_specs_name_the_variable(spec):
    with pytest.raises(ValueError, match="TLX_GPU_SHARD must be 'i/n'"):
        parse_shard(spec)
